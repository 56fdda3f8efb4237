"""Kafka's configuration formats: Java .properties files and JAAS entries."""
from __future__ import annotations

import pytest

from kafkawire.broker.properties import parse_properties
from kafkawire.broker.security.jaas import parse_jaas, plain_users


def test_properties_as_java_reads_them():
    text = r"""
# a comment
! another
listeners=PLAINTEXT://:9092,SASL_SSL://:9093
num.partitions : 4
log.dirs /tmp/kafka-logs
long.value=first,\
    second
escaped\=key=a\tb\u0041
empty=
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    user_alice="alice-secret";
"""
    assert parse_properties(text) == {
        "listeners": "PLAINTEXT://:9092,SASL_SSL://:9093", "num.partitions": "4", "log.dirs": "/tmp/kafka-logs",
        "long.value": "first,second", "escaped=key": "a\tbA", "empty": "",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'}


def test_jaas_entries():
    entry = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                       'password="admin-secret" user_admin="admin-secret" user_alice="a\\"lice";')
    assert entry.module == "org.apache.kafka.common.security.plain.PlainLoginModule" and entry.flag == "required"
    assert plain_users(entry) == {"admin": "admin-secret", "alice": 'a"lice'}
    assert parse_jaas("org.apache.kafka.common.security.scram.ScramLoginModule required;").options == {}
    unsecured = parse_jaas("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                           "unsecuredLoginStringClaim_sub=alice;")
    assert unsecured.options == {"unsecuredLoginStringClaim_sub": "alice"}
    for bad in ("Module required user_a=1", "Module user_a=1;", "Module required a=1; Other required;", ";",
                'Module required a="1" b;'):
        with pytest.raises(ValueError):
            parse_jaas(bad)

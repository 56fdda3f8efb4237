"""Kafka's configuration formats: Java .properties files and JAAS entries."""
from __future__ import annotations

import pytest

from kafkawire.broker.config.properties import parse_properties
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


# ---- TLS ----------------------------------------------------------------------------------------------------------

def test_tls_context_client_certificate_and_principal(tmp_path):
    import socket
    import ssl
    import threading

    import trustme

    from kafkawire.broker.security.tls import PrincipalMapper, server_context, subject_dn

    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1", "localhost")
    client_cert = ca.issue_cert("alice@example", common_name="alice", organization_name="Example, Inc",
                                organization_unit_name="ServiceUsers")
    server_cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    context = server_context({"ssl.keystore.location": str(tmp_path / "server.pem"),
                              "ssl.truststore.location": str(tmp_path / "ca.pem"), "ssl.client.auth": "required"})
    listener = socket.create_server(("127.0.0.1", 0))
    seen = {}

    def serve():
        connection, _ = listener.accept()
        with context.wrap_socket(connection, server_side=True) as tls:
            seen["dn"] = subject_dn(tls.getpeercert())
            tls.sendall(b"ok")
    thread = threading.Thread(target=serve)
    thread.start()
    client_context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    client_cert.configure_cert(client_context)
    with socket.create_connection(listener.getsockname()) as raw, \
            client_context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert tls.recv(2) == b"ok"
    thread.join(5)
    listener.close()
    assert seen["dn"] == "CN=alice,OU=ServiceUsers,O=Example\\, Inc"
    rules = PrincipalMapper(r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U, RULE:^CN=([^,]*).*$/$1@other/, DEFAULT")
    assert rules.name(seen["dn"]) == "ALICE"
    assert rules.name("CN=bob,O=x") == "bob@other"
    assert PrincipalMapper("DEFAULT").name("CN=x") == "CN=x"
    with pytest.raises(ValueError, match="No rules apply"):
        PrincipalMapper(r"RULE:^CN=z$/z/").name("CN=x")
    with pytest.raises(ValueError, match="ssl.client.auth"):
        server_context({"ssl.keystore.location": str(tmp_path / "server.pem"), "ssl.client.auth": "maybe"})
    with pytest.raises(ValueError, match="ssl.keystore.location"):
        server_context({"ssl.keystore.location": str(tmp_path / "missing.pem")})

"""The client's security without a broker: its settings under Kafka's names (core.security_config), the
SASL exchanges of core.sasl_client run against the broker's side of the same mechanisms
(kafkawire.sasl's ScramServer, PLAIN parser and OAUTHBEARER validator), the OAUTHBEARER token sources,
KIP-368's re-authentication schedule, and the TLS context (aio.tls) built from certificates made by
trustme.
"""
from __future__ import annotations

import base64
import random
import ssl

import pytest
import trustme

from kafkawire.client.aio.tls import client_context
from kafkawire.client.core.consumer.config import ConsumerConfig
from kafkawire.client.core.producer.config import ProducerConfig
from kafkawire.client.core.sasl_client import (
    OAuthBearerExchange, OAuthBearerTokens, UnsecuredTokenSettings, reauthentication_delay_ms,
)
from kafkawire.client.errors import ConfigError
from kafkawire.sasl import SaslError
from kafkawire.sasl.oauthbearer import (
    ERROR_CHALLENGE, parse_client_initial_response, unsecured_token, validate_unsecured_token,
)
from kafkawire.sasl.plain import parse_plain
from kafkawire.sasl.scram import MECHANISMS as SCRAM, ScramServer

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="a;b\\"c";'
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="bob-secret";'


# ---- settings ------------------------------------------------------------------------------------

def test_defaults_are_kafkas():
    config = ProducerConfig()
    assert config.security_protocol == "PLAINTEXT" and not config.uses_tls and not config.uses_sasl
    assert config.ssl_endpoint_identification_algorithm == "https"  # host names checked (Kafka 2.0+)
    assert config.sasl_mechanism == "GSSAPI"  # Kafka's default, refused only where SASL is used
    assert config.ssl_enabled_protocols == ("TLSv1.2", "TLSv1.3") and config.enable_ssl_certificate_verification


def test_dotted_names_with_string_values_and_any_case():
    config = ConsumerConfig.from_properties({
        "security.protocol": "sasl_ssl", "sasl.mechanism": "scram-sha-512", "sasl.username": "bob",
        "sasl.password": "bob-secret", "ssl.ca.location": "/ca.pem", "ssl.endpoint.identification.algorithm": "",
        "ssl.enabled.protocols": "TLSv1.3", "enable.ssl.certificate.verification": "true"})
    assert (config.security_protocol, config.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert config.uses_tls and config.uses_sasl and config.sasl_user == "bob"
    assert config.trusted_certificates == ("ssl.ca.location", "/ca.pem")
    assert config.ssl_endpoint_identification_algorithm == "" and config.ssl_enabled_protocols == ("TLSv1.3",)
    # librdkafka's "none" is the same as Java's empty value
    assert ProducerConfig(ssl_endpoint_identification_algorithm="none").ssl_endpoint_identification_algorithm == ""


def test_java_pem_store_names():
    config = ProducerConfig.from_properties({"security.protocol": "SSL", "ssl.truststore.type": "pem",
                                             "ssl.truststore.location": "/ca.pem", "ssl.keystore.type": "PEM",
                                             "ssl.keystore.location": "/me.pem", "ssl.key.password": "k"})
    assert config.trusted_certificates == ("ssl.truststore.location", "/ca.pem")
    assert config.client_certificate == ("ssl.keystore.location", "/me.pem", None)


def test_sasl_jaas_config_gives_the_user():
    config = ProducerConfig(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_jaas_config=PLAIN_JAAS)
    assert parse_plain(config.sasl_exchanges()().first()) == ("alice", 'a;b"c')


def test_secrets_stay_out_of_the_repr():
    config = ProducerConfig(security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="alice",
                            sasl_password="alice-secret", ssl_key_password="key-secret")
    assert "alice-secret" not in repr(config) and "key-secret" not in repr(config) and "alice" in repr(config)
    assert ProducerConfig(oauth_cb=print).to_properties()["oauth_cb"] is print  # confluent-kafka's name


@pytest.mark.parametrize("properties, names", [
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"security.protocol": "SASL_SSL"}, "GSSAPI"),  # Kafka's default mechanism: Kerberos is not supported
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "alice"}, "sasl.password"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": PLAIN_JAAS},
     "ScramLoginModule"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "PlainLoginModule"},
     "sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "oauth_cb"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
      "enable.sasl.oauthbearer.unsecure.jwt": "true"}, "sasl.oauthbearer.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
      "sasl.oauthbearer.config": "principal=carol colour=blue"}, "sasl.oauthbearer.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "oauth_cb": "not callable"}, "oauth_cb"),
    ({"ssl.ca.location": "/a.pem", "ssl.truststore.location": "/b.pem"}, "ssl.truststore.location"),
    ({"ssl.key.location": "/key.pem"}, "ssl.certificate.location"),
    ({"ssl.keystore.location": "/me.p12", "ssl.keystore.type": "PKCS12"}, "ssl.keystore.type"),
    ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols"),
    ({"ssl.endpoint.identification.algorithm": "ldaps"}, "ssl.endpoint.identification.algorithm"),
    ({"sasl.password": 42}, "sasl.password"),
])
def test_bad_settings_are_refused_naming_the_property(properties, names):
    for config in (ProducerConfig, ConsumerConfig):
        with pytest.raises(ConfigError, match=names):
            config.from_properties(properties)


# ---- the SASL exchanges, against the broker's side -------------------------------------------------

@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_against_the_server(mechanism):
    credential = SCRAM[mechanism].credential("bob-secret")
    server = ScramServer(SCRAM[mechanism], lambda user: credential if user == "bob" else None)
    exchange = ProducerConfig(security_protocol="SASL_SSL", sasl_mechanism=mechanism,
                              sasl_jaas_config=SCRAM_JAAS).sasl_exchanges()()
    final = exchange.step(server.first(exchange.first()))
    assert final is not None
    assert exchange.step(server.final(final)) is None  # the server's signature checked: complete
    assert server.complete and server.username == "bob"


def test_scram_exchange_refuses_a_server_signature_that_does_not_match():
    """A broker whose signature is off by one bit has not proven it holds the user's credential."""
    credential = SCRAM["SCRAM-SHA-512"].credential("bob-secret")
    server = ScramServer(SCRAM["SCRAM-SHA-512"], lambda user: credential)
    exchange = ProducerConfig(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="bob",
                              sasl_password="bob-secret").sasl_exchanges()()
    final = exchange.step(server.first(exchange.first()))
    assert final is not None
    signature = bytearray(base64.b64decode(server.final(final)[2:]))
    signature[0] ^= 1
    with pytest.raises(SaslError, match="server signature"):
        exchange.step(b"v=" + base64.b64encode(bytes(signature)))


def test_oauthbearer_unsecured_token_from_librdkafka_settings():
    config = ProducerConfig(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                            enable_sasl_oauthbearer_unsecure_jwt=True,
                            sasl_oauthbearer_config="principal=carol scope=read,write lifeSeconds=600 "
                                                    "extension_trace=42")
    token, extensions = parse_client_initial_response(config.sasl_exchanges(clock=lambda: 1_000_000.0)().first())
    validated = validate_unsecured_token(token, 1_000_000_000, required_scope=("read",))
    assert (validated.principal, validated.scope, validated.expires_ms) == ("carol", ("read", "write"), 1_000_600_000)
    assert extensions == {"trace": "42"}


def test_oauthbearer_unsecured_token_from_java_login_module_options():
    settings = UnsecuredTokenSettings.from_jaas({
        "unsecuredLoginStringClaim_sub": "dave", "unsecuredLoginListClaim_scope": ",a,b",
        "unsecuredLoginNumberClaim_tier": "3", "unsecuredLoginExtension_team": "blue",
        "unsecuredLoginLifetimeSeconds": "60"})
    validated = validate_unsecured_token(settings.token(100.0), 100_000, required_scope=("a", "b"))
    assert (validated.principal, validated.expires_ms) == ("dave", 160_000)
    assert settings.claims == {"tier": 3} and settings.extensions == {"team": "blue"}


def test_oauthbearer_refused_token_is_acknowledged_then_fails():
    exchange = OAuthBearerExchange(unsecured_token("carol", 60, issued_at_s=0))
    assert exchange.step(ERROR_CHALLENGE) == b"\x01"  # RFC 7628: the client answers the error with ^A
    with pytest.raises(SaslError, match="invalid_token"):
        exchange.step(ERROR_CHALLENGE)
    assert OAuthBearerExchange("t").step(b"") is None  # accepted


def test_token_callback_is_called_again_once_80_percent_of_the_lifetime_passed():
    calls = []

    def oauth_cb(config):
        calls.append(config)
        return unsecured_token("erin", 100, issued_at_s=now), 1000.0 + 100

    now = 1000.0
    tokens = OAuthBearerTokens(callback=oauth_cb, callback_config="scope=x")
    first = tokens.current(1000.0)
    assert tokens.current(1079.0) == first and calls == ["scope=x"]
    now = 1080.0
    assert tokens.current(1080.0) != first and len(calls) == 2


@pytest.mark.parametrize("result", [None, ("token",), ("", 10), ("token", "soon"), ("t", 10, None, "x")])
def test_token_callback_must_return_a_token_and_its_expiry(result):
    with pytest.raises(SaslError, match="oauth_cb"):
        OAuthBearerTokens(callback=lambda config: result).current(0.0)


def test_token_callback_failure_is_a_sasl_error():
    def oauth_cb(config):
        raise RuntimeError("identity provider unreachable")
    with pytest.raises(SaslError, match="identity provider unreachable"):
        OAuthBearerTokens(callback=oauth_cb).current(0.0)


def test_reauthentication_is_due_between_85_and_95_percent_of_the_session():
    rng = random.Random(7)
    delays = [reauthentication_delay_ms(10_000, rng) for _ in range(2000)]
    assert 8500 <= min(delays) < 8600 and 9400 < max(delays) <= 9500  # spread over the whole window


# ---- TLS context -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    client = ca.issue_cert("client.example.org")
    client.cert_chain_pems[0].write_to_path(str(folder / "client.crt"))
    client.private_key_pem.write_to_path(str(folder / "client.key"))
    client.private_key_and_cert_chain_pem.write_to_path(str(folder / "client.pem"))
    return folder


def test_tls_context_checks_chain_and_host_name_by_default(certificates):
    context = client_context(ProducerConfig(security_protocol="SSL", ssl_ca_location=str(certificates / "ca.pem")))
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert len(context.get_ca_certs()) == 1
    unchecked = client_context(ProducerConfig(security_protocol="SSL", ssl_ca_location=str(certificates / "ca.pem"),
                                              ssl_endpoint_identification_algorithm=""))
    assert unchecked.verify_mode == ssl.CERT_REQUIRED and not unchecked.check_hostname
    assert client_context(ProducerConfig(enable_ssl_certificate_verification=False)).verify_mode == ssl.CERT_NONE


def test_tls_context_loads_the_client_certificate_both_ways(certificates):
    client_context(ProducerConfig(ssl_certificate_location=str(certificates / "client.crt"),
                                  ssl_key_location=str(certificates / "client.key")))
    client_context(ProducerConfig(ssl_keystore_location=str(certificates / "client.pem")))


def test_tls_files_that_do_not_load_name_the_property(certificates, tmp_path):
    with pytest.raises(ConfigError, match="ssl.ca.location"):
        client_context(ProducerConfig(ssl_ca_location=str(tmp_path / "missing.pem")))
    with pytest.raises(ConfigError, match="ssl.certificate.location"):
        client_context(ProducerConfig(ssl_certificate_location=str(certificates / "ca.pem")))  # no key in it

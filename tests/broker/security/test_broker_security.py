"""TLS and SASL against real clients (issue 21): confluent-kafka over SASL_SSL with PLAIN, SCRAM-SHA-512
and OAUTHBEARER and over SSL with a client certificate; kafka-python over SASL_SSL with SCRAM-SHA-256;
aiokafka over SASL_PLAINTEXT with PLAIN and over SSL. Wrong passwords and untrusted certificates fail
fast; only ApiVersions and SASL are served before authentication; sessions re-authenticate (KIP-368);
the SASL state machine survives out-of-order steps, garbage and huge tokens."""
from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time

import pytest

from support.broker_harness import BrokerThread, RawClient
from kafkawire import messages as m
from kafkawire.broker.security import authenticator
from support.security_harness import PLAIN_USERS, SCRAM_USERS, make_certificates, plain_client, secured_config

TOPIC = "secured"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, certs):
    config = secured_config(tmp_path_factory.mktemp("secured"), certs, **{"connections.max.reauth.ms": "1500"})
    with BrokerThread(config=config) as running:
        yield running


def _address(broker, listener: str) -> str:
    return broker.broker.bootstrap_for(listener)


# ---- confluent-kafka -------------------------------------------------------------------------------------------

def _confluent_round_trip(settings: dict, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    producer = Producer({**settings, "linger.ms": 1})
    for i in range(5):
        producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**settings, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, deadline = [], time.monotonic() + 20
    while len(got) < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    return got


@pytest.mark.parametrize("listener,mechanism,extra", [
    ("SASL_SSL", "PLAIN", {"sasl.username": "alice", "sasl.password": PLAIN_USERS["alice"]}),
    ("SASL_SSL", "SCRAM-SHA-512", {"sasl.username": "scram-512", "sasl.password": SCRAM_USERS["scram-512"][1]}),
    ("SASL_SSL", "OAUTHBEARER", {"enable.sasl.oauthbearer.unsecure.jwt": True,
                                 "sasl.oauthbearer.config": "principal=carol"}),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", {"sasl.username": "scram-256",
                                         "sasl.password": SCRAM_USERS["scram-256"][1]}),
], ids=["sasl_ssl-plain", "sasl_ssl-scram512", "sasl_ssl-oauthbearer", "sasl_plaintext-scram256"])
def test_confluent_kafka_over_sasl(broker, certs, listener, mechanism, extra):
    settings = {"bootstrap.servers": _address(broker, listener), "security.protocol": listener,
                "sasl.mechanism": mechanism, "ssl.ca.location": str(certs.ca), **extra}
    topic = f"{TOPIC}-{listener}-{mechanism}".lower()
    assert _confluent_round_trip(settings, topic) == [f"{topic}-{i}".encode() for i in range(5)]


def test_confluent_kafka_over_ssl_with_a_client_certificate(broker, certs):
    settings = {"bootstrap.servers": _address(broker, "MTLS"), "security.protocol": "SSL",
                "ssl.ca.location": str(certs.ca), "ssl.certificate.location": str(certs.client_cert),
                "ssl.key.location": str(certs.client_key)}
    assert _confluent_round_trip(settings, "mtls") == [f"mtls-{i}".encode() for i in range(5)]


def _first_error(settings: dict, within: float = 5.0):
    """The first error confluent-kafka reports for a producer with ``settings``."""
    from confluent_kafka import Producer
    errors = []
    producer = Producer({**settings, "error_cb": errors.append})
    deadline = time.monotonic() + within
    while not errors and time.monotonic() < deadline:
        producer.poll(0.05)
    return errors[0] if errors else None


def test_wrong_password_and_untrusted_certificates_fail_fast(broker, certs):
    from confluent_kafka import KafkaError
    started = time.monotonic()
    error = _first_error({"bootstrap.servers": _address(broker, "SASL_SSL"), "security.protocol": "SASL_SSL",
                          "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "scram-512", "sasl.password": "nope",
                          "ssl.ca.location": str(certs.ca)})
    assert error is not None and error.code() == KafkaError._AUTHENTICATION, error
    assert "Invalid user credentials" in error.str()
    error = _first_error({"bootstrap.servers": _address(broker, "SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "wrong"})
    assert error is not None and error.code() == KafkaError._AUTHENTICATION, error
    error = _first_error({"bootstrap.servers": _address(broker, "SSL"), "security.protocol": "SSL",
                          "ssl.ca.location": str(certs.other_ca)})
    assert error is not None and error.code() in (KafkaError._SSL, KafkaError._TRANSPORT), error
    assert time.monotonic() - started < 6


def test_a_listener_requiring_client_certificates_refuses_a_client_without_one(broker, certs):
    context = ssl.create_default_context(cafile=str(certs.ca))
    host, port = _address(broker, "MTLS").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        try:
            with context.wrap_socket(raw, server_hostname=host) as tls:
                tls.sendall(b"\x00\x00\x00\x00")
                refused = tls.recv(1) == b""  # TLS 1.3 reports the refusal at the first read
        except (ssl.SSLError, ConnectionError):
            refused = True
    assert refused


# ---- kafka-python and aiokafka ---------------------------------------------------------------------------------

def test_kafka_python_over_sasl_ssl_scram_sha_256(broker, certs):
    from kafka import KafkaConsumer, KafkaProducer
    settings = dict(bootstrap_servers=_address(broker, "SASL_SSL"), security_protocol="SASL_SSL",
                    sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="scram-256",
                    sasl_plain_password=SCRAM_USERS["scram-256"][1], ssl_cafile=str(certs.ca))
    producer = KafkaProducer(**settings)
    for i in range(5):
        producer.send("kp-secured", f"kp-{i}".encode())
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer("kp-secured", auto_offset_reset="earliest", consumer_timeout_ms=10_000, **settings)
    got = [record.value for _, record in zip(range(5), consumer)]
    consumer.close()
    assert got == [f"kp-{i}".encode() for i in range(5)]


def test_aiokafka_over_sasl_plaintext_plain_and_over_ssl(broker, certs):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def round_trip(topic: str, **settings) -> list[bytes]:
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"{topic}-{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **settings)
        await consumer.start()
        try:
            got = []
            while len(got) < 5:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 15)
                got += [record.value for records in batch.values() for record in records]
            return got
        finally:
            await consumer.stop()

    plain = asyncio.run(round_trip("aio-plain", bootstrap_servers=_address(broker, "SASL_PLAINTEXT"),
                                   security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                   sasl_plain_username="bob", sasl_plain_password=PLAIN_USERS["bob"]))
    assert plain == [f"aio-plain-{i}".encode() for i in range(5)]
    tls = asyncio.run(round_trip("aio-ssl", bootstrap_servers=_address(broker, "SSL"), security_protocol="SSL",
                                 ssl_context=create_ssl_context(cafile=str(certs.ca))))
    assert tls == [f"aio-ssl-{i}".encode() for i in range(5)]


# ---- the SASL state machine ------------------------------------------------------------------------------------

def _closed(client: RawClient) -> bool:
    client.sock.settimeout(5)
    try:
        return client.sock.recv(1) == b""
    except ConnectionError:
        return True


def test_only_api_versions_and_sasl_before_authentication(broker):
    port = int(_address(broker, "SASL_PLAINTEXT").rsplit(":", 1)[1])
    with RawClient(port) as client:
        assert client.request(m.ApiVersionsRequest(), 3).error_code == 0
        client.send(m.MetadataRequest(topics=None), 12)
        assert _closed(client)
    with plain_client(port, "alice") as client:  # after authentication, everything
        assert client.request(m.MetadataRequest(topics=None), 12).brokers


def test_the_sasl_exchange_refuses_what_is_out_of_order_or_malformed(broker):
    port = int(_address(broker, "SASL_PLAINTEXT").rsplit(":", 1)[1])
    with RawClient(port) as client:  # SaslAuthenticate before any handshake
        answer = client.request(m.SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2)
        assert answer.error_code == 34 and _closed(client)  # ILLEGAL_SASL_STATE, then closed
    with RawClient(port) as client:
        answer = client.request(m.SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert answer.error_code == 33 and "PLAIN" in answer.mechanisms and _closed(client)
    for token in (b"", b"\xff" * 64, b"\0" * 5, b"alice\0alice-secret", bytes(1 << 20)):
        with RawClient(port) as client:
            client.request(m.SaslHandshakeRequest(mechanism="PLAIN"), 1)
            answer = client.request(m.SaslAuthenticateRequest(auth_bytes=token), 2)
            assert answer.error_code == 58 and answer.error_message and _closed(client)
    for mechanism in ("SCRAM-SHA-256", "OAUTHBEARER"):
        with RawClient(port) as client:
            client.request(m.SaslHandshakeRequest(mechanism=mechanism), 1)
            answer = client.request(m.SaslAuthenticateRequest(auth_bytes=b"n,,garbage"), 2)
            if mechanism == "OAUTHBEARER":  # an error challenge first, then the failure
                assert answer.error_code == 0 and b"invalid_token" in bytes(answer.auth_bytes)
                answer = client.request(m.SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)
            assert answer.error_code == 58 and _closed(client)
    with plain_client(port, "alice") as client:  # the broker serves on
        assert client.request(m.ApiVersionsRequest(), 3).error_code == 0


def test_a_v0_handshake_takes_bare_tokens(broker):
    port = int(_address(broker, "SASL_PLAINTEXT").rsplit(":", 1)[1])
    with RawClient(port) as client:
        assert client.request(m.SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        token = b"\0alice\0alice-secret"
        client.sock.sendall(struct.pack(">i", len(token)) + token)  # a bare frame, no request header
        assert client.sock.recv(4) == b"\0\0\0\0"  # PLAIN's empty answer
        assert client.request(m.MetadataRequest(topics=None), 12).brokers


def test_sessions_reauthenticate_and_expire(broker, monkeypatch):
    """connections.max.reauth.ms is 1.5 s: librdkafka re-authenticates on its connections as records keep
    flowing; a raw client that does not is cut off after its session ends."""
    from confluent_kafka import Producer
    calls = []
    real = authenticator.Authenticator.authenticate

    def counting(self, token, version=0):
        calls.append(self.complete)  # True: a re-authentication of a session
        return real(self, token, version)
    monkeypatch.setattr(authenticator.Authenticator, "authenticate", counting)
    producer = Producer({"bootstrap.servers": _address(broker, "SASL_PLAINTEXT"),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": "alice", "sasl.password": PLAIN_USERS["alice"]})
    deadline = time.monotonic() + 5
    sent = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", b"x")
        sent += 1
        producer.poll(0.05)
    assert producer.flush(10) == 0
    assert any(calls), "nothing re-authenticated"
    port = int(_address(broker, "SASL_PLAINTEXT").rsplit(":", 1)[1])
    with plain_client(port, "bob") as client:
        answer = client.request(m.SaslHandshakeRequest(mechanism="PLAIN"), 1)  # a re-authentication...
        assert answer.error_code == 0
        answer = client.request(m.SaslAuthenticateRequest(auth_bytes=b"\0bob\0bob-secret"), 2)
        assert answer.error_code == 0 and answer.session_lifetime_ms > 0
        time.sleep(1.7)  # ...then the session runs out
        client.send(m.ApiVersionsRequest(), 3)
        assert client.receive().error_code == 0  # ApiVersions stays open to a client re-authenticating
        client.send(m.MetadataRequest(topics=None), 12)
        assert _closed(client)

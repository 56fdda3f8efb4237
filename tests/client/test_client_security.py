"""kafkawire's clients over TLS and SASL against the reference broker, one broker for the module with a
listener per case (certificates made by trustme at test time):

* records go through Producer, AsyncProducer and a Consumer in a group over SASL_SSL (PLAIN,
  SCRAM-SHA-512), SASL_PLAINTEXT (SCRAM-SHA-256; OAUTHBEARER with an unsecured token and with a token
  callback) and SSL (without a client certificate, and with one where the listener requires it);
* failures come at once, with Kafka's exception, from the call the application made, and are not
  retried: wrong passwords, a mechanism the broker does not enable, an untrusted certificate, a host
  name the certificate does not name; a listener that requires a client certificate refuses a client
  without one;
* KIP-368: with a short ``connections.max.reauth.ms`` a connection re-authenticates several times while
  records keep flowing, in order, on the same connection; an OAUTHBEARER session ends with its token,
  and the callback gives the next one.

The broker's side is observed by wrapping ``Authenticator.authenticate`` (every SaslAuthenticate it
answers) and ``ListenerSecurity.principal_from_certificate`` (every TLS client's principal).
"""
from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
import trustme

from support.broker_harness import BrokerThread
from kafkawire.broker import BrokerConfig
from kafkawire.broker.security.authenticator import Authenticator
from kafkawire.broker.security.listener_security import ListenerSecurity
from kafkawire.client import (
    AsyncProducer, Consumer, KafkaConnectionError, KafkaTimeoutError, Producer, SaslAuthenticationException,
    SslAuthenticationException, TopicPartition, UnsupportedSaslMechanismException,
)
from kafkawire.sasl.oauthbearer import unsecured_token

OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
LISTENERS = {  # name: protocol
    "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL", "SSL": "SSL", "MTLS": "SSL",
    "OTHERNAME": "SSL", "REAUTH": "SASL_PLAINTEXT"}


class BrokerSide:
    """What the broker saw: each SaslAuthenticate (listener-independent) and each TLS client's principal."""

    def __init__(self):
        self.lock = threading.Lock()
        self.steps: list[tuple[str | None, str | None, int]] = []  # (mechanism, principal once complete, error)
        self.certificate_principals: list[str] = []

    def failures(self) -> int:
        with self.lock:
            return sum(1 for _, _, error in self.steps if error)

    def completed(self, principal: str) -> int:
        with self.lock:
            return sum(1 for _, who, error in self.steps if who == principal and not error)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
    ca.issue_cert("kafka.example.org").private_key_and_cert_chain_pem.write_to_path(str(folder / "other.pem"))
    client = ca.issue_cert("client.example.org", common_name="app-1")
    client.cert_chain_pems[0].write_to_path(str(folder / "client.crt"))
    client.private_key_pem.write_to_path(str(folder / "client.key"))
    trustme.CA().cert_pem.write_to_path(str(folder / "stranger-ca.pem"))  # trusts none of the above
    return folder


@pytest.fixture(scope="module")
def broker(tls_files, tmp_path_factory):
    seen = BrokerSide()
    authenticate, principal_from_certificate = Authenticator.authenticate, ListenerSecurity.principal_from_certificate

    async def counting_authenticate(self, token, authenticate_version=0):
        step = await authenticate(self, token, authenticate_version)
        finished = self.complete and not step.error and not self._handshaken  # noqa: SLF001 (the last step)
        with seen.lock:
            seen.steps.append((self.mechanism, self.principal if finished else None, step.error))
        return step

    def recording_principal(self, distinguished_name):
        principal = principal_from_certificate(self, distinguished_name)
        with seen.lock:
            seen.certificate_principals.append(principal)
        return principal

    properties = {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS),
        "listener.security.protocol.map": ",".join(f"{name}:{protocol}" for name, protocol in LISTENERS.items()),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'user_alice="alice-secret";',
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.reauth.connections.max.reauth.ms": "1000",
        "ssl.keystore.location": str(tls_files / "server.pem"),
        "ssl.truststore.location": str(tls_files / "ca.pem"),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.othername.ssl.keystore.location": str(tls_files / "other.pem"),
    }
    config = BrokerConfig.from_properties(properties, data_dir=tmp_path_factory.mktemp("data"),
                                          group_initial_rebalance_delay_ms=0,
                                          scram_credentials=["SCRAM-SHA-512=[name=bob,password=bob-secret]",
                                                             "SCRAM-SHA-256=[name=bob,password=bob-secret]"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Authenticator, "authenticate", counting_authenticate)
        patch.setattr(ListenerSecurity, "principal_from_certificate", recording_principal)
        with BrokerThread(config=config) as thread:
            thread.seen = seen
            yield thread


def settings(broker, tls_files, case: str) -> dict[str, object]:
    """Client settings, as Kafka users write them, for each way of connecting."""
    ca = str(tls_files / "ca.pem")
    return {
        "SASL_SSL PLAIN": {"bootstrap.servers": broker.broker.bootstrap_for("SASL_SSL"),
                           "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                           "sasl.password": "alice-secret", "ssl.ca.location": ca},
        "SASL_SSL SCRAM-SHA-512": {
            "bootstrap.servers": broker.broker.bootstrap_for("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "ssl.truststore.type": "PEM", "ssl.truststore.location": ca,
            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                'username="bob" password="bob-secret";'},
        "SASL_PLAINTEXT SCRAM-SHA-256": {
            "bootstrap.servers": broker.broker.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob", "sasl.password": "bob-secret"},
        "SASL_PLAINTEXT OAUTHBEARER unsecured": {
            "bootstrap.servers": broker.broker.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=carol"},
        "SASL_PLAINTEXT OAUTHBEARER callback": {
            "bootstrap.servers": broker.broker.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda config: (unsecured_token("dave", 3600, issued_at_s=time.time()), time.time() + 3600)},
        "SSL": {"bootstrap.servers": broker.broker.bootstrap_for("SSL"), "security.protocol": "SSL",
                "ssl.ca.location": ca},
        "SSL client certificate": {
            "bootstrap.servers": broker.broker.bootstrap_for("MTLS"), "security.protocol": "SSL", "ssl.ca.location": ca,
            "ssl.certificate.location": str(tls_files / "client.crt"),
            "ssl.key.location": str(tls_files / "client.key")},
    }[case]


PRINCIPALS = {"SASL_SSL PLAIN": "User:alice", "SASL_SSL SCRAM-SHA-512": "User:bob",
              "SASL_PLAINTEXT SCRAM-SHA-256": "User:bob", "SASL_PLAINTEXT OAUTHBEARER unsecured": "User:carol",
              "SASL_PLAINTEXT OAUTHBEARER callback": "User:dave"}


@pytest.mark.parametrize("case", ["SASL_SSL PLAIN", "SASL_SSL SCRAM-SHA-512", "SASL_PLAINTEXT SCRAM-SHA-256",
                                  "SASL_PLAINTEXT OAUTHBEARER unsecured", "SASL_PLAINTEXT OAUTHBEARER callback",
                                  "SSL", "SSL client certificate"])
def test_records_go_through_every_secured_listener(broker, tls_files, case):
    conf = settings(broker, tls_files, case)
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    principal = PRINCIPALS.get(case)
    before = broker.seen.completed(principal) if principal else 0
    with Producer(conf) as producer:
        first = producer.send(topic, b"blocking", key=b"k").result(10)

    async def send_async() -> int:
        async with AsyncProducer(conf) as producer:
            return (await producer.send_and_wait(topic, b"async", key=b"k")).offset
    assert asyncio.run(send_async()) == first.offset + 1

    with Consumer(conf, group_id=f"group-{topic}", auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        received: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while len(received) < 2 and time.monotonic() < deadline:
            received += [record.value for record in consumer.poll(timeout_ms=500)]
        consumer.commit()
        partition = TopicPartition(topic, first.partition)
        assert consumer.committed([partition]) == {partition: first.offset + 2}
    assert received == [b"blocking", b"async"]
    if principal is not None:  # producer, async producer, consumer (metadata, coordinator, fetch): each authenticated
        assert broker.seen.completed(principal) - before >= 4
    if case == "SSL client certificate":
        assert "User:CN=app-1" in [p.split(",")[0] for p in broker.seen.certificate_principals]


@pytest.mark.parametrize("tls_version", ["TLSv1.3", "TLSv1.2"])
def test_a_listener_requiring_client_certificates_refuses_a_client_without_one(broker, tls_files, tls_version):
    conf = {**settings(broker, tls_files, "SSL client certificate"), "ssl.enabled.protocols": tls_version,
            "max.block.ms": 1000}
    del conf["ssl.certificate.location"], conf["ssl.key.location"]
    started = time.monotonic()
    # The broker drops the connection without a TLS alert (asyncio does not send it): after the client's
    # side of a TLS 1.3 handshake, during a TLS 1.2 one. The client sees the connection close, tries again
    # as Kafka's does after a disconnect, and at max.block.ms names the likely cause; given an alert, it
    # raises SslAuthenticationException at once.
    with pytest.raises(KafkaTimeoutError, match="(?i)certificate"):
        Producer(conf)
    assert time.monotonic() - started < 5


def _producer_fails_at_once(conf, expected, match: str):
    started = time.monotonic()
    with pytest.raises(expected, match=match) as raised:
        Producer(conf)
    assert time.monotonic() - started < 5
    return raised.value


@pytest.mark.parametrize("case, wrong", [("SASL_SSL PLAIN", {"sasl.password": "guess"}),
                                         ("SASL_PLAINTEXT SCRAM-SHA-256", {"sasl.password": "guess"}),
                                         ("SASL_PLAINTEXT SCRAM-SHA-256", {"sasl.username": "mallory"})])
def test_wrong_credentials_fail_at_once_and_are_not_retried(broker, tls_files, case, wrong):
    conf = {**settings(broker, tls_files, case), **wrong}
    failures = broker.seen.failures()
    error = _producer_fails_at_once(conf, SaslAuthenticationException, "Invalid")
    assert error.code == 58 and "guess" not in str(error)  # SASL_AUTHENTICATION_FAILED; no password in it
    assert broker.seen.failures() == failures + 1


def test_a_consumer_with_a_wrong_password_raises_from_every_poll_without_reconnecting(broker, tls_files):
    conf = {**settings(broker, tls_files, "SASL_SSL SCRAM-SHA-512"),
            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                'username="bob" password="guess";'}
    failures = broker.seen.failures()
    with Consumer(conf, group_id="wrong-password", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["anything"])
        for _ in range(3):
            started = time.monotonic()
            with pytest.raises(SaslAuthenticationException, match="SCRAM-SHA-512, user bob"):
                consumer.poll(timeout_ms=2000)
            assert time.monotonic() - started < 1  # raised at once, not after the poll's timeout
    assert broker.seen.failures() == failures + 1  # one attempt: the client stopped connecting


def test_an_async_producer_with_a_wrong_password_fails_its_sends(broker, tls_files):
    conf = {**settings(broker, tls_files, "SASL_SSL PLAIN"), "sasl.password": "guess"}

    async def run() -> None:
        producer = AsyncProducer(conf)
        try:
            with pytest.raises(SaslAuthenticationException):
                await producer.start()
            with pytest.raises(SaslAuthenticationException):
                await producer.send("topic", b"value")
        finally:
            await producer.close()
    failures = broker.seen.failures()
    asyncio.run(run())
    assert broker.seen.failures() == failures + 1


def test_a_mechanism_the_broker_does_not_enable(broker, tls_files):
    conf = {**settings(broker, tls_files, "SASL_SSL PLAIN"), "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "bob", "sasl.password": "bob-secret"}
    _producer_fails_at_once(conf, UnsupportedSaslMechanismException, "enables PLAIN, SCRAM-SHA-512")


def test_an_untrusted_certificate_fails_at_once(broker, tls_files):
    for case in ("SSL", "SASL_SSL PLAIN"):
        conf = {**settings(broker, tls_files, case), "ssl.ca.location": str(tls_files / "stranger-ca.pem")}
        _producer_fails_at_once(conf, SslAuthenticationException, "not trusted")


def test_the_host_name_is_checked_unless_turned_off(broker, tls_files):
    conf = {**settings(broker, tls_files, "SSL"), "bootstrap.servers": broker.broker.bootstrap_for("OTHERNAME")}
    _producer_fails_at_once(conf, SslAuthenticationException, "mismatch")
    with Producer({**conf, "ssl.endpoint.identification.algorithm": ""}) as producer:  # chain still checked
        assert producer.send("othername", b"v").result(10).offset == 0


def test_reauthentication_keeps_records_flowing_on_the_same_connection(broker, tls_files):
    """connections.max.reauth.ms=1000 on this listener: each connection re-authenticates every 0.85-0.95 s."""
    conf = {"bootstrap.servers": broker.broker.bootstrap_for("REAUTH"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    sessions = broker.seen.completed("User:alice")
    with Producer(conf, linger_ms=0) as producer, \
            Consumer(conf, group_id=f"group-{topic}", auto_offset_reset="earliest", fetch_max_wait_ms=100) as consumer:
        consumer.subscribe([topic])
        connection = None
        sent: list[bytes] = []
        received: list[bytes | None] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            value = str(len(sent)).encode()
            producer.send(topic, value)  # not waited for: pipelined across the re-authentications
            sent.append(value)
            received += [record.value for record in consumer.poll(timeout_ms=50)]
            connections = producer._producer.connections.connections()  # noqa: SLF001
            if connection is None and connections:
                connection = connections[0]
            if connection is not None and connection.reauthentications >= 3 and len(received) >= 20:
                break
        producer.flush()
        while len(received) < len(sent) and time.monotonic() < deadline + 5:
            received += [record.value for record in consumer.poll(timeout_ms=200)]
        assert connection is not None and connection.reauthentications >= 3
        assert producer._producer.connections.connections() == [connection] and connection.connected  # noqa: SLF001
    assert received == sent  # every record, in order
    assert broker.seen.completed("User:alice") - sessions >= 3 + 3  # the broker saw the re-authentications


def test_an_oauthbearer_session_ends_with_its_token_and_the_callback_gives_the_next(broker, tls_files):
    calls: list[str | None] = []

    def oauth_cb(config: str | None) -> tuple[str, float]:
        calls.append(config)
        now = time.time()
        return unsecured_token("erin", 1.5, issued_at_s=now), now + 1.5

    conf = {"bootstrap.servers": broker.broker.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.config": "scope=none", "oauth_cb": oauth_cb}
    with Producer(conf) as producer:
        offsets = [producer.send("tokens", b"v").result(10).offset]
        connection = producer._producer.connections.connections()[0]  # noqa: SLF001 (the leader's)
        assert 0 < connection.session_lifetime_ms <= 1500  # the broker ends the session when the token expires
        deadline = time.monotonic() + 10
        while connection.reauthentications < 2 and time.monotonic() < deadline:
            offsets.append(producer.send("tokens", b"v").result(10).offset)
            time.sleep(0.05)
        assert connection.reauthentications >= 2 and connection.connected
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    assert len(calls) >= 3 and set(calls) == {"scope=none"}  # a fresh token for each session


def test_requests_made_while_re_authenticating_wait_for_it_and_keep_their_order(broker, tls_files):
    """Requests written before a re-authentication are answered first; those made during it are held,
    then written in order once it completes, on the same connection."""
    from kafkawire.client.aio.authentication import ConnectionSecurity
    from kafkawire.client.aio.connection import BrokerConnection
    from kafkawire.client.core.producer.config import ProducerConfig
    from kafkawire.messages import MetadataRequest

    config = ProducerConfig.from_properties(settings(broker, tls_files, "SASL_PLAINTEXT SCRAM-SHA-256"))
    host, port = config.bootstrap_servers[0].rsplit(":", 1)

    async def run() -> list[str]:
        connection = await BrokerConnection(host, int(port), security=ConnectionSecurity(config)).connect()
        order: list[str] = []
        try:
            def metadata(name: str):
                future = connection.request(MetadataRequest(topics=[]), 1)
                future.add_done_callback(lambda _: order.append(name))
                return future
            before = [metadata("before-1"), metadata("before-2")]
            connection._begin_reauthentication()  # noqa: SLF001 (what the timer does)
            reauthentication = connection._reauth_task  # noqa: SLF001
            assert reauthentication is not None
            reauthentication.add_done_callback(lambda _: order.append("re-authenticated"))
            during = [metadata("during-1"), metadata("during-2")]
            assert connection.in_flight == 4 and len(connection._held or ()) == 2  # noqa: SLF001
            await asyncio.gather(*before, *during, reauthentication)
            assert connection.connected and connection.reauthentications == 1
        finally:
            await connection.close()
        return order

    authentications = broker.seen.completed("User:bob")
    order = asyncio.run(run())
    assert order == ["before-1", "before-2", "re-authenticated", "during-1", "during-2"]
    assert broker.seen.completed("User:bob") == authentications + 2

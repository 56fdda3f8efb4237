"""Captures of real clients authenticating against the broker, decoded by the capture job on Spark and
by its stage-2 body in this process: secrets in no output, users and mechanisms where they belong, TLS
connections with their server name.

One broker serves SASL_PLAINTEXT, SSL and SASL_SSL (certificates made by trustme now; the TLS
listeners advertised as ``localhost``, so that clients send that name as SNI) while tcpdump captures
its ports on loopback and the broker's own tap records every connection (as plaintext frames, tokens
redacted by the broker). The clients: confluent-kafka with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
OAUTHBEARER (an unsecured JWS) and a wrong password, over SSL, and with SCRAM-SHA-512 over SASL_SSL;
kafka-python with SCRAM-SHA-256 (SaslHandshake v1), and pinned to broker 0.11 with SCRAM-SHA-512,
which makes it send a SaslHandshake v0 and bare tokens.

The oracles: the broker's own record of each connection (listener, client port, mechanism, principal,
whether it completed or the broker failed it), the secrets as the tcpdump capture holds them (passwords, SCRAM proofs, salts
and signatures, bearer tokens: checked to be there, so their absence from the outputs means something),
and tshark's reading of the ClientHellos' server name and versions. One local Spark session serves the
module (its tests stay in one file: pytest-xdist's ``--dist loadfile`` runs them on one worker).
"""
from __future__ import annotations

import gc
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
import pyarrow.parquet as pq  # noqa: E402

from support.broker_harness import BrokerThread  # noqa: E402
from support.capture_bodies import assert_bodies_tables_match_frames  # noqa: E402
from support.capture_in_process import decode_in_process  # noqa: E402
from support.loopback_capture import start_tcpdump, stop_tcpdump, wait_for_ends, wait_until  # noqa: E402
from support.secret_scan import folder_leaks, text_leaks  # noqa: E402
from kafkawire.broker import BrokerConfig  # noqa: E402
from kafkawire.broker.network.connection import Connection  # noqa: E402
from kafkawire.broker.security.authenticator import Authenticator  # noqa: E402
from kafkawire.capture.reporting import report  # noqa: E402
from kafkawire.capture.tables.table_sets import table_names  # noqa: E402
from kafkawire.capture_spark import job  # noqa: E402
from kafkawire.capture_spark.report_spark import build  # noqa: E402
from kafkawire.error_codes import ErrorCode  # noqa: E402
from kafkawire.sasl.redact import token_user  # noqa: E402

pytestmark = [pytest.mark.xdist_group("spark"),
              pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")]

TSHARK = shutil.which("tshark")
PASSWORDS = {"alice": "alice-Pw-6b0f2c91", "bob": "bob-Pw-93e1a7d4", "erin": "erin-Pw-0c58f3b2",
             "mallory": "mallory-Pw-47d2e610"}
TOPIC = "secured"


# ---- the broker, the clients and the captures -----------------------------------------------------------

@dataclass
class Seen:
    """A connection as the broker saw it."""
    listener: str
    port: int               # the client's
    mechanism: str | None
    user: str | None        # the authenticated principal's name
    outcome: str            # authenticated, failed (the broker answered an error) or incomplete (the client left)
    offered: str | None     # the user the first token the broker received names (None: no token came)


@dataclass
class Secured:
    tap: Path
    wire: Path                                  # tcpdump on lo
    ports: dict[str, int]                       # listener name -> port
    seen: list[Seen]
    secrets: list[bytes] = field(default_factory=list)


def _broker_config(folder: Path):
    import trustme
    ca = trustme.CA()
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    jaas = "org.apache.kafka.common.security"
    properties = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "advertised.listeners": "SSL://localhost:0,SASL_SSL://localhost:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "sasl.jaas.config": f'{jaas}.plain.PlainLoginModule required user_alice="{PASSWORDS["alice"]}";',
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            f"{jaas}.oauthbearer.OAuthBearerLoginModule required;",
        "ssl.keystore.location": str(folder / "server.pem"), "ssl.truststore.location": str(folder / "ca.pem"),
    }
    credentials = [f"SCRAM-SHA-256=[name=bob,password={PASSWORDS['bob']}]",
                   f"SCRAM-SHA-512=[name=bob,password={PASSWORDS['bob']}]",
                   f"SCRAM-SHA-512=[name=erin,password={PASSWORDS['erin']}]"]
    return BrokerConfig.from_properties(properties, data_dir=folder / "data", tap_path=folder / "tap.pcapng",
                                        scram_credentials=credentials, group_initial_rebalance_delay_ms=0)


def _confluent(bootstrap: str, settings: dict, fails: bool = False) -> None:
    from confluent_kafka import KafkaException, Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **settings})
    if fails:  # one attempt or two: librdkafka retries a failed authentication after the backoff
        with pytest.raises(KafkaException):
            producer.list_topics(timeout=2)
    else:
        producer.produce(TOPIC, value=b"secured value")
        assert producer.flush(30) == 0
    del producer


def _kafka_python(bootstrap: str, mechanism: str, user: str, api_version=None) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                             sasl_plain_username=user, sasl_plain_password=PASSWORDS[user], api_version=api_version)
    producer.send(TOPIC, b"from kafka-python").get(30)
    producer.close()


def _workload(broker, ca: Path) -> None:
    plaintext, ssl, sasl_ssl = (broker.bootstrap_for(name) for name in ("SASL_PLAINTEXT", "SSL", "SASL_SSL"))
    assert ssl.startswith("localhost:") and sasl_ssl.startswith("localhost:")
    sasl = {"security.protocol": "SASL_PLAINTEXT"}
    for mechanism, user in (("PLAIN", "alice"), ("SCRAM-SHA-256", "bob"), ("SCRAM-SHA-512", "bob")):
        _confluent(plaintext, {**sasl, "sasl.mechanism": mechanism, "sasl.username": user,
                               "sasl.password": PASSWORDS[user], "client.id": f"ck-{mechanism.lower()}"})
    _confluent(plaintext, {**sasl, "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
                           "sasl.oauthbearer.config": "principal=carol", "client.id": "ck-oauthbearer"})
    _confluent(plaintext, {**sasl, "sasl.mechanism": "PLAIN", "sasl.username": "mallory",
                           "sasl.password": PASSWORDS["mallory"], "client.id": "ck-mallory",
                           "reconnect.backoff.ms": 5000, "reconnect.backoff.max.ms": 5000}, fails=True)
    _confluent(ssl, {"security.protocol": "SSL", "ssl.ca.location": str(ca), "client.id": "ck-ssl"})
    _confluent(sasl_ssl, {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca), "sasl.mechanism": "SCRAM-SHA-512",
                          "sasl.username": "bob", "sasl.password": PASSWORDS["bob"], "client.id": "ck-sasl-ssl"})
    _kafka_python(plaintext, "SCRAM-SHA-256", "bob")
    _kafka_python(plaintext, "SCRAM-SHA-512", "erin", api_version=(0, 11))  # SaslHandshake v0, bare tokens


def _wire_secrets(capture: bytes) -> list[bytes]:
    """The secrets a capture of the wire holds: SCRAM proofs, salts and server signatures, and bearer
    tokens (and their claims part), each checked to be there."""
    nonce = rb"r=[\x21-\x2b\x2d-\x7e]+"  # printable, no comma
    proofs = set(re.findall(rb"c=biws," + nonce + rb",p=([A-Za-z0-9+/]+=*)", capture))
    salts = set(re.findall(nonce + rb",s=([A-Za-z0-9+/]+=*),i=\d+", capture))
    signatures = set(re.findall(rb"v=([A-Za-z0-9+/]{40,}=*)", capture))
    tokens = set(re.findall(rb"auth=Bearer ([A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*)\x01", capture))
    # SCRAM connections: confluent's two, kafka-python's two (v1 and v0) at least, each with a proof and a
    # signature; one salt per user and mechanism (bob's two, erin's)
    assert len(proofs) >= 4 and len(signatures) >= 4 and len(salts) == 3, (proofs, salts, signatures)
    assert tokens, "no bearer token in the capture"
    return sorted(proofs | salts | signatures | tokens | {token.split(b".")[1] for token in tokens})


def _outcome(auth) -> str:
    if auth is not None and auth.complete:
        return "authenticated"
    return "failed" if auth is not None and auth.failed_with is not None else "incomplete"


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Secured:
    folder = tmp_path_factory.mktemp("capture_security")
    config = _broker_config(folder)
    seen: list[Seen] = []
    run, authenticate = Connection.run, Authenticator.authenticate
    offered: dict[int, str | None] = {}  # id(authenticator) -> the user its first token named

    def noting(self, token, *args, **kwargs):
        offered.setdefault(id(self), token_user(self.mechanism, bytes(token)))
        return authenticate(self, token, *args, **kwargs)

    async def recording(self):
        try:
            await run(self)
        finally:
            auth = self.auth
            principal = auth.principal if auth is not None and auth.complete else None
            seen.append(Seen(self.listener.name, self.peer[1], auth.mechanism if auth is not None else None,
                             principal.removeprefix("User:") if principal else None,
                             _outcome(auth), offered.pop(id(auth), None)))

    Connection.run, Authenticator.authenticate = recording, noting
    try:
        with BrokerThread(config=config) as broker:
            ports = {name: int(broker.broker.bootstrap_for(name).rsplit(":", 1)[1])
                     for name in ("SASL_PLAINTEXT", "SSL", "SASL_SSL")}
            dump = start_tcpdump(folder / "wire.pcap", ports.values())
            try:
                _workload(broker.broker, folder / "ca.pem")
                gc.collect()
                wait_until(lambda: not broker.broker._connections, "the clients' connections to close")
                # packets reach tcpdump's file some time after the broker saw them (under gVisor, seconds)
                wait_for_ends(folder / "wire.pcap", ports.values(), {s.port for s in seen})
            finally:
                said = stop_tcpdump(dump)
            assert re.search(r"^0 packets dropped by kernel", said, re.MULTILINE), said
    finally:
        Connection.run, Authenticator.authenticate = run, authenticate
    wire = (folder / "wire.pcap").read_bytes()
    secrets = [password.encode() for password in PASSWORDS.values()] + _wire_secrets(wire)
    for password in (PASSWORDS["alice"], PASSWORDS["mallory"]):  # PLAIN sends them; SCRAM never does
        assert password.encode() in wire
    return Secured(folder / "tap.pcapng", folder / "wire.pcap", ports, seen, secrets)


@pytest.fixture(scope="module")
def decoded(spark, secured, tmp_path_factory) -> dict[tuple[str, str], Path]:
    """(capture, path) -> tables: each capture through the Spark job and in process."""
    folder = tmp_path_factory.mktemp("capture_security_tables")
    outs = {}
    for name, capture in (("tap", secured.tap), ("wire", secured.wire)):
        outs[name, "spark"] = folder / f"{name}-spark"
        job.decode(spark, [str(capture)], str(outs[name, "spark"]), records=True)
        outs[name, "local"] = folder / f"{name}-local"
        decode_in_process(capture, outs[name, "local"])
    return outs


def rows(out: Path, table: str) -> list[dict]:
    return pq.read_table(out / table).to_pylist()


def port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


# ---- the tests --------------------------------------------------------------------------------------------

def test_no_output_holds_a_secret(spark, secured, decoded):
    """Every byte of every file the decoders wrote, every value of every column, and the report of each
    engine: no password, proof, salt, signature or token."""
    for (capture, path), out in decoded.items():
        assert folder_leaks(out, secured.secrets) == [], (capture, path)
        text = report.build_arrow(str(out)).text()
        assert text_leaks(text, secured.secrets) == [], (capture, path)
        for user in ("alice", "bob", "carol", "erin", "mallory"):
            assert user in text, (capture, path, user)
    assert build(spark, str(decoded["wire", "spark"])).text() == report.build_arrow(str(decoded["wire", "spark"])).text()


@pytest.mark.parametrize("capture", ["tap", "wire"])
def test_authentications_are_the_brokers(secured, decoded, capture):
    """Each connection that authenticated (or failed to) is a row of the connections table with the
    mechanism, the user and the outcome the broker decided; the wire capture sees SASL_PLAINTEXT only
    (SASL_SSL is encrypted), the tap every listener."""
    listeners = ("SASL_PLAINTEXT",) if capture == "wire" else ("SASL_PLAINTEXT", "SASL_SSL")
    expected = {s.port: (s.mechanism, s.user, s.outcome)
                for s in secured.seen if s.listener in listeners and s.mechanism is not None}
    assert {m for m, _, _ in expected.values()} == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
    assert {u for _, u, _ in expected.values()} == {"alice", "bob", "carol", "erin", None}
    for path in ("spark", "local"):
        out = decoded[capture, path]
        connections = rows(out, "connections")
        found = {port_of(r["client"]): (r["sasl_mechanism"], r["sasl_user"] if r["authentication"] == "authenticated"
                                        else None, r["authentication"])
                 for r in connections if r["authentication"] is not None}
        assert found == expected, path
        failed = [r for r in connections if r["authentication"] == "failed"]
        assert failed and {(r["sasl_mechanism"], r["sasl_user"], r["sasl_error_code"]) for r in failed} == {
            ("PLAIN", "mallory", ErrorCode.SASL_AUTHENTICATION_FAILED)}
        v0 = {(r["sasl_mechanism"], r["sasl_user"]) for r in connections if r["sasl_handshake_version"] == 0}
        assert v0 == {("SCRAM-SHA-512", "erin")}
        # the frames of the exchanges carry them too: every SaslAuthenticate frame names its mechanism and user
        frames = rows(out, "frames")
        authenticate = [f for f in frames if f["api_name"] == "SaslAuthenticate"]
        assert authenticate and all(f["sasl_mechanism"] == expected[port_of(f["client"])][0] for f in authenticate)
        assert {f["sasl_user"] for f in authenticate} == {"alice", "bob", "carol", "mallory"}
        handshakes = [f for f in frames if f["api_name"] == "SaslHandshake"]
        assert len(handshakes) == 2 * len(expected)
        assert all(f["decode_error"] is None for f in frames)
        # after kafka-python's v0 exchange the frames go on: its Produce request and response
        erin = {port for port, (_, user, _) in expected.items() if user == "erin"}
        assert {f["api_name"] for f in frames if port_of(f["client"]) in erin} >= {"SaslHandshake", "Produce"}
        problems = rows(out, "problems")
        assert [p for p in problems if p["kind"] not in ("tls", "unanswered_request")] == [], path


def test_tls_connections_show_their_server_name(secured, decoded):
    """The wire capture's TLS connections (SSL and SASL_SSL) are rows with the server name and version
    offered that tshark reads from their ClientHellos, one problem each, and a report line."""
    tls_ports = {s.port for s in secured.seen if s.listener in ("SSL", "SASL_SSL")}
    assert tls_ports
    hellos = _tshark_hellos(secured.wire, [secured.ports["SSL"], secured.ports["SASL_SSL"]])
    assert set(hellos) == tls_ports
    assert set(hellos.values()) == {("localhost", "TLS 1.3")}
    for path in ("spark", "local"):
        out = decoded["wire", path]
        connections = [r for r in rows(out, "connections") if r["tls"]]
        assert {port_of(r["client"]): (r["tls_server_name"], r["tls_version"]) for r in connections} == hellos
        assert all(r["requests"] == 0 and r["authentication"] is None for r in connections)
        problems = [p for p in rows(out, "problems") if p["kind"] == "tls"]
        assert sorted(p["connection"] for p in problems) == sorted(r["connection"] for r in connections)
        assert {p["reason"] for p in problems} == {
            "encrypted, no key: a TLS 1.3 ClientHello for server name localhost (--keylog FILE with its secrets "
            "decrypts it)"}
        summary = report.build_arrow(str(out))
        assert summary.tls == [dict(server_name="localhost", version="TLS 1.3", connections=len(hellos))]
        assert re.search(rf"\n  localhost {{30,}}TLS 1\.3 +{len(hellos)}\n", summary.text())
    # the tap records the TLS listeners' traffic decrypted: Kafka frames, no TLS
    assert not any(r["tls"] for r in rows(decoded["tap", "spark"], "connections"))


def test_report_lines_per_mechanism_and_user(decoded, secured):
    expected = {}
    for s in secured.seen:
        if s.listener == "SASL_PLAINTEXT" and s.mechanism is not None:
            key = (s.mechanism, s.offered)  # a client that left before its first token names no one
            counts = expected.setdefault(key, {"authenticated": 0, "failed": 0, "incomplete": 0})
            counts[s.outcome] += 1
    summary = report.build_arrow(str(decoded["wire", "spark"]))
    assert {(r["mechanism"], r["user"]): {k: r[k] for k in ("authenticated", "failed", "incomplete")}
            for r in summary.authentications} == expected
    text = summary.text()
    for (mechanism, user), counts in expected.items():
        if user is None:
            continue
        assert re.search(rf"\n  {re.escape(mechanism)} +{user} +{counts['authenticated']} +{counts['failed']} +{counts['incomplete']}\n",
                         text), (mechanism, user, text)


def test_spark_and_in_process_tables_agree(decoded):
    for capture in ("tap", "wire"):
        assert table_names(str(decoded[capture, "spark"])) == table_names(str(decoded[capture, "local"]))
        for table in table_names(str(decoded[capture, "local"])):
            spark_rows = sorted(rows(decoded[capture, "spark"], table), key=repr)
            local_rows = sorted(rows(decoded[capture, "local"], table), key=repr)
            assert spark_rows == local_rows, (capture, table)
        assert {"SaslHandshakeRequest", "SaslAuthenticateResponse"} <= assert_bodies_tables_match_frames(
            decoded[capture, "spark"])


def _tshark_hellos(path: Path, ports: list[int]) -> dict[int, tuple[str, str]]:
    """client port -> (server name, highest version offered) of each ClientHello, as tshark reads them."""
    if TSHARK is None:
        pytest.skip("tshark is not installed (apt-get install tshark)")
    decode_as = [a for port in ports for a in ("-d", f"tcp.port=={port},tls")]
    done = subprocess.run([TSHARK, "-r", str(path), *decode_as, "-Y", "tls.handshake.type == 1", "-T", "fields",
                           "-E", "occurrence=a", "-E", "aggregator=|", "-e", "tcp.srcport",
                           "-e", "tls.handshake.extensions_server_name", "-e", "tls.handshake.extensions.supported_version"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    names = {0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}
    found = {}
    for line in done.stdout.splitlines():
        port, name, versions = line.split("\t")
        offered = [int(v, 16) for v in versions.split("|") if v]
        found[int(port)] = (name, names[max(v for v in offered if v in names)])
    return found


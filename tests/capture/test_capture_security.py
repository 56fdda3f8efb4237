"""SASL and TLS in the capture's Kafka layer (kafka_connection, correlation, authentication, tls_hello)
and in the rows (frame_decoding, rows): mechanisms, users and outcomes, secrets in no table.

The exchanges are real: tokens made by kafkawire.sasl's client and server state machines (PLAIN, SCRAM
against a stored credential, OAUTHBEARER with an unsecured JWS), in SaslAuthenticate v0-2 frames after a
SaslHandshake v1, or bare after a SaslHandshake v0; ClientHellos made by Python's ssl module (OpenSSL).
Captures of real clients against the broker are decoded in tests/capture_spark/test_capture_spark_security.py.
"""
from __future__ import annotations

import re
import ssl
import time
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.capture_talk import BROKER, CLIENT, CONNECTION, Message, Talk, packets, segments
from support.secret_scan import table_leaks
from kafkawire.capture.kafka.kafka_connection import decode_connection
from kafkawire.capture.model import ConnectionSummary, KafkaFrame, Problem
from kafkawire.capture.tables.rows import TableBatcher
from kafkawire.capture.kafka.tls_hello import ClientHello, read_client_hello
from kafkawire.error_codes import ErrorCode
from kafkawire.messages import (
    ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
)
from kafkawire.sasl import SaslError
from kafkawire.sasl.oauthbearer import client_initial_response, unsecured_token
from kafkawire.sasl.plain import plain_message
from kafkawire.sasl.scram import MECHANISMS as SCRAM, ScramClient, ScramServer

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
USERS = {"PLAIN": "alice", "SCRAM-SHA-256": "bob", "SCRAM-SHA-512": "bob", "OAUTHBEARER": "carol"}
PASSWORDS = {"alice": "alice-Pw-7c1e5b", "bob": "bob-Pw-2f9d04"}
SASL_AUTHENTICATION_FAILED = ErrorCode.SASL_AUTHENTICATION_FAILED


# ---- real exchanges --------------------------------------------------------------------------------

@dataclass
class Exchange:
    """The rounds of one SASL exchange, (client token, server token or None when the broker answered
    nothing, error code), the secrets its tokens hold, and the password (which SCRAM never sends)."""
    rounds: list[tuple[bytes, bytes | None, int]]
    on_wire: list[bytes]
    password: bytes = b""

    @property
    def secrets(self) -> list[bytes]:
        return self.on_wire + [self.password] if self.password else self.on_wire


def exchange(mechanism: str, wrong_password: bool = False) -> Exchange:
    user = USERS[mechanism]
    if mechanism == "PLAIN":
        password = PASSWORDS[user] + ("-wrong" if wrong_password else "")
        error = SASL_AUTHENTICATION_FAILED if wrong_password else 0
        return Exchange([(plain_message(user, password), None if wrong_password else b"", error)], [password.encode()])
    if mechanism.startswith("SCRAM-"):
        scram = SCRAM[mechanism]
        credential = scram.credential(PASSWORDS[user])
        client = ScramClient(scram, user, PASSWORDS[user] + ("-wrong" if wrong_password else ""))
        server = ScramServer(scram, {user: credential}.get)
        client_first = client.first()
        server_first = server.first(client_first)
        client_final = client.final(server_first)
        secrets = [_attribute(b"p", client_final), _attribute(b"s", server_first)]
        try:
            server_final = server.final(client_final)
        except SaslError:
            return Exchange([(client_first, server_first, 0), (client_final, None, SASL_AUTHENTICATION_FAILED)],
                            secrets, PASSWORDS[user].encode())
        client.verify(server_final)
        return Exchange([(client_first, server_first, 0), (client_final, server_final, 0)],
                        secrets + [_attribute(b"v", server_final)], PASSWORDS[user].encode())
    token = unsecured_token(user, 3600, issued_at_s=time.time())
    return Exchange([(client_initial_response(token), b"", 0)], [token.encode(), token.split(".")[1].encode()])


def _attribute(name: bytes, message: bytes) -> bytes:
    return re.search(rb"(?:^|,)" + name + rb"=([^,]+)", message).group(1)


def authenticated_talk(mechanism: str, *, version: int = 2, handshake: int = 1, wrong_password: bool = False,
                       then_requests: bool = True) -> tuple[Talk, Exchange]:
    """ApiVersions, SaslHandshake, the exchange (SaslAuthenticate frames, or bare tokens after a v0
    handshake) and, when it succeeded, two Metadata requests."""
    talk = Talk()
    talk.request(ApiVersionsRequest(), 0, ApiVersionsResponse())
    talk.request(SaslHandshakeRequest(mechanism=mechanism), handshake,
                 SaslHandshakeResponse(mechanisms=MECHANISMS))
    sasl = exchange(mechanism, wrong_password)
    for client_token, server_token, error in sasl.rounds:
        if handshake == 0:
            talk.raw(CLIENT, client_token)
            if server_token is not None:
                talk.raw(BROKER, server_token)
        else:
            talk.request(SaslAuthenticateRequest(auth_bytes=client_token), version, SaslAuthenticateResponse(
                error_code=error, error_message="Authentication failed" if error else None,
                auth_bytes=server_token or b""))
    if then_requests and not wrong_password:
        talk.request(MetadataRequest(topics=[]), 4, MetadataResponse())
        talk.request(MetadataRequest(topics=None), 12, MetadataResponse())
    return talk, sasl


def decode(messages: list[Message], broker_ports=frozenset({9092}), **segmenting) -> list:
    return list(decode_connection(packets(segments(messages, **segmenting)), set(broker_ports)))


def of(kind, items: list) -> list:
    return [item for item in items if isinstance(item, kind)]


def kafka_messages(talk: Talk) -> list[Message]:
    return [m for m in talk.messages if m.correlation_id >= 0]


def tables_of(items: list) -> dict:
    """The tables TableBatcher makes of the items, as pyarrow Tables."""
    import pyarrow as pa
    batches: dict[str, list] = {}
    for name, batch in TableBatcher(records=True).add_all(items):
        batches.setdefault(name, []).append(batch)
    return {name: pa.Table.from_batches(found) for name, found in batches.items()}


def leaks(tables: dict, secrets: list[bytes]) -> list[str]:
    """Secrets in any value of any table (the frames' JSON bodies, the typed bodies...)."""
    return [leak for name, table in tables.items() for leak in table_leaks(table, secrets, f"{name}.")]


def auth_bytes(tables: dict) -> list[bytes]:
    """The SaslAuthenticate requests' tokens as the typed bodies table holds them."""
    return [row["body"]["auth_bytes"] for row in tables["bodies/SaslAuthenticateRequest"].to_pylist()]


# ---- SaslHandshake v1 and SaslAuthenticate ------------------------------------------------------------

@pytest.mark.parametrize("mechanism,version", [("PLAIN", 0), ("SCRAM-SHA-256", 1), ("SCRAM-SHA-512", 2),
                                               ("OAUTHBEARER", 2), ("PLAIN", 2)])
def test_authenticate_frames_carry_mechanism_and_user_and_no_secret(mechanism, version):
    talk, sasl = authenticated_talk(mechanism, version=version)
    items = decode(talk.messages)
    frames = of(KafkaFrame, items)
    assert of(Problem, items) == []
    assert [(f.direction, f.api_key, f.correlation_id) for f in frames] == [
        (m.direction, m.api_key, m.correlation_id) for m in kafka_messages(talk)]
    user = USERS[mechanism]
    sasl_frames = [(f.direction, f.api_key, f.sasl_mechanism, f.sasl_user) for f in frames if f.api_key in (17, 36)]
    assert sasl_frames == [("request", 17, mechanism, None), ("response", 17, mechanism, None)] + [
        ("request", 36, mechanism, user), ("response", 36, mechanism, user)] * len(sasl.rounds)
    assert all(f.sasl_mechanism is None for f in frames if f.api_key not in (17, 36))
    [summary] = of(ConnectionSummary, items)
    assert summary[5:] == (len(talk.messages) // 2, len(talk.messages) // 2, False, None, None, mechanism, user, 1,
                           "authenticated", None, 1, None)

    tables = tables_of(items)
    assert leaks(tables, sasl.secrets) == []
    frame_rows = tables["frames"].to_pylist()
    assert [(r["api_name"], r["sasl_mechanism"], r["sasl_user"]) for r in frame_rows if r["api_key"] == 36] == [
        ("SaslAuthenticate", mechanism, user)] * 2 * len(sasl.rounds)
    assert all(r["decode_error"] is None and r["body"] for r in frame_rows)
    tokens = auth_bytes(tables)
    assert len(tokens) == len(sasl.rounds)
    assert b"[redacted" in tokens[-1]  # SCRAM's client-first message holds no secret and stays whole
    if mechanism != "OAUTHBEARER":
        assert user.encode() in tokens[0]  # PLAIN's authcid, SCRAM's n=: what names the user stays
    assert tables["connections"].to_pylist()[0]["sasl_user"] == user
    for secret in sasl.on_wire:  # the test is worth something: the capture's bytes hold every secret
        assert any(secret in m.data for m in talk.messages), secret


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_fails_with_the_brokers_error_code(mechanism):
    talk, sasl = authenticated_talk(mechanism, wrong_password=True)
    items = decode(talk.messages)
    [summary] = of(ConnectionSummary, items)
    assert (summary.sasl_mechanism, summary.sasl_user, summary.authentication, summary.sasl_error_code) == (
        mechanism, USERS[mechanism], "failed", SASL_AUTHENTICATION_FAILED)
    assert leaks(tables_of(items), sasl.secrets) == []


def test_an_unsupported_mechanism_fails_at_the_handshake():
    talk = Talk()
    talk.request(SaslHandshakeRequest(mechanism="GSSAPI"), 1, SaslHandshakeResponse(
        error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=["PLAIN"]))
    [summary] = of(ConnectionSummary, decode(talk.messages))
    assert (summary.sasl_mechanism, summary.sasl_user, summary.authentication, summary.sasl_error_code) == (
        "GSSAPI", None, "failed", ErrorCode.UNSUPPORTED_SASL_MECHANISM)


def test_reauthentication_counts_each_exchange():
    """KIP-368: a second SaslHandshake and SaslAuthenticate on the same connection, between requests."""
    talk, first = authenticated_talk("SCRAM-SHA-256")
    second = exchange("SCRAM-SHA-256")
    later = Talk(first_id=100)
    later.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1, SaslHandshakeResponse(mechanisms=MECHANISMS))
    for client_token, server_token, error in second.rounds:
        later.request(SaslAuthenticateRequest(auth_bytes=client_token), 2,
                      SaslAuthenticateResponse(error_code=error, auth_bytes=server_token, session_lifetime_ms=1000))
    later.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    items = decode(talk.messages + later.messages)
    assert of(Problem, items) == []
    [summary] = of(ConnectionSummary, items)
    assert (summary.authentications, summary.authentication, summary.sasl_user) == (2, "authenticated", "bob")
    assert leaks(tables_of(items), first.secrets + second.secrets) == []


def test_authenticate_without_its_handshake_redacts_the_whole_token():
    """A capture that starts after the SaslHandshake: the mechanism is unknown, so nothing of the
    tokens is kept (what is left of a token depends on its mechanism)."""
    talk, sasl = authenticated_talk("PLAIN")
    items = decode(talk.messages[4:])  # from the SaslAuthenticate request on
    frames = of(KafkaFrame, items)
    assert [f.sasl_mechanism for f in frames if f.api_key == 36] == [None, None]
    [summary] = of(ConnectionSummary, items)
    assert (summary.sasl_mechanism, summary.sasl_user, summary.authentication, summary.authentications) == (
        None, None, "authenticated", 1)
    assert auth_bytes(tables_of(items)) == [b"[redacted]"]
    assert leaks(tables_of(items), sasl.secrets + [b"alice"]) == []


# ---- SaslHandshake v0: raw tokens ----------------------------------------------------------------------

@pytest.mark.parametrize("mss", [1448, 7])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_v0_tokens_are_read_and_framing_goes_on_after_them(mechanism, mss):
    talk, sasl = authenticated_talk(mechanism, handshake=0)
    items = decode(talk.messages, mss=mss)
    assert of(Problem, items) == []
    frames = of(KafkaFrame, items)
    assert [(f.direction, f.api_key, f.correlation_id, f.frame) for f in frames] == [
        (m.direction, m.api_key, m.correlation_id, m.data[4:]) for m in kafka_messages(talk)]
    assert [f.sasl_mechanism for f in frames if f.api_key == 17] == [mechanism] * 2
    [summary] = of(ConnectionSummary, items)
    assert summary[5:] == (4, 4, False, None, None, mechanism, USERS[mechanism], 0, "authenticated", None, 1, None)
    tables = tables_of(items)
    for name, table in tables.items():
        assert table_leaks(table, sasl.secrets) == [], name


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_v0_success_shows_in_the_brokers_last_token_without_later_requests(mechanism):
    """kafka-python's first connection authenticates and closes without another request."""
    talk, _ = authenticated_talk(mechanism, handshake=0, then_requests=False)
    [summary] = of(ConnectionSummary, decode(talk.messages))
    assert (summary.sasl_user, summary.authentication) == (USERS[mechanism], "authenticated")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_v0_failure_is_the_broker_closing_the_connection(mechanism):
    talk, sasl = authenticated_talk(mechanism, handshake=0, wrong_password=True)
    items = decode(talk.messages)  # both sides close after the last token (segments(fin=True))
    [summary] = of(ConnectionSummary, items)
    assert (summary.sasl_user, summary.sasl_handshake_version, summary.authentication, summary.sasl_error_code) == (
        USERS[mechanism], 0, "failed", None)
    assert of(Problem, items) == []
    # The same capture stopped before the connection closed: the outcome is not known.
    [summary] = of(ConnectionSummary, decode(talk.messages, fin=False))
    assert summary.authentication == "incomplete"
    for table in tables_of(items).values():
        assert table_leaks(table, sasl.secrets) == []


def test_a_v0_token_that_starts_like_a_request_header_stays_a_token():
    """A bare token whose first bytes read as a Metadata v12 header (a GSSAPI token may be any bytes) is
    not taken for the client's next request: that one would carry the client id of its earlier ones."""
    talk = Talk()
    talk.request(SaslHandshakeRequest(mechanism="GSSAPI"), 0, SaslHandshakeResponse(mechanisms=["GSSAPI"]))
    token = bytes.fromhex("0003000c00000005") + b"\x00\x04ab\x00\x01" + bytes(range(40))
    talk.raw(CLIENT, token)
    talk.raw(BROKER, b"\x05\x04\x01\xff" + bytes(60))
    talk.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    items = decode(talk.messages)
    assert of(Problem, items) == []
    assert [(f.direction, f.api_key) for f in of(KafkaFrame, items)] == [
        ("request", 17), ("response", 17), ("request", 3), ("response", 3)]
    [summary] = of(ConnectionSummary, items)
    assert (summary.sasl_mechanism, summary.sasl_user, summary.authentication) == ("GSSAPI", None, "authenticated")


# ---- TLS -------------------------------------------------------------------------------------------------

def client_hello(server_name: str | None, maximum: ssl.TLSVersion | None = None) -> bytes:
    """The first bytes OpenSSL sends as a TLS client."""
    context = ssl.create_default_context()
    if server_name is None:
        context.check_hostname = False
    if maximum is not None:
        context.maximum_version = maximum
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def tls_talk(hello: bytes) -> list[Message]:
    return [Message(CLIENT, hello, -1, -1, -1), Message(BROKER, b"\x16\x03\x03\x00\x7a" + bytes(122), -1, -1, -1),
            Message(CLIENT, b"\x17\x03\x03\x01\x00" + bytes(256), -1, -1, -1)]


@pytest.mark.parametrize("server_name,maximum,version", [
    ("broker-1.kafka.example.test", None, "TLS 1.3"), ("localhost", ssl.TLSVersion.TLSv1_2, "TLS 1.2"),
    (None, None, "TLS 1.3")])
@pytest.mark.parametrize("broker_ports", [{9092}, set()])
@pytest.mark.parametrize("mss", [1448, 100])
def test_tls_connections_are_reported_with_server_name_and_version(server_name, maximum, version, broker_ports,
                                                                   mss):
    hello = client_hello(server_name, maximum)
    items = decode(tls_talk(hello), broker_ports, mss=mss)
    assert of(KafkaFrame, items) == []
    [problem] = of(Problem, items)
    named = f"for server name {server_name}" if server_name else "without a server name"
    assert (problem.kind, problem.direction, problem.reason) == (
        "tls", "request", f"encrypted, no key: a {version} ClientHello {named} (--keylog FILE with its secrets "
                          "decrypts it)")
    [summary] = of(ConnectionSummary, items)
    assert (summary.client, summary.broker) == ("10.0.0.1:50000", "10.0.0.2:9092")
    assert summary[5:11] == (0, 0, True, server_name, version, None)
    assert summary.tls_decrypted is False
    [row] = tables_of(items)["connections"].to_pylist()
    assert (row["tls"], row["tls_server_name"], row["tls_version"]) == (True, server_name, version)


def test_a_client_hello_over_several_records_and_one_cut_short():
    hello = client_hello("broker.example.test")
    body = hello[5:]
    split = (b"\x16\x03\x01" + (64).to_bytes(2, "big") + body[:64]
             + b"\x16\x03\x01" + (len(body) - 64).to_bytes(2, "big") + body[64:])
    assert read_client_hello(split) == read_client_hello(hello) == ClientHello("broker.example.test", "TLS 1.3",
                                                                               hello[11:43])
    [summary] = of(ConnectionSummary, decode(tls_talk(split), mss=50))
    assert (summary.tls_server_name, summary.tls_version) == ("broker.example.test", "TLS 1.3")
    # The capture stops inside the ClientHello: a TLS connection, its name unknown.
    items = decode([Message(CLIENT, hello[:200], -1, -1, -1)], fin=False)
    assert [p.kind for p in of(Problem, items)] == ["tls"]
    [summary] = of(ConnectionSummary, items)
    assert (summary.tls, summary.tls_server_name, summary.tls_version) == (True, None, None)


def test_plaintext_connections_have_a_summary_too():
    plain = Talk()
    plain.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    items = decode(plain.messages)
    [summary] = of(ConnectionSummary, items)
    assert summary == ConnectionSummary(CONNECTION, "10.0.0.1:50000", "10.0.0.2:9092", 0, summary.end_ts_ns, 1, 1,
                                        False, None, None, None, None, None, None, None, 0)
    assert summary.end_ts_ns == packets(segments(plain.messages))[-1].ts_ns


# ---- any bytes ----------------------------------------------------------------------------------------------

@given(client_tokens=st.lists(st.binary(max_size=300), min_size=1, max_size=3),
       server_tokens=st.lists(st.binary(max_size=300), max_size=3),
       mechanism=st.sampled_from(MECHANISMS + ["GSSAPI"]))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_v0_tokens_give_a_summary_and_no_error(client_tokens, server_tokens, mechanism):
    talk = Talk()
    talk.request(SaslHandshakeRequest(mechanism=mechanism), 0, SaslHandshakeResponse(mechanisms=[mechanism]))
    for token in client_tokens:
        talk.raw(CLIENT, token)
    for token in server_tokens:
        talk.raw(BROKER, token)
    talk.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    items = decode(talk.messages, mss=97)
    [summary] = of(ConnectionSummary, items)
    assert summary.sasl_mechanism == mechanism and summary.authentication in ("authenticated", "failed")
    assert [(f.direction, f.api_key) for f in of(KafkaFrame, items)][-2:] == [("request", 3), ("response", 3)]
    tables_of(items)


@given(st.binary(min_size=16, max_size=600), st.sampled_from([b"\x16\x03\x01", b"\x16\x03\x03", b"\x17\x03\x03"]))
@settings(max_examples=200, deadline=None)
def test_any_bytes_after_a_tls_record_header(data, header):
    hello = header + len(data).to_bytes(2, "big") + data
    read_client_hello(hello)
    items = decode([Message(CLIENT, hello, -1, -1, -1)], mss=64)
    [summary] = of(ConnectionSummary, items)
    assert summary.tls and [p.kind for p in of(Problem, items)] == ["tls"]

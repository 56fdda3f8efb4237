"""SASL mechanisms, sans I/O: RFC 7677's SCRAM-SHA-256 example exchange byte for byte, both sides of
SCRAM-SHA-256/512 against each other and against wrong passwords and malformed messages, PLAIN, and
OAUTHBEARER with Kafka's unsecured tokens."""
from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire.sasl import SaslError
from kafkawire.sasl.oauthbearer import (
    client_initial_response, parse_client_initial_response, unsecured_token, validate_unsecured_token,
)
from kafkawire.sasl.plain import parse_plain, plain_message
from kafkawire.sasl.scram import MECHANISMS, ScramClient, ScramServer

SHA256 = MECHANISMS["SCRAM-SHA-256"]


def test_rfc_7677_example_exchange():
    """RFC 7677 section 3: user "user", password "pencil"."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = SHA256.credential("pencil", salt, 4096)
    client = ScramClient(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    server = ScramServer(SHA256, {"user": credential}.get, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = client.first()
    assert first == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.first(first)
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = client.final(server_first)
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    server_final = server.final(final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client.verify(server_final)
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("name", sorted(MECHANISMS))
@settings(max_examples=20, deadline=None)
@given(user=st.text(min_size=1, max_size=20).filter(lambda u: "\x00" not in u), password=st.text(max_size=20))
def test_both_sides_agree_and_a_wrong_password_fails(name, user, password):
    mechanism = MECHANISMS[name]
    credentials = {user: mechanism.credential(password)}
    client, server = ScramClient(mechanism, user, password), ScramServer(mechanism, credentials.get)
    client.verify(server.final(client.final(server.first(client.first()))))
    assert server.username == user
    wrong = ScramClient(mechanism, user, password + "x")
    server = ScramServer(mechanism, credentials.get)
    with pytest.raises(SaslError, match="Invalid user credentials"):
        server.final(wrong.final(server.first(wrong.first())))


def test_scram_refusals():
    credential = SHA256.credential("secret")
    lookup = {"alice": credential}.get
    with pytest.raises(SaslError, match="Invalid user credentials"):
        ScramServer(SHA256, lookup).first(b"n,,n=mallory,r=abc")
    with pytest.raises(SaslError, match="authorization id"):
        ScramServer(SHA256, lookup).first(b"n,a=bob,n=alice,r=abc")
    for bad in (b"", b"p=x,,n=alice,r=a", b"n,,r=abc,n=alice", b"n,,n=alice", b"\xff\xfe", b"n,,n=al=ice,r=a"):
        with pytest.raises(SaslError):
            ScramServer(SHA256, lookup).first(bad)
    server = ScramServer(SHA256, lookup)
    server.first(b"n,,n=alice,r=abc")
    with pytest.raises(SaslError, match="nonce"):
        server.final(b"c=biws,r=abcOTHER,p=AAAA")
    with pytest.raises(SaslError):
        ScramServer(SHA256, lookup).final(b"c=biws,r=abc,p=AAAA")  # final before first
    weak = SHA256.credential("secret", iterations=1000)
    with pytest.raises(SaslError, match="less than the minimum"):
        ScramServer(SHA256, {"alice": weak}.get).first(b"n,,n=alice,r=abc")


def test_scram_extensions_and_escaped_names():
    credential = SHA256.credential("pw")
    client = ScramClient(SHA256, "a,b=c", "pw", extensions={"tokenauth": "true"})
    assert client.first().endswith(b"n=a=2Cb=3Dc,r=" + client.first().split(b"r=")[1])
    server = ScramServer(SHA256, {"a,b=c": credential}.get)
    client.verify(server.final(client.final(server.first(client.first()))))
    assert server.username == "a,b=c" and server.extensions == {"tokenauth": "true"}


def test_plain():
    assert parse_plain(plain_message("alice", "alice-secret")) == ("alice", "alice-secret")
    assert parse_plain(plain_message("alice", "pw", "alice")) == ("alice", "pw")
    for bad in (b"alice\0pw", b"\0\0pw", b"\0alice\0", b"bob\0alice\0pw", b"\xff\0a\0b"):
        with pytest.raises(SaslError):
            parse_plain(bad)


def test_oauthbearer_unsecured_tokens():
    now_s = 1_800_000_000
    token = unsecured_token("alice", 3600, issued_at_s=now_s, scope=["read", "write"])
    message = client_initial_response(token, {"traceId": "123"})
    assert message.startswith(b"n,,\x01auth=Bearer ") and message.endswith(b"\x01\x01")
    got, extensions = parse_client_initial_response(message)
    assert got == token and extensions == {"traceId": "123"}
    valid = validate_unsecured_token(token, now_s * 1000, required_scope=("read",))
    assert (valid.principal, valid.expires_ms, valid.scope) == ("alice", (now_s + 3600) * 1000, ("read", "write"))
    with pytest.raises(SaslError, match="expired"):
        validate_unsecured_token(token, (now_s + 3601) * 1000)
    assert validate_unsecured_token(token, (now_s + 3601) * 1000, clock_skew_ms=2000).principal == "alice"
    with pytest.raises(SaslError, match="scope"):
        validate_unsecured_token(token, now_s * 1000, required_scope=("admin",))
    signed = token + "c2ln"  # a signature where none may be
    with pytest.raises(SaslError, match="alg 'none'"):
        validate_unsecured_token(signed, now_s * 1000)
    no_subject = unsecured_token("", 10, issued_at_s=now_s)
    with pytest.raises(SaslError, match="principal"):
        validate_unsecured_token(no_subject, now_s * 1000)
    for bad in (b"", b"n,,\x01\x01", b"n,,\x01auth=Basic x\x01\x01", b"n,,\x01auth=Bearer t\x01b@d=1\x01\x01",
                b"garbage"):
        with pytest.raises(SaslError):
            parse_client_initial_response(bad)
    for bad in ("a.b", "a.b.c.d", "!!!.e30.", "e30.bm90IGpzb24.", "W10.e30."):
        with pytest.raises(SaslError):
            validate_unsecured_token(bad, now_s * 1000)

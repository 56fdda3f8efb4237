"""kafkawire.sasl.redact on the tokens the mechanisms really exchange: what is left names the user and
holds no secret, a redacted token redacts to itself and names the same user, and a token of an unknown
mechanism (or one that does not parse) is replaced whole."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire.sasl.oauthbearer import ERROR_CHALLENGE, client_initial_response, unsecured_token
from kafkawire.sasl.plain import plain_message
from kafkawire.sasl.redact import REDACTED, redact_token, token_user
from kafkawire.sasl.scram import MECHANISMS, ScramClient, ScramServer


def scram_exchange(mechanism: str, user: str, password: str) -> list[tuple[bytes, bool]]:
    """(message, from the client) of a whole SCRAM exchange."""
    scram = MECHANISMS[mechanism]
    client = ScramClient(scram, user, password)
    server = ScramServer(scram, {user: scram.credential(password)}.get)
    client_first = client.first()
    server_first = server.first(client_first)
    client_final = client.final(server_first)
    server_final = server.final(client_final)
    return [(client_first, True), (server_first, False), (client_final, True), (server_final, False)]


def scram_secrets(messages: list[tuple[bytes, bool]]) -> list[bytes]:
    return [m.group(1) for message, _ in messages for m in re.finditer(rb"(?:^|,)[psv]=([^,]+)", message)]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@given(user=st.text(st.characters(codec="utf-8", exclude_characters="\0"), min_size=1, max_size=20))
@settings(max_examples=25, deadline=None)
def test_scram_keeps_user_and_nonces_and_drops_proof_salt_and_signature(mechanism, user):
    messages = scram_exchange(mechanism, user, "pencil-and-paper")
    secrets = scram_secrets(messages)
    assert len(secrets) == 3
    for message, from_client in messages:
        redacted = redact_token(mechanism, message, from_client)
        assert not any(secret in redacted for secret in secrets)
        assert redact_token(mechanism, redacted, from_client) == redacted
        assert re.findall(rb"r=[^,]*", redacted) == re.findall(rb"r=[^,]*", message)  # nonces are no secret
    assert token_user(mechanism, messages[0][0]) == user
    assert token_user(mechanism, redact_token(mechanism, messages[0][0])) == user


def test_plain_keeps_the_user():
    token = plain_message("alice", "alice-secret", "alice")
    redacted = redact_token("PLAIN", token)
    assert redacted == b"alice\0alice\0" + REDACTED
    assert redact_token("PLAIN", redacted) == redacted
    assert token_user("PLAIN", token) == token_user("PLAIN", redacted) == "alice"
    assert redact_token("PLAIN", b"no separators, all secret") == REDACTED
    assert redact_token("PLAIN", b"", False) == b"" and redact_token("PLAIN", b"anything", False) == REDACTED


@pytest.mark.parametrize("subject", ["carol", "ca]rol x", "dave\x01"])
def test_oauthbearer_keeps_the_subject(subject):
    token = unsecured_token(subject, 3600, issued_at_s=1_700_000_000)
    message = client_initial_response(token, {"traceId": "42"})
    redacted = redact_token("OAUTHBEARER", message)
    assert token.encode() not in redacted and token.split(".")[1].encode() not in redacted
    assert redact_token("OAUTHBEARER", redacted) == redacted
    assert token_user("OAUTHBEARER", message) == token_user("OAUTHBEARER", redacted) == subject
    # The broker's error challenge and the client's answer to it hold nothing to hide.
    assert redact_token("OAUTHBEARER", ERROR_CHALLENGE, False) == ERROR_CHALLENGE
    assert redact_token("OAUTHBEARER", b"\x01") == b"\x01"
    assert redact_token("OAUTHBEARER", b"n,,\x01auth=Bearer not-a-jws\x01\x01") == (
        b"n,,\x01auth=Bearer [redacted]\x01\x01")


def test_unknown_mechanisms_are_replaced_whole():
    for mechanism in (None, "GSSAPI"):
        assert redact_token(mechanism, b"\x60\x82\x02\x5d kerberos ticket") == REDACTED
        assert redact_token(mechanism, b"server token", False) == REDACTED
        assert token_user(mechanism, b"n,,n=bob,r=abc") is None

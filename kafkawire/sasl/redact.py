"""SASL tokens with their secrets taken out, for anything that records traffic (the broker's wire tap,
the capture tables): what is left names the mechanism's user and nothing that would let anyone log
in or attack a password offline.

- PLAIN: ``authzid NUL user NUL [redacted]``.
- SCRAM: the client-first message is kept (user and nonce); the client-final message keeps its channel
  binding and nonce with the proof replaced; the server's salt and signature are replaced.
- OAUTHBEARER: the token is replaced by its subject, as ``auth=Bearer [redacted sub=alice]``.

A redacted token redacts to itself and names the same user, so that a capture of the broker's tap
(tokens redacted already) decodes as a capture of the wire does.
"""
from __future__ import annotations

import re

from . import SaslError
from .oauthbearer import parse_client_initial_response, parse_token

__all__ = ["redact_token", "token_user", "REDACTED"]

REDACTED = b"[redacted]"
_SCRAM_SECRET = re.compile(rb"(^|,)(p|s|v)=[^,]*")
_REDACTED_BEARER = re.compile(rb"n,,\x01auth=Bearer \[redacted(?: sub=(.*))?\]\x01\x01", re.DOTALL)


def redact_token(mechanism: str | None, token: bytes, from_client: bool = True) -> bytes:
    """``token`` without its secrets; tokens that do not parse are replaced whole."""
    token = bytes(token)
    if not token:
        return token
    if mechanism is not None and mechanism.startswith("SCRAM-"):
        return _SCRAM_SECRET.sub(lambda m: m.group(1) + m.group(2) + b"=" + REDACTED, token)
    if not from_client:  # PLAIN answers nothing; OAUTHBEARER at most an error in JSON
        return token if mechanism == "OAUTHBEARER" else REDACTED
    if mechanism == "PLAIN":
        parts = token.split(b"\0")
        return b"\0".join(parts[:2]) + b"\0" + REDACTED if len(parts) == 3 else REDACTED
    if mechanism == "OAUTHBEARER":
        if token == b"\x01" or _REDACTED_BEARER.fullmatch(token):  # the answer to an error challenge; redacted
            return token
        user = token_user(mechanism, token)
        return b"n,,\x01auth=Bearer [redacted" + (b" sub=" + user.encode() if user else b"") + b"]\x01\x01"
    return REDACTED


def token_user(mechanism: str | None, token: bytes) -> str | None:
    """The user a client token names, where the mechanism puts one in it."""
    token = bytes(token)
    try:
        if mechanism == "PLAIN":
            parts = token.split(b"\0")
            return parts[1].decode() if len(parts) == 3 else None
        if mechanism is not None and mechanism.startswith("SCRAM-"):
            match = re.search(rb"(?:^|,)n=([^,]*)", token.split(b",", 2)[-1] if token.startswith(b"n,") else b"")
            return match.group(1).decode().replace("=2C", ",").replace("=3D", "=") if match else None
        if mechanism == "OAUTHBEARER":
            redacted = _REDACTED_BEARER.fullmatch(token)
            if redacted:
                return redacted.group(1).decode() if redacted.group(1) is not None else None
            bearer, _ = parse_client_initial_response(token)
            subject = parse_token(bearer)[1].get("sub")
            return subject if isinstance(subject, str) else None
    except (SaslError, UnicodeDecodeError, ValueError):
        return None
    return None

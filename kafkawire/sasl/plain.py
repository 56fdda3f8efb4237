"""SASL PLAIN (RFC 4616): one client message, ``[authzid] NUL authcid NUL passwd``, in UTF-8.

Kafka's PlainSaslServer accepts an authorization id only when it equals the authentication id.
"""
from __future__ import annotations

from . import SaslError

__all__ = ["plain_message", "parse_plain"]


def plain_message(username: str, password: str, authorization_id: str = "") -> bytes:
    """What the client sends."""
    return f"{authorization_id}\0{username}\0{password}".encode()


def parse_plain(message: bytes) -> tuple[str, str]:
    """``(username, password)`` of a client message (raises SaslError when malformed)."""
    try:
        text = bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from None
    parts = text.split("\0")
    if len(parts) != 3:
        raise SaslError("Invalid SASL/PLAIN response: expected 3 tokens")
    authorization_id, username, password = parts
    if not username:
        raise SaslError("Authentication failed: username not specified")
    if not password:
        raise SaslError("Authentication failed: password not specified")
    if authorization_id and authorization_id != username:
        raise SaslError("Authentication failed: Client requested an authorization id that is different from "
                        "username")
    return username, password

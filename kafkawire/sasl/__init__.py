"""SASL mechanisms as Kafka speaks them, sans I/O: the messages each side writes and checks, for the
broker's authenticator and the client alike (neither imports the other; both import this).

- ``plain``: PLAIN (RFC 4616), ``authzid NUL user NUL password``.
- ``scram``: SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): client and server state machines,
  credentials derived and stored as salt, stored key and server key, never the password.
- ``oauthbearer``: OAUTHBEARER (RFC 7628) with Kafka's unsecured JWS tokens (``alg: none``) and their
  validation (expiry, subject, scope).

Every parse error raises ``SaslError`` with a message fit to send back as Kafka's error message.
"""
from __future__ import annotations

__all__ = ["SaslError", "MECHANISMS"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class SaslError(ValueError):
    """An authentication exchange that failed: malformed, or the credentials are wrong."""

"""SASL authentication as one connection's bytes show it, and SASL bodies with their secrets taken out.

``SaslExchanges`` follows a connection's SASL exchanges (``correlation`` feeds it the SaslHandshake and
SaslAuthenticate frames, and the raw tokens that follow a v0 SaslHandshake): the mechanism the
handshake names, the user the client's first token names (``sasl.redact.token_user``: PLAIN's authcid,
SCRAM's ``n=``, OAUTHBEARER's token subject) and the outcome:

- ``authenticated``: the broker's last message says so (PLAIN: an answer without an error; SCRAM: the
  server-final message, ``v=``; OAUTHBEARER: an empty answer), or the client went on with other
  Kafka requests, which a broker serves only after a successful exchange;
- ``failed``: an error code in a SaslHandshake or SaslAuthenticate response (SASL_AUTHENTICATION_FAILED,
  UNSUPPORTED_SASL_MECHANISM...) or SCRAM's ``e=``; after a v0 handshake, whose raw tokens carry no
  error code, the connection closing (FIN or RST) before the broker's last token showed success,
  which is how Kafka fails it (for the mechanisms above, whose success it shows);
- ``incomplete``: neither (the capture stopped in the middle of the exchange).

A new SaslHandshake starts a new exchange (KIP-368 re-authentication).

``redact_body`` is what every table sees of a SaslAuthenticate body: its token with the secrets
replaced (``sasl.redact.redact_token``: PLAIN's password, SCRAM's proof, salt and server signature,
OAUTHBEARER's token), the whole token when the mechanism is unknown.
"""
from __future__ import annotations

from ...errors import DecodeError
from ...framing import read_request, read_response
from ...messages import ApiKey
from ...sasl.redact import redact_token, token_user

__all__ = ["SaslExchanges", "redact_body", "SASL_HANDSHAKE", "SASL_AUTHENTICATE", "AUTHENTICATED", "FAILED",
           "INCOMPLETE"]

SASL_HANDSHAKE, SASL_AUTHENTICATE = ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE
AUTHENTICATED, FAILED, INCOMPLETE = "authenticated", "failed", "incomplete"
_SUCCESS_SHOWN = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def redact_body(body, mechanism: str | None):
    """A decoded SaslAuthenticateRequest or SaslAuthenticateResponse with its token redacted (in place)."""
    body.auth_bytes = redact_token(mechanism, bytes(body.auth_bytes), body.NAME.endswith("Request"))
    return body


def _request_body(frame: bytes):
    try:
        return read_request(frame).body
    except DecodeError:
        return None


def _response_body(frame: bytes, api_key: int, version: int):
    try:
        return read_response(frame, api_key, version).body
    except DecodeError:
        return None


class SaslExchanges:
    """The SASL exchanges of one connection (one epoch of it): the last one's mechanism, user, handshake
    version, outcome and error code, and how many there were (see the module docstring)."""

    __slots__ = ("mechanism", "user", "handshake_version", "outcome", "error_code", "count")

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.user: str | None = None
        self.handshake_version: int | None = None
        self.outcome: str | None = None
        self.error_code: int | None = None
        self.count = 0

    # ---- Kafka frames ---------------------------------------------------------------------------
    def handshake_request(self, frame: bytes, version: int) -> None:
        body = _request_body(frame)
        self._begin(body.mechanism if body is not None else None, version)

    def handshake_response(self, frame: bytes, version: int) -> None:
        body = _response_body(frame, SASL_HANDSHAKE, version)
        if body is not None and body.error_code:
            self._decide(FAILED, body.error_code)

    def authenticate_request(self, frame: bytes) -> None:
        if self.outcome is None:  # the handshake was not captured
            self._begin(None, None)
        body = _request_body(frame)
        if body is not None:
            self.client_token(bytes(body.auth_bytes))

    def authenticate_response(self, frame: bytes, version: int) -> None:
        body = _response_body(frame, SASL_AUTHENTICATE, version)
        if body is not None:
            self.server_token(bytes(body.auth_bytes), body.error_code)

    def kafka_request(self) -> None:
        """A request other than SASL's: the exchange before it succeeded."""
        self._decide(AUTHENTICATED)

    def closed(self) -> None:
        """The connection ended (FIN or RST): a v0 exchange still open was failed by the broker (for the
        mechanisms whose success the broker's last token would have shown)."""
        if self.handshake_version == 0 and self.mechanism in _SUCCESS_SHOWN:
            self._decide(FAILED)

    # ---- tokens -----------------------------------------------------------------------------------
    def client_token(self, token: bytes) -> None:
        if self.user is None:
            self.user = token_user(self.mechanism, token)

    def server_token(self, token: bytes, error_code: int = 0) -> None:
        mechanism = self.mechanism or ""
        if error_code:
            self._decide(FAILED, error_code)
        elif mechanism == "PLAIN" or (mechanism == "OAUTHBEARER" and not token) or (
                mechanism.startswith("SCRAM-") and token.startswith(b"v=")):
            self._decide(AUTHENTICATED)
        elif mechanism.startswith("SCRAM-") and token.startswith(b"e="):
            self._decide(FAILED)

    # ---- state ------------------------------------------------------------------------------------
    def _begin(self, mechanism: str | None, handshake_version: int | None) -> None:
        self.count += 1
        self.mechanism, self.handshake_version = mechanism, handshake_version
        self.user = self.error_code = None
        self.outcome = INCOMPLETE

    def _decide(self, outcome: str, error_code: int | None = None) -> None:
        if self.outcome == INCOMPLETE:  # the first sign decides
            self.outcome, self.error_code = outcome, error_code

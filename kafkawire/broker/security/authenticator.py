"""One connection's SASL authentication on the broker, as Kafka's ``SaslServerAuthenticator``:

- before authenticating, only ApiVersions, SaslHandshake and SaslAuthenticate are served; any other
  request closes the connection;
- SaslHandshake names the mechanism (UNSUPPORTED_SASL_MECHANISM and the enabled ones if it is not);
  after a v0 handshake the tokens come as bare size-prefixed frames, after v1 inside SaslAuthenticate;
- a failed exchange answers SASL_AUTHENTICATION_FAILED with a message, and the connection is closed;
- SCRAM with the ``tokenauth=true`` extension authenticates with a delegation token (KIP-48): the user
  is the token id, the password its HMAC in base64, the principal the token's owner, and the connection
  is token-authenticated (it may not manage tokens);
- with ``connections.max.reauth.ms`` (or an OAUTHBEARER or delegation token's expiry, if sooner) the session has a
  lifetime, told to the client in SaslAuthenticate v1+: the client re-authenticates (KIP-368) with the
  same mechanism and principal before it ends, and a request after it ends closes the connection.

It does no I/O itself; only checking a signed OAUTHBEARER token may wait (for the listener's key set to be
read again, on a worker thread: ``jwks``), so ``authenticate`` is a coroutine.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ...error_codes import ErrorCode
from ...messages import ApiKey
from ...sasl import SaslError
from ...sasl.oauthbearer import (ERROR_CHALLENGE, ValidatedToken, parse_client_initial_response,
                                  validate_unsecured_token)
from ...sasl.plain import parse_plain
from ...sasl.scram import MECHANISMS as SCRAM, ScramCredential, ScramMechanism, ScramServer
from ..delegation_tokens import DelegationTokens, TokenInformation
from .listener_security import ListenerSecurity
from .scram_store import ScramStore

__all__ = ["Authenticator", "Step", "SASL_APIS"]

# What a SASL listener serves before authentication.
SASL_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.API_VERSIONS})


@dataclass
class Step:
    """The answer to one token: the bytes back, or an error (after which the connection closes)."""

    token: bytes = b""
    error: int = ErrorCode.NONE
    message: str | None = None
    session_lifetime_ms: int = 0


class Authenticator:
    def __init__(self, security: ListenerSecurity, scram: ScramStore, tokens: DelegationTokens | None = None,
                 clock: Callable[[], float] = time.time):
        self.security = security
        self.scram = scram
        self.tokens = tokens
        self.token_authenticated = False  # the last authentication was with a delegation token
        self._token: TokenInformation | None = None  # the delegation token of the SCRAM exchange under way
        self._clock = clock
        self.principal: str | None = None  # "User:<name>" once authenticated
        self.mechanism: str | None = None
        self.complete = False
        self.failed_with: int | None = None  # the error code of the last exchange the broker failed
        self.raw_tokens = False  # after a v0 handshake: tokens are bare frames
        self.expires_ms: float | None = None
        self._exchange: ScramServer | None = None  # SCRAM's state between its two tokens
        self._handshaken = False
        self._reauthenticating = False
        self._failing: str | None = None  # OAUTHBEARER: the error to fail with once the client says \x01

    def _now_ms(self) -> float:
        return self._clock() * 1000

    @property
    def expired(self) -> bool:
        return self.expires_ms is not None and self._now_ms() >= self.expires_ms

    def may_serve(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be served now (if not, close the connection)."""
        if api_key in SASL_APIS:
            return True
        return self.complete and not self.expired and not self._handshaken

    def handshake(self, mechanism: str, version: int) -> tuple[int, tuple[str, ...]]:
        """SaslHandshake: ``(error code, enabled mechanisms)``; an error closes the connection."""
        enabled = self.security.mechanisms
        if self._handshaken or (self.complete and version == 0):
            return self._fail(ErrorCode.ILLEGAL_SASL_STATE), enabled
        if mechanism not in enabled:
            return self._fail(ErrorCode.UNSUPPORTED_SASL_MECHANISM), enabled
        if self.complete:
            if mechanism != self.mechanism:  # KIP-368: re-authentication keeps the mechanism
                return self._fail(ErrorCode.ILLEGAL_SASL_STATE), enabled
            self._reauthenticating = True
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._handshaken = True
        self._exchange = None
        return ErrorCode.NONE, enabled

    async def authenticate(self, token: bytes, authenticate_version: int = 0) -> Step:
        """One token of the exchange (from SaslAuthenticate, or a bare frame after a v0 handshake)."""
        if not self._handshaken:
            return Step(error=self._fail(ErrorCode.ILLEGAL_SASL_STATE), message="SaslAuthenticate before SaslHandshake")
        try:
            reply, principal, lifetime_ms = await self._step(bytes(token))
        except SaslError as error:
            self._handshaken = False
            self.raw_tokens = False
            return Step(error=self._fail(ErrorCode.SASL_AUTHENTICATION_FAILED), message=str(error))
        if principal is None:
            return Step(token=reply)  # more to come
        if self._reauthenticating and principal != self.principal:
            self._handshaken = False
            return Step(error=self._fail(ErrorCode.SASL_AUTHENTICATION_FAILED),
                        message="Cannot change principals during re-authentication")
        self.principal, self.complete = principal, True
        self._handshaken = self._reauthenticating = False
        self.raw_tokens = False
        reauth_ms = self.security.reauth_ms if authenticate_version >= 1 else 0
        lifetime = min(x for x in (reauth_ms or None, lifetime_ms) if x is not None) if (reauth_ms or lifetime_ms) \
            else None
        self.expires_ms = self._now_ms() + lifetime if lifetime is not None else None
        return Step(token=reply, session_lifetime_ms=int(lifetime) if lifetime is not None else 0)

    def _fail(self, error_code: int) -> int:
        self.failed_with = error_code
        return error_code

    async def _step(self, token: bytes) -> tuple[bytes, str | None, float | None]:
        """``(reply, principal once complete, credential lifetime in ms or None)``."""
        mechanism = self.mechanism
        if mechanism == "PLAIN":
            user, password = parse_plain(token)
            expected = self.security.plain_users.get(user)
            if expected is None or expected != password:
                raise SaslError("Authentication failed: Invalid username or password")
            return b"", f"User:{user}", None
        if mechanism in SCRAM:
            if self._exchange is None:
                scram = SCRAM[mechanism]
                self._exchange = ScramServer(scram, lambda user: self._scram_credential(scram, user))
                return self._exchange.first(token), None, None
            final = self._exchange.final(token)
            token_used, self._token = self._token, None
            self.token_authenticated = token_used is not None
            if token_used is not None:  # the owner's session, until the token's expiry
                return final, token_used.owner, max(0.0, token_used.expiry_ms - self._now_ms())
            return final, f"User:{self._exchange.username}", None
        if mechanism == "OAUTHBEARER":
            if self._failing is not None:  # the client acknowledged the error challenge
                message, self._failing = self._failing, None
                raise SaslError(message)
            try:
                bearer, _extensions = parse_client_initial_response(token)
                validated = await self._validate_token(bearer)
            except SaslError as error:
                self._failing = f"Authentication failed: {error}"
                return ERROR_CHALLENGE, None, None
            return b"", f"User:{validated.principal}", max(0.0, validated.expires_ms - self._now_ms())
        raise SaslError(f"Unsupported SASL mechanism {mechanism}")

    def _scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        """The user's credential, or with ``tokenauth=true`` the delegation token's (user = token id)."""
        exchange = self._exchange
        self._token = None
        if exchange is not None and exchange.extensions.get("tokenauth", "").lower() == "true":
            found = self.tokens.authenticating(user, mechanism) if self.tokens is not None else None
            if found is None:
                return None
            credential, self._token = found
            return credential
        return self.scram.lookup(mechanism)(user)

    async def _validate_token(self, token: str) -> ValidatedToken:
        if self.security.oauth_validator is not None:
            return await self.security.oauth_validator.validate(token)
        options = self.security.oauth
        required = tuple(options.get("unsecuredValidatorRequiredScope", "").split(","))
        return validate_unsecured_token(
            token, int(self._now_ms()), principal_claim=options.get("unsecuredValidatorPrincipalClaimName", "sub"),
            scope_claim=options.get("unsecuredValidatorScopeClaimName", "scope"),
            required_scope=tuple(s.strip() for s in required if s.strip()),
            clock_skew_ms=int(options.get("unsecuredValidatorAllowableClockSkewMs", "0")))

"""The client's side of a SASL exchange, sans I/O: the tokens to send in SaslAuthenticate requests and
the checks of the broker's answers, for PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (the messages
themselves are ``kafkawire.sasl``'s, shared with the broker).

An exchange starts with ``first()``; each answer of the broker goes to ``step(answer)``, which returns
the next token, or None once the exchange is complete (SCRAM's server signature checked). A failure
raises SaslError with a message fit for SaslAuthenticationException.

OAUTHBEARER tokens come from an ``OAuthBearerTokens`` source: the application's callback
(confluent-kafka's ``oauth_cb``), or an unsecured JWS made here as Kafka's default login does for
development, from librdkafka's ``sasl.oauthbearer.config`` (``principal=alice scope=a,b lifeSeconds=3600
extension_traceId=42``) or the ``unsecuredLogin*`` options of Java's ``OAuthBearerLoginModule``. A token
is reused until 80% of its lifetime has passed (as Kafka's login refresh does), so a re-authentication
near the end of a session gets a fresh one.

``reauthentication_delay_ms`` is KIP-368's schedule: a random point between 85% and 95% of the session
lifetime the broker granted.
"""
from __future__ import annotations

import random
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkawire.sasl import SaslError
from kafkawire.sasl.oauthbearer import client_initial_response, unsecured_token
from kafkawire.sasl.plain import plain_message
from kafkawire.sasl.scram import MECHANISMS as SCRAM_MECHANISMS, ScramClient

__all__ = ["SaslExchange", "PlainExchange", "ScramExchange", "OAuthBearerExchange", "OAuthBearerTokens",
           "UnsecuredTokenSettings", "OAuthCallback", "reauthentication_delay_ms", "REAUTH_WINDOW"]

REAUTH_WINDOW = (0.85, 0.95)  # KIP-368: re-authenticate within this fraction of the session lifetime
_TOKEN_REFRESH_FRACTION = 0.8  # Kafka's sasl.login.refresh.window.factor default
_OAUTH_ACK = b"\x01"  # the client's answer to an OAUTHBEARER error challenge (RFC 7628 3.2.3)

# confluent-kafka's oauth_cb: called with sasl.oauthbearer.config, returns (token, expiry as seconds since
# the epoch) or (token, expiry, principal, extensions).
OAuthCallback = Callable[[str | None], tuple[Any, ...]]


def reauthentication_delay_ms(session_lifetime_ms: float, rng: random.Random | None = None) -> float:
    """When to re-authenticate, counted from the end of the last authentication (KIP-368)."""
    low, high = REAUTH_WINDOW
    return session_lifetime_ms * (rng or random).uniform(low, high)


class SaslExchange:
    """One authentication of one connection (see the module docstring)."""

    mechanism = ""

    def first(self) -> bytes:
        raise NotImplementedError

    def step(self, answer: bytes) -> bytes | None:
        raise NotImplementedError


class PlainExchange(SaslExchange):
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str):
        self._message = plain_message(username, password)

    def first(self) -> bytes:
        return self._message

    def step(self, answer: bytes) -> bytes | None:
        return None  # the broker answers PLAIN with nothing; a refusal comes as an error code


class ScramExchange(SaslExchange):
    """SCRAM; with ``token_auth`` the user is a delegation token's id and the password its HMAC in base64
    (KIP-48: the ``tokenauth=true`` extension of the client-first message, as Kafka's ScramLoginModule
    sends it when its JAAS options say ``tokenauth="true"``)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None,
                 token_auth: bool = False):
        self.mechanism = mechanism
        self._client = ScramClient(SCRAM_MECHANISMS[mechanism], username, password, nonce=nonce,
                                   extensions={"tokenauth": "true"} if token_auth else None)
        self._sent_final = False

    def first(self) -> bytes:
        return self._client.first()

    def step(self, answer: bytes) -> bytes | None:
        if not self._sent_final:
            self._sent_final = True
            return self._client.final(bytes(answer))
        self._client.verify(bytes(answer))  # the broker must prove it holds this user's credential
        return None


class OAuthBearerExchange(SaslExchange):
    mechanism = "OAUTHBEARER"

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None):
        self._message = client_initial_response(token, dict(extensions or {}))
        self._refused: bytes | None = None

    def first(self) -> bytes:
        return self._message

    def step(self, answer: bytes) -> bytes | None:
        answer = bytes(answer)
        if not answer:
            return None
        if self._refused is not None:
            raise SaslError(f"OAUTHBEARER token refused: {self._refused.decode(errors='replace')}")
        self._refused = answer  # an error challenge such as {"status":"invalid_token"}: acknowledge it,
        return _OAUTH_ACK  # and the broker fails the exchange with its message


@dataclass(frozen=True)
class UnsecuredTokenSettings:
    """What an unsecured development token says: its principal, lifetime, scope, other claims, and the
    SASL extensions sent beside it."""

    principal: str
    lifetime_s: float = 3600.0
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    scope: tuple[str, ...] | None = None
    claims: dict[str, object] = field(default_factory=dict)
    extensions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_librdkafka(cls, text: str) -> UnsecuredTokenSettings:
        """From librdkafka's ``sasl.oauthbearer.config`` (space-separated ``key=value``; raises ValueError)."""
        values: dict[str, str] = {}
        extensions: dict[str, str] = {}
        for pair in shlex.split(text):
            key, equals, value = pair.partition("=")
            if not equals:
                raise ValueError(f"{pair!r} is not key=value")
            if key.startswith("extension_"):
                extensions[key[len("extension_"):]] = value
            elif key in ("principal", "principalClaimName", "scopeClaimName", "scope", "lifeSeconds"):
                values[key] = value
            else:
                raise ValueError(f"unknown key {key!r} (principal, principalClaimName, scope, scopeClaimName, "
                                 f"lifeSeconds, extension_<name>)")
        if not values.get("principal"):
            raise ValueError("principal=<name> is required")
        scope = tuple(s for s in values["scope"].split(",") if s) if "scope" in values else None
        return cls(values["principal"], _lifetime(values.get("lifeSeconds", "3600")),
                   values.get("principalClaimName", "sub"), values.get("scopeClaimName", "scope"), scope,
                   extensions=extensions)

    @classmethod
    def from_jaas(cls, options: Mapping[str, str]) -> UnsecuredTokenSettings:
        """From the ``unsecuredLogin*`` options of Java's OAuthBearerLoginModule (raises ValueError)."""
        principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
        scope_claim = options.get("unsecuredLoginScopeClaimName", "scope")
        claims: dict[str, object] = {}
        extensions: dict[str, str] = {}
        for key, value in options.items():
            if key.startswith("unsecuredLoginStringClaim_"):
                claims[key[len("unsecuredLoginStringClaim_"):]] = value
            elif key.startswith("unsecuredLoginNumberClaim_"):
                try:
                    claims[key[len("unsecuredLoginNumberClaim_"):]] = float(value) if "." in value else int(value)
                except ValueError:
                    raise ValueError(f"{key} must be a number, not {value!r}") from None
            elif key.startswith("unsecuredLoginListClaim_"):  # the value's first character separates the items
                claims[key[len("unsecuredLoginListClaim_"):]] = [s for s in value[1:].split(value[:1]) if s] \
                    if value else []
            elif key.startswith("unsecuredLoginExtension_"):
                extensions[key[len("unsecuredLoginExtension_"):]] = value
        principal = claims.pop(principal_claim, None)
        if not isinstance(principal, str) or not principal:
            raise ValueError(f"unsecuredLoginStringClaim_{principal_claim}=\"<name>\" is required")
        scope = claims.pop(scope_claim, None)
        return cls(principal, _lifetime(options.get("unsecuredLoginLifetimeSeconds", "3600")), principal_claim,
                   scope_claim, tuple(str(s) for s in scope) if isinstance(scope, list) else None, claims, extensions)

    def token(self, now_s: float) -> str:
        claims = dict(self.claims)
        if self.principal_claim != "sub":
            claims[self.principal_claim] = self.principal
        scope = list(self.scope) if self.scope is not None else None
        if scope is not None and self.scope_claim != "scope":
            claims[self.scope_claim], scope = scope, None
        return unsecured_token(self.principal, self.lifetime_s, issued_at_s=now_s, scope=scope, claims=claims)


def _lifetime(text: str) -> float:
    try:
        lifetime = float(text)
    except ValueError:
        raise ValueError(f"the token lifetime must be a number of seconds, not {text!r}") from None
    if lifetime <= 0:
        raise ValueError(f"the token lifetime must be positive, not {text!r}")
    return lifetime


class OAuthBearerTokens:
    """Where OAUTHBEARER tokens come from: ``callback`` (called with ``callback_config``) or ``unsecured``
    settings. ``current(now_s)`` gives ``(token, extensions)``, fetching a new one once 80% of the
    last one's lifetime has passed."""

    def __init__(self, *, callback: OAuthCallback | None = None, callback_config: str | None = None,
                 unsecured: UnsecuredTokenSettings | None = None):
        if (callback is None) == (unsecured is None):
            raise ValueError("OAUTHBEARER tokens come from a callback or from unsecured settings (one of them)")
        self._callback = callback
        self._callback_config = callback_config
        self._unsecured = unsecured
        self._token: tuple[str, dict[str, str]] | None = None
        self._refresh_at = 0.0
        self.fetched = 0  # tokens obtained so far

    def current(self, now_s: float) -> tuple[str, dict[str, str]]:
        if self._token is None or now_s >= self._refresh_at:
            token, extensions, expires_s = self._fetch(now_s)
            self._token = (token, extensions)
            self._refresh_at = now_s + max(0.0, expires_s - now_s) * _TOKEN_REFRESH_FRACTION
            self.fetched += 1
        return self._token

    def _fetch(self, now_s: float) -> tuple[str, dict[str, str], float]:
        if self._unsecured is not None:
            settings = self._unsecured
            return settings.token(now_s), dict(settings.extensions), now_s + settings.lifetime_s
        assert self._callback is not None
        try:
            result = self._callback(self._callback_config)
        except Exception as error:
            raise SaslError(f"the OAUTHBEARER token callback (oauth_cb) failed: {error!r}") from error
        if not isinstance(result, tuple) or not 2 <= len(result) <= 4 or not isinstance(result[0], str) \
                or not result[0] or isinstance(result[1], bool) or not isinstance(result[1], (int, float)):
            raise SaslError("oauth_cb must return (token, expiry in seconds since the epoch[, principal, "
                            f"extensions]), not {result!r}")
        extensions = result[3] if len(result) == 4 and result[3] is not None else {}
        if not isinstance(extensions, Mapping):
            raise SaslError(f"oauth_cb's extensions must be a dict of strings, not {extensions!r}")
        return result[0], {str(k): str(v) for k, v in extensions.items()}, float(result[1])

    def exchange(self, now_s: float) -> OAuthBearerExchange:
        token, extensions = self.current(now_s)
        return OAuthBearerExchange(token, extensions)


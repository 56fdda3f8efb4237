"""SASL OAUTHBEARER (RFC 7628) with Kafka's unsecured JSON Web Tokens, sans I/O.

The client sends one message, ``n,,\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01...]\\x01``. The broker
answers an empty challenge when the token is valid; when it is not, a JSON error
(``{"status":"invalid_token"}``), to which the client replies ``\\x01`` before the broker fails the
exchange.

Kafka's default (development) tokens are unsecured JWS (``OAuthBearerUnsecuredJws``): a base64url JSON
header with ``"alg": "none"``, a base64url JSON payload of claims and an empty signature, as in
``eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.``. Validation follows ``OAuthBearerValidationUtils``: the
principal claim (``sub``) must be a non-empty string, ``exp`` must be a number and not past (with an
allowed clock skew), ``iat`` if present must not follow ``exp``, and every required scope must be in the
token's ``scope`` claim (a space-separated string or a list).
"""
from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass

from . import SaslError

__all__ = ["client_initial_response", "parse_client_initial_response", "unsecured_token", "parse_token",
           "validate_unsecured_token", "ValidatedToken", "ERROR_CHALLENGE"]

ERROR_CHALLENGE = b'{"status":"invalid_token"}'
_SEP = "\x01"
_KEY = re.compile(r"[A-Za-z]+")


def client_initial_response(token: str, extensions: dict[str, str] | None = None) -> bytes:
    extra = "".join(f"{key}={value}{_SEP}" for key, value in (extensions or {}).items())
    return f"n,,{_SEP}auth=Bearer {token}{_SEP}{extra}{_SEP}".encode()


def parse_client_initial_response(message: bytes) -> tuple[str, dict[str, str]]:
    """``(token, extensions)`` of the client's message (raises SaslError when malformed)."""
    try:
        text = bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("Invalid OAUTHBEARER client first message: not UTF-8") from None
    gs2, sep, rest = text.partition(_SEP)
    if not sep or not gs2.startswith(("n,", "y,")) or not rest.endswith(_SEP + _SEP) and rest != _SEP:
        raise SaslError("Invalid OAUTHBEARER client first message")
    token = None
    extensions: dict[str, str] = {}
    for pair in rest.split(_SEP):
        if not pair:
            continue
        key, equals, value = pair.partition("=")
        if not equals or not _KEY.fullmatch(key):
            raise SaslError("Invalid OAUTHBEARER client first message")
        if key == "auth":
            scheme, _, token_text = value.partition(" ")
            if scheme.lower() != "bearer" or not token_text:
                raise SaslError("Invalid OAUTHBEARER client first message: no bearer token")
            token = token_text.strip()
        else:
            extensions[key] = value
    if token is None:
        raise SaslError("Invalid OAUTHBEARER client first message: no bearer token")
    return token, extensions


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise SaslError("invalid_token: a token part is not base64url") from None


def unsecured_token(subject: str, lifetime_s: float, *, issued_at_s: float, scope: list[str] | None = None,
                    claims: dict | None = None) -> str:
    """An unsecured JWS as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes one."""
    payload = {"sub": subject, "iat": issued_at_s, "exp": issued_at_s + lifetime_s, **(claims or {})}
    if scope is not None:
        payload["scope"] = scope
    header = _b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
    return f"{header}.{_b64url(json.dumps(payload, separators=(',', ':')).encode())}."


def parse_token(token: str) -> tuple[dict, dict, bytes, str]:
    """``(header, claims, signature, signing input)`` of a compact JWS (raises SaslError)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise SaslError("invalid_token: a JWS has three dot-separated parts")
    try:
        header, claims = json.loads(_unb64url(parts[0])), json.loads(_unb64url(parts[1]))
    except (ValueError, UnicodeDecodeError):
        raise SaslError("invalid_token: the header or payload is not JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise SaslError("invalid_token: the header and payload must be JSON objects")
    return header, claims, _unb64url(parts[2]), f"{parts[0]}.{parts[1]}"


@dataclass(frozen=True)
class ValidatedToken:
    principal: str
    expires_ms: int
    scope: tuple[str, ...]


def validate_claims(claims: dict, now_ms: int, *, principal_claim: str = "sub", scope_claim: str = "scope",
                    required_scope: tuple[str, ...] = (), clock_skew_ms: int = 0) -> ValidatedToken:
    """The checks of OAuthBearerValidationUtils on a token's claims (raises SaslError)."""
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise SaslError(f"invalid_token: the principal claim {principal_claim!r} is missing or not a string")
    expires = claims.get("exp")
    if isinstance(expires, bool) or not isinstance(expires, (int, float)):
        raise SaslError("invalid_token: the 'exp' claim is missing or not a number")
    expires_ms = int(expires * 1000)
    if now_ms > expires_ms + clock_skew_ms:
        raise SaslError("invalid_token: the token has expired")
    issued = claims.get("iat")
    if issued is not None:
        if isinstance(issued, bool) or not isinstance(issued, (int, float)):
            raise SaslError("invalid_token: the 'iat' claim is not a number")
        if issued * 1000 > expires_ms:
            raise SaslError("invalid_token: the token was issued after it expires")
    raw_scope = claims.get(scope_claim, ())
    scope = tuple(raw_scope.split()) if isinstance(raw_scope, str) else tuple(str(s) for s in raw_scope or ())
    missing = [s for s in required_scope if s not in scope]
    if missing:
        raise SaslError(f"insufficient_scope: the token lacks the required scope {missing}")
    return ValidatedToken(principal.strip(), expires_ms, scope)


def validate_unsecured_token(token: str, now_ms: int, **options) -> ValidatedToken:
    """Kafka's OAuthBearerUnsecuredJwsValidator: ``alg`` must be ``none`` and the signature empty."""
    header, claims, signature, _ = parse_token(token)
    if header.get("alg") != "none" or signature:
        raise SaslError("invalid_token: an unsecured token must have alg 'none' and no signature")
    return validate_claims(claims, now_ms, **options)

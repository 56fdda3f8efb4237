"""Signed OAUTHBEARER tokens checked as Kafka's ``BrokerJwtValidator`` checks them, with PyJWT:

- the signature, by a key of the JSON Web Key Set (``jwks``) with the token's ``kid``, in an asymmetric
  algorithm (``alg: none`` and shared-secret algorithms are refused: a public key set cannot vouch for them);
- ``exp`` and ``iat`` must be present; expiry allows ``sasl.oauthbearer.clock.skew.seconds`` (default 30);
- the audience, when ``sasl.oauthbearer.expected.audience`` (comma-separated) is set, must include one
  of them, and a token with an audience is refused when none is expected (jose4j and PyJWT agree);
- the issuer must be ``sasl.oauthbearer.expected.issuer`` when that is set;
- the principal is the ``sasl.oauthbearer.sub.claim.name`` claim (default ``sub``), a non-blank string;
  the scope the ``sasl.oauthbearer.scope.claim.name`` claim (default ``scope``): a string is one scope
  and a list many, as Kafka reads it.
"""
from __future__ import annotations

from typing import Any

from ...sasl import SaslError
from ...sasl.oauthbearer import ValidatedToken
from .jwks import JwksKeys, JwksSettings

__all__ = ["SignedTokenValidator", "OPTIONS"]

AUDIENCE = "sasl.oauthbearer.expected.audience"
ISSUER = "sasl.oauthbearer.expected.issuer"
SUB_CLAIM = "sasl.oauthbearer.sub.claim.name"
SCOPE_CLAIM = "sasl.oauthbearer.scope.claim.name"
CLOCK_SKEW = "sasl.oauthbearer.clock.skew.seconds"
OPTIONS = (AUDIENCE, ISSUER, SUB_CLAIM, SCOPE_CLAIM, CLOCK_SKEW)

_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                         "ES256", "ES256K", "ES384", "ES512", "EdDSA"})


class SignedTokenValidator:
    """A listener's check of signed tokens (``start`` reads the key set; ``validate`` checks a token)."""

    def __init__(self, options: dict[str, str]):
        self.keys = JwksKeys(JwksSettings.from_options(options))
        audience = [name.strip() for name in options.get(AUDIENCE, "").split(",") if name.strip()]
        self.audience = audience or None
        self.issuer = options.get(ISSUER, "").strip() or None
        self.sub_claim = options.get(SUB_CLAIM, "sub").strip() or "sub"
        self.scope_claim = options.get(SCOPE_CLAIM, "scope").strip() or "scope"
        try:
            self.leeway_s = int(options.get(CLOCK_SKEW, "30"))
        except ValueError:
            raise ValueError(f"invalid value {options[CLOCK_SKEW]!r} for {CLOCK_SKEW}") from None

    async def start(self) -> None:
        await self.keys.start()

    def close(self) -> None:
        self.keys.close()

    async def validate(self, token: str) -> ValidatedToken:
        """The token's principal, expiry and scope (raises SaslError saying why it is refused)."""
        import jwt
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as error:
            raise SaslError(f"invalid_token: {error}") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if algorithm not in _ALGORITHMS:
            raise SaslError(f"invalid_token: the token's algorithm {algorithm!r} is not allowed "
                            f"(one of {', '.join(sorted(_ALGORITHMS))})")
        if kid is not None and not isinstance(kid, str):
            raise SaslError("invalid_token: the token's kid is not a string")
        candidates = await self.keys.keys_for(kid)
        if not candidates:
            why = f" (its last read failed: {self.keys.last_error})" if self.keys.last_error else ""
            named = repr(kid[:100] + "..." if kid and len(kid) > 100 else kid)
            raise SaslError(f"invalid_token: no key {named} in the key set at {self.keys.url}{why}")
        refusal: Exception | None = None
        for key in candidates:  # one, unless the token names no kid
            try:
                claims = jwt.decode(token, key.key, algorithms=[algorithm], audience=self.audience,
                                    issuer=self.issuer, leeway=self.leeway_s,
                                    options={"require": ["exp", "iat"], "verify_aud": True, "verify_iss": True})
                return self._validated(claims)
            except (jwt.InvalidSignatureError, jwt.InvalidKeyError, TypeError) as error:  # TypeError: another key type
                refusal = error
            except (jwt.PyJWTError, ValueError) as error:  # expired, wrong audience or issuer, a claim missing
                raise SaslError(f"invalid_token: {error}") from None
        raise SaslError(f"invalid_token: the signature does not verify with the key set's keys ({refusal})")

    def _validated(self, claims: dict[str, Any]) -> ValidatedToken:
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise SaslError(f"invalid_token: the {self.sub_claim!r} claim is missing or blank")
        raw_scope = claims.get(self.scope_claim)
        scope = (raw_scope,) if isinstance(raw_scope, str) else tuple(str(s) for s in raw_scope) \
            if isinstance(raw_scope, list) else ()
        return ValidatedToken(principal.strip(), int(claims["exp"] * 1000), scope)

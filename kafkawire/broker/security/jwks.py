"""Signed OAUTHBEARER tokens checked against a JSON Web Key Set, as Kafka's
``OAuthBearerValidatorCallbackHandler`` does with ``sasl.oauthbearer.jwks.endpoint.url`` (here a
``file://`` URL or a path: the broker reads the key set when it validates a token).

RS256/384/512 and ES256/384/512 signatures are checked with the ``cryptography`` package (which only
this needs); then the claims: the subject (``sasl.oauthbearer.sub.claim.name``), expiry with
``sasl.oauthbearer.clock.skew.seconds`` (default 30), and, when configured, the audience
(``sasl.oauthbearer.expected.audience``, comma-separated) and issuer
(``sasl.oauthbearer.expected.issuer``).
"""
from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import urlparse

from ...sasl import SaslError
from ...sasl.oauthbearer import ValidatedToken, parse_token, validate_claims

__all__ = ["validate_signed_token"]


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _key_set(url: str) -> list[dict]:
    parsed = urlparse(url)
    path = Path(parsed.path if parsed.scheme == "file" else url)
    try:
        keys = json.loads(path.read_text()).get("keys", [])
    except (OSError, ValueError) as error:
        raise SaslError(f"invalid_token: the key set at {url} cannot be read: {error}") from None
    return [key for key in keys if isinstance(key, dict)]


def _verify(key: dict, algorithm: str, signing_input: bytes, signature: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
    digest = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}.get(algorithm[2:])
    try:
        if algorithm.startswith("RS") and key.get("kty") == "RSA" and digest is not None:
            rsa_key = rsa.RSAPublicNumbers(int.from_bytes(_b64(key["e"]), "big"),
                                           int.from_bytes(_b64(key["n"]), "big")).public_key()
            rsa_key.verify(signature, signing_input, padding.PKCS1v15(), digest)
            return True
        if algorithm.startswith("ES") and key.get("kty") == "EC" and digest is not None:
            curve = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}[key["crv"]]
            ec_key = ec.EllipticCurvePublicNumbers(int.from_bytes(_b64(key["x"]), "big"),
                                                   int.from_bytes(_b64(key["y"]), "big"), curve).public_key()
            half = len(signature) // 2  # JWS writes r and s side by side
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big"))
            ec_key.verify(der, signing_input, ec.ECDSA(digest))
            return True
    except (InvalidSignature, KeyError, ValueError):
        return False
    return False


def validate_signed_token(token: str, now_ms: float, options: dict[str, str]) -> ValidatedToken:
    header, claims, signature, signing_input = parse_token(token)
    algorithm = header.get("alg", "")
    if algorithm == "none" or not signature:
        raise SaslError("invalid_token: the token is not signed")
    candidates = [k for k in _key_set(options["sasl.oauthbearer.jwks.endpoint.url"])
                  if header.get("kid") is None or k.get("kid") == header.get("kid")]
    if not any(_verify(key, algorithm, signing_input.encode("ascii"), signature) for key in candidates):
        raise SaslError("invalid_token: the signature does not verify with any key of the key set")
    audience = [a.strip() for a in options.get("sasl.oauthbearer.expected.audience", "").split(",") if a.strip()]
    if audience:
        got = claims.get("aud")
        got = [got] if isinstance(got, str) else list(got or [])
        if not set(audience) & set(got):
            raise SaslError("invalid_token: the token's audience is not the expected one")
    issuer = options.get("sasl.oauthbearer.expected.issuer")
    if issuer and claims.get("iss") != issuer:
        raise SaslError("invalid_token: the token's issuer is not the expected one")
    return validate_claims(claims, int(now_ms), principal_claim=options.get("sasl.oauthbearer.sub.claim.name", "sub"),
                           scope_claim=options.get("sasl.oauthbearer.scope.claim.name", "scope"),
                           clock_skew_ms=int(float(options.get("sasl.oauthbearer.clock.skew.seconds", "30")) * 1000))

"""The broker's delegation tokens, as Kafka's ``DelegationTokenManager`` and its controller's
``DelegationTokenControlManager`` keep them.

A token is an id (a random UUID in base64), an owner, the principal that asked for it, its renewers,
and three times: issued, expiry (renewable, at most ``delegation.token.expiry.time.ms`` past the last
renewal) and max (``delegation.token.max.lifetime.ms`` past issue, never passed). Its HMAC is
HMAC-SHA512 of the id under ``delegation.token.secret.key``: the token's password, never stored (it is
computed again from the secret), so the broker holds no usable secret on disk but the key it was given.
Without a secret key tokens are disabled (DELEGATION_TOKEN_AUTH_DISABLED).

Clients authenticate with SCRAM (``tokenauth=true``): user = the token id, password = the HMAC in
base64. The SCRAM credentials of a token are derived from that password on first use and kept in
memory, as Kafka's ``DelegationTokenCache`` keeps them.

Tokens are kept in ``DATA/delegation-tokens.json`` (owner-only, written whole after each change);
``sweep`` drops the expired ones, as the broker does every ``delegation.token.expiry.check.interval.ms``.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ...error_codes import ErrorCode
from ...sasl.scram import MIN_ITERATIONS, ScramCredential, ScramMechanism
from ..persistence.atomic_file import PRIVATE, write_json_atomically

__all__ = ["DelegationTokens", "TokenInformation", "ERROR_TIMESTAMP"]

ERROR_TIMESTAMP = -1  # the expiry a failed Renew/ExpireDelegationToken answers, as Kafka's ErrorTimestamp


@dataclass(frozen=True)
class TokenInformation:
    token_id: str
    owner: str  # "User:alice"
    requester: str  # who created it (KIP-373: may differ from the owner)
    renewers: tuple[str, ...]
    issue_ms: int
    expiry_ms: int
    max_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's ``ownerOrRenewer``: who may renew, expire and always describe the token."""
        return principal in (self.owner, self.requester) or principal in self.renewers


class DelegationTokens:
    def __init__(self, path: Path | None, secret_key: str | None, max_lifetime_ms: int, expiry_time_ms: int,
                 clock: Callable[[], float] = time.time):
        self.path = path
        self._secret = secret_key.encode() if secret_key else None
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self._clock = clock
        self._tokens: dict[str, TokenInformation] = {}
        self._by_hmac: dict[bytes, str] = {}
        self._credentials: dict[tuple[str, str], ScramCredential] = {}  # (token id, mechanism) -> credential
        if path is not None and path.exists() and self.enabled:
            for entry in json.loads(path.read_text())["tokens"]:
                self._add(TokenInformation(entry["token_id"], entry["owner"], entry["requester"],
                                           tuple(entry["renewers"]), int(entry["issue_ms"]), int(entry["expiry_ms"]),
                                           int(entry["max_ms"])))

    @property
    def enabled(self) -> bool:
        return self._secret is not None

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def hmac(self, token_id: str) -> bytes:
        assert self._secret is not None, "delegation tokens are disabled"
        return hmac.new(self._secret, token_id.encode(), hashlib.sha512).digest()

    def tokens(self) -> list[TokenInformation]:
        return list(self._tokens.values())

    def create(self, owner: str, requester: str, renewers: Iterable[str], max_lifetime_ms: int) -> TokenInformation:
        """A new token; a ``max_lifetime_ms`` of 0 or less takes the broker's, and none exceeds it."""
        now = self.now_ms()
        lifetime = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, self.max_lifetime_ms)
        token_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        token = TokenInformation(token_id, owner, requester, tuple(renewers), now, min(now + lifetime,
                                 now + self.expiry_time_ms), now + lifetime)
        self._add(token)
        self.save()
        return token

    def renew(self, token_hmac: bytes, principal: str, renew_period_ms: int) -> tuple[int, int]:
        """``(error code, new expiry)``: a negative period renews for delegation.token.expiry.time.ms."""
        error, token = self._checked(token_hmac, principal)
        if token is None:
            return error, ERROR_TIMESTAMP
        period = self.expiry_time_ms if renew_period_ms < 0 else renew_period_ms
        return self._set_expiry(token, min(token.max_ms, self.now_ms() + period))

    def expire(self, token_hmac: bytes, principal: str, expiry_period_ms: int) -> tuple[int, int]:
        """``(error code, new expiry)``: a negative period removes the token now."""
        error, token = self._checked(token_hmac, principal)
        if token is None:
            return error, ERROR_TIMESTAMP
        now = self.now_ms()
        if expiry_period_ms < 0:
            self._remove(token.token_id)
            self.save()
            return ErrorCode.NONE, now
        return self._set_expiry(token, min(token.max_ms, now + expiry_period_ms))

    def authenticating(self, token_id: str, mechanism: ScramMechanism) -> tuple[ScramCredential, TokenInformation] | None:
        """The SCRAM credential of a live token and the token, for a ``tokenauth`` exchange (None: no
        such token, or expired)."""
        token = self._tokens.get(token_id)
        if token is None or self._expired(token, self.now_ms()):
            return None
        key = (token_id, mechanism.name)
        credential = self._credentials.get(key)
        if credential is None:  # Kafka's salt is random, at the mechanism's minimum iterations
            password = base64.b64encode(self.hmac(token_id)).decode()
            credential = self._credentials[key] = mechanism.credential(password, iterations=MIN_ITERATIONS)
        return credential, token

    def sweep(self) -> int:
        """Remove the expired tokens; how many went."""
        now = self.now_ms()
        expired = [t.token_id for t in self._tokens.values() if self._expired(t, now)]
        for token_id in expired:
            self._remove(token_id)
        if expired:
            self.save()
        return len(expired)

    def save(self) -> None:
        if self.path is None:
            return
        write_json_atomically(self.path, {"tokens": [
            {"token_id": t.token_id, "owner": t.owner, "requester": t.requester, "renewers": list(t.renewers),
             "issue_ms": t.issue_ms, "expiry_ms": t.expiry_ms, "max_ms": t.max_ms} for t in self._tokens.values()]},
            mode=PRIVATE)

    # ---- internals ------------------------------------------------------------------------------
    @staticmethod
    def _expired(token: TokenInformation, now: int) -> bool:
        return token.max_ms < now or token.expiry_ms < now

    def _checked(self, token_hmac: bytes, principal: str) -> tuple[int, TokenInformation | None]:
        """The token of ``token_hmac`` if ``principal`` may renew or expire it now, else the error."""
        token_id = self._by_hmac.get(bytes(token_hmac))
        token = self._tokens.get(token_id) if token_id is not None else None
        if token is None:
            return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, None
        if not token.owner_or_renewer(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, None
        if self._expired(token, self.now_ms()):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, None
        return ErrorCode.NONE, token

    def _set_expiry(self, token: TokenInformation, expiry_ms: int) -> tuple[int, int]:
        self._tokens[token.token_id] = replace(token, expiry_ms=expiry_ms)
        self.save()
        return ErrorCode.NONE, expiry_ms

    def _add(self, token: TokenInformation) -> None:
        self._tokens[token.token_id] = token
        self._by_hmac[self.hmac(token.token_id)] = token.token_id

    def _remove(self, token_id: str) -> None:
        self._tokens.pop(token_id, None)
        self._by_hmac.pop(self.hmac(token_id), None)
        for key in [key for key in self._credentials if key[0] == token_id]:
            del self._credentials[key]

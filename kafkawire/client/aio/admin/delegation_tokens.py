"""The admin client's delegation token calls (a part of AsyncAdminClient, ``aio.admin``), sent to any
broker, built and read by ``core.admin.delegation_tokens``. The broker takes them on a SASL connection
(or TLS with a client certificate) not itself authenticated with a token."""
from __future__ import annotations

from collections.abc import Sequence

from ...core.admin import delegation_tokens as tokens
from ...core.admin.delegation_tokens import DelegationToken
from .calls import AdminPart, raise_or, unique

__all__ = ["DelegationTokenAdmin"]


class DelegationTokenAdmin(AdminPart):
    """create_delegation_token, renew_delegation_token, expire_delegation_token, describe_delegation_token."""

    async def create_delegation_token(self, renewers: Sequence[str] = (), *, owner: str | None = None,
                                      max_lifetime_ms: int = -1, request_timeout: float | None = None
                                      ) -> DelegationToken:
        """A token of ``owner`` (default: the caller; another needs CREATE_TOKENS on that USER) that
        ``renewers`` (``User:bob``...) may renew; ``max_lifetime_ms`` -1 takes the broker's
        delegation.token.max.lifetime.ms, and none exceeds it."""
        renewers = unique(renewers, "renewer")
        request = tokens.create_delegation_token_request(renewers, owner, max_lifetime_ms)

        async def attempt() -> object:
            return tokens.read_create_delegation_token(await self._calls.send_any(request), renewers)
        return raise_or(await self._router.run_one(attempt, self._calls.timeout_ms(request_timeout),
                                                   "create_delegation_token"))

    async def renew_delegation_token(self, hmac: bytes, *, renew_time_period_ms: int = -1,
                                     request_timeout: float | None = None) -> int:
        """The token's new expiry timestamp (ms): now plus the period (-1: delegation.token.expiry.time.ms),
        at most its max timestamp."""
        request = tokens.renew_delegation_token_request(hmac, renew_time_period_ms)

        async def attempt() -> object:
            return tokens.read_expiry_timestamp(await self._calls.send_any(request), "RenewDelegationToken")
        return raise_or(await self._router.run_one(attempt, self._calls.timeout_ms(request_timeout),
                                                   "renew_delegation_token"))

    async def expire_delegation_token(self, hmac: bytes, *, expiry_time_period_ms: int = -1,
                                      request_timeout: float | None = None) -> int:
        """The token's new expiry timestamp (ms); -1, the default, expires it at once."""
        request = tokens.expire_delegation_token_request(hmac, expiry_time_period_ms)

        async def attempt() -> object:
            return tokens.read_expiry_timestamp(await self._calls.send_any(request), "ExpireDelegationToken")
        return raise_or(await self._router.run_one(attempt, self._calls.timeout_ms(request_timeout),
                                                   "expire_delegation_token"))

    async def describe_delegation_token(self, owners: Sequence[str] | None = None, *,
                                        request_timeout: float | None = None) -> list[DelegationToken]:
        """The tokens the caller may see (its own, those it renews, and those its ACLs allow), of
        ``owners`` only if given."""
        request = tokens.describe_delegation_token_request(None if owners is None else unique(owners, "owner"))

        async def attempt() -> object:
            return tokens.read_describe_delegation_token(await self._calls.send_any(request))
        return raise_or(await self._router.run_one(attempt, self._calls.timeout_ms(request_timeout),
                                                   "describe_delegation_token"))

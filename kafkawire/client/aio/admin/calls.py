"""What every part of AsyncAdminClient shares: its router, the call timeouts (confluent-kafka's
``request_timeout`` and ``operation_timeout``, in seconds) and the checks of a call's arguments."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from .router import AdminRouter

__all__ = ["AdminCalls", "unique", "raise_or"]

T = TypeVar("T")


def unique(items: Iterable[T], what: str) -> list[T]:
    """``items`` in order, refusing duplicates (confluent-kafka raises ValueError for them too)."""
    seen: list[T] = []
    for item in items:
        if item in seen:
            raise ValueError(f"duplicate {what}: {item!r}")
        seen.append(item)
    return seen


def raise_or(outcome: Any) -> Any:
    """A single-result call's result, or its exception raised."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


class AdminCalls:
    """The base of AsyncAdminClient's parts."""

    _router: AdminRouter

    def _timeout_ms(self, request_timeout: float | None) -> float:
        """A call's timeout, retries included: ``request_timeout`` seconds, else default.api.timeout.ms."""
        if request_timeout is None:
            return float(self._router.config.default_api_timeout_ms)
        if request_timeout < 0:
            raise ValueError(f"request_timeout must be at least 0 seconds, not {request_timeout}")
        return request_timeout * 1000

    def _operation_ms(self, operation_timeout: float | None, request_timeout: float | None) -> int:
        """TimeoutMs for the broker: how long it may wait for the operation to complete (by default the
        call's timeout, at most request.timeout.ms, so the answer comes before the request times out)."""
        if operation_timeout is None:
            return int(min(self._timeout_ms(request_timeout), self._router.config.request_timeout_ms))
        if operation_timeout < 0:
            raise ValueError(f"operation_timeout must be at least 0 seconds, not {operation_timeout}")
        return int(operation_timeout * 1000)

    async def _send_any(self, request: Any, min_version: int | None = None) -> Any:
        """``request`` to any broker, at the highest version both speak (at least ``min_version``)."""
        connection = await self._router.any_connection()
        return await connection.send(request, connection.api_version(request.API_KEY, min_version))

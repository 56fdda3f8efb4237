"""``queued.max.request.bytes`` (KIP-72): a bound on the request bytes the broker holds.

Every byte read from a connection is charged until its request has been answered. Kafka's memory pool
mutes every socket once the bound is reached; here only connections in the middle of a large request
wait (their next read waits for memory), so a client sending small requests (ApiVersions, Metadata,
a heartbeat) is still served while others hold the pool with unfinished large requests. What small
requests add beyond the bound is itself bounded by ``max.connections`` times ``SMALL_REQUEST``.
"""
from __future__ import annotations

import asyncio

__all__ = ["RequestMemory", "SMALL_REQUEST"]

# Requests up to this size keep being read when the pool is used up.
SMALL_REQUEST = 64 * 1024


class RequestMemory:
    """Bytes charged against ``limit``; ``wait()`` returns once some are free again."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._freed: asyncio.Event | None = None

    @property
    def exhausted(self) -> bool:
        return self.used >= self.limit

    def must_wait(self, pending_size: int | None) -> bool:
        """Whether a connection receiving a frame of ``pending_size`` should wait before reading more."""
        return self.used >= self.limit and pending_size is not None and pending_size > SMALL_REQUEST

    def charge(self, size: int) -> None:
        self.used += size
        if self.used > self.peak:
            self.peak = self.used

    def release(self, size: int) -> None:
        self.used -= size
        if self._freed is not None and self.used < self.limit:
            self._freed.set()

    async def wait(self) -> None:
        while self.used >= self.limit:
            if self._freed is None:
                self._freed = asyncio.Event()
            self._freed.clear()
            await self._freed.wait()

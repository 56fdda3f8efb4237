"""``queued.max.request.bytes`` (KIP-72): a bound on the request bytes the broker holds.

As in Kafka's memory pool, a request's whole size is taken from the pool once its size prefix has
been read, and given back when the request has been answered; taking it is allowed while any of the
pool is left, so the pool may be overdrawn by one request and a request once started can always be
read to its end (two half-read requests never wait for each other). When the pool is used up, Kafka
mutes every socket; here only connections starting a request larger than ``SMALL_REQUEST`` wait, so a
client sending small requests (ApiVersions, Metadata, a heartbeat) is still served while others hold
the pool. What small requests add beyond the bound is itself bounded by ``max.connections`` times
``SMALL_REQUEST``.
"""
from __future__ import annotations

import asyncio

__all__ = ["RequestMemory", "SMALL_REQUEST"]

# Requests up to this size are read when the pool is used up.
SMALL_REQUEST = 64 * 1024


class RequestMemory:
    """Bytes taken against ``limit``; ``wait()`` returns when some are given back (or on ``wake``)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._changed: asyncio.Event | None = None

    def must_wait(self, size: int) -> bool:
        """Whether a request of ``size`` bytes has to wait for the pool."""
        return size > SMALL_REQUEST and self.used >= self.limit

    def take(self, size: int) -> None:
        self.used += size
        if self.used > self.peak:
            self.peak = self.used

    def give_back(self, size: int) -> None:
        self.used -= size
        if self._changed is not None and self.used < self.limit:
            self._changed.set()

    def wake(self) -> None:
        """Wake every waiter (a waiting connection is being closed)."""
        if self._changed is not None:
            self._changed.set()

    async def wait(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        self._changed.clear()
        await self._changed.wait()

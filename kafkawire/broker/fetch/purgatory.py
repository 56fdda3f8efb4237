"""Parked fetches (``reads.DelayedFetch``, and share fetches), watched by partition: an append wakes the
fetches watching that partition. Apart from the read path, which loads on the first Fetch: every append
notifies the purgatory, fetched from or not."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .reads import DelayedFetch

__all__ = ["FetchPurgatory"]


class FetchPurgatory:
    """Parked fetches, watched by partition."""

    def __init__(self) -> None:
        self._watchers: dict[tuple[str | None, int], set[DelayedFetch]] = {}

    def __len__(self) -> int:
        return len({id(d) for watchers in self._watchers.values() for d in watchers})

    async def park(self, delayed: DelayedFetch, max_wait_s: float) -> bool:
        """Wait until ``delayed`` completes or ``max_wait_s`` passes; whether it completed (False when the
        wait ran out, or the broker is shutting down)."""
        keys = [(read.topic, read.partition) for read in delayed.reads if read.log is not None]
        for key in keys:
            self._watchers.setdefault(key, set()).add(delayed)
        try:
            if not delayed.try_complete():  # data may have arrived while the first read ran
                await asyncio.wait_for(asyncio.shield(delayed.done), max_wait_s)
            return delayed.done.result()
        except TimeoutError:
            return False
        finally:
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(delayed)
                    if not watchers:
                        del self._watchers[key]

    def complete_all(self) -> None:
        """Answer every parked fetch now, with what it has (the broker is shutting down)."""
        for watchers in list(self._watchers.values()):
            for delayed in list(watchers):
                if not delayed.done.done():
                    delayed.done.set_result(False)

    def notify(self, topic: str, partition: int) -> None:
        """Data was appended to a partition: wake the fetches that now have enough."""
        for delayed in list(self._watchers.get((topic, partition), ())):
            delayed.try_complete()

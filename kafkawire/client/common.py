"""Values shared by the consumer and producer sides of the client."""
from __future__ import annotations

import asyncio
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


async def wait_event(event: asyncio.Event, timeout_s: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` passes (None: no limit); True if it was set.

    Not ``asyncio.wait_for(event.wait(), ...)``: on Python 3.11 that drops a cancellation arriving
    as the event is set, which left a cancelled task waiting forever (a producer's close hung so).
    """
    if timeout_s is None:
        await event.wait()
        return True
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True

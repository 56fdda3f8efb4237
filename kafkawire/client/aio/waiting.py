"""Waiting on the event loop: for an event with a timeout, and for a record's delivery."""
from __future__ import annotations

import asyncio

from ..core.producer.delivery import RecordFuture

__all__ = ["wait_event", "wait_for_delivery"]


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


def wait_for_delivery(record: RecordFuture) -> asyncio.Future[None]:
    """What ``await record`` waits on: a future of the running loop, resolved once the record's batch
    is settled, from whichever thread settles it. One per awaiting task, so that cancelling one await
    leaves the others be."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def settled(_record: RecordFuture) -> None:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is running:
            _resolve(waiter)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(_resolve, waiter)

    record.add_done_callback(settled)
    return waiter


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)

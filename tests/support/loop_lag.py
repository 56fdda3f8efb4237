"""A probe of how long an event loop is held: a task on the loop that wakes every millisecond and
records how late it woke (wall time) and how much CPU the loop's thread spent meanwhile. The CPU
figure is what handlers held the loop for; the wall figure adds what a loaded machine's scheduler and
other threads (the test's own clients) took from it."""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future


class LoopLagProbe:
    """``with LoopLagProbe(loop) as probe:`` ... ``probe.worst_cpu``, ``probe.worst_late`` (seconds)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float = 0.001):
        self.loop = loop
        self.interval = interval
        self.worst_cpu = 0.0
        self.worst_late = 0.0
        self.ticks = 0
        self._running: Future | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval
            cpu = time.thread_time()
            await asyncio.sleep(self.interval)
            self.worst_cpu = max(self.worst_cpu, time.thread_time() - cpu)
            self.worst_late = max(self.worst_late, loop.time() - due)
            self.ticks += 1

    def reset(self) -> None:
        self.worst_cpu = self.worst_late = 0.0
        self.ticks = 0

    def __enter__(self) -> "LoopLagProbe":
        self._running = asyncio.run_coroutine_threadsafe(self._run(), self.loop)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._running is not None:
            self.loop.call_soon_threadsafe(self._running.cancel)

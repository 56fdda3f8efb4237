"""Long request handlers share the event loop: their work runs in slices of about ``SLICE_S``, taken in
turn, one slice per turn of the loop, with the loop polling its sockets between any two (as Kafka's
request handler threads share the CPU, and its network threads keep answering meanwhile).

A handler makes a ``Slices`` when it starts and, between units of its work, awaits ``pause()`` when
``due()`` says its slice has run its time. A paused handler waits in a first-in, first-out line for
its next turn; so fifty connections with a large request each hold the loop for one slice at a time,
not fifty slices in a row, and a small request arriving meanwhile waits for about one slice.
A connection whose request frame is large (``LARGE_FRAME``) waits its turn (``take_turn``) before it
decodes the frame, so the decoding of fifty such requests is interleaved with others' work too.
"""
from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque

__all__ = ["LARGE_FRAME", "SLICE_S", "Slices", "take_turn"]

SLICE_S = 0.002
LARGE_FRAME = 32 * 1024  # bytes of a request frame whose decoding may take about a slice


class _Line:
    """The handlers of one loop waiting for their next slice; one is let go per turn of the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.waiting: deque[asyncio.Future[None]] = deque()
        self.scheduled = False

    async def wait(self) -> None:
        turn = self.loop.create_future()
        self.waiting.append(turn)
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self._next)
        await turn  # (a handler cancelled meanwhile leaves a cancelled future, which _next skips)

    def _next(self) -> None:
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(None)  # its handler runs in the next turn of the loop
                break
        self.scheduled = bool(self.waiting)
        if self.scheduled:
            self.loop.call_soon(self._next)


_LINES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Line] = weakref.WeakKeyDictionary()


class Slices:
    """``first_in_line``: the first ``due()`` is True at once, so a handler that may have much to do
    waits for its turn before its first slice (many such requests arriving together then do not run
    their first slices back to back)."""

    __slots__ = ("_started",)

    def __init__(self, first_in_line: bool = False) -> None:
        self._started = float("-inf") if first_in_line else time.perf_counter()

    def due(self) -> bool:
        """Whether this slice has run its time (cheap enough to ask between small units of work)."""
        return time.perf_counter() - self._started >= SLICE_S

    async def pause(self) -> None:
        """Wait for this handler's next turn (the loop serves others meanwhile), then start a slice."""
        loop = asyncio.get_running_loop()
        line = _LINES.get(loop)
        if line is None:
            line = _LINES[loop] = _Line(loop)
        await line.wait()
        self._started = time.perf_counter()


async def take_turn() -> None:
    """Wait in the line for one turn of the loop (then run about a slice's work before awaiting again)."""
    await Slices(first_in_line=True).pause()

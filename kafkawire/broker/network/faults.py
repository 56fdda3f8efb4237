"""Faults injected into one broker node on command (tests of clients under failure): the next requests of
an API failed with a chosen error code or dropped without an answer (librdkafka's mock cluster calls it
``push_request_errors``), and added latency and a bandwidth limit on every response.

The connection asks ``take(api_key)`` before handling a request, and awaits ``delay(size)`` before
sending a response; with nothing injected both cost one attribute read.
"""
from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Faults", "DROP"]

DROP = "drop"  # the request is read, never answered


class Faults:
    def __init__(self) -> None:
        self._queued: dict[int, deque[int | str]] = {}  # API key -> error codes (or DROP), oldest first
        self.rtt_ms = 0.0  # added to every response (round-trip latency)
        self.bytes_per_second = 0  # 0: no throttle
        self.armed = False  # anything queued, latency or throttle: the connection looks no further

    def push_errors(self, api_key: int, *codes: int | str) -> None:
        """Answer the next ``len(codes)`` requests of ``api_key`` with these error codes, in order
        (``DROP``: read the request and never answer it)."""
        self._queued.setdefault(api_key, deque()).extend(codes)
        self._rearm()

    def fail_next(self, api_key: int, code: int, count: int = 1) -> None:
        self.push_errors(api_key, *([code] * count))

    def drop_next(self, api_key: int, count: int = 1) -> None:
        self.push_errors(api_key, *([DROP] * count))

    def set_latency(self, rtt_ms: float) -> None:
        self.rtt_ms = max(0.0, float(rtt_ms))
        self._rearm()

    def set_throttle(self, bytes_per_second: int) -> None:
        self.bytes_per_second = max(0, int(bytes_per_second))
        self._rearm()

    def clear(self) -> None:
        self._queued.clear()
        self.rtt_ms, self.bytes_per_second = 0.0, 0
        self._rearm()

    def pending(self, api_key: int) -> int:
        return len(self._queued.get(api_key, ()))

    def take(self, api_key: int) -> int | str | None:
        """The fault for this request of ``api_key``: an error code, ``DROP``, or None."""
        queued = self._queued.get(api_key)
        if not queued:
            return None
        fault = queued.popleft()
        if not queued:
            del self._queued[api_key]
            self._rearm()
        return fault

    async def delay(self, size: int) -> None:
        """Wait as the injected latency and bandwidth say before ``size`` bytes of response go out."""
        seconds = self.rtt_ms / 1000
        if self.bytes_per_second:
            seconds += size / self.bytes_per_second
        if seconds > 0:
            await asyncio.sleep(seconds)

    def _rearm(self) -> None:
        self.armed = bool(self._queued) or self.rtt_ms > 0 or self.bytes_per_second > 0

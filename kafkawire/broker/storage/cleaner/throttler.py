"""The log cleaner's I/O limit, ``log.cleaner.io.max.bytes.per.second``: Kafka's ``Throttler``.

The cleaner reports the bytes it reads and writes; every check interval (300 ms, as Kafka's cleaner
uses) the throttler compares the rate since the last check with the limit and, when it is over,
sleeps for as long as keeps the period's average at the limit. It runs on the cleaner's worker thread;
the sleep ends early when the cleaner is stopped.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Throttler"]

CHECK_INTERVAL_S = 0.3


class Throttler:
    def __init__(self, bytes_per_second: float, *, clock: Callable[[], float] = time.monotonic,
                 check_interval_s: float = CHECK_INTERVAL_S):
        if not bytes_per_second > 0:
            raise ValueError(f"log.cleaner.io.max.bytes.per.second must be positive, not {bytes_per_second}")
        self.bytes_per_second = bytes_per_second
        self.clock = clock
        self.check_interval_s = check_interval_s
        self._period_start = clock()
        self._observed = 0
        self.slept_s = 0.0  # in all, for tests and statistics

    def maybe_throttle(self, observed: int, stop: threading.Event | None = None) -> None:
        """Count ``observed`` bytes; sleep if the rate since the last check is over the limit."""
        self._observed += observed
        now = self.clock()
        elapsed = now - self._period_start
        if elapsed <= self.check_interval_s or self._observed <= 0:
            return
        if self._observed / elapsed > self.bytes_per_second:
            sleep_s = self._observed / self.bytes_per_second - elapsed
            if sleep_s > 0:
                self.slept_s += sleep_s
                if stop is not None:
                    stop.wait(sleep_s)
                else:
                    time.sleep(sleep_s)
        self._period_start = self.clock()
        self._observed = 0

"""The two measures a quota is checked against, as Kafka's metrics library keeps them.

``SampledRate`` is Kafka's ``Rate`` over a ``SampledStat``: ``samples`` windows of ``window_s`` seconds
each, the oldest reused once all are full, a window older than all of them together dropped; the
rate is the windows' total over the time since the oldest window began, counted as at least
``samples - 1`` whole windows (so a new sensor does not read a short burst as a high rate). The
throttle time of a rate over its bound is Kafka's ``QuotaUtils.throttleTime``: how long the client
must stay silent for the rate over the same span to come down to the bound.

``TokenBucket`` is KIP-599's measure for controller mutations: ``rate * samples * window_s`` tokens at
most, refilled at ``rate`` a second; a mutation takes its count (the bucket may go below zero), and
the throttle time is how long the bucket takes to climb back to zero.
"""
from __future__ import annotations

__all__ = ["SampledRate", "TokenBucket"]


class SampledRate:
    """Events (bytes, request time, connections) a second over the last windows."""

    __slots__ = ("samples", "window_s", "_starts", "_values", "_current", "last_record")

    def __init__(self, samples: int, window_s: float, now: float):
        self.samples = samples
        self.window_s = window_s
        self._starts = [now]  # each window's start (monotonic seconds)
        self._values = [0.0]
        self._current = 0
        self.last_record = now

    def record(self, value: float, now: float) -> None:
        self._purge(now)
        if now - self._starts[self._current] >= self.window_s:  # the current window is full: the next one
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._starts):
                self._starts.append(now)
                self._values.append(0.0)
            else:
                self._starts[self._current], self._values[self._current] = now, 0.0
        self._values[self._current] += value
        self.last_record = now

    def rate(self, now: float) -> float:
        """Per second, over the span the windows cover."""
        self._purge(now)
        return sum(self._values) / self.span(now)

    def span(self, now: float) -> float:
        """The seconds the rate divides by: since the oldest window began, at least ``samples - 1`` windows."""
        elapsed = now - min(self._starts)
        whole = int(elapsed / self.window_s)
        if whole < self.samples - 1:
            elapsed += (self.samples - 1 - whole) * self.window_s
        return max(elapsed, 0.001)  # (one window of one sample, just begun)

    def throttle_ms(self, bound: float, now: float) -> int:
        """How long (ms) the client must wait for the rate to come down to ``bound``; 0 when within it."""
        rate = self.rate(now)
        if rate <= bound:
            return 0
        return round((rate - bound) / bound * self.span(now) * 1000)

    def _purge(self, now: float) -> None:
        """Windows that ended longer ago than all the windows together start again empty (Kafka resets them
        to now, which keeps the span at least the minimum)."""
        expire = self.samples * self.window_s
        starts, values = self._starts, self._values
        for i, start in enumerate(starts):
            if now - start >= expire:
                starts[i], values[i] = now, 0.0


class TokenBucket:
    """KIP-599's bucket of mutations (partitions created or deleted)."""

    __slots__ = ("burst_s", "tokens", "_rate", "_last", "last_record")

    def __init__(self, rate: float, samples: int, window_s: float, now: float):
        self.burst_s = samples * window_s  # the bucket holds this many seconds' worth of the rate
        self._rate = rate
        self.tokens = rate * self.burst_s  # starts full
        self._last = now
        self.last_record = now

    def _refill(self, rate: float, now: float) -> None:
        if rate != self._rate:  # the quota changed: the bucket keeps its tokens under the new size
            self._rate = rate
        self.tokens = min(rate * self.burst_s, self.tokens + rate * (now - self._last))
        self._last = now

    def exhausted(self, rate: float, now: float) -> bool:
        self._refill(rate, now)
        return self.tokens < 0

    def record(self, count: float, rate: float, now: float) -> None:
        self._refill(rate, now)
        self.tokens -= count
        self.last_record = now

    def throttle_ms(self, rate: float, now: float) -> int:
        self._refill(rate, now)
        return round(-self.tokens / rate * 1000) if self.tokens < 0 else 0

"""FakeClock: a clock the test moves by hand (``clock.now += 30``), for the sans-IO cores' ``clock`` and
``clock_ms`` parameters: milliseconds, no sleeping."""
from __future__ import annotations


class FakeClock:
    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

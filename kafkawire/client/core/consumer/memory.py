"""The consumer's memory pool (KIP-81): it bounds the bytes of fetch responses the consumer holds.

The pool is consulted for fetch responses only. Coordinator traffic (heartbeats, join/sync, offset
commits) never asks it for memory, so a full pool can never starve the group protocol; that is the
KIP's "priority" connections, decided here per request type rather than per connection.

How the consumer uses it:

* Before reading a fetch response's body from a broker connection, the connection layer asks
  ``try_allocate(size, waiter=connection)`` for the size its 4-byte prefix announced. A refusal (None)
  means: leave the bytes in the socket (TCP backpressure) and ask again after the pool calls its
  listeners, which it does after every release. ``is_out_of_memory`` says whether broker connections
  should read at all; ``cancel(waiter)`` withdraws a connection that closes while waiting.
* The Fetcher splits the lease among the partitions of the response and returns each share when the
  application has been handed that partition's records (see ``completed_fetch``).

Refused waiters queue in arrival order, and while one waits no other allocation may take memory it
needs: the first waiter is served as soon as its size fits, however many smaller responses arrive
meanwhile (otherwise a large response could wait forever behind a stream of small ones).

Allocation is strict, with one exception so that a message larger than the pool cannot wedge the
consumer: an allocation is granted if it fits in what is free, or if nothing at all is allocated.
Hence ``used <= max(buffer.memory, R)`` for R the largest single response. By KIP-74 a response's
records exceed ``fetch.max.bytes`` only when its first batch alone does, and ``buffer.memory >=
fetch.max.bytes``: the bytes held never exceed ``buffer.memory`` plus one maximum message (plus one
response's framing, tens of bytes per partition).
"""
from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable

__all__ = ["MemoryPool", "Lease"]

_MAX_SPELLS = 10_000  # closed spells kept for the window; beyond, the oldest two are merged


def _monotonic_ms() -> float:
    return time.monotonic() * 1000.0


class Lease:
    """Bytes granted by a MemoryPool; ``release()`` gives back what is left (once; later calls do nothing)."""

    __slots__ = ("_pool", "size")

    def __init__(self, pool: MemoryPool, size: int):
        self._pool = pool
        self.size = size

    def split(self, size: int) -> Lease:
        """Carve ``size`` bytes off into a lease of their own (released independently)."""
        if not 0 <= size <= self.size:
            raise ValueError(f"cannot split {size} bytes off a lease of {self.size}")
        self.size -= size
        return Lease(self._pool, size)

    def release(self) -> None:
        if self.size:
            size, self.size = self.size, 0
            self._pool.release(size)

    def __repr__(self) -> str:
        return f"Lease({self.size})"


class MemoryPool:
    """A byte budget of ``size`` (``buffer.memory``), with KIP-81's metrics. Not thread-safe: it belongs
    to the event loop that runs the consumer. ``clock`` returns milliseconds (monotonic)."""

    def __init__(self, size: int, *, clock: Callable[[], float] = _monotonic_ms, window_ms: float = 30_000.0):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"a memory pool needs a positive size in bytes, not {size!r}")
        if window_ms <= 0:
            raise ValueError(f"window_ms must be positive, not {window_ms!r}")
        self.size = size
        self.used = 0
        self.peak_used = 0
        self.window_ms = window_ms
        self._clock = clock
        self._created = clock()
        self._waiting: OrderedDict[Hashable, int] = OrderedDict()  # refused waiters, first come first served
        self._one_off = 0  # smallest size refused without a waiter since the last grant (0: none)
        self._spell_start: float | None = None  # when the current depletion began
        self._spells: deque[tuple[float, float]] = deque()  # closed spells that may overlap the window
        self._depleted_total = 0.0  # closed spells, all time
        self._listeners: list[Callable[[MemoryPool], None]] = []

    # ---- allocation -------------------------------------------------------------------------------
    @property
    def available(self) -> int:
        return self.size - self.used

    @property
    def is_out_of_memory(self) -> bool:
        """True while broker connections should not read fetch responses: depleted, or nothing free."""
        return self._spell_start is not None or self.used >= self.size

    @property
    def is_depleted(self) -> bool:
        return self._spell_start is not None

    def waiters(self) -> list[Hashable]:
        """The waiters refused so far and not yet served, first first."""
        return list(self._waiting)

    def _fits(self, size: int) -> bool:
        return self.used == 0 or self.used + size <= self.size

    def try_allocate(self, size: int, waiter: Hashable | None = None) -> Lease | None:
        """A lease of ``size`` bytes, or None if they cannot be had now. A refused ``waiter`` keeps its
        place in line (ask again after a release); without one, nothing is remembered but the refusal."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"allocation size must be a positive number of bytes, not {size!r}")
        first = next(iter(self._waiting.items()), None)
        if first is None or first[0] == waiter:
            granted = self._fits(size)
        else:  # someone is already waiting: take only what leaves room for them
            granted = self.used + size + first[1] <= self.size
        if granted:
            if waiter is not None:
                self._waiting.pop(waiter, None)
            self._one_off = 0
            self.used += size
            if self.used > self.peak_used:
                self.peak_used = self.used
            self._update()
            return Lease(self, size)
        if waiter is not None:
            self._waiting[waiter] = size  # a waiter asking again keeps its place
        else:
            self._one_off = min(self._one_off, size) if self._one_off else size
        self._update()
        return None

    def cancel(self, waiter: Hashable) -> None:
        """Withdraw a waiter (its connection closed); others may then be served."""
        if self._waiting.pop(waiter, None) is not None:
            self._update()
            self._notify()

    def allocate_unchecked(self, size: int) -> Lease:
        """Account for ``size`` bytes that are already held whatever the pool says (a response read
        before its size could be checked); it counts towards ``used`` like any lease."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"allocation size must be a non-negative number of bytes, not {size!r}")
        self.used += size
        if self.used > self.peak_used:
            self.peak_used = self.used
        return Lease(self, size)

    def release(self, size: int) -> None:
        """Give ``size`` bytes back; listeners are then called (waiting connections ask again)."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"release size must be a non-negative number of bytes, not {size!r}")
        if size > self.used:
            raise ValueError(f"releasing {size} bytes but only {self.used} are allocated")
        self.used -= size
        if self._one_off and self._fits(self._one_off):
            self._one_off = 0
        self._update()
        self._notify()

    # ---- waiting ----------------------------------------------------------------------------------
    def add_listener(self, listener: Callable[[MemoryPool], None]) -> None:
        """Call ``listener(pool)`` after every release (e.g. an asyncio.Event's ``set`` via a lambda)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[MemoryPool], None]) -> None:
        self._listeners.remove(listener)

    def _notify(self) -> None:
        for listener in tuple(self._listeners):
            listener(self)

    # ---- depletion metrics ------------------------------------------------------------------------
    def _update(self) -> None:
        """Open or close the depletion spell after a change."""
        depleted = bool(self._waiting) or self._one_off > 0
        if depleted and self._spell_start is None:
            self._spell_start = self._clock()
        elif not depleted and self._spell_start is not None:
            self._end_spell()

    def _end_spell(self) -> None:
        now = self._clock()
        start = self._spell_start
        assert start is not None  # (called only while a spell is open)
        self._spell_start = None
        self._depleted_total += now - start
        spells = self._spells
        spells.append((start, now))
        self._prune(now)
        if len(spells) > _MAX_SPELLS:  # bounded memory; merging counts the gap between them as depleted
            first_start, _ = spells.popleft()
            _, second_end = spells.popleft()
            spells.appendleft((first_start, second_end))

    def _prune(self, now: float) -> None:
        horizon = now - self.window_ms
        spells = self._spells
        while spells and spells[0][1] <= horizon:
            spells.popleft()

    def depleted_time_total(self) -> float:
        """Milliseconds spent depleted since the pool was made, the current spell included."""
        ongoing = self._clock() - self._spell_start if self._spell_start is not None else 0.0
        return self._depleted_total + ongoing

    def avg_depleted_percent(self) -> float:
        """Percent of the last ``window_ms`` (or of the pool's life, if shorter) spent depleted."""
        now = self._clock()
        span = min(self.window_ms, now - self._created)
        if span <= 0:
            return 0.0
        self._prune(now)
        horizon = now - span
        depleted = sum(end - max(start, horizon) for start, end in self._spells if end > horizon)
        if self._spell_start is not None:
            depleted += now - max(self._spell_start, horizon)
        return 100.0 * min(depleted, span) / span

    def metrics(self) -> dict[str, float]:
        """KIP-81's consumer metrics, by name. The pool is depleted while a refused allocation waits, from
        a refusal until every waiter has been served or withdrawn; a refusal without a waiter (a one-off
        attempt) counts until the next grant, or until a release makes room for the size refused.
        ``memory-pool-avg-depleted-percent`` is the share of the last ``window_ms`` (default 30 s; the
        pool's lifetime while shorter) spent depleted; ``memory-pool-depleted-time-total`` the
        milliseconds spent depleted since the pool was made."""
        return {
            "memory-pool-free": max(0, self.size - self.used),
            "memory-pool-used": self.used,
            "memory-pool-avg-depleted-percent": self.avg_depleted_percent(),
            "memory-pool-depleted-time-total": self.depleted_time_total(),
        }

    def __repr__(self) -> str:
        return f"MemoryPool(size={self.size}, used={self.used}, depleted={self.is_depleted})"

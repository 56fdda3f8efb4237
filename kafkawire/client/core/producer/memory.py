"""The producer's memory pool (BufferPool): ``buffer.memory`` bytes handed out to batches, sans-IO.

It keeps upstream's BufferPool structure: a free list of ``batch.size`` (poolable) buffers kept for
reuse, the rest of the memory as an unstructured count ("non-pooled"), and strictly FIFO waiters
that accumulate memory as it frees up, the oldest first, until they have all they asked for.

KIP-782 changes what a returned buffer leaves behind: at most one ``batch.size`` buffer goes back
to the free list (a returned 256 KiB buffer keeps 16 KiB pooled and frees the remaining 240 KiB);
buffers smaller than ``batch.size`` go back to non-pooled memory.

In Python the bytes themselves live in each batch's record builder, so a ``Buffer`` here is the
accounting token for its capacity; the pool is what bounds the producer's memory.

Nothing here blocks. ``allocate`` returns an ``Allocation``: done at once when memory is there,
otherwise queued, to complete when ``deallocate`` frees enough, or to fail with BufferExhausted once
``max.block.ms`` has passed on the pool's clock. The pool has no timer of its own: the driver calls
``expire()`` at ``next_deadline_ms()`` (an asyncio layer with ``loop.call_at``, a test by moving a
fake clock); ``allocate``, ``deallocate`` and ``Allocation.result`` also expire overdue waiters first.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from ...errors import BufferExhausted, PoolClosed

__all__ = ["BufferPool", "Buffer", "Allocation"]


def _monotonic_ms() -> float:
    return time.monotonic_ns() / 1_000_000


class Buffer:
    """``capacity`` bytes of the pool, held by one batch until given back."""

    __slots__ = ("capacity", "_pool", "_released")

    def __init__(self, capacity: int, pool: BufferPool):
        self.capacity = capacity
        self._pool = pool
        self._released = False

    def __repr__(self) -> str:
        state = "released" if self._released else "held"
        return f"Buffer({self.capacity}, {state})"


class Allocation:
    """A request for memory: done with a Buffer, failed (BufferExhausted, PoolClosed), or waiting.

    Future-like and callback-driven so an asyncio layer can await it; ``result()`` never blocks.
    """

    __slots__ = ("size", "requested_ms", "deadline_ms", "_pool", "_accumulated", "_buffer", "_error",
                 "_callbacks", "_waiting")

    def __init__(self, pool: BufferPool, size: int, requested_ms: float, deadline_ms: float):
        self.size = size
        self.requested_ms = requested_ms
        self.deadline_ms = deadline_ms
        self._pool = pool
        self._accumulated = 0  # bytes gathered while at the head of the queue
        self._buffer: Buffer | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Allocation], None]] = []
        self._waiting = False

    def done(self) -> bool:
        return self._buffer is not None or self._error is not None

    def result(self) -> Buffer:
        """The buffer; raises the failure, or RuntimeError if still waiting (after expiring overdue
        waiters, so a test that moved its clock past the deadline sees BufferExhausted here)."""
        if not self.done():
            self._pool.expire()
        if self._error is not None:
            raise self._error
        if self._buffer is None:
            raise RuntimeError(f"allocation of {self.size} bytes is still waiting for memory")
        return self._buffer

    def exception(self) -> BaseException | None:
        return self._error

    def add_done_callback(self, callback: Callable[[Allocation], None]) -> None:
        """Call ``callback(self)`` once done (at once if already done)."""
        if self.done():
            callback(self)
        else:
            self._callbacks.append(callback)

    def cancel(self) -> bool:
        """Stop waiting and give back what was gathered; False if already done."""
        if self.done():
            return False
        self._pool._withdraw(self)
        self._finish(None, PoolClosed("allocation cancelled"))
        self._pool._serve()
        return True

    def _finish(self, buffer: Buffer | None, error: BaseException | None) -> None:
        self._buffer, self._error = buffer, error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def __repr__(self) -> str:
        state = "done" if self._buffer is not None else "failed" if self._error is not None else "waiting"
        return f"Allocation({self.size}, {state})"


class BufferPool:
    """``total_memory`` bytes (``buffer.memory``) with a free list of ``poolable_size`` (``batch.size``)
    buffers. ``clock_ms`` returns milliseconds on a monotonic clock (a fake one in tests)."""

    def __init__(self, total_memory: int, poolable_size: int, clock_ms: Callable[[], float] = _monotonic_ms):
        if total_memory <= 0:
            raise ValueError(f"buffer.memory must be positive, got {total_memory}")
        if poolable_size < 0:
            raise ValueError(f"batch.size must not be negative, got {poolable_size}")
        self.total_memory = total_memory
        self.poolable_size = poolable_size
        self.clock_ms = clock_ms
        self._free: deque[Buffer] = deque()
        self._non_pooled = total_memory  # memory neither handed out nor on the free list
        self._waiters: deque[Allocation] = deque()
        self._closed = False
        self.wait_time_ns_total = 0
        self.exhausted_total = 0
        self.peak_in_use = 0
        self.peak_reserved = 0

    # ---- state -----------------------------------------------------------------------------------
    @property
    def available_memory(self) -> int:
        """Memory that can be handed out: non-pooled plus the free list (upstream's availableMemory)."""
        return self._non_pooled + len(self._free) * self.poolable_size

    @property
    def unallocated_memory(self) -> int:
        return self._non_pooled

    @property
    def free_buffers(self) -> int:
        return len(self._free)

    @property
    def queued(self) -> int:
        """Allocations waiting for memory (Kafka's ``waiting-threads``)."""
        return len(self._waiters)

    @property
    def in_use(self) -> int:
        """Bytes held by batches (and by waiters part way through gathering)."""
        return self.total_memory - self.available_memory

    @property
    def reserved(self) -> int:
        """What the process would hold in Java: in use plus the free list kept for reuse."""
        return self.total_memory - self._non_pooled

    def metrics(self) -> dict[str, float]:
        return {
            "bufferpool-wait-time-ns-total": self.wait_time_ns_total,
            "buffer-available-bytes": self.available_memory,
            "buffer-total-bytes": self.total_memory,
            "waiting-threads": len(self._waiters),
            "buffer-exhausted-total": self.exhausted_total,
        }

    # ---- allocation ------------------------------------------------------------------------------
    def allocate(self, size: int, max_time_to_block_ms: float) -> Allocation:
        """Ask for ``size`` bytes, waiting at most ``max_time_to_block_ms`` (0: fail at once)."""
        self._check_size(size)
        if max_time_to_block_ms < 0:
            raise ValueError(f"max_time_to_block_ms must not be negative, got {max_time_to_block_ms}")
        if self._closed:
            raise PoolClosed("the producer is closed")
        now = self.clock_ms()
        self.expire(now)
        allocation = Allocation(self, size, now, now + max_time_to_block_ms)
        buffer = self.try_allocate(size)
        if buffer is not None:
            allocation._finish(buffer, None)
        elif max_time_to_block_ms == 0:
            self.exhausted_total += 1
            allocation._finish(None, BufferExhausted(
                f"no {size} bytes free in buffer.memory ({self.total_memory}) and max.block.ms is 0"))
        else:
            allocation._waiting = True
            self._waiters.append(allocation)
            self._serve()  # it may take whatever is free now, as the new head of the queue
        return allocation

    def try_allocate(self, size: int) -> Buffer | None:
        """``size`` bytes now, or None. Never overtakes waiters: with a queue it fails."""
        self._check_size(size)
        if self._waiters or self._closed:
            return None
        if size == self.poolable_size and self._free:
            return self._hand_out(self._free.popleft())
        if self.available_memory < size:
            return None
        self._take_non_pooled(size)
        return self._hand_out(Buffer(size, self))

    def reallocate(self, buffer: Buffer, new_size: int) -> Buffer | None:
        """Swap ``buffer`` for one of ``new_size`` bytes (how a batch grows), or None if the memory is
        not there now (``buffer`` is then still held). The old buffer's bytes count towards the new
        one: Python grows the batch's bytearray in place, so both are never held at once."""
        self._check_held(buffer)
        self._check_size(new_size)
        if self._waiters or self._closed:
            return None
        if self.available_memory + buffer.capacity < new_size:
            return None
        buffer._released = True
        self._non_pooled += buffer.capacity
        if new_size == self.poolable_size and self._free:
            return self._hand_out(self._free.popleft())
        self._take_non_pooled(new_size)
        return self._hand_out(Buffer(new_size, self))

    def deallocate(self, buffer: Buffer) -> None:
        """Give back ``buffer``: at most one ``poolable_size`` piece returns to the free list, the rest
        to non-pooled memory; then waiters are served in order."""
        self._check_held(buffer)
        buffer._released = True
        if self.poolable_size and buffer.capacity >= self.poolable_size:
            self._free.append(Buffer(self.poolable_size, self))
            self._non_pooled += buffer.capacity - self.poolable_size
        else:
            self._non_pooled += buffer.capacity
        self.expire()
        self._serve()

    def expire(self, now_ms: float | None = None) -> float | None:
        """Fail the waiters whose ``max.block.ms`` has passed; returns the next deadline (or None)."""
        now = self.clock_ms() if now_ms is None else now_ms
        if any(waiter.deadline_ms <= now for waiter in self._waiters):
            overdue = [waiter for waiter in self._waiters if waiter.deadline_ms <= now]
            for waiter in overdue:
                if waiter.done():  # served meanwhile, by a callback of an earlier one
                    continue
                self._withdraw(waiter)
                self.exhausted_total += 1
                self._record_wait(waiter, now)
                waited = now - waiter.requested_ms
                waiter._finish(None, BufferExhausted(
                    f"failed to allocate {waiter.size} bytes within max.block.ms ({waited:.0f} ms waited); "
                    f"buffer.memory is {self.total_memory}, {self.available_memory} free"))
            self._serve(now)
        return self.next_deadline_ms()

    def next_deadline_ms(self) -> float | None:
        return min((waiter.deadline_ms for waiter in self._waiters), default=None)

    def close(self) -> None:
        """Fail every waiter with PoolClosed; later allocations are refused."""
        self._closed = True
        while self._waiters:
            waiter = self._waiters[0]
            self._withdraw(waiter)
            waiter._finish(None, PoolClosed("the producer closed while waiting for memory"))

    # ---- internals -------------------------------------------------------------------------------
    def _serve(self, now: float | None = None) -> None:
        """Hand memory to the head waiter until it has all it asked for, then to the next."""
        while self._waiters:
            head = self._waiters[0]
            missing = head.size - head._accumulated
            if head._accumulated == 0 and head.size == self.poolable_size and self._free:
                buffer = self._free.popleft()
            else:
                got = min(missing, self.available_memory)
                if got == 0:
                    return
                self._take_non_pooled(got)
                head._accumulated += got
                self._note_peaks()
                if head._accumulated < head.size:
                    return
                buffer = Buffer(head.size, self)
            self._waiters.popleft()
            head._waiting = False
            head._accumulated = 0
            self._record_wait(head, self.clock_ms() if now is None else now)
            head._finish(self._hand_out(buffer), None)

    def _withdraw(self, waiter: Allocation) -> None:
        if waiter._waiting:
            self._waiters.remove(waiter)
            waiter._waiting = False
            self._non_pooled += waiter._accumulated
            waiter._accumulated = 0

    def _take_non_pooled(self, size: int) -> None:
        # free-list buffers are broken up only when non-pooled memory alone is short
        while self._non_pooled < size:
            self._free.pop()
            self._non_pooled += self.poolable_size
        self._non_pooled -= size

    def _hand_out(self, buffer: Buffer) -> Buffer:
        buffer._released = False
        self._note_peaks()
        return buffer

    def _note_peaks(self) -> None:
        in_use = self.in_use
        if in_use > self.peak_in_use:
            self.peak_in_use = in_use
        reserved = self.total_memory - self._non_pooled
        if reserved > self.peak_reserved:
            self.peak_reserved = reserved

    def _record_wait(self, waiter: Allocation, now: float) -> None:
        self.wait_time_ns_total += max(0, round((now - waiter.requested_ms) * 1_000_000))

    def _check_size(self, size: int) -> None:
        if not isinstance(size, int) or size <= 0:
            raise ValueError(f"allocation size must be a positive integer, got {size!r}")
        if size > self.total_memory:
            raise ValueError(f"cannot allocate {size} bytes: more than buffer.memory ({self.total_memory})")

    def _check_held(self, buffer: Buffer) -> None:
        if buffer._pool is not self:
            raise ValueError("buffer belongs to another pool")
        if buffer._released:
            raise ValueError(f"{buffer!r} was already given back")

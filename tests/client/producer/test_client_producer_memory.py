"""The producer's memory (kafkawire.client.core.producer.memory, the BufferPool): the free list of batch.size
buffers and what KIP-782 leaves on it, strictly FIFO waiters, max.block.ms on a fake clock, growth, and
accounting that never exceeds buffer.memory.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from kafkawire.client.core.producer.memory import BufferPool
from kafkawire.client.errors import BufferExhausted, PoolClosed

from support.fake_clock import FakeClock

SETTINGS = settings(max_examples=60, deadline=None, database=InMemoryExampleDatabase(),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
KiB = 1024


def test_pool_reuses_poolable_buffers():
    pool = BufferPool(64 * KiB, 16 * KiB, clock_ms=FakeClock())
    buffer = pool.allocate(16 * KiB, 0).result()
    pool.deallocate(buffer)
    assert pool.free_buffers == 1 and pool.available_memory == 64 * KiB
    again = pool.allocate(16 * KiB, 0).result()
    assert pool.free_buffers == 0 and again.capacity == 16 * KiB
    with pytest.raises(ValueError, match="already given back"):
        pool.deallocate(buffer)


def test_pool_free_list_keeps_at_most_batch_size_of_a_returned_buffer():
    pool = BufferPool(1024 * KiB, 16 * KiB, clock_ms=FakeClock())
    big = pool.allocate(256 * KiB, 0).result()
    small = pool.allocate(4 * KiB, 0).result()
    pool.deallocate(big)
    assert pool.free_buffers == 1  # 16 KiB pooled
    assert pool.unallocated_memory == 1024 * KiB - 16 * KiB - 4 * KiB  # the other 240 KiB freed outright
    assert pool.reserved == 16 * KiB + 4 * KiB
    pool.deallocate(small)
    assert pool.free_buffers == 1 and pool.unallocated_memory == 1024 * KiB - 16 * KiB


def test_pool_breaks_up_free_buffers_only_when_needed():
    pool = BufferPool(64 * KiB, 16 * KiB, clock_ms=FakeClock())
    buffers = [pool.allocate(16 * KiB, 0).result() for _ in range(4)]
    for buffer in buffers:
        pool.deallocate(buffer)
    assert pool.free_buffers == 4 and pool.unallocated_memory == 0
    pool.allocate(20 * KiB, 0).result()
    assert pool.free_buffers == 2 and pool.unallocated_memory == 12 * KiB
    with pytest.raises(BufferExhausted):
        pool.allocate(48 * KiB, 0).result()
    with pytest.raises(ValueError, match="more than buffer.memory"):
        pool.allocate(65 * KiB, 10)


def test_pool_waiters_are_served_fifo_even_when_a_later_one_would_fit():
    clock = FakeClock()
    pool = BufferPool(64 * KiB, 16 * KiB, clock_ms=clock)
    held_buffers = [pool.allocate(16 * KiB, 0).result() for _ in range(4)]
    order = []
    first = pool.allocate(32 * KiB, 1000)
    second = pool.allocate(16 * KiB, 1000)
    third = pool.allocate(8 * KiB, 1000)
    for name, allocation in (("first", first), ("second", second), ("third", third)):
        allocation.add_done_callback(lambda a, name=name: order.append(name))
    assert pool.metrics()["waiting-threads"] == 3
    clock.now = 10
    pool.deallocate(held_buffers.pop())  # 16 KiB: the head gathers it, the others still wait
    assert not first.done() and not second.done() and not third.done()
    assert pool.available_memory == 0
    clock.now = 20
    pool.deallocate(held_buffers.pop())
    assert order == ["first"] and first.result().capacity == 32 * KiB
    pool.deallocate(held_buffers.pop())
    assert order == ["first", "second"]
    pool.deallocate(first.result())
    assert order == ["first", "second", "third"]
    assert pool.queued == 0 and pool.in_use == 16 * KiB + 16 * KiB + 8 * KiB
    # waits of 20, 20 and 20 ms
    assert pool.metrics()["bufferpool-wait-time-ns-total"] == 60_000_000


def test_pool_buffer_exhausted_after_max_block_ms_on_fake_clock():
    clock = FakeClock(1000)
    pool = BufferPool(32 * KiB, 16 * KiB, clock_ms=clock)
    keep = [pool.allocate(16 * KiB, 0).result(), pool.allocate(8 * KiB, 0).result()]
    waiting = pool.allocate(16 * KiB, 500)
    behind = pool.allocate(8 * KiB, 2000)
    assert pool.next_deadline_ms() == 1500
    assert pool.in_use == 32 * KiB  # the head already holds the 8 KiB that were free
    clock.now = 1499
    assert pool.expire() == 1500 and not waiting.done()
    with pytest.raises(RuntimeError, match="still waiting"):
        waiting.result()
    clock.now = 1500
    with pytest.raises(BufferExhausted, match="max.block.ms"):
        waiting.result()  # result() expires overdue waiters first
    # what the head had gathered went to the next waiter
    assert behind.done() and behind.result().capacity == 8 * KiB
    metrics = pool.metrics()
    assert metrics["buffer-exhausted-total"] == 1 and metrics["waiting-threads"] == 0
    assert metrics["bufferpool-wait-time-ns-total"] == 500_000_000 + 500_000_000
    assert metrics["buffer-available-bytes"] == 0 and metrics["buffer-total-bytes"] == 32 * KiB
    del keep


def test_pool_cancel_and_close_release_waiters():
    pool = BufferPool(16 * KiB, 16 * KiB, clock_ms=FakeClock())
    buffer = pool.allocate(8 * KiB, 0).result()
    cancelled = pool.allocate(16 * KiB, 100)
    assert pool.available_memory == 0
    assert cancelled.cancel() and pool.available_memory == 8 * KiB
    waiter = pool.allocate(16 * KiB, 100)
    pool.close()
    with pytest.raises(PoolClosed):
        waiter.result()
    assert pool.available_memory == 8 * KiB
    pool.deallocate(buffer)
    with pytest.raises(PoolClosed):
        pool.allocate(1, 0)


def test_pool_growth_never_overtakes_waiters():
    pool = BufferPool(32 * KiB, 16 * KiB, clock_ms=FakeClock())
    small = pool.allocate(4 * KiB, 0).result()
    grown = pool.reallocate(small, 8 * KiB)
    assert grown.capacity == 8 * KiB and pool.in_use == 8 * KiB
    with pytest.raises(ValueError):
        pool.deallocate(small)  # consumed by the reallocation
    pool.allocate(16 * KiB, 0).result()
    waiter = pool.allocate(16 * KiB, 100)
    assert pool.reallocate(grown, 12 * KiB) is None  # memory would be there, but a waiter is first
    assert not waiter.done()


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["alloc", "free", "grow", "tick"]), st.integers(1, 80 * KiB)),
                max_size=60))
def test_pool_accounting_never_exceeds_total(operations):
    clock = FakeClock()
    pool = BufferPool(128 * KiB, 16 * KiB, clock_ms=clock)
    held_buffers, waiting = [], []
    for op, size in operations:
        if op == "alloc":
            allocation = pool.allocate(size, 50)
            (held_buffers if allocation.done() else waiting).append(allocation)
        elif op == "free" and held_buffers:
            allocation = held_buffers.pop(size % len(held_buffers))
            if allocation.exception() is None:
                pool.deallocate(allocation.result())
        elif op == "grow" and held_buffers:
            allocation = held_buffers[size % len(held_buffers)]
            if allocation.exception() is None:
                grown = pool.reallocate(allocation.result(), min(size * 2, 128 * KiB))
                if grown is not None:
                    held_buffers[size % len(held_buffers)] = _Done(grown)
        elif op == "tick":
            clock.now += 30
            pool.expire()
        still = []
        for allocation in waiting:
            (held_buffers if allocation.done() else still).append(allocation)
        waiting = still
        live = sum(a.result().capacity for a in held_buffers if a.exception() is None)
        gathering = sum(a._accumulated for a in waiting)
        assert pool.in_use == live + gathering <= pool.total_memory
        assert pool.available_memory + pool.in_use == pool.total_memory
        assert pool.queued == len(waiting)


class _Done:
    def __init__(self, buffer):
        self._buffer = buffer

    def result(self):
        return self._buffer

    def exception(self):
        return None

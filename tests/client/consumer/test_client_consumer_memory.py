"""The consumer's memory (kafkawire.client.core.consumer.memory, KIP-81): what fits and the exception for an
empty pool, leases split and released, waiters served first come first served, and the depletion metrics
on a fake clock. How the fetcher charges it is in test_client_fetcher.
"""
from __future__ import annotations

import pytest

from kafkawire.client.core.consumer.memory import MemoryPool

from support.fake_clock import FakeClock


def test_pool_grants_what_fits_and_anything_when_empty():
    pool = MemoryPool(100, clock=FakeClock())
    first = pool.try_allocate(60)
    assert first is not None and pool.used == 60 and pool.available == 40
    assert pool.try_allocate(50) is None  # strict: 60 + 50 > 100
    assert pool.is_depleted and pool.is_out_of_memory
    second = pool.try_allocate(40)  # fits exactly; ends the depletion
    assert second is not None and not pool.is_depleted and pool.is_out_of_memory  # nothing free
    first.release()
    second.release()
    second.release()  # a lease gives its bytes back once
    assert pool.used == 0
    huge = pool.try_allocate(250)  # larger than the pool, but the pool is empty: one oversize response
    assert huge is not None and pool.used == 250 and pool.peak_used == 250
    assert pool.try_allocate(1) is None
    huge.release()
    with pytest.raises(ValueError, match="only 0 are allocated"):
        pool.release(1)
    with pytest.raises(ValueError, match="positive"):
        pool.try_allocate(0)
    with pytest.raises(ValueError, match="positive size"):
        MemoryPool(0)


def test_pool_lease_split_and_listeners():
    pool = MemoryPool(100, clock=FakeClock())
    calls = []
    pool.add_listener(lambda p: calls.append(p.used))
    lease = pool.try_allocate(90)
    share = lease.split(30)
    assert (lease.size, share.size, pool.used) == (60, 30, 90)
    lease.release()
    share.release()
    assert calls == [30, 0]  # called after every release
    with pytest.raises(ValueError, match="cannot split"):
        share.split(1)


def test_pool_serves_waiters_first_come_first_served():
    pool = MemoryPool(100, clock=FakeClock())
    held = [pool.try_allocate(30) for _ in range(3)]  # 90 used
    assert pool.try_allocate(150, waiter="big") is None  # larger than the pool: needs it empty
    assert pool.try_allocate(20, waiter="small") is None  # would fit in 10? no; and it queues behind
    assert pool.waiters() == ["big", "small"]
    held[0].release()
    assert pool.try_allocate(20, waiter="small") is None  # room, but taking it would delay "big"
    assert pool.try_allocate(5) is None  # so does a one-off
    held[1].release()
    held[2].release()
    assert pool.try_allocate(20, waiter="small") is None  # even with the pool empty
    big = pool.try_allocate(150, waiter="big")
    assert big is not None and pool.used == 150 and pool.waiters() == ["small"]
    big.release()
    assert pool.try_allocate(20, waiter="small") is not None and pool.waiters() == [] and not pool.is_depleted
    # a waiter that goes away no longer holds the others up
    assert pool.try_allocate(90, waiter="gone") is None
    assert pool.try_allocate(75, waiter="next") is None
    pool.cancel("gone")
    assert pool.try_allocate(75, waiter="next") is not None


def test_pool_metrics_on_a_fake_clock():
    clock = FakeClock(0)
    pool = MemoryPool(100, clock=clock, window_ms=10_000)
    assert pool.metrics() == {"memory-pool-free": 100, "memory-pool-used": 0,
                              "memory-pool-avg-depleted-percent": 0.0, "memory-pool-depleted-time-total": 0.0}
    held = pool.try_allocate(60)
    clock.now = 1_000
    assert pool.try_allocate(50) is None  # depleted from t=1000
    assert pool.try_allocate(45) is None  # the smallest size refused in the spell is 45
    clock.now = 2_000
    assert pool.metrics()["memory-pool-depleted-time-total"] == 1_000  # the ongoing spell counts
    assert pool.metrics()["memory-pool-avg-depleted-percent"] == pytest.approx(50.0)  # 1000 of 2000 ms
    part = held.split(10)
    part.release()  # 50 used: 45 would fit now, the spell ends at t=2000
    assert not pool.is_depleted
    clock.now = 4_000
    metrics = pool.metrics()
    assert metrics["memory-pool-free"] == 50 and metrics["memory-pool-used"] == 50
    assert metrics["memory-pool-depleted-time-total"] == 1_000
    assert metrics["memory-pool-avg-depleted-percent"] == pytest.approx(25.0)  # 1000 of the pool's 4000 ms
    assert pool.try_allocate(60) is None  # a second spell from t=4000 ...
    clock.now = 5_000
    assert pool.try_allocate(50) is not None  # ... ended by a grant at t=5000
    clock.now = 11_500  # window [1500, 11500]: 500 ms of the first spell + the whole second one
    assert pool.avg_depleted_percent() == pytest.approx(100 * 1_500 / 10_000)
    assert pool.depleted_time_total() == 2_000
    clock.now = 40_000  # both spells out of the window; the total keeps them
    assert pool.avg_depleted_percent() == 0.0
    assert pool.depleted_time_total() == 2_000

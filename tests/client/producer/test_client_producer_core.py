"""The producer's sans-IO core: the partitioner and the RecordAccumulator with KIP-782 (its config is in
test_client_configs, its BufferPool in test_client_producer_memory).

Everything runs on a fake clock: no sockets, no threads, no sleeping.
"""
from __future__ import annotations

import math
import random
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kafkawire.client.core.producer.accumulator import RecordAccumulator
from kafkawire.client.core.producer.partitioner import Partitioner, StickyPartitioner, murmur2, partition_for_key, to_positive
from kafkawire.client.core.producer.batch import record_size_upper_bound
from kafkawire.client.core.producer.config import ProducerConfig
from kafkawire.client.core.producer.memory import BufferPool
from kafkawire.client.core.topic_partition import TopicPartition
from kafkawire.client.errors import AccumulatorClosed, BufferExhausted, DeliveryTimeout, RecordTooLarge
from kafkawire.records import Codec, Header, iter_batches

from support.fake_clock import FakeClock

SETTINGS = settings(max_examples=60, deadline=None, database=InMemoryExampleDatabase(),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
KiB = 1024


def make(clock=None, **properties) -> tuple[RecordAccumulator, BufferPool, FakeClock]:
    """An accumulator (idempotent, with producer id 7 epoch 0 unless turned off) on a fake clock."""
    clock = clock or FakeClock()
    config = ProducerConfig.from_properties(properties)
    pool = BufferPool(config.buffer_memory, config.batch_size, clock_ms=clock)
    accumulator = RecordAccumulator(config, pool)
    accumulator.set_producer_id(7, 0)
    return accumulator, pool, clock


def held(accumulator: RecordAccumulator, tps) -> int:
    return sum(batch.capacity for tp in tps for batch in accumulator.batches(*tp))


def drain_all(accumulator, leaders, now, max_request_size=1 << 30):
    nodes = set(leaders.values())
    return accumulator.drain(leaders, nodes, max_request_size, now)


# ---- partitioner ----------------------------------------------------------------------------------
def test_murmur2_java_vectors():
    # Kafka's UtilsTest vectors (signed, as Java returns them), cross-checked against kafka-python
    vectors = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
               b"a-little-bit-longer-string": -1486304829, b"abc": 479470107,
               b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971}
    for key, expected in vectors.items():
        assert murmur2(key) == expected
        assert kafka_python_murmur2(key) == expected & 0xFFFFFFFF


@SETTINGS
@given(st.binary(max_size=64), st.integers(1, 1000))
def test_murmur2_matches_kafka_python(key, partitions):
    ours = murmur2(key)
    assert -(1 << 31) <= ours < (1 << 31)
    assert ours & 0xFFFFFFFF == kafka_python_murmur2(key)
    # kafka-python's DefaultPartitioner: (murmur2 & 0x7fffffff) % n over the sorted partitions
    assert partition_for_key(key, partitions) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions


def test_to_positive_is_javas_not_abs():
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(5) == 5


def test_sticky_partitioner_switches_after_batch_size_when_batches_full():
    sticky = StickyPartitioner(batch_size=1000, rng=random.Random(1))
    first = sticky.partition("t", 8)
    sticky.on_append("t", first, 600, batches_full=False)
    sticky.on_append("t", first, 600, batches_full=False)  # 1200 >= batch.size but the batch is not full
    assert sticky.partition("t", 8) == first
    sticky.on_append("t", first, 10, batches_full=True)
    second = sticky.partition("t", 8)
    assert second != first
    # twice batch.size switches even when the batch is not full
    sticky.on_append("t", second, 2000, batches_full=False)
    assert sticky.partition("t", 8) != second


def test_sticky_partitioner_picks_among_available_partitions():
    sticky = StickyPartitioner(batch_size=10, rng=random.Random(3))
    seen = set()
    for _ in range(200):
        partition = sticky.partition("t", 10, available=[2, 5, 7])
        seen.add(partition)
        sticky.on_append("t", partition, 10, batches_full=True)
    assert seen == {2, 5, 7}
    # the current partition losing its leader moves records elsewhere at once
    current = sticky.partition("t", 10, available=[2, 5, 7])
    assert sticky.partition("t", 10, available=[p for p in (2, 5, 7) if p != current]) != current
    # no partition available: any partition
    assert 0 <= sticky.partition("u", 3, available=[]) < 3


def test_sticky_spreads_uniformly_over_time():
    sticky = StickyPartitioner(batch_size=100, rng=random.Random(11))
    counts = [0] * 4
    for _ in range(4000):
        partition = sticky.partition("t", 4)
        counts[partition] += 1
        sticky.on_append("t", partition, 10)
    assert min(counts) > 700


def test_partitioner_hashes_keys_unless_ignored():
    partitioner = Partitioner(batch_size=16384, rng=random.Random(0))
    assert partitioner.partition("t", b"foobar", 12) == to_positive(-790332482) % 12
    sticky = partitioner.partition("t", None, 12)
    assert partitioner.partition("t", None, 12) == sticky
    ignoring = Partitioner(batch_size=16384, ignore_keys=True, rng=random.Random(0))
    assert {ignoring.partition("t", bytes([k]), 12) for k in range(50)} == {ignoring.partition("t", None, 12)}

# ---- accumulator: KIP-782 batch growth ------------------------------------------------------------
def test_batch_grows_4k_8k_16k_then_ready_but_still_accepts_until_max_size():
    accumulator, pool, clock = make(**{"linger.ms": 10_000})
    leaders = {TopicPartition("t", 0): 1}
    capacities, ready_after = [], []
    value = bytes(1000)
    for n in range(300):
        accumulator.append("t", 0, None, value, (), 0, clock.now)
        batch = accumulator.batches("t", 0)[0]
        if not capacities or capacities[-1] != batch.capacity:
            capacities.append(batch.capacity)
        assert pool.in_use == held(accumulator, [("t", 0)]) <= pool.total_memory
        assert batch.estimated_size() <= batch.capacity
        ready_after.append(bool(accumulator.ready(leaders, clock.now).ready_nodes))
        if len(accumulator.batches("t", 0)) > 1:
            break
    assert capacities[:4] == [4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB]
    assert capacities[-1] == 256 * KiB
    first = accumulator.batches("t", 0)[0]
    # ready from the record that took the batch to batch.size, still filled up to batch.max.size
    became_ready = ready_after.index(True)
    assert 16 * KiB - 1100 < (became_ready + 1) * 1000 + 61 <= 16 * KiB + 1100
    assert first.record_count > 200 and 256 * KiB - 1100 < first.estimated_size() <= 256 * KiB
    assert first.closed and len(accumulator.batches("t", 0)) == 2


def test_batch_without_expansion_starts_at_batch_size_and_first_record_sets_the_size():
    accumulator, pool, clock = make(**{"batch.initial.size": 0, "batch.max.size": 16384})
    accumulator.append("t", 0, None, b"x", (), 0, 0)
    assert accumulator.batches("t", 0)[0].capacity == 16 * KiB
    big, _, _ = make()
    big.append("t", 0, None, bytes(5000), (), 0, 0)  # the growth step that holds it
    assert big.batches("t", 0)[0].capacity == 8 * KiB
    big.append("t", 1, None, bytes(300_000), (), 0, 0)  # past batch.max.size: exactly its size
    huge = big.batches("t", 1)[0]
    assert huge.capacity == 61 + record_size_upper_bound(None, bytes(300_000), ())
    big.append("t", 1, None, b"y", (), 0, 0)
    assert len(big.batches("t", 1)) == 2


def test_growth_refused_under_memory_pressure_closes_the_batch():
    accumulator, pool, clock = make(**{"buffer.memory": 24 * KiB})
    value = bytes(1000)
    while accumulator.batches("t", 0) == () or accumulator.batches("t", 0)[-1].capacity < 16 * KiB:
        accumulator.append("t", 0, None, value, (), 0, 0)
    accumulator.append("t", 1, None, value, (), 0, 0)  # 4 KiB elsewhere: 20 KiB held, 4 KiB free
    while len(accumulator.batches("t", 0)) == 1:
        result = accumulator.append("t", 0, None, value, (), 0, 0)
    first, second = accumulator.batches("t", 0)
    assert first.closed and first.capacity == 16 * KiB  # could not grow to 32 KiB
    assert second.capacity == 4 * KiB and result.new_batch_created
    assert pool.in_use == 24 * KiB


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6000)), min_size=1, max_size=150),
       st.sampled_from([(4096, 16384, 65536), (16384, 16384, 16384), (1024, 4096, 262144)]))
def test_memory_accounted_at_every_step_never_exceeds_buffer_memory(records, sizes):
    initial, batch_size, max_size = sizes
    accumulator, pool, clock = make(**{"buffer.memory": 96 * KiB, "batch.initial.size": initial,
                                       "batch.size": batch_size, "batch.max.size": max_size,
                                       "max.block.ms": 100})
    leaders = {TopicPartition("t", p): p % 2 for p in range(6)}
    tps = [("t", p) for p in range(6)]
    for partition, size in records:
        clock.now += 1
        result = accumulator.append("t", partition, None, bytes(size), (), None, clock.now)
        if result.pending is not None:
            # the sender drains and completes everything, which frees memory for the waiter
            for node, batches in drain_all(accumulator, leaders, clock.now).items():
                for batch in batches:
                    accumulator.complete_batch(batch, 0)
            assert result.pending.done()
            result = accumulator.append("t", partition, None, bytes(size), (), None, clock.now,
                                        allocation=result.pending)
        assert result.future is not None
        assert pool.in_use == held(accumulator, tps) <= 96 * KiB
        for tp in tps:
            for batch in accumulator.batches(*tp):
                assert batch.estimated_size() <= batch.capacity or batch.record_count == 1


def test_append_waits_for_memory_then_completes_or_times_out():
    accumulator, pool, clock = make(**{"buffer.memory": 8 * KiB, "batch.initial.size": 4096,
                                       "batch.size": 4096, "batch.max.size": 4096, "max.block.ms": 1000})
    leaders = {TopicPartition("t", p): 0 for p in range(3)}
    accumulator.append("t", 0, None, bytes(100), (), 0, 0)
    accumulator.append("t", 1, None, bytes(100), (), 0, 0)
    result = accumulator.append("t", 2, None, b"late", (), 0, 0)
    assert result.future is None and result.pending is not None and not result.pending.done()
    # a waiter makes every partition sendable, linger or not
    assert accumulator.ready(leaders, 0).ready_nodes == {0}
    batches = accumulator.drain(leaders, [0], 1 << 20, 0)[0]
    accumulator.complete_batch(batches[0], 0)
    assert result.pending.done()
    done = accumulator.append("t", 2, None, b"late", (), 0, 0, allocation=result.pending)
    assert done.new_batch_created and accumulator.batches("t", 2)[0].record_count == 1
    # t-1's batch is in flight and t-2's queued: the pool is full and nothing frees memory,
    # so BufferExhausted once max.block.ms has passed
    assert [batch.tp.partition for batch in batches] == [0, 1] and pool.available_memory == 0
    blocked = accumulator.append("t", 0, None, bytes(100), (), 0, 0)
    assert blocked.pending is not None
    clock.now = 999
    pool.expire()
    assert not blocked.pending.done()
    clock.now = 1000
    with pytest.raises(BufferExhausted):
        accumulator.append("t", 0, None, bytes(100), (), 0, 1000, allocation=blocked.pending)
    assert pool.metrics()["buffer-exhausted-total"] == 1


def test_record_too_large_and_closed():
    accumulator, _, _ = make(**{"max.request.size": 10_000})
    with pytest.raises(RecordTooLarge, match="max.request.size"):
        accumulator.append("t", 0, None, bytes(10_000), (), 0, 0)
    small, _, _ = make(**{"buffer.memory": 8000, "batch.size": 4096})
    with pytest.raises(RecordTooLarge, match="buffer.memory"):
        small.append("t", 0, None, bytes(9000), (), 0, 0)
    small.close()
    with pytest.raises(AccumulatorClosed):
        small.append("t", 0, None, b"x", (), 0, 0)


# ---- readiness ------------------------------------------------------------------------------------
def test_linger_flush_close_and_unknown_leaders():
    accumulator, _, clock = make(**{"linger.ms": 50})
    accumulator.append("t", 0, None, b"a", (), 0, 100)
    accumulator.append("u", 0, None, b"b", (), 0, 100)
    leaders = {TopicPartition("t", 0): 3}
    check = accumulator.ready(leaders, 120)
    assert check.ready_nodes == set() and check.next_ready_check_delay_ms == 30
    assert check.unknown_leader_topics == {"u"}
    assert accumulator.ready(leaders, 150).ready_nodes == {3}
    accumulator.begin_flush()
    assert accumulator.ready(leaders, 101).ready_nodes == {3}
    accumulator.end_flush()
    assert accumulator.ready(leaders, 101).ready_nodes == set()
    accumulator.close()
    assert accumulator.ready(leaders, 101).ready_nodes == {3}
    empty, _, _ = make()
    assert empty.ready(leaders, 0).next_ready_check_delay_ms == math.inf


def test_second_batch_makes_the_partition_ready():
    accumulator, _, _ = make(**{"linger.ms": 10_000, "batch.max.size": 16384})
    while len(accumulator.batches("t", 0)) < 2:
        accumulator.append("t", 0, None, bytes(3000), (), 0, 0)
    assert accumulator.ready({TopicPartition("t", 0): 1}, 0).ready_nodes == {1}


# ---- draining -------------------------------------------------------------------------------------
def test_drain_takes_one_batch_per_partition_and_respects_max_request_size():
    accumulator, _, _ = make(**{"linger.ms": 0, "batch.max.size": 16384})
    leaders = {TopicPartition("t", p): 0 for p in range(3)}
    for partition in range(3):
        while len(accumulator.batches("t", partition)) < 2:
            accumulator.append("t", partition, None, bytes(4000), (), 0, 0)
    drained = accumulator.drain(leaders, [0], 1 << 20, 0)[0]
    assert sorted(batch.tp.partition for batch in drained) == [0, 1, 2]
    # a first batch always goes, even over max.request.size; the next one has to fit
    drained = accumulator.drain(leaders, [0], 100, 0)[0]
    assert len(drained) == 1 and drained[0].size_in_bytes > 100


def test_drain_round_robin_is_fair_across_partitions():
    accumulator, _, _ = make(**{"linger.ms": 0, "batch.max.size": 65536, "batch.size": 65536})
    partitions = 10
    leaders = {TopicPartition("t", p): 0 for p in range(partitions)}
    served_at = {p: [] for p in range(partitions)}
    value = bytes(30_000)
    for drain_number in range(12):
        for partition in range(partitions):  # every partition always has a full ~60 KB batch waiting
            while len(accumulator.batches("t", partition)) < 2:
                accumulator.append("t", partition, None, value, (), 0, 0)
        batches = accumulator.drain(leaders, [0], 200_000, 0)[0]
        assert 1 <= len(batches) <= 3
        for batch in batches:
            served_at[batch.tp.partition].append(drain_number)
            accumulator.complete_batch(batch, 0)
    # 3 of 10 per drain: nobody waits more than ceil(10 / 3) drains between turns
    for partition, drains in served_at.items():
        gaps = [b - a for a, b in zip([-1] + drains, drains)]
        assert drains and max(gaps) <= 4, (partition, drains)
    counts = [len(drains) for drains in served_at.values()]
    assert max(counts) - min(counts) <= 1


def test_sequence_numbers_per_partition():
    accumulator, _, _ = make(**{"linger.ms": 0})
    leaders = {TopicPartition("t", p): 0 for p in range(2)}
    expected = {0: 0, 1: 0}
    for round_ in range(4):
        for partition in range(2):
            for _ in range(partition + 2):
                accumulator.append("t", partition, None, b"v", (), 0, 0)
        for batch in accumulator.drain(leaders, [0], 1 << 20, 0)[0]:
            assert (batch.producer_id, batch.producer_epoch) == (7, 0)
            assert batch.base_sequence == expected[batch.tp.partition]
            expected[batch.tp.partition] += batch.record_count
            (header,) = iter_batches(batch.build())
            assert header.base_sequence == batch.base_sequence and header.producer_id == 7
            accumulator.complete_batch(batch, 0)
    assert expected == {0: 8, 1: 12}


def test_no_drain_without_producer_id_when_idempotent():
    config = ProducerConfig()
    accumulator = RecordAccumulator(config, BufferPool(config.buffer_memory, config.batch_size, FakeClock()))
    accumulator.append("t", 0, None, b"x", (), 0, 0)
    assert accumulator.drain({TopicPartition("t", 0): 0}, [0], 1 << 20, 10) == {}


def _three_sent_batches(accumulator, leaders):
    sent = []
    for _ in range(3):
        accumulator.append("t", 0, None, b"abc", (), 0, 0)
        accumulator.append("t", 0, None, b"def", (), 0, 0)
        sent += accumulator.drain(leaders, [0], 1 << 20, 0)[0]
    return sent


def test_retries_keep_sequence_order():
    accumulator, _, clock = make(**{"linger.ms": 0, "retry.backoff.ms": 100, "retry.backoff.max.ms": 100})
    leaders = {TopicPartition("t", 0): 0}
    first, second, third = _three_sent_batches(accumulator, leaders)
    assert [b.base_sequence for b in (first, second, third)] == [0, 2, 4]
    accumulator.append("t", 0, None, b"new", (), 0, 0)  # not sequenced yet: stays behind the retries
    # responses come back out of order; every batch failed with a retriable error
    accumulator.reenqueue(third, 10)
    accumulator.reenqueue(first, 10)
    accumulator.reenqueue(second, 10)
    queued = accumulator.batches("t", 0)
    assert [b.base_sequence for b in queued] == [0, 2, 4, -1]
    assert accumulator.ready(leaders, 50).ready_nodes == set()  # backing off
    assert accumulator.drain(leaders, [0], 1 << 20, 50)[0] == []
    # after the backoff, retries go one at a time, each only once the earlier ones are acknowledged
    assert accumulator.drain(leaders, [0], 1 << 20, 110)[0] == [first]
    assert accumulator.ready(leaders, 110).ready_nodes == set()
    assert accumulator.drain(leaders, [0], 1 << 20, 110)[0] == []
    accumulator.complete_batch(first, 100)
    assert accumulator.drain(leaders, [0], 1 << 20, 110)[0] == [second]
    accumulator.complete_batch(second, 102)
    assert accumulator.drain(leaders, [0], 1 << 20, 110)[0] == [third]
    (new,) = accumulator.drain(leaders, [0], 1 << 20, 110)[0]
    assert new.base_sequence == 6 and third.base_sequence == 4
    assert first.attempts == 1 and third.attempts == 1


def test_retries_without_idempotence_go_first():
    accumulator, _, _ = make(**{"linger.ms": 0, "enable.idempotence": False})
    leaders = {TopicPartition("t", 0): 0}
    first, second, third = _three_sent_batches(accumulator, leaders)
    assert first.base_sequence == -1
    accumulator.reenqueue(second, 0)
    accumulator.reenqueue(first, 0)
    assert list(accumulator.batches("t", 0)) == [first, second]


def test_max_in_flight_one_mutes_the_partition():
    accumulator, _, _ = make(**{"linger.ms": 0, "max.in.flight.requests.per.connection": 1})
    leaders = {TopicPartition("t", 0): 0}
    accumulator.append("t", 0, None, b"a", (), 0, 0)
    (batch,) = accumulator.drain(leaders, [0], 1 << 20, 0)[0]
    accumulator.append("t", 0, None, b"b", (), 0, 0)
    assert accumulator.ready(leaders, 10).ready_nodes == set()
    assert accumulator.drain(leaders, [0], 1 << 20, 10)[0] == []
    accumulator.complete_batch(batch, 0)
    assert accumulator.ready(leaders, 10).ready_nodes == {0}


def test_delivery_timeout_expires_queued_batches_and_frees_memory():
    accumulator, pool, _ = make(**{"delivery.timeout.ms": 40_000, "request.timeout.ms": 30_000})
    result = accumulator.append("t", 0, None, b"a", (), 0, 1000)
    accumulator.append("t", 1, None, b"b", (), 0, 20_000)
    assert accumulator.expire_batches(40_999) == []
    (expired,) = accumulator.expire_batches(41_000)
    assert expired.tp == TopicPartition("t", 0)
    with pytest.raises(DeliveryTimeout, match="delivery.timeout.ms"):
        result.future.result()
    assert pool.in_use == 4 * KiB and accumulator.batches("t", 0) == ()


def test_futures_resolve_with_offsets_and_timestamps():
    accumulator, pool, _ = make(**{"linger.ms": 0})
    futures = [accumulator.append("t", 0, b"k", b"value", (), 1000 + i, 0).future for i in range(3)]
    seen = []
    futures[0].add_done_callback(lambda f: seen.append(f.result().offset))
    with pytest.raises(RuntimeError, match="not been acknowledged"):
        futures[0].result()
    (batch,) = accumulator.drain({TopicPartition("t", 0): 0}, [0], 1 << 20, 0)[0]
    accumulator.complete_batch(batch, 500)
    assert [f.result().offset for f in futures] == [500, 501, 502]
    assert [f.result().timestamp for f in futures] == [1000, 1001, 1002]
    assert futures[0].result().serialized_key_size == 1 and futures[0].result().serialized_value_size == 5
    assert seen == [500] and pool.in_use == 0
    with pytest.raises(ValueError, match="already completed"):
        accumulator.complete_batch(batch, 0)


records_strategy = st.lists(st.tuples(
    st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=3000),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=2),
    st.integers(0, 1 << 41)), min_size=1, max_size=40)


@SETTINGS
@given(records_strategy, st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]))
def test_drained_batches_decode_to_exactly_the_appended_records(records, compression):
    accumulator, pool, _ = make(**{"linger.ms": 0, "compression.type": compression, "batch.size": 4096,
                                   "batch.max.size": 8192, "batch.initial.size": 1024})
    leaders = {TopicPartition("t", 0): 0}
    for key, value, headers, timestamp in records:
        accumulator.append("t", 0, key, value, headers, timestamp, 0)
    decoded = []
    while accumulator.has_undrained():
        for batch in accumulator.drain(leaders, [0], 1 << 20, 0)[0]:
            (read,) = iter_batches(batch.build())
            assert read.compression == Codec[compression.upper()]
            assert read.count == batch.record_count and read.producer_id == 7
            decoded += [(r.key, r.value, [tuple(h) for h in r.headers], r.timestamp) for r in read]
            accumulator.complete_batch(batch, 0)
    assert decoded == [(k, v, [tuple(h) for h in hs], ts) for k, v, hs, ts in records]
    assert pool.in_use == 0


def test_compression_ratio_estimate_lets_batches_hold_more():
    accumulator, _, _ = make(**{"linger.ms": 0, "compression.type": "gzip", "batch.max.size": 16384})
    leaders = {TopicPartition("t", 0): 0}
    value = b"a" * 1000  # compresses very well
    per_batch = []
    for _ in range(40):
        while len(accumulator.batches("t", 0)) < 2:
            accumulator.append("t", 0, None, value, (), 0, 0)
        (batch,) = accumulator.drain(leaders, [0], 1 << 20, 0)[0]
        per_batch.append(batch.record_count)
        accumulator.complete_batch(batch, 0)
    assert per_batch[0] <= 16 and per_batch[-1] > per_batch[0]  # the estimate falls slowly


def test_headers_as_header_tuples_are_accepted():
    accumulator, _, _ = make(**{"linger.ms": 0})
    accumulator.append("t", 0, None, b"v", [Header("h", b"1"), ("i", None)], 5, 0)
    (batch,) = accumulator.drain({TopicPartition("t", 0): 0}, [0], 1 << 20, 0)[0]
    (record,) = next(iter_batches(batch.build()))
    assert record.headers == (Header("h", b"1"), Header("i", None))


def test_sticky_partitioner_with_the_accumulator_fills_a_batch_before_switching():
    accumulator, _, _ = make(**{"linger.ms": 10_000})
    partitioner = Partitioner(16384, rng=random.Random(5))
    partitions_used = []
    for _ in range(100):
        partition = partitioner.partition("t", None, 6)
        result = accumulator.append("t", partition, None, bytes(500), (), 0, 0)
        partitioner.on_append("t", partition, result.appended_bytes, result.batch_is_full)
        if not partitions_used or partitions_used[-1] != partition:
            partitions_used.append(partition)
    assert len(partitions_used) >= 3
    for partition in partitions_used[:-1]:
        assert accumulator.batches("t", partition)[0].estimated_size() >= 16384


# ---- KIP-782 measurement --------------------------------------------------------------------------
class MemoryPeak(NamedTuple):
    """What ``measure_peak_memory`` saw of the pool."""

    peak_in_use: int  # most bytes held by batches at once
    peak_reserved: int  # ... plus the free list kept for reuse (what a Java heap would hold)
    reserved_after_drain: int  # the free list left once every batch was sent and returned
    batches: int


def measure_peak_memory(config: ProducerConfig, partitions: int = 1000, records_per_partition: int = 3,
                        value_size: int = 100, rounds: int = 2, topic: str = "measure") -> MemoryPeak:
    """Pool usage for a workload of small records spread over many partitions: each round appends
    ``records_per_partition`` records of ``value_size`` bytes to every partition, then drains and
    returns everything. Compare ``batch.initial.size`` 4096 against ``batch.initial.size`` =
    ``batch.size`` to see what KIP-782 saves."""
    pool = BufferPool(config.buffer_memory, config.batch_size)
    accumulator = RecordAccumulator(config, pool)
    accumulator.set_producer_id(0, 0)
    leaders = {TopicPartition(topic, p): 0 for p in range(partitions)}
    value = bytes(value_size)
    batches = 0
    for _ in range(rounds):
        for partition in range(partitions):
            for _ in range(records_per_partition):
                result = accumulator.append(topic, partition, None, value, (), 0, 0, max_block_ms=0)
                batches += result.new_batch_created
        while accumulator.has_undrained():
            for batch in accumulator.drain(leaders, [0], config.max_request_size, 0)[0]:
                accumulator.complete_batch(batch, 0)
    return MemoryPeak(pool.peak_in_use, pool.peak_reserved, pool.reserved, batches)


def test_expandable_batches_cut_peak_memory_for_many_small_partitions(capsys):
    expandable = measure_peak_memory(ProducerConfig(batch_initial_size=4096), partitions=1000,
                                     records_per_partition=3, value_size=100)
    fixed = measure_peak_memory(ProducerConfig(batch_initial_size=16384, batch_max_size=16384),
                                partitions=1000, records_per_partition=3, value_size=100)
    with capsys.disabled():
        print(f"\n1000 partitions x 3 records of 100 B: peak pool use {expandable.peak_in_use} B with "
              f"batch.initial.size 4096, {fixed.peak_in_use} B with 16384 (upstream); free list kept "
              f"after the drain {expandable.reserved_after_drain} B vs {fixed.reserved_after_drain} B")
    assert expandable.peak_in_use == 1000 * 4096 and fixed.peak_in_use == 1000 * 16384
    assert expandable.reserved_after_drain == 0 and fixed.reserved_after_drain == 1000 * 16384


def test_failed_batches_fail_their_records_and_free_memory():
    accumulator, pool, _ = make(**{"linger.ms": 0})
    leaders = {TopicPartition("t", 0): 0, TopicPartition("t", 1): 0}
    sent = accumulator.append("t", 0, None, b"a", (), 0, 0).future
    (batch,) = accumulator.drain(leaders, [0], 1 << 20, 0)[0]
    queued = accumulator.append("t", 1, None, b"b", (), 0, 0).future
    accumulator.fail_batch(batch, RuntimeError("NOT_LEADER_OR_FOLLOWER, retries exhausted"))
    with pytest.raises(RuntimeError, match="retries exhausted"):
        sent.result()
    (undrained,) = accumulator.batches("t", 1)
    with pytest.raises(ValueError, match="only drained batches"):
        accumulator.reenqueue(undrained, 0)
    accumulator.fail_batch(undrained, RuntimeError("topic deleted"))
    assert isinstance(queued.exception(), RuntimeError)
    assert accumulator.batches("t", 1) == () and pool.in_use == 0 and not accumulator.has_incomplete()
    accumulator.append("t", 0, None, b"c", (), 0, 0)
    (aborted,) = accumulator.abort_undrained(RuntimeError("closing"))
    assert pool.in_use == 0 and aborted.done


@pytest.mark.parametrize("key, value, headers, timestamp, error", [
    ("text", b"v", (), 0, TypeError),
    (None, 12, (), 0, TypeError),
    (None, b"v", [("h", "not bytes")], 0, TypeError),
    (None, b"v", [(1, b"x")], 0, TypeError),
    (None, b"v", (), -5, ValueError),
])
def test_malformed_records_are_refused_before_taking_memory(key, value, headers, timestamp, error):
    accumulator, pool, _ = make()
    with pytest.raises(error, match="t-0"):
        accumulator.append("t", 0, key, value, headers, timestamp, 0)
    assert pool.in_use == 0 and accumulator.batches("t", 0) == ()

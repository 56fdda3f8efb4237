"""The producer's per-record path (issue 18): ``RecordAccumulator.try_append`` against ``append``,
the C murmur2 against the Python one, per-record futures over per-batch results, and the blocking
Producer appending from several threads at once through its lock.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from support.broker_harness import own_broker
from kafkawire.client import AsyncConsumer, BufferExhausted, Producer, TopicPartition
from kafkawire.client.aio.waiting import wait_for_delivery
from kafkawire.client.core.producer.accumulator import RecordAccumulator
from kafkawire.client.core.producer.delivery import BatchResult, RecordFuture
from kafkawire.client.core.producer.partitioner import murmur2, partition_for_key, py_murmur2, py_partition_for_key
from kafkawire.client.core.producer.config import ProducerConfig
from kafkawire.client.core.producer.memory import BufferPool
from kafkawire.client.errors import ProducerClosed
from kafkawire.records import iter_batches
from support.silent_broker import SilentBroker

SETTINGS = settings(max_examples=80, deadline=None, database=InMemoryExampleDatabase(),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def accumulator(**properties) -> RecordAccumulator:
    config = ProducerConfig.from_properties(properties)
    result = RecordAccumulator(config, BufferPool(config.buffer_memory, config.batch_size, clock_ms=lambda: 0))
    result.set_producer_id(3, 0)
    return result


records = st.lists(st.tuples(
    st.integers(0, 2), st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=2500),
    st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=10)), max_size=2),
    st.integers(0, 1 << 41)), min_size=1, max_size=120)


@SETTINGS
@given(records, st.sampled_from(["none", "lz4", "zstd"]), st.sampled_from([(1024, 4096, 16384), (4096, 16384, 65536)]))
def test_try_append_makes_the_batches_append_makes(rows, compression, sizes):
    """The per-record path (try_append, and append when it answers None) lays records out exactly as
    append alone: the same batches, capacities, memory held and bytes."""
    initial, batch_size, max_size = sizes
    settings_ = {"compression.type": compression, "batch.initial.size": initial, "batch.size": batch_size,
                 "batch.max.size": max_size, "buffer.memory": 1 << 24}
    fast, reference = accumulator(**settings_), accumulator(**settings_)
    took_fast_path = 0
    for partition, key, value, headers, timestamp in rows:
        appended = fast.try_append("t", partition, key, value, headers, timestamp)
        if appended is None:
            fast.append("t", partition, key, value, headers, timestamp, 0)
        else:
            took_fast_path += 1
            assert appended[0].done() is False and appended[1] > 0
        reference.append("t", partition, key, value, headers, timestamp, 0)
    for partition in range(3):
        ours, theirs = fast.batches("t", partition), reference.batches("t", partition)
        assert [(b.record_count, b.capacity, b.closed) for b in ours] == [
            (b.record_count, b.capacity, b.closed) for b in theirs]
    assert fast.pool.in_use == reference.pool.in_use
    leaders = {TopicPartition("t", p): 0 for p in range(3)}
    while reference.has_undrained():
        for ours, theirs in zip(fast.drain(leaders, [0], 1 << 30, 0)[0], reference.drain(leaders, [0], 1 << 30, 0)[0]):
            assert ours.build() == theirs.build()
            assert len(list(next(iter_batches(ours.build())))) == ours.record_count
    assert took_fast_path or len(rows) < 3


def test_both_paths_take_and_refuse_the_same_records():
    """A record starting a batch goes through append(), the next through try_append's one C call:
    each takes any bytes-like value and (str, bytes) headers as tuples or lists, and refuses a str
    value naming the partition, with nothing written."""
    from array import array
    fast = accumulator(**{"linger.ms": 0})
    odd = [(array("i", [1, 2]), [["h", bytearray(b"1")]]), (memoryview(b"mv"), [("h", None)])]
    for value, headers in odd * 2:
        assert fast.try_append("t", 0, None, value, headers, 5) is not None
    for bad in ("text", 7):
        with pytest.raises(TypeError, match="t-0"):
            fast.try_append("t", 0, None, bad, (), 5)
        with pytest.raises(TypeError, match="t-1"):
            fast.try_append("t", 1, None, bad, (), 5)  # no batch yet: append() refuses it
    (batch,) = fast.batches("t", 0)
    records = list(next(iter_batches(batch.build())))
    assert [(r.value, [tuple(h) for h in r.headers]) for r in records] == [
        (array("i", [1, 2]).tobytes(), [("h", b"1")]), (b"mv", [("h", None)])] * 2
    assert fast.batches("t", 1) == ()


@SETTINGS
@given(st.binary(max_size=64), st.integers(1, 1 << 31))
def test_c_murmur2_is_the_python_one(key, partitions):
    assert murmur2(key) == py_murmur2(key)
    assert partition_for_key(key, partitions) == py_partition_for_key(key, partitions)
    assert murmur2(bytearray(key)) == murmur2(memoryview(key)) == py_murmur2(key)


def test_murmur2_refuses_what_the_python_one_refuses():
    for bad in ("text", 5, None):
        with pytest.raises(TypeError):
            murmur2(bad)
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


# ---- futures --------------------------------------------------------------------------------------
def test_record_futures_resolve_from_their_batch():
    batch = BatchResult("t", 4)
    futures = [RecordFuture(batch, i, 1000 + i, 1, 5) for i in range(3)]
    seen = []
    futures[1].add_done_callback(lambda f: seen.append(f.result().offset))
    futures[2].add_done_callback(lambda f: 1 / 0)  # logged; the others still resolve
    assert not futures[0].done() and not futures[0].cancel() and not futures[0].cancelled()
    with pytest.raises(RuntimeError, match="not been acknowledged"):
        futures[0].result()
    batch.finish(40, -1, None)
    assert [f.result().offset for f in futures] == [40, 41, 42] and seen == [41]
    assert futures[0].result() == ("t", 4, 40, 1000, 1, 5)
    futures[0].add_done_callback(lambda f: seen.append("at once"))
    assert seen == [41, "at once"]
    with pytest.raises(RuntimeError, match="only once"):
        batch.finish(0, -1, None)
    appended_time = BatchResult("t", 0)
    appended_time.finish(7, 99, None)
    assert RecordFuture(appended_time, 2, 5, -1, -1).result().timestamp == 99  # LogAppendTime wins


def test_record_futures_are_awaitable_and_wait_in_threads():
    async def awaiting():
        batch = BatchResult("t", 0, loop_waiter=wait_for_delivery)  # as the AsyncProducer's batches
        future = RecordFuture(batch, 1, 0, -1, 3)
        waiter = asyncio.ensure_future(asyncio.gather(future, future))
        cancelled = asyncio.ensure_future(asyncio.wait_for(future, 30))
        await asyncio.sleep(0)
        cancelled.cancel()  # one awaiter cancelled: the others still get the result
        asyncio.get_running_loop().call_soon(batch.finish, 10, -1, None)
        assert [m.offset for m in await waiter] == [11, 11]
        failed = BatchResult("t", 0, loop_waiter=wait_for_delivery)
        failed.finish(-1, -1, ValueError("no"))
        with pytest.raises(ValueError):
            await RecordFuture(failed, 0, 0, -1, -1)
        with pytest.raises(RuntimeError, match="no event loop"):  # the sans-IO core alone cannot wait
            await RecordFuture(BatchResult("t", 0), 0, 0, -1, -1)
    asyncio.run(awaiting())

    batch = BatchResult("t", 0, waitable=-1)  # the blocking Producer's futures: result() waits
    future = RecordFuture(batch, 0, 0, -1, 1)
    with pytest.raises(TimeoutError):
        future.result(timeout=0.01)
    threading.Timer(0.05, batch.finish, (5, -1, None)).start()
    assert future.result(timeout=10).offset == 5 and future.exception() is None


# ---- the blocking Producer from several threads -----------------------------------------------------
broker = own_broker(num_partitions=3)


def test_blocking_producer_shared_by_threads_keeps_order_and_loses_nothing(broker):
    """Four threads at once, keyed and unkeyed records, buffer.memory small enough that threads block
    for memory: every record arrives once, and each thread's records of a partition in send order."""
    threads, per_thread = 4, 3000
    futures: dict[int, list] = {}
    with Producer(bootstrap_servers=broker.bootstrap, buffer_memory=48 * 1024, batch_size=16 * 1024,
                  linger_ms=2) as producer:
        def produce(thread: int) -> None:
            sent = futures[thread] = []
            for i in range(per_thread):
                key = b"thread-%d" % thread if i % 2 else None
                sent.append(producer.send("shared", b"%d:%d:" % (thread, i) + bytes(100), key=key))
        workers = [threading.Thread(target=produce, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        producer.flush()
        stats = producer.metrics()
        assert stats["waiting-threads"] == 0 and stats["bufferpool-wait-time-ns-total"] > 0
        acknowledged = {(m.partition, m.offset) for sent in futures.values() for m in (f.result(10) for f in sent)}
    assert len(acknowledged) == threads * per_thread

    async def consume():
        consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("shared", p) for p in range(3)])
        got = []
        try:
            while len(got) < threads * per_thread:
                got += await consumer.poll(timeout_ms=1000)
        finally:
            await consumer.close()
        return got
    consumed = asyncio.run(asyncio.wait_for(consume(), 60))
    assert {(r.partition, r.offset) for r in consumed} == acknowledged
    last: dict[tuple[int, int], int] = {}
    for record in sorted(consumed, key=lambda r: (r.partition, r.offset)):
        thread, i, _ = record.value.split(b":", 2)
        assert int(i) > last.get((record.partition, int(thread)), -1)  # send order within the partition
        last[(record.partition, int(thread))] = int(i)


def test_blocking_producer_max_block_ms_raises_while_memory_stays_exhausted():
    with SilentBroker() as silent:  # produce requests are never answered: memory is never freed
        producer = Producer(bootstrap_servers=silent.bootstrap, acks=1, buffer_memory=64 * 1024,
                            batch_size=16 * 1024, max_block_ms=300, linger_ms=0)
        outcomes: dict[str, object] = {}

        def fill(name: str) -> None:
            try:
                for _ in range(1000):
                    started = time.monotonic()
                    producer.send("held", bytes(1000), partition=0)
            except BufferExhausted as error:
                outcomes[name] = (error, time.monotonic() - started)
        workers = [threading.Thread(target=fill, args=(name,)) for name in ("a", "b")]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
        assert set(outcomes) == {"a", "b"}
        for error, waited in outcomes.values():
            assert 0.25 < waited < 3  # blocked max.block.ms in its own thread, then gave up
        assert producer.metrics()["buffer-exhausted-total"] >= 2
        producer.close(timeout_ms=100)
        with pytest.raises(ProducerClosed):
            producer.send("held", b"x")


def test_blocking_producer_sends_from_a_callback_on_its_own_thread(broker):
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
        chained = []
        first = producer.send("callbacks", b"first", partition=0)
        first.add_done_callback(lambda f: chained.append(producer.send("callbacks", b"second", partition=0)))
        first.result(10)
        producer.flush()
        assert chained and chained[0].result(10).offset == first.result().offset + 1


logging.getLogger("kafka").setLevel(logging.CRITICAL)

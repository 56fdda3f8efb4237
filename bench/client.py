"""Client benchmark (issue 5): kafkawire's consumer and producer through the reference broker, against
kafka-python, aiokafka and confluent-kafka measured in the same run.

    .venv/bin/python bench/client.py                  # everything, about 3 minutes
    .venv/bin/python bench/client.py --quick          # smoke run, about a minute
    .venv/bin/python bench/client.py --only consume --repeats 5 --consumers kafkawire,aiokafka
    .venv/bin/python bench/client.py --only produce --producers kafkawire,aiokafka,confluent

1. Consume throughput. One topic of --partitions (8) partitions is loaded once with --records (500k)
   records (13-byte keys, --value-size (100) random bytes) by confluent-kafka's producer (acks=1,
   batch.size 16 KiB, linger.ms 5, no compression). Each consumer then reads every record from
   offset 0: assign() mode, no group, auto.offset.reset earliest, the same fetch settings for all
   (fetch.max.bytes 50 MiB, max.partition.fetch.bytes 1 MiB, fetch.min.bytes 1, fetch.max.wait.ms
   500, 500 records a poll, CRCs checked), touching each record's value. Timed from construction to
   the last record (wall), with this process's CPU time beside it; best of --repeats, the cells
   interleaved and their order rotated each repeat. Target: kafkawire's consumers ahead of
   kafka-python's KafkaConsumer and aiokafka's AIOKafkaConsumer; confluent-kafka's ratio is printed.
2. KIP-81: 1,000 partitions × 20 records of 1 KiB, read by an AsyncConsumer that sleeps 25 ms after
   every poll (fetch.max.bytes 1 MiB, max.partition.fetch.bytes 32 KiB), with buffer.memory =
   fetch.max.bytes, 2 × fetch.max.bytes and 1 GiB. The memory pool's peak must stay within
   buffer.memory plus one maximum message (the largest batch in the log, read from the broker's files).
3. KIP-782, producer. Memory: the BufferPool's peak and off-peak (what stays reserved once everything
   is sent) for 3 records of 100 B to each of 1,000 partitions, twice, with batch.initial.size 4 KiB
   against batch.initial.size = batch.size. Throughput: 1 KiB records to one partition with 50 ms added
   to every broker response (the broker advertises 127.0.0.2 and a delaying TCP proxy, this script
   run with a hidden --delay-proxy, listens there in a subprocess), batch.max.size 256 KiB against
   batch.max.size = batch.size, kafka-python's and confluent-kafka's producers with 16 KiB batches
   beside them.
4. Produce throughput (issue 18, bench/produce.py has the method): kafkawire's Producer and
   AsyncProducer against kafka-python, aiokafka and confluent-kafka, each in its usual loop, 100 B and
   1 KiB values, with and without keys, uncompressed and lz4, a fresh topic of 4 partitions for every
   run. Targets: at 100 B, each of kafkawire's producers at least 3× aiokafka's records/s and at least
   a quarter of confluent-kafka's.

The broker is ``kafkawire broker`` in a subprocess (its own interpreter and GIL, as in production);
``--in-process`` runs kafkawire.broker.BrokerThread in this process instead (every Python client
then shares its GIL with the broker). This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version as dist_version
from pathlib import Path

from common import BrokerProcess, git_state, print_targets, record_reader  # noqa: E402
from produce import bench_produce  # noqa: E402

HERE = Path(__file__).resolve().parent
MiB = 1 << 20

# Fetch settings every consumer gets (Kafka's defaults; 500 records a poll).
FETCH_MAX_BYTES = 50 * MiB
MAX_PARTITION_FETCH_BYTES = 1 * MiB
FETCH_MIN_BYTES = 1
FETCH_MAX_WAIT_MS = 500
MAX_POLL_RECORDS = 500


# =========================================================================== brokers

class BrokerInProcess:
    """kafkawire.broker.BrokerThread in this process."""

    def __init__(self, data_dir: Path, log_path: Path, *extra: str):
        from kafkawire.broker import BrokerThread
        settings = {"group_initial_rebalance_delay_ms": 0}
        if extra:
            settings["advertised_host"] = extra[extra.index("--advertised-host") + 1]
        self.thread = BrokerThread(data_dir=data_dir, port=0, **settings).start()
        self.host, self.port = "127.0.0.1", self.thread.port
        self.bootstrap = f"{self.host}:{self.port}"

    def stop(self) -> None:
        self.thread.stop()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(30)


def preload(bootstrap: str, topic: str, count: int, value_size: int, partitions: int, *,
            batch_size: int = 16384) -> int:
    """``count`` records round robin over the partitions with confluent-kafka; the payload bytes."""
    from confluent_kafka import Producer
    errors: list = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": batch_size,
        "compression.type": "none", "queue.buffering.max.kbytes": 1 << 20,
        "queue.buffering.max.messages": 1_000_000, "error_cb": errors.append,
    })
    rng = random.Random(5)
    values = [rng.randbytes(value_size) for _ in range(256)]
    send = producer.produce
    for i in range(count):
        while True:
            try:
                send(topic, values[i & 255], key=b"user-%08d" % rng.randrange(10 ** 8), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.005)
        if i & 0x3FFF == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records still undelivered after flush")
    if errors:
        raise RuntimeError(f"producer errors: {errors[:3]}")
    return count * value_size


def largest_batch(data_dir: Path | None, topic: str) -> int | None:
    """The largest record batch in ``topic``'s logs (None when the logs are not at hand)."""
    if data_dir is None:
        return None
    from kafkawire.records import iter_batches
    largest = 0
    for path in data_dir.rglob("*.log"):
        if not path.parent.name.startswith(topic + "-"):
            continue
        for batch in iter_batches(path.read_bytes(), verify_crc=False):
            largest = max(largest, batch.size)
    return largest


# =========================================================================== consumers

class Result:
    def __init__(self, seconds: float, records: int, payload: int):
        self.seconds, self.records, self.payload = seconds, records, payload


def _check(name: str, seen: int, payload: int, count: int, expected_payload: int) -> None:
    if seen != count or payload != expected_payload:
        raise RuntimeError(f"{name}: consumed {seen} records / {payload} bytes, expected {count} / {expected_payload}")


def consume_kafkawire_async(bootstrap: str, topic: str, partitions: int, count: int) -> tuple[int, int]:
    from kafkawire.client import AsyncConsumer, TopicPartition

    async def run() -> tuple[int, int]:
        consumer = AsyncConsumer(
            bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_bytes=FETCH_MAX_BYTES,
            max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES, fetch_min_bytes=FETCH_MIN_BYTES,
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS, max_poll_records=MAX_POLL_RECORDS, check_crcs=True)
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            seen = payload = 0
            while seen < count:
                for record in await consumer.poll(timeout_ms=1000):
                    payload += len(record.value)
                    seen += 1
            return seen, payload
        finally:
            await consumer.close()
    return asyncio.run(run())


def consume_kafkawire_sync(bootstrap: str, topic: str, partitions: int, count: int) -> tuple[int, int]:
    from kafkawire.client import Consumer, TopicPartition
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_bytes=FETCH_MAX_BYTES,
                  max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES, fetch_min_bytes=FETCH_MIN_BYTES,
                  fetch_max_wait_ms=FETCH_MAX_WAIT_MS, max_poll_records=MAX_POLL_RECORDS,
                  check_crcs=True) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        seen = payload = 0
        while seen < count:
            for record in consumer.poll(timeout_ms=1000):
                payload += len(record.value)
                seen += 1
        return seen, payload


def consume_kafka_python(bootstrap: str, topic: str, partitions: int, count: int) -> tuple[int, int]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
        fetch_max_bytes=FETCH_MAX_BYTES, max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES,
        fetch_min_bytes=FETCH_MIN_BYTES, fetch_max_wait_ms=FETCH_MAX_WAIT_MS, max_poll_records=MAX_POLL_RECORDS,
        check_crcs=True)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        seen = payload = 0
        while seen < count:
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    payload += len(record.value)
                    seen += 1
        return seen, payload
    finally:
        consumer.close()


def consume_aiokafka(bootstrap: str, topic: str, partitions: int, count: int) -> tuple[int, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> tuple[int, int]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
            fetch_max_bytes=FETCH_MAX_BYTES, max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES,
            fetch_min_bytes=FETCH_MIN_BYTES, fetch_max_wait_ms=FETCH_MAX_WAIT_MS, check_crcs=True)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            seen = payload = 0
            while seen < count:
                batches = await consumer.getmany(timeout_ms=1000, max_records=MAX_POLL_RECORDS)
                for records in batches.values():
                    for record in records:
                        payload += len(record.value)
                        seen += 1
            return seen, payload
        finally:
            await consumer.stop()
    return asyncio.run(run())


def consume_confluent(bootstrap: str, topic: str, partitions: int, count: int) -> tuple[int, int]:
    import confluent_kafka
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-client", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "fetch.max.bytes": FETCH_MAX_BYTES,
        "max.partition.fetch.bytes": MAX_PARTITION_FETCH_BYTES, "fetch.min.bytes": FETCH_MIN_BYTES,
        "fetch.wait.max.ms": FETCH_MAX_WAIT_MS, "check.crcs": True,
    })
    try:
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
        seen = payload = 0
        while seen < count:
            # never ask for more than are left: consume() would wait out its timeout for them
            for message in consumer.consume(min(MAX_POLL_RECORDS, count - seen), 1.0):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"confluent-kafka consumer error: {error}")
                payload += len(message.value())
                seen += 1
        return seen, payload
    finally:
        consumer.close()


CONSUMERS = {
    "kafkawire AsyncConsumer": consume_kafkawire_async,
    "kafkawire Consumer": consume_kafkawire_sync,
    "kafka-python KafkaConsumer": consume_kafka_python,
    "aiokafka AIOKafkaConsumer": consume_aiokafka,
    "confluent-kafka Consumer": consume_confluent,
}
OURS = ("kafkawire AsyncConsumer", "kafkawire Consumer")
MUST_BEAT = ("kafka-python KafkaConsumer", "aiokafka AIOKafkaConsumer")


def time_consumer(function, bootstrap: str, topic: str, partitions: int, count: int, payload: int,
                  name: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: every thread, librdkafka's and the blocking
    Consumer's event loop included; the broker is another process)."""
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    seen, got = function(bootstrap, topic, partitions, count)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    _check(name, seen, got, count, payload)
    return seconds, cpu


def bench_consume(args, make_broker, tmp: Path, out: list[str]) -> list[tuple[str, bool]]:
    import aiokafka  # noqa: F401 (imported before timing: an import is not consumption)
    import confluent_kafka  # noqa: F401
    import kafka  # noqa: F401
    import kafkawire.client  # noqa: F401
    topic = "consume"
    broker = make_broker(tmp / "consume-data", tmp / "consume-broker.log")
    try:
        create_topic(broker.bootstrap, topic, args.partitions)
        started = time.perf_counter()
        payload = preload(broker.bootstrap, topic, args.records, args.value_size, args.partitions)
        print(f"  loaded {args.records:,} records in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        names = [n for n in CONSUMERS if not args.consumers or any(c in n for c in args.consumers)]
        times: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        for repeat in range(args.repeats):
            order = names[repeat % len(names):] + names[:repeat % len(names)]
            for name in order:
                seconds, cpu = time_consumer(CONSUMERS[name], broker.bootstrap, topic, args.partitions,
                                             args.records, payload, name)
                times[name].append(seconds)
                cpus[name].append(cpu)
                print(f"  repeat {repeat + 1}: {name:28} {args.records / seconds:>10,.0f} records/s, "
                      f"{cpu:.2f} s CPU", file=sys.stderr)
    finally:
        broker.stop()
    best = {n: min(t) for n, t in times.items()}
    best_cpu = {n: min(t) for n, t in cpus.items()}
    out.append("## 1. Consume throughput\n")
    out.append(f"{args.records:,} records ({args.value_size} B values, 13 B keys) over {args.partitions} partitions, "
               f"read from offset 0 by each consumer; best of {args.repeats}. Wall time from construction to the "
               f"last record; CPU = this process's CPU time over the same span (all its threads), the least of "
               f"the runs. MB/s counts value bytes.\n")
    out.append("| consumer | records/s | MB/s | best s | all runs s | CPU s | CPU µs/record | "
               "kafkawire AsyncConsumer ÷ this (wall) |")
    out.append("|---|---:|---:|---:|---|---:|---:|---:|")
    reference = best.get(OURS[0])
    for name in names:
        seconds = best[name]
        ratio = f"{seconds / reference:.2f}×" if reference else "-"
        out.append(f"| {name} | {args.records / seconds:,.0f} | {payload / seconds / 1e6:,.1f} | {seconds:.2f} | "
                   f"{', '.join(f'{t:.2f}' for t in times[name])} | {best_cpu[name]:.2f} | "
                   f"{best_cpu[name] / args.records * 1e6:.2f} | {ratio} |")
    verdicts = []
    out.append("")
    for ours in (n for n in OURS if n in best):
        for peer in (n for n in MUST_BEAT if n in best):
            verdicts.append((f"{ours} ahead of {peer}: {best[peer] / best[ours]:.2f}× its throughput",
                             best[ours] < best[peer]))
            out.append(f"- {ours}: {best_cpu[peer] / best_cpu[ours]:.2f}× {peer}'s records per CPU-second "
                       f"(no target)")
        peer = "confluent-kafka Consumer"
        if peer in best:
            out.append(f"- {ours}: {best[peer] / best[ours]:.2f}× confluent-kafka's throughput (no target)")
    out.append("\nWall minus CPU is time the consumer waited. kafkawire drains round robin across partitions "
               "(KIP-41) and leaves buffered partitions out of the next fetch, so every partition of a response "
               "runs dry at about the same time and the next fetch's round trip through the broker is waited "
               "out; aiokafka drains one partition after another and refetches it while it works on the rest.")
    return verdicts


# =========================================================================== KIP-81

def slow_consume(bootstrap: str, topic: str, partitions: int, count: int, buffer_memory: int, fetch_max_bytes: int,
                 partition_fetch_bytes: int, pause_s: float) -> dict:
    """Read every record with a consumer that sleeps ``pause_s`` after each poll; its metrics at the end
    and the most records bytes it held at once (sampled after every poll)."""
    from kafkawire.client import AsyncConsumer, TopicPartition

    async def run() -> dict:
        consumer = AsyncConsumer(
            bootstrap_servers=bootstrap, auto_offset_reset="earliest", buffer_memory=buffer_memory,
            fetch_max_bytes=fetch_max_bytes, max_partition_fetch_bytes=partition_fetch_bytes,
            fetch_max_wait_ms=100, max_poll_records=MAX_POLL_RECORDS)
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            seen, buffered_peak, started = 0, 0, time.perf_counter()
            while seen < count:
                if time.perf_counter() - started > 300:
                    raise RuntimeError(f"KIP-81 run: consumed {seen} of {count} records in 300 s")
                seen += len(await consumer.poll(timeout_ms=1000))
                buffered_peak = max(buffered_peak, consumer.fetcher.buffered_bytes())
                await asyncio.sleep(pause_s)  # the application's work; fetched responses wait meanwhile
            stats = consumer.metrics()
            stats["seconds"] = time.perf_counter() - started
            stats["buffered-peak"] = buffered_peak
            stats["records"] = seen
            return stats
        finally:
            await consumer.close()
    return asyncio.run(run())


def bench_kip81(args, make_broker, tmp: Path, out: list[str]) -> list[tuple[str, bool]]:
    topic, partitions = "kip81", args.kip81_partitions
    per_partition, value_size = args.kip81_records, args.kip81_value_size
    fetch_max_bytes = args.kip81_fetch_max_bytes
    partition_fetch_bytes = 32 * 1024
    count = partitions * per_partition
    data_dir = tmp / "kip81-data"
    broker = make_broker(data_dir, tmp / "kip81-broker.log")
    # buffer.memory = fetch.max.bytes is the least allowed and the one where the pool binds with a single
    # broker (one fetch in flight, and KIP-41's prefetch rule, already keep memory near one response
    # plus fewer than max.poll.records records); 2× is Kafka's default ratio; 1 GiB is no bound
    settings = (("= fetch.max.bytes", fetch_max_bytes), ("2 × fetch.max.bytes", 2 * fetch_max_bytes),
                ("1 GiB (no bound)", 1 << 30))
    try:
        create_topic(broker.bootstrap, topic, partitions)
        preload(broker.bootstrap, topic, count, value_size, partitions)
        largest = largest_batch(data_dir, topic)
        runs = []
        for label, memory in settings:
            run = slow_consume(broker.bootstrap, topic, partitions, count, memory, fetch_max_bytes,
                               partition_fetch_bytes, args.kip81_pause_ms / 1000)
            runs.append((label, memory, run))
            print(f"  KIP-81 buffer.memory {memory:,}: pool peak {run['memory-pool-peak-used']:,} B", file=sys.stderr)
    finally:
        broker.stop()
    framing = 37 * partitions  # a Fetch v12+ partition entry without records is 37 bytes
    out.append("\n## 2. KIP-81: buffered bytes against buffer.memory\n")
    out.append(f"{partitions:,} partitions × {per_partition} records of {value_size:,} B ({count:,} records, "
               f"{count * value_size / MiB:,.1f} MiB), read by one AsyncConsumer that sleeps {args.kip81_pause_ms:g} "
               f"ms after every poll: fetch.max.bytes {fetch_max_bytes:,}, max.partition.fetch.bytes "
               f"{partition_fetch_bytes:,}, max.poll.records {MAX_POLL_RECORDS}. Largest batch in the log (one "
               f"maximum message): {largest:,} B.\n")
    out.append("| buffer.memory | pool peak used | over buffer.memory | records bytes held, peak | depleted time | "
               "reads paused | seconds | pool used at the end |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, memory, run in runs:
        peak = run["memory-pool-peak-used"]
        out.append(f"| {memory:,} ({label}) | {peak:,} | {max(0, peak - memory):,} | {run['buffered-peak']:,} | "
                   f"{run['memory-pool-depleted-time-total']:,.0f} ms | {run['reads-paused-total']:,} | "
                   f"{run['seconds']:.2f} | {run['memory-pool-used']:,} |")
    out.append(f"\nThe pool is charged for whole response frames, from before their bodies are read until their "
               f"records are handed out; \"records bytes held\" is what the fetcher keeps for poll (sampled after "
               f"each poll). A full fetch response lists every partition asked for, {framing:,} B of partition "
               f"entries for {partitions:,} partitions on top of up to fetch.max.bytes of records, and the pool "
               f"grants any size while nothing is allocated: that is how the first row can go over by more than "
               f"one maximum message.")
    verdicts = []
    for label, memory, run in runs[:2]:
        peak = run["memory-pool-peak-used"]
        verdicts.append((f"KIP-81, buffer.memory {label}: pool peak {peak:,} B <= buffer.memory + one maximum "
                         f"message ({memory:,} + {largest:,} = {memory + largest:,} B)", peak <= memory + largest))
    first = runs[0][2]
    verdicts.append((f"KIP-81, buffer.memory = fetch.max.bytes: the bound was exercised (reads paused "
                     f"{first['reads-paused-total']} times, {first['memory-pool-depleted-time-total']:,.0f} ms "
                     f"depleted) and every byte went back to the pool",
                     first["reads-paused-total"] > 0 and all(run["memory-pool-used"] == 0 for _, _, run in runs)))
    return verdicts


# =========================================================================== KIP-782

def producer_memory(bootstrap: str, topic: str, partitions: int, initial_size: int, rounds: int,
                    per_partition: int, value_size: int) -> dict:
    """Rounds of ``per_partition`` small records to every partition (linger.ms long enough that every
    partition's batch is open at once), flushed after each round; the BufferPool's peaks, what it
    still reserves after the last flush, and the Python heap's peak (tracemalloc)."""
    import tracemalloc
    from kafkawire.client import AsyncProducer

    async def run() -> dict:
        producer = AsyncProducer(bootstrap_servers=bootstrap, batch_size=16384, batch_initial_size=initial_size,
                                 linger_ms=500, acks=1, enable_idempotence=False)
        try:
            await producer.start()
            await producer.partitions_for(topic)
            value = bytes(value_size)
            tracemalloc.start()
            started = time.perf_counter()
            for _ in range(rounds):
                for partition in range(partitions):
                    for _ in range(per_partition):
                        await producer.send(topic, value, partition=partition)
                await producer.flush()
            seconds = time.perf_counter() - started
            heap_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            pool, stats = producer.pool, producer.metrics()
            if stats["record-error-total"] or stats["record-send-total"] != rounds * partitions * per_partition:
                raise RuntimeError(f"producer memory run: {stats}")
            return {"peak_in_use": pool.peak_in_use, "peak_reserved": pool.peak_reserved,
                    "in_use_after": pool.in_use, "reserved_after": pool.reserved, "batches": stats["batch-total"],
                    "heap_peak": heap_peak, "seconds": seconds}
        finally:
            await producer.close()
    return asyncio.run(run())


def producer_throughput(bootstrap: str, topic: str, total: int, value_size: int, batch_max_size: int) -> dict:
    """``total`` bytes of ``value_size`` records to partition 0 as fast as send() takes them, yielding to
    the event loop after each send, then flush()."""
    from kafkawire.client import AsyncProducer

    async def run() -> dict:
        producer = AsyncProducer(bootstrap_servers=bootstrap, batch_size=16384, batch_max_size=batch_max_size)
        try:
            await producer.start()
            await producer.partitions_for(topic)
            value = random.Random(7).randbytes(value_size)
            count = total // value_size
            started = time.perf_counter()
            for _ in range(count):
                await producer.send(topic, value, partition=0)
                await asyncio.sleep(0)  # let the sender run, as an application awaiting anything would
            await producer.flush()
            seconds = time.perf_counter() - started
            stats = producer.metrics()
            if stats["record-error-total"] or stats["record-send-total"] != count:
                raise RuntimeError(f"producer throughput run: {stats}")
            return {"seconds": seconds, "count": count, "bytes": count * value_size,
                    "requests": stats["produce-request-total"], "batches": stats["batch-total"],
                    "sent": stats["bytes-sent-total"]}
        finally:
            await producer.close()
    return asyncio.run(run())


def producer_throughput_kafka_python(bootstrap: str, topic: str, total: int, value_size: int) -> dict:
    """The same with kafka-python's KafkaProducer (batch.size 16 KiB, no batch.max.size upstream)."""
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=16384,
                             max_in_flight_requests_per_connection=5)
    try:
        producer.partitions_for(topic)
        value = random.Random(7).randbytes(value_size)
        count = total // value_size
        started = time.perf_counter()
        futures = [producer.send(topic, value, partition=0) for _ in range(count)]
        producer.flush()
        seconds = time.perf_counter() - started
        for future in futures:
            future.get(0)  # raises if a record failed
        return {"seconds": seconds, "count": count, "bytes": count * value_size}
    finally:
        producer.close()


def producer_throughput_confluent(bootstrap: str, topic: str, total: int, value_size: int) -> dict:
    """The same with confluent-kafka's Producer, batch.size 16 KiB (librdkafka keeps up to 5 requests in
    flight per partition with idempotence: fixed batches, pipelined)."""
    from confluent_kafka import Producer
    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 16384,
                         "enable.idempotence": True, "max.in.flight": 5, "error_cb": errors.append})
    value = random.Random(7).randbytes(value_size)
    count = total // value_size
    failed: list = []
    started = time.perf_counter()
    for _ in range(count):
        producer.produce(topic, value, partition=0, on_delivery=lambda error, _: error and failed.append(error))
        producer.poll(0)
    left = producer.flush(120)
    seconds = time.perf_counter() - started
    if left or failed or errors:
        raise RuntimeError(f"confluent-kafka producer: {left} undelivered, {failed[:3]}, {errors[:3]}")
    return {"seconds": seconds, "count": count, "bytes": count * value_size}


class DelayProxy:
    """The delaying proxy (``--delay-proxy``) in a subprocess: on ``listen``, to ``target``, every byte
    from the broker forwarded ``delay_ms`` after it arrived."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], delay_ms: float):
        self.proc = subprocess.Popen([sys.executable, __file__, "--delay-proxy", f"{listen[0]}:{listen[1]}",
                                      f"{target[0]}:{target[1]}", str(delay_ms)], stdout=subprocess.PIPE)
        ready = select.select([self.proc.stdout], [], [], 30)[0] and self.proc.stdout.readline()
        if not ready or not ready.startswith(b"proxy ready"):
            self.stop()
            raise RuntimeError("the delay proxy did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc.stdout.close()


def run_delay_proxy(listen: str, target: str, delay_ms: float) -> None:
    """Forward connections on ``listen`` to ``target``; requests pass at once, responses ``delay_ms``
    late (each chunk when its time comes, in order, so bandwidth is unchanged: only latency is added)."""
    listen_host, listen_port = listen.rsplit(":", 1)
    target_host, target_port = target.rsplit(":", 1)
    delay = delay_ms / 1000

    async def handle(client_reader, client_writer) -> None:
        loop = asyncio.get_running_loop()
        try:
            broker_reader, broker_writer = await asyncio.open_connection(target_host, int(target_port))
        except OSError:
            client_writer.close()
            return
        queue: asyncio.Queue = asyncio.Queue()

        async def upstream() -> None:
            while data := await client_reader.read(1 << 18):
                broker_writer.write(data)
                await broker_writer.drain()

        async def receive() -> None:
            while data := await broker_reader.read(1 << 18):
                queue.put_nowait((loop.time() + delay, data))
            queue.put_nowait((loop.time() + delay, b""))

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
                if not data:
                    return
                client_writer.write(data)
                await client_writer.drain()

        tasks = [asyncio.ensure_future(t()) for t in (upstream, receive, deliver)]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass  # shutting down (a cancelled connection handler would be logged as an error)
        finally:
            for task in tasks:
                task.cancel()
            client_writer.transport.abort()
            broker_writer.transport.abort()

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        server = await asyncio.start_server(handle, listen_host, int(listen_port))
        print("proxy ready", flush=True)
        await stop.wait()
        server.close()

    asyncio.run(main())


def bench_kip782(args, make_broker, tmp: Path, out: list[str]) -> list[tuple[str, bool]]:
    verdicts = []
    # ---- memory
    topic, partitions = "kip782", args.kip782_partitions
    broker = make_broker(tmp / "kip782-data", tmp / "kip782-broker.log")
    try:
        create_topic(broker.bootstrap, topic, partitions)
        memory = {}
        producer_memory(broker.bootstrap, topic, 10, 4096, rounds=1, per_partition=1, value_size=100)  # warm-up:
        # one-time allocations (lazy imports, caches) would otherwise land in the first measured heap peak
        for initial in (4096, 16384):
            memory[initial] = producer_memory(broker.bootstrap, topic, partitions, initial, rounds=2,
                                              per_partition=3, value_size=100)
            print(f"  KIP-782 memory, batch.initial.size {initial}: {memory[initial]}", file=sys.stderr)
    finally:
        broker.stop()
    out.append("\n## 3. KIP-782: expandable producer batches\n")
    out.append(f"### Memory\n\n2 rounds of 3 records of 100 B to each of {partitions:,} partitions (linger.ms 500, "
               f"so every partition's batch is open at the peak), a flush after each round; batch.size 16,384, "
               f"buffer.memory 32 MiB. BufferPool accounting: \"in use\" is held by batches, \"reserved\" adds "
               f"the free list kept for reuse (what a Java producer's heap holds); off-peak is what stays "
               f"reserved once everything is sent.\n")
    out.append("| batch.initial.size | peak in use | peak reserved | off-peak reserved | batches | "
               "Python heap peak (tracemalloc) |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for initial, run in memory.items():
        label = f"{initial:,}" + (" (= batch.size, upstream)" if initial == 16384 else " (default)")
        out.append(f"| {label} | {run['peak_in_use']:,} | {run['peak_reserved']:,} | {run['reserved_after']:,} | "
                   f"{run['batches']:,} | {run['heap_peak']:,} |")
    small, full = memory[4096], memory[16384]
    out.append(f"\nPeak in use {full['peak_in_use'] / max(small['peak_in_use'], 1):.1f}× lower with expandable "
               f"batches; off-peak {full['reserved_after']:,} B reserved without them, {small['reserved_after']:,} B "
               f"with. The Python heap does not follow the pool: a kafkawire batch's bytearray holds its records, "
               f"not its capacity, so here the saving is buffer.memory headroom (how many partitions can have "
               f"open batches before send() blocks), not resident memory.")
    verdicts.append((f"KIP-782: peak pool use {small['peak_in_use']:,} B with batch.initial.size 4096 < "
                     f"{full['peak_in_use']:,} B with 16384", small["peak_in_use"] < full["peak_in_use"]))
    verdicts.append((f"KIP-782: off-peak reservation {small['reserved_after']:,} B < {full['reserved_after']:,} B",
                     small["reserved_after"] < full["reserved_after"]))

    # ---- throughput under latency: the broker advertises 127.0.0.2, where the proxy listens on its port
    topic = "kip782-latency"
    broker = make_broker(tmp / "latency-data", tmp / "latency-broker.log", "--advertised-host", "127.0.0.2")
    proxy = None
    try:
        proxy = DelayProxy(("127.0.0.2", broker.port), ("127.0.0.1", broker.port), args.latency_ms)
        bootstrap = f"127.0.0.2:{broker.port}"
        create_topic(bootstrap, topic, 1)
        results: dict[object, list[dict]] = {16384: [], 262144: [], "kafka-python": [], "confluent-kafka": []}
        order = list(results)
        for repeat in range(min(args.repeats, 2)):
            for batch_max in order if repeat % 2 == 0 else order[::-1]:
                if batch_max == "kafka-python":
                    run = producer_throughput_kafka_python(bootstrap, topic, args.latency_bytes, 1024)
                elif batch_max == "confluent-kafka":
                    run = producer_throughput_confluent(bootstrap, topic, args.latency_bytes, 1024)
                else:
                    run = producer_throughput(bootstrap, topic, args.latency_bytes, 1024, batch_max)
                results[batch_max].append(run)
                print(f"  KIP-782 latency, {batch_max}: {run['bytes'] / run['seconds'] / 1e6:.2f} MB/s", file=sys.stderr)
    finally:
        if proxy is not None:
            proxy.stop()
        broker.stop()
    best = {size: min(runs, key=lambda r: r["seconds"]) for size, runs in results.items()}
    out.append(f"\n### Throughput with {args.latency_ms:g} ms added latency\n")
    out.append(f"{args.latency_bytes / MiB:,.0f} MiB of 1 KiB records to one partition, sent as fast as send() takes "
               f"them (yielding to the event loop after each), then flush(); every broker response reaches the "
               f"producer {args.latency_ms:g} ms late (a proxy in a subprocess). batch.size 16,384, linger.ms 5, "
               f"acks all, at most 5 requests in flight (kafkawire: idempotence on). Best of "
               f"{min(args.repeats, 2)}. Upstream references with fixed 16 KiB batches and the same settings: "
               f"kafka-python's KafkaProducer (idempotent by default, so one batch per partition in flight) and "
               f"confluent-kafka's Producer (batch.size 16 KiB; librdkafka pipelines up to 5).\n")
    out.append("| producer | MB/s | records/s | seconds | produce requests | average batch |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for size, run in best.items():
        if not isinstance(size, int):
            name = "kafka-python KafkaProducer" if size == "kafka-python" else "confluent-kafka Producer"
            out.append(f"| {name} | {run['bytes'] / run['seconds'] / 1e6:,.2f} | "
                       f"{run['count'] / run['seconds']:,.0f} | {run['seconds']:.2f} | - | - |")
            continue
        label = f"kafkawire, batch.max.size {size:,}" + (" (= batch.size)" if size == 16384 else " (default)")
        out.append(f"| {label} | {run['bytes'] / run['seconds'] / 1e6:,.2f} | {run['count'] / run['seconds']:,.0f} | "
                   f"{run['seconds']:.2f} | {run['requests']:,} | {run['sent'] / max(run['batches'], 1):,.0f} B |")
    gain = best[16384]["seconds"] / best[262144]["seconds"]
    kafka_python = best["kafka-python"]["seconds"] / best[262144]["seconds"]
    confluent = best["confluent-kafka"]["seconds"] / best[262144]["seconds"]
    out.append(f"\nbatch.max.size 256 KiB: {gain:.1f}× the throughput of batch.max.size = batch.size, "
               f"{kafka_python:.1f}× kafka-python's, {confluent:.1f}× confluent-kafka's with 16 KiB batches. "
               f"Both kafkawire rows use the same sender, which keeps up to 5 produce requests in flight on a "
               f"connection (with idempotence, ordered by sequence): with 16 KiB batches a backlog on one "
               f"partition moves 5 batches per round trip, where kafka-python (one batch per partition in flight, "
               f"by design with idempotence) and librdkafka here moved one. So the ratios to the peers are the "
               f"sender's pipelining times KIP-782; the first ratio, the same sender with and without "
               f"expandable batches, is KIP-782 alone.")
    verdicts.append((f"KIP-782: batch.max.size 256 KiB faster than batch.max.size = batch.size under "
                     f"{args.latency_ms:g} ms latency ({gain:.1f}×)", gain > 1))
    return verdicts


# =========================================================================== main

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000, help="records of the consume test (500,000)")
    parser.add_argument("--value-size", type=int, default=100, help="value bytes of the consume test (100)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the consume test (8)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each consumer; the best counts (3)")
    parser.add_argument("--consumers", type=lambda s: s.split(","), default=None,
                        help="only consumers whose name contains one of these (comma separated)")
    parser.add_argument("--only", type=lambda s: set(s.split(",")),
                        default={"consume", "kip81", "kip782", "produce"},
                        help="sections to run: consume,kip81,kip782,produce")
    parser.add_argument("--producers", type=lambda s: s.split(","), default=None,
                        help="only producers whose name contains one of these (comma separated)")
    parser.add_argument("--produce-records", type=int, default=200_000,
                        help="records of 100 B per produce run (200,000; a quarter as many of 1 KiB)")
    parser.add_argument("--produce-partitions", type=int, default=4, help="partitions of each produce topic (4)")
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer records, one repeat")
    parser.add_argument("--in-process", action="store_true",
                        help="run the broker as a BrokerThread in this process instead of a subprocess")
    parser.add_argument("--kip81-partitions", type=int, default=1000, help="partitions of the KIP-81 test (1000)")
    parser.add_argument("--kip81-records", type=int, default=20, help="records per partition there (20)")
    parser.add_argument("--kip81-value-size", type=int, default=1024, help="value bytes there (1024)")
    parser.add_argument("--kip81-fetch-max-bytes", type=int, default=MiB,
                        help="fetch.max.bytes and buffer.memory there (1 MiB)")
    parser.add_argument("--kip81-pause-ms", type=float, default=25, help="the slow consumer's sleep per poll (25)")
    parser.add_argument("--kip782-partitions", type=int, default=1000, help="partitions of the memory test (1000)")
    parser.add_argument("--latency-ms", type=float, default=50, help="latency added to broker responses (50)")
    parser.add_argument("--latency-bytes", type=int, default=4 * MiB, help="bytes produced per latency run (4 MiB)")
    parser.add_argument("--delay-proxy", nargs=3, metavar=("LISTEN", "TARGET", "DELAY_MS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.delay_proxy:
        run_delay_proxy(args.delay_proxy[0], args.delay_proxy[1], float(args.delay_proxy[2]))
        return 0
    if args.quick:
        args.records, args.repeats = 50_000, 1
        args.kip81_partitions, args.kip782_partitions, args.latency_bytes = 200, 200, 1 * MiB
        args.produce_records = 40_000
    if args.in_process:
        make_broker = BrokerInProcess
    else:
        def make_broker(data_dir, log_path, *extra):  # groups rebalance at once
            return BrokerProcess(data_dir, log_path, "--rebalance-delay-ms", "0", *extra)

    started = time.perf_counter()
    import confluent_kafka
    print("# kafkawire client benchmark\n")
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}; kafkawire {dist_version('kafkawire')} (git {git_state()}), kafka-python "
          f"{dist_version('kafka-python')}, aiokafka {dist_version('aiokafka')}, confluent-kafka "
          f"{dist_version('confluent-kafka')} (librdkafka {confluent_kafka.libversion()[0]}); broker "
          f"{'in this process' if args.in_process else 'in a subprocess'}; kafkawire's record-rows reader: "
          f"{record_reader()}.\n")
    tmp = Path(tempfile.mkdtemp(prefix="kafkawire-bench-client-"))
    out: list[str] = []
    verdicts: list[tuple[str, bool]] = []
    try:
        if "consume" in args.only:
            verdicts += bench_consume(args, make_broker, tmp, out)
        if "kip81" in args.only:
            verdicts += bench_kip81(args, make_broker, tmp, out)
        if "kip782" in args.only:
            verdicts += bench_kip782(args, make_broker, tmp, out)
        if "produce" in args.only:
            verdicts += bench_produce(args, make_broker, create_topic, tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_targets(out, verdicts, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""bench/client.py's produce section (issue 18): kafkawire's Producer and AsyncProducer against
kafka-python, aiokafka and confluent-kafka, each in its usual loop, through the same broker.

Every cell produces the same records to a fresh topic of --produce-partitions (4) partitions, with
acks=1, linger.ms 5, batch.size 16 KiB and the cell's codec (none or lz4): --produce-records
(200,000) records of 100 B values, a quarter as many of 1 KiB, without keys (sticky partitioning)
or with 13 B keys (murmur2). The loops:

* kafkawire Producer: ``send()`` in a loop, then ``flush()``;
* kafkawire AsyncProducer and aiokafka: ``await send()`` in a loop, then ``await flush()``;
* kafka-python: ``send()`` in a loop, then ``flush()``;
* confluent-kafka: ``produce()`` and ``poll(0)`` (on BufferError ``poll(0.001)`` and again), then
  ``flush()``.

Timed from the first send to flush's return (construction and the topic's metadata come first,
untimed); CPU is this process's over the same span (all threads: librdkafka's, the blocking
Producer's loop thread; the broker is another process).
Afterwards the topic's end offsets must add up to the records sent, then the topic is deleted. The
median of --repeats runs counts, cells interleaved and their order rotated every repeat.

Targets (issue 18), at 100 B: kafkawire's Producer and AsyncProducer each at least 3× aiokafka's
records/s and at least a quarter of confluent-kafka's.
"""
from __future__ import annotations

import asyncio
import gc
import random
import statistics
import sys
import time

PRODUCERS = ("kafkawire Producer", "kafkawire AsyncProducer", "kafka-python KafkaProducer",
             "aiokafka AIOKafkaProducer", "confluent-kafka Producer")
OURS = PRODUCERS[:2]
AIOKAFKA, CONFLUENT = PRODUCERS[3], PRODUCERS[4]
AIOKAFKA_TARGET = 3.0  # kafkawire >= 3x aiokafka's records/s
CONFLUENT_TARGET = 0.25  # ... and >= a quarter of confluent-kafka's
TARGET_VALUE_SIZE = 100
LINGER_MS = 5
BATCH_SIZE = 16384


def make_records(count: int, value_size: int, keyed: bool) -> list[tuple[bytes | None, bytes]]:
    rng = random.Random(18)
    values = [rng.randbytes(value_size) for _ in range(256)]
    keys = [b"user-%08d" % rng.randrange(10 ** 8) for _ in range(4096)] if keyed else [None]
    return [(keys[i % len(keys)], values[i & 255]) for i in range(count)]


def blocking_loop(producer, topic: str, records) -> tuple[float, float]:
    """``send()`` in a loop, then ``flush()``: (wall seconds, CPU seconds)."""
    producer.partitions_for(topic)
    send = producer.send
    started, cpu = time.perf_counter(), time.process_time()
    for key, value in records:
        send(topic, value, key=key)
    producer.flush()
    return time.perf_counter() - started, time.process_time() - cpu


async def awaiting_loop(producer, topic: str, records) -> tuple[float, float]:
    """``await send()`` in a loop, then ``await flush()``: (wall seconds, CPU seconds)."""
    await producer.partitions_for(topic)
    send = producer.send
    started, cpu = time.perf_counter(), time.process_time()
    for key, value in records:
        await send(topic, value, key=key)
    await producer.flush()
    return time.perf_counter() - started, time.process_time() - cpu


def kafkawire_sync(bootstrap: str, topic: str, records, codec: str) -> tuple[float, float]:
    from kafkawire.client import Producer
    with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH_SIZE,
                  compression_type=codec) as producer:
        return blocking_loop(producer, topic, records)


def kafkawire_async(bootstrap: str, topic: str, records, codec: str) -> tuple[float, float]:
    from kafkawire.client import AsyncProducer

    async def run() -> tuple[float, float]:
        async with AsyncProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH_SIZE,
                                 compression_type=codec) as producer:
            return await awaiting_loop(producer, topic, records)
    return asyncio.run(run())


def kafka_python(bootstrap: str, topic: str, records, codec: str) -> tuple[float, float]:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH_SIZE,
                             compression_type=None if codec == "none" else codec)
    try:
        return blocking_loop(producer, topic, records)
    finally:
        producer.close()


def aiokafka(bootstrap: str, topic: str, records, codec: str) -> tuple[float, float]:
    from aiokafka import AIOKafkaProducer

    async def run() -> tuple[float, float]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS,
                                    max_batch_size=BATCH_SIZE, compression_type=None if codec == "none" else codec)
        await producer.start()
        try:
            return await awaiting_loop(producer, topic, records)
        finally:
            await producer.stop()
    return asyncio.run(run())


def confluent(bootstrap: str, topic: str, records, codec: str) -> tuple[float, float]:
    from confluent_kafka import Producer
    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": LINGER_MS,
                         "batch.size": BATCH_SIZE, "compression.type": codec, "error_cb": errors.append})
    producer.list_topics(topic, timeout=10)
    produce, poll = producer.produce, producer.poll
    started, cpu = time.perf_counter(), time.process_time()
    for key, value in records:
        while True:
            try:
                produce(topic, value, key=key)
                break
            except BufferError:  # its queue is full: serve delivery reports, then try again
                poll(0.001)
        poll(0)
    left = producer.flush(120)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if left or errors:
        raise RuntimeError(f"confluent-kafka producer: {left} undelivered, {errors[:3]}")
    return seconds, cpu


RUNNERS = dict(zip(PRODUCERS, (kafkawire_sync, kafkawire_async, kafka_python, aiokafka, confluent)))


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-produce-check"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions))
    finally:
        consumer.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the futures resolve
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(60)


class Cell:
    def __init__(self, value_size: int, keyed: bool, codec: str, count: int):
        self.value_size, self.keyed, self.codec, self.count = value_size, keyed, codec, count
        self.records = make_records(count, value_size, keyed)
        self.seconds: dict[str, list[float]] = {name: [] for name in PRODUCERS}
        self.cpu: dict[str, list[float]] = {name: [] for name in PRODUCERS}

    @property
    def title(self) -> str:
        size = "100 B" if self.value_size == 100 else f"{self.value_size // 1024} KiB"
        return f"{size}, {'13 B keys' if self.keyed else 'no keys'}, {self.codec}"

    def rate(self, name: str) -> float:
        return self.count / statistics.median(self.seconds[name])


def bench_produce(args, make_broker, create_topic, tmp, out: list[str]) -> list[tuple[str, bool]]:
    import aiokafka as _aiokafka  # noqa: F401 (imported before timing: an import is not producing)
    import confluent_kafka  # noqa: F401
    import kafka  # noqa: F401
    import kafkawire.client  # noqa: F401
    names = [n for n in PRODUCERS if not args.producers or any(p in n for p in args.producers)]
    cells = [Cell(size, keyed, codec, args.produce_records if size == TARGET_VALUE_SIZE else args.produce_records // 4)
             for size in (TARGET_VALUE_SIZE, 1024) for keyed in (False, True) for codec in ("none", "lz4")]
    broker = make_broker(tmp / "produce-data", tmp / "produce-broker.log")
    partitions = args.produce_partitions
    try:
        run = 0
        for repeat in range(args.repeats):
            for cell in cells:
                order = names[repeat % len(names):] + names[:repeat % len(names)]
                for name in order:
                    run += 1
                    topic = f"produce-{run}"
                    create_topic(broker.bootstrap, topic, partitions)
                    gc.collect()
                    seconds, cpu = RUNNERS[name](broker.bootstrap, topic, cell.records, cell.codec)
                    stored = end_offsets(broker.bootstrap, topic, partitions)
                    if stored != cell.count:
                        raise RuntimeError(f"{name}, {cell.title}: {stored} records stored, {cell.count} sent")
                    delete_topic(broker.bootstrap, topic)
                    cell.seconds[name].append(seconds)
                    cell.cpu[name].append(cpu)
                    print(f"  repeat {repeat + 1}: {cell.title:24} {name:28} {cell.count / seconds:>11,.0f} records/s, "
                          f"{cpu:.2f} s CPU", file=sys.stderr)
    finally:
        broker.stop()
    return report(args, cells, names, out)


def report(args, cells: list[Cell], names: list[str], out: list[str]) -> list[tuple[str, bool]]:
    out.append("\n## 4. Produce throughput\n")
    out.append(f"{args.produce_records:,} records of 100 B values ({args.produce_records // 4:,} of 1 KiB) to a fresh topic "
               f"of {args.produce_partitions} partitions, acks=1, linger.ms {LINGER_MS}, batch.size {BATCH_SIZE:,}; "
               f"each client in its usual loop, timed from the first send to flush's return; median of "
               f"{args.repeats} (cells interleaved). CPU µs/record: this process's CPU time (all threads), median.\n")
    out.append("| values, keys, codec | " + " | ".join(names) + " |")
    out.append("|---|" + "---:|" * len(names))
    for cell in cells:
        out.append(f"| {cell.title} | " + " | ".join(
            f"{cell.rate(n):,.0f} ({statistics.median(cell.cpu[n]) / cell.count * 1e6:.1f} µs)" for n in names) + " |")
    verdicts = []
    ours = [n for n in OURS if n in names]
    if AIOKAFKA in names or CONFLUENT in names:
        out.append("\n| values, keys, codec | " + " | ".join(
            f"{o.split()[1]} ÷ {p.split()[0]}" for o in ours for p in (AIOKAFKA, CONFLUENT) if p in names) + " |")
        out.append("|---|" + "---:|" * (len(ours) * sum(p in names for p in (AIOKAFKA, CONFLUENT))))
        for cell in cells:
            out.append(f"| {cell.title} | " + " | ".join(
                f"{cell.rate(o) / cell.rate(p):.2f}×" for o in ours for p in (AIOKAFKA, CONFLUENT) if p in names) + " |")
        for cell in (c for c in cells if c.value_size == TARGET_VALUE_SIZE):
            for o in ours:
                if AIOKAFKA in names:
                    ratio = cell.rate(o) / cell.rate(AIOKAFKA)
                    verdicts.append((f"produce, {cell.title}: {o} ≥ {AIOKAFKA_TARGET:g}× aiokafka: {ratio:.2f}× "
                                     f"({cell.rate(o):,.0f} against {cell.rate(AIOKAFKA):,.0f} records/s)",
                                     ratio >= AIOKAFKA_TARGET))
                if CONFLUENT in names:
                    ratio = cell.rate(o) / cell.rate(CONFLUENT)
                    verdicts.append((f"produce, {cell.title}: {o} ≥ {CONFLUENT_TARGET:g}× confluent-kafka: "
                                     f"{ratio:.2f}× ({cell.rate(CONFLUENT):,.0f} records/s)", ratio >= CONFLUENT_TARGET))
    out.append("\nAll runs, records/s:\n")
    for cell in cells:
        out.append(f"- {cell.title}: " + "; ".join(
            f"{n}: " + ", ".join(f"{cell.count / s:,.0f}" for s in cell.seconds[n]) for n in names))
    return verdicts

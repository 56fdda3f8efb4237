"""Transactions benchmark (issue 22): transactional against idempotent produce, and read_committed
against read_uncommitted consume, through the reference broker, with confluent-kafka in the same run.

    .venv/bin/python bench/transactions.py            # about a minute
    .venv/bin/python bench/transactions.py --quick    # smoke run

1. Produce. --records (100,000) records of 100 B values, no keys, to a fresh topic of --partitions (4)
   partitions (acks=all, linger.ms 5), by each producer twice: idempotent (``send`` in a loop, then
   flush), and transactional in transactions of --txn-size (100) records (``begin_transaction``, the
   sends, ``commit_transaction``). Producers: kafkawire's AsyncProducer and Producer, confluent-kafka's
   Producer. Timed from the first send to the last flush or commit; the records in the topic are
   counted afterwards. Target: each kafkawire producer's transactional records/s at least 0.8x its
   idempotent records/s (confluent-kafka's ratio printed beside).
2. Consume. A topic of --partitions partitions loaded by confluent-kafka's transactional producer with
   --records records in transactions of --txn-size, every tenth transaction aborted, is read from
   offset 0 to its end (assign, no group) with isolation.level read_uncommitted and read_committed by
   kafkawire's AsyncConsumer and confluent-kafka's Consumer. Timed from construction to the last record
   (kafkawire: until the position reaches the end of every partition, past the last marker); the
   committed and all records are checked against what was loaded. Target: kafkawire's read_committed
   at least 0.9x its read_uncommitted (the same log read, in time).

Each cell runs --repeats (3) times interleaved, the median counts. The broker is ``kafkawire broker``
in a subprocess. This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import asyncio
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, git_state, print_targets

PRODUCE_TARGET = 0.8
CONSUME_TARGET = 0.9
VALUE = b"v" * 100


# ---- produce ---------------------------------------------------------------------------------------

async def _kafkawire_async(bootstrap: str, topic: str, count: int, txn_size: int | None) -> float:
    from kafkawire.client import AsyncProducer
    settings = {"bootstrap_servers": bootstrap, "linger_ms": 5, "acks": "all"}
    if txn_size:
        settings["transactional_id"] = f"bench-{topic}"
    async with AsyncProducer(**settings) as producer:
        await producer.partitions_for(topic)
        if txn_size:
            await producer.init_transactions(30)
        started = time.perf_counter()
        if txn_size:
            for start in range(0, count, txn_size):
                producer.begin_transaction()
                for _ in range(min(txn_size, count - start)):
                    await producer.send(topic, VALUE)
                await producer.commit_transaction(60)
        else:
            for _ in range(count):
                await producer.send(topic, VALUE)
            await producer.flush()
        return time.perf_counter() - started


def kafkawire_async(bootstrap: str, topic: str, count: int, txn_size: int | None) -> float:
    return asyncio.run(_kafkawire_async(bootstrap, topic, count, txn_size))


def kafkawire_sync(bootstrap: str, topic: str, count: int, txn_size: int | None) -> float:
    from kafkawire.client import Producer
    settings = {"bootstrap_servers": bootstrap, "linger_ms": 5, "acks": "all"}
    if txn_size:
        settings["transactional_id"] = f"bench-{topic}"
    with Producer(**settings) as producer:
        producer.partitions_for(topic)
        if txn_size:
            producer.init_transactions(30)
        send = producer.send
        started = time.perf_counter()
        if txn_size:
            for start in range(0, count, txn_size):
                producer.begin_transaction()
                for _ in range(min(txn_size, count - start)):
                    send(topic, VALUE)
                producer.commit_transaction(60)
        else:
            for _ in range(count):
                send(topic, VALUE)
            producer.flush()
        return time.perf_counter() - started


def confluent(bootstrap: str, topic: str, count: int, txn_size: int | None, aborted_every: int = 0) -> float:
    from confluent_kafka import Producer as CProducer
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if txn_size:
        settings["transactional.id"] = f"bench-{topic}"
    producer = CProducer(settings)
    producer.list_topics(topic, timeout=30)
    if txn_size:
        producer.init_transactions(30)

    def produce() -> None:
        while True:
            try:
                producer.produce(topic, VALUE)
                producer.poll(0)
                return
            except BufferError:
                producer.poll(0.001)
    started = time.perf_counter()
    if txn_size:
        for number, start in enumerate(range(0, count, txn_size)):
            producer.begin_transaction()
            for _ in range(min(txn_size, count - start)):
                produce()
            if aborted_every and number % aborted_every == aborted_every - 1:
                producer.flush(60)  # in the log, then aborted (an abort drops what was not sent yet)
                producer.abort_transaction(60)
            else:
                producer.commit_transaction(60)
    else:
        for _ in range(count):
            produce()
        producer.flush(60)
    return time.perf_counter() - started


PRODUCERS = {"kafkawire AsyncProducer": kafkawire_async, "kafkawire Producer": kafkawire_sync,
             "confluent-kafka Producer": confluent}


def topic_records(bootstrap: str, topic: str, partitions: int, isolation: str) -> int:
    """Records ``isolation`` reads from ``topic`` (confluent-kafka, to the end of every partition)."""
    return len(read_confluent(bootstrap, topic, partitions, isolation, None)[1])


def bench_produce(args, bootstrap: str, out: list[str]) -> list[tuple[str, bool]]:
    times: dict[tuple[str, str], list[float]] = {}
    for repeat in range(args.repeats):
        cells = [(name, mode) for name in PRODUCERS for mode in ("idempotent", "transactional")]
        cells = cells[repeat % len(cells):] + cells[:repeat % len(cells)]
        for name, mode in cells:
            topic = f"produce-{list(PRODUCERS).index(name)}-{mode}-{repeat}"
            create_topic(bootstrap, topic, args.partitions)
            elapsed = PRODUCERS[name](bootstrap, topic, args.records, args.txn_size if mode == "transactional" else None)
            landed = topic_records(bootstrap, topic, args.partitions, "read_committed")
            if landed != args.records:
                raise AssertionError(f"{name} {mode}: {landed} records in {topic}, not {args.records}")
            times.setdefault((name, mode), []).append(elapsed)
    out.append(f"## Produce: {args.records:,} records of 100 B, transactions of {args.txn_size}\n")
    out.append("| producer | idempotent rec/s | transactional rec/s | transactional ÷ idempotent |")
    out.append("|---|---:|---:|---:|")
    verdicts = []
    for name in PRODUCERS:
        idempotent = args.records / statistics.median(times[(name, "idempotent")])
        transactional = args.records / statistics.median(times[(name, "transactional")])
        ratio = transactional / idempotent
        out.append(f"| {name} | {idempotent:,.0f} | {transactional:,.0f} | {ratio:.2f} |")
        if name.startswith("kafkawire"):
            verdicts.append((f"{name}: transactional {ratio:.2f}x idempotent (target >= {PRODUCE_TARGET})",
                             ratio >= PRODUCE_TARGET))
    return verdicts


# ---- consume ---------------------------------------------------------------------------------------

def read_kafkawire(bootstrap: str, topic: str, partitions: int, isolation: str, ends: dict | None
                   ) -> tuple[float, list[bytes]]:
    from kafkawire.client import AsyncConsumer, TopicPartition

    async def read() -> tuple[float, list[bytes]]:
        started = time.perf_counter()
        consumer = AsyncConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
                                 max_poll_records=500)
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        values: list[bytes] = []
        try:
            while True:
                values += [record.value for record in await consumer.poll(timeout_ms=100)]
                positions = [await consumer.position(tp) for tp in tps]
                if all(consumer.highwater(tp) >= 0 and position >= (ends[tp.partition] if ends else consumer.highwater(tp))
                       for tp, position in zip(tps, positions)):
                    return time.perf_counter() - started, values
        finally:
            await consumer.close()
    return asyncio.run(read())


def read_confluent(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int | None
                   ) -> tuple[float, list[bytes]]:
    """confluent-kafka reads ``expected`` records (None: until the end of every partition)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer as CConsumer, TopicPartition as CTopicPartition
    started = time.perf_counter()
    consumer = CConsumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
                          "enable.auto.commit": False, "isolation.level": isolation,
                          "enable.partition.eof": expected is None})
    consumer.assign([CTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    ended: set[int] = set()
    try:
        while (len(values) < expected) if expected is not None else len(ended) < partitions:
            for message in consumer.consume(num_messages=1000, timeout=0.1):
                if message.error() is None:
                    values.append(message.value())
                elif expected is None:
                    ended.add(message.partition())  # _PARTITION_EOF
        return time.perf_counter() - started, values
    finally:
        consumer.close()


def bench_consume(args, bootstrap: str, out: list[str]) -> list[tuple[str, bool]]:
    topic = "consume-transactions"
    create_topic(bootstrap, topic, args.partitions)
    confluent(bootstrap, topic, args.records, args.txn_size, aborted_every=10)
    transactions = -(-args.records // args.txn_size)
    aborted_records = sum(min(args.txn_size, args.records - n * args.txn_size)
                          for n in range(transactions) if n % 10 == 9)
    expected = {"read_uncommitted": args.records, "read_committed": args.records - aborted_records}
    ends = end_offsets(bootstrap, topic, args.partitions)
    times: dict[tuple[str, str], list[float]] = {}
    for repeat in range(args.repeats):
        cells = [(name, isolation) for name in ("kafkawire AsyncConsumer", "confluent-kafka Consumer")
                 for isolation in ("read_uncommitted", "read_committed")]
        for name, isolation in cells[repeat % len(cells):] + cells[:repeat % len(cells)]:
            if name.startswith("kafkawire"):
                elapsed, values = read_kafkawire(bootstrap, topic, args.partitions, isolation, ends)
            else:
                elapsed, values = read_confluent(bootstrap, topic, args.partitions, isolation, expected[isolation])
            if len(values) != expected[isolation]:
                raise AssertionError(f"{name} {isolation}: {len(values)} records, not {expected[isolation]}")
            times.setdefault((name, isolation), []).append(elapsed)
    out.append(f"\n## Consume: {args.records:,} records of 100 B in transactions of {args.txn_size}, every "
               f"tenth aborted ({aborted_records:,} records)\n")
    out.append("| consumer | read_uncommitted s | read_committed s | committed ÷ uncommitted speed |")
    out.append("|---|---:|---:|---:|")
    verdicts = []
    for name in ("kafkawire AsyncConsumer", "confluent-kafka Consumer"):
        uncommitted = statistics.median(times[(name, "read_uncommitted")])
        committed = statistics.median(times[(name, "read_committed")])
        ratio = uncommitted / committed
        out.append(f"| {name} | {uncommitted:.2f} | {committed:.2f} | {ratio:.2f} |")
        if name.startswith("kafkawire"):
            verdicts.append((f"{name}: read_committed {ratio:.2f}x read_uncommitted (target >= {CONSUME_TARGET})",
                             ratio >= CONSUME_TARGET))
    return verdicts


# ---- the broker's topics ---------------------------------------------------------------------------

def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer as CConsumer, TopicPartition as CTopicPartition
    consumer = CConsumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return {p: consumer.get_watermark_offsets(CTopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    finally:
        consumer.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000, help="records per run (100,000)")
    parser.add_argument("--txn-size", type=int, default=100, help="records per transaction (100)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each topic (4)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each cell; the median counts (3)")
    parser.add_argument("--only", type=lambda s: set(s.split(",")), default={"produce", "consume"},
                        help="sections to run: produce,consume")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20,000 records, one repeat")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.repeats = 20_000, 1
    import confluent_kafka
    print("# kafkawire transactions benchmark\n")
    print(f"Python {platform.python_version()}, load average {__import__('os').getloadavg()[0]:.2f}; kafkawire git "
          f"{git_state()}; confluent-kafka {confluent_kafka.version()[0]} (librdkafka "
          f"{confluent_kafka.libversion()[0]}); broker in a subprocess.\n")
    tmp = Path(tempfile.mkdtemp(prefix="kafkawire-bench-txn-"))
    broker = BrokerProcess(tmp / "data", tmp / "broker.log")
    out: list[str] = []
    verdicts: list[tuple[str, bool]] = []
    started = time.perf_counter()
    try:
        if "produce" in args.only:
            verdicts += bench_produce(args, broker.bootstrap, out)
        if "consume" in args.only:
            verdicts += bench_consume(args, broker.bootstrap, out)
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print_targets(out, verdicts, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

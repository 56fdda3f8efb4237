"""Transactions through the broker (issue 22): confluent-kafka against kafkawire's broker, each figure
against its non-transactional peer measured in the same run (bench/transactions.py measures
kafkawire's own producers and consumer).

    .venv/bin/python bench/broker_transactions.py          # 128 MiB of 1 KiB values, then of 64 KiB values
    .venv/bin/python bench/broker_transactions.py --quick  # 16 MiB smoke run
    .venv/bin/python bench/broker_transactions.py --value-sizes 1024 --bytes 32MiB --repeats 5

1. ``kafkawire broker`` in a subprocess on a fresh data directory; topics of --partitions (4) partitions
   created with the AdminClient.
2. Produce (target: transactional >= 0.8x idempotent): an idempotent Producer (enable.idempotence)
   against a transactional one (transactional.id), otherwise configured alike (acks=all, linger.ms=5,
   batch.size=1 MiB, no compression, random values from a pool of 64, round-robin over the
   partitions). The idempotent producer produces every message and flush()es once; the transactional one
   runs transactions of --transaction-records (100): begin_transaction(), the messages,
   commit_transaction(). Timed from the first produce() to the end of the last flush()/commit; the
   two alternate --repeats times, each into its own topic, and the best of each is scored. For
   information, a third producer: idempotent, with a flush() after every transaction's worth of
   messages (what a commit waits for, without the transaction's requests).
3. Consume (target: read_committed >= 0.9x read_uncommitted): a topic written by a transactional
   producer, every --abort-every'th (10th) transaction aborted (its records flushed to the log first,
   so they are in it), the last one committed. One Consumer per run, assign()ed every partition from the
   start after list_topics() (as bench/broker.py does), isolation.level read_uncommitted or
   read_committed, consume() until it has every message it should get (all of them, or the committed
   ones) and their value bytes, checked. Throughput is the topic's messages (aborted ones included:
   both read the same log) per second; the two alternate --repeats times and the best of each is scored.
4. The broker's CPU over each run is printed beside the wall time, to show where the time goes.

This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import version as dist_version
from pathlib import Path

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker import cpu_seconds, mb_s, parse_size
from common import BrokerProcess, git_state

PRODUCE_TARGET = 0.8  # transactional produce >= 0.8x the idempotent rate
CONSUME_TARGET = 0.9  # read_committed consume >= 0.9x read_uncommitted
CONSUME_CALL_BYTES = 4 << 20  # about this many value bytes per consume() call (see bench/broker.py)


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1) for name in names], operation_timeout=10).values():
        future.result(30)


def producer_config(bootstrap: str, errors: list) -> dict:
    return {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20, "compression.type": "none",
            "queue.buffering.max.kbytes": 1 << 20, "queue.buffering.max.messages": 1_000_000,
            "message.max.bytes": 16 << 20, "error_cb": errors.append, "delivery.report.only.error": True,
            "on_delivery": lambda error, message: errors.append(error)}  # failed deliveries only


def _send(producer: Producer, topic: str, value: bytes, partition: int) -> None:
    while True:
        try:
            producer.produce(topic, value, partition=partition)
            return
        except BufferError:
            producer.poll(0.005)


def produce_idempotent(bootstrap: str, topic: str, count: int, values: list[bytes], partitions: int,
                       flush_every: int = 0) -> float:
    """Every message, then flush(); with ``flush_every``, a flush() after each ``flush_every`` messages too."""
    errors: list = []
    producer = Producer({**producer_config(bootstrap, errors), "enable.idempotence": True})
    producer.list_topics(topic, timeout=10)  # connected, producer id fetched, before the clock starts
    started = time.perf_counter()
    for i in range(count):
        _send(producer, topic, values[i & 63], i % partitions)
        if flush_every and i % flush_every == flush_every - 1:
            producer.flush(60)
        elif i & 0x3FFF == 0:
            producer.poll(0)
    left = producer.flush(300)
    seconds = time.perf_counter() - started
    if left or errors:
        raise RuntimeError(f"{left} messages undelivered, errors {errors[:3]}")
    return seconds


def produce_transactions(bootstrap: str, topic: str, count: int, values: list[bytes], partitions: int,
                         per_transaction: int, transactional_id: str, abort_every: int = 0) -> tuple[float, int]:
    """Transactions of ``per_transaction`` messages; with ``abort_every``, every abort_every'th one is
    flushed then aborted. Returns (seconds, messages committed)."""
    errors: list = []
    producer = Producer({**producer_config(bootstrap, errors), "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.list_topics(topic, timeout=10)
    committed = 0
    started = time.perf_counter()
    for n, first in enumerate(range(0, count, per_transaction)):
        producer.begin_transaction()
        last = min(count, first + per_transaction)
        for i in range(first, last):
            _send(producer, topic, values[i & 63], i % partitions)
        if abort_every and n % abort_every == abort_every - 1 and last < count:
            if producer.flush(60):  # into the log, then aborted
                raise RuntimeError("flush before abort timed out")
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
            committed += last - first
    seconds = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"producer errors: {errors[:3]}")
    return seconds, committed


def consume(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int, value_size: int) -> float:
    """Seconds from assign() to the ``expected``-th message (their value bytes checked)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-txn", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": isolation, "fetch.max.bytes": 50 << 20,
        "max.partition.fetch.bytes": 1 << 20, "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 256 << 10,
        "check.crcs": False,
    })
    per_call = max(1, min(10_000, CONSUME_CALL_BYTES // value_size))
    seen = payload = 0
    try:
        consumer.list_topics(topic, timeout=10)
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 600
        while seen < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{isolation}: consumed {seen} of {expected} messages in 600 s")
            for message in consumer.consume(min(per_call, expected - seen), 1.0):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"consumer error: {error}")
                seen += 1
                payload += len(message.value())
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    if payload != expected * value_size:
        raise RuntimeError(f"{isolation}: {payload} value bytes, expected {expected * value_size}")
    return seconds


@dataclass
class Result:
    value_size: int
    count: int
    idempotent_s: float
    transactional_s: float
    flushing_s: float
    uncommitted_s: float
    committed_s: float


def timed_on(broker: BrokerProcess, run):
    """(what ``run()`` returned, the broker's CPU seconds over it)."""
    before = cpu_seconds(broker.proc.pid)
    result = run()
    return result, cpu_seconds(broker.proc.pid) - before


def run_round(value_size: int, nbytes: int, partitions: int, per_transaction: int, abort_every: int,
              repeats: int) -> Result:
    count = nbytes // value_size
    total = count * value_size
    transactions = -(-count // per_transaction)
    print(f"\n## {value_size:,} B values: {count:,} messages ({total / (1 << 20):,.0f} MiB), "
          f"{transactions:,} transactions of {per_transaction}\n")
    values = [os.urandom(value_size) for _ in range(64)]
    tmp = Path(tempfile.mkdtemp(prefix="kafkawire-bench-txn-"))
    broker = BrokerProcess(tmp / "data", tmp / "broker.log")
    try:
        bootstrap = broker.bootstrap
        topic_kinds = ("idempotent", "transactional", "flushing")
        names = [f"{kind}-{n}" for n in range(repeats) for kind in topic_kinds] + ["mixed"]
        create_topics(bootstrap, names, partitions)
        best_idempotent = best_transactional = best_flushing = float("inf")
        for n in range(repeats):  # alternated, the first one rotating: the machine is shared
            kinds = ("idempotent", "transactional", "flushing") if n % 2 == 0 else \
                ("flushing", "transactional", "idempotent")
            for kind in kinds:
                if kind == "flushing":  # information: what the transactions' flushes alone cost
                    seconds, cpu = timed_on(broker, lambda: produce_idempotent(
                        bootstrap, f"flushing-{n}", count, values, partitions, per_transaction))
                    best_flushing = min(best_flushing, seconds)
                    print(f"- idempotent, flush() every {per_transaction} {n + 1}: {count / seconds:10,.0f} msg/s  "
                          f"({seconds:.2f} s, {seconds / transactions * 1000:.2f} ms a flush; broker CPU {cpu:.2f} s)")
                elif kind == "idempotent":
                    seconds, cpu = timed_on(broker, lambda: produce_idempotent(
                        bootstrap, f"idempotent-{n}", count, values, partitions))
                    best_idempotent = min(best_idempotent, seconds)
                    print(f"- idempotent produce {n + 1}:    {count / seconds:10,.0f} msg/s  "
                          f"{mb_s(total, seconds):6,.0f} MB/s  ({seconds:.2f} s; broker CPU {cpu:.2f} s)")
                else:
                    (seconds, _), cpu = timed_on(broker, lambda: produce_transactions(
                        bootstrap, f"transactional-{n}", count, values, partitions, per_transaction, f"bench-{n}"))
                    best_transactional = min(best_transactional, seconds)
                    print(f"- transactional produce {n + 1}: {count / seconds:10,.0f} msg/s  "
                          f"{mb_s(total, seconds):6,.0f} MB/s  ({seconds:.2f} s, "
                          f"{seconds / transactions * 1000:.2f} ms a transaction; broker CPU {cpu:.2f} s, "
                          f"{cpu / transactions * 1000:.2f} ms a transaction)")
        _, committed = produce_transactions(bootstrap, "mixed", count, values, partitions, per_transaction,
                                            "bench-mixed", abort_every)
        print(f"\n- consume: topic 'mixed', every {abort_every}th transaction aborted: {committed:,} of {count:,} "
              f"messages committed")
        consume(bootstrap, "mixed", partitions, "read_uncommitted", count, value_size)  # warm-up, untimed
        best = {"read_uncommitted": float("inf"), "read_committed": float("inf")}
        expected = {"read_uncommitted": count, "read_committed": committed}
        for n in range(repeats):
            for isolation in (list(best) if n % 2 == 0 else list(best)[::-1]):
                seconds, cpu = timed_on(broker, lambda: consume(bootstrap, "mixed", partitions, isolation,
                                                                expected[isolation], value_size))
                best[isolation] = min(best[isolation], seconds)
                print(f"- {isolation + ' ' + str(n + 1) + ':':20} {count / seconds:10,.0f} msg/s of the log  "
                      f"({seconds:.2f} s, {expected[isolation]:,} delivered; broker CPU {cpu:.2f} s)")
        best_uncommitted, best_committed = best["read_uncommitted"], best["read_committed"]
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return Result(value_size, count, best_idempotent, best_transactional, best_flushing, best_uncommitted,
                  best_committed)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bytes", type=parse_size, default=128 << 20,
                        help="payload bytes per value size and run (default 128MiB)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 16 MiB, one repeat")
    parser.add_argument("--value-sizes", default="1024,65536", help="bytes per message value, one round each")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each topic (default 4)")
    parser.add_argument("--transaction-records", type=int, default=100, help="messages a transaction (default 100)")
    parser.add_argument("--abort-every", type=int, default=10,
                        help="in the consumed topic, every Nth transaction is aborted (default 10)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each kind, the best scored (default 3)")
    args = parser.parse_args(argv)
    if args.quick:
        args.bytes, args.repeats = 16 << 20, 1
    try:
        value_sizes = [int(v) for v in args.value_sizes.split(",")]
    except ValueError:
        parser.error(f"--value-sizes: not a list of integers: {args.value_sizes!r}")
    if min(value_sizes) < 1 or min(args.partitions, args.transaction_records, args.repeats, args.abort_every) < 1:
        parser.error("value sizes, --partitions, --transaction-records, --abort-every and --repeats must be >= 1")
    if any(args.bytes // size < 2 * args.transaction_records for size in value_sizes):
        parser.error("--bytes must hold at least two transactions of the largest values")

    started = time.perf_counter()
    print("# kafkawire broker transactions benchmark (confluent-kafka)\n")
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; confluent-kafka {dist_version('confluent-kafka')} "
          f"(librdkafka {confluent_kafka.libversion()[0]}), kafkawire {dist_version('kafkawire')} "
          f"(git {git_state()})")
    results = [run_round(size, args.bytes, args.partitions, args.transaction_records, args.abort_every, args.repeats)
               for size in value_sizes]

    print(f"\n## Targets: transactional produce >= {PRODUCE_TARGET}x idempotent; read_committed >= "
          f"{CONSUME_TARGET}x read_uncommitted (best of {args.repeats} each)\n")
    print("| values | idempotent | transactional | ratio | idempotent, flush() a transaction's worth (info) "
          "| read_uncommitted | read_committed | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        produce_ratio = r.idempotent_s / r.transactional_s
        consume_ratio = r.uncommitted_s / r.committed_s
        print(f"| {r.value_size:,} B | {r.count / r.idempotent_s:,.0f} msg/s | {r.count / r.transactional_s:,.0f} msg/s"
              f" | {'PASS' if produce_ratio >= PRODUCE_TARGET else 'FAIL'} {produce_ratio:.2f} | "
              f"{r.count / r.flushing_s:,.0f} msg/s (transactional {r.flushing_s / r.transactional_s:.2f}x) | "
              f"{r.count / r.uncommitted_s:,.0f} msg/s | {r.count / r.committed_s:,.0f} msg/s | "
              f"{'PASS' if consume_ratio >= CONSUME_TARGET else 'FAIL'} {consume_ratio:.2f} |")
    print(f"\nTotal run {time.perf_counter() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``kafkawire demo``: an end-to-end run on embedded defaults.

1. Start the reference broker with its wire tap on (the broker writes its own traffic as pcapng, so no
   capture privileges are needed).
2. Run a workload with kafkawire's own client and real limits: six partitions; producers in every
   codec; a consumer with a small ``fetch.max.bytes``, ``max.partition.fetch.bytes`` and
   ``max.poll.records`` (its fetcher rotates partition order between fetches, KIP-74).
3. Decode the capture with local Spark into Parquet tables and print the report.
4. Check the tables against what the workload did: every produced record appears exactly once and
   was fetched, every request was answered and decoded, and no fetch response broke the KIP-74 limits.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path


TOPIC = "demo"
PARTITIONS = 6
RECORDS = 5000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
FETCH_MAX_BYTES = 24 * 1024  # fetch.max.bytes, small so that responses are cut by it
PARTITION_MAX_BYTES = 8 * 1024
MAX_POLL_RECORDS = 200


def _value(partition: int, n: int) -> bytes:
    return f"partition {partition} record {n} ".encode() * 4


def produce(bootstrap: str) -> int:
    """Create the topic and produce RECORDS records in every codec (one producer per codec); returns
    how many were acknowledged."""
    from .client import Producer

    sent = 0
    per_codec = RECORDS // len(CODECS)
    for codec_index, codec in enumerate(CODECS):
        with Producer({"bootstrap.servers": bootstrap, "client.id": f"demo-producer-{codec}",
                       "compression.type": codec, "linger.ms": 5, "batch.size": 16384}) as producer:
            futures = []
            for i in range(per_codec):
                n = codec_index * per_codec + i
                partition = n % PARTITIONS
                futures.append(producer.send(TOPIC, _value(partition, n), key=f"k{n}".encode(),
                                             partition=partition, headers=[("codec", codec.encode())]))
            producer.flush()
            sent += sum(1 for future in futures if future.result(30).offset >= 0)
    return sent


def consume(bootstrap: str, expected: int) -> tuple[int, dict]:
    """Read every partition to its end with small fetch limits; returns (records, consumer metrics)."""
    from .client import Consumer, TopicPartition

    seen: set[tuple[int, int]] = set()
    with Consumer({"bootstrap.servers": bootstrap, "client.id": "demo-consumer",
                   "fetch.max.bytes": FETCH_MAX_BYTES, "max.partition.fetch.bytes": PARTITION_MAX_BYTES,
                   "max.poll.records": MAX_POLL_RECORDS, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while len(seen) < expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {len(seen)} of {expected} records in 60 s")
            batch = consumer.poll(timeout_ms=500)
            if len(batch) > MAX_POLL_RECORDS:
                raise AssertionError(f"a poll returned {len(batch)} records, above max.poll.records")
            seen.update((record.partition, record.offset) for record in batch)
        metrics = consumer.metrics()
    return len(seen), metrics


def run(out_dir: str | None = None) -> int:
    from .broker import BrokerThread
    from .capture_spark import job
    from .capture_spark.report_spark import build
    from .capture_spark.session import session, stop

    work = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="kafkawire-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    tap = work / "broker-tap.pcapng"
    shutil.rmtree(work / "broker-data", ignore_errors=True)  # a fresh broker each run
    try:
        started = time.monotonic()
        with BrokerThread(data_dir=work / "broker-data", tap_path=tap, num_partitions=PARTITIONS) as broker:
            produced = produce(broker.bootstrap)
            consumed, metrics = consume(broker.bootstrap, produced)
        print(f"workload: {produced:,} records produced with kafkawire's producer in {len(CODECS)} codecs and "
              f"{consumed:,} consumed (fetch.max.bytes {FETCH_MAX_BYTES:,}, max.partition.fetch.bytes "
              f"{PARTITION_MAX_BYTES:,}, max.poll.records {MAX_POLL_RECORDS}), {time.monotonic() - started:.1f} s")
        print(f"capture: {tap} ({tap.stat().st_size:,} bytes)")

        started = time.monotonic()
        spark = session(keep_classes=True)
        try:
            print(f"spark: {spark.sparkContext.master} ready in {time.monotonic() - started:.1f} s")
            result = job.decode(spark, [str(tap)], str(work / "tables"), records=True)
            print(f"decoded in {result.seconds:.1f} s: " + ", ".join(f"{n} {c:,}" for n, c in result.rows.items()))
            summary = build(spark, str(work / "tables"))
            print()
            print(summary.text())
            print()
            return _check(spark, work / "tables", summary, produced)
        finally:
            stop(spark)
    finally:
        if out_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def _check(spark, tables: Path, summary, produced: int) -> int:
    from pyspark.sql import functions as F

    records = spark.read.parquet(str(tables / "records"))
    produced_rows = records.where(F.col("source") == "produce")
    distinct = produced_rows.select("partition", "offset").distinct().count()
    fetched = records.where(F.col("source") == "fetch").select("partition", "offset").distinct()
    missing = produced_rows.select("partition", "offset").subtract(fetched).count()
    frames = spark.read.parquet(str(tables / "frames"))
    by_direction = {row["direction"]: row["count"] for row in frames.groupBy("direction").count().collect()}
    undecoded = frames.where(F.col("decode_error").isNotNull()).count()
    checks = [
        (f"every produced record appears once in records ({produced_rows.count():,} rows, {distinct:,} distinct, "
         f"{produced:,} acknowledged)", produced_rows.count() == distinct == produced),
        (f"every produced record was also fetched ({missing} missing)", missing == 0),
        (f"every request has its response ({by_direction.get('request', 0)} requests, "
         f"{by_direction.get('response', 0)} responses)", by_direction.get("request") == by_direction.get("response")),
        (f"frames that did not decode: {undecoded}", undecoded == 0),
        (f"problems: {sum(p['count'] for p in summary.problems)}", not summary.problems),
        ("fetch responses within KIP-74 limits",
         not summary.oversized_responses and not summary.oversized_partitions),
    ]
    for text, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {text}")
    return 0 if all(ok for _, ok in checks) else 1

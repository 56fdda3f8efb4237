"""``kafkawire demo``: an end-to-end run on embedded defaults.

1. Start the reference broker with its wire tap on (the broker writes its own traffic as pcapng, so no
   capture privileges are needed).
2. Run a workload with real limits: a topic of six partitions; a producer sending record batches in
   every codec; a consumer fetching with a small ``fetch.max.bytes`` and ``max.partition.fetch.bytes``,
   rotating partition order between fetches as KIP-74 asks of clients.
3. Decode the capture with local Spark into Parquet tables and print the report.
4. Check the tables against what the workload did: every produced record appears exactly once, the
   frame counts match the requests sent, and no fetch response broke the KIP-74 limits.

The workload speaks the protocol through ``kafkawire.framing`` over plain sockets.
"""
from __future__ import annotations

import shutil
import socket
import tempfile
import time
from pathlib import Path

from .framing import Correlator, FrameBuffer
from .records import Codec, RecordBatchBuilder, iter_batches

TOPIC = "demo"
PARTITIONS = 6
ROUNDS = 20                  # produce requests, each with one batch per partition
RECORDS_PER_BATCH = 40
FETCH_MAX_BYTES = 24 * 1024  # fetch.max.bytes, small so that responses are cut by it
PARTITION_MAX_BYTES = 8 * 1024
CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
PRODUCE_VERSION, FETCH_VERSION, METADATA_VERSION, CREATE_TOPICS_VERSION = 9, 12, 12, 7


class _Connection:
    """One blocking connection: send a request, read its response."""

    def __init__(self, port: int, client_id: str):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlator = Correlator(client_id=client_id)
        self.frames = FrameBuffer()
        self.requests = 0

    def request(self, body, version: int):
        self.sock.sendall(self.correlator.request(body, version))
        self.requests += 1
        while (frame := self.frames.next_frame()) is None:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the broker closed the connection")
            self.frames.feed(data)
        return self.correlator.response(frame)[2]

    def close(self) -> None:
        self.sock.close()


def _value(partition: int, n: int) -> bytes:
    return f"partition {partition} record {n} ".encode() * 4


def produce(port: int) -> tuple[int, int]:
    """Create the topic and produce ROUNDS requests; returns (records, requests)."""
    from .messages import ApiVersionsRequest, CreateTopicsRequest, MetadataRequest, ProduceRequest

    conn = _Connection(port, "demo-producer")
    conn.request(ApiVersionsRequest(client_software_name="kafkawire-demo", client_software_version="0.1"), 3)
    conn.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=TOPIC, num_partitions=PARTITIONS, replication_factor=1)], timeout_ms=10_000), CREATE_TOPICS_VERSION)
    conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]), METADATA_VERSION)
    records = 0
    for round_ in range(ROUNDS):
        partition_data = []
        for partition in range(PARTITIONS):
            builder = RecordBatchBuilder(compression=CODECS[(round_ + partition) % len(CODECS)])
            for i in range(RECORDS_PER_BATCH):
                n = round_ * RECORDS_PER_BATCH + i
                builder.append(_value(partition, n), key=f"k{n}".encode(), headers=[("round", str(round_).encode())])
            partition_data.append(ProduceRequest.PartitionProduceData(index=partition, records=builder.build()))
            records += RECORDS_PER_BATCH
        response = conn.request(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=partition_data)]), PRODUCE_VERSION)
        errors = [p.error_code for t in response.responses for p in t.partition_responses if p.error_code]
        if errors:
            raise RuntimeError(f"produce failed with error codes {errors}")
    requests = conn.requests
    conn.close()
    return records, requests


def consume(port: int, expected: int) -> tuple[int, int]:
    """Fetch every partition to its end with small limits; returns (records, fetch requests)."""
    from .messages import FetchRequest

    conn = _Connection(port, "demo-consumer")
    positions = {p: 0 for p in range(PARTITIONS)}
    order = list(range(PARTITIONS))
    received = fetches = 0
    deadline = time.monotonic() + 60
    while received < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"consumed {received} of {expected} records in 60 s")
        request = FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=FETCH_MAX_BYTES, topics=[
            FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                FetchRequest.FetchPartition(partition=p, fetch_offset=positions[p],
                                            partition_max_bytes=PARTITION_MAX_BYTES) for p in order])])
        response = conn.request(request, FETCH_VERSION)
        fetches += 1
        returned = []
        for topic in response.responses:
            for part in topic.partitions:
                if part.error_code:
                    raise RuntimeError(f"fetch of partition {part.partition_index} failed: {part.error_code}")
                for batch in iter_batches(part.records):
                    if batch.last_offset >= positions[part.partition_index]:
                        received += sum(1 for r in batch.records() if r.offset >= positions[part.partition_index])
                        positions[part.partition_index] = batch.last_offset + 1
                        returned.append(part.partition_index)
        # KIP-74: partitions that returned data go to the back, so one cut off leads the next fetch.
        order = [p for p in order if p not in returned] + [p for p in order if p in returned]
    conn.close()
    return received, fetches


def run(out_dir: str | None = None) -> int:
    from .broker import BrokerThread
    from .capture import job, report
    from .capture.spark import session

    work = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="kafkawire-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    tap = work / "broker-tap.pcapng"
    shutil.rmtree(work / "broker-data", ignore_errors=True)  # a fresh broker each run
    try:
        started = time.monotonic()
        with BrokerThread(data_dir=work / "broker-data", tap_path=tap, num_partitions=PARTITIONS) as broker:
            produced, produce_requests = produce(broker.port)
            consumed, fetch_requests = consume(broker.port, produced)
        print(f"workload: {produced:,} records produced in {produce_requests} requests, {consumed:,} consumed in "
              f"{fetch_requests} fetches (fetch.max.bytes {FETCH_MAX_BYTES:,}, max.partition.fetch.bytes "
              f"{PARTITION_MAX_BYTES:,}), {time.monotonic() - started:.1f} s")
        print(f"capture: {tap} ({tap.stat().st_size:,} bytes)")

        started = time.monotonic()
        spark = session()
        print(f"spark: {spark.sparkContext.master} ready in {time.monotonic() - started:.1f} s")
        result = job.decode(spark, [str(tap)], str(work / "tables"), records=True)
        print(f"decoded in {result.seconds:.1f} s: " + ", ".join(f"{n} {c:,}" for n, c in result.rows.items()))
        summary = report.build(spark, str(work / "tables"))
        print()
        print(summary.text())
        print()
        return _check(spark, work / "tables", summary, produced, fetch_requests)
    finally:
        if out_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def _check(spark, tables: Path, summary, produced: int, fetch_requests: int) -> int:
    from pyspark.sql import functions as F

    records = spark.read.parquet(str(tables / "records")).where(F.col("source") == "produce")
    distinct = records.select("partition", "offset").distinct().count()
    frames = spark.read.parquet(str(tables / "frames"))
    requests = {row["api_name"]: row["count"] for row in
                frames.where(F.col("direction") == "request").groupBy("api_name").count().collect()}
    undecoded = frames.where(F.col("decode_error").isNotNull()).count()
    checks = [
        (f"every produced record appears once in records ({records.count():,} rows, {distinct:,} distinct, "
         f"{produced:,} produced)", records.count() == distinct == produced),
        (f"Produce requests captured: {requests.get('Produce', 0)} of {ROUNDS}", requests.get("Produce", 0) == ROUNDS),
        (f"Fetch requests captured: {requests.get('Fetch', 0)} of {fetch_requests}",
         requests.get("Fetch", 0) == fetch_requests),
        (f"frames that did not decode: {undecoded}", undecoded == 0),
        (f"problems: {sum(p['count'] for p in summary.problems)}", not summary.problems),
        ("fetch responses within KIP-74 limits",
         not summary.oversized_responses and not summary.oversized_partitions),
    ]
    for text, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {text}")
    return 0 if all(ok for _, ok in checks) else 1

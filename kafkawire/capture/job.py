"""The capture job: pcap/pcapng files in, one Parquet table per kind of row out.

Two stages, one shuffle:

1. **Packets.** The driver cuts each file into splits at exact record offsets (``plan_splits``); each
   task opens its split's file by path and turns records into packet rows (``mapInArrow``). No
   capture bytes pass through the JVM on the way in, and no file is held whole.
2. **Connections.** Packet rows are repartitioned by connection (both directions share a key) and
   sorted by capture order inside each partition, so one task sees each connection's packets in
   order and streams them through reassembly, framing, correlation and decoding
   (``decode_connection`` then ``TableBatcher``), holding one connection's state at a time.

Stage 2 emits each table's rows as Arrow IPC blobs tagged with the table's name, kept on the
executors' disks; each table is then written through Spark from its own blobs with its own schema.
Writing through Spark keeps task retries and speculative attempts from duplicating rows.
"""
from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter

import pyarrow as pa

from .model import Packet
from .packets import SPLIT_BYTES, Split, expand_inputs, iter_split, plan_splits
from .rows import TABLES

# Packet rows between the stages (the shuffle's schema).
PACKET_SCHEMA = pa.schema([
    ("connection", pa.string()),
    ("order", pa.int64()),
    ("ts_ns", pa.int64()),
    ("src", pa.string()),
    ("sport", pa.int32()),
    ("dst", pa.string()),
    ("dport", pa.int32()),
    ("seq", pa.int64()),
    ("ack", pa.int64()),
    ("flags", pa.int16()),
    ("payload", pa.binary()),
    ("missing", pa.int64()),
])
PACKET_ROWS_PER_BATCH = 2048
PACKET_BYTES_PER_BATCH = 16 << 20
TABLE_ORDER = ("frames", "fetches", "produces", "records", "problems")
# Stage 2's output: each table's batches as Arrow IPC streams, so that every table keeps its own
# schema (a union of all tables' columns made every row thousands of columns wide).
STAGED_SCHEMA = pa.schema([("table", pa.string()), ("rows", pa.int64()), ("batch", pa.binary())])
STAGING = "_staging"  # written by earlier versions; removed when found
_OFFSETS = struct.Struct("<ii")
SUMMARY = "_summary"


@dataclass
class DecodeResult:
    out_dir: str
    files: list[str]
    splits: int
    input_bytes: int
    rows: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=2)


# ---- stage 1: splits -> packet rows ------------------------------------------------------------------

def read_splits(batches):
    """``mapInArrow`` body: each input row is a JSON-encoded Split; yields packet batches."""
    for batch in batches:
        for text in batch.column(0).to_pylist():
            yield from _packet_batches(iter_split(Split(*json.loads(text))))


def _packet_batches(packets):
    held: list[Packet] = []
    size = 0
    for packet in packets:
        held.append(packet)
        size += len(packet.payload)
        if len(held) >= PACKET_ROWS_PER_BATCH or size >= PACKET_BYTES_PER_BATCH:
            yield _packet_batch(held)
            held, size = [], 0
    if held:
        yield _packet_batch(held)


def _packet_batch(packets: list[Packet]) -> pa.RecordBatch:
    columns = [[p.connection for p in packets], *zip(*packets)]  # PACKET_SCHEMA: connection, then Packet's fields
    return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, PACKET_SCHEMA)],
                                      schema=PACKET_SCHEMA)


# ---- stage 2: packets of each connection -> table rows --------------------------------------------

def decode_partition(broker_ports: set[int] | None, records: bool):
    """``mapInArrow`` body for stage 2 (a closure so the options travel to the workers)."""
    def run(batches):
        from .conversations import decode_connection
        from .rows import TableBatcher

        batcher = TableBatcher(records=records)
        for connection, connection_packets in _connections(batches):
            for item in decode_connection(connection_packets, broker_ports):
                for table, batch in batcher.add(item):
                    yield _staged(table, batch)
            for table, batch in batcher.end_connection(connection):
                yield _staged(table, batch)
        for table, batch in batcher.finish():
            yield _staged(table, batch)
    return run


def _connections(batches):
    """Packet rows sorted by (connection, order) -> (connection, iterator of its Packets) in turn."""
    for connection, rows in groupby(_packet_rows(batches), key=itemgetter(0)):
        yield connection, (Packet(*row[1:]) for row in rows)


def _packet_rows(batches):
    for batch in batches:
        columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        yield from zip(*columns)


def _staged(table: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    blob = sink.getvalue()
    # One binary value over the IPC buffer itself, without copying it into a Python bytes object.
    offsets = pa.py_buffer(_OFFSETS.pack(0, blob.size))
    return pa.RecordBatch.from_arrays(
        [pa.array([table], pa.string()), pa.array([batch.num_rows], pa.int64()),
         pa.Array.from_buffers(pa.binary(), 1, [None, offsets, blob])], schema=STAGED_SCHEMA)


def unstage(batches):
    """``mapInArrow`` body of the table writes: IPC streams back into the table's own batches."""
    for staged in batches:
        blobs = staged.column(2)
        for i in range(len(blobs)):
            with pa.ipc.open_stream(blobs[i].as_buffer()) as reader:
                yield from reader


# ---- the driver -----------------------------------------------------------------------------------

def decode(spark, inputs, out_dir, *, broker_ports=None, records: bool = False, split_bytes: int = SPLIT_BYTES,
           partitions: int | None = None, overwrite: bool = True) -> DecodeResult:
    """Decode captures ``inputs`` (files, folders, globs) into Parquet tables under ``out_dir``."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    started = time.monotonic()
    files = expand_inputs(inputs if isinstance(inputs, (list, tuple)) else [inputs])
    if not files:
        raise FileNotFoundError(f"no capture files in {inputs}")
    splits = [split for index, path in enumerate(files) for split in plan_splits(path, index, split_bytes)]
    input_bytes = sum(os.path.getsize(path) for path in files)
    out = str(out_dir).rstrip("/")
    if overwrite:
        # Only what this job writes: --out may well be a folder that holds other things (even the captures).
        for name in (*TABLE_ORDER, STAGING, SUMMARY):
            _remove(spark, f"{out}/{name}")

    split_rows = spark.sparkContext.parallelize([(json.dumps(s),) for s in splits], len(splits))
    packets = spark.createDataFrame(split_rows, "split string").mapInArrow(
        read_splits, from_arrow_schema(PACKET_SCHEMA))
    if partitions is None:
        cores = spark.sparkContext.defaultParallelism
        partitions = max(cores, -(-input_bytes // (256 << 20)))
    ports = set(broker_ports) if broker_ports else None
    decoded = (packets.repartition(partitions, "connection")
               .sortWithinPartitions("connection", "order")
               .mapInArrow(decode_partition(ports, records), from_arrow_schema(STAGED_SCHEMA)))
    # Kept on the executors' disks between the table writes (recomputed from the captures if lost).
    decoded = decoded.persist(StorageLevel.DISK_ONLY)

    result = DecodeResult(out, files, len(splits), input_bytes)
    counts = {row["table"]: row["rows"] for row in decoded.groupBy("table").agg(F.sum("rows").alias("rows")).collect()}
    for name in TABLE_ORDER:
        if name == "records" and not records:
            continue
        table = decoded.where(F.col("table") == name).mapInArrow(unstage, from_arrow_schema(TABLES[name]))
        table.write.mode("overwrite").parquet(f"{out}/{name}")
        result.rows[name] = counts.get(name, 0)
    decoded.unpersist()
    result.seconds = time.monotonic() - started
    spark.createDataFrame([(result.to_json(),)], "summary string").coalesce(1).write.mode("overwrite").text(
        f"{out}/{SUMMARY}")
    return result


def _remove(spark, path: str) -> None:
    """Delete ``path`` recursively on whatever file system it names (local, HDFS, object stores)."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(hadoop_path, True)

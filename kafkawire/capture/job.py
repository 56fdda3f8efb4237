"""The capture job: pcap/pcapng files in, one Parquet table per kind of row out.

Two stages, one shuffle, and no capture bytes through the JVM (for files that are not compressed):

1. **Packets.** The driver cuts each file into splits at exact record offsets (``plan_splits``); each
   task of a ``spark.range`` of split numbers (the splits travel in the task's closure, so no Python
   worker is needed to make the input) opens its split's file by path and turns records into packet
   *index* rows (``mapInArrow``):
   the connection, capture order, time, addresses, TCP header fields and where the payload is in its
   file (``PacketRef``), not the payload itself. A gzip-compressed file cannot be read at an offset,
   so its rows carry their payloads (the nullable ``payload`` column).
2. **Connections.** Index rows are repartitioned by connection (both directions share a key) and
   sorted by capture order inside each partition, so one task sees each connection's packets in
   order. The task reads each payload back from its file (``PayloadReader``: one mmap per file, kept
   for the task; the page cache makes a read a copy), rebuilds the ``Packet`` and streams the
   connection through reassembly, framing, correlation and decoding (``decode_connection``, then
   ``TableBatcher``), holding one connection's state at a time.

Stage 2 writes the tables itself, with pyarrow's Parquet writer, as part files under ``<out>/<table>/``,
and returns only (table, file, rows) for each file it wrote; the driver collects those to count the
rows, and writes an empty file (the schema, no rows) for any table no task wrote, so that every table
reads. Task retries and speculative attempts do not duplicate rows: a file's name comes from the Spark
partition id and a sequence number within the task (``part-<partition>-<n>.parquet``); it is written
under a hidden temporary name (readers skip names starting with ``.``) and renamed into place, so an
attempt that runs again rewrites the same names, and identical input gives identical files.

On a cluster, the captures and ``--out`` must be on a file system that every worker (and the driver)
sees by the same path: tasks open the captures by path in both stages and write the tables by path.
``--out`` may also be a URI that pyarrow's file systems know (``file://``, ``hdfs://``, ``s3://``...).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from functools import partial
from itertools import groupby
from operator import itemgetter

import pyarrow as pa

from .model import Packet, connection_key
from .packets import (
    ORDER_STRIDE, SPLIT_BYTES, PacketRef, PayloadReader, Split, expand_inputs, iter_split, plan_splits,
)
from .rows import TABLES

# Packet index rows between the stages (the shuffle's schema). A row has either a payload_offset (the
# payload is payload_length bytes there in file order // ORDER_STRIDE) or a payload (gzip captures).
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
    ("payload_offset", pa.int64()),
    ("payload_length", pa.int32()),
    ("missing", pa.int64()),
    ("payload", pa.binary()),
])
PACKET_ROWS_PER_BATCH = 4096
PACKET_BYTES_PER_BATCH = 16 << 20  # payload bytes (gzip captures only) per packet batch
TABLE_ORDER = ("frames", "fetches", "produces", "records", "problems")
# What stage 2 returns: one row per Parquet file it wrote (``file`` relative to the output folder).
WRITTEN_SCHEMA = pa.schema([("table", pa.string()), ("file", pa.string()), ("rows", pa.int64())])
MAX_FILE_BYTES = 512 << 20  # Arrow bytes written to one part file before the next one starts
# Arrow bytes held per table and written as one row group: each row group costs about 50 ms for the
# frames table's ~2,000 leaf columns (the typed bodies), so small ones would cost more than the data
# (Spark's writer made 128 MB row groups too).
ROW_GROUP_BYTES = 128 << 20
STAGING = "_staging"  # written by earlier versions; removed when found
SUMMARY = "_summary"
_CONNECTION_CACHE_LIMIT = 1 << 16
_new_tuple = tuple.__new__  # builds a Packet without the Python-level __new__ of a NamedTuple


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


# ---- stage 1: splits -> packet index rows ------------------------------------------------------------

def read_splits(splits: list[Split]):
    """``mapInArrow`` body for stage 1 (a closure over the run's splits): each input row is a split's
    number (the ``id`` of ``spark.range``); yields that split's packet index batches."""
    def run(batches):
        connections: dict[tuple, str] = {}
        for batch in batches:
            for number in batch.column(0).to_pylist():
                yield from _packet_batches(iter_split(splits[number], payloads=False), connections)
    return run


def _packet_batches(packets, connections: dict):
    held: list = []
    size = 0
    for packet in packets:
        held.append(packet)
        if packet.__class__ is Packet:
            size += len(packet.payload)
        if len(held) >= PACKET_ROWS_PER_BATCH or size >= PACKET_BYTES_PER_BATCH:
            yield _packet_batch(held, connections)
            held, size = [], 0
    if held:
        yield _packet_batch(held, connections)


def _connection_keys(packets: list, known: dict) -> list[str]:
    """Packet.connection of each packet, computed once per 4-tuple (a capture has few)."""
    if len(known) >= _CONNECTION_CACHE_LIMIT:
        known.clear()
    keys = []
    for packet in packets:
        four = packet[2:6]  # src, sport, dst, dport: the same place in Packet and PacketRef
        key = known.get(four)
        if key is None:
            key = known[four] = connection_key(*four)
        keys.append(key)
    return keys


def _packet_batch(packets: list, connections: dict) -> pa.RecordBatch:
    """One split's packets (all PacketRefs, or all Packets for a gzip capture) as index rows."""
    count = len(packets)
    if packets[0].__class__ is PacketRef:
        *head, offsets, lengths, missing = zip(*packets)
        payloads = pa.nulls(count, pa.binary())
    else:
        *head, payloads, missing = zip(*packets)
        offsets, lengths = pa.nulls(count, pa.int64()), pa.nulls(count, pa.int32())
    columns = [_connection_keys(packets, connections), *head, offsets, lengths, missing, payloads]
    return pa.RecordBatch.from_arrays(
        [c if isinstance(c, pa.Array) else pa.array(c, f.type) for c, f in zip(columns, PACKET_SCHEMA)],
        schema=PACKET_SCHEMA)


# ---- stage 2: packets of each connection -> Parquet files of the tables -------------------------------

def decode_partition(files: list[str], out: str, broker_ports: set[int] | None, records: bool,
                     task: tuple[int, int] | None = None):
    """``mapInArrow`` body for stage 2 (a closure so the options travel to the workers): decodes the
    partition's connections, writes the table rows under ``out`` and yields a WRITTEN_SCHEMA batch.

    ``files`` are the run's captures by file index; ``out`` an absolute path or a URI. ``task`` is
    (partition id, attempt id), by default the running Spark task's (given when run without Spark).
    """
    def run(batches):
        from .conversations import decode_connection
        from .rows import TableBatcher

        partition, attempt = task if task is not None else _spark_task()
        batcher = TableBatcher(records=records)
        with PayloadReader(files) as payloads, TableFiles(out, partition, attempt) as written:
            for connection, connection_packets in _connections(batches, payloads):
                for item in decode_connection(connection_packets, broker_ports):
                    for table, batch in batcher.add(item):
                        written.write(table, batch)
                for table, batch in batcher.end_connection(connection):
                    written.write(table, batch)
            for table, batch in batcher.finish():
                written.write(table, batch)
        if written.files:
            tables, names, counts = zip(*written.files)
            yield pa.RecordBatch.from_arrays([pa.array(tables, pa.string()), pa.array(names, pa.string()),
                                              pa.array(counts, pa.int64())], schema=WRITTEN_SCHEMA)
    return run


def _spark_task() -> tuple[int, int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("decode_partition runs inside a Spark task, or is given task=(partition, attempt)")
    return context.partitionId(), context.taskAttemptId()


def _connections(batches, payloads: PayloadReader):
    """Index rows sorted by (connection, order) -> (connection, iterator of its Packets) in turn."""
    for connection, pairs in groupby(_packets(batches, payloads), key=itemgetter(0)):
        yield connection, map(_second, pairs)


_second = itemgetter(1)
_as_packet = partial(_new_tuple, Packet)


def _packets(batches, payloads: PayloadReader):
    """(connection, Packet) per index row, each payload read back from its file or taken from the row."""
    for batch in batches:
        (connection, order, ts_ns, src, sport, dst, dport, seq, ack, flags, offsets, lengths, missing,
         carried) = [batch.column(name).to_pylist() for name in PACKET_SCHEMA.names]
        carrying = batch.column("payload_offset").null_count
        if carrying == batch.num_rows:
            data = carried  # a gzip capture's rows
        elif not carrying:
            data = payloads.read_all(order, offsets, lengths)
        else:  # gzip and plain captures in one batch
            read = payloads.read
            data = [read(at // ORDER_STRIDE, offset, length) if offset is not None else payload
                    for at, offset, length, payload in zip(order, offsets, lengths, carried)]
        yield from zip(connection, map(_as_packet, zip(order, ts_ns, src, sport, dst, dport, seq, ack, flags,
                                                       data, missing)))


class TableFiles:
    """The Parquet part files one stage-2 task writes: ``<out>/<table>/part-<partition>-<n>.parquet``.

    Each file is written under a hidden temporary name (unique to the attempt) and renamed into place
    when complete, so readers never see a partial file and an attempt that runs again (a retry, a
    speculative copy) replaces the same names with the same content. Batches are held until
    ``row_group_bytes`` of a table's Arrow data can be written as one row group; a table's next file
    starts after ``max_file_bytes``. ``files`` lists (table, file relative to ``out``, rows) of the
    files completed. As a context manager: completes the files on success, deletes the temporary ones
    on failure.
    """

    def __init__(self, out: str, partition: int, attempt: int, max_file_bytes: int = MAX_FILE_BYTES,
                 row_group_bytes: int = ROW_GROUP_BYTES):
        self.fs, self.root = _file_system(out)
        self.partition, self.attempt = partition, attempt
        self.max_file_bytes = max_file_bytes
        self.row_group_bytes = row_group_bytes
        self.files: list[tuple[str, str, int]] = []
        self._open: dict[str, _PartFile] = {}
        self._next: dict[str, int] = {}

    def write(self, table: str, batch: pa.RecordBatch) -> None:
        part = self._open.get(table)
        if part is None:
            part = self._open[table] = self._start(table)
        part.held.append(batch)
        part.held_bytes += batch.nbytes
        if part.held_bytes >= self.row_group_bytes:
            part.write_row_group()
            if part.bytes >= self.max_file_bytes:
                self._complete(table)

    def _start(self, table: str) -> "_PartFile":
        import pyarrow.parquet as pq

        number = self._next.get(table, 0)
        self._next[table] = number + 1
        name = part_file_name(self.partition, number)
        folder = f"{self.root}/{table}"
        self.fs.create_dir(folder, recursive=True)
        temporary = f"{folder}/.{name}.{self.attempt}.tmp"
        return _PartFile(f"{table}/{name}", temporary, pq.ParquetWriter(temporary, TABLES[table], filesystem=self.fs))

    def _complete(self, table: str) -> None:
        part = self._open.pop(table)
        part.write_row_group()
        part.writer.close()
        self.fs.move(part.temporary, f"{self.root}/{part.name}")
        self.files.append((table, part.name, part.rows))

    def close(self) -> None:
        for table in list(self._open):
            self._complete(table)

    def abort(self) -> None:
        parts, self._open = self._open, {}
        for part in parts.values():
            try:
                part.writer.close()
                self.fs.delete_file(part.temporary)
            except OSError:
                pass  # the task is failing already; a stray hidden file is skipped by readers

    def __enter__(self) -> "TableFiles":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


@dataclass
class _PartFile:
    name: str          # <table>/part-....parquet
    temporary: str
    writer: object     # pyarrow.parquet.ParquetWriter
    rows: int = 0      # written
    bytes: int = 0     # Arrow bytes written
    held: list = field(default_factory=list)  # batches of the next row group
    held_bytes: int = 0

    def write_row_group(self) -> None:
        if not self.held:
            return
        rows = sum(batch.num_rows for batch in self.held)
        self.writer.write_table(pa.Table.from_batches(self.held), row_group_size=rows)
        self.rows += rows
        self.bytes += self.held_bytes
        self.held, self.held_bytes = [], 0


def part_file_name(partition: int, number: int) -> str:
    return f"part-{partition:05d}-{number:03d}.parquet"


def _file_system(out: str):
    """(pyarrow FileSystem, path on it) for an absolute local path or a URI."""
    from pyarrow import fs

    if "://" in out:
        return fs.FileSystem.from_uri(out)
    return fs.LocalFileSystem(), out


def _location(out: str) -> str:
    """``out`` as the workers must see it: a URI as given, a local path made absolute here (a worker's
    working directory is not the driver's)."""
    return out if "://" in out else os.path.abspath(out)


# ---- the driver -----------------------------------------------------------------------------------

def decode(spark, inputs, out_dir, *, broker_ports=None, records: bool = False, split_bytes: int = SPLIT_BYTES,
           partitions: int | None = None, overwrite: bool = True) -> DecodeResult:
    """Decode captures ``inputs`` (files, folders, globs) into Parquet tables under ``out_dir``.

    ``overwrite`` (the default) first removes the tables (and summary) an earlier run left there, and
    nothing else; without it, a table folder already there is a FileExistsError.
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    started = time.monotonic()
    files = expand_inputs(inputs if isinstance(inputs, (list, tuple)) else [inputs])
    if not files:
        raise FileNotFoundError(f"no capture files in {inputs}")
    splits = [split for index, path in enumerate(files) for split in plan_splits(path, index, split_bytes)]
    input_bytes = sum(os.path.getsize(path) for path in files)
    out = str(out_dir).rstrip("/")
    location = _location(out)
    fs, root = _file_system(location)
    tables = [name for name in TABLE_ORDER if records or name != "records"]
    ours = (*TABLE_ORDER, STAGING, SUMMARY)
    if overwrite:
        # Only what this job writes: --out may well be a folder that holds other things (even the captures).
        for name in ours:
            _remove(fs, f"{root}/{name}")
    else:
        found = [name for name in ours if _exists(fs, f"{root}/{name}")]
        if found:
            raise FileExistsError(f"{out} already holds {', '.join(found)} (decode with overwrite to replace them)")

    # One split per partition. spark.range needs no Python worker of its own, where a DataFrame made from
    # Python rows starts a second PySpark daemon just to ship them (about 1.5 CPU-s).
    packets = spark.range(len(splits), numPartitions=len(splits)).mapInArrow(
        read_splits(splits), from_arrow_schema(PACKET_SCHEMA))
    if partitions is None:
        cores = spark.sparkContext.defaultParallelism
        partitions = max(cores, -(-input_bytes // (256 << 20)))
    ports = set(broker_ports) if broker_ports else None
    written = (packets.repartition(partitions, "connection")
               .sortWithinPartitions("connection", "order")
               .mapInArrow(decode_partition(files, location, ports, records), from_arrow_schema(WRITTEN_SCHEMA))
               .collect())

    result = DecodeResult(out, files, len(splits), input_bytes)
    result.rows = {name: 0 for name in tables}
    for row in written:
        result.rows[row["table"]] += row["rows"]
    with_files = {row["table"] for row in written}
    for name in tables:
        if name not in with_files:
            _write_empty(fs, f"{root}/{name}", TABLES[name])
    result.seconds = time.monotonic() - started
    fs.create_dir(f"{root}/{SUMMARY}", recursive=True)
    with fs.open_output_stream(f"{root}/{SUMMARY}/summary.json") as stream:
        stream.write(result.to_json().encode())
    return result


def _write_empty(fs, folder: str, schema: pa.Schema) -> None:
    """A table without rows is still a folder with one readable Parquet file: its schema, no rows."""
    import pyarrow.parquet as pq

    fs.create_dir(folder, recursive=True)
    pq.write_table(schema.empty_table(), f"{folder}/{part_file_name(0, 0)}", filesystem=fs)


def _exists(fs, path: str) -> bool:
    from pyarrow.fs import FileType

    return fs.get_file_info(path).type != FileType.NotFound


def _remove(fs, path: str) -> None:
    from pyarrow.fs import FileType

    kind = fs.get_file_info(path).type
    if kind == FileType.Directory:
        fs.delete_dir(path)
    elif kind != FileType.NotFound:
        fs.delete_file(path)

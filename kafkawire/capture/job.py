"""The capture job: pcap/pcapng files in, one Parquet table per kind of row out.

Two stages, one shuffle, and no capture bytes through the JVM (for files that are not compressed). The job
is made of RDD operations on plain Python tuples: the JVM only schedules tasks and moves the shuffle's
bytes, where a DataFrame plan had converted a row per packet to and from Arrow and sorted it in the JVM
(about 3 CPU-s per GB of capture, and PySpark's SQL workers import pandas).

1. **Packets.** The driver cuts each file into splits at exact record offsets (``plan_captures``, which
   also samples the packets' headers to estimate each connection's share of the payload); each
   task (a run of consecutive splits, about ``READ_TASK_BYTES``; the splits travel in the tasks'
   closure) opens each split's file by path and turns records into *chunk* rows (``read_splits``, ``chunks``): ``((connection, first order), chunk)``, a
   chunk packing up to 4096 consecutive packets of one connection as binary headers (time, TCP header
   fields and where each payload is in its file), not the payloads themselves. A gzip-compressed file
   cannot be read at an offset, so its chunks carry their payloads.
2. **Connections.** Chunk rows are repartitioned by connection (both directions share a key; the
   sampled connections are spread so the partitions' bytes come out even) and sorted by (connection,
   first order) inside each partition (``repartitionAndSortWithinPartitions``: PySpark's external
   sort, which spills to disk past ``spark.python.worker.memory``), so one task sees each
   connection's packets in order. The task reads each payload back from its file (``PayloadReader``:
   one mmap per file; its pages released every 256 MB it may have mapped), rebuilds the ``Packet``
   and streams the connection through reassembly, framing, correlation and decoding
   (``decode_connection``, then ``TableBatcher``), holding one connection's state at a time.

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
import zlib
from dataclasses import dataclass, field
from itertools import groupby
from typing import NamedTuple

import pyarrow as pa
from pyarrow.fs import LocalFileSystem

from .chunks import ChunkPacker, unpack_packets
from .direct_file import DirectFile
from .model import connection_key
from .packets import (
    SPLIT_BYTES, PayloadReader, SkippedBytes, Split, expand_inputs, iter_split, plan_splits,
)
from .rows import TABLES
from .tables import OURS, SUMMARY, TABLE_ORDER, check_out
from .worker_memory import keep_freed_memory

MAX_FILE_BYTES = 512 << 20  # Arrow bytes written to one part file before the next one starts
# Arrow bytes held per table and written as one row group: each row group costs about 50 ms for the
# frames table's ~2,000 leaf columns (the typed bodies), so small ones would cost more than the data
# (Spark's writer made 128 MB row groups too).
ROW_GROUP_BYTES = 128 << 20
OUTPUT_BUFFER_BYTES = 4 << 20  # in front of a part file on a URI's file system (local ones: DirectFile)
_CONNECTION_CACHE_LIMIT = 1 << 16
# The planning walk's sample windows: one per 2 MB of capture, 128 KB long (a sixteenth of the
# packets: the walk takes about 0.4 s per GB instead of 0.33). On the 1 GB bench capture, the 48
# connections' sampled shares were within 71% of their true ones, and 4 to 20 partitions came out
# within 2-4% of even (by true bytes). A sixty-fourth (64 KB windows, which hold a single 64 KB
# loopback segment) was off by up to 170%, and its partitions by 9%.
SAMPLE_SPACING = 2 << 20
SAMPLE_WINDOW = 128 << 10
TASK_BYTES = 256 << 20  # capture bytes per stage-2 task, about
# Capture bytes per stage-1 task, about: a task takes several splits. A worker waited 0.1-0.35 s between
# the end of one task's Python and the start of the next (the shuffle write and the next launch), where
# reading 128 MB takes 0.25 CPU-s: one split per task had left the 1 GB bench's stage 1 half idle
# (8 tasks in 1.8 s of wall, 1.9 CPU-s on 2 cores). With 4 tasks of 2 splits the job's own time was
# 8.5-8.7 s against 9.6-10.0 s (two runs each).
READ_TASK_BYTES = 512 << 20
BALANCED_CONNECTIONS = 4096  # connections given a partition by size; the rest are hashed


@dataclass
class DecodeResult:
    out_dir: str
    files: list[str]
    splits: int
    input_bytes: int
    connections: int = 0   # TCP connections seen
    payload_bytes: int = 0  # their TCP payload bytes
    partitions: int = 0    # stage-2 tasks
    master: str = ""       # where Spark ran the job
    rows: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    capture_records: int = 0  # packet records of the captures looked at
    # capture records that gave no packet, by reason (packets.py's stats keys: not_tcp, corrupt,
    # truncated_tail...); a corrupt header or a torn tail is also a row of the problems table
    skipped: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=2)


# ---- stage 1: splits -> chunk rows ------------------------------------------------------------------

def read_splits(splits: list[Split], sizes=None, reads=None):
    """Stage 1's task body (a closure over the run's splits): for each split number of the task, yields
    chunk rows ``((connection, first order), chunk)``, a connection's consecutive packets packed
    together (``chunks.ChunkPacker``). With ``sizes`` (a Spark accumulator of ``ConnectionBytes``),
    adds each connection's payload bytes to it; with ``reads`` (one of ``ReadStats``), the reader's
    counts and the runs of bytes it skipped."""
    def run(numbers):
        known: dict[tuple, str] = {}  # connection key per 4-tuple, computed once (a capture has few)
        packer = ChunkPacker()
        stats: dict[str, int] = {}
        skipped: list[SkippedBytes] = []
        for number in numbers:
            for packet in iter_split(splits[number], stats, payloads=False, skipped=skipped):
                four = packet[2:6]  # src, sport, dst, dport: the same place in Packet and PacketRef
                key = known.get(four)
                if key is None:
                    if len(known) >= _CONNECTION_CACHE_LIMIT:
                        known.clear()
                    key = known[four] = connection_key(*four)
                yield from packer.add(key, packet)
        yield from packer.finish()
        if sizes is not None:
            sizes.add(packer.connection_bytes)
        if reads is not None:
            reads.add((stats, {_skip_key(skip): skip for skip in skipped}))
    return run


def _skip_key(skip: SkippedBytes) -> tuple:
    return skip.path, skip.offset, skip.kind


class ConnectionBytes:
    """Spark accumulator parameter: payload bytes per connection, summed over stage 1's tasks."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, total: dict, more: dict) -> dict:
        for key, count in more.items():
            total[key] = total.get(key, 0) + count
        return total


class ReadStats:
    """Spark accumulator parameter: ``(counts, skipped)``, the reader's counts summed over stage 1's tasks
    and its ``SkippedBytes`` by (file, offset, kind), so that a retried task lists each run once."""

    def zero(self, value) -> tuple:
        return {}, {}

    def addInPlace(self, total: tuple, more: tuple) -> tuple:
        for key, count in more[0].items():
            total[0][key] = total[0].get(key, 0) + count
        total[1].update(more[1])
        return total


# Problem kinds of the runs of capture bytes the reader skipped (SkippedBytes.kind).
CAPTURE_PROBLEMS = {"corrupt": "corrupt_record", "truncated_tail": "truncated_tail"}


def capture_problems(skipped) -> pa.Table:
    """Rows of the problems table for ``SkippedBytes``: no connection (the bytes belong to none that is
    known), the file and where in it, and how many bytes (null where a gzip stream was left unread)."""
    ordered = sorted(skipped, key=lambda skip: (skip.path, skip.offset, skip.kind))
    schema = TABLES["problems"]
    columns = {name: [None] * len(ordered) for name in schema.names}
    columns["kind"] = [CAPTURE_PROBLEMS[skip.kind] for skip in ordered]
    columns["reason"] = [skip.reason for skip in ordered]
    columns["length"] = [skip.length for skip in ordered]
    columns["file"] = [skip.path for skip in ordered]
    columns["file_offset"] = [skip.offset for skip in ordered]
    return pa.table(columns, schema=schema)


# ---- stage 2: packets of each connection -> Parquet files of the tables -------------------------------

def decode_partition(files: list[str], out: str, broker_ports: set[int] | None, records: bool,
                     task: tuple[int, int] | None = None):
    """Stage 2's task body (a closure so the options travel to the workers): decodes the partition's
    connections from its chunk rows, sorted by (connection, first order), writes the table rows under
    ``out`` and yields (table, file relative to ``out``, rows) for each Parquet file written.

    ``files`` are the run's captures by file index; ``out`` an absolute path or a URI. ``task`` is
    (partition id, attempt id), by default the running Spark task's (given when run without Spark).
    """
    def run(rows):
        from .conversations import decode_connection
        from .rows import TableBatcher

        if task is None:  # a Spark worker, which runs task after task: see worker_memory
            keep_freed_memory()
            partition, attempt = _spark_task()
        else:
            partition, attempt = task
        batcher = TableBatcher(records=records)
        with PayloadReader(files) as payloads, TableFiles(out, partition, attempt) as written:
            for connection, connection_packets in _connections(rows, payloads):
                for item in decode_connection(connection_packets, broker_ports):
                    for table, batch in batcher.add(item):
                        written.write(table, batch)
                for table, batch in batcher.end_connection(connection):
                    written.write(table, batch)
            for table, batch in batcher.finish():
                written.write(table, batch)
        yield from written.files
    return run


def _spark_task() -> tuple[int, int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("decode_partition runs inside a Spark task, or is given task=(partition, attempt)")
    return context.partitionId(), context.taskAttemptId()


def _connection_of(row) -> str:
    return row[0][0]


def _connections(rows, payloads: PayloadReader):
    """Chunk rows sorted by (connection, first order) -> (connection, iterator of its Packets) in turn."""
    for connection, connection_rows in groupby(rows, key=_connection_of):
        yield connection, unpack_packets(connection_rows, payloads)


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
        if isinstance(self.fs, LocalFileSystem):
            stream = DirectFile(temporary)  # past the page cache: see direct_file
        else:
            # Parquet's writer issues a write (and a seek) per page, tens of thousands per file: a
            # buffer in front of the file makes them a few large writes (about 0.1 CPU-s less per 100 MB).
            stream = self.fs.open_output_stream(temporary, buffer_size=OUTPUT_BUFFER_BYTES)
        writer = pq.ParquetWriter(stream, TABLES[table], **writer_options(table))
        return _PartFile(f"{table}/{name}", temporary, writer, stream)

    def _complete(self, table: str) -> None:
        part = self._open.pop(table)
        part.write_row_group()
        part.close()
        self.fs.move(part.temporary, f"{self.root}/{part.name}")
        self.files.append((table, part.name, part.rows))

    def close(self) -> None:
        for table in list(self._open):
            self._complete(table)

    def abort(self) -> None:
        parts, self._open = self._open, {}
        for part in parts.values():
            try:
                part.close()
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
    stream: object     # the buffered file stream it writes to
    rows: int = 0      # written
    bytes: int = 0     # Arrow bytes written
    held: list = field(default_factory=list)  # batches of the next row group
    held_bytes: int = 0

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            self.stream.close()

    def write_row_group(self) -> None:
        if not self.held:
            return
        rows = sum(batch.num_rows for batch in self.held)
        self.writer.write_table(pa.Table.from_batches(self.held), row_group_size=rows)
        self.rows += rows
        self.bytes += self.held_bytes
        self.held, self.held_bytes = [], 0


def writer_options(table: str) -> dict:
    """ParquetWriter options for ``table``. The frames table's binary columns hold raw record batches
    (and unknown tagged fields): values that never repeat and that nobody filters on by range, so a
    dictionary and min/max statistics cost their hashing and comparing for nothing (a quarter of the
    frames table's write time). Elsewhere the defaults stay: keys and header values do repeat."""
    if table != "frames":
        return {}
    others = [path for path, kind in parquet_leaves(TABLES[table]) if not pa.types.is_binary(kind)]
    return {"use_dictionary": others, "write_statistics": others}


def parquet_leaves(schema: pa.Schema):
    """(Parquet column path, Arrow type) of every leaf column of ``schema``, in Parquet's naming:
    ``a.list.element.b`` for a list's items, ``m.key_value.key`` / ``.value`` for a map's."""
    def walk(path: str, kind: pa.DataType):
        if pa.types.is_struct(kind):
            for child in kind:
                yield from walk(f"{path}.{child.name}", child.type)
        elif pa.types.is_map(kind):
            yield from walk(f"{path}.key_value.key", kind.key_type)
            yield from walk(f"{path}.key_value.value", kind.item_type)
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
            yield from walk(f"{path}.list.element", kind.value_type)
        else:
            yield path, kind

    for column in schema:
        yield from walk(column.name, column.type)


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

class CapturePlan(NamedTuple):
    """A run's capture files, the splits they are cut into, and each connection's share of their TCP
    payload as sampled while cutting them (``plan_captures``)."""
    files: list[str]
    splits: list[Split]
    input_bytes: int
    sampled_bytes: dict[str, int]  # connection key -> payload bytes of its packets in the sample windows


def plan_captures(inputs, split_bytes: int = SPLIT_BYTES, *, sample_spacing: int = SAMPLE_SPACING,
                  sample_window: int = SAMPLE_WINDOW) -> CapturePlan:
    """Expands ``inputs`` (files, folders, globs) and cuts every file into splits: the driver's one
    serial walk of the captures (about 0.4 s per GB from the page cache). It needs no Spark, so the
    command line runs it in another process while the JVM starts.

    The walk cuts at record offsets every ``sample_spacing`` bytes; the splits are runs of those
    pieces, and the packets that start in the first ``sample_window`` bytes of each piece are parsed
    (headers only, about 1/16 of the packets) to estimate how the payload divides among connections,
    which ``balanced_partitions`` uses to spread them over the stage-2 tasks. Each connection's
    sampled bytes are in expectation proportional to its share; gzip files are not sampled."""
    files = expand_inputs(inputs if isinstance(inputs, (list, tuple)) else [inputs])
    if not files:
        raise FileNotFoundError(f"no capture files in {inputs}")
    splits: list[Split] = []
    sampled: dict[str, int] = {}
    for index, path in enumerate(files):
        pieces = plan_splits(path, index, min(sample_spacing, split_bytes))
        splits += _joined(pieces, split_bytes)
        if pieces[-1].end is not None:  # not gzip (nor empty): its pieces end at offsets
            for piece in pieces:
                _sample(piece, sample_window, sampled)
    return CapturePlan(files, splits, sum(os.path.getsize(path) for path in files), sampled)


def _joined(pieces: list[Split], split_bytes: int) -> list[Split]:
    """Consecutive pieces joined into splits of at least ``split_bytes`` (the last may be shorter):
    a split starts where its first piece starts, with that piece's context."""
    splits, first = [], None
    for piece in pieces:
        if first is None:
            first = piece
        if piece.end is None or piece.end - first.start >= split_bytes:
            splits.append(first._replace(end=piece.end))
            first = None
    if first is not None:
        splits.append(first._replace(end=pieces[-1].end))
    return splits


def _sample(piece: Split, window_bytes: int, sampled: dict[str, int]) -> None:
    window = piece._replace(end=min(piece.end, piece.start + window_bytes))
    for packet in iter_split(window, payloads=False):
        key = connection_key(*packet[2:6])
        sampled[key] = sampled.get(key, 0) + packet.payload_length


def balanced_partitions(sampled_bytes: dict[str, int], partitions: int,
                        limit: int = BALANCED_CONNECTIONS) -> dict[str, int]:
    """A stage-2 partition for each of the ``limit`` largest sampled connections, chosen so the
    partitions' sampled bytes come out even (largest first, each to the least loaded partition).
    Hashing alone spread the 1 GB bench capture's 48 connections over 5 partitions as 371, 143, 155,
    105 and 267 MB: one core idled for a fifth of stage 2. Connections beyond ``limit`` (and any the
    sample missed) keep their hash partition, and their sampled bytes count there first."""
    ranked = sorted(sampled_bytes.items(), key=lambda item: (-item[1], item[0]))
    loads = [0] * partitions
    for key, count in ranked[limit:]:
        loads[zlib.crc32(key.encode()) % partitions] += count
    chosen = {}
    for key, count in ranked[:limit]:
        partition = min(range(partitions), key=lambda p: (loads[p], p))
        chosen[key] = partition
        loads[partition] += count
    return chosen


class ConnectionPartitioner:
    """The shuffle's partitioner: a connection's chosen partition, else a CRC32 of its key. The same
    for both directions of a connection and in every process (``hash()`` of a str is not, without a
    fixed PYTHONHASHSEED)."""

    def __init__(self, chosen: dict[str, int] | None = None):
        self.chosen = chosen or {}

    def __call__(self, key: tuple[str, int]) -> int:
        partition = self.chosen.get(key[0])
        return zlib.crc32(key[0].encode()) if partition is None else partition


def decode(spark, inputs, out_dir, *, broker_ports=None, records: bool = False, split_bytes: int = SPLIT_BYTES,
           partitions: int | None = None, overwrite: bool = True) -> DecodeResult:
    """Decode captures ``inputs`` (files, folders, globs, or a ``CapturePlan`` made beforehand) into
    Parquet tables under ``out_dir``, on ``spark``: a SparkSession or a SparkContext (the job uses
    only RDDs).

    ``overwrite`` (the default) first removes the tables (and summary) an earlier run left there, all of
    them (a run without ``records`` leaves no records table of an earlier run), and nothing else; without
    it, a table set already there is a ``tables.TableSetError``, as is an ``out_dir`` inside a table.
    """
    started = time.monotonic()
    out = str(out_dir).rstrip("/")
    location = _location(out)
    check_out(location, overwrite)
    captures = inputs if isinstance(inputs, CapturePlan) else plan_captures(inputs, split_bytes)
    files, splits, input_bytes = captures.files, captures.splits, captures.input_bytes
    fs, root = _file_system(location)
    tables = [name for name in TABLE_ORDER if records or name != "records"]
    if overwrite:
        # Only what this job writes: --out may well be a folder that holds other things (even the captures).
        for name in OURS:
            _remove(fs, f"{root}/{name}")

    context = getattr(spark, "sparkContext", spark)  # a SparkSession or a SparkContext
    cores = context.defaultParallelism
    if partitions is None:
        partitions = _tasks(input_bytes, TASK_BYTES, cores)
    ports = set(broker_ports) if broker_ports else None
    partitioner = ConnectionPartitioner(balanced_partitions(captures.sampled_bytes, partitions))
    sizes = context.accumulator({}, ConnectionBytes())  # for the summary (a retried task adds twice)
    reads = context.accumulator(({}, {}), ReadStats())
    readers = min(len(splits), _tasks(input_bytes, READ_TASK_BYTES, cores))
    written = (context.parallelize(range(len(splits)), readers)  # split numbers, consecutive per task
               .mapPartitions(read_splits(splits, sizes, reads))
               .repartitionAndSortWithinPartitions(partitions, partitioner)
               .mapPartitions(decode_partition(files, location, ports, records))
               .collect())

    result = DecodeResult(out, files, len(splits), input_bytes, len(sizes.value), sum(sizes.value.values()),
                          partitions, context.master)
    result.rows = {name: 0 for name in tables}
    for table, _, rows in written:
        result.rows[table] += rows
    counts, skipped = reads.value
    result.capture_records = counts.get("records", 0)
    result.skipped = {key: count for key, count in sorted(counts.items()) if key not in ("records", "packets")}
    if skipped:  # in a part file of a partition number no task has
        problems = capture_problems(skipped.values())
        _write_table(fs, f"{root}/problems", problems, part_file_name(partitions, 0))
        result.rows["problems"] += problems.num_rows
        written.append(("problems", None, problems.num_rows))
    with_files = {table for table, _, _ in written}
    for name in tables:
        if name not in with_files:
            _write_empty(fs, f"{root}/{name}", TABLES[name])
    result.seconds = time.monotonic() - started
    fs.create_dir(f"{root}/{SUMMARY}", recursive=True)
    with fs.open_output_stream(f"{root}/{SUMMARY}/summary.json") as stream:
        stream.write(result.to_json().encode())
    return result


def _tasks(input_bytes: int, task_bytes: int, cores: int) -> int:
    """About ``task_bytes`` of capture per task, in a multiple of the cores: with tasks of even size,
    5 tasks on 2 cores take as long as 6."""
    return cores * max(1, -(-input_bytes // (task_bytes * cores)))


def _write_empty(fs, folder: str, schema: pa.Schema) -> None:
    """A table without rows is still a folder with one readable Parquet file: its schema, no rows."""
    _write_table(fs, folder, schema.empty_table(), part_file_name(0, 0))


def _write_table(fs, folder: str, table: pa.Table, name: str) -> None:
    import pyarrow.parquet as pq

    fs.create_dir(folder, recursive=True)
    pq.write_table(table, f"{folder}/{name}", filesystem=fs)


def _remove(fs, path: str) -> None:
    from pyarrow.fs import FileType

    kind = fs.get_file_info(path).type
    if kind == FileType.Directory:
        fs.delete_dir(path)
    elif kind != FileType.NotFound:
        fs.delete_file(path)

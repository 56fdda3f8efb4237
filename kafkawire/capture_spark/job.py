"""The capture job: pcap/pcapng files in, one Parquet table per kind of row out.

Two stages, one shuffle, and no capture bytes through the JVM (for files that are not compressed). The job
is made of RDD operations on plain Python tuples: the JVM only schedules tasks and moves the shuffle's
bytes, where a DataFrame plan had converted a row per packet to and from Arrow and sorted it in the JVM
(docs/performance.md has what that cost), and PySpark's SQL workers import pandas.

1. **Packets** (``read_stage``). The driver cuts each file into splits at exact record offsets
   (``plan.plan_captures``, which also samples the packets' headers to estimate each connection's share
   of the payload); each task (a run of consecutive splits, about ``READ_TASK_BYTES``; the splits
   travel in the tasks' closure) opens each split's file by path and turns records into *chunk* rows
   (``read_splits``, ``chunks``): ``((connection, first order), chunk)``, a chunk packing up to 4096
   consecutive packets of one connection as binary headers (time, TCP header fields and where each
   payload is in its file), not the payloads themselves. A gzip-compressed file cannot be read at an
   offset, so its chunks carry their payloads.
2. **Connections** (``decode_stage``). Chunk rows are repartitioned by connection (both directions
   share a key; the sampled connections are spread so the partitions' bytes come out even) and sorted
   by (connection, first order) inside each partition (``repartitionAndSortWithinPartitions``:
   PySpark's external sort, which spills to disk past ``spark.python.worker.memory``), so one task
   sees each connection's packets in order. The task reads each payload back from its file
   (``PayloadReader``: one mmap per file; its pages released every 256 MB it may have mapped),
   rebuilds the ``Packet`` and streams the connection through reassembly, framing, correlation and
   decoding (``decode_connection``, then ``TableBatcher``), holding one connection's state at a time.

Stage 2 writes the tables itself (``part_files``), with pyarrow's Parquet writer, as part files under
``<out>/<table>/``, and returns only (table, file, rows) for each file it wrote; the driver collects
those to count the rows, and writes an empty file (the schema, no rows) for any table of
``TABLE_ORDER`` no task wrote, so that every table reads. A message's typed bodies
(``<out>/bodies/<message>/``) are a table only when some task wrote rows of it. Task retries and speculative attempts do not duplicate rows: a file's name
comes from the Spark partition id and a sequence number within the task
(``part-<partition>-<n>.parquet``); it is written under a hidden temporary name (readers skip names
starting with ``.``) and renamed into place, so an attempt that runs again rewrites the same names,
and identical input gives identical files.

A topic that a request or response names by id only (Produce and Fetch v13+) gets its name from the
responses that pair ids with names (Metadata...): in stage 2 from those its task has read so far, then
on the driver from every task's (``topic_join``: a part file with ids its task met before their names
is rewritten).

On a cluster, the captures and ``--out`` must be on a file system that every worker (and the driver)
sees by the same path: tasks open the captures by path in both stages and write the tables by path.
Both may also be URIs that pyarrow's file systems know (``file://``, ``hdfs://``, ``s3://``...): a
remote capture is read by byte ranges, never mapped nor downloaded whole (``capture.files.remote_reading``:
the planning walk and stage 1 read it ahead in large blocks; with a local master stage 1 carries the
payloads in the chunks, on a cluster stage 2 fetches those of the rows ahead as coalesced ranges,
``chunks.prefetched``).
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field

import pyarrow as pa

from ..capture.files.remote_files import display_name
from ..capture.files.splits import SPLIT_BYTES
from ..capture.tables.table_schemas import TABLES, capture_problems
from ..capture.tables.table_sets import OURS, SUMMARY, TABLE_ORDER, check_out, file_system
from .decode_stage import decode_partition
from .part_files import part_file_name
from .progress import Progress
from .plan import CapturePlan, ConnectionPartitioner, balanced_partitions, plan_captures
from .read_stage import ConnectionBytes, ReadStats, read_splits
from .topic_join import TopicIdNames, name_topics

__all__ = ["decode", "DecodeResult"]

TASK_BYTES = 256 << 20  # capture bytes per stage-2 task, about
# Capture bytes per stage-1 task, about: a task takes several splits, because a worker waits between
# the end of one task and the start of the next about as long as reading a split takes
# (docs/performance.md, "Capture decoding: design measurements").
READ_TASK_BYTES = 512 << 20


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
    # capture records that gave no packet, by reason (the capture reader's stats keys: not_tcp, corrupt,
    # truncated_tail...); a corrupt header or a torn tail is also a row of the problems table
    skipped: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=2)


def _location(out: str) -> str:
    """``out`` as the workers must see it: a URI as given, a local path made absolute here (a worker's
    working directory is not the driver's)."""
    return out if "://" in out else os.path.abspath(out)



def decode(spark, inputs, out_dir, *, broker_ports=None, records: bool = False, split_bytes: int = SPLIT_BYTES,
           partitions: int | None = None, overwrite: bool = True, progress=None, keys=None) -> DecodeResult:
    """Decode captures ``inputs`` (files, folders, globs, or a ``CapturePlan`` made beforehand) into
    Parquet tables under ``out_dir``, on ``spark``: a SparkSession or a SparkContext (the job uses
    only RDDs).

    ``overwrite`` (the default) first removes the tables (and summary) an earlier run left there, all of
    them (a run without ``records`` leaves no records table of an earlier run), and nothing else; without
    it, a table set already there is a ``tables.TableSetError``, as is an ``out_dir`` inside a table.

    ``progress``: a stream (stderr) for a live progress line while the job runs, when it is a terminal
    (``progress.Progress``).

    ``keys``: a TLS key log (``capture.tls.key_log.KeyLog``, or the path of one on the driver) to decrypt
    the TLS connections whose secrets it holds; it goes to the tasks in their closure.
    """
    started = time.monotonic()
    out = str(out_dir).rstrip("/")
    location = _location(out)
    check_out(location, overwrite)
    captures = inputs if isinstance(inputs, CapturePlan) else plan_captures(inputs, split_bytes)
    files, splits, input_bytes = captures.files, captures.splits, captures.input_bytes
    fs, root = file_system(location)
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
    if isinstance(keys, (str, os.PathLike)):
        from ..capture.tls.key_log import load_key_log
        keys = load_key_log(os.fspath(keys))
    partitioner = ConnectionPartitioner(balanced_partitions(captures.sampled_bytes, partitions))
    sizes = context.accumulator({}, ConnectionBytes())  # for the summary (a retried task adds twice)
    reads = context.accumulator(({}, {}), ReadStats())
    names = context.accumulator({}, TopicIdNames())
    readers = min(len(splits), _tasks(input_bytes, READ_TASK_BYTES, cores))
    local_master = context.master.startswith("local")  # the shuffle stays on this machine
    shown = Progress(progress, input_bytes).begin(context) if progress is not None else contextlib.nullcontext()
    with shown:
        written = (context.parallelize(range(len(splits)), readers)  # split numbers, consecutive per task
                   .mapPartitions(read_splits(splits, sizes, reads, carry_remote=local_master))
                   .repartitionAndSortWithinPartitions(partitions, partitioner)
                   .mapPartitions(decode_partition(files, location, ports, records, names=names, keys=keys))
                   .collect())
    name_topics(location, written, names.value)  # ids a task met before (or without) their names

    result = DecodeResult(out, [display_name(path) for path in files], len(splits), input_bytes, len(sizes.value), sum(sizes.value.values()),
                          partitions, context.master)
    result.rows = {name: 0 for name in tables}
    for table, _, rows in sorted(written, key=lambda item: item[0] not in result.rows):  # bodies/... after
        result.rows[table] = result.rows.get(table, 0) + rows
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

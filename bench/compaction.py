"""Compaction throughput (issue 23): MB of log cleaned per CPU-second by the broker's log cleaner, against
reading the same log in the same run.

A partition log is written once per row (keyed records in batches, as producers send them), copied
afresh for every repeat, and cleaned by ``LogCleaner.clean`` (the offset map, then every group
rewritten and swapped in). The same log is also read two ways, as the peers of the cleaner's work:
raw sequential reads of its segment files (what any pass over the log costs at least) and reading
every batch's records into columns (decompression and record parsing, which the cleaner must do
for each batch). Times are this process's CPU (all threads: the cleaner works on a worker thread),
median of ``--repeats``; MB is the log's size before cleaning.

    .venv/bin/python bench/compaction.py            # about a minute
    .venv/bin/python bench/compaction.py --quick    # smoke run, a few seconds
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import git_state

from kafkawire.broker.storage.config import LogConfig
from kafkawire.broker.storage.log import PartitionLog
from kafkawire.broker.storage.cleaner import LogCleaner
from kafkawire.broker.storage.cleaner.batches import read_batches
from kafkawire.records.batch import RecordBatch
from kafkawire.records.builder import RecordBatchBuilder
from kafkawire.records.compression import Codec

_CHUNK = 1 << 20


def write_log(directory: Path, records: int, value_size: int, distinct_keys: int, codec: Codec,
              per_batch: int, seed: int = 7) -> PartitionLog:
    """A compacted log of ``records`` keyed records (keys drawn from ``distinct_keys``), closed segments."""
    rng = random.Random(seed)
    config = LogConfig(cleanup_policy="compact", segment_bytes=16 << 20, validate_records=False)
    log = PartitionLog(directory, config)
    values = [rng.randbytes(value_size) for _ in range(1024)]
    written = 0
    now = int(time.time() * 1000)
    while written < records:
        builder = RecordBatchBuilder(compression=codec)
        for _ in range(min(per_batch, records - written)):
            builder.append(rng.choice(values), key=b"user-%08d" % rng.randrange(distinct_keys), timestamp=now)
            written += 1
        log.append_batch(log.validate(builder.build(), now), now_ms=now)
    log.roll()
    return log


def log_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def raw_read(directory: Path) -> int:
    """Read every segment file sequentially, 1 MiB at a time."""
    total = 0
    for path in log_files(directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            position = 0
            while chunk := os.pread(fd, _CHUNK, position):
                position += len(chunk)
        finally:
            os.close(fd)
        total += position
    return total


def decode_all(directory: Path) -> int:
    """Read every batch's records into columns (decompressing them), as the cleaner reads them."""
    records = 0
    for path in log_files(directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            for _, _, view in read_batches(fd, 0, os.fstat(fd).st_size, _CHUNK):
                columns = RecordBatch(view).columns()
                columns.keys()  # the keys as objects, as the offset map takes them
                records += len(columns)
        finally:
            os.close(fd)
    return records


def cpu_time(fn) -> tuple[float, float, object]:
    """(CPU seconds of the whole process, wall seconds, result)."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = fn()
    return time.process_time() - cpu, time.perf_counter() - wall, result


def bench_row(tmp: Path, label: str, records: int, value_size: int, distinct: int, codec: Codec,
              per_batch: int, repeats: int) -> str:
    name = f"row{abs(hash(label))}"
    source = tmp / f"{name}-0"
    log = write_log(source, records, value_size, distinct, codec, per_batch)
    size = log.size_in_bytes
    log.close()
    mb = size / 1e6
    raws, decodes, cleans, walls = [], [], [], []
    kept = after = 0
    for repeat in range(repeats):
        raws.append(cpu_time(lambda: raw_read(source))[0])
        decodes.append(cpu_time(lambda: decode_all(source))[0])
        target = tmp / f"{name}-copy{repeat}-0"
        shutil.copytree(source, target)
        log = PartitionLog(target, LogConfig(cleanup_policy="compact", segment_bytes=16 << 20))
        raw_read(target)  # the copy in the page cache, as the source is
        cleaner = LogCleaner()
        cpu, wall, stats = cpu_time(lambda: asyncio.run(cleaner.clean(log)))
        assert stats.swapped and stats.end_offset == log.log_end_offset and stats.bytes_read == size
        cleans.append(cpu)
        walls.append(wall)
        kept, after = stats.records_kept, log.size_in_bytes
        log.close()
        shutil.rmtree(target)
    raw, decode, clean = (mb / statistics.median(v) for v in (raws, decodes, cleans))
    return (f"| {label} | {mb:,.1f} MB, {records:,} records, {kept:,} kept ({after / 1e6:,.1f} MB) "
            f"| {clean:,.1f} | {mb / statistics.median(walls):,.1f} | {raw:,.0f} | {clean / raw:.4f} "
            f"| {decode:,.1f} | {clean / decode:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small logs, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--records", type=int, default=400_000, help="records of 100 B (1 KiB rows: a quarter)")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    small = 20_000 if args.quick else args.records
    rows = [
        ("100 B, 1% distinct keys, none", small, 100, small // 100, Codec.NONE),
        ("100 B, all keys distinct, none", small, 100, small * 100, Codec.NONE),
        ("100 B, 1% distinct keys, lz4", small, 100, small // 100, Codec.LZ4),
        ("1 KiB, 1% distinct keys, none", small // 4, 1024, small // 400, Codec.NONE),
        ("1 KiB, 1% distinct keys, zstd", small // 4, 1024, small // 400, Codec.ZSTD),
    ]
    print(f"commit {git_state()}, {time.strftime('%Y-%m-%d')}, load average {os.getloadavg()[0]:.1f}, "
          f"{repeats} repeat(s), median; batches of 100 records, 13 B keys, random values")
    print("| log | size | clean MB/s per CPU-s | clean MB/s wall | raw read MB/s | clean ÷ raw | "
          "decode MB/s | clean ÷ decode |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, records, value_size, distinct, codec in rows:
            print(bench_row(Path(tmp), label, records, value_size, distinct, codec, 100, repeats), flush=True)


if __name__ == "__main__":
    main()

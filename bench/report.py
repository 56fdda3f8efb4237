"""`kafkawire report` on its two engines (issue 16): pyarrow in the command's process against Spark.

Made-up table sets of several sizes (rows of frames, fetches, produces and problems together; half
frames, a quarter fetches: the proportions of a decode without --records) are written with pyarrow,
then `kafkawire report --engine arrow` and `--engine spark` run on each, one after the other. Printed:
wall time and peak RSS of the report process (for Spark, its Python driver only: the JVM is not counted), the
ratio of the two walls, and whether the two texts are identical (they must be). Target: the Arrow engine
at least as fast as Spark at `report.ARROW_MAX_ROWS` rows, the limit up to which `--engine auto` takes it.

    .venv/bin/python bench/report.py                       # 1e3, 1e6 and ARROW_MAX_ROWS rows
    .venv/bin/python bench/report.py --rows 100000 --keep /tmp/report-bench
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import git_state  # noqa: E402
from kafkawire.capture.reporting.report import ARROW_MAX_ROWS  # noqa: E402
from kafkawire.capture.tables.table_schemas import TABLES  # noqa: E402


def write_tables(out: Path, rows: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)

    def write(name: str, columns: dict, count: int) -> None:
        arrays = [pa.array(columns[f.name], type=f.type) if f.name in columns else pa.nulls(count, f.type)
                  for f in TABLES[name]]
        (out / name).mkdir(parents=True)
        pq.write_table(pa.Table.from_arrays(arrays, schema=TABLES[name]), out / name / "part-00000-000.parquet")

    n, m = rows // 2, rows // 4
    request = rng.random(n) < 0.5
    write("frames", dict(
        ts=pa.array(rng.integers(0, 3_600_000_000, n)).cast(pa.timestamp("us", tz="UTC")),  # an hour
        direction=np.where(request, "request", "response"),
        api_name=np.array(["Fetch", "Produce", "Metadata", "ApiVersions", "Heartbeat"])[rng.integers(0, 5, n)],
        api_version=rng.integers(0, 13, n).astype(np.int16), size=rng.integers(10, 5000, n).astype(np.int32),
        latency_ms=pa.array(rng.random(n) * 100, mask=request),
        client=np.array([f"10.0.0.{i}:5{i:04d}" for i in range(50)])[rng.integers(0, 50, n)],
        client_id=np.array(["producer", "consumer"])[rng.integers(0, 2, n)]), n)
    write("fetches", dict(
        ts=pa.array(rng.integers(0, 10**12, m)).cast(pa.timestamp("us", tz="UTC")),
        connection=np.array([f"c{i}" for i in range(50)])[rng.integers(0, 50, m)],
        correlation_id=rng.integers(0, m // 4 + 1, m).astype(np.int32),
        topic=np.array(["t", "u"])[rng.integers(0, 2, m)], partition=rng.integers(0, 10, m).astype(np.int32),
        request_index=rng.integers(0, 4, m).astype(np.int32), max_bytes=np.full(m, 1 << 20, np.int32),
        partition_max_bytes=np.full(m, 1 << 20, np.int32), fetch_offset=rng.integers(0, 100, m),
        high_watermark=rng.integers(0, 100, m), records_bytes=rng.choice([0, 0, 1000], m),
        first_batch_bytes=np.full(m, 1000), response_size=np.full(m, 5000, np.int32)), m)
    write("produces", {}, rows - n - m - m)
    write("problems", dict(kind=np.array(["gap", "resync"])[rng.integers(0, 2, m)],
                           reason=np.array(["a", "b", "c"])[rng.integers(0, 3, m)]), m)
    write("connections", {}, 0)  # a table every decode writes (the report's authentication and TLS sections)


# The command, reporting its peak RSS on exit. VmHWM is the process's own high-water mark since its exec;
# ru_maxrss would start from this script's (Linux carries a parent's RSS over a fork and exec).
COMMAND = """import atexit, sys
from kafkawire.cli import main
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print("peak-rss-kb", line.split()[1], file=sys.stderr)
atexit.register(peak)
sys.exit(main(sys.argv[1:]))
"""


def run(tables: Path, engine: str) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of `kafkawire report --engine ENGINE`."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", COMMAND, "report", str(tables), "--engine", engine],
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"report --engine {engine} on {tables} exited with {done.returncode}: {done.stderr[-2000:]}")
    peak = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("peak-rss-kb")]
    return wall, int(peak[-1]) / 1024, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, action="append", help="table set sizes (repeatable)")
    parser.add_argument("--keep", help="write the table sets here and keep them")
    args = parser.parse_args()
    sizes = args.rows or [1_000, 1_000_000, ARROW_MAX_ROWS]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="report-bench-"))
    print(f"# kafkawire report, Arrow engine against Spark ({git_state()}, load {os.getloadavg()[0]:.1f})\n")
    print(f"{'rows':>12} {'arrow s':>9} {'MB':>6} {'spark s':>9} {'MB':>6} {'spark/arrow':>12}  same text")
    failed = False
    for rows in sizes:
        tables = work / f"rows-{rows}"
        if not tables.exists():
            write_tables(tables, rows)
        arrow_wall, arrow_mb, arrow_text = run(tables, "arrow")
        spark_wall, spark_mb, spark_text = run(tables, "spark")
        same = arrow_text == spark_text
        failed |= not same or (rows == ARROW_MAX_ROWS and arrow_wall > spark_wall)
        print(f"{rows:>12,} {arrow_wall:>9.2f} {arrow_mb:>6.0f} {spark_wall:>9.2f} {spark_mb:>6.0f} "
              f"{spark_wall / arrow_wall:>11.1f}x  {'yes' if same else 'NO'}")
    at_limit = "and Arrow at least as fast as Spark at" if ARROW_MAX_ROWS in sizes else "(not measured at"
    print(f"\n{'FAIL' if failed else 'PASS'}: identical texts, {at_limit} ARROW_MAX_ROWS ({ARROW_MAX_ROWS:,} rows)"
          + ("" if ARROW_MAX_ROWS in sizes else ")"))
    if not args.keep:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

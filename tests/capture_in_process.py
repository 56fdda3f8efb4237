"""A capture decoded into a table set without Spark: the capture job's stage 1 and shuffle in this
process, then stage 2's body as one task (the same code the Spark workers run)."""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from kafkawire.capture.splits import plan_splits
from kafkawire.capture.table_schemas import TABLES
from kafkawire.capture.table_sets import TABLE_ORDER
from kafkawire.capture_spark.decode_stage import decode_partition
from kafkawire.capture_spark.read_stage import read_splits


def decode_in_process(capture: Path, out: Path, records: bool = True) -> Path:
    splits = plan_splits(str(capture), 0)
    rows = sorted(read_splits(splits)(iter(range(len(splits)))), key=lambda row: row[0])
    decode = decode_partition([str(capture)], str(out), None, records, task=(0, 0))
    written = {table for table, _, _ in decode(iter(rows))}
    for table in [name for name in TABLE_ORDER if name not in written and (records or name != "records")]:
        (out / table).mkdir(parents=True)  # as the job does: every table reads, rows or not
        pq.write_table(TABLES[table].empty_table(), out / table / "part-00000-000.parquet")
    return out

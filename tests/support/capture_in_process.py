"""A capture decoded into a table set without Spark: the capture job's stage 1 and shuffle in this
process, then stage 2's body as one task (the same code the Spark workers run), and the driver's
naming of topics given by id (``topic_join``)."""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from kafkawire.capture.files.splits import plan_splits
from kafkawire.capture.tables.table_schemas import TABLES
from kafkawire.capture.tables.table_sets import TABLE_ORDER
from kafkawire.capture_spark.decode_stage import decode_partition
from kafkawire.capture_spark.read_stage import read_splits
from kafkawire.capture_spark.topic_join import TopicIdNames, name_topics


class _Names:
    """What the job's accumulator of topic names does, in this process."""

    def __init__(self):
        self.param = TopicIdNames()
        self.value = self.param.zero({})

    def add(self, more: dict) -> None:
        self.value = self.param.addInPlace(self.value, more)


def decode_in_process(capture: Path, out: Path, records: bool = True, keys=None) -> Path:
    splits = plan_splits(str(capture), 0)
    rows = sorted(read_splits(splits)(iter(range(len(splits)))), key=lambda row: row[0])
    names = _Names()
    decode = decode_partition([str(capture)], str(out), None, records, task=(0, 0), names=names,
                              keys=keys)
    files = list(decode(iter(rows)))
    name_topics(str(out), files, names.value)
    written = {table for table, _, _ in files}
    for table in [name for name in TABLE_ORDER if name not in written and (records or name != "records")]:
        (out / table).mkdir(parents=True)  # as the job does: every table reads, rows or not
        pq.write_table(TABLES[table].empty_table(), out / table / "part-00000-000.parquet")
    return out

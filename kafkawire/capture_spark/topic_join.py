"""The capture job's last step: topic names for the rows that name their topic by id only.

Produce v13+ and Fetch v13+ name topics by id; a stage-2 task names them from the responses it has read
so far that pair ids with names (``capture.tables.topic_names``). But a task reads its connections one after the
other, sorted by key, not by time, and another task may hold the connection whose Metadata answer
resolves the id: so each task adds the names it learnt to an accumulator (``TopicIdNames``), and once
all are written the driver rewrites the part files of ``NAMED_BY_ID`` whose
rows have a topic id and no name that some task learnt. Only those files are read and written again
(a footer says whether a file has rows without a name), a row group at a time; an id that no response
in the capture named keeps a null topic.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..capture.tables.table_schemas import schema_of
from ..capture.tables.table_sets import file_system
from .part_files import writer_options

__all__ = ["TopicIdNames", "NAMED_BY_ID", "name_topics"]

NAMED_BY_ID = ("fetches", "produces", "records", "share_acquisitions", "share_acknowledgements")  # topic and topic_id


class TopicIdNames:
    """Spark accumulator parameter: topic names by topic id (as text), over stage 2's tasks."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, total: dict, more: dict) -> dict:
        total.update(more)
        return total


def name_topics(location: str, files, names: dict[str, str]) -> int:
    """Fills the topic of the rows of ``files`` ((table, file relative to ``location``, rows), as the
    tasks report them) that have none and a topic id in ``names``; returns how many rows it named."""
    if not names:
        return 0
    fs, root = file_system(location)
    ids, values = pa.array(list(names), pa.string()), pa.array(list(names.values()), pa.string())
    named = 0
    for table, file, _ in files:
        if table in NAMED_BY_ID and file is not None and _has_unnamed(fs, f"{root}/{file}"):
            named += _rewrite(fs, root, table, file, ids, values)
    return named


def _has_unnamed(fs, path: str) -> bool:
    """Whether the file's footer says some row has no topic (no statistics: it may)."""
    metadata = pq.read_metadata(path, filesystem=fs)
    column = metadata.schema.names.index("topic")
    for group in range(metadata.num_row_groups):
        statistics = metadata.row_group(group).column(column).statistics
        if statistics is None or not statistics.has_null_count or statistics.null_count:
            return True
    return False


def _named(group: pa.Table, ids: pa.Array, values: pa.Array) -> tuple[pa.Table, int]:
    topic = group.column("topic")
    found = pc.take(values, pc.index_in(group.column("topic_id"), value_set=ids))
    filled = pc.coalesce(topic, found)
    return group.set_column(group.schema.get_field_index("topic"), "topic", filled), \
        topic.null_count - filled.null_count


def _rewrite(fs, root: str, table: str, file: str, ids: pa.Array, values: pa.Array) -> int:
    """Rewrites one part file with the names filled in (under a hidden name, then renamed over it), or
    leaves it alone when none of its unnamed ids is known."""
    path = f"{root}/{file}"
    folder, _, name = path.rpartition("/")
    with fs.open_input_file(path) as source:
        reader = pq.ParquetFile(source)
        groups = reader.num_row_groups
        if not any(_named(reader.read_row_group(g, columns=["topic", "topic_id"]), ids, values)[1]
                   for g in range(groups)):
            return 0
        temporary = f"{folder}/.{name}.topics.tmp"
        named = 0
        schema = schema_of(table)
        with fs.open_output_stream(temporary) as stream, \
                pq.ParquetWriter(stream, schema, store_schema=False, **writer_options(table)) as writer:
            for g in range(groups):
                group, count = _named(reader.read_row_group(g).cast(schema), ids, values)
                writer.write_table(group, row_group_size=group.num_rows)
                named += count
    fs.move(temporary, path)
    return named

"""The Parquet part files a stage-2 task writes: ``<out>/<table>/part-<partition>-<n>.parquet`` (a
message's typed bodies: ``<out>/bodies/<message>/part-...``).

Written with pyarrow's Parquet writer, under a hidden temporary name and renamed into place, so that a
retried or speculative attempt rewrites the same names instead of adding rows. Local files go past the
page cache (``direct_file``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
from pyarrow.fs import LocalFileSystem

from ..capture.tables.table_schemas import BODIES, schema_of
from ..capture.tables.table_sets import file_system
from .direct_file import DirectFile

if TYPE_CHECKING:
    import pyarrow.parquet as pq

__all__ = ["TableFiles", "writer_options", "parquet_leaves", "part_file_name"]

MAX_FILE_BYTES = 512 << 20  # Arrow bytes written to one part file before the next one starts
# Arrow bytes held per table and written as one row group (a row group of a wide table, such as a
# message's typed bodies, costs enough that small ones would cost more than the data: docs/performance.md;
# Spark's writer made 128 MB row groups too).
ROW_GROUP_BYTES = 128 << 20
# Arrow bytes held over all of a task's tables (one per message type it saw, besides the six): past it the
# table holding the most writes its row group early, so that memory does not grow with the tables.
HELD_BYTES = 256 << 20
OUTPUT_BUFFER_BYTES = 4 << 20  # in front of a part file on a URI's file system (local ones: DirectFile)


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
                 row_group_bytes: int = ROW_GROUP_BYTES, held_bytes: int = HELD_BYTES):
        self.fs, self.root = file_system(out)
        self.partition, self.attempt = partition, attempt
        self.max_file_bytes = max_file_bytes
        self.row_group_bytes = row_group_bytes
        self.held_bytes = held_bytes
        self._held = 0  # over all open files
        self.files: list[tuple[str, str, int]] = []
        self._open: dict[str, _PartFile] = {}
        self._next: dict[str, int] = {}

    def write(self, table: str, batch: pa.RecordBatch) -> None:
        part = self._open.get(table)
        if part is None:
            part = self._open[table] = self._start(table)
        part.held.append(batch)
        part.held_bytes += batch.nbytes
        self._held += batch.nbytes
        if part.held_bytes >= self.row_group_bytes:
            self._write_row_group(table, part)
        while self._held > self.held_bytes:
            largest = max(self._open, key=lambda name: self._open[name].held_bytes)
            self._write_row_group(largest, self._open[largest])

    def _write_row_group(self, table: str, part: "_PartFile") -> None:
        self._held -= part.held_bytes
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
            # buffer in front of the file makes them a few large writes.
            stream = self.fs.open_output_stream(temporary, buffer_size=OUTPUT_BUFFER_BYTES)
        # store_schema=False: no copy of the Arrow schema in each footer (a third of a small file's
        # bytes); Parquet's own types read back as the same Arrow schema (tests/capture_spark).
        writer = pq.ParquetWriter(stream, schema_of(table), store_schema=False, **writer_options(table))
        return _PartFile(f"{table}/{name}", temporary, writer, stream)

    def _complete(self, table: str) -> None:
        part = self._open.pop(table)
        self._held -= part.held_bytes
        part.write_row_group()
        part.close()
        self.fs.move(part.temporary, f"{self.root}/{part.name}")
        self.files.append((table, part.name, part.rows))

    def close(self) -> None:
        for table in list(self._open):
            self._complete(table)

    def abort(self) -> None:
        parts, self._open = self._open, {}
        self._held = 0
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
    writer: pq.ParquetWriter
    stream: DirectFile | pa.NativeFile  # the buffered file stream it writes to
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
    """ParquetWriter options for ``table``. The binary columns of the typed bodies hold raw record
    batches (and unknown tagged fields): values that never repeat and that nobody filters on by range, so
    a dictionary and min/max statistics cost their hashing and comparing for nothing (a large share of
    the typed bodies' write time: docs/performance.md). Elsewhere the defaults stay: keys and header
    values do repeat."""
    if not table.startswith(f"{BODIES}/"):
        return {}
    others = [path for path, kind in parquet_leaves(schema_of(table)) if not pa.types.is_binary(kind)]
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


"""A table's rows held as Python column lists until they are cut into Arrow RecordBatches."""
from __future__ import annotations

import pyarrow as pa

__all__ = ["ColumnTable"]


class ColumnTable:
    """One table's rows, as column lists (rows added one at a time wait as tuples and are transposed
    in bulk); a RecordBatch is cut as soon as ``max_rows`` rows or about ``max_bytes`` of values are
    held, and waits in ``ready``."""

    def __init__(self, name: str, schema: pa.Schema, max_rows: int, max_bytes: int):
        self.name = name
        self.schema = schema
        self.width = len(schema)
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.columns: list[list] = [[] for _ in range(self.width)]
        self.waiting: list[tuple] = []
        self.rows = 0
        self.bytes = 0
        self.ready: list[pa.RecordBatch] = []

    def append(self, row: tuple, size: int = 0) -> None:
        if len(row) != self.width:
            raise ValueError(f"{self.name}: a row of {len(row)} values for {self.width} columns")
        self.waiting.append(row)
        self.rows += 1
        self.bytes += size
        if self.rows >= self.max_rows or self.bytes >= self.max_bytes:
            self.cut()

    def extend(self, count: int, size: int, columns: list[list]) -> None:
        if len(columns) != self.width:
            raise ValueError(f"{self.name}: {len(columns)} columns for {self.width}")
        self._transpose()
        for column, values in zip(self.columns, columns):
            column.extend(values)
        self.rows += count
        self.bytes += size
        if self.rows >= self.max_rows or self.bytes >= self.max_bytes:
            self.cut()

    def _transpose(self) -> None:
        if self.waiting:
            for column, values in zip(self.columns, zip(*self.waiting)):
                column.extend(values)
            self.waiting = []

    def cut(self) -> None:
        """Move the rows held into ready batches of at most ``max_rows`` rows."""
        if not self.rows:
            return
        self._transpose()
        arrays = [pa.array(values, type=field.type) for values, field in zip(self.columns, self.schema)]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self.columns = [[] for _ in range(self.width)]
        self.rows = self.bytes = 0
        for start in range(0, batch.num_rows, self.max_rows):
            self.ready.append(batch.slice(start, self.max_rows))

    def take_ready(self) -> list[pa.RecordBatch]:
        ready, self.ready = self.ready, []
        return ready

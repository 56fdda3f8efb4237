"""The records table (``decode --records``): one row per record of Produce requests, Fetch responses and
ShareFetch responses.

A capture of a busy cluster holds millions of records, so this table is built column by column
rather than row by row:

- a v2 batch is read by ``RecordBatch.columns()`` (positions and lengths, no object per record);
  ``SpanBuilder`` (C) copies its keys, values and header fields into the buffers of the Arrow
  arrays, and its offsets and timestamps are appended to ``array`` buffers;
- the values every record of a batch shares (topic, partition, producer id, codec...) are kept
  once per batch and repeated into columns when a RecordBatch is cut.

Legacy message sets (v0/v1), control batches (transaction markers: ``control_type`` is read from each
record's key), batches whose header keys are not UTF-8 (read with replacement characters, as
``RecordColumns.headers`` reads them) and every batch when the C builder is not built take the
per-record path: Python lists in a ``ColumnTable``. Rows keep their order: each
path's rows are cut before the other path takes over.
"""
from __future__ import annotations

from array import array

import numpy as np
import pyarrow as pa

from kafkawire.accelerators import load
from kafkawire.records import ControlType, LegacyBatch
from kafkawire.records.batch import CODEC_MASK, NO_SEQUENCE, increment_sequence, wrap_int64
from kafkawire.records.legacy import LEGACY_CODEC_MASK
from kafkawire.records.record import TimestampType

from .column_table import ColumnTable
from .frame_decoding import CODEC_NAMES

__all__ = ["RecordsTable", "RecordRows", "CODEC_NAMES"]

_spans = load("kafkawire.records._spans")

_TIMESTAMP_TYPES = {t: t.name for t in TimestampType}
_INT32_MAX = 0x7FFFFFFF
_INT32_MIN = -0x80000000
# Timestamps are milliseconds on the wire and microseconds in the table; beyond these a record's
# timestamp has no int64 microsecond value, and the column holds a null.
_MAX_MS = (2**63 - 1) // 1000
_MIN_MS = -(2**63) // 1000 + 1
_BATCH_ROW_OVERHEAD = 64  # bytes counted per row toward max_bytes, besides keys and values


def _timestamp_us(ms: int) -> int | None:
    return ms * 1000 if ms != -1 and _MIN_MS <= ms <= _MAX_MS else None


class RecordRows:
    """One partition's records (of one Produce request or Fetch response) into the records table."""

    def __init__(self, table: "RecordsTable", source: str, connection: str, correlation_id: int, ts: int | None,
                 topic: str | None, topic_id: str | None, partition: int, first_offset: int | None):
        self.table = table
        self.constants = (source, connection, correlation_id, ts, topic, topic_id, partition)
        self.fetched = source != "produce"  # fetched records carry their offsets; produced ones get them
        self.next_offset = first_offset  # produce: assigned offsets run on from the response's base

    def add(self, batch) -> None:
        """Raise DecodeError (RecordsError) when the batch's records do not read."""
        if isinstance(batch, LegacyBatch):
            records = batch.records()
            self.table.add_legacy(self.constants, self._assigned(len(records)), batch, records)
            return
        columns = batch.columns()
        start = self.next_offset
        if not self.fetched and start is not None:
            self.next_offset = start + len(columns)
        self.table.add_columns(self.constants, self.fetched, start, batch, columns)

    def _assigned(self, count: int) -> list | None:
        """Produced records' offsets (None for fetched records, which carry theirs)."""
        if self.fetched:
            return None
        if self.next_offset is None:
            return [None] * count
        start = self.next_offset
        self.next_offset += count
        return list(range(start, start + count))


class RecordsTable:
    """The records table's rows, cut into RecordBatches of at most ``max_rows`` rows, or about
    ``max_bytes`` of keys and values, which wait in ``ready`` (the interface of ColumnTable)."""

    def __init__(self, schema: pa.Schema, max_rows: int, max_bytes: int, native: bool = True):
        self.schema = schema
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.native = native and _spans is not None
        self.ready: list[pa.RecordBatch] = []
        self._lists = ColumnTable("records", schema, max_rows, max_bytes)
        self._columns = _Columns(schema) if self.native else None

    # ---- input --------------------------------------------------------------------------------
    def add_columns(self, constants: tuple, fetched: bool, first_offset: int | None, batch, columns) -> None:
        """A v2 batch's records (``columns`` is ``batch.columns()``). Produced records (``fetched``
        false) get the offsets from ``first_offset`` on (nulls when it is None)."""
        columns_table = self._columns  # None unless native
        if columns_table is not None and not batch.is_control:  # control batches (few) name their type per record
            if self._lists.rows:
                self._cut_lists()
            if columns_table.add(constants, fetched, first_offset, batch, columns):
                if columns_table.rows >= self.max_rows or columns_table.bytes >= self.max_bytes:
                    self._cut_columns()
                return
        self._add_column_lists(constants, fetched, first_offset, batch, columns)

    def add_legacy(self, constants: tuple, assigned: list | None, batch: LegacyBatch, records: list) -> None:
        """A legacy message set's records (``assigned``: produced records' offsets, None when fetched)."""
        count = len(records)
        codec = CODEC_NAMES[batch.attributes & LEGACY_CODEC_MASK]
        size = sum(len(r.value or b"") + len(r.key or b"") for r in records)
        none = [None] * count
        self._add_lists(count, size + _BATCH_ROW_OVERHEAD * count, [[value] * count for value in constants] + [
            [r.offset for r in records] if assigned is None else assigned,
            [_timestamp_us(r.timestamp) for r in records],
            [_TIMESTAMP_TYPES[r.timestamp_type] for r in records], [r.key for r in records],
            [r.value for r in records], [()] * count, none, none, none, [False] * count, [False] * count,
            [codec] * count, none])

    # ---- output -------------------------------------------------------------------------------
    def cut(self) -> None:
        """Move every row held into ready batches."""
        self._cut_lists()
        self._cut_columns()

    def take_ready(self) -> list[pa.RecordBatch]:
        ready, self.ready = self.ready, []
        return ready

    # ---- the per-record path -------------------------------------------------------------------
    def _add_column_lists(self, constants: tuple, fetched: bool, first_offset: int | None, batch, columns) -> None:
        count = len(columns)
        offsets: list[int | None]
        if fetched:
            offsets = list(columns.offsets)
        elif first_offset is None:
            offsets = [None] * count
        else:
            offsets = list(range(first_offset, first_offset + count))
        if batch.base_sequence == NO_SEQUENCE:
            sequences: list[int | None] = [None] * count
        else:
            sequences = _sequences(batch.base_sequence, batch.base_offset, columns.offsets)
        # lengths are -1 for null: sum + count(-1) adds the nulls back, in C loops over the arrays
        size = (sum(columns.value_lengths) + columns.value_lengths.count(-1)
                + sum(columns.key_lengths) + columns.key_lengths.count(-1))
        keys = columns.keys()
        control_types = [_control_type(key) for key in keys] if batch.is_control else [None] * count
        self._add_lists(count, size + _BATCH_ROW_OVERHEAD * count, [[value] * count for value in constants] + [
            offsets, [_timestamp_us(t) for t in columns.timestamps],
            [_TIMESTAMP_TYPES[columns.timestamp_type]] * count, keys, columns.values(),
            columns.all_headers(), [batch.producer_id] * count, [batch.producer_epoch] * count, sequences,
            [batch.is_transactional] * count, [batch.is_control] * count,
            [CODEC_NAMES[batch.attributes & CODEC_MASK]] * count, control_types])

    def _add_lists(self, count: int, size: int, columns: list[list]) -> None:
        if self._columns is not None and self._columns.rows:
            self._cut_columns()
        self._lists.extend(count, size, columns)
        self.ready.extend(self._lists.take_ready())

    def _cut_lists(self) -> None:
        self._lists.cut()
        self.ready.extend(self._lists.take_ready())

    def _cut_columns(self) -> None:
        if self._columns is None or not self._columns.rows:
            return
        batch = self._columns.cut()
        for start in range(0, batch.num_rows, self.max_rows):
            self.ready.append(batch.slice(start, self.max_rows))


def _control_type(key: bytes | None) -> str | None:
    """A control record's type from its key (``version:int16, type:int16``): COMMIT and ABORT for
    transaction markers, the KRaft types' names, UNKNOWN for ids this version does not know; null
    for a key too short to hold one."""
    if key is None or len(key) < 4:
        return None
    type_id = int.from_bytes(key[2:4], "big", signed=True)
    try:
        return ControlType(type_id).name
    except ValueError:
        return ControlType.UNKNOWN.name


def _sequences(base_sequence: int, base_offset: int, offsets) -> list[int | None]:
    """Each record's producer sequence: the base plus its offset delta, wrapping past the int32 maximum
    (``increment_sequence``); null where a malformed delta leaves no int32 value."""
    if offsets and base_sequence + (max(offsets) - base_offset) <= _INT32_MAX and min(offsets) >= base_offset:
        shift = base_sequence - base_offset
        return [offset + shift for offset in offsets]
    sequences = [increment_sequence(base_sequence, wrap_int64(offset - base_offset)) for offset in offsets]
    return [s if _INT32_MIN <= s <= _INT32_MAX else None for s in sequences]


# ---- the columnar path ------------------------------------------------------------------------------

# The columns a batch's records share: RecordRows' constants, then the batch's own.
_SHARED = ("source", "connection", "correlation_id", "ts", "topic", "topic_id", "partition",
           "timestamp_type", "producer_id", "producer_epoch", "is_transactional", "is_control", "compression")


class _Columns:
    """v2 batches' records held as Arrow-ready buffers (keys, values, header fields, offsets,
    timestamps) plus one entry per batch for what its records share; ``cut()`` makes the RecordBatch."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.keys = _spans.SpanBuilder()
        self.values = _spans.SpanBuilder()
        self.header_keys = _spans.SpanBuilder(utf8=True)
        self.header_values = _spans.SpanBuilder()
        self._clear()

    def _clear(self) -> None:
        self.rows = self.bytes = 0
        self.offsets = array("q")      # the records' own offsets (base + delta)
        self.timestamps = array("q")   # milliseconds, -1 for none
        self.header_ends: list[np.ndarray] = []  # per batch: each record's end in the header columns
        self.header_count = 0
        self.counts: list[int] = []
        self.shared: list[tuple] = []  # per batch: the _SHARED values
        self.assigned: list[int | None] = []  # produced: first assigned offset (None: offsets null); fetched: -1
        self.fetched: list[bool] = []
        self.base_offsets: list[int] = []
        self.base_sequences: list[int] = []

    def add(self, constants: tuple, fetched: bool, first_offset: int | None, batch, columns) -> bool:
        """False, with nothing added, when a header key is not UTF-8 (the per-record path reads it)."""
        if not self.header_keys.append(columns.data, columns.header_key_starts, columns.header_key_lengths):
            return False
        data = columns.data
        self.header_values.append(data, columns.header_value_starts, columns.header_value_lengths)
        key_bytes, value_bytes = self.keys.nbytes, self.values.nbytes
        self.keys.append(data, columns.key_starts, columns.key_lengths)
        self.values.append(data, columns.value_starts, columns.value_lengths)
        count = len(columns)
        headers_at = columns.headers_at
        if headers_at[count]:
            self.header_ends.append(np.frombuffer(headers_at, np.int32, count, 4) + self.header_count)
            self.header_count += headers_at[count]
        else:
            self.header_ends.append(np.full(count, self.header_count, np.int32))
        self.offsets.extend(columns.offsets)
        self.timestamps.extend(columns.timestamps)
        self.counts.append(count)
        self.shared.append(constants + (
            _TIMESTAMP_TYPES[columns.timestamp_type], batch.producer_id, batch.producer_epoch,
            batch.is_transactional, batch.is_control, CODEC_NAMES[batch.attributes & CODEC_MASK]))
        self.fetched.append(fetched)
        self.assigned.append(first_offset)
        self.base_offsets.append(batch.base_offset)
        self.base_sequences.append(batch.base_sequence)
        self.rows += count
        self.bytes += (self.keys.nbytes - key_bytes) + (self.values.nbytes - value_bytes) + _BATCH_ROW_OVERHEAD * count
        return True

    def cut(self) -> pa.RecordBatch:
        counts = np.array(self.counts, np.int64)
        rows = int(counts.sum())
        batch_of_row = np.repeat(np.arange(len(counts)), counts)
        take = pa.array(batch_of_row)
        arrays = {name: pa.array(values, self.schema.field(name).type).take(take)
                  for name, values in zip(_SHARED, zip(*self.shared))}
        raw_offsets = np.frombuffer(self.offsets, np.int64) if rows else np.zeros(0, np.int64)
        arrays["offset"] = self._offsets(raw_offsets, counts, batch_of_row)
        arrays["sequence"] = self._sequences(raw_offsets, batch_of_row)
        arrays["control_type"] = pa.nulls(rows, pa.string())  # control batches take the per-record path
        arrays["timestamp"] = _timestamps(np.frombuffer(self.timestamps, np.int64) if rows else np.zeros(0, np.int64),
                                          self.schema.field("timestamp").type)
        arrays["key"] = _binary(self.keys.finish(), pa.binary())
        arrays["value"] = _binary(self.values.finish(), pa.binary())
        headers_type = self.schema.field("headers").type
        entries = pa.StructArray.from_arrays(
            [_binary(self.header_keys.finish(), pa.string()), _binary(self.header_values.finish(), pa.binary())],
            fields=list(headers_type.value_type))
        ends = np.concatenate(self.header_ends) if self.header_ends else np.zeros(0, np.int32)
        list_offsets = pa.array(np.concatenate((np.zeros(1, np.int32), ends)), pa.int32())
        arrays["headers"] = pa.ListArray.from_arrays(list_offsets, entries, type=headers_type)
        self._clear()
        return pa.RecordBatch.from_arrays([arrays[name] for name in self.schema.names], schema=self.schema)

    def _offsets(self, raw: np.ndarray, counts: np.ndarray, batch_of_row: np.ndarray) -> pa.Array:
        """Fetched records: their own offsets. Produced ones: the response's base offset on, by index."""
        if all(self.fetched):
            return pa.array(raw, pa.int64())
        fetched = np.array(self.fetched, bool)[batch_of_row]
        assigned = np.array([-1 if a is None else a for a in self.assigned], np.int64)
        missing = np.array([a is None and not f for a, f in zip(self.assigned, self.fetched)], bool)[batch_of_row]
        row_starts = np.cumsum(counts) - counts
        index_in_batch = np.arange(len(raw), dtype=np.int64) - row_starts[batch_of_row]
        values = np.where(fetched, raw, assigned[batch_of_row] + index_in_batch)
        return pa.array(values, pa.int64(), mask=missing if missing.any() else None)

    def _sequences(self, raw: np.ndarray, batch_of_row: np.ndarray) -> pa.Array:
        """base sequence + offset delta, wrapped past the int32 maximum as Kafka's sequences wrap
        (``increment_sequence``); null for batches without a producer sequence."""
        bases = np.array(self.base_sequences, np.int64)
        # offset - base offset wraps in int64 back to the record's int32 offset delta, so this sum fits
        with np.errstate(over="ignore"):
            deltas = raw - np.array(self.base_offsets, np.int64)[batch_of_row]
        sequences = bases[batch_of_row] + deltas
        wrapped = np.where(sequences > _INT32_MAX, sequences - (_INT32_MAX + 1), sequences)
        missing = (bases == NO_SEQUENCE)[batch_of_row] | (wrapped < _INT32_MIN) | (wrapped > _INT32_MAX)
        values = np.where(missing, 0, wrapped).astype(np.int32)
        return pa.array(values, pa.int32(), mask=missing if missing.any() else None)


def _timestamps(ms: np.ndarray, type_: pa.DataType) -> pa.Array:
    missing = (ms == -1) | (ms > _MAX_MS) | (ms < _MIN_MS)
    if missing.any():
        return pa.array(np.where(missing, 0, ms) * 1000, type_, mask=missing)
    return pa.array(ms * 1000, type_)


def _binary(finished: tuple, type_: pa.DataType) -> pa.Array:
    count, null_count, validity, offsets, data = finished
    return pa.Array.from_buffers(type_, count, [None if validity is None else pa.py_buffer(validity),
                                                pa.py_buffer(offsets), pa.py_buffer(data)], null_count=null_count)

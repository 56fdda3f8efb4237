"""Reading closed segments and rewriting their batches for the log cleaner: Kafka's ``MemoryRecords.filterTo``.

A batch is kept whole when every record stays and it needs no delete horizon (its bytes are copied);
rewritten with the records that stay, at their original offsets and under the original base offset
and last offset delta (so the producer's sequence numbers still add up); written as an empty header
when nothing stays but it holds an active producer's last sequence (Kafka's ``RETAIN_EMPTY``); or
dropped (``DELETE_EMPTY``: an empty batch alone in a fetch answer stalls librdkafka). A batch
whose kept records include a tombstone, or a transaction marker that may go, gets a delete horizon
(KIP-534: the base timestamp becomes now + delete.retention.ms, flagged in the attributes); a later
round drops the tombstones and markers once the horizon is past.

Runs on a worker thread: files are read through descriptors of its own, never the segments' (which
belong to the event loop).
"""
from __future__ import annotations

import os
from struct import Struct

from ....errors import RecordsError
from ....records.batch import (
    CODEC_MASK,
    CONTROL_FLAG,
    DELETE_HORIZON_FLAG,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    RecordBatch,
)
from ....records.checksums import crc32c
from ....records.compression import compress
from ....records.layouts import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    LOG_OVERHEAD,
)
from ....records.varints import read_varint, read_varlong, write_varint, write_varlong
from ..segment import HEADER

__all__ = ["BatchFilter", "control_marker", "empty_batch", "read_batches"]

_LENGTH = Struct(">i")
_CRC = Struct(">I")
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
_ABORT, _COMMIT = 0, 1


class CleanerAborted(Exception):
    """The round was stopped (the broker is closing)."""


def read_batches(fd: int, start: int, end: int, chunk: int, stop=None):
    """(position, header fields, batch bytes) for each whole batch in ``[start, end)`` of ``fd``, reading
    ``chunk`` bytes at a time (more for a larger batch). ``stop``: an Event that ends the round."""
    position = start
    buffer = b""
    buffer_start = start
    while end - position >= BATCH_HEADER_SIZE:
        if stop is not None and stop.is_set():
            raise CleanerAborted()
        relative = position - buffer_start
        if relative + BATCH_HEADER_SIZE > len(buffer):
            buffer = os.pread(fd, min(chunk, end - position), position)
            buffer_start, relative = position, 0
            if len(buffer) < BATCH_HEADER_SIZE:
                return
        fields = HEADER.unpack_from(buffer, relative)
        size = fields[1] + LOG_OVERHEAD
        if fields[1] < _MIN_BATCH_LENGTH or position + size > end:
            return
        if relative + size > len(buffer):
            buffer = os.pread(fd, max(size, min(chunk, end - position)), position)
            buffer_start, relative = position, 0
            if len(buffer) < size:
                return
        yield position, fields, memoryview(buffer)[relative:relative + size]
        position += size


def control_marker(view: memoryview) -> str | None:
    """What a control batch holds: "abort", "commit", "other", or None when it has no record."""
    columns = RecordBatch(view).columns()
    if not len(columns):
        return None
    start, length = columns.key_starts[0], columns.key_lengths[0]
    if length < 4:
        return "other"
    kind = int.from_bytes(columns.data[start + 2:start + 4], "big")
    return "abort" if kind == _ABORT else "commit" if kind == _COMMIT else "other"


def _pack(fields: tuple, attributes: int, base_timestamp: int, max_timestamp: int, count: int,
          records: bytes) -> bytes:
    """A batch with ``fields``' offsets, epochs and sequence, and the given attributes and records."""
    (base_offset, _, leader_epoch, magic, _, _, last_offset_delta, _, _, producer_id, producer_epoch,
     base_sequence, _) = fields
    header = bytearray(BATCH_HEADER_SIZE)
    HEADER.pack_into(header, 0, base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records), leader_epoch, magic,
                     0, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                     base_sequence, count)
    _CRC.pack_into(header, CRC_OFFSET, crc32c(records, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:])))
    return bytes(header) + records


def empty_batch(fields: tuple) -> bytes:
    """``DefaultRecordBatch.writeEmptyHeader``: the batch's offsets, producer and flags, no record."""
    attributes = fields[5] & (TIMESTAMP_TYPE_FLAG | TRANSACTIONAL_FLAG | CONTROL_FLAG)
    return _pack(fields, attributes, fields[8], fields[8], 0, b"")


def _record_spans(data: bytes, count: int) -> list[tuple[int, int]]:
    """Where each record lies in the records' bytes: (start, end)."""
    spans = []
    position = 0
    for _ in range(count):
        first = data[position]
        if first < 0x80:  # the one- and two-byte lengths inline: most records are under 8 KiB
            body, raw = position + 1, first
        elif data[position + 1] < 0x80:
            body, raw = position + 2, (first & 0x7F) | (data[position + 1] << 7)
        else:
            length, body = read_varint(data, position)
            raw = (length << 1) ^ (length >> 31)
        end = body + ((raw >> 1) ^ -(raw & 1))
        spans.append((position, end))
        position = end
    return spans


def _rebased(data: bytes, start: int, end: int, shift: int) -> bytes:
    """A record with its timestamp delta moved by ``shift`` (its base timestamp changed)."""
    _, body = read_varint(data, start)
    delta, after = read_varlong(data, body + 1)
    out = bytearray()
    write_varlong(out, delta + shift)
    middle = bytes((data[body],)) + bytes(out) + data[after:end]
    prefix = bytearray()
    write_varint(prefix, len(middle))
    return bytes(prefix) + middle


class BatchFilter:
    """Decides what each batch of a round keeps (Kafka's ``cleanInto`` record filter and ``filterTo``)."""

    def __init__(self, offset_map, transactions, active_producers: dict[int, tuple[int, int]], now_ms: int,
                 delete_retention_ms: int):
        self.offsets = offset_map
        self.transactions = transactions
        self.active_producers = active_producers  # producer id -> (last data offset or -1, epoch)
        self.now = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.records_read = 0
        self.records_kept = 0

    def _last_of_producer(self, fields: tuple, control: bool) -> bool:
        """The batch holding an active producer's last sequence (or its last marker, for the epoch)."""
        entry = self.active_producers.get(fields[9])
        if entry is None:
            return False
        last_data_offset, epoch = entry
        if last_data_offset >= 0:
            return fields[0] + fields[6] == last_data_offset
        return control and fields[10] == epoch

    def filter(self, fields: tuple, view: memoryview) -> bytes | memoryview | None:
        """What to write for this batch: its bytes, a rewrite, an empty header, or None (dropped)."""
        attributes = fields[5]
        producer_id = fields[9]
        last_offset = fields[0] + fields[6]
        control = bool(attributes & CONTROL_FLAG)
        has_horizon = bool(attributes & DELETE_HORIZON_FLAG)
        if control:
            discardable = self.transactions.on_control_batch(producer_id, last_offset, control_marker(view))
            drop_records = discardable and has_horizon and fields[7] <= self.now
        else:
            discardable = self.transactions.on_batch(producer_id, last_offset, bool(attributes & TRANSACTIONAL_FLAG))
            drop_records = discardable
        keep_empty = producer_id >= 0 and self._last_of_producer(fields, control)
        self.records_read += fields[12]
        if drop_records:
            return empty_batch(fields) if keep_empty else None
        batch = RecordBatch(view)
        columns = batch.columns()
        count = len(columns)
        if control:
            kept = [True] * count
            tombstones = False
        else:
            kept, tombstones = self._kept_records(columns, not has_horizon or self.now < fields[7])
        kept_count = sum(kept)
        self.records_kept += kept_count
        needs_horizon = (tombstones or (discardable and control)) and not has_horizon
        if kept_count == count and count and not needs_horizon:
            return view
        if not kept_count:
            return empty_batch(fields) if keep_empty else None
        horizon = self.now + self.delete_retention_ms if needs_horizon else (fields[7] if has_horizon else None)
        return self._rewrite(fields, columns, kept, horizon)

    def _kept_records(self, columns, keep_tombstones: bool) -> tuple[list[bool], bool]:
        """Per record, whether it stays (the newest of its key, not a tombstone past its horizon;
        records past the map's reach all stay); and whether a tombstone stays."""
        latest = self.offsets.latest_offset
        get = self.offsets.offsets.get
        keys = columns.keys()
        offsets = columns.offsets
        value_lengths = columns.value_lengths
        if keep_tombstones:
            kept = [offset > latest or (key is not None and offset >= get(key, -1))
                    for key, offset in zip(keys, offsets)]
        else:
            kept = [offset > latest or (key is not None and length >= 0 and offset >= get(key, -1))
                    for key, offset, length in zip(keys, offsets, value_lengths)]
        tombstones = -1 in value_lengths and any(
            keep and length < 0 for keep, length in zip(kept, value_lengths))
        return kept, tombstones

    def _rewrite(self, fields: tuple, columns, kept: list[bool], horizon: int | None) -> bytes:
        """The batch with only the kept records (``buildRetainedRecordsInto``); with a horizon, the base
        timestamp is the horizon and each record's timestamp delta moves to match."""
        data = columns.data
        base_timestamp = fields[7]
        try:
            spans = _record_spans(data, len(kept))
        except RecordsError as error:
            raise ValueError(f"unreadable record in batch at offset {fields[0]}: {error}") from None
        new_base = base_timestamp if horizon is None else horizon
        shift = base_timestamp - new_base
        if shift:
            parts = [_rebased(data, start, end, shift) for (start, end), keep in zip(spans, kept) if keep]
        else:
            parts = [data[start:end] for (start, end), keep in zip(spans, kept) if keep]
        records = b"".join(parts)
        attributes = fields[5] & ~DELETE_HORIZON_FLAG
        if horizon is not None:
            attributes |= DELETE_HORIZON_FLAG
        codec = attributes & CODEC_MASK
        if codec:
            records = compress(codec, records)
        if attributes & TIMESTAMP_TYPE_FLAG:
            max_timestamp = fields[8]
        else:
            max_timestamp = max((ts for ts, keep in zip(columns.timestamps, kept) if keep), default=-1)
        return _pack(fields, attributes, new_base, max_timestamp, len(parts), records)

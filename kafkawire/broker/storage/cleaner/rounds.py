"""One cleaning round's heavy work, on a worker thread: Kafka's ``Cleaner.buildOffsetMap`` and
``Cleaner.cleanSegments``.

The event loop takes a snapshot of what a round needs (``RoundPlan``: the closed segments' paths and
sizes, the aborted transactions, the active producers' last offsets); the worker then reads those
files through descriptors of its own and writes the cleaned segments as ``.cleaned`` files, which the
loop swaps in (``cleaner``). Nothing here touches a ``PartitionLog`` or a ``LogSegment``'s state.
"""
from __future__ import annotations

import os
import sys
import threading
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from ....records.batch import RecordBatch
from .batches import BatchFilter, control_marker, read_batches
from .files import CLEANED_SUFFIX, segment_files
from .transactions import CleanedTransactions
from .offset_map import OffsetMap
from ..segment import LogSegment
from .throttler import Throttler
from ..transaction_index import AbortedTxn, TransactionIndex

__all__ = [
    "CleanedSegment",
    "RoundPlan",
    "SegmentSnapshot",
    "build_offset_map",
    "clean_group",
    "group_segments",
]

_CONTROL = 0x20
_TRANSACTIONAL = 0x10
_INT32_MAX = 0x7FFFFFFF
_WRITE_CHUNK = 1 << 20
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class SegmentSnapshot:
    """A closed segment as the loop saw it when the round was planned."""

    segment: LogSegment  # for the swap to find it again (never used on the worker)
    base_offset: int
    next_offset: int
    size: int
    log_path: Path
    mtime_ns: int


@dataclass
class RoundPlan:
    """What a round cleans: Kafka's ``LogToClean`` with what the worker needs to read."""

    directory: Path
    name: str
    first_dirty_offset: int
    first_uncleanable_offset: int
    segments: list[SegmentSnapshot]  # the closed segments below the first uncleanable offset, oldest first
    aborted: list[AbortedTxn]  # aborted transactions overlapping the segments, in completion order
    active_producers: dict[int, tuple[int, int]]  # producer id -> (last data offset or -1, epoch)
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    index_interval_bytes: int
    io_buffer_size: int
    stop: threading.Event = field(default_factory=threading.Event)
    throttler: Throttler | None = None  # log.cleaner.io.max.bytes.per.second, when it is set

    @property
    def dirty_segments(self) -> list[SegmentSnapshot]:
        return [s for s in self.segments if s.next_offset > self.first_dirty_offset]


@dataclass
class CleanedSegment:
    base_offset: int
    size: int
    bytes_read: int
    records_read: int
    records_kept: int


def build_offset_map(plan: RoundPlan, offsets: OffsetMap) -> int:
    """Map each key of the dirty records to its latest offset, from the first dirty offset on, until
    the map is full; returns the offset the round cleans up to (the map's latest offset + 1). Records
    of aborted transactions are left out."""
    offsets.clear()
    start, end = plan.first_dirty_offset, plan.first_uncleanable_offset
    transactions = CleanedTransactions(plan.aborted)
    for segment in plan.dirty_segments:
        if _map_segment(plan, segment, offsets, transactions, start):
            break
        offsets.update_latest_offset(min(segment.next_offset, end) - 1)  # an offset gap: skip it
    return offsets.latest_offset + 1


def _map_segment(plan: RoundPlan, segment: SegmentSnapshot, offsets: OffsetMap, transactions: CleanedTransactions,
                 start: int) -> bool:
    """Add one segment's keys; True when the map filled up in it."""
    fd = os.open(segment.log_path, os.O_RDONLY | _O_CLOEXEC)
    try:
        for _, fields, view in read_batches(fd, 0, segment.size, plan.io_buffer_size, plan.stop):
            last_offset = fields[0] + fields[6]
            if last_offset < start:
                continue
            if last_offset >= plan.first_uncleanable_offset:
                return False
            if plan.throttler is not None:
                plan.throttler.maybe_throttle(len(view), plan.stop)
            if fields[5] & _CONTROL:
                transactions.on_control_batch(fields[9], last_offset, control_marker(view))
            elif not transactions.on_batch(fields[9], last_offset, bool(fields[5] & _TRANSACTIONAL)):
                if _map_batch(view, offsets, start):
                    return True
            offsets.update_latest_offset(last_offset)
    finally:
        os.close(fd)
    return False


def _map_batch(view: memoryview, offsets: OffsetMap, start: int) -> bool:
    columns = RecordBatch(view).columns()
    record_offsets = columns.offsets
    lengths = columns.key_lengths
    keys: list[bytes]
    if record_offsets and record_offsets[0] < start or -1 in lengths:  # part before the dirty start, or keyless
        pairs = [(key, offset) for key, offset in zip(columns.keys(), record_offsets)
                 if key is not None and offset >= start]
        keys = [key for key, _ in pairs]
        record_offsets = array("q", [offset for _, offset in pairs])
        key_bytes = sum(len(key) for key in keys)
    else:
        keys = columns.keys()  # type: ignore[assignment]  # no key is None here
        key_bytes = sum(lengths)
    if offsets.room_for(len(keys), key_bytes):
        offsets.put_all(keys, record_offsets, key_bytes)
        return False
    for key, offset in zip(keys, record_offsets):
        if not offsets.put(key, offset):
            return True
    return False


def group_segments(segments: list[SegmentSnapshot], end_offset: int, max_size: int) -> list[list[SegmentSnapshot]]:
    """The segments below ``end_offset`` in groups of at most ``max_size`` bytes whose offsets fit one
    segment's index (``groupSegmentsBySize``); each group becomes one cleaned segment. Segments a
    round emptied or shrank merge in the next round; an empty one joins whatever its offsets (it
    adds no index entry)."""
    candidates = [s for s in segments if s.base_offset < end_offset]
    groups: list[list[SegmentSnapshot]] = []
    for segment in candidates:
        group = groups[-1] if groups else None
        if (group is not None and sum(s.size for s in group) + segment.size <= max_size
                and (segment.size == 0 or segment.next_offset - 1 - group[0].base_offset <= _INT32_MAX)):
            group.append(segment)
        else:
            groups.append([segment])
    return groups


def clean_group(plan: RoundPlan, group: list[SegmentSnapshot], batch_filter: BatchFilter,
                transactions: CleanedTransactions) -> CleanedSegment:
    """Write the group's kept batches into ``<base>.log.cleaned`` with its offset index and aborted-
    transaction index (the file is empty when nothing stays: ``files``)."""
    base = group[0].base_offset
    index_path, txn_path, log_path = segment_files(plan.directory, base, CLEANED_SUFFIX)
    transactions.cleaned_index = []
    writer = _SegmentWriter(log_path, base, plan.index_interval_bytes)
    bytes_read = 0
    read_before, kept_before = batch_filter.records_read, batch_filter.records_kept
    try:
        for segment in group:
            fd = os.open(segment.log_path, os.O_RDONLY | _O_CLOEXEC)
            try:
                for _, fields, view in read_batches(fd, 0, segment.size, plan.io_buffer_size, plan.stop):
                    written = writer.size
                    writer.write(fields, batch_filter.filter(fields, view))
                    bytes_read += len(view)
                    if plan.throttler is not None:  # what it read and wrote, as Kafka's cleaner counts
                        plan.throttler.maybe_throttle(len(view) + writer.size - written, plan.stop)
            finally:
                os.close(fd)
        writer.finish(index_path)
        if transactions.cleaned_index:
            cleaned_index = TransactionIndex(txn_path)
            for txn in transactions.cleaned_index:
                cleaned_index.append(txn)
            _fsync_path(txn_path)
        mtime = group[-1].mtime_ns
        os.utime(log_path, ns=(mtime, mtime))  # retention by time sees the replaced segments' age
    except BaseException:
        writer.close()
        for path in (index_path, txn_path, log_path):
            path.unlink(missing_ok=True)
        raise
    return CleanedSegment(base, writer.size, bytes_read, batch_filter.records_read - read_before,
                          batch_filter.records_kept - kept_before)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _SegmentWriter:
    """Appends batches to a new segment file, with its sparse offset index (as ``LogSegment.write``)."""

    def __init__(self, path: Path, base_offset: int, index_interval_bytes: int):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_CLOEXEC, 0o644)
        self.base_offset = base_offset
        self.interval = index_interval_bytes
        self.size = 0
        self.since_entry = 0
        self.index = array("i")
        self.buffer: list[bytes | memoryview] = []
        self.buffered = 0

    def write(self, fields: tuple, data) -> None:
        if data is None:
            return
        if self.since_entry > self.interval:
            self.index.extend((fields[0] + fields[6] - self.base_offset, self.size))
            self.since_entry = 0
        self.buffer.append(data)
        self.buffered += len(data)
        self.size += len(data)
        self.since_entry += len(data)
        if self.buffered >= _WRITE_CHUNK:
            self._flush()

    def _flush(self) -> None:
        if self.buffer:
            _write_all(self.fd, b"".join(self.buffer) if len(self.buffer) > 1 else self.buffer[0])
            self.buffer, self.buffered = [], 0

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def finish(self, index_path: Path) -> None:
        try:
            self._flush()
            os.fsync(self.fd)
        finally:
            self.close()
        if sys.byteorder == "little":
            self.index.byteswap()
        with open(index_path, "wb") as index:
            index.write(self.index.tobytes())
            index.flush()
            os.fsync(index.fileno())


def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

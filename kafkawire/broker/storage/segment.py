"""One log segment: ``<base>.log`` holding record batches and ``<base>.index``, Kafka's sparse offset index.

The index is Kafka's ``OffsetIndex`` format: 8-byte entries, big-endian int32 offset relative to the
segment's base offset and int32 byte position in the ``.log``. An entry is written as Kafka's
``LogSegment.append`` writes it: before appending a batch, if more than ``index.interval.bytes`` were
appended since the last entry, an entry (the batch's LAST offset, the batch's position) is added. A
lookup takes the greatest entry <= the target and scans batch headers from there to the first batch
whose last offset >= the target (``LogSegment.translateOffset``).

Reads are ``os.pread`` of raw file bytes: one copy, no per-record objects.
"""
from __future__ import annotations

import os
import sys
import time
from array import array
from bisect import bisect_right
from pathlib import Path
from struct import Struct

from ...records.checksums import crc32c
from ...records.layouts import ATTRIBUTES_OFFSET, BATCH_HEADER_FORMAT, BATCH_HEADER_SIZE, LOG_OVERHEAD
from .descriptors import DescriptorCache
from .file_records import SliceSource
from .transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

__all__ = ["LogSegment", "BatchInfo", "segment_name", "iter_batch_headers", "HEADER"]

HEADER = BATCH_HEADER_FORMAT
_PREFIX = Struct(">qi")
_INDEX_ENTRY = Struct(">ii")
_LOCATE = Struct(">qi11xi")  # a batch header's base offset, length and (at byte 23) last offset delta
_INT32_MAX = 0x7FFFFFFF
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # the Length field of an empty batch (49)
_SCAN_CHUNK = 64 * 1024
_RECOVERY_CHUNK = 8 * 1024 * 1024


def segment_name(base_offset: int) -> str:
    """Kafka's file name stem: the base offset, zero-padded to 20 digits (``LogFileUtils.filenamePrefixFromOffset``)."""
    return f"{base_offset:020d}"


class BatchInfo:
    """A batch header read from a file: where the batch is and what its header says."""

    __slots__ = ("position", "size", "base_offset", "partition_leader_epoch", "magic", "crc", "attributes",
                 "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                 "base_sequence", "count")

    def __init__(self, position: int, fields: tuple):
        self.position = position
        (self.base_offset, length, self.partition_leader_epoch, self.magic, self.crc, self.attributes,
         self.last_offset_delta, self.base_timestamp, self.max_timestamp, self.producer_id, self.producer_epoch,
         self.base_sequence, self.count) = fields
        self.size = length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & _INT32_MAX

    def __repr__(self) -> str:
        return (f"BatchInfo(position={self.position}, size={self.size}, base_offset={self.base_offset}, "
                f"last_offset={self.last_offset}, max_timestamp={self.max_timestamp})")


def iter_batch_headers(fd: int, start: int, end: int, chunk: int = _SCAN_CHUNK):
    """The headers of the whole batches in ``[start, end)`` of the file ``fd``, in order.

    Stops at a partial batch, or at a header whose length is impossible (smaller than an empty batch).
    Reads ``chunk`` bytes at a time; a batch longer than what is left of a chunk costs one more read.
    """
    pos = start
    buf = b""
    buf_start = start
    while end - pos >= BATCH_HEADER_SIZE:
        rel = pos - buf_start
        if rel + BATCH_HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(max(chunk, BATCH_HEADER_SIZE), end - pos), pos)
            buf_start = pos
            rel = 0
            if len(buf) < BATCH_HEADER_SIZE:
                return
        fields = HEADER.unpack_from(buf, rel)
        length = fields[1]
        if length < _MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + length > end:
            return
        yield BatchInfo(pos, fields)
        pos += LOG_OVERHEAD + length


class LogSegment:
    """A segment's files and what is known about them. The owner (PartitionLog) keeps ``next_offset``
    right: the offset after the segment's last batch (for a closed segment, the next segment's base)."""

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int, *, create: bool = False,
                 now_ms: int | None = None, descriptors: DescriptorCache | None = None):
        """``descriptors``, when given, bounds the descriptors open across segments (files reopen on use)."""
        self.directory = directory
        self._descriptors = descriptors
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        stem = segment_name(base_offset)
        self.log_path = directory / f"{stem}.log"
        self.index_path = directory / f"{stem}.index"
        self.txn_index = TransactionIndex(directory / f"{stem}{TXN_INDEX_SUFFIX}")  # aborted transactions
        self._fd: int | None = None
        self._slice_source: SliceSource | None = None
        if create:  # the files are made now and opened on first use (logs are created on worker threads)
            with open(self.log_path, "wb"), open(self.index_path, "wb"):
                pass
            self.size = 0
        else:
            self.size = self.log_path.stat().st_size
        self.next_offset = base_offset
        self.created_ms = now_ms if now_ms is not None else time.time_ns() // 1_000_000
        self._index_offsets = array("i")  # relative offsets
        self._index_positions = array("i")
        self._index_loaded = create
        # the target batch lies within about index.interval.bytes of its index entry: reading that much
        # (rather than _SCAN_CHUNK) keeps a fetch's offset lookup from copying 64 KiB it does not need
        self._translate_chunk = min(_SCAN_CHUNK, BATCH_HEADER_SIZE + index_interval_bytes)
        self._index_fd: int | None = None
        self._bytes_since_index_entry = 0
        self._unflushed = create
        # the largest batch MaxTimestamp and the last offset of the first batch holding it (Kafka's
        # maxTimestampAndOffsetSoFar, "shallow"); the first batch's MaxTimestamp (rollingBasedTimestamp)
        self._timestamps_known = create
        self._max_timestamp = -1
        self._offset_of_max_timestamp = -1
        self._first_batch_timestamp: int | None = None

    # ---- files ----------------------------------------------------------------------------------
    @property
    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.log_path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        if self._descriptors is not None:
            self._descriptors.touch(self)
        return self._fd

    def pread(self, size: int, position: int) -> bytes:
        if size <= 0:
            return b""
        data = os.pread(self.fd, size, position)
        if len(data) < size:  # pread on a regular file returns short only at EOF; loop for safety
            parts = [data]
            got = len(data)
            while got < size:
                more = os.pread(self.fd, size - got, position + got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        return data

    def write(self, data, last_offset: int, max_timestamp: int) -> int:
        """Append one batch's bytes (offsets already assigned); returns its position."""
        position = self.size
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.pwrite(self.fd, view[written:], position + written)
        except OSError:
            # leave no torn batch behind: cut the file back to where it was
            try:
                os.ftruncate(self.fd, position)
            except OSError:
                pass
            raise
        self._ensure_index()
        if self._bytes_since_index_entry > self.index_interval_bytes:
            self._add_index_entry(last_offset, position)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += len(view)
        self.size = position + len(view)
        self.next_offset = last_offset + 1
        self._unflushed = True
        if self._timestamps_known:
            if self._first_batch_timestamp is None:
                self._first_batch_timestamp = max_timestamp
            if max_timestamp > self._max_timestamp:
                self._max_timestamp = max_timestamp
                self._offset_of_max_timestamp = last_offset
        return position

    def flush(self) -> None:
        if self._unflushed:
            os.fsync(self.fd)  # a descriptor closed by the cache is reopened: fsync syncs the file, not the fd
            if self._index_fd is not None:
                os.fsync(self._index_fd)
            elif self.index_path.exists():
                fd = os.open(self.index_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self._unflushed = False

    @property
    def slice_source(self) -> SliceSource:
        """Where this segment's ``FileRecords`` slices send from (see ``file_records``)."""
        if self._slice_source is None:
            self._slice_source = SliceSource(self.fd)
        elif self._descriptors is not None:
            self._descriptors.touch(self)
        return self._slice_source

    def close(self) -> None:
        self.close_descriptors()
        if self._descriptors is not None:
            self._descriptors.forget(self)

    def close_descriptors(self) -> None:
        """Close the segment's files (they reopen on the next access); written bytes are in the page
        cache, and ``flush`` reopens the file to sync them if it must."""
        if self._slice_source is not None:
            source, self._slice_source = self._slice_source, None
            source.release()  # slices still queued keep its descriptor open
        for name in ("_fd", "_index_fd"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                os.close(fd)

    def close_index_writer(self) -> None:
        """The segment stops being the active one: no more index appends."""
        if self._index_fd is not None:
            fd, self._index_fd = self._index_fd, None
            os.close(fd)

    def delete(self) -> None:
        self.close()
        self.txn_index.delete()
        for path in (self.log_path, self.index_path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def last_modified_ms(self) -> int:
        try:
            return self.log_path.stat().st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return self.created_ms

    # ---- index ----------------------------------------------------------------------------------
    def _ensure_index(self) -> None:
        if not self._index_loaded:
            self._load_index()

    def ensure_index(self) -> None:
        """Load (sanity-check, rebuild if needed) the index now."""
        self._ensure_index()

    def _add_index_entry(self, offset: int, position: int) -> None:
        self._index_offsets.append(offset - self.base_offset)
        self._index_positions.append(position)
        if self._index_fd is None:
            self._index_fd = os.open(self.index_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                                     | getattr(os, "O_CLOEXEC", 0), 0o644)
            if self._descriptors is not None:
                self._descriptors.touch(self)
        os.write(self._index_fd, _INDEX_ENTRY.pack(offset - self.base_offset, position))

    def _load_index(self) -> None:
        """Read the ``.index`` file; rebuild it from the batch headers when it is missing or does not
        make sense (Kafka's ``sanityCheck``, then recovery)."""
        self._index_loaded = True
        try:
            raw = self.index_path.read_bytes()
        except FileNotFoundError:
            raw = None
        if raw is not None and len(raw) % 8 == 0:
            entries = array("i", raw)
            if sys.byteorder == "little":
                entries.byteswap()
            offsets, positions = entries[0::2], entries[1::2]
            if _index_is_sane(offsets, positions, self.size):
                self._index_offsets, self._index_positions = offsets, positions
                if positions:
                    self._bytes_since_index_entry = self.size - positions[-1]
                else:
                    self._bytes_since_index_entry = self.size
                return
        self.rebuild_index()

    def rebuild_index(self) -> None:
        offsets, positions = array("i"), array("i")
        since = 0
        for info in iter_batch_headers(self.fd, 0, self.size):
            if since > self.index_interval_bytes:
                offsets.append(info.last_offset - self.base_offset)
                positions.append(info.position)
                since = 0
            since += info.size
        self._set_index(offsets, positions, since)

    def _set_index(self, offsets: array, positions: array, since: int) -> None:
        self._index_offsets, self._index_positions = offsets, positions
        self._bytes_since_index_entry = since
        self._index_loaded = True
        if self._index_fd is not None:
            os.close(self._index_fd)
            self._index_fd = None
        entries = array("i", [0]) * (2 * len(offsets))
        entries[0::2] = offsets
        entries[1::2] = positions
        if sys.byteorder == "little":
            entries.byteswap()
        tmp = self.index_path.with_name(self.index_path.name + ".tmp")
        tmp.write_bytes(entries.tobytes())
        os.replace(tmp, self.index_path)

    @property
    def index_entries(self) -> list[tuple[int, int]]:
        """The index as (absolute offset, position) pairs."""
        self._ensure_index()
        return [(self.base_offset + o, p) for o, p in zip(self._index_offsets, self._index_positions)]

    def lookup(self, offset: int) -> int:
        """The position of the greatest index entry whose offset is <= ``offset`` (0 without one)."""
        self._ensure_index()
        i = bisect_right(self._index_offsets, offset - self.base_offset) - 1
        return self._index_positions[i] if i >= 0 else 0

    def translate(self, offset: int, start_position: int = 0) -> BatchInfo | None:
        """The first batch whose last offset >= ``offset`` (the batch holding it, or the next one);
        None past the segment's end. ``LogSegment.translateOffset``."""
        if offset >= self.next_offset:
            return None
        self._ensure_index()
        positions = self._index_positions
        i = bisect_right(self._index_offsets, offset - self.base_offset)  # entries [0, i) are <= offset
        position = max(positions[i - 1] if i else 0, start_position)
        if i < len(positions) and positions[i] - position > self._translate_chunk:
            # The scan from the entry below would need a second read to get past a large batch. With
            # large batches the next entry's batch is usually the one holding ``offset``, and its
            # header alone shows it: every batch before it ends below its base offset.
            ahead = self._batch_at(positions[i])
            if ahead is not None and ahead.base_offset <= offset:
                if ahead.last_offset >= offset:
                    return ahead
                position = ahead.position
        return self._scan_for(offset, position)

    def _batch_at(self, position: int) -> BatchInfo | None:
        """The header of the whole batch at ``position`` (None when there is none)."""
        if self.size - position < BATCH_HEADER_SIZE:
            return None
        buf = os.pread(self.fd, BATCH_HEADER_SIZE, position)
        if len(buf) < BATCH_HEADER_SIZE:
            return None
        fields = HEADER.unpack_from(buf)
        if fields[1] < _MIN_BATCH_LENGTH or position + LOG_OVERHEAD + fields[1] > self.size:
            return None
        return BatchInfo(position, fields)

    def _scan_for(self, offset: int, pos: int) -> BatchInfo | None:
        """``iter_batch_headers`` from ``pos`` to the first batch whose last offset >= ``offset``, inlined:
        it is on the fetch path, and most batches it passes are only skipped."""
        end = self.size
        chunk = self._translate_chunk
        buf = b""
        buf_start = pos
        while end - pos >= BATCH_HEADER_SIZE:
            rel = pos - buf_start
            if rel + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, min(chunk, end - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return None
            base_offset, length, last_offset_delta = _LOCATE.unpack_from(buf, rel)
            if length < _MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + length > end:
                return None
            if base_offset + last_offset_delta >= offset:
                return BatchInfo(pos, HEADER.unpack_from(buf, rel))
            pos += LOG_OVERHEAD + length
        return None

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first index entry past ``position``, an offset no fetched byte before
        ``position`` goes beyond (``OffsetIndex.fetchUpperBoundOffset``); None without one."""
        self._ensure_index()
        i = bisect_right(self._index_positions, position)
        return self.base_offset + self._index_offsets[i] if i < len(self._index_positions) else None

    def truncate_to(self, offset: int) -> int:
        """Cut the segment before the batch holding ``offset`` (``LogSegment.truncateTo``); returns the
        bytes cut. The index and timestamps are rebuilt from what is left."""
        info = self.translate(offset)
        if info is None:
            return 0
        cut = self.size - info.position
        self.close_index_writer()
        os.ftruncate(self.fd, info.position)
        self.txn_index.truncate_to(offset)
        self.recover()
        return cut

    def batches(self, start: int = 0, end: int | None = None, chunk: int = _SCAN_CHUNK):
        return iter_batch_headers(self.fd, start, self.size if end is None else end, chunk)

    # ---- timestamps -----------------------------------------------------------------------------
    def _ensure_timestamps(self) -> None:
        if self._timestamps_known:
            return
        max_ts, at, first = -1, -1, None
        for info in self.batches():
            if first is None:
                first = info.max_timestamp
            if info.max_timestamp > max_ts:
                max_ts, at = info.max_timestamp, info.last_offset
        self._max_timestamp, self._offset_of_max_timestamp, self._first_batch_timestamp = max_ts, at, first
        self._timestamps_known = True

    @property
    def max_timestamp(self) -> int:
        """The largest batch MaxTimestamp in the segment (-1 when none), ``maxTimestampSoFar``."""
        self._ensure_timestamps()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        self._ensure_timestamps()
        return self._offset_of_max_timestamp

    @property
    def first_batch_timestamp(self) -> int | None:
        """The first batch's MaxTimestamp (Kafka's rollingBasedTimestamp), None when the segment is empty."""
        if not self._timestamps_known and self._first_batch_timestamp is None and self.size:
            for info in iter_batch_headers(self.fd, 0, self.size, BATCH_HEADER_SIZE):
                self._first_batch_timestamp = info.max_timestamp
                break
        return self._first_batch_timestamp

    def largest_timestamp(self) -> int:
        """``LogSegment.largestTimestamp``: the max timestamp, or the file's mtime without timestamps."""
        ts = self.max_timestamp
        return ts if ts >= 0 else self.last_modified_ms()

    # ---- recovery -------------------------------------------------------------------------------
    def recover(self) -> int:
        """Check every batch (length, magic 2, CRC-32C, increasing offsets that fit the index), cut the
        file after the last good one, rebuild the index and timestamps. Returns the bytes cut.
        ``LogSegment.recover``."""
        fd = self.fd
        file_size = os.fstat(fd).st_size
        expected = self.base_offset
        offsets, positions = array("i"), array("i")
        since = 0
        max_ts, at, first = -1, -1, None
        pos = 0
        buf = b""
        buf_start = 0
        while file_size - pos >= BATCH_HEADER_SIZE:
            rel = pos - buf_start
            if rel + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(_RECOVERY_CHUNK, file_size - pos), pos)
                buf_start, rel = pos, 0
            fields = HEADER.unpack_from(buf, rel)
            base_offset, length, magic, stored_crc, last_delta = fields[0], fields[1], fields[3], fields[4], fields[6]
            total = LOG_OVERHEAD + length
            if length < _MIN_BATCH_LENGTH or pos + total > file_size or magic != 2:
                break
            if rel + total > len(buf):
                buf = os.pread(fd, max(total, min(_RECOVERY_CHUNK, file_size - pos)), pos)
                buf_start, rel = pos, 0
                if len(buf) < total:
                    break
            if crc32c(memoryview(buf)[rel + ATTRIBUTES_OFFSET:rel + total]) != stored_crc:
                break
            last_offset = base_offset + last_delta
            if base_offset < expected or last_delta < 0 or last_offset - self.base_offset > _INT32_MAX:
                break
            if since > self.index_interval_bytes:
                offsets.append(last_offset - self.base_offset)
                positions.append(pos)
                since = 0
            since += total
            max_timestamp = fields[8]
            if first is None:
                first = max_timestamp
            if max_timestamp > max_ts:
                max_ts, at = max_timestamp, last_offset
            expected = last_offset + 1
            pos += total
        cut = file_size - pos
        if cut:
            os.ftruncate(fd, pos)
        self.size = pos
        self.next_offset = expected
        self._set_index(offsets, positions, since)
        self._max_timestamp, self._offset_of_max_timestamp, self._first_batch_timestamp = max_ts, at, first
        self._timestamps_known = True
        return cut

    def find_last_batch(self) -> BatchInfo | None:
        """The last batch (from the last index entry on): how a cleanly closed segment learns its end."""
        last = None
        for info in iter_batch_headers(self.fd, self.lookup(1 << 62), self.size):
            last = info
        return last

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"


def _index_is_sane(offsets: array, positions: array, log_size: int) -> bool:
    previous_offset, previous_position = -1, -1
    for offset, position in zip(offsets, positions):
        if offset <= previous_offset or position <= previous_position or position >= log_size:
            return False
        previous_offset, previous_position = offset, position
    return True

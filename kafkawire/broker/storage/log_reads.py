"""Reading a partition log: Kafka's ``UnifiedLog.read`` / ``LocalLog.read`` / ``LogSegment.read`` with
KIP-74's per-partition semantics, what a parked fetch needs to know (bytes available, whether the
log moved under it), offsets by timestamp for ListOffsets, and remote-tier reads. ``PartitionLog``
owns one ``LogReader`` and answers these calls with it."""
from __future__ import annotations

import os
import time
from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ...records.batch import RecordBatch
from .errors import OffsetInRemoteTier, OffsetOutOfRange
from .file_records import FileRecords
from .local_log import LogOffsetMetadata
from .remote import RemoteSegment
from .segment import iter_batch_headers

if TYPE_CHECKING:
    from .log import PartitionLog
    from .transaction_index import AbortedTxn

__all__ = ["LogReader", "LogRead", "LogOffsetMetadata", "OffsetAndTimestamp"]


@dataclass(slots=True)
class LogRead:
    records: bytes | FileRecords  # raw log bytes; may end with a partial batch; b"" when nothing
    first_entry_incomplete: bool  # the first batch did not fit (v3+ callers replace the records with empty)
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    fetch_offset_metadata: LogOffsetMetadata | None = None  # where the read started (None for remote reads)
    aborted: list[AbortedTxn] | None = None  # remote read_committed reads: the aborted transactions (AbortedTxn) overlapping


class OffsetAndTimestamp(NamedTuple):
    """A ListOffsets answer: the offset found and the timestamp of that record."""

    offset: int
    timestamp: int


class LogReader:
    """Reads of one ``PartitionLog``: its local segments, and its remote tier where it has one."""

    def __init__(self, log: PartitionLog):
        self.log = log
        self.local = log.local

    # ---- reading --------------------------------------------------------------------------------
    def _check_range(self, offset: int) -> None:
        start = self.log.log_start_offset
        leo = self.local.end_offset
        if offset < start or offset > leo:
            raise OffsetOutOfRange(offset, start, leo)
        local_start = self.local.first.base_offset  # the local log start, as offset >= start here
        if offset < local_start:
            if self.log.tiered:
                raise OffsetInRemoteTier(offset, start, leo, local_start)
            raise OffsetOutOfRange(offset, start, leo)

    def _bound(self, isolation_bound: int | None) -> int:
        leo = self.local.end_offset
        return leo if isolation_bound is None else min(isolation_bound, leo)

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where the batch holding ``offset`` starts (for the log end offset: the end of the active segment)."""
        self._check_range(offset)
        return self.local.metadata(offset)

    def read(self, offset: int, max_bytes: int, min_one_message: bool, isolation_bound: int | None = None, *,
             as_file: bool = False, through_offset: int | None = None) -> LogRead:
        """Read from ``offset`` as ``UnifiedLog.read`` / ``LocalLog.read`` / ``LogSegment.read`` do (§4.3).

        OffsetOutOfRange below the log start or above the log end; OffsetInRemoteTier for an offset only in
        the remote tier. ``isolation_bound`` (default: the high watermark = log end) bounds what is read;
        at or beyond it the read is empty. Otherwise the slice starts at the batch holding ``offset`` (a
        mid-batch offset returns the whole batch), holds at most ``max(max_bytes, first batch)`` bytes
        when ``min_one_message`` (else ``max_bytes``), may end with a partial batch, and never spans
        segments. ``as_file``: the records are a ``FileRecords`` slice of the segment (for sendfile)
        instead of bytes read from it. ``through_offset``: the slice ends with the batch holding that
        offset (a share fetch reads only the batches holding records it can acquire).
        """
        if max_bytes < 0:
            raise ValueError(f"invalid max size {max_bytes}")
        self._check_range(offset)
        local = self.local
        segments = local.segments
        active = segments[-1]
        leo = active.next_offset  # also the high watermark
        last_stable = self.log.last_stable_offset
        log_start = self.log.log_start_offset
        if isolation_bound is None or isolation_bound >= leo:
            bound, bound_segment, bound_position = leo, active.base_offset, active.size
        else:
            bound = isolation_bound
        if offset >= bound:
            return LogRead(b"", False, leo, log_start, last_stable, local.metadata(offset))
        if bound < leo:
            _, bound_segment, bound_position = local.metadata(bound)
        for index in range(max(0, local.index_of(offset)), len(segments)):
            segment = segments[index]
            info = segment.translate(offset)
            if info is None:
                continue  # nothing at or after offset here (a gap): the next segment
            base = segment.base_offset
            if base < bound_segment:
                max_position = segment.size
            elif base == bound_segment:
                max_position = bound_position
            else:
                break
            position, first_size = info.position, info.size
            if through_offset is not None:
                through = segment.translate(through_offset, position)
                if through is not None:
                    max_position = min(max_position, through.position + through.size)
            fetch_metadata = LogOffsetMetadata(offset, base, position)
            adjusted = max(max_bytes, first_size) if min_one_message else max_bytes
            if adjusted == 0:
                return LogRead(b"", False, leo, log_start, last_stable, fetch_metadata)
            fetch_size = min(max_position - position, adjusted)
            records = (FileRecords(segment.slice_source, position, fetch_size) if as_file and fetch_size > 0
                       else segment.pread(fetch_size, position))
            return LogRead(records, adjusted < first_size, leo, log_start, last_stable, fetch_metadata)
        return LogRead(b"", False, leo, log_start, last_stable, local.end_offset_metadata)

    def bytes_available(self, offset: int, max_bytes: int, isolation_bound: int | None = None) -> int:
        """For a parked fetch (§4.6 G): ``min(bound position - fetch position, max_bytes)`` when the fetch
        offset and the bound are on the same segment; 0 at or beyond the bound. Raises OffsetOutOfRange
        (OffsetInRemoteTier) as ``read`` does. See ``must_complete_fetch`` for case F."""
        self._check_range(offset)
        bound = self._bound(isolation_bound)
        if offset >= bound:
            return 0
        fetch = self.local.metadata(offset)
        end = self.local.metadata(bound)
        if fetch.segment_base_offset == end.segment_base_offset:
            return max(0, min(end.relative_position - fetch.relative_position, max_bytes))
        segment = self.local.segments[self.local.index_of(fetch.segment_base_offset)]
        return max(0, min(segment.size - fetch.relative_position, max_bytes))

    def must_complete_fetch(self, offset: int, isolation_bound: int | None = None,
                            fetch_metadata: LogOffsetMetadata | None = None) -> bool:
        """DelayedFetch case F: the fetch offset is beyond the bound, or below it on an older segment than
        the bound's. ``fetch_metadata`` is where the fetch was parked (``LogRead.fetch_offset_metadata``),
        as Kafka keeps it; without it the offset's current position is used."""
        bound = self._bound(isolation_bound)
        if offset > bound:
            return True
        if offset == bound:
            return False
        if fetch_metadata is None:
            self._check_range(offset)
            fetch_metadata = self.local.metadata(offset)
        return fetch_metadata.segment_base_offset < self.local.metadata(bound).segment_base_offset

    # ---- timestamps -----------------------------------------------------------------------------
    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """ListOffsets by timestamp: the first record (from the log start) whose timestamp >= ``timestamp``,
        with that record's timestamp; None when there is none (``fetchOffsetByTimestamp``). The remote tier
        is searched first when the log is tiered."""
        log = self.log
        start = log.log_start_offset
        if log.tiered:
            local_start = log.local_log_start_offset
            for remote in log.remote_segments:
                if remote.end_offset < start or remote.base_offset >= local_start:
                    continue
                if remote.max_timestamp >= timestamp:
                    found = self._search_remote(remote, timestamp, start)
                    if found is not None:
                        return found
            start = max(start, local_start)
        for segment in self.local:
            if segment.next_offset <= start or segment.max_timestamp < timestamp:
                continue
            position = segment.lookup(start) if segment.base_offset <= start else 0
            for info in segment.batches(position):
                if info.max_timestamp >= timestamp and info.last_offset >= start:
                    found = self._search_batch(segment.pread(info.size, info.position), timestamp, start)
                    if found is not None:
                        return found
        return None

    def _search_remote(self, remote: RemoteSegment, timestamp: int, start: int) -> OffsetAndTimestamp | None:
        try:
            fd = os.open(remote.log_path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            position = remote.lookup(start) if remote.base_offset <= start else 0
            for info in iter_batch_headers(fd, position, remote.size_in_bytes):
                if info.max_timestamp >= timestamp and info.last_offset >= start:
                    found = self._search_batch(os.pread(fd, info.size, info.position), timestamp, start)
                    if found is not None:
                        return found
        finally:
            os.close(fd)
        return None

    @staticmethod
    def _search_batch(data: bytes, timestamp: int, start: int) -> OffsetAndTimestamp | None:
        """``FileRecords.searchForTimestamp`` within one batch: its first record with a timestamp >= the target."""
        columns = RecordBatch(memoryview(data)).columns()
        for offset, record_timestamp in zip(columns.offsets, columns.timestamps):
            if record_timestamp >= timestamp and offset >= start:
                return OffsetAndTimestamp(offset, record_timestamp)
        return None

    def max_timestamp_offset(self) -> OffsetAndTimestamp | None:
        """ListOffsets MAX_TIMESTAMP (-3): the first record holding the largest timestamp in the local log
        (the first segment with the largest timestamp, its first batch with that MaxTimestamp, the first
        record there with it: ``offsetOfMaxTimestamp``); None for an empty log."""
        best = None
        for segment in self.local:
            if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        target = best.max_timestamp
        for info in best.batches(best.lookup(best.offset_of_max_timestamp)):
            if info.max_timestamp == target:
                columns = RecordBatch(memoryview(best.pread(info.size, info.position))).columns()
                for offset, timestamp in zip(columns.offsets, columns.timestamps):
                    if timestamp == target:
                        return OffsetAndTimestamp(offset, timestamp)
                return None
        return None

    def offset_after_remote_segment(self, offset: int) -> int:
        """The offset after the remote segment holding ``offset`` (a remote read's upper bound)."""
        remote_segments = self.log.remote_segments
        index = bisect_right([segment.base_offset for segment in remote_segments], offset) - 1
        return remote_segments[index].next_offset if index >= 0 else offset

    def read_remote(self, offset: int, max_bytes: int, min_one_message: bool) -> LogRead:
        """Read ``offset`` from the remote tier as ``RemoteLogManager.read`` does, after the store's read
        latency (§5): the first batch whose last offset >= ``offset``; if it exceeds ``max_bytes`` and
        ``min_one_message`` is false, empty records (not flagged, as upstream); else up to
        ``max(first batch, max_bytes)`` (``max_bytes`` without ``min_one_message``) raw bytes of that one
        segment, possibly ending with a partial batch. OffsetOutOfRange when the offset is not there.
        Thread-safe with respect to the event loop's calls (it touches only remote files)."""
        if max_bytes < 0:
            raise ValueError(f"invalid max size {max_bytes}")
        log = self.log
        high_watermark = log.high_watermark
        log_start = log.log_start_offset
        last_stable = log.last_stable_offset
        remote_segments = log.remote_segments
        store = log.remote
        if store is None or not log.config.remote_storage_enable:
            raise OffsetOutOfRange(offset, log_start, high_watermark, "this log has no remote tier")
        if store.read_latency_ms > 0:
            time.sleep(store.read_latency_ms / 1000)
        if offset < log_start:
            raise OffsetOutOfRange(offset, log_start, high_watermark)
        index = bisect_right([segment.base_offset for segment in remote_segments], offset) - 1
        if index < 0 or remote_segments[index].end_offset < offset:
            raise OffsetOutOfRange(offset, log_start, high_watermark,
                                   f"offset {offset} is not in the remote tier of {log.name}")
        segment = remote_segments[index]
        try:
            fd = os.open(segment.log_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise OffsetOutOfRange(offset, log.log_start_offset, log.high_watermark,
                                   f"remote segment {segment.base_offset} of {log.name} is gone") from None
        try:
            first = segment.find_batch(fd, offset)
            if first is None:
                return LogRead(b"", False, high_watermark, log_start, last_stable)
            if not min_one_message and first.size > max_bytes:
                # RemoteLogManager.read answers empty records here (firstEntryIncomplete stays false)
                return LogRead(b"", False, high_watermark, log_start, last_stable)
            buffer = max(first.size, max_bytes) if min_one_message else max_bytes
            size = min(buffer, segment.size_in_bytes - first.position)
            data = os.pread(fd, size, first.position)
        finally:
            os.close(fd)
        return LogRead(data, False, high_watermark, log_start, last_stable)

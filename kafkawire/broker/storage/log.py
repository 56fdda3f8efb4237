"""PartitionLog: one partition's durable log, Kafka's ``UnifiedLog`` + ``LocalLog`` for a single replica.

Everything but ``read_remote`` is meant to be called from one thread (the broker's event loop); calls
are short apart from plain file I/O. ``read_remote`` only touches the remote tier's files and immutable
snapshots of its metadata, so it may run in a worker thread.
"""
from __future__ import annotations

import os
import shutil
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from struct import Struct
from typing import NamedTuple

from crc32c import crc32c

from ...error_codes import ErrorCode
from ...records.batch import RecordBatch
from ...records.compression import DEFAULT_DECOMPRESSED_LIMIT
from ...records.layouts import ATTRIBUTES_OFFSET, CRC_OFFSET
from .config import LogConfig
from .descriptors import DescriptorCache
from .errors import LogAppendError, OffsetInRemoteTier, OffsetOutOfRange
from .file_records import FileRecords
from .producer_state import CorruptSnapshot, ProducerStateManager, read_snapshot, write_snapshot
from .remote import RemoteSegment, RemoteStore
from .segment import LogSegment, iter_batch_headers, segment_name
from .validation import ValidatedBatch, validate_produce_records

__all__ = ["PartitionLog", "AppendResult", "LogRead", "LogOffsetMetadata", "OffsetAndTimestamp"]

_INT64 = Struct(">q")
_INT32 = Struct(">i")
_INT16 = Struct(">h")
_UINT32 = Struct(">I")
_INT32_MAX = 0x7FFFFFFF
_MAX_TIMESTAMP_OFFSET = 35
_LEADER_EPOCH_OFFSET = 12
_CLEAN_SHUTDOWN = ".kafkawire-clean-shutdown"
_SNAPSHOT_SUFFIX = ".snapshot"


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime topics (a duplicate returns its batch's timestamp, as Kafka does)
    log_start_offset: int
    duplicate: bool = False


class LogOffsetMetadata(NamedTuple):
    """An offset and where its batch sits: Kafka's ``LogOffsetMetadata``."""

    message_offset: int
    segment_base_offset: int
    relative_position: int


@dataclass(slots=True)
class LogRead:
    records: bytes | FileRecords  # raw log bytes; may end with a partial batch; b"" when nothing
    first_entry_incomplete: bool  # the first batch did not fit (v3+ callers replace the records with empty)
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    fetch_offset_metadata: LogOffsetMetadata | None = None  # where the read started (None for remote reads)


class OffsetAndTimestamp(NamedTuple):
    """A ListOffsets answer: the offset found and the timestamp of that record."""

    offset: int
    timestamp: int


class PartitionLog:
    """A partition's log in ``directory`` (``DATA/<topic>-<partition>``), opened and recovered on construction.

    The high watermark is the log end offset (a single replica) and so is the last stable offset (this
    broker refuses transactional writes, so no transaction is ever open).
    """

    def __init__(self, directory: Path, config: LogConfig | None = None, remote: RemoteStore | None = None,
                 now_ms: Callable[[], int] | None = None, *, leader_epoch: int = 0,
                 descriptors: DescriptorCache | None = None):
        self.directory = Path(directory)
        self._descriptors = descriptors  # shared with other logs: a bound on open segment files
        self.config = config if config is not None else LogConfig()
        self.name = self.directory.name
        self.remote = remote
        self.leader_epoch = leader_epoch
        self._clock = now_ms if now_ms is not None else _wall_clock_ms
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._remote_segments: tuple[RemoteSegment, ...] = ()
        self._producers = ProducerStateManager(self.config.producer_id_expiration_ms)
        self._snapshots: list[int] = []  # offsets of the producer snapshot files, ascending
        self._closed = False
        self._roll_requested = False
        self.log_start_offset = 0
        self.recovered_bytes_truncated = 0  # what opening cut off a torn or corrupt tail
        self.directory.mkdir(parents=True, exist_ok=True)
        self._load()

    # ---- offsets --------------------------------------------------------------------------------
    @property
    def tiered(self) -> bool:
        """Remote storage enabled for this log and a remote store to use."""
        return self.config.remote_storage_enable and self.remote is not None

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._segments[-1].next_offset

    @property
    def last_stable_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def local_log_start_offset(self) -> int:
        return max(self.log_start_offset, self._segments[0].base_offset)

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """The last offset copied to the remote tier, -1 when none (``highestOffsetInRemoteStorage``)."""
        remote = self._remote_segments
        return remote[-1].end_offset if remote else -1

    @property
    def end_offset_metadata(self) -> LogOffsetMetadata:
        active = self._segments[-1]
        return LogOffsetMetadata(active.next_offset, active.base_offset, active.size)

    @property
    def size_in_bytes(self) -> int:
        """The local log's size (``UnifiedLog.size``)."""
        return sum(segment.size for segment in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def remote_segments(self) -> tuple[RemoteSegment, ...]:
        return self._remote_segments

    @property
    def producers(self):
        """The producer state: producer id -> ProducerStateEntry."""
        return self._producers.producers

    # ---- opening --------------------------------------------------------------------------------
    def _load(self) -> None:
        directory = self.directory
        for path in directory.glob("*.tmp"):
            path.unlink(missing_ok=True)
        bases = sorted(int(path.stem) for path in directory.glob("*.log") if path.stem.isdigit())
        for path in directory.glob("*.index"):  # an index whose log was deleted
            if path.stem.isdigit() and int(path.stem) not in bases:
                path.unlink(missing_ok=True)
        if self.tiered:
            self._remote_segments = tuple(self.remote.list_segments(self.name))
        now = self._clock()
        if not bases:
            base = self._remote_segments[-1].next_offset if self._remote_segments else 0
            self._add_segment(LogSegment(directory, base, self.config.index_interval_bytes, create=True, now_ms=now,
                                         descriptors=self._descriptors))
        else:
            for base in bases:
                self._add_segment(LogSegment(directory, base, self.config.index_interval_bytes, now_ms=now,
                                             descriptors=self._descriptors))
            for segment, following in zip(self._segments, self._segments[1:]):
                segment.next_offset = following.base_offset
            self._open_active()
        first_local = self._segments[0].base_offset
        self.log_start_offset = first_local
        if self._remote_segments and self._remote_segments[0].base_offset < first_local:
            self.log_start_offset = self._remote_segments[0].base_offset
        self._load_producer_state(now)

    def _open_active(self) -> None:
        active = self._segments[-1]
        marker = self.directory / _CLEAN_SHUTDOWN
        clean = False
        try:
            clean = marker.read_text().split() == [str(active.base_offset), str(active.size)]
        except (OSError, ValueError):
            pass
        marker.unlink(missing_ok=True)
        if clean:
            last = active.find_last_batch()
            if (last is None and active.size == 0) or (last is not None and last.end == active.size):
                active.next_offset = last.next_offset if last is not None else active.base_offset
                return
        self.recovered_bytes_truncated = active.recover()

    def _load_producer_state(self, now: int) -> None:
        snapshots = sorted(int(path.stem) for path in self.directory.glob(f"*{_SNAPSHOT_SUFFIX}")
                           if path.stem.isdigit())
        leo = self.log_end_offset
        for offset in [offset for offset in snapshots if offset > leo]:  # beyond a truncated tail
            self._snapshot_path(offset).unlink(missing_ok=True)
            snapshots.remove(offset)
        start = self.local_log_start_offset
        self._producers.clear(start)
        while snapshots:
            offset = snapshots[-1]
            try:
                self._producers.load(read_snapshot(self._snapshot_path(offset)), offset, now)
                start = max(offset, start)
                break
            except (OSError, CorruptSnapshot):
                self._snapshot_path(offset).unlink(missing_ok=True)
                snapshots.pop()
        self._snapshots = snapshots
        if start < leo:
            for segment in self._segments[max(0, self._segment_index(start)):]:
                position = segment.lookup(start) if segment.base_offset <= start else 0
                for info in segment.batches(position):
                    if info.last_offset >= start:
                        self._producers.replay(info)
        self._producers.map_end_offset = leo

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def _segment_index(self, offset: int) -> int:
        """The index of the segment with the greatest base offset <= ``offset`` (-1 when none)."""
        return bisect_right(self._bases, offset) - 1

    def _snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{segment_name(offset)}{_SNAPSHOT_SUFFIX}"

    # ---- appending ------------------------------------------------------------------------------
    def append(self, records, *, now_ms: int | None = None) -> AppendResult:
        """Append a Produce request's records for this partition (one magic-2 batch, base offset 0):
        ``validate`` then ``append_batch``.

        Raises LogAppendError with Kafka's code (see ``validation``; INVALID_PRODUCER_EPOCH,
        OUT_OF_ORDER_SEQUENCE_NUMBER from the producer state; RECORD_LIST_TOO_LARGE when the batch is larger
        than a segment; KAFKA_STORAGE_ERROR when the write fails). Nothing is appended on error.
        """
        now = now_ms if now_ms is not None else self._clock()
        return self.append_batch(self.validate(records, now), now_ms=now)

    def validate(self, records, now_ms: int, decompressed_limit: int = DEFAULT_DECOMPRESSED_LIMIT) -> ValidatedBatch:
        """Check a Produce request's records against this log's config (raises LogAppendError). Reads
        nothing but the records and the config, so it may run on a worker thread while the loop appends."""
        batch = validate_produce_records(records, self.config, now_ms, self.name, decompressed_limit)
        if batch.size > self.config.segment_bytes:
            raise LogAppendError(ErrorCode.RECORD_LIST_TOO_LARGE,
                                 f"Message batch size is {batch.size} bytes in append to partition {self.name}, "
                                 f"which exceeds the maximum configured segment size of {self.config.segment_bytes}.")
        return batch

    def append_batch(self, batch: ValidatedBatch, *, now_ms: int | None = None) -> AppendResult:
        """Append a batch ``validate`` accepted: offsets, producer state, the write (see ``append``)."""
        if self._closed:
            raise LogAppendError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log of {self.name} is closed")
        now = now_ms if now_ms is not None else self._clock()
        config = self.config
        base_offset = self.log_end_offset
        last_offset = base_offset + batch.last_offset_delta
        active = self._segments[-1]
        if self._should_roll(active, batch.size, batch.new_max_timestamp, last_offset, now):
            self._roll(now)
            active = self._segments[-1]
        producer_id = batch.producer_id
        if producer_id >= 0:
            duplicate = self._producers.check(producer_id, batch.producer_epoch, batch.base_sequence,
                                              batch.last_sequence, base_offset)
            if duplicate is not None:
                # UnifiedLog.append: the original offsets, and logAppendTime = the duplicate's timestamp
                return AppendResult(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                                    self.log_start_offset, True)
        data = bytearray(batch.view)
        _INT64.pack_into(data, 0, base_offset)
        _INT32.pack_into(data, _LEADER_EPOCH_OFFSET, self.leader_epoch)
        if batch.new_attributes != batch.attributes or batch.new_max_timestamp != batch.max_timestamp:
            # DefaultRecordBatch.setMaxTimestamp: attributes and MaxTimestamp are under the CRC
            _INT16.pack_into(data, ATTRIBUTES_OFFSET, batch.new_attributes)
            _INT64.pack_into(data, _MAX_TIMESTAMP_OFFSET, batch.new_max_timestamp)
            _UINT32.pack_into(data, CRC_OFFSET, crc32c(memoryview(data)[ATTRIBUTES_OFFSET:]))
        try:
            active.write(data, last_offset, batch.new_max_timestamp)
        except OSError as error:
            raise LogAppendError(ErrorCode.KAFKA_STORAGE_ERROR,
                                 f"Error while appending records to {self.name}: {error}") from None
        if producer_id >= 0:
            self._producers.update(producer_id, batch.producer_epoch, batch.last_sequence, last_offset,
                                   batch.last_offset_delta, batch.new_max_timestamp)
        self._producers.map_end_offset = last_offset + 1
        return AppendResult(base_offset, last_offset, now if config.log_append_time else -1, self.log_start_offset)

    def _should_roll(self, active: LogSegment, size: int, max_timestamp: int, last_offset: int, now: int) -> bool:
        """``LogSegment.shouldRoll``: full, old (segment.ms, from the first batch's timestamp), or the
        offset would not fit the index's int32 relative offsets."""
        if active.size > self.config.segment_bytes - size:
            return True
        if active.size > 0:
            first = active.first_batch_timestamp
            waited = max_timestamp - first if first is not None and first >= 0 else now - active.created_ms
            if waited > self.config.segment_ms:
                return True
        return last_offset - active.base_offset > _INT32_MAX

    def roll(self) -> None:
        """Close the active segment and start a new one at the log end offset (nothing if it is empty)."""
        self._roll(self._clock())

    def _roll(self, now: int) -> None:
        active = self._segments[-1]
        if active.size == 0:
            return  # Kafka deletes and recreates an empty active segment: the same thing
        active.close_index_writer()
        leo = active.next_offset
        self._add_segment(LogSegment(self.directory, leo, self.config.index_interval_bytes, create=True, now_ms=now,
                                     descriptors=self._descriptors))
        self._take_snapshot()

    def _take_snapshot(self) -> None:
        leo = self.log_end_offset
        if self._snapshots and self._snapshots[-1] >= leo:
            return
        write_snapshot(self._snapshot_path(leo), self._producers.producers)
        self._snapshots.append(leo)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle longer than producer.id.expiration.ms; returns how many."""
        return self._producers.remove_expired(now_ms if now_ms is not None else self._clock())

    # ---- reading --------------------------------------------------------------------------------
    def _check_range(self, offset: int) -> None:
        start = self.log_start_offset
        leo = self._segments[-1].next_offset
        if offset < start or offset > leo:
            raise OffsetOutOfRange(offset, start, leo)
        local_start = self._segments[0].base_offset  # the local log start, as offset >= start here
        if offset < local_start:
            if self.tiered:
                raise OffsetInRemoteTier(offset, start, leo, local_start)
            raise OffsetOutOfRange(offset, start, leo)

    def _bound(self, isolation_bound: int | None) -> int:
        leo = self.log_end_offset
        return leo if isolation_bound is None else min(isolation_bound, leo)

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where the batch holding ``offset`` starts (for the log end offset: the end of the active segment)."""
        self._check_range(offset)
        return self._metadata(offset)

    def _metadata(self, offset: int) -> LogOffsetMetadata:
        if offset >= self.log_end_offset:
            return self.end_offset_metadata
        for segment in self._segments[max(0, self._segment_index(offset)):]:
            info = segment.translate(offset)
            if info is not None:
                return LogOffsetMetadata(offset, segment.base_offset, info.position)
        return self.end_offset_metadata

    def read(self, offset: int, max_bytes: int, min_one_message: bool, isolation_bound: int | None = None, *,
             as_file: bool = False) -> LogRead:
        """Read from ``offset`` as ``UnifiedLog.read`` / ``LocalLog.read`` / ``LogSegment.read`` do (§4.3).

        OffsetOutOfRange below the log start or above the log end; OffsetInRemoteTier for an offset only in
        the remote tier. ``isolation_bound`` (default: the high watermark = log end) bounds what is read;
        at or beyond it the read is empty. Otherwise the slice starts at the batch holding ``offset`` (a
        mid-batch offset returns the whole batch), holds at most ``max(max_bytes, first batch)`` bytes
        when ``min_one_message`` (else ``max_bytes``), may end with a partial batch, and never spans
        segments. ``as_file``: the records are a ``FileRecords`` slice of the segment (for sendfile)
        instead of bytes read from it.
        """
        if max_bytes < 0:
            raise ValueError(f"invalid max size {max_bytes}")
        self._check_range(offset)
        segments = self._segments
        active = segments[-1]
        leo = active.next_offset  # also the high watermark and the last stable offset
        log_start = self.log_start_offset
        if isolation_bound is None or isolation_bound >= leo:
            bound, bound_segment, bound_position = leo, active.base_offset, active.size
        else:
            bound = isolation_bound
        if offset >= bound:
            return LogRead(b"", False, leo, log_start, leo, self._metadata(offset))
        if bound < leo:
            _, bound_segment, bound_position = self._metadata(bound)
        for index in range(max(0, self._segment_index(offset)), len(segments)):
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
            fetch_metadata = LogOffsetMetadata(offset, base, position)
            adjusted = max(max_bytes, first_size) if min_one_message else max_bytes
            if adjusted == 0:
                return LogRead(b"", False, leo, log_start, leo, fetch_metadata)
            fetch_size = min(max_position - position, adjusted)
            records = (FileRecords(segment.slice_source, position, fetch_size) if as_file and fetch_size > 0
                       else segment.pread(fetch_size, position))
            return LogRead(records, adjusted < first_size, leo, log_start, leo, fetch_metadata)
        return LogRead(b"", False, leo, log_start, leo, self.end_offset_metadata)

    def bytes_available(self, offset: int, max_bytes: int, isolation_bound: int | None = None) -> int:
        """For a parked fetch (§4.6 G): ``min(bound position - fetch position, max_bytes)`` when the fetch
        offset and the bound are on the same segment; 0 at or beyond the bound. Raises OffsetOutOfRange
        (OffsetInRemoteTier) as ``read`` does. See ``must_complete_fetch`` for case F."""
        self._check_range(offset)
        bound = self._bound(isolation_bound)
        if offset >= bound:
            return 0
        fetch = self._metadata(offset)
        end = self._metadata(bound)
        if fetch.segment_base_offset == end.segment_base_offset:
            return max(0, min(end.relative_position - fetch.relative_position, max_bytes))
        segment = self._segments[self._segment_index(fetch.segment_base_offset)]
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
            fetch_metadata = self._metadata(offset)
        return fetch_metadata.segment_base_offset < self._metadata(bound).segment_base_offset

    # ---- timestamps -----------------------------------------------------------------------------
    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """ListOffsets by timestamp: the first record (from the log start) whose timestamp >= ``timestamp``,
        with that record's timestamp; None when there is none (``fetchOffsetByTimestamp``). The remote tier
        is searched first when the log is tiered."""
        start = self.log_start_offset
        if self.tiered:
            local_start = self.local_log_start_offset
            for remote in self._remote_segments:
                if remote.end_offset < start or remote.base_offset >= local_start:
                    continue
                if remote.max_timestamp >= timestamp:
                    found = self._search_remote(remote, timestamp, start)
                    if found is not None:
                        return found
            start = max(start, local_start)
        for segment in self._segments:
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
        for segment in self._segments:
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

    # ---- retention and the remote tier ----------------------------------------------------------
    def apply_retention(self, now_ms: int | None = None, *, copy_to_remote: bool = True) -> int:
        """Kafka's ``deleteOldSegments`` (and, tiered, the RLM copy and expiration tasks): returns the
        number of segments deleted, local and remote.

        Untiered: whole segments are deleted from the oldest while retention.bytes / retention.ms are
        breached (the active one too, after rolling), advancing the log start offset. Tiered: closed
        segments are first copied to the remote store; local segments are deleted under
        local.retention.* once copied (advancing the local log start offset only); remote segments are
        deleted under retention.* (advancing the log start offset).

        ``copy_to_remote=False``: the caller copies segments itself first (``segments_to_copy`` and
        ``add_remote_segment``, the file copies on a worker thread); a segment rolled here is copied
        and deleted at the next run.
        """
        now = now_ms if now_ms is not None else self._clock()
        removed = 0
        for _ in range(2):  # a tiered log rolls a breached active segment, then copies and deletes it
            if self.tiered and copy_to_remote:
                self._copy_to_remote()
            removed += self._delete_log_start_breached()
            removed += self._delete_retention_size_breached()
            removed += self._delete_retention_ms_breached(now)
            if not (self.tiered and self._roll_requested):
                break
            self._roll_requested = False
            self._roll(now)
        if self.tiered:
            removed += self._expire_remote(now)
            removed += self._delete_log_start_breached()
        self._delete_old_snapshots()
        return removed

    def _copy_to_remote(self) -> None:
        for segment in self.segments_to_copy():
            self.add_remote_segment(self.remote.copy_segment(self.name, segment))

    def segments_to_copy(self) -> list[LogSegment]:
        """Closed segments below the high watermark not yet in the remote tier, oldest first."""
        if not self.tiered:
            return []
        highest = self.highest_offset_in_remote_storage
        bound = min(self.high_watermark, self.last_stable_offset)
        return [segment for segment in self._segments[:-1]
                if highest < segment.next_offset - 1 and segment.next_offset <= bound and segment.size > 0]

    def add_remote_segment(self, remote: RemoteSegment) -> None:
        """A segment's finished copy: it now counts as in the remote tier (if it is still the next one)."""
        if remote.end_offset > self.highest_offset_in_remote_storage and not self._closed:
            self._remote_segments = (*self._remote_segments, remote)

    def _deletable(self, predicate) -> list[LogSegment]:
        """``UnifiedLog.deletableSegments``: from the oldest, while the predicate holds."""
        deletable = []
        segments = self._segments
        tiered = self.tiered
        high_watermark = self.high_watermark
        highest_remote = self.highest_offset_in_remote_storage
        for index, segment in enumerate(segments):
            following = segments[index + 1] if index + 1 < len(segments) else None
            upper = following.base_offset if following is not None else self.log_end_offset
            if not (high_watermark >= upper and predicate(segment, following)):
                break
            if tiered and following is None and segment.size > 0:
                self._roll_requested = True
            if following is None and segment.size == 0:
                break
            if tiered and not ((upper > 0 and upper - 1 <= highest_remote)
                               or (following is not None and self.log_start_offset >= following.base_offset)):
                break
            deletable.append(segment)
        return deletable

    def _delete_segments(self, deletable: list[LogSegment]) -> int:
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            self._roll(self._clock())
        count = len(deletable)
        new_start = self._segments[count].base_offset
        if not self.tiered:
            self.log_start_offset = max(self.log_start_offset, new_start)
        del self._segments[:count]
        del self._bases[:count]
        for segment in deletable:
            segment.delete()
        return count

    def _delete_log_start_breached(self) -> int:
        start = self.local_log_start_offset if self.tiered else self.log_start_offset
        return self._delete_segments(self._deletable(
            lambda segment, following: following is not None and following.base_offset <= start))

    def _delete_retention_size_breached(self) -> int:
        retention = self.config.effective_local_retention_bytes if self.tiered else self.config.retention_bytes
        size = self.size_in_bytes
        if retention < 0 or size < retention:
            return 0
        diff = size - retention

        def breached(segment: LogSegment, _following) -> bool:
            nonlocal diff
            if diff - segment.size >= 0:
                diff -= segment.size
                return True
            return False

        return self._delete_segments(self._deletable(breached))

    def _delete_retention_ms_breached(self, now: int) -> int:
        retention = self.config.effective_local_retention_ms if self.tiered else self.config.retention_ms
        if retention < 0:
            return 0
        return self._delete_segments(self._deletable(
            lambda segment, _following: now - segment.largest_timestamp() > retention))

    def _expire_remote(self, now: int) -> int:
        """The RLM expiration task: remote segments past retention.ms / retention.bytes (counted over the
        remote segments plus the local data not yet copied) are deleted, advancing the log start offset."""
        remote = list(self._remote_segments)
        if not remote:
            return 0
        retention_ms, retention_bytes = self.config.retention_ms, self.config.retention_bytes
        highest = remote[-1].end_offset
        total = sum(segment.size_in_bytes for segment in remote)
        total += sum(segment.size for segment in self._segments if segment.base_offset > highest)
        breached_bytes = total - retention_bytes if retention_bytes >= 0 else -1
        expired = []
        for segment in remote:
            if segment.end_offset < self.log_start_offset:
                expired.append(segment)
            elif retention_ms >= 0 and segment.max_timestamp <= now - retention_ms:
                expired.append(segment)
                breached_bytes -= segment.size_in_bytes
            elif breached_bytes >= 0 and breached_bytes - segment.size_in_bytes >= 0:
                expired.append(segment)
                breached_bytes -= segment.size_in_bytes
            else:
                break
        if not expired:
            return 0
        self.log_start_offset = max(self.log_start_offset, expired[-1].end_offset + 1)
        self._remote_segments = tuple(remote[len(expired):])
        for segment in expired:
            self.remote.delete_segment(segment)
        return len(expired)

    def _delete_old_snapshots(self) -> None:
        """Snapshots below the local log start go (Kafka deletes those of deleted segments); the latest stays."""
        start = self.local_log_start_offset
        keep = [offset for offset in self._snapshots[:-1] if offset >= start] + self._snapshots[-1:]
        for offset in self._snapshots:
            if offset not in keep:
                self._snapshot_path(offset).unlink(missing_ok=True)
        self._snapshots = keep

    def read_remote(self, offset: int, max_bytes: int, min_one_message: bool) -> LogRead:
        """Read ``offset`` from the remote tier as ``RemoteLogManager.read`` does, after the store's read
        latency (§5): the first batch whose last offset >= ``offset``; if it exceeds ``max_bytes`` and
        ``min_one_message`` is false, empty records (not flagged, as upstream); else up to
        ``max(first batch, max_bytes)`` (``max_bytes`` without ``min_one_message``) raw bytes of that one
        segment, possibly ending with a partial batch. OffsetOutOfRange when the offset is not there.
        Thread-safe with respect to the event loop's calls (it touches only remote files)."""
        if max_bytes < 0:
            raise ValueError(f"invalid max size {max_bytes}")
        high_watermark = self.high_watermark
        log_start = self.log_start_offset
        last_stable = self.last_stable_offset
        remote_segments = self._remote_segments
        store = self.remote
        if store is None or not self.config.remote_storage_enable:
            raise OffsetOutOfRange(offset, log_start, high_watermark, "this log has no remote tier")
        if store.read_latency_ms > 0:
            time.sleep(store.read_latency_ms / 1000)
        if offset < log_start:
            raise OffsetOutOfRange(offset, log_start, high_watermark)
        index = bisect_right([segment.base_offset for segment in remote_segments], offset) - 1
        if index < 0 or remote_segments[index].end_offset < offset:
            raise OffsetOutOfRange(offset, log_start, high_watermark,
                                   f"offset {offset} is not in the remote tier of {self.name}")
        segment = remote_segments[index]
        try:
            fd = os.open(segment.log_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.high_watermark,
                                   f"remote segment {segment.base_offset} of {self.name} is gone") from None
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

    # ---- lifecycle ------------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync every segment with unflushed writes (Kafka flushes on its own schedule; so does the caller)."""
        for segment in self._segments:
            segment.flush()

    def close(self) -> None:
        """Flush, snapshot the producer state at the log end, mark the shutdown clean and close the files."""
        if self._closed:
            return
        self._closed = True
        self.flush()
        self._take_snapshot()
        active = self._segments[-1]
        marker = self.directory / _CLEAN_SHUTDOWN
        tmp = marker.with_name(marker.name + ".tmp")
        tmp.write_text(f"{active.base_offset} {active.size}")
        os.replace(tmp, marker)
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        """Close and remove the partition's files, local and remote (DeleteTopics)."""
        self.detach()
        self.remove_files()

    def detach(self) -> None:
        """Stop serving: close every segment (on the loop's thread, which reads them)."""
        self._closed = True
        for segment in self._segments:
            segment.close()

    def remove_files(self) -> None:
        """Remove the files of a detached log, local and remote (may run on a worker thread)."""
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.remote is not None:
            self.remote.delete_partition(self.name)
        self._remote_segments = ()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PartitionLog({self.name!r}, log_start_offset={self.log_start_offset}, "
                f"local_log_start_offset={self.local_log_start_offset}, log_end_offset={self.log_end_offset}, "
                f"segments={len(self._segments)}, remote_segments={len(self._remote_segments)})")

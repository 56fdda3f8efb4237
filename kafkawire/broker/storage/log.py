"""PartitionLog: one partition's durable log, Kafka's ``UnifiedLog`` for a single replica.

A partition log is made of collaborators it owns: its local segments (``LocalLog``), the producer
state and its snapshot files, a reader (``LogReader``: KIP-74 reads, offsets by timestamp, the remote
tier), retention (``LogRetention``) and transactions (``LogTransactions``: markers, the last stable
offset, aborted transactions). It keeps the offsets that tie them together (the log start offset,
the remote segments) and appends.

Everything but ``read_remote`` is meant to be called from one thread (the broker's event loop); calls
are short apart from plain file I/O. ``read_remote`` only touches the remote tier's files and immutable
snapshots of its metadata, so it may run in a worker thread.
"""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from struct import Struct

from ...codec.base import Bytes
from ...error_codes import ErrorCode
from ...records.batch import TRANSACTIONAL_FLAG
from ...records.checksums import crc32c
from ...records.layouts import ATTRIBUTES_OFFSET, CRC_OFFSET
from .cleaner.files import commit_swap, finish_swap, recover_interrupted_swaps
from .config import LogConfig
from .descriptors import DescriptorCache
from .errors import LogAppendError, OffsetOutOfRange
from .leader_epochs import LeaderEpochCache
from .local_log import LocalLog, LogOffsetMetadata
from .log_reads import LogRead, LogReader, OffsetAndTimestamp
from .log_retention import LogRetention
from .log_transactions import LogTransactions
from .producer_snapshots import ProducerSnapshots
from .producer_state import ProducerStateEntry, ProducerStateManager
from .remote import RemoteSegment, RemoteStore
from .segment import LogSegment, segment_name
from .transaction_index import AbortedTxn
from .validation import DecompressionBudget, ValidatedBatch, validate_produce_records

__all__ = ["PartitionLog", "AppendResult", "LogRead", "LogOffsetMetadata", "OffsetAndTimestamp"]

_INT64 = Struct(">q")
_INT32 = Struct(">i")
_INT16 = Struct(">h")
_UINT32 = Struct(">I")
_INT32_MAX = 0x7FFFFFFF
_MAX_TIMESTAMP_OFFSET = 35
_LEADER_EPOCH_OFFSET = 12
_CLEAN_SHUTDOWN = ".kafkawire-clean-shutdown"
# What opening a log's files makes: a lazy log opens them on first use of any of it.
_OPENED = frozenset({"local", "remote_segments", "producer_state", "snapshots", "reader", "retention", "transactions",
                     "log_start_offset", "recovered_bytes_truncated", "leader_epochs"})
# The log start offset DeleteRecords moved past the first segment's base (Kafka's log-start-offset-checkpoint)
LOG_START_FILE = "log-start-offset"


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime topics (a duplicate returns its batch's timestamp, as Kafka does)
    log_start_offset: int
    duplicate: bool = False


class PartitionLog:
    """A partition's log in ``directory`` (``DATA/<topic>-<partition>``), opened and recovered on construction.

    The high watermark is the log end offset (a single replica); the last stable offset is the start of
    the oldest open transaction, or the high watermark (``log_transactions``).
    """

    def __init__(self, directory: str | Path, config: LogConfig | None = None, remote: RemoteStore | None = None,
                 now_ms: Callable[[], int] | None = None, *, leader_epoch: int = 0,
                 descriptors: DescriptorCache | None = None, lazy: bool = False):
        """With ``lazy`` (a broker's start), the files are opened and recovered on the log's first use,
        as Kafka's ``LazyIndex`` opens an index: a start costs nothing per partition."""
        self._directory = os.fspath(directory)  # a string: a Path per partition costs time and memory
        self.config = config if config is not None else LogConfig()
        self.name = os.path.basename(self._directory)
        self.remote = remote
        self.leader_epoch = leader_epoch
        self.now_ms: Callable[[], int] = now_ms if now_ms is not None else _wall_clock_ms
        self._descriptors = descriptors
        self._closed = False
        self._loaded = False
        self.offline = False  # its log directory failed: KAFKA_STORAGE_ERROR to every request (broker.log_dirs)
        # a new log whose folder a worker thread is making (``make_folder``): a half-made folder is new, not
        # one a crash left without its clean-shutdown marker
        self.folder_pending = False
        # idle_empty_offset's answer, kept while the log stays unopened: until then its folder changes only
        # by the folder maker, which makes it as it was (a ListOffsets of every partition reads no files)
        self._idle_offset: int | None = None
        if not lazy:
            self._load()

    def __getattr__(self, name: str):
        """The state opening the files makes (``_OPENED``), opened on first use of any of it."""
        if name not in _OPENED or self.__dict__.get("_loaded", True):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._load()
        return self.__dict__[name]

    @property
    def directory(self) -> Path:
        return Path(self._directory)

    @property
    def log_dir(self) -> str:
        """The log directory (one of log.dirs) holding this partition's folder."""
        return os.path.dirname(self._directory)

    # ---- offsets --------------------------------------------------------------------------------
    @property
    def tiered(self) -> bool:
        """Remote storage enabled for this log and a remote store to use."""
        return self.config.remote_storage_enable and self.remote is not None

    @property
    def log_end_offset(self) -> int:
        return self.local.end_offset

    @property
    def high_watermark(self) -> int:
        return self.local.end_offset

    @property
    def local_log_start_offset(self) -> int:
        return max(self.log_start_offset, self.local.first.base_offset)

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """The last offset copied to the remote tier, -1 when none (``highestOffsetInRemoteStorage``)."""
        remote = self.remote_segments
        return remote[-1].end_offset if remote else -1

    @property
    def end_offset_metadata(self) -> LogOffsetMetadata:
        return self.local.end_offset_metadata

    @property
    def size_in_bytes(self) -> int:
        """The local log's size (``UnifiedLog.size``)."""
        return self.local.size_in_bytes

    @property
    def opened(self) -> bool:
        """Its files opened (a lazy log's on first use)."""
        return self._loaded

    def make_folder(self) -> None:
        """Make a new log's folder as a clean close of an empty log leaves it (an empty active segment and
        the clean-shutdown marker that vouches for it), unless the log was opened or closed meanwhile. A
        worker thread does this after a creation is answered, as Kafka's brokers make a new partition's
        log once the controller has committed the topic; a log used first makes its own folder."""
        try:
            self._make_folder()
        finally:
            self.folder_pending = False

    def _make_folder(self) -> None:
        if self._loaded or self._closed or self.tiered:  # (a tiered log's first offset is the remote tier's)
            return
        os.makedirs(self._directory, exist_ok=True)
        stem = os.path.join(self._directory, segment_name(0))
        if os.path.exists(stem + ".log"):
            return
        for suffix in (".log", ".index"):
            os.close(os.open(stem + suffix, os.O_WRONLY | os.O_CREAT, 0o644))
        # (should the loop open the log meanwhile, this marker is stale: it vouches only for an empty
        # segment at offset 0, so it never passes off a log holding records as clean)
        with open(os.path.join(self._directory, _CLEAN_SHUTDOWN), "w") as marker:
            marker.write("0 0")

    def empty_on_disk(self) -> bool:
        """A log not opened since the start that holds nothing (see ``idle_empty_offset``): what retention
        and other passes over every log may skip."""
        return self.idle_empty_offset() is not None

    def idle_empty_offset(self) -> int | None:
        """For a log not opened since the start that holds nothing, its start and end offset, as its
        clean-shutdown marker and its folder say without opening it (one segment, the marker's active
        one, empty; no remote tier), or 0 for a new log whose folder is not made yet; None otherwise."""
        if self._loaded or self.tiered:
            return None
        if self._idle_offset is None:
            self._idle_offset = self._read_idle_empty_offset()
        return self._idle_offset

    def _read_idle_empty_offset(self) -> int | None:
        if self.folder_pending:  # (new, and nothing written: a write would have opened it)
            return 0
        try:
            base, size = (int(word) for word in Path(self._directory, _CLEAN_SHUTDOWN).read_text().split())
            with os.scandir(self._directory) as entries:
                logs = [entry.name for entry in entries if entry.name.endswith(".log")]
        except FileNotFoundError:
            return None if os.path.exists(self._directory) else 0
        except (OSError, ValueError):
            return None
        return base if size == 0 and logs == [f"{segment_name(base)}.log"] else None

    @property
    def closed(self) -> bool:
        """Closed, detached or deleted: no longer served."""
        return self._closed

    @property
    def segments(self) -> list[LogSegment]:
        return list(self.local.segments)

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """The producer state: producer id -> ProducerStateEntry."""
        return self.producer_state.producers

    # ---- opening --------------------------------------------------------------------------------
    def _load(self) -> None:
        self._loaded = True
        directory = self.directory
        self.local = LocalLog(directory, self._descriptors)
        self.remote_segments: tuple[RemoteSegment, ...] = ()  # the remote tier's, oldest first
        self.producer_state = ProducerStateManager(self.config.producer_id_expiration_ms)
        self.snapshots = ProducerSnapshots(directory)
        self.reader = LogReader(self)
        self.retention = LogRetention(self)
        self.transactions = LogTransactions(self)
        self.log_start_offset = 0
        self.recovered_bytes_truncated = 0  # what opening cut off a torn or corrupt tail
        directory.mkdir(parents=True, exist_ok=True)
        for path in directory.glob("*.tmp"):
            path.unlink(missing_ok=True)
        recover_interrupted_swaps(directory)  # a crash in the middle of the log cleaner's swap
        bases = sorted(int(path.stem) for path in directory.glob("*.log") if path.stem.isdigit())
        for path in directory.glob("*.index"):  # an index whose log was deleted
            if path.stem.isdigit() and int(path.stem) not in bases:
                path.unlink(missing_ok=True)
        if self.tiered:
            assert self.remote is not None
            self.remote_segments = tuple(self.remote.list_segments(self.name))
        now = self.now_ms()
        interval = self.config.index_interval_bytes
        if not bases:
            base = self.remote_segments[-1].next_offset if self.remote_segments else 0
            self.local.open_segment(base, interval, now, create=True)
            (directory / _CLEAN_SHUTDOWN).unlink(missing_ok=True)  # (make_folder's, if it got that far)
        else:
            for base in bases:
                self.local.open_segment(base, interval, now, create=False)
            for segment, following in zip(self.local.segments, self.local.segments[1:]):
                segment.next_offset = following.base_offset
            self._open_active()
        first_local = self.local.first.base_offset
        self.log_start_offset = first_local
        if self.remote_segments and self.remote_segments[0].base_offset < first_local:
            self.log_start_offset = self.remote_segments[0].base_offset
        try:  # DeleteRecords may have moved it into the first segment
            saved = int((directory / LOG_START_FILE).read_text())
            self.log_start_offset = max(self.log_start_offset, min(saved, self.log_end_offset))
        except (OSError, ValueError):
            pass
        self._load_producer_state(now)
        self.leader_epochs = LeaderEpochCache.load(directory, (
            (batch.partition_leader_epoch, batch.base_offset)  # (an empty segment's file is not opened)
            for segment in self.local if segment.size for batch in segment.batches()))
        self.leader_epochs.truncate_from_end(self.log_end_offset)
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        self.leader_epochs.assign(self.leader_epoch, self.log_end_offset)  # this replica leads from here on

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) for the requested epoch (``UnifiedLog.endOffsetForEpoch``)."""
        return self.leader_epochs.end_offset_for(epoch, self.log_end_offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1: the high watermark) and delete the
        segments wholly below it; returns the new log start offset. OffsetOutOfRange past the high watermark."""
        high_watermark = self.high_watermark
        if offset == -1:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            raise OffsetOutOfRange(offset, self.log_start_offset, high_watermark,
                                   f"Cannot increment the log start offset to {offset} of partition {self.name} "
                                   f"since it is larger than the high watermark {high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            tmp = self.directory / (LOG_START_FILE + ".tmp")
            tmp.write_text(str(offset))
            os.replace(tmp, self.directory / LOG_START_FILE)
            self.leader_epochs.truncate_from_start(offset)
            self.retention.delete_log_start_breached()
        return self.log_start_offset

    def _open_active(self) -> None:
        active = self.local.active
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
        leo = self.log_end_offset
        start = self.local_log_start_offset
        self.producer_state.clear(start)
        loaded = self.snapshots.load_latest(self.producer_state, leo, now)
        if loaded is not None:
            start = max(loaded, start)
        if start < leo:
            self.transactions.replay_batches(start)
        self.producer_state.map_end_offset = leo

    # ---- appending ------------------------------------------------------------------------------
    def append(self, records: bytes | memoryview, *, now_ms: int | None = None) -> AppendResult:
        """Append a Produce request's records for this partition (one magic-2 batch, base offset 0):
        ``validate`` then ``append_batch``.

        Raises LogAppendError with Kafka's code (see ``validation``; INVALID_PRODUCER_EPOCH,
        OUT_OF_ORDER_SEQUENCE_NUMBER from the producer state; RECORD_LIST_TOO_LARGE when the batch is larger
        than a segment; KAFKA_STORAGE_ERROR when the write fails). Nothing is appended on error.
        """
        now = now_ms if now_ms is not None else self.now_ms()
        return self.append_batch(self.validate(records, now), now_ms=now)

    def validate(self, records: Bytes, now_ms: int, budget: DecompressionBudget | None = None) -> ValidatedBatch:
        """Check a Produce request's records against this log's config (raises LogAppendError), charging
        their expansion to the request's ``budget``. Reads nothing but the records and the config, so it
        may run on a worker thread while the loop appends."""
        batch = validate_produce_records(records, self.config, now_ms, self.name, budget)
        if batch.size > self.config.segment_bytes:
            raise LogAppendError(ErrorCode.RECORD_LIST_TOO_LARGE,
                                 f"Message batch size is {batch.size} bytes in append to partition {self.name}, "
                                 f"which exceeds the maximum configured segment size of {self.config.segment_bytes}.")
        return batch

    def append_batch(self, batch: ValidatedBatch, *, now_ms: int | None = None,
                     transaction_verified: bool = False, in_place: bool = False) -> AppendResult:
        """Append a batch ``validate`` accepted: offsets, producer state, the write (see ``append``).

        A transactional batch goes in only if its producer has a transaction open here at its epoch, or
        the caller checked with the transaction coordinator that this partition is part of the
        producer's transaction (``transaction_verified``); otherwise INVALID_TXN_STATE. ``in_place``: the
        batch's bytes are the caller's own request buffer, not used after this, so the offsets are written
        into them (as Kafka's LogValidator writes them into the request's buffer) rather than a copy."""
        if self._closed:
            raise LogAppendError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log of {self.name} is closed")
        now = now_ms if now_ms is not None else self.now_ms()
        config = self.config
        base_offset = self.log_end_offset
        last_offset = base_offset + batch.last_offset_delta
        try:
            active = self.active_segment_for(batch.size, batch.new_max_timestamp, last_offset, now)
        except OSError as error:  # rolling a new segment failed
            raise LogAppendError(ErrorCode.KAFKA_STORAGE_ERROR,
                                 f"Error while rolling a segment of {self.name}: {error}") from None
        producer_id = batch.producer_id
        transactional = bool(batch.attributes & TRANSACTIONAL_FLAG)
        producers = self.producer_state
        if producer_id >= 0:
            duplicate = producers.check(producer_id, batch.producer_epoch, batch.base_sequence,
                                        batch.last_sequence, base_offset, transactional)
            if duplicate is not None:
                # UnifiedLog.append: the original offsets, and logAppendTime = the duplicate's timestamp
                return AppendResult(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                                    self.log_start_offset, True)
            if transactional and not transaction_verified and \
                    not self.transactions.has_ongoing_transaction(producer_id, batch.producer_epoch):
                raise LogAppendError(ErrorCode.INVALID_TXN_STATE, "Record was not part of an ongoing transaction")
        data = batch.view if in_place and not batch.view.readonly else bytearray(batch.view)
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
            producers.update(producer_id, batch.producer_epoch, batch.last_sequence, last_offset,
                             batch.last_offset_delta, batch.new_max_timestamp, transactional)
        producers.map_end_offset = last_offset + 1
        return AppendResult(base_offset, last_offset, now if config.log_append_time else -1, self.log_start_offset)

    def active_segment_for(self, size: int, max_timestamp: int, last_offset: int, now: int) -> LogSegment:
        """The segment to append ``size`` bytes to, rolled first when ``LogSegment.shouldRoll`` says so:
        full, old (segment.ms, from the first batch's timestamp), or the offset would not fit the
        index's int32 relative offsets."""
        active = self.local.active
        if self._should_roll(active, size, max_timestamp, last_offset, now):
            self.roll(now)
        return self.local.active

    def _should_roll(self, active: LogSegment, size: int, max_timestamp: int, last_offset: int, now: int) -> bool:
        if active.size > self.config.segment_bytes - size:
            return True
        if active.size > 0:
            first = active.first_batch_timestamp
            waited = max_timestamp - first if first is not None and first >= 0 else now - active.created_ms
            if waited > self.config.max_segment_ms:
                return True
        return last_offset - active.base_offset > _INT32_MAX

    def roll(self, now_ms: int | None = None) -> None:
        """Close the active segment and start a new one at the log end offset (nothing if it is empty),
        with a producer snapshot there."""
        now = now_ms if now_ms is not None else self.now_ms()
        if self.local.roll(self.config.index_interval_bytes, now):
            self.snapshots.take(self.log_end_offset, self.producer_state)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle longer than producer.id.expiration.ms; returns how many."""
        return self.producer_state.remove_expired(now_ms if now_ms is not None else self.now_ms())

    def truncate_to(self, offset: int) -> bool:
        """Remove everything from the batch holding ``offset`` on (``UnifiedLog.truncateTo``, which a
        follower uses to drop a diverged tail); returns whether anything was removed. The producer state
        and transaction indexes are rebuilt to match."""
        if offset >= self.log_end_offset:
            return False
        if offset < self.local_log_start_offset:
            raise ValueError(f"cannot truncate {self.name} to {offset}, below its local log start "
                             f"{self.local_log_start_offset}")
        self.local.truncate_to(offset)
        self._load_producer_state(self.now_ms())
        return True

    def replace_segments(self, old: list[LogSegment], cleaned_base: int) -> bool:
        """The log cleaner's swap (``UnifiedLog.replaceSegments``): when ``old`` are still consecutive
        closed segments of this log, the cleaned files at ``cleaned_base`` take their place on disk
        (``cleaner.files``) and one segment opened from them takes theirs here. False, and nothing
        done, otherwise (retention deleted some, the log was truncated or closed)."""
        first = self.local.position_of(old)
        if self._closed or first is None:
            return False
        commit_swap(self.directory, cleaned_base)
        for segment in old:
            segment.delete()  # a fetch's slice keeps its own descriptor of the deleted file
        finish_swap(self.directory, cleaned_base)
        cleaned = LogSegment(self.directory, cleaned_base, self.config.index_interval_bytes,
                             descriptors=self.local.descriptors)
        cleaned.next_offset = old[-1].next_offset
        self.local.replace(first, len(old), cleaned)
        return True

    # ---- reads (LogReader) ----------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, min_one_message: bool, isolation_bound: int | None = None, *,
             as_file: bool = False, through_offset: int | None = None) -> LogRead:
        """See ``LogReader.read``."""
        return self.reader.read(offset, max_bytes, min_one_message, isolation_bound, as_file=as_file,
                                through_offset=through_offset)

    def read_remote(self, offset: int, max_bytes: int, min_one_message: bool) -> LogRead:
        """See ``LogReader.read_remote`` (safe on a worker thread)."""
        return self.reader.read_remote(offset, max_bytes, min_one_message)

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        return self.reader.offset_metadata(offset)

    def bytes_available(self, offset: int, max_bytes: int, isolation_bound: int | None = None) -> int:
        return self.reader.bytes_available(offset, max_bytes, isolation_bound)

    def must_complete_fetch(self, offset: int, isolation_bound: int | None = None,
                            fetch_metadata: LogOffsetMetadata | None = None) -> bool:
        return self.reader.must_complete_fetch(offset, isolation_bound, fetch_metadata)

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        return self.reader.offset_for_timestamp(timestamp)

    def max_timestamp_offset(self) -> OffsetAndTimestamp | None:
        return self.reader.max_timestamp_offset()

    def offset_after_remote_segment(self, offset: int) -> int:
        return self.reader.offset_after_remote_segment(offset)

    # ---- retention (LogRetention) ---------------------------------------------------------------
    def apply_retention(self, now_ms: int | None = None, *, copy_to_remote: bool = True) -> int:
        """See ``LogRetention.apply_retention``."""
        return self.retention.apply_retention(now_ms, copy_to_remote=copy_to_remote)

    def segments_to_copy(self) -> list[LogSegment]:
        return self.retention.segments_to_copy()

    def add_remote_segment(self, remote: RemoteSegment) -> None:
        self.retention.add_remote_segment(remote)

    # ---- transactions (LogTransactions) ---------------------------------------------------------
    @property
    def last_stable_offset(self) -> int:
        return self.transactions.last_stable_offset

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        return self.transactions.ongoing_transactions

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        return self.transactions.has_ongoing_transaction(producer_id, producer_epoch)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, *,
                      now_ms: int | None = None) -> int:
        """See ``LogTransactions.append_marker``."""
        return self.transactions.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms=now_ms)

    def aborted_transactions(self, fetch_offset: int, fetch_position: int, fetch_size: int,
                             segment_base_offset: int) -> list[AbortedTxn]:
        return self.transactions.aborted_transactions(fetch_offset, fetch_position, fetch_size, segment_base_offset)

    def aborted_transactions_from_remote(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return self.transactions.aborted_transactions_from_remote(fetch_offset, upper_bound_offset)

    # ---- lifecycle ------------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync every segment with unflushed writes (Kafka flushes on its own schedule; so does the caller)."""
        if self._loaded:  # (never opened: nothing written)
            self.local.flush()

    def close(self) -> None:
        """Flush, snapshot the producer state at the log end, mark the shutdown clean and close the files."""
        if self._closed:
            return
        self._closed = True
        if not self._loaded:  # never opened: its files and clean-shutdown marker are as they were
            return
        self.flush()
        if self.snapshots.offsets or self.producer_state.producers or self.log_end_offset > self.local_log_start_offset:
            # (an empty log without producers or snapshots has no state to keep: opening it replays nothing)
            self.snapshots.take(self.log_end_offset, self.producer_state)
        active = self.local.active
        marker = self.directory / _CLEAN_SHUTDOWN
        tmp = marker.with_name(marker.name + ".tmp")
        tmp.write_text(f"{active.base_offset} {active.size}")
        os.replace(tmp, marker)
        self.local.close()

    def relocate(self, directory: str | Path) -> None:
        """Serve from ``directory`` from now on, which holds a copy of this log's closed files (a move
        to another log directory, AlterReplicaLogDirs): the same object, so every holder follows,
        reopened there on first use."""
        self.close()
        for name in _OPENED:
            self.__dict__.pop(name, None)
        self._directory = os.fspath(directory)
        self._closed = self._loaded = False
        self._idle_offset = None

    def delete(self) -> None:
        """Close and remove the partition's files, local and remote (DeleteTopics)."""
        self.detach()
        self.remove_files()

    def detach(self) -> None:
        """Stop serving: close every segment (on the loop's thread, which reads them)."""
        self._closed = True
        if self._loaded:
            self.local.close()

    def remove_files(self) -> None:
        """Remove the files of a detached log, local and remote (may run on a worker thread)."""
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.remote is not None:
            self.remote.delete_partition(self.name)
        self.remote_segments = ()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PartitionLog({self.name!r}, log_start_offset={self.log_start_offset}, "
                f"local_log_start_offset={self.local_log_start_offset}, log_end_offset={self.log_end_offset}, "
                f"segments={len(self.local)}, remote_segments={len(self.remote_segments)})")

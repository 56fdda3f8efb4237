"""The consumer's fetch core, sans I/O: which partitions to fetch from which broker, what to make of
the responses, and how buffered records are handed to ``poll``.

A driver (the asyncio layer, or a test) runs it::

    fetcher = Fetcher(config)                       # its MemoryPool is sized by buffer.memory
    fetcher.assign(partitions); fetcher.seek(tp, offset)   # or request_offset_reset(tp)
    fetcher.update_metadata({tp: Leader(node_id, leader_epoch)}, topic_ids)
    fetcher.set_fetch_version(node_id, negotiated_fetch_version)
    for node_id, (request, version) in fetcher.prepare_fetch_requests(now_ms).items():
        ...send request...
    # a response frame of `size` bytes arrives from node_id: reserve before reading the body
    lease = fetcher.pool.try_allocate(size)         # None: stop reading from brokers until a release
    fetcher.handle_fetch_response(node_id, request, response, version, size, now_ms, lease=lease)
    records = fetcher.poll()                        # then prepare_fetch_requests again (prefetch)

The rules, and where they come from:

* One fetch in flight per broker. Partitions with buffered records, in flight, paused, failed or
  waiting for an offset reset are left out of the next request (Kafka's AbstractFetch).
* Request order is the assignment order, and a partition whose response carried records moves to the
  end of it. Those partitions are buffered and so left out until drained; the partitions cut off by
  MaxBytes therefore lead the next request, and the first of them gets the broker's one-batch
  exemption (KIP-74's client-side round robin). In an incremental session only changed partitions are
  sent and the broker reads in session order, moving partitions that returned records to the end: the
  same rotation, kept by the broker.
* MaxBytes = fetch.max.bytes, PartitionMaxBytes = max.partition.fetch.bytes, RemotePartitionMaxBytes =
  remote.max.partition.fetch.bytes (or max.partition.fetch.bytes) on Fetch v19 only (KIP-1178, on the
  version after Kafka 4.3's newest): to a broker that stops at v18 (Kafka 4.3) the consumer sends v18,
  upstream's, without it, and that broker bounds remote reads by PartitionMaxBytes, as the KIP says.
* ``poll`` drains round robin (KIP-41): it starts with the partition after the last one it served,
  takes as many records as the budget allows from each in turn, and never returns more than
  max.poll.records. A partition with buffered records that is k-th in line is served within k + 1
  polls, however much data the others hold.
* Prefetch (KIP-41): ``prepare_fetch_requests`` sends nothing while the records retained for
  unpaused partitions are at least max.poll.records (``should_prefetch``).
* Memory (KIP-81): each fetch response is charged to the MemoryPool before it is read; after parsing,
  the pool keeps only each partition's records bytes (copied out of the response so that the
  response's buffer can go), and a partition's share is released when poll has handed out (or
  skipped) all of its records. See memory_pool for the bound this gives.
* Errors: OFFSET_OUT_OF_RANGE resets the position per auto.offset.reset (``pending_offset_resets``
  lists the ListOffsets lookups needed) or fails the partition under ``none``; leader and topic errors
  drop the partition's leader until ``update_metadata`` (``metadata_refresh_needed``); corrupt or
  truncated records fail that partition alone with a CorruptRecordException raised by ``poll``,
  after the records before the bad batch have been handed out. A failed partition stays stopped
  until ``seek``; the others keep going.
* Records are decoded lazily, one batch at a time as poll reaches it: control batches are skipped,
  records below the position are skipped (a batch may start before the fetch offset), CRCs are checked
  when check.crcs is set. Aborted transactions are not filtered (read_uncommitted only).
"""
from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, cast
from uuid import UUID

from kafkawire.error_codes import ErrorCode
from kafkawire.errors import KafkaWireError, RecordsError
from kafkawire.messages import FetchRequest, FetchResponse
from kafkawire.records import Header, LegacyBatch, RecordBatch, TimestampType, iter_batches

from .consumer_config import ConsumerConfig
from .fetch_session import (
    ZERO_UUID, FetchRequestData, FetchSessionHandler, PartitionFetchData, TopicPartition,
)
from .memory_pool import Lease, MemoryPool

__all__ = ["Fetcher", "ConsumerRecord", "CompletedFetch", "Leader", "FetchOutcome", "TopicPartition",
           "FetchError", "CorruptRecordException", "OffsetOutOfRangeException", "NoOffsetForPartitionException",
           "PartitionFetchError", "FETCH_VERSION_MIN", "FETCH_VERSION_MAX", "LIST_OFFSETS_EARLIEST",
           "LIST_OFFSETS_LATEST"]

FETCH_VERSION_MIN = 4  # IsolationLevel, and record batches rather than down-converted message sets
FETCH_VERSION_MAX = 19  # RemotePartitionMaxBytes (KIP-1178; v18 is Kafka 4.3's newest)
LIST_OFFSETS_EARLIEST = -2
LIST_OFFSETS_LATEST = -1
_RESET_TIMESTAMPS = {"earliest": LIST_OFFSETS_EARLIEST, "latest": LIST_OFFSETS_LATEST}

# Partition errors that mean the metadata is stale: find the leader again before fetching.
_METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.LEADER_NOT_AVAILABLE,
})
# Partition errors that are retried as they are, after retry.backoff.ms.
_QUIET_RETRY_ERRORS = frozenset({ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_SERVER_ERROR})
# Top-level errors after which topic ids or leaders must be looked up again.
_METADATA_TOP_LEVEL_ERRORS = frozenset({ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, ErrorCode.UNKNOWN_TOPIC_ID})


# ---- what poll hands out ---------------------------------------------------------------------------


# Upper bounds of a Fetch response's bytes around the records (v18 field sizes, varints at their
# widest): the header and top-level fields, each topic (name or id), each partition's fields.
_RESPONSE_OVERHEAD = 64
_TOPIC_OVERHEAD = 32
_PARTITION_OVERHEAD = 56

class ConsumerRecord(tuple):
    """A record as the application sees it. ``leader_epoch`` is None when the batch has none;
    serialized sizes are -1 for a null key or value (as Kafka's ConsumerRecord).

    Immutable, like Kafka's. It is a tuple underneath, laid out as ``RecordBatch.rows`` builds it with
    the partition's fields in front (see ``_FIELDS``), so that the fetcher makes one per record with
    ``tuple.__new__`` while reading the batch, without a Python-level constructor call. Use the
    attributes: the tuple's order is not the constructor's.
    """

    __slots__ = ()
    _FIELDS = ("topic", "partition", "timestamp_type", "leader_epoch", "offset", "timestamp", "key", "value",
               "headers", "serialized_key_size", "serialized_value_size")

    def __new__(cls, topic: str, partition: int, offset: int, timestamp: int, timestamp_type: TimestampType,
                key: bytes | None, value: bytes | None, headers: tuple[Header, ...] = (),
                leader_epoch: int | None = None, serialized_key_size: int = -1,
                serialized_value_size: int = -1) -> ConsumerRecord:
        return tuple.__new__(cls, (topic, partition, timestamp_type, leader_epoch, offset, timestamp, key, value,
                                   headers, serialized_key_size, serialized_value_size))

    if TYPE_CHECKING:  # the properties (itemgetters, below), as type checkers see them
        @property
        def topic(self) -> str: ...
        @property
        def partition(self) -> int: ...
        @property
        def timestamp_type(self) -> TimestampType: ...
        @property
        def leader_epoch(self) -> int | None: ...
        @property
        def offset(self) -> int: ...
        @property
        def timestamp(self) -> int: ...
        @property
        def key(self) -> bytes | None: ...
        @property
        def value(self) -> bytes | None: ...
        @property
        def headers(self) -> tuple[Header, ...]: ...
        @property
        def serialized_key_size(self) -> int: ...
        @property
        def serialized_value_size(self) -> int: ...
    else:
        topic = property(itemgetter(0), doc="The topic's name.")
        partition = property(itemgetter(1), doc="The partition's index.")
        timestamp_type = property(itemgetter(2), doc="What the timestamp means (a TimestampType).")
        leader_epoch = property(itemgetter(3), doc="The batch's partition leader epoch, or None.")
        offset = property(itemgetter(4), doc="The record's offset.")
        timestamp = property(itemgetter(5), doc="Milliseconds since the epoch.")
        key = property(itemgetter(6), doc="bytes, or None.")
        value = property(itemgetter(7), doc="bytes, or None.")
        headers = property(itemgetter(8), doc="A tuple of Header (key, value).")
        serialized_key_size = property(itemgetter(9), doc="Bytes of the key, -1 for none.")
        serialized_value_size = property(itemgetter(10), doc="Bytes of the value, -1 for none.")

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self[0], self[1])

    def _fields(self) -> tuple[Any, ...]:
        """The fields in the constructor's order."""
        return (self.topic, self.partition, self.offset, self.timestamp, self.timestamp_type, self.key, self.value,
                self.headers, self.leader_epoch, self.serialized_key_size, self.serialized_value_size)

    def __getnewargs__(self) -> tuple[Any, ...]:  # copy and pickle go through __new__
        return self._fields()

    # Equal to another ConsumerRecord with the same fields only: never to a plain tuple (which would
    # otherwise compare itself item by item with the tuple underneath).
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumerRecord):
            return False if isinstance(other, tuple) else NotImplemented
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, ConsumerRecord):
            return True if isinstance(other, tuple) else NotImplemented
        return tuple.__ne__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
                f"timestamp={self.timestamp}, key={self.key!r}, value={_short(self.value)}, "
                f"headers={list(self.headers)!r}, leader_epoch={self.leader_epoch})")


_record_offset = itemgetter(4)


def _short(value: bytes | None, limit: int = 40) -> str:
    if value is None or len(value) <= limit:
        return repr(value)
    return f"{bytes(value[:limit])!r}...({len(value)} bytes)"


# ---- errors poll raises ----------------------------------------------------------------------------

class FetchError(KafkaWireError):
    """A partition's fetch failed in a way the application must hear about; raised by ``poll``."""

    def __init__(self, message: str, topic_partition: TopicPartition, offset: int | None):
        super().__init__(message)
        self.topic_partition = topic_partition
        self.offset = offset


class CorruptRecordException(FetchError):
    """Corrupt or truncated records (Kafka's CorruptRecordException). The partition is stopped at
    ``offset``; ``next_offset`` (when the bad batch's header could be read) is where a seek skips it."""

    def __init__(self, message: str, topic_partition: TopicPartition, offset: int | None,
                 next_offset: int | None = None):
        super().__init__(message, topic_partition, offset)
        self.next_offset = next_offset


class OffsetOutOfRangeException(FetchError):
    """The fetch offset is outside the log and auto.offset.reset is none."""


class NoOffsetForPartitionException(FetchError):
    """A position reset was needed and auto.offset.reset is none."""


class PartitionFetchError(FetchError):
    """A broker error for one partition that neither a metadata refresh nor a reset handles
    (e.g. TOPIC_AUTHORIZATION_FAILED); the partition is retried after retry.backoff.ms."""

    def __init__(self, message: str, topic_partition: TopicPartition, offset: int | None, error_code: int):
        super().__init__(message, topic_partition, offset)
        self.error_code = error_code


# ---- one partition's records from one response -----------------------------------------------------

class _DecodedBatch:
    """One batch's records as ConsumerRecords, with a cursor at the first one at or above the position."""

    __slots__ = ("records", "leader_epoch", "next_offset", "pos", "end")

    def __init__(self, batch: RecordBatch | LegacyBatch, check_crcs: bool, position: int, topic: str,
                 partition: int):
        self.next_offset = batch.next_offset
        if check_crcs:
            batch.verify()
        if isinstance(batch, RecordBatch):
            epoch = batch.partition_leader_epoch if batch.partition_leader_epoch >= 0 else None
            # rows of type ConsumerRecord, which the signature of rows() cannot say
            records = cast("list[ConsumerRecord]",
                           batch.rows((topic, partition, batch.timestamp_type, epoch), ConsumerRecord))
        else:
            epoch = None
            timestamp_type = batch.timestamp_type
            records = [ConsumerRecord(topic, partition, r.offset, r.timestamp, timestamp_type, r.key, r.value, (),
                                      None, -1 if r.key is None else len(r.key),
                                      -1 if r.value is None else len(r.value))
                       for r in batch.records(check_crcs)]
        self.records = records
        self.leader_epoch = epoch
        self.end = len(records)
        self.pos = (bisect_left(records, position, key=_record_offset)
                    if self.end and records[0][4] < position else 0)

    @property
    def left(self) -> int:
        return self.end - self.pos


def _estimate(batch: RecordBatch | LegacyBatch, fetch_offset: int) -> int:
    """Records of ``batch`` that poll will hand out, from the header alone (exact for uncompacted
    batches; a compressed legacy wrapper counts as one until decoded)."""
    if batch.is_control or batch.next_offset <= fetch_offset:
        return 0
    if isinstance(batch, LegacyBatch):
        return 1
    if batch.base_offset >= fetch_offset:
        return batch.count
    return min(batch.count, batch.last_offset - fetch_offset + 1)


class CompletedFetch:
    """One partition's records from one fetch response, decoded batch by batch as ``take`` needs them.

    ``next_fetch_offset`` is the partition's position once what was taken is consumed; ``remaining``
    counts the records still to hand out (exact for batches decoded, from headers for the rest).
    ``failure`` is set, and ``take`` stops, at the first batch that cannot be read.
    """

    def __init__(self, topic_partition: TopicPartition, fetch_offset: int, records: bytes, lease: Lease,
                 check_crcs: bool = True):
        self.topic_partition = topic_partition
        self.fetch_offset = fetch_offset
        self.next_fetch_offset = fetch_offset
        self.last_epoch: int | None = None
        self.size = len(records)
        self.lease = lease
        self.check_crcs = check_crcs
        self.failure: CorruptRecordException | None = None
        self.drained = False
        self._batches: list[RecordBatch | LegacyBatch | None] = []
        self._scan_error: KafkaWireError | None = None
        try:  # headers only; CRCs and records are checked when poll reaches each batch
            for batch in iter_batches(records, verify_crc=False):
                self._batches.append(batch)
        except KafkaWireError as error:
            self._scan_error = error
        if not self._batches and self._scan_error is None and records:
            self._scan_error = RecordsError(
                f"{len(records)} bytes of records hold no complete batch (a truncated response, or a "
                f"batch larger than the response limit)", 0)
        self._estimates = [_estimate(batch, fetch_offset) for batch in self._batches if batch is not None]
        self.remaining = sum(self._estimates)
        self._index = 0
        self._current: _DecodedBatch | None = None

    def take(self, limit: int) -> list[ConsumerRecord]:
        """Up to ``limit`` records, in offset order, advancing ``next_fetch_offset``."""
        out: list[ConsumerRecord] = []
        while len(out) < limit:
            current = self._current or self._next_batch()
            if current is None:
                break
            pos = current.pos
            stop = min(current.end, pos + limit - len(out))
            records = current.records
            if pos == 0 and stop == current.end:
                if out:
                    out += records
                else:
                    out = records  # the whole batch: hand out its list as it is
            else:
                out += records[pos:stop]
            current.pos = stop
            self.remaining -= stop - pos
            self.next_fetch_offset = records[stop - 1][4] + 1
            if current.leader_epoch is not None:
                self.last_epoch = current.leader_epoch
            if stop == current.end:
                self._finish_batch(current)
        if self._current is None and self.failure is None:
            self._skip_without_decoding()
        return out

    def _finish_batch(self, current: _DecodedBatch) -> None:
        # past the batch's last offset, even when compaction left gaps at its end
        self.next_fetch_offset = max(self.next_fetch_offset, current.next_offset)
        self._current = None

    def _next_batch(self) -> _DecodedBatch | None:
        while self._index < len(self._batches):
            index = self._index
            batch = self._batches[index]
            assert batch is not None  # (batches before _index are the consumed ones)
            self._batches[index] = None  # let its view go once consumed
            self._index += 1
            estimate = self._estimates[index]
            if batch.is_control or batch.next_offset <= self.next_fetch_offset:
                self.remaining -= estimate
                self.next_fetch_offset = max(self.next_fetch_offset, batch.next_offset)
                continue
            try:
                decoded = _DecodedBatch(batch, self.check_crcs, self.next_fetch_offset, *self.topic_partition)
            except KafkaWireError as error:
                self.remaining -= estimate
                self._fail(error, batch)
                return None
            self.remaining += decoded.left - estimate
            if decoded.left == 0:
                self._finish_batch(decoded)
                continue
            self._current = decoded
            return decoded
        self._end()
        return None

    def _skip_without_decoding(self) -> None:
        """Step over what follows without decoding (control batches, batches below the position), so
        that a fetch whose records are all out is seen as drained at once."""
        while self._index < len(self._batches):
            batch = self._batches[self._index]
            assert batch is not None  # (batches before _index are the consumed ones)
            if not (batch.is_control or batch.next_offset <= self.next_fetch_offset):
                return
            self._batches[self._index] = None
            self.remaining -= self._estimates[self._index]
            self.next_fetch_offset = max(self.next_fetch_offset, batch.next_offset)
            self._index += 1
        self._end()

    def _end(self) -> None:
        if self._scan_error is not None:
            error, self._scan_error = self._scan_error, None
            self._fail(error, None)
        else:
            self.drained = True

    def _fail(self, error: KafkaWireError, batch: RecordBatch | LegacyBatch | None) -> None:
        offset = self.next_fetch_offset
        next_offset = None
        if isinstance(batch, RecordBatch):
            offset = max(offset, batch.base_offset)
            next_offset = batch.next_offset
        elif isinstance(batch, LegacyBatch):
            next_offset = batch.next_offset
        elif isinstance(error, RecordsError) and error.base_offset is not None:
            offset = max(offset, error.base_offset)
        skip = f"; seek to {next_offset} to skip the batch" if next_offset is not None else ""
        self.failure = CorruptRecordException(
            f"corrupt record data in partition {self.topic_partition} at offset {offset}: {error}. "
            f"Fetching from this partition stopped{skip}", self.topic_partition, offset, next_offset)
        self.remaining = 0
        self._current = None

    def release(self) -> None:
        """Give the records' bytes back to the memory pool."""
        self.lease.release()

    def __repr__(self) -> str:
        return (f"CompletedFetch({self.topic_partition}, fetch_offset={self.fetch_offset}, "
                f"next={self.next_fetch_offset}, size={self.size}, remaining={self.remaining})")


# ---- the fetcher -----------------------------------------------------------------------------------

class Leader(NamedTuple):
    node_id: int
    leader_epoch: int = -1


class _PartitionState:
    __slots__ = ("position", "position_epoch", "paused", "reset", "failed", "backoff_until",
                 "high_watermark", "last_stable_offset", "log_start_offset")

    def __init__(self) -> None:
        self.position: int | None = None
        self.position_epoch: int | None = None  # leader epoch of the last record consumed
        self.paused = False
        self.reset: str | None = None  # a pending reset strategy (earliest / latest)
        self.failed: FetchError | None = None
        self.backoff_until = float("-inf")
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1


@dataclass
class _InFlight:
    request: FetchRequest
    data: FetchRequestData
    sent_ms: float
    partitions: frozenset


@dataclass
class FetchOutcome:
    """What ``handle_fetch_response`` made of a response."""

    buffered: list[TopicPartition] = field(default_factory=list)  # partitions with records now buffered
    errors: dict[TopicPartition, int] = field(default_factory=dict)  # partition error codes
    discarded: list[TopicPartition] = field(default_factory=list)  # stale: position moved, unassigned, ...
    ignored: bool = False  # the whole response was ignored and the session reset (see session_error)
    session_error: int = 0  # the top-level error code (0 when the partitions did not match the session)


class Fetcher:
    """The fetch state machine of one consumer (see the module docstring for the rules)."""

    def __init__(self, config: ConsumerConfig, pool: MemoryPool | None = None):
        self.config = config
        self.pool = pool if pool is not None else MemoryPool(config.buffer_memory)
        self.metadata_refresh_needed = False
        self._assignment: OrderedDict[TopicPartition, _PartitionState] = OrderedDict()  # request order
        self._buffered: OrderedDict[TopicPartition, CompletedFetch] = OrderedDict()  # drain order
        self._leaders: dict[TopicPartition, Leader] = {}
        self._topic_ids: dict[str, UUID] = {}
        self._fetch_versions: dict[int, int] = {}
        self._sessions: dict[int, FetchSessionHandler] = {}
        self._in_flight: dict[int, _InFlight] = {}
        self._node_backoff_until: dict[int, float] = {}
        self._errors: deque[FetchError] = deque()

    # ---- assignment and positions ---------------------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch exactly ``partitions`` (in this order, which is the first request order). Partitions
        kept keep their position; new ones have none until ``seek`` or an offset reset."""
        wanted = [TopicPartition(*tp) for tp in partitions]
        keep = set(wanted)
        if len(keep) != len(wanted):
            raise ValueError("assign() got a partition twice")
        for tp in [tp for tp in self._assignment if tp not in keep]:
            self._drop_buffered(tp)
            self._forget_errors(tp)
            del self._assignment[tp]
        for tp in wanted:
            if tp not in self._assignment:
                self._assignment[tp] = _PartitionState()

    def assignment(self) -> list[TopicPartition]:
        """The assigned partitions, in the current request order."""
        return list(self._assignment)

    def _state(self, tp: TopicPartition) -> _PartitionState:
        state = self._assignment.get(tp)
        if state is None:
            raise ValueError(f"partition {TopicPartition(*tp)} is not assigned")
        return state

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> None:
        """Fetch ``tp`` from ``offset`` next: buffered records are dropped, a failure is cleared."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"seek offset must be a non-negative integer, not {offset!r}")
        tp = TopicPartition(*tp)
        state = self._state(tp)
        self._drop_buffered(tp)
        self._forget_errors(tp)
        state.position = offset
        state.position_epoch = leader_epoch
        state.reset = None
        state.failed = None
        state.backoff_until = float("-inf")

    def position(self, tp: TopicPartition) -> int | None:
        return self._state(TopicPartition(*tp)).position

    def partitions_without_position(self) -> list[TopicPartition]:
        """Partitions that need a committed offset, a seek or a reset before they can be fetched."""
        return [tp for tp, s in self._assignment.items() if s.position is None and s.reset is None and s.failed is None]

    def high_watermark(self, tp: TopicPartition) -> int:
        return self._state(TopicPartition(*tp)).high_watermark

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._state(TopicPartition(*tp)).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._state(TopicPartition(*tp)).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, state in self._assignment.items() if state.paused}

    # ---- offset resets ----------------------------------------------------------------------------
    def request_offset_reset(self, tp: TopicPartition, strategy: str | None = None) -> None:
        """Reset ``tp``'s position to the log's start (earliest) or end (latest); None means
        auto.offset.reset. The driver looks the offset up (``pending_offset_resets``)."""
        tp = TopicPartition(*tp)
        state = self._state(tp)
        strategy = self.config.auto_offset_reset if strategy is None else strategy
        if strategy == "none":
            error = NoOffsetForPartitionException(
                f"partition {tp} has no position and auto.offset.reset is none", tp, state.position)
            self._fail_partition(tp, error)
            return
        if strategy not in _RESET_TIMESTAMPS:
            raise ValueError(f"offset reset strategy must be earliest or latest, not {strategy!r}")
        self._drop_buffered(tp)
        state.position = None
        state.reset = strategy

    def pending_offset_resets(self) -> dict[TopicPartition, int]:
        """The ListOffsets lookups needed: partition -> timestamp (-2 earliest, -1 latest)."""
        return {tp: _RESET_TIMESTAMPS[s.reset] for tp, s in self._assignment.items() if s.reset is not None}

    def complete_offset_reset(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> bool:
        """The ListOffsets answer for a pending reset; False if the reset was superseded (e.g. a seek)."""
        tp = TopicPartition(*tp)
        state = self._assignment.get(tp)
        if state is None or state.reset is None:
            return False
        self.seek(tp, offset, leader_epoch)
        return True

    # ---- metadata ---------------------------------------------------------------------------------
    def update_metadata(self, leaders: Mapping[TopicPartition, Leader | int | None],
                        topic_ids: Mapping[str, UUID] | None = None) -> None:
        """New leaders (a Leader, a node id, or None for unknown) and topic ids; clears
        ``metadata_refresh_needed``."""
        for tp, leader in leaders.items():
            tp = TopicPartition(*tp)
            if leader is None:
                self._leaders.pop(tp, None)
            else:
                self._leaders[tp] = leader if isinstance(leader, Leader) else Leader(int(leader))
        if topic_ids:
            self._topic_ids.update(topic_ids)
        self.metadata_refresh_needed = False

    def set_fetch_version(self, node_id: int, version: int) -> None:
        """The highest Fetch version ``node_id`` offers (from ApiVersions); capped at what this client
        speaks, refused below v4."""
        if version < FETCH_VERSION_MIN:
            raise ValueError(f"broker {node_id} offers Fetch up to v{version}; this consumer needs "
                             f"v{FETCH_VERSION_MIN} or later")
        self._fetch_versions[node_id] = min(version, FETCH_VERSION_MAX)

    # ---- requests ---------------------------------------------------------------------------------
    def retained_records(self) -> int:
        """Records buffered for unpaused partitions and not yet handed out."""
        return sum(cf.remaining for tp, cf in self._buffered.items() if not self._assignment[tp].paused)

    def should_prefetch(self) -> bool:
        """KIP-41: fetch more only while fewer than max.poll.records records are retained."""
        return self.retained_records() < self.config.max_poll_records

    def buffered_partitions(self) -> list[TopicPartition]:
        """Partitions with records waiting for poll, in drain order."""
        return list(self._buffered)

    def buffered_bytes(self) -> int:
        """Records bytes held for poll (what the memory pool is charged for, framing aside)."""
        return sum(cf.size for cf in self._buffered.values())

    def in_flight_nodes(self) -> list[int]:
        return list(self._in_flight)

    def prepare_fetch_requests(self, now_ms: float) -> dict[int, tuple[FetchRequest, int]]:
        """The fetch requests to send now: node id -> (FetchRequest, version). Each is in flight until
        ``handle_fetch_response`` or ``handle_fetch_failure`` for its node."""
        if not self.should_prefetch():
            return {}
        config = self.config
        busy = set().union(*(pending.partitions for pending in self._in_flight.values()))
        wanted: dict[int, dict[TopicPartition, PartitionFetchData]] = {}
        for tp, state in self._assignment.items():
            if (state.position is None or state.paused or state.failed is not None or tp in self._buffered
                    or tp in busy or state.backoff_until > now_ms):
                continue
            leader = self._leaders.get(tp)
            if leader is None:
                self.metadata_refresh_needed = True
                continue
            node = leader.node_id
            if node in self._in_flight or self._node_backoff_until.get(node, float("-inf")) > now_ms:
                continue
            wanted.setdefault(node, {})[tp] = PartitionFetchData(
                self._topic_ids.get(tp.topic, ZERO_UUID), state.position, leader.leader_epoch,
                config.max_partition_fetch_bytes, config.remote_partition_max_bytes)
        requests = {}
        for node, partitions in wanted.items():
            handler = self._sessions.get(node)
            if handler is None:
                handler = self._sessions[node] = FetchSessionHandler(node)
            data = handler.build(partitions, self._fetch_versions.get(node, FETCH_VERSION_MAX))
            request = data.to_request(max_wait_ms=config.fetch_max_wait_ms, min_bytes=config.fetch_min_bytes,
                                      max_bytes=self._max_bytes(data.session_partitions),
                                      isolation_level=config.isolation_level_code, rack_id=config.client_rack)
            self._in_flight[node] = _InFlight(request, data, now_ms, frozenset(data.session_partitions))
            requests[node] = (request, data.version)
        return requests

    def _max_bytes(self, partitions) -> int:
        """MaxBytes for a fetch of ``partitions``: fetch.max.bytes, lowered so that a whole response (its
        records and the framing around them, which the pool is charged for too) fits in buffer.memory."""
        topics = {tp.topic for tp in partitions}
        framing = (_RESPONSE_OVERHEAD + sum(_TOPIC_OVERHEAD + len(topic) for topic in topics)
                   + _PARTITION_OVERHEAD * len(partitions))
        return max(1, min(self.config.fetch_max_bytes, self.pool.size - framing))

    def session(self, node_id: int) -> FetchSessionHandler | None:
        return self._sessions.get(node_id)

    def expired_fetches(self, now_ms: float) -> list[int]:
        """Nodes whose fetch has been in flight for request.timeout.ms (give each to handle_fetch_failure)."""
        timeout = self.config.request_timeout_ms
        return [node for node, pending in self._in_flight.items() if now_ms - pending.sent_ms >= timeout]

    def handle_fetch_failure(self, node_id: int, now_ms: float) -> None:
        """The fetch to ``node_id`` got no response (disconnect, timeout): its partitions may be fetched
        again after retry.backoff.ms, in a fresh session."""
        self._in_flight.pop(node_id, None)
        handler = self._sessions.get(node_id)
        if handler is not None:
            handler.handle_error()
        self._node_backoff_until[node_id] = now_ms + self.config.retry_backoff_ms

    # ---- responses --------------------------------------------------------------------------------
    def handle_fetch_response(self, node_id: int, request: FetchRequest, response: FetchResponse, version: int,
                              response_size: int, now_ms: float, lease: Lease | None = None) -> FetchOutcome:
        """Take a fetch response in. ``response_size`` is the frame's size; ``lease`` the pool's grant
        for it (taken before the body was read). Without one, the bytes are charged unconditionally."""
        pending = self._in_flight.get(node_id)
        if pending is None or pending.request is not request:
            raise ValueError(f"no fetch to node {node_id} is in flight for this request")
        if version != pending.data.version:
            raise ValueError(f"the fetch to node {node_id} was sent as v{pending.data.version}, not v{version}")
        held = sum(len(p.records) for topic in response.responses for p in topic.partitions
                   if p.records is not None)
        size = lease.size if lease is not None else response_size
        if size < held:
            raise ValueError(f"a fetch response of {size} bytes cannot carry {held} bytes of records")
        del self._in_flight[node_id]
        if lease is None:
            lease = self.pool.allocate_unchecked(response_size)
        outcome = FetchOutcome()
        try:
            if response.throttle_time_ms > 0:  # KIP-219: the client holds back while throttled
                until = now_ms + response.throttle_time_ms
                self._node_backoff_until[node_id] = max(self._node_backoff_until.get(node_id, until), until)
            if not self._sessions[node_id].handle_response(pending.data, response):
                outcome.ignored = True
                outcome.session_error = response.error_code
                if response.error_code in _METADATA_TOP_LEVEL_ERRORS:
                    self.metadata_refresh_needed = True
                return outcome
            session_partitions = pending.data.session_partitions
            for topic in response.responses:
                name = pending.data.topic_of(topic)
                assert name is not None  # (handle_response accepted the response's topics)
                for partition in topic.partitions:
                    tp = TopicPartition(name, partition.partition_index)
                    self._handle_partition(tp, session_partitions[tp].fetch_offset, partition, lease, now_ms,
                                           outcome)
        finally:
            lease.release()  # framing and partition metadata; the records took their own shares
        return outcome

    def _handle_partition(self, tp: TopicPartition, fetch_offset: int, data: FetchResponse.PartitionData,
                          lease: Lease, now_ms: float, outcome: FetchOutcome) -> None:
        state = self._assignment.get(tp)
        if (state is None or state.failed is not None or state.position != fetch_offset
                or tp in self._buffered):
            outcome.discarded.append(tp)
            return
        code = data.error_code
        if code == ErrorCode.NONE:
            state.high_watermark = data.high_watermark
            state.last_stable_offset = data.last_stable_offset
            state.log_start_offset = data.log_start_offset
            records = data.records
            if records is not None and len(records):
                self._assignment.move_to_end(tp)  # KIP-74 rotation: partitions cut off lead the next request
                blob = bytes(records)
                self._buffered[tp] = CompletedFetch(tp, fetch_offset, blob, lease.split(len(blob)),
                                                    self.config.check_crcs)
                outcome.buffered.append(tp)
            return
        outcome.errors[tp] = code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.config.auto_offset_reset == "none":
                self._fail_partition(tp, OffsetOutOfRangeException(
                    f"fetch offset {fetch_offset} is out of range for partition {tp} (log start "
                    f"{data.log_start_offset}, high watermark {data.high_watermark}) and auto.offset.reset "
                    f"is none", tp, fetch_offset))
            else:
                state.position = None
                state.reset = self.config.auto_offset_reset
        elif code in _METADATA_ERRORS:
            self._leaders.pop(tp, None)
            self.metadata_refresh_needed = True
        else:
            state.backoff_until = now_ms + self.config.retry_backoff_ms
            if code not in _QUIET_RETRY_ERRORS:
                known = ErrorCode.of(code)
                name = known.name if isinstance(known, ErrorCode) else f"error code {code}"
                self._errors.append(PartitionFetchError(
                    f"fetching partition {tp} at offset {fetch_offset} failed: {name}", tp, fetch_offset, code))

    # ---- handing records out ----------------------------------------------------------------------
    def poll(self, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to ``max_records`` (at most max.poll.records) buffered records, round robin across
        partitions from where the last poll stopped. A partition failure is raised here: at once if no
        records were collected, else by the next call (the records before it are not lost)."""
        if self._errors:
            raise self._errors.popleft()
        limit = self.config.max_poll_records
        if max_records is not None:
            if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
                raise ValueError(f"max_records must be a positive integer, not {max_records!r}")
            limit = min(limit, max_records)
        out: list[ConsumerRecord] = []
        for tp in list(self._buffered):
            if len(out) >= limit:
                break
            state = self._assignment[tp]
            if state.paused:
                continue  # kept, in place, for when it resumes
            fetch = self._buffered[tp]
            out += fetch.take(limit - len(out))
            state.position = fetch.next_fetch_offset
            if fetch.last_epoch is not None:
                state.position_epoch = fetch.last_epoch
            if fetch.failure is not None:
                self._fail_partition(tp, fetch.failure)
            elif fetch.drained:
                self._drop_buffered(tp)
            else:
                self._buffered.move_to_end(tp)  # the next poll starts with the partition after it
        if not out and self._errors:
            raise self._errors.popleft()
        return out

    def close(self) -> None:
        """Give every buffered byte back to the pool and forget requests in flight."""
        for tp in list(self._buffered):
            self._drop_buffered(tp)
        self._in_flight.clear()

    # ---- internals --------------------------------------------------------------------------------
    def _drop_buffered(self, tp: TopicPartition) -> None:
        fetch = self._buffered.pop(tp, None)
        if fetch is not None:
            fetch.release()

    def _forget_errors(self, tp: TopicPartition) -> None:
        if any(error.topic_partition == tp for error in self._errors):
            self._errors = deque(error for error in self._errors if error.topic_partition != tp)

    def _fail_partition(self, tp: TopicPartition, error: FetchError) -> None:
        self._drop_buffered(tp)
        self._assignment[tp].failed = error
        self._errors.append(error)

    def __repr__(self) -> str:
        return (f"Fetcher(partitions={len(self._assignment)}, buffered={len(self._buffered)}, "
                f"in_flight={sorted(self._in_flight)}, pool={self.pool!r})")

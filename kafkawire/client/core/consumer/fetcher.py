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
* KIP-74 rotation: a partition whose response carried records moves to the end of the request
  order, so the partitions cut off by MaxBytes lead the next request (in an incremental session the
  broker keeps the same rotation in session order).
* MaxBytes = fetch.max.bytes, PartitionMaxBytes = max.partition.fetch.bytes, RemotePartitionMaxBytes
  = remote.max.partition.fetch.bytes (KIP-1178) on Fetch v19 only; a broker that stops at v18 (Kafka
  4.3) gets upstream's v18 and bounds remote reads by PartitionMaxBytes, as the KIP says.
* KIP-41: ``poll`` drains round robin from the partition after the last one it served, never more
  than max.poll.records (the k-th partition in line is served within k + 1 polls);
  ``prepare_fetch_requests`` sends nothing while that many records are retained for unpaused
  partitions.
* KIP-81: each response is charged to the MemoryPool before it is read; the pool then keeps only each
  partition's records bytes, released when poll has handed all of them out (``memory``).
* Errors: OFFSET_OUT_OF_RANGE resets the position per auto.offset.reset (``pending_offset_resets``)
  or fails the partition under ``none``; leader and topic errors drop the partition's leader until
  ``update_metadata`` (``metadata_refresh_needed``); a corrupt batch fails its partition alone
  (``completed_fetch``). A failed partition stays stopped until ``seek``; the others keep going.
"""
from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple
from uuid import UUID

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import FetchRequest, FetchResponse

from ...errors import FetchError, NoOffsetForPartitionException, OffsetOutOfRangeException, PartitionFetchError
from ..topic_partition import TopicPartition
from .aborted_transactions import AbortedTransactions
from .completed_fetch import CompletedFetch
from .config import ConsumerConfig
from .fetch_session import ZERO_UUID, FetchRequestData, FetchSessionHandler, PartitionFetchData
from .memory import Lease, MemoryPool
from .record import ConsumerRecord

__all__ = ["Fetcher", "Leader", "FetchOutcome", "FETCH_VERSION_MIN", "FETCH_VERSION_MAX",
           "LIST_OFFSETS_EARLIEST", "LIST_OFFSETS_LATEST"]

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

# Upper bounds of a Fetch response's bytes around the records (v18 field sizes, varints at their
# widest): the header and top-level fields, each topic (name or id), each partition's fields.
_RESPONSE_OVERHEAD = 64
_TOPIC_OVERHEAD = 32
_PARTITION_OVERHEAD = 56


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
                aborted = None
                if self.config.read_committed:
                    aborted = AbortedTransactions((txn.producer_id, txn.first_offset)
                                                  for txn in data.aborted_transactions or ())
                self._buffered[tp] = CompletedFetch(tp, fetch_offset, blob, lease.split(len(blob)),
                                                    self.config.check_crcs, aborted)
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

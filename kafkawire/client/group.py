"""A consumer's membership in a classic consumer group, sans I/O: the requests to send and what to make of
their answers, driven by time and responses alone.

A driver (the asyncio layer, or a test) runs it::

    member = GroupMember(config, positions=lambda: consumed_positions)  # config.group_id is required
    member.set_api_versions(negotiated)          # per API key the broker's (min, max), or just max
    member.subscribe(["orders"], now_ms)
    while not member.closed:
        now_ms = clock()
        if the application polled: member.record_poll(now_ms)
        if member.metadata_topics has topics without a known count:
            look them up; member.update_metadata({"orders": 12}, now_ms)
        for request in member.poll(now_ms):
            # destination None: any broker; else the Coordinator (node_id, host, port), best over a
            # connection of its own. Send request.body at request.version; when its answer comes:
            #     member.handle_response(request, response, clock())
            # when the connection fails or request.timeout_ms passes:
            #     member.handle_failure(request, clock())
            send(request)
        for event in member.drain_events():   # PartitionsRevoked / PartitionsLost / PartitionsAssigned,
            handle(event)                     # CommittedOffsets, CommitCompleted, GroupFailure
        wait for a response or at most member.timeout_ms(now_ms), unless a call above asks for a poll
    # the application side: member.commit(offsets, now_ms[, timeout_ms]), member.fetch_committed(...),
    # member.close(now_ms) (then keep the loop going until member.closed).

Call ``poll`` again after every other call (a response, drain_events, commit, subscribe, close, ...): each
may make a request ready. The machine also expires requests by itself (``timeout_ms`` includes their
deadlines) and ignores answers to requests it has given up, so a driver may drop late responses freely.

Behaviour, after Java's AbstractCoordinator / ConsumerCoordinator (classic protocol, eager rebalancing):

* FindCoordinator first (and again after NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a failed request
  to the coordinator, or a session timeout with no heartbeat answer); every other request goes to the
  coordinator. Losing the coordinator forgets the requests in flight to it.
* JoinGroup offers one protocol per partition.assignment.strategy entry, each with the subscription
  (ConsumerProtocolSubscription v3). MEMBER_ID_REQUIRED (KIP-394) is answered by joining again at once
  with the id given. The leader runs the chosen assignor over all members' subscriptions with the
  partition counts it knows and sends everyone's assignment in SyncGroup; followers send none.
* Eager protocol: before joining again, the member gives up all its partitions. With auto-commit it first
  commits its positions; it then emits PartitionsRevoked (PartitionsLost if its generation is gone and it
  may not commit), and sends JoinGroup only once that event has been taken by ``drain_events`` and every
  commit issued before (including ones the driver makes while handling the event) has completed.
* Heartbeat every heartbeat.interval.ms from JoinGroup success on (retry.backoff.ms after a failure);
  REBALANCE_IN_PROGRESS makes a stable member rejoin; UNKNOWN_MEMBER_ID resets the member id and
  generation, ILLEGAL_GENERATION the generation, and the member rejoins; FENCED_INSTANCE_ID is fatal.
* max.poll.interval.ms: if ``record_poll`` is not called in time the member leaves the group (LeaveGroup
  for a dynamic member) and loses its partitions; the next ``record_poll`` joins again.
* OffsetFetch for the partitions of each new assignment (CommittedOffsets with request_id None), and on
  request (``fetch_committed``). OffsetCommit carries the generation and member id while in a group;
  ``commit`` without a timeout is commitAsync (one attempt), with one it is commitSync (retriable errors
  retried until the timeout). Auto-commit every auto.commit.interval.ms while stable.
* Static membership (KIP-345) with ``group_instance_id``: sent in JoinGroup/SyncGroup/Heartbeat/
  OffsetCommit, and a static member does not send LeaveGroup on close (the session timeout removes it).
* Fatal errors (authorization, fenced instance, inconsistent protocol, unsupported versions, ...) are
  reported as GroupFailure(fatal=True); the member then stays out of the group until the next
  ``record_poll`` or ``subscribe``, as Java raises from poll() and tries again on the next one.
"""
from __future__ import annotations

import enum
import itertools
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kafkawire.error_codes import ErrorCode
from kafkawire.errors import DecodeError, KafkaWireError
from kafkawire.messages import (
    FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
)

from .assignors import (
    ASSIGNMENT_VERSION, ASSIGNORS, CONSUMER_PROTOCOL_TYPE, Subscription, decode_assignment, decode_subscription,
    encode_assignment, encode_subscription,
)
from .common import TopicPartition
from .consumer_config import ConsumerConfig

__all__ = ["GroupMember", "MemberState", "OutgoingRequest", "Coordinator", "OffsetAndMetadata", "GroupError",
           "CommitFailedError", "RebalanceInProgressError", "PartitionsAssigned", "PartitionsRevoked",
           "PartitionsLost", "CommittedOffsets", "CommitCompleted", "GroupFailure", "CLIENT_VERSIONS"]

# The versions this machine can write and read, per API key: Java's ranges, except OffsetCommit from v2
# (v0/v1 are gone from Kafka 4) and OffsetFetch from v1 (v0 read ZooKeeper offsets).
FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_FETCH = 10, 11, 14, 12, 13, 8, 9
CLIENT_VERSIONS = {FIND_COORDINATOR: (0, 6), JOIN_GROUP: (0, 9), SYNC_GROUP: (0, 5), HEARTBEAT: (0, 4),
                   LEAVE_GROUP: (0, 5), OFFSET_COMMIT: (2, 10), OFFSET_FETCH: (1, 10)}
# OffsetCommit and OffsetFetch name topics by id from v10 (KIP-848): sent only when every topic's id is known.
_TOPIC_ID_VERSION = 10
# The versions that first carry the group instance id (static membership needs them).
_INSTANCE_ID_VERSIONS = {JOIN_GROUP: 5, SYNC_GROUP: 3, HEARTBEAT: 3, LEAVE_GROUP: 3, OFFSET_COMMIT: 7}
# Java's JOIN_GROUP_TIMEOUT_LAPSE: JoinGroup may be parked for the whole rebalance timeout.
_JOIN_TIMEOUT_LAPSE_MS = 5000
_REASON_MAX_CHARS = 255  # JoinGroupRequest.maybeTruncateReason

E = ErrorCode
_ZERO_UUID = uuid.UUID(int=0)
_COORDINATOR_ERRORS = frozenset({E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR})


# ---- values ----------------------------------------------------------------------------------------------

class Coordinator(NamedTuple):
    """The broker coordinating the group. Java talks to it over a connection of its own (node id
    2**31 - 1 - node_id) so that group traffic never queues behind fetches; a driver should too."""

    node_id: int
    host: str
    port: int


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class MemberState(enum.Enum):
    UNJOINED = "unjoined"  # not in the group: no subscription, left, or stopped by a fatal error
    FINDING_COORDINATOR = "finding coordinator"  # wants to join but does not know the coordinator yet
    JOINING = "joining"  # JoinGroup to send or in flight
    SYNCING = "syncing"  # SyncGroup in flight
    STABLE = "stable"  # has its assignment (the coordinator may be being looked up again meanwhile)
    REBALANCING = "rebalancing"  # must rejoin: committing and giving up partitions before JoinGroup
    LEAVING = "leaving"  # closing: final commits, then LeaveGroup
    CLOSED = "closed"


class GroupError(KafkaWireError):
    """A group request failed; ``error_code`` is Kafka's code (None for a client-side failure)."""

    def __init__(self, message: str, error_code: int | None = None):
        super().__init__(message)
        self.error_code = error_code

    @property
    def retriable(self) -> bool:
        code = ErrorCode.of(self.error_code) if self.error_code is not None else None
        return isinstance(code, ErrorCode) and code.retriable


class CommitFailedError(GroupError):
    """The commit cannot succeed: the member is no longer in the generation the offsets belong to."""


class RebalanceInProgressError(GroupError):
    """The group is rebalancing; commit again once the member has its new assignment."""


# ---- events ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PartitionsRevoked:
    """Stop fetching these; the offsets may still be committed (the generation is still valid)."""
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionsLost:
    """Stop fetching these; another member may own them already, so do not commit them."""
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionsAssigned:
    partitions: tuple[TopicPartition, ...]
    generation_id: int
    member_id: str
    leader: bool


@dataclass(frozen=True)
class CommittedOffsets:
    """Committed offsets (None where nothing is committed). ``request_id`` is None for the fetch made
    for a new assignment (delivered only while that assignment is current), else ``fetch_committed``'s."""
    request_id: int | None
    offsets: dict[TopicPartition, OffsetAndMetadata | None]
    error: GroupError | None = None


@dataclass(frozen=True)
class CommitCompleted:
    request_id: int
    offsets: dict[TopicPartition, OffsetAndMetadata]
    error: GroupError | None = None
    auto: bool = False


@dataclass(frozen=True)
class GroupFailure:
    error: GroupError
    fatal: bool


# ---- requests --------------------------------------------------------------------------------------------

class OutgoingRequest:
    """A request to send: ``body`` at ``version`` to ``destination`` (None: any broker). Hand the same
    object back to handle_response / handle_failure."""

    __slots__ = ("body", "version", "destination", "timeout_ms", "sent_ms", "_kind", "_context")

    def __init__(self, kind: str, body, version: int, destination: Coordinator | None, timeout_ms: int,
                 now_ms: float, context=None):
        self._kind = kind
        self.body = body
        self.version = version
        self.destination = destination
        self.timeout_ms = timeout_ms
        self.sent_ms = now_ms
        self._context = context

    @property
    def api_key(self) -> int:
        return self.body.API_KEY

    def __repr__(self) -> str:
        return f"OutgoingRequest({type(self.body).__name__} v{self.version} -> {self.destination})"


@dataclass(eq=False)
class _Commit:
    request_id: int
    offsets: dict[TopicPartition, OffsetAndMetadata]
    deadline: float
    retry: bool  # commitSync: retry retriable errors until the deadline
    auto: bool
    retry_at: float = 0.0
    request: OutgoingRequest | None = None


@dataclass(eq=False)
class _OffsetFetch:
    request_id: int | None  # None: for the current assignment
    partitions: tuple[TopicPartition, ...]
    deadline: float | None
    assignment: tuple[TopicPartition, ...] | None = None  # the assignment it was made for
    retry_at: float = 0.0
    request: OutgoingRequest | None = None


@dataclass
class _Generation:
    generation_id: int = -1
    member_id: str = ""
    protocol: str | None = None


_NO_GENERATION = -1


class GroupMember:
    """One consumer's classic-group membership; see the module docstring for how to drive it."""

    def __init__(self, config: ConsumerConfig, *,
                 positions: Callable[[], Mapping[TopicPartition, int | OffsetAndMetadata]] | None = None,
                 group_instance_id: str | None = None, api_versions: Mapping[int, object] | None = None):
        if config.group_id is None or config.group_id == "":
            raise ValueError("a consumer group member needs a group.id")
        if config.enable_auto_commit and positions is None:
            raise ValueError("enable.auto.commit needs a positions() callable giving the consumed positions")
        if group_instance_id is not None and (not isinstance(group_instance_id, str) or not group_instance_id):
            raise ValueError(f"group.instance.id must be a non-empty string, not {group_instance_id!r}")
        self.config = config
        self.group_id: str = config.group_id
        self.group_instance_id = group_instance_id
        self._positions = positions
        self._versions: dict[int, int] = {}
        self.set_api_versions(api_versions)
        self._topic_ids: dict[str, uuid.UUID] = {}  # from the metadata (set_topic_ids), for v10 requests

        self._phase = MemberState.UNJOINED
        self.subscription: tuple[str, ...] | None = None
        self._metadata: dict[str, int] = {}
        self.coordinator: Coordinator | None = None
        self.generation = _Generation()
        self.leader = False
        self._group_topics: frozenset[str] = frozenset()  # all members' topics, when leader
        self._assignment_snapshot: dict[str, int | None] | None = None  # leader: counts it assigned with
        self.assignment: tuple[TopicPartition, ...] = ()

        self._events: deque = deque()
        self._in_flight: set[OutgoingRequest] = set()
        self._find_request: OutgoingRequest | None = None
        self._find_retry_at = 0.0
        self._join_request: OutgoingRequest | None = None
        self._join_retry_at = 0.0
        self._sync_request: OutgoingRequest | None = None
        self._pending_sync: tuple[SyncGroupRequest, int] | None = None
        self._heartbeat_request: OutgoingRequest | None = None
        self._heartbeat_due = 0.0
        self._session_deadline: float | None = None
        self._last_poll: float | None = None
        self._rejoin_reason: str | None = None
        self._blocked = False  # a fatal error: wait for record_poll or subscribe
        self._unacked_prepare = False  # PartitionsRevoked/Lost not yet taken by drain_events
        self._commits: list[_Commit] = []
        self._fetches: list[_OffsetFetch] = []
        self._auto_commit_due: float | None = None
        self._auto_commit: _Commit | None = None
        self._leave_sent = False
        self._close_deadline: float | None = None
        self._outbox: list[OutgoingRequest] = []  # requests made outside poll(), handed out by the next one
        self._ids = itertools.count(1)

    # ---- configuration ------------------------------------------------------------------------------

    def set_api_versions(self, api_versions: Mapping[int, object] | None) -> None:
        """What the broker supports, per API key: ``(min, max)`` or just ``max``. None: our newest versions.
        Each request then goes out at the highest version both sides support."""
        chosen = {}
        for key, (low, high) in CLIENT_VERSIONS.items():
            if api_versions is None:
                chosen[key] = high
                continue
            offered = api_versions.get(key)
            if offered is None:
                continue
            broker_low, broker_high = offered if isinstance(offered, tuple) else (0, offered)
            version = min(high, broker_high)
            if version >= max(low, broker_low):
                chosen[key] = version
        self._versions = chosen

    def set_topic_ids(self, topic_ids: Mapping[str, uuid.UUID]) -> None:
        """Topic ids by name (the metadata's), for OffsetCommit and OffsetFetch v10, which name topics by id."""
        self._topic_ids = dict(topic_ids)

    def _offsets_version(self, api_key: int, topics) -> int:
        """``api_key``'s version for a request about ``topics``: below v10 while one has no known id."""
        version = self.version(api_key)
        if version >= _TOPIC_ID_VERSION and any(topic not in self._topic_ids for topic in topics):
            return _TOPIC_ID_VERSION - 1
        return version

    def version(self, api_key: int) -> int:
        """The version requests of ``api_key`` are sent at; GroupError if the broker supports none of ours."""
        version = self._versions.get(api_key)
        if version is None:
            raise GroupError(f"the broker supports no version of API {api_key} this client can use "
                             f"(client versions {CLIENT_VERSIONS[api_key][0]}-{CLIENT_VERSIONS[api_key][1]})",
                             E.UNSUPPORTED_VERSION)
        if self.group_instance_id is not None and version < _INSTANCE_ID_VERSIONS.get(api_key, 0):
            raise GroupError(f"static membership needs API {api_key} v{_INSTANCE_ID_VERSIONS[api_key]}+, "
                             f"the broker offers v{version}", E.UNSUPPORTED_VERSION)
        return version

    # ---- what the application does --------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        if self._phase is MemberState.JOINING and self.coordinator is None:
            return MemberState.FINDING_COORDINATOR
        return self._phase

    @property
    def closed(self) -> bool:
        return self._phase is MemberState.CLOSED

    @property
    def metadata_topics(self) -> frozenset[str]:
        """The topics whose partition counts the member needs: its own, and as leader the whole group's."""
        return frozenset(self.subscription or ()) | self._group_topics

    def subscribe(self, topics: Iterable[str], now_ms: float) -> None:
        """Join (or rejoin with) a subscription to ``topics``; an empty list leaves the group."""
        if isinstance(topics, str):
            raise TypeError("subscribe() takes a list of topics, not a string")
        wanted = tuple(sorted(set(topics)))
        for topic in wanted:
            if not isinstance(topic, str) or not topic:
                raise ValueError(f"topic names must be non-empty strings, not {topic!r}")
        self._check_open()
        if not wanted:
            self.unsubscribe(now_ms)
            return
        changed = wanted != self.subscription
        self.subscription = wanted
        self._blocked = False
        if self._last_poll is None:
            self._last_poll = now_ms
        if self._phase is MemberState.UNJOINED:
            self._phase = MemberState.JOINING
        elif changed and self._phase in (MemberState.STABLE, MemberState.SYNCING, MemberState.JOINING):
            self._request_rejoin("subscription changed", now_ms)

    def unsubscribe(self, now_ms: float) -> None:
        """Give up the assignment and leave the group (LeaveGroup for a dynamic member)."""
        self._check_open()
        self.subscription = None
        self._group_topics = frozenset()
        self._give_up_partitions(lost=self.generation.generation_id == _NO_GENERATION)
        self._send_leave_and_reset(now_ms, "the consumer unsubscribed")
        self._phase = MemberState.UNJOINED

    def record_poll(self, now_ms: float) -> None:
        """The application polled: restarts the max.poll.interval.ms clock; retries a join stopped by an
        error or by a poll timeout."""
        self._last_poll = now_ms
        self._blocked = False
        if self._phase is MemberState.UNJOINED and self.subscription:
            self._phase = MemberState.JOINING

    def update_metadata(self, partition_counts: Mapping[str, int | None], now_ms: float) -> None:
        """Partition counts by topic (None: the topic is unknown). A leader rejoins when a group topic's
        count is now known and differs from the one it assigned with, so that new partitions (or a topic it
        could not assign before) get assigned. A count turning unknown changes nothing: a partial metadata
        answer must not cause a rebalance."""
        for topic, count in partition_counts.items():
            if count is None:
                self._metadata.pop(topic, None)
            elif isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"partition count of {topic!r} must be a non-negative int, not {count!r}")
            else:
                self._metadata[topic] = count
        if self.leader and self._assignment_snapshot is not None and self._phase is MemberState.STABLE:
            changed = [topic for topic, assigned in self._assignment_snapshot.items()
                       if self._metadata.get(topic) is not None and self._metadata[topic] != assigned]
            if changed:
                self._request_rejoin(f"the partition count of {', '.join(sorted(changed))} changed", now_ms)

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], now_ms: float,
               timeout_ms: int | None = None) -> int:
        """Commit ``offsets`` (the next offsets to consume). Returns the request id a CommitCompleted event
        will carry. No timeout: commitAsync (one attempt; waits at most request.timeout.ms for a
        coordinator). A timeout: commitSync (retriable errors retried until it passes)."""
        self._check_open()
        commit = _Commit(next(self._ids), _normalize(offsets),
                         now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms),
                         retry=timeout_ms is not None, auto=False)
        if not commit.offsets:
            self._events.append(CommitCompleted(commit.request_id, {}))
        else:
            self._commits.append(commit)
        return commit.request_id

    def fetch_committed(self, partitions: Iterable[TopicPartition], now_ms: float,
                        timeout_ms: int | None = None) -> int:
        """Ask for the committed offsets of ``partitions``; a CommittedOffsets event carries the id returned."""
        self._check_open()
        fetch = _OffsetFetch(next(self._ids), tuple(dict.fromkeys(partitions)),
                             now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms))
        if not fetch.partitions:
            self._events.append(CommittedOffsets(fetch.request_id, {}))
        else:
            self._fetches.append(fetch)
        return fetch.request_id

    def close(self, now_ms: float, timeout_ms: int | None = None) -> None:
        """Leave: auto-commit (if enabled), give up the partitions, LeaveGroup (dynamic members), within
        ``timeout_ms`` (default request.timeout.ms). Keep driving until ``closed``."""
        if self._phase in (MemberState.LEAVING, MemberState.CLOSED):
            return
        self._close_deadline = now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms)
        in_generation = self.generation.generation_id != _NO_GENERATION
        if self.config.enable_auto_commit and self.assignment and in_generation:
            self._commit_positions(now_ms, sync=True)
        self._give_up_partitions(lost=not in_generation)
        self._drop_join_and_sync()
        self._phase = MemberState.LEAVING

    def drain_events(self) -> list:
        """The events since the last call, oldest first. Taking PartitionsRevoked/Lost lets a pending
        JoinGroup or LeaveGroup go out (after the commits the driver made meanwhile)."""
        events = list(self._events)
        self._events.clear()
        self._unacked_prepare = False
        return events

    # ---- timers ----------------------------------------------------------------------------------------

    def timeout_ms(self, now_ms: float) -> float | None:
        """Milliseconds until ``poll`` has something to do by the clock alone (None: nothing timed)."""
        times = [request.sent_ms + request.timeout_ms for request in self._in_flight]
        if self._phase is MemberState.CLOSED:
            return None
        if self._close_deadline is not None:
            times.append(self._close_deadline)
        if self._needs_coordinator() and self.coordinator is None and self._find_request is None:
            times.append(self._find_retry_at)
        if self._heartbeating():
            if self._heartbeat_request is None:
                times.append(self._heartbeat_due)
            if self._session_deadline is not None:
                times.append(self._session_deadline)
            if self._last_poll is not None:
                times.append(self._last_poll + self.config.max_poll_interval_ms)
        if self._phase is MemberState.JOINING and self._join_request is None and not self._blocked:
            times.append(self._join_retry_at)
        if self._auto_commit_due is not None and self._phase is MemberState.STABLE:
            times.append(self._auto_commit_due)
        for op in itertools.chain(self._commits, self._fetches):
            if op.request is None:
                times.append(op.retry_at)
            if op.deadline is not None:
                times.append(op.deadline)
        if not times:
            return None
        return max(0.0, min(times) - now_ms)

    # ---- the driver's side -------------------------------------------------------------------------------

    def poll(self, now_ms: float) -> list[OutgoingRequest]:
        """The requests to send now."""
        out: list[OutgoingRequest] = []
        if self._phase is MemberState.CLOSED:
            return out
        try:
            self._expire(now_ms)
            self._check_clocks(now_ms)
            if self._phase is MemberState.REBALANCING and not self._unacked_prepare and not self._commits:
                self._phase = MemberState.JOINING
            if self._phase is MemberState.LEAVING:
                self._step_leaving(out, now_ms)
            if self._phase is not MemberState.CLOSED:
                if self.coordinator is None:
                    if self._needs_coordinator() and self._find_request is None and now_ms >= self._find_retry_at:
                        self._send(out, self._find_coordinator_request(now_ms))
                else:
                    self._step_membership(out, now_ms)
                    self._step_commits(out, now_ms)
                    self._step_fetches(out, now_ms)
        except GroupError as error:  # no usable version of a request: nothing in the group can work
            self._fatal(error, now_ms)
        out[:0] = self._outbox
        self._outbox.clear()
        return out

    def handle_response(self, request: OutgoingRequest, response, now_ms: float) -> None:
        """A response arrived for ``request``. Responses to requests the machine gave up are ignored."""
        expected = _RESPONSES[request._kind]
        if not isinstance(response, expected):
            raise TypeError(f"{request!r} expects a {expected.__name__}, not {type(response).__name__}")
        if request not in self._in_flight:
            return
        self._in_flight.discard(request)
        try:
            getattr(self, f"_on_{request._kind}_response")(request, response, now_ms)
        except GroupError as error:  # e.g. SyncGroup has no version the broker supports
            self._fatal(error, now_ms)

    def handle_failure(self, request: OutgoingRequest, now_ms: float, reason: str = "request failed") -> None:
        """``request`` got no response (connection lost, timed out)."""
        if request not in self._in_flight:
            return
        self._in_flight.discard(request)
        self._on_failure(request, now_ms, reason)

    # ---- membership steps ----------------------------------------------------------------------------

    def _step_membership(self, out: list, now_ms: float) -> None:
        phase = self._phase
        if phase is MemberState.JOINING and not self._blocked and self._join_request is None \
                and now_ms >= self._join_retry_at:
            self._send(out, self._join_group_request(now_ms))
        elif phase is MemberState.SYNCING and self._sync_request is None and self._pending_sync is not None:
            body, version = self._pending_sync
            self._pending_sync = None
            self._sync_request = self._send(out, OutgoingRequest("sync", body, version, self.coordinator,
                                                                 self.config.request_timeout_ms, now_ms))
        if self._heartbeating() and self._heartbeat_request is None and now_ms >= self._heartbeat_due:
            self._heartbeat_request = self._send(out, self._heartbeat_request_for(now_ms))
            self._heartbeat_due = now_ms + self.config.heartbeat_interval_ms
        if self._phase is MemberState.STABLE and self._auto_commit_due is not None and now_ms >= self._auto_commit_due:
            if self._auto_commit is None:
                self._commit_positions(now_ms, sync=False)
            self._auto_commit_due = now_ms + self.config.auto_commit_interval_ms

    def _step_leaving(self, out: list, now_ms: float) -> None:
        if self._unacked_prepare or self._commits or self._leave_sent:
            return  # (a LeaveGroup sent: its answer or failure closes)
        if self.group_instance_id is not None or not self.generation.member_id:
            self._finish_close()  # nothing to leave: a static member stays until its session times out
        elif self.coordinator is not None:
            self._send(out, self._leave_group_request(now_ms, "the consumer is being closed"))
            self._leave_sent = True

    def _step_commits(self, out: list, now_ms: float) -> None:
        for commit in list(self._commits):
            if commit.request is not None or now_ms < commit.retry_at:
                continue
            error = self._commit_generation_error()
            if error is not None:
                self._finish_commit(commit, error)
                continue
            commit.request = self._send(out, self._offset_commit_request(commit, now_ms))

    def _step_fetches(self, out: list, now_ms: float) -> None:
        for fetch in list(self._fetches):
            if fetch.request is None and now_ms >= fetch.retry_at:
                fetch.request = self._send(out, self._offset_fetch_request(fetch, now_ms))

    def _heartbeating(self) -> bool:
        # Not while JoinGroup or SyncGroup is parked at the coordinator: a member awaiting either is kept
        # alive there, and a heartbeat would only queue behind it on the connection.
        return (self._phase in (MemberState.STABLE, MemberState.REBALANCING)
                and self.coordinator is not None and self.generation.generation_id != _NO_GENERATION
                and bool(self.generation.member_id))

    def _needs_coordinator(self) -> bool:
        if self._commits or self._fetches:
            return True
        if self._phase is MemberState.LEAVING:
            return self._leave_sent is False and self.group_instance_id is None and bool(self.generation.member_id)
        return self._phase in (MemberState.JOINING, MemberState.SYNCING, MemberState.STABLE,
                               MemberState.REBALANCING) and not self._blocked

    def _check_clocks(self, now_ms: float) -> None:
        for op in [c for c in self._commits if c.deadline <= now_ms]:
            self._finish_commit(op, GroupError("commit not completed within its timeout", E.REQUEST_TIMED_OUT))
        for op in [f for f in self._fetches if f.deadline is not None and f.deadline <= now_ms]:
            self._finish_fetch(op, {}, GroupError("committed offsets not fetched within the timeout",
                                                  E.REQUEST_TIMED_OUT))
        if self._close_deadline is not None and now_ms >= self._close_deadline:
            self._finish_close()
            return
        if not self._heartbeating():
            return
        if self._last_poll is not None and now_ms - self._last_poll > self.config.max_poll_interval_ms:
            # The application stopped polling: leave, so the group need not wait for it (Java's
            # heartbeat thread does the same). The next record_poll joins again.
            self._give_up_partitions(lost=True)
            self._send_leave_and_reset(now_ms, "consumer poll timeout has expired")
            self._phase = MemberState.UNJOINED
            self._events.append(GroupFailure(GroupError(
                f"max.poll.interval.ms ({self.config.max_poll_interval_ms}) passed without a poll: the member "
                f"left the group and rejoins on the next poll"), fatal=False))
            return
        if self._session_deadline is not None and now_ms >= self._session_deadline:
            self._coordinator_lost("session timed out without a heartbeat response", now_ms)
            self._session_deadline = now_ms + self.config.session_timeout_ms

    def _expire(self, now_ms: float) -> None:
        for request in [r for r in self._in_flight if now_ms >= r.sent_ms + r.timeout_ms]:
            self._in_flight.discard(request)
            self._on_failure(request, now_ms, f"no response within {request.timeout_ms} ms")

    # ---- transitions -----------------------------------------------------------------------------------

    def _request_rejoin(self, reason: str, now_ms: float) -> None:
        """Rejoin with the current generation: commit (auto-commit), revoke, then JoinGroup."""
        if self._phase in (MemberState.LEAVING, MemberState.CLOSED, MemberState.UNJOINED):
            return
        self._rejoin_reason = reason
        if self._phase in (MemberState.JOINING, MemberState.REBALANCING) and self._join_request is None:
            return  # the next JoinGroup carries the change
        if self._phase is MemberState.STABLE and self.assignment:
            if self.config.enable_auto_commit and self.generation.generation_id != _NO_GENERATION:
                self._commit_positions(now_ms, sync=True, timeout_ms=self.config.request_timeout_ms)
            self._give_up_partitions(lost=False)
        self._drop_join_and_sync()
        self._phase = MemberState.REBALANCING
        self._auto_commit_due = None
        self._drop_assignment_fetches()

    def _reset_generation(self, reason: str, now_ms: float, *, member_id_too: bool) -> None:
        """The coordinator no longer knows our generation (and maybe member id): lose the partitions
        (they may belong to someone else already) and join again."""
        self._forget_generation(keep_member_id=not member_id_too)
        for commit in [c for c in self._commits if c.request is None]:
            self._finish_commit(commit, CommitFailedError(
                f"cannot commit: the member is no longer in its generation ({reason})"))
        self._give_up_partitions(lost=True)
        if self._phase not in (MemberState.LEAVING, MemberState.CLOSED, MemberState.UNJOINED):
            self._rejoin_reason = reason
            self._drop_join_and_sync()
            self._phase = MemberState.REBALANCING

    def _forget_generation(self, *, keep_member_id: bool) -> None:
        self.generation = _Generation(member_id=self.generation.member_id if keep_member_id else "")
        self.leader = False
        self._group_topics = frozenset()
        self._assignment_snapshot = None
        self._session_deadline = None
        self._auto_commit_due = None
        self._drop_assignment_fetches()

    def _give_up_partitions(self, *, lost: bool) -> None:
        if not self.assignment:
            return
        partitions, self.assignment = self.assignment, ()
        self._events.append(PartitionsLost(partitions) if lost else PartitionsRevoked(partitions))
        self._unacked_prepare = True

    def _drop_join_and_sync(self) -> None:
        for request in (self._join_request, self._sync_request):
            if request is not None:
                self._in_flight.discard(request)
        self._join_request = self._sync_request = None
        self._pending_sync = None

    def _drop_assignment_fetches(self) -> None:
        for fetch in [f for f in self._fetches if f.request_id is None]:
            self._fetches.remove(fetch)
            if fetch.request is not None:
                self._in_flight.discard(fetch.request)

    def _coordinator_lost(self, reason: str, now_ms: float) -> None:
        """Forget the coordinator and every request in flight to it (Java disconnects it)."""
        if self.coordinator is None:
            return
        self.coordinator = None
        self._find_retry_at = now_ms  # look it up again at once
        for request in [r for r in self._in_flight if r.destination is not None]:
            self._in_flight.discard(request)
            self._on_failure(request, now_ms, f"coordinator lost: {reason}", coordinator_known_lost=True)

    def _fatal(self, error: GroupError, now_ms: float) -> None:
        self._events.append(GroupFailure(error, fatal=True))
        self._drop_join_and_sync()
        if self._phase is MemberState.LEAVING:
            self._finish_close()
            return
        if self._phase is not MemberState.CLOSED:
            if self.assignment:
                self._give_up_partitions(lost=True)
            self._phase = MemberState.UNJOINED
            self._blocked = True
        for commit in list(self._commits):
            self._finish_commit(commit, error)
        for fetch in list(self._fetches):
            self._finish_fetch(fetch, {}, error)

    def _finish_close(self) -> None:
        closing = GroupError("the consumer was closed before this completed")
        for commit in list(self._commits):
            self._finish_commit(commit, closing)
        for fetch in list(self._fetches):
            self._finish_fetch(fetch, {}, closing)
        self._in_flight.clear()
        self._phase = MemberState.CLOSED
        self.assignment = ()

    def _send_leave_and_reset(self, now_ms: float, reason: str) -> None:
        """LeaveGroup for a dynamic member the coordinator knows (its answer changes nothing), then forget
        the generation and member id."""
        if self.group_instance_id is None and self.generation.member_id and self.coordinator is not None:
            try:
                request = self._leave_group_request(now_ms, reason)
            except GroupError:
                request = None
            if request is not None:
                self._in_flight.add(request)
                self._outbox.append(request)
        self._drop_join_and_sync()
        self._forget_generation(keep_member_id=False)

    def _check_open(self) -> None:
        if self._phase in (MemberState.LEAVING, MemberState.CLOSED):
            raise GroupError("the group member is closed")

    # ---- request builders -------------------------------------------------------------------------------

    def _send(self, out: list, request: OutgoingRequest) -> OutgoingRequest:
        self._in_flight.add(request)
        out.append(request)
        return request

    def _find_coordinator_request(self, now_ms: float) -> OutgoingRequest:
        version = self.version(FIND_COORDINATOR)
        if version >= 4:
            body = FindCoordinatorRequest(key_type=0, coordinator_keys=[self.group_id])
        else:
            body = FindCoordinatorRequest(key=self.group_id, key_type=0)
        self._find_request = OutgoingRequest("find", body, version, None, self.config.request_timeout_ms, now_ms)
        return self._find_request

    def _join_group_request(self, now_ms: float) -> OutgoingRequest:
        version = self.version(JOIN_GROUP)
        rebalance_timeout = self.config.max_poll_interval_ms
        metadata = encode_subscription(Subscription(
            topics=self.subscription or (), generation_id=self.generation.generation_id,
            rack_id=self.config.client_rack or None))
        reason = (self._rejoin_reason or "joining the group")[:_REASON_MAX_CHARS]
        body = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout if version >= 1 else -1, member_id=self.generation.member_id,
            group_instance_id=self.group_instance_id, protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
                       for name in self.config.partition_assignment_strategy],
            reason=reason if version >= 8 else None)
        timeout = max(self.config.request_timeout_ms, rebalance_timeout + _JOIN_TIMEOUT_LAPSE_MS)
        self._join_request = OutgoingRequest("join", body, version, self.coordinator, timeout, now_ms)
        return self._join_request

    def _heartbeat_request_for(self, now_ms: float) -> OutgoingRequest:
        body = HeartbeatRequest(group_id=self.group_id, generation_id=self.generation.generation_id,
                                member_id=self.generation.member_id, group_instance_id=self.group_instance_id)
        return OutgoingRequest("heartbeat", body, self.version(HEARTBEAT), self.coordinator,
                               self.config.request_timeout_ms, now_ms, context=self.generation.generation_id)

    def _leave_group_request(self, now_ms: float, reason: str) -> OutgoingRequest:
        version = self.version(LEAVE_GROUP)
        if version >= 3:
            body = LeaveGroupRequest(group_id=self.group_id, members=[LeaveGroupRequest.MemberIdentity(
                member_id=self.generation.member_id, group_instance_id=self.group_instance_id,
                reason=reason if version >= 5 else None)])
        else:
            body = LeaveGroupRequest(group_id=self.group_id, member_id=self.generation.member_id)
        return OutgoingRequest("leave", body, version, self.coordinator, self.config.request_timeout_ms, now_ms)

    def _offset_commit_request(self, commit: _Commit, now_ms: float) -> OutgoingRequest:
        version = self._offsets_version(OFFSET_COMMIT, {tp.topic for tp in commit.offsets})
        ids = self._topic_ids if version >= _TOPIC_ID_VERSION else {}
        by_topic: dict[str, list] = {}
        for tp, value in commit.offsets.items():
            by_topic.setdefault(tp.topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=value.offset,
                committed_leader_epoch=(value.leader_epoch if value.leader_epoch is not None and version >= 6
                                        else -1),
                committed_metadata=value.metadata))
        in_group = self.subscription is not None
        body = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=self.generation.generation_id if in_group else -1,
            member_id=self.generation.member_id if in_group else "",
            group_instance_id=self.group_instance_id if in_group and version >= 7 else None,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, topic_id=ids.get(topic, _ZERO_UUID),
                                                                 partitions=partitions)
                    for topic, partitions in by_topic.items()])
        return OutgoingRequest("commit", body, version, self.coordinator, self.config.request_timeout_ms, now_ms,
                               context=(commit, self.generation.generation_id))

    def _offset_fetch_request(self, fetch: _OffsetFetch, now_ms: float) -> OutgoingRequest:
        by_topic: dict[str, list[int]] = {}
        for tp in fetch.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        version = self._offsets_version(OFFSET_FETCH, by_topic)
        ids = self._topic_ids if version >= _TOPIC_ID_VERSION else {}
        if version >= 8:
            body = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=self.group_id, topics=[OffsetFetchRequest.OffsetFetchRequestTopics(
                    name=topic, topic_id=ids.get(topic, _ZERO_UUID), partition_indexes=partitions)
                    for topic, partitions in by_topic.items()])])
        else:
            body = OffsetFetchRequest(group_id=self.group_id, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                name=topic, partition_indexes=partitions) for topic, partitions in by_topic.items()])
        return OutgoingRequest("fetch", body, version, self.coordinator, self.config.request_timeout_ms, now_ms,
                               context=fetch)

    # ---- responses ---------------------------------------------------------------------------------------

    def _on_find_response(self, request: OutgoingRequest, response: FindCoordinatorResponse, now_ms: float) -> None:
        self._find_request = None
        if request.version >= 4:
            entry = next((c for c in response.coordinators if c.key == self.group_id), None)
            if entry is None:
                code, node, host, port, message = E.COORDINATOR_NOT_AVAILABLE, -1, "", -1, "group missing"
            else:
                code, node, host, port, message = (entry.error_code, entry.node_id, entry.host, entry.port,
                                                   entry.error_message)
        else:
            code, node, host, port, message = (response.error_code, response.node_id, response.host,
                                               response.port, response.error_message)
        if code == E.NONE and node >= 0:
            self.coordinator = Coordinator(node, host, port)
            return
        error = _error(code, "FindCoordinator failed" + (f": {message}" if message else ""))
        if error.retriable or code == E.NONE:
            self._find_retry_at = now_ms + self.config.retry_backoff_ms
        else:
            self._fatal(error, now_ms)

    def _on_join_response(self, request: OutgoingRequest, response: JoinGroupResponse, now_ms: float) -> None:
        if request is not self._join_request:
            return
        self._join_request = None
        code = response.error_code
        if code == E.NONE:
            self._joined(request, response, now_ms)
        elif code == E.MEMBER_ID_REQUIRED:  # KIP-394: join again at once with the id we were given
            self.generation = _Generation(member_id=response.member_id)
        elif code == E.UNKNOWN_MEMBER_ID:
            self.generation = _Generation()
        elif code == E.ILLEGAL_GENERATION:
            self.generation = _Generation(member_id=self.generation.member_id)
        elif code == E.REBALANCE_IN_PROGRESS:
            pass  # join again at once
        elif code in _COORDINATOR_ERRORS:
            self._coordinator_lost(f"JoinGroup answered {_name(code)}", now_ms)
        elif ErrorCode.of(code) in _RETRIABLE_CODES:  # e.g. COORDINATOR_LOAD_IN_PROGRESS
            self._join_retry_at = now_ms + self.config.retry_backoff_ms
        else:
            if code == E.GROUP_MAX_SIZE_REACHED:
                self.generation = _Generation()
            self._fatal(_error(code, "JoinGroup failed"), now_ms)

    def _joined(self, request: OutgoingRequest, response: JoinGroupResponse, now_ms: float) -> None:
        protocol = response.protocol_name
        if protocol not in self.config.partition_assignment_strategy or \
                (response.protocol_type is not None and response.protocol_type != CONSUMER_PROTOCOL_TYPE):
            self._fatal(GroupError(f"JoinGroup chose protocol {response.protocol_type}/{protocol}, which this "
                                   f"member did not offer", E.INCONSISTENT_GROUP_PROTOCOL), now_ms)
            return
        self.generation = _Generation(response.generation_id, response.member_id, protocol)
        self.leader = response.leader == response.member_id
        self._session_deadline = now_ms + self.config.session_timeout_ms
        self._heartbeat_due = now_ms + self.config.heartbeat_interval_ms
        assignments = []
        if self.leader and not response.skip_assignment:
            assignments = self._assign(protocol, response.members)
        elif not self.leader:
            self._group_topics = frozenset()
            self._assignment_snapshot = None
        version = self.version(SYNC_GROUP)
        body = SyncGroupRequest(
            group_id=self.group_id, generation_id=response.generation_id, member_id=response.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE if version >= 5 else None,
            protocol_name=protocol if version >= 5 else None, assignments=assignments)
        self._pending_sync = (body, version)
        self._phase = MemberState.SYNCING

    def _assign(self, protocol: str, members) -> list:
        """The leader's SyncGroup assignments, from every member's subscription."""
        subscriptions: dict[str, tuple[str, ...]] = {}
        instance_ids: dict[str, str | None] = {}
        versions: dict[str, int] = {}
        for member in members:
            try:
                subscription = decode_subscription(member.metadata)
                subscriptions[member.member_id] = subscription.topics
                versions[member.member_id] = min(subscription.version, ASSIGNMENT_VERSION)
            except DecodeError as exc:  # assign it nothing rather than stall the whole group
                subscriptions[member.member_id] = ()
                versions[member.member_id] = 0
                self._events.append(GroupFailure(GroupError(
                    f"member {member.member_id} sent a subscription that does not decode ({exc}); "
                    f"it gets no partitions"), fatal=False))
            instance_ids[member.member_id] = member.group_instance_id
        self._group_topics = frozenset(t for topics in subscriptions.values() for t in topics)
        self._assignment_snapshot = self._snapshot(dict.fromkeys(self._group_topics))
        counts = {topic: count for topic, count in self._assignment_snapshot.items() if count is not None}
        result = ASSIGNORS[protocol].assign(counts, subscriptions, instance_ids)
        return [SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=member_id, assignment=encode_assignment(partitions, version=versions[member_id]))
                for member_id, partitions in result.items()]

    def _snapshot(self, topics: Iterable[str]) -> dict[str, int | None]:
        return {topic: self._metadata.get(topic) for topic in topics}

    def _on_sync_response(self, request: OutgoingRequest, response: SyncGroupResponse, now_ms: float) -> None:
        if request is not self._sync_request:
            return
        self._sync_request = None
        code = response.error_code
        if code == E.NONE:
            if request.version >= 5 and ((response.protocol_type not in (None, CONSUMER_PROTOCOL_TYPE))
                                         or response.protocol_name not in (None, self.generation.protocol)):
                self._fatal(GroupError(f"SyncGroup answered protocol {response.protocol_type}/"
                                       f"{response.protocol_name}, JoinGroup chose {self.generation.protocol}",
                                       E.INCONSISTENT_GROUP_PROTOCOL), now_ms)
                return
            try:
                assignment = decode_assignment(response.assignment)
            except DecodeError as exc:
                self._fatal(GroupError(f"the assignment from the group leader does not decode: {exc}"), now_ms)
                return
            self._assigned(assignment.partitions, now_ms)
        elif code == E.REBALANCE_IN_PROGRESS:
            self._phase = MemberState.JOINING
        elif code == E.UNKNOWN_MEMBER_ID:
            self._reset_generation("SyncGroup answered UNKNOWN_MEMBER_ID", now_ms, member_id_too=True)
        elif code == E.ILLEGAL_GENERATION:
            self._reset_generation("SyncGroup answered ILLEGAL_GENERATION", now_ms, member_id_too=False)
        elif code in _COORDINATOR_ERRORS:
            self._phase = MemberState.JOINING
            self._coordinator_lost(f"SyncGroup answered {_name(code)}", now_ms)
        elif ErrorCode.of(code) in _RETRIABLE_CODES:
            self._phase = MemberState.JOINING
            self._join_retry_at = now_ms + self.config.retry_backoff_ms
        else:
            self._fatal(_error(code, "SyncGroup failed"), now_ms)

    def _assigned(self, partitions: tuple[TopicPartition, ...], now_ms: float) -> None:
        self._session_deadline = now_ms + self.config.session_timeout_ms
        subscribed = set(self.subscription or ())
        stray = sorted({tp.topic for tp in partitions} - subscribed)
        if stray:
            # Java refuses an assignment that does not match the subscription and rejoins.
            self._events.append(GroupFailure(GroupError(
                f"the leader assigned partitions of topics this member does not subscribe to ({', '.join(stray)}); "
                f"rejoining"), fatal=False))
            self._phase = MemberState.REBALANCING
            self._rejoin_reason = "assignment did not match the subscription"
            self._join_retry_at = now_ms + self.config.retry_backoff_ms
            return
        self.assignment = partitions
        self._phase = MemberState.STABLE
        self._rejoin_reason = None
        if self.config.enable_auto_commit:
            self._auto_commit_due = now_ms + self.config.auto_commit_interval_ms
        self._events.append(PartitionsAssigned(partitions, self.generation.generation_id,
                                               self.generation.member_id, self.leader))
        if partitions:
            self._fetches.append(_OffsetFetch(None, partitions, None, assignment=partitions))

    def _on_heartbeat_response(self, request: OutgoingRequest, response: HeartbeatResponse, now_ms: float) -> None:
        if request is self._heartbeat_request:
            self._heartbeat_request = None
        code = response.error_code
        if request._context != self.generation.generation_id and code != E.NONE:
            return  # about a generation we have left already
        if code == E.NONE:
            self._session_deadline = now_ms + self.config.session_timeout_ms
            return
        self._heartbeat_due = now_ms + self.config.retry_backoff_ms
        if code == E.REBALANCE_IN_PROGRESS:
            if self._phase is MemberState.STABLE:
                self._request_rejoin("the group is rebalancing", now_ms)
        elif code == E.UNKNOWN_MEMBER_ID:
            self._reset_generation("Heartbeat answered UNKNOWN_MEMBER_ID", now_ms, member_id_too=True)
        elif code == E.ILLEGAL_GENERATION:
            self._reset_generation("Heartbeat answered ILLEGAL_GENERATION", now_ms, member_id_too=False)
        elif code in _COORDINATOR_ERRORS:
            self._coordinator_lost(f"Heartbeat answered {_name(code)}", now_ms)
        elif ErrorCode.of(code) not in _RETRIABLE_CODES:
            self._fatal(_error(code, "Heartbeat failed"), now_ms)

    def _on_leave_response(self, request: OutgoingRequest, response: LeaveGroupResponse, now_ms: float) -> None:
        # Leaving succeeds either way: the member forgets its id, and the session timeout does the rest.
        if self._phase is MemberState.LEAVING:
            self._finish_close()

    def _on_commit_response(self, request: OutgoingRequest, response: OffsetCommitResponse, now_ms: float) -> None:
        commit, generation = request._context
        commit.request = None
        if commit not in self._commits:
            return
        codes = {ErrorCode.of(p.error_code) for t in response.topics for p in t.partitions} - {E.NONE}
        if not codes:
            self._finish_commit(commit, None)
            return
        code = _worst(codes)
        error = _error(code, "OffsetCommit failed")
        if code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            error = CommitFailedError(
                f"commit failed: the group rebalanced and gave the partitions to another member ({_name(code)})", code)
            self._finish_commit(commit, error)
            if generation == self.generation.generation_id and self.subscription is not None:
                self._reset_generation(f"OffsetCommit answered {_name(code)}", now_ms,
                                       member_id_too=code == E.UNKNOWN_MEMBER_ID)
        elif code == E.REBALANCE_IN_PROGRESS:
            self._finish_commit(commit, RebalanceInProgressError(
                "commit failed: the group is rebalancing; commit again after the new assignment", code))
            self._request_rejoin("OffsetCommit answered REBALANCE_IN_PROGRESS", now_ms)
        elif code == E.FENCED_INSTANCE_ID:
            self._finish_commit(commit, error)
            self._fatal(error, now_ms)
        else:
            if code in _COORDINATOR_ERRORS or code == E.REQUEST_TIMED_OUT:
                self._coordinator_lost(f"OffsetCommit answered {_name(code)}", now_ms)
            self._retry_or_fail_commit(commit, error, now_ms)

    def _on_fetch_response(self, request: OutgoingRequest, response: OffsetFetchResponse, now_ms: float) -> None:
        fetch: _OffsetFetch = request._context
        fetch.request = None
        if fetch not in self._fetches:
            return
        if request.version >= 8:
            group = next((g for g in response.groups if g.group_id == self.group_id), None)
            top = group.error_code if group is not None else E.UNKNOWN_SERVER_ERROR
            topics = group.topics if group is not None else ()
        else:
            top = response.error_code if request.version >= 2 else E.NONE
            topics = response.topics
        offsets: dict[TopicPartition, OffsetAndMetadata | None] = {}
        codes = {ErrorCode.of(top)} - {E.NONE}
        names = {self._topic_ids.get(tp.topic): tp.topic for tp in fetch.partitions}  # v10 answers by id
        for topic in topics:
            name = names.get(topic.topic_id) if request.version >= _TOPIC_ID_VERSION else topic.name
            for p in topic.partitions:
                if p.error_code != E.NONE:
                    codes.add(ErrorCode.of(p.error_code))
                    continue
                epoch = p.committed_leader_epoch if request.version >= 5 and p.committed_leader_epoch >= 0 else None
                offsets[TopicPartition(name, p.partition_index)] = (
                    None if p.committed_offset < 0 else OffsetAndMetadata(p.committed_offset, p.metadata or "", epoch))
        if not codes:
            self._finish_fetch(fetch, {tp: offsets.get(tp) for tp in fetch.partitions}, None)
            return
        code = _worst(codes)
        error = _error(code, "OffsetFetch failed")
        if code in _COORDINATOR_ERRORS:
            self._coordinator_lost(f"OffsetFetch answered {_name(code)}", now_ms)
        if code in _COORDINATOR_ERRORS or code in _RETRIABLE_CODES:
            fetch.retry_at = now_ms + self.config.retry_backoff_ms  # until the assignment or deadline changes
        elif code in (E.GROUP_AUTHORIZATION_FAILED,):
            self._fatal(error, now_ms)
        else:
            self._finish_fetch(fetch, {}, error)

    def _on_failure(self, request: OutgoingRequest, now_ms: float, reason: str,
                    coordinator_known_lost: bool = False) -> None:
        kind = request._kind
        if kind == "find":
            self._find_request = None
            self._find_retry_at = now_ms + self.config.retry_backoff_ms
            return
        if kind == "leave" and self._phase is MemberState.LEAVING:
            self._finish_close()
            return
        # Java marks the coordinator unknown when a request to it fails.
        if not coordinator_known_lost:
            self._coordinator_lost(reason, now_ms)
        if kind == "join" and request is self._join_request:
            self._join_request = None
        elif kind == "sync" and request is self._sync_request:
            self._sync_request = None
            if self._phase is MemberState.SYNCING:
                self._phase = MemberState.JOINING  # join again: the generation may be complete without us
        elif kind == "heartbeat" and request is self._heartbeat_request:
            self._heartbeat_request = None
            self._heartbeat_due = now_ms + self.config.retry_backoff_ms
        elif kind == "commit":
            commit, _generation = request._context
            commit.request = None
            if commit in self._commits:
                self._retry_or_fail_commit(commit, GroupError(f"OffsetCommit failed: {reason}",
                                                              E.NETWORK_EXCEPTION), now_ms)
        elif kind == "fetch":
            fetch = request._context
            fetch.request = None
            fetch.retry_at = now_ms + self.config.retry_backoff_ms

    # ---- commits and fetches -------------------------------------------------------------------------

    def _commit_positions(self, now_ms: float, *, sync: bool, timeout_ms: int | None = None) -> None:
        positions = _normalize(self._positions() if self._positions is not None else {})
        owned = set(self.assignment)
        offsets = {tp: value for tp, value in positions.items() if tp in owned}
        if not offsets:
            return
        deadline = now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms)
        if self._close_deadline is not None:
            deadline = min(deadline, self._close_deadline)
        commit = _Commit(next(self._ids), offsets, deadline, retry=sync, auto=True)
        self._commits.append(commit)
        if not sync:
            self._auto_commit = commit

    def _commit_generation_error(self) -> GroupError | None:
        """Why a commit cannot go out now, if it cannot (Java's generationIfStable check)."""
        if self.subscription is None:
            return None  # not using group management: a plain commit for the group id
        if self._phase in (MemberState.STABLE, MemberState.REBALANCING, MemberState.LEAVING) and \
                self.generation.generation_id != _NO_GENERATION:
            return None
        if self._phase in (MemberState.JOINING, MemberState.SYNCING):
            return RebalanceInProgressError("commit failed: the group is rebalancing; commit again after the "
                                            "new assignment", E.REBALANCE_IN_PROGRESS)
        return CommitFailedError("commit failed: the member is not part of an active group generation")

    def _retry_or_fail_commit(self, commit: _Commit, error: GroupError, now_ms: float) -> None:
        if commit.retry and (error.retriable or error.error_code in _COORDINATOR_ERRORS):
            commit.retry_at = now_ms + self.config.retry_backoff_ms
        else:
            self._finish_commit(commit, error)

    def _finish_commit(self, commit: _Commit, error: GroupError | None) -> None:
        if commit in self._commits:
            self._commits.remove(commit)
        if commit.request is not None:
            self._in_flight.discard(commit.request)
            commit.request = None
        if commit is self._auto_commit:
            self._auto_commit = None
        self._events.append(CommitCompleted(commit.request_id, dict(commit.offsets), error, commit.auto))

    def _finish_fetch(self, fetch: _OffsetFetch, offsets: dict, error: GroupError | None) -> None:
        if fetch in self._fetches:
            self._fetches.remove(fetch)
        if fetch.request is not None:
            self._in_flight.discard(fetch.request)
            fetch.request = None
        if fetch.request_id is None and fetch.assignment != self.assignment:
            return  # made for an assignment the member no longer has
        self._events.append(CommittedOffsets(fetch.request_id, offsets, error))


# ---- helpers ---------------------------------------------------------------------------------------------

_RESPONSES = {"find": FindCoordinatorResponse, "join": JoinGroupResponse, "sync": SyncGroupResponse,
              "heartbeat": HeartbeatResponse, "leave": LeaveGroupResponse, "commit": OffsetCommitResponse,
              "fetch": OffsetFetchResponse}
_RETRIABLE_CODES = frozenset(code for code in ErrorCode if code.retriable)
# When a response carries several errors, the one that decides what happens next.
_PRECEDENCE = (E.FENCED_INSTANCE_ID, E.GROUP_AUTHORIZATION_FAILED, E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION,
               E.REBALANCE_IN_PROGRESS, E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE)


def _worst(codes: set) -> int:
    for code in _PRECEDENCE:
        if code in codes:
            return code
    non_retriable = sorted(int(c) for c in codes if c not in _RETRIABLE_CODES)
    return ErrorCode.of(non_retriable[0] if non_retriable else min(int(c) for c in codes))


def _name(code: int) -> str:
    known = ErrorCode.of(code)
    return known.name if isinstance(known, ErrorCode) else f"error code {code}"


def _error(code: int, what: str) -> GroupError:
    return GroupError(f"{what}: {_name(code)}", int(code))


def _normalize(offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> dict[TopicPartition, OffsetAndMetadata]:
    result = {}
    for tp, value in offsets.items():
        tp = TopicPartition(*tp)
        if isinstance(value, OffsetAndMetadata):
            offset = value.offset
        elif isinstance(value, int) and not isinstance(value, bool):
            offset, value = value, OffsetAndMetadata(value)
        else:
            raise TypeError(f"offset for {tp} must be an int or OffsetAndMetadata, not {value!r}")
        if offset < 0:
            raise ValueError(f"offset for {tp} must not be negative, not {offset}")
        result[tp] = value
    return result

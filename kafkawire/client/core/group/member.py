"""GroupMember: a consumer in a group, sans I/O, driven by time and responses alone. What every group
protocol shares is here: the coordinator (found again whenever it is lost: NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, a failed request to it, which forgets the requests in flight to it), the
subscription, the assignment and the events, the clocks (max.poll.interval.ms: without ``record_poll``
for that long the member leaves until the next one), closing, and the offsets (``offsets``). How the
member joins and gets its partitions is its protocol's, chosen by ``group.protocol``: the classic
JoinGroup protocol (``classic``) or KIP-848's ConsumerGroupHeartbeat (``consumer_protocol``), two
classes side by side that drive the member they run in (its phase, generation and assignment are
theirs to move, as its offsets are). A fatal GroupFailure keeps the member out until ``record_poll`` or
``subscribe``.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import ApiKey, FindCoordinatorResponse

from ...errors import GroupError
from ..consumer.config import ConsumerConfig
from ..topic_partition import TopicPartition
from .classic import ClassicProtocol
from .consumer_protocol import ConsumerProtocol
from .offsets import GroupOffsets
from .protocol import (
    NO_GENERATION, RESPONSES, Coordinator, Generation, GroupFailure, MemberState, OffsetAndMetadata,
    OutgoingRequest, PartitionsLost, PartitionsRevoked, ResponseHandler, group_error, negotiate_versions,
    request_version,
)
from .requests import find_coordinator_request, read_find_coordinator

__all__ = ["GroupMember", "MembershipProtocol"]

E = ErrorCode


class MembershipProtocol(Protocol):
    """What a group protocol does for the ``GroupMember`` it runs in (``ClassicProtocol``,
    ``ConsumerProtocol``)."""

    leader: bool
    group_topics: frozenset[str]  # other members' topics whose partition counts it needs (a classic leader)

    @property
    def rebalance_protocol(self) -> str: ...
    @property
    def eager(self) -> bool: ...  # offsets fetched for an assignment since replaced are dropped
    def handlers(self) -> dict[ApiKey, ResponseHandler]: ...
    def set_api_versions(self, api_versions: Mapping[int, object] | None) -> None: ...
    def topic_ids_changed(self) -> None: ...
    def heartbeating(self) -> bool: ...
    def timers(self) -> list[float]: ...
    def check_clocks(self, now_ms: float) -> None: ...
    def step(self, out: list[OutgoingRequest], now_ms: float) -> None: ...  # the coordinator is known
    def step_leaving(self, out: list[OutgoingRequest], now_ms: float) -> None: ...
    def request_rejoin(self, reason: str, now_ms: float) -> None: ...
    def reset(self, reason: str) -> None: ...  # the generation is gone: the member rejoins
    def forget_generation(self) -> None: ...
    def drop_requests(self) -> None: ...  # forget its joining requests in flight
    def send_leave_and_reset(self, now_ms: float, reason: str) -> None: ...
    def metadata_updated(self, now_ms: float) -> None: ...
    def on_failure(self, request: OutgoingRequest, now_ms: float, reason: str,
                   coordinator_known_lost: bool) -> None: ...


class GroupMember:
    """One consumer's group membership, assignments and offsets. A driver (the asyncio layer, or a test)
    runs it::

        member = GroupMember(config, positions=lambda: consumed_positions)  # config.group_id is required
        member.set_api_versions(negotiated)      # per API key the broker's (min, max), or just max
        member.subscribe(["orders"], now_ms)
        while not member.closed:
            member.record_poll(now_ms)           # whenever the application polls
            member.update_metadata({"orders": 12}, now_ms)   # counts of member.metadata_topics
            member.set_topic_ids(ids)            # topic ids by name, from the same metadata
            for request in member.poll(now_ms):  # destination None: any broker, else the Coordinator
                send request.body at request.version, then hand the answer to
                member.handle_response(request, response, now_ms), or member.handle_failure(request, now_ms)
            for event in member.drain_events():  # PartitionsRevoked / Lost / Assigned, CommittedOffsets,
                handle(event)                    # CommitCompleted, GroupFailure
            wait for a response, or at most member.timeout_ms(now_ms)

    Call ``poll`` again after every other call: each may make a request ready. Requests expire by
    themselves and late answers are ignored, so a driver may drop them freely.
    """

    def __init__(self, config: ConsumerConfig, *,
                 positions: Callable[[], Mapping[TopicPartition, int | OffsetAndMetadata]] | None = None,
                 group_instance_id: str | None = None, api_versions: Mapping[int, object] | None = None,
                 member_id: str | None = None):
        if config.group_id is None or config.group_id == "":
            raise ValueError("a consumer group member needs a group.id")
        if group_instance_id is not None and (not isinstance(group_instance_id, str) or not group_instance_id):
            raise ValueError(f"group.instance.id must be a non-empty string, not {group_instance_id!r}")
        self.config = config
        self.group_id: str = config.group_id
        self.group_instance_id = group_instance_id
        self.offsets = GroupOffsets(self, config, positions)
        self._phase = MemberState.UNJOINED
        self.subscription: tuple[str, ...] | None = None
        self.coordinator: Coordinator | None = None
        self.generation = Generation()
        self.assignment: tuple[TopicPartition, ...] = ()
        self._metadata: dict[str, int] = {}  # partition counts by topic

        self._events: deque[object] = deque()
        self._in_flight: set[OutgoingRequest] = set()
        self._find_request: OutgoingRequest | None = None
        self._find_retry_at = 0.0
        self._last_poll: float | None = None
        self._blocked = False  # a fatal error: wait for record_poll or subscribe
        self._unacked_prepare = False  # PartitionsRevoked/Lost not yet taken by drain_events
        self._leave_sent = False
        self._close_deadline: float | None = None
        self._outbox: list[OutgoingRequest] = []  # requests made outside poll(), handed out by the next one
        # group.protocol: KIP-848's (``member_id``: its member id, else a new one) or the classic JoinGroup one
        self.protocol: MembershipProtocol = (ConsumerProtocol(self, member_id) if config.group_protocol == "consumer"
                                             else ClassicProtocol(self))
        self._handlers: dict[ApiKey, ResponseHandler] = {
            ApiKey.FIND_COORDINATOR: self._on_find_response, ApiKey.OFFSET_COMMIT: self.offsets.on_commit_response,
            ApiKey.OFFSET_FETCH: self.offsets.on_fetch_response, **self.protocol.handlers()}
        self._versions: dict[ApiKey, int] = {}
        self.set_api_versions(api_versions)

    # ---- configuration ------------------------------------------------------------------------------

    def set_api_versions(self, api_versions: Mapping[int, object] | None) -> None:
        """What the broker supports, per API key: ``(min, max)`` or just ``max``. None: our newest versions.
        Each request then goes out at the highest version both sides support."""
        self._versions = negotiate_versions(api_versions)
        self.protocol.set_api_versions(api_versions)

    def version(self, api_key: ApiKey) -> int:
        """The version requests of ``api_key`` are sent at; GroupError if the broker supports none of ours."""
        return request_version(self._versions, api_key, static=self.group_instance_id is not None)

    def set_topic_ids(self, topic_ids: Mapping[str, Any]) -> None:
        """Topic ids by name (the metadata's), for OffsetCommit and OffsetFetch v10 and KIP-848 assignments,
        which name topics by id."""
        self.offsets.topic_ids = dict(topic_ids)
        self.protocol.topic_ids_changed()

    @property
    def leader(self) -> bool:
        return self.protocol.leader

    @property
    def metadata_topics(self) -> frozenset[str]:
        """The topics whose partition counts the member needs: its own, and as leader the whole group's."""
        return frozenset(self.subscription or ()) | self.protocol.group_topics

    def update_metadata(self, partition_counts: Mapping[str, int | None], now_ms: float) -> None:
        """Partition counts by topic (None: the topic is unknown). A classic leader rejoins when a count it
        assigned with changes; a count turning unknown changes nothing: a partial metadata answer must not
        cause a rebalance."""
        for topic, count in partition_counts.items():
            if count is None:
                self._metadata.pop(topic, None)
            elif isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"partition count of {topic!r} must be a non-negative int, not {count!r}")
            else:
                self._metadata[topic] = count
        self.protocol.metadata_updated(now_ms)

    # ---- what the application does --------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        if self._phase is MemberState.JOINING and self.coordinator is None:
            return MemberState.FINDING_COORDINATOR
        return self._phase

    @property
    def rebalance_protocol(self) -> str:
        """"EAGER" or "COOPERATIVE" once the member joined a generation, "NONE" before (confluent-kafka's words)."""
        return self.protocol.rebalance_protocol

    @property
    def closed(self) -> bool:
        return self._phase is MemberState.CLOSED

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
            self.protocol.request_rejoin("subscription changed", now_ms)

    def unsubscribe(self, now_ms: float) -> None:
        """Give up the assignment and leave the group (LeaveGroup for a dynamic member)."""
        self._check_open()
        self.subscription = None
        self._give_up_partitions(lost=self.generation.generation_id == NO_GENERATION)
        self.protocol.send_leave_and_reset(now_ms, "the consumer unsubscribed")
        self._phase = MemberState.UNJOINED

    def record_poll(self, now_ms: float) -> None:
        """The application polled: restarts the max.poll.interval.ms clock; retries a join stopped by an
        error or by a poll timeout."""
        self._last_poll = now_ms
        self._blocked = False
        if self._phase is MemberState.UNJOINED and self.subscription:
            self._phase = MemberState.JOINING

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], now_ms: float,
               timeout_ms: int | None = None) -> int:
        """Commit ``offsets`` (the next offsets to consume). Returns the request id a CommitCompleted event
        will carry. No timeout: commitAsync (one attempt; waits at most request.timeout.ms for a
        coordinator). A timeout: commitSync (retriable errors retried until it passes)."""
        return self.offsets.commit(offsets, now_ms, timeout_ms)

    def fetch_committed(self, partitions: Iterable[TopicPartition], now_ms: float,
                        timeout_ms: int | None = None) -> int:
        """Ask for the committed offsets of ``partitions``; a CommittedOffsets event carries the id returned."""
        return self.offsets.fetch_committed(partitions, now_ms, timeout_ms)

    def close(self, now_ms: float, timeout_ms: int | None = None) -> None:
        """Leave: auto-commit (if enabled), give up the partitions, leave the group (dynamic members),
        within ``timeout_ms`` (default request.timeout.ms). Keep driving until ``closed``."""
        if self._phase in (MemberState.LEAVING, MemberState.CLOSED):
            return
        self._close_deadline = now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms)
        self.offsets.commit_before_revoking(now_ms)
        self._give_up_partitions(lost=self.generation.generation_id == NO_GENERATION)
        self.protocol.drop_requests()
        self._phase = MemberState.LEAVING

    def drain_events(self) -> list[object]:
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
        if self.protocol.heartbeating() and self._last_poll is not None:
            times.append(self._last_poll + self.config.max_poll_interval_ms)
        times.extend(self.protocol.timers())
        times.extend(self.offsets.timers())
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
            if self._phase is MemberState.REBALANCING and not self._unacked_prepare \
                    and not self.offsets.commits_pending():
                self._phase = MemberState.JOINING
            if self._phase is MemberState.LEAVING:
                self.protocol.step_leaving(out, now_ms)
            if self._phase is not MemberState.CLOSED:
                if self.coordinator is None:
                    if self._needs_coordinator() and self._find_request is None and now_ms >= self._find_retry_at:
                        version = self.version(ApiKey.FIND_COORDINATOR)
                        self._find_request = self._send(out, self._request(
                            "find", find_coordinator_request(version, self.group_id), version, now_ms, anywhere=True))
                else:
                    self.protocol.step(out, now_ms)
                    self.offsets.step(out, now_ms)
        except GroupError as error:  # no usable version of a request: nothing in the group can work
            self._fatal(error, now_ms)
        out[:0] = self._outbox
        self._outbox.clear()
        return out

    def handle_response(self, request: OutgoingRequest, response: Any, now_ms: float) -> None:
        """A response arrived for ``request``. Responses to requests the machine gave up are ignored."""
        expected = RESPONSES[request.api_key]
        if not isinstance(response, expected):
            raise TypeError(f"{request!r} expects a {expected.__name__}, not {type(response).__name__}")
        if request not in self._in_flight:
            return
        self._in_flight.discard(request)
        try:
            self._handlers[request.api_key](request, response, now_ms)
        except GroupError as error:  # e.g. SyncGroup has no version the broker supports
            self._fatal(error, now_ms)

    def handle_failure(self, request: OutgoingRequest, now_ms: float, reason: str = "request failed") -> None:
        """``request`` got no response (connection lost, timed out)."""
        if request not in self._in_flight:
            return
        self._in_flight.discard(request)
        self._on_failure(request, now_ms, reason)

    # ---- clocks ------------------------------------------------------------------------------------------

    def _needs_coordinator(self) -> bool:
        if self.offsets.has_work():
            return True
        if self._phase is MemberState.LEAVING:
            return self._leave_sent is False and self.group_instance_id is None and bool(self.generation.member_id)
        return self._phase in (MemberState.JOINING, MemberState.SYNCING, MemberState.STABLE,
                               MemberState.REBALANCING) and not self._blocked

    def _check_clocks(self, now_ms: float) -> None:
        self.offsets.expire(now_ms)
        if self._close_deadline is not None and now_ms >= self._close_deadline:
            self._finish_close()
            return
        if not self.protocol.heartbeating():
            return
        if self._last_poll is not None and now_ms - self._last_poll > self.config.max_poll_interval_ms:
            # The application stopped polling: leave, so the group need not wait for it (Java's
            # heartbeat thread does the same). The next record_poll joins again.
            self._give_up_partitions(lost=True)
            self.protocol.send_leave_and_reset(now_ms, "consumer poll timeout has expired")
            self._phase = MemberState.UNJOINED
            self._events.append(GroupFailure(GroupError(
                f"max.poll.interval.ms ({self.config.max_poll_interval_ms}) passed without a poll: the member "
                f"left the group and rejoins on the next poll"), fatal=False))
            return
        self.protocol.check_clocks(now_ms)

    def _expire(self, now_ms: float) -> None:
        for request in [r for r in self._in_flight if now_ms >= r.sent_ms + r.timeout_ms]:
            self._in_flight.discard(request)
            self._on_failure(request, now_ms, f"no response within {request.timeout_ms} ms")

    # ---- transitions -----------------------------------------------------------------------------------

    def _reset_generation(self, reason: str, now_ms: float, *, member_id_too: bool) -> None:
        """The coordinator no longer knows our generation (and maybe member id): lose the partitions
        (they may belong to someone else already) and join again."""
        self._forget_generation(keep_member_id=not member_id_too)
        self.offsets.fail_unsent_commits(reason)
        self._give_up_partitions(lost=True)
        if self._phase not in (MemberState.LEAVING, MemberState.CLOSED, MemberState.UNJOINED):
            self.protocol.reset(reason)
            self._phase = MemberState.REBALANCING

    def _forget_generation(self, *, keep_member_id: bool) -> None:
        self.generation = Generation(member_id=self.generation.member_id if keep_member_id else "")
        self.protocol.forget_generation()
        self.offsets.stop_assignment_work()

    def _give_up_partitions(self, *, lost: bool) -> None:
        if not self.assignment:
            return
        partitions, self.assignment = self.assignment, ()
        self._events.append(PartitionsLost(partitions) if lost else PartitionsRevoked(partitions))
        self._unacked_prepare = True

    def _revoke(self, partitions: tuple[TopicPartition, ...]) -> None:
        """Give up some partitions (a rebalance took them); JoinGroup waits until the event is taken."""
        gone = set(partitions)
        self.assignment = tuple(tp for tp in self.assignment if tp not in gone)
        self._events.append(PartitionsRevoked(partitions))
        self._unacked_prepare = True

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
        self.protocol.drop_requests()
        if self._phase is MemberState.LEAVING:
            self._finish_close()
            return
        if self._phase is not MemberState.CLOSED:
            if self.assignment:
                self._give_up_partitions(lost=True)
            self._phase = MemberState.UNJOINED
            self._blocked = True
        self.offsets.fail_all(error)

    def _finish_close(self) -> None:
        self.offsets.fail_all(GroupError("the consumer was closed before this completed"))
        self._in_flight.clear()
        self._phase = MemberState.CLOSED
        self.assignment = ()

    def _check_open(self) -> None:
        if self._phase in (MemberState.LEAVING, MemberState.CLOSED):
            raise GroupError("the group member is closed")

    # ---- requests ----------------------------------------------------------------------------------------

    def _send(self, out: list[OutgoingRequest], request: OutgoingRequest) -> OutgoingRequest:
        self._in_flight.add(request)
        out.append(request)
        return request

    def _request(self, kind: str, body: Any, version: int, now_ms: float, *, anywhere: bool = False,
                 timeout_ms: int | None = None, context: Any = None) -> OutgoingRequest:
        """A request to the coordinator (``anywhere``: to any broker), timed out after request.timeout.ms."""
        return OutgoingRequest(kind, body, version, None if anywhere else self.coordinator,
                               self.config.request_timeout_ms if timeout_ms is None else timeout_ms, now_ms, context)

    def _on_find_response(self, request: OutgoingRequest, response: FindCoordinatorResponse, now_ms: float) -> None:
        self._find_request = None
        code, node, host, port, message = read_find_coordinator(response, request.version, self.group_id)
        if code == E.NONE and node >= 0:
            self.coordinator = Coordinator(node, host, port)
            return
        error = group_error(code, "FindCoordinator failed" + (f": {message}" if message else ""))
        if error.retriable or code == E.NONE:
            self._find_retry_at = now_ms + self.config.retry_backoff_ms
        else:
            self._fatal(error, now_ms)

    def _on_failure(self, request: OutgoingRequest, now_ms: float, reason: str,
                    coordinator_known_lost: bool = False) -> None:
        kind = request.kind
        if kind == "find":
            self._find_request = None
            self._find_retry_at = now_ms + self.config.retry_backoff_ms
        elif kind in ("commit", "fetch"):
            if not coordinator_known_lost:  # Java marks the coordinator unknown when a request to it fails
                self._coordinator_lost(reason, now_ms)
            self.offsets.request_failed(request, now_ms, reason)
        else:
            self.protocol.on_failure(request, now_ms, reason, coordinator_known_lost)

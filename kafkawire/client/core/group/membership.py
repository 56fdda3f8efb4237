"""Classic consumer-group membership, sans I/O, after Java's AbstractCoordinator:
FindCoordinator, JoinGroup, SyncGroup, Heartbeat and LeaveGroup, driven by time and responses alone.
``GroupMember`` (``member``) adds the leader's assignments and the offsets; a driver runs that.

* The coordinator is found again whenever it is lost (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a
  failed request to it, a session timeout), which forgets the requests in flight to it.
* MEMBER_ID_REQUIRED (KIP-394) joins again at once with the id given. Before joining again the member
  gives up what its rebalance protocol says (``rebalance``: eager all, cooperative only unsubscribed
  topics; PartitionsLost for all once its generation is gone) and sends JoinGroup after ``drain_events``
  took that event and the commits made before it completed.
* REBALANCE_IN_PROGRESS rejoins; UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION reset and rejoin; without
  ``record_poll`` for max.poll.interval.ms the member leaves until the next one. Static members
  (KIP-345) send no LeaveGroup. A fatal GroupFailure keeps it out until ``record_poll`` or ``subscribe``.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import (
    ApiKey, FindCoordinatorResponse, HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, SyncGroupRequest,
    SyncGroupResponse,
)

from ...errors import GroupError
from .assignors import CONSUMER_PROTOCOL_TYPE
from ..consumer.config import ConsumerConfig
from .protocol import (
    COORDINATOR_ERRORS, NO_GENERATION, RESPONSES, RETRIABLE_CODES, Coordinator, Generation, GroupFailure,
    MemberState, MembershipHooks, OutgoingRequest, PartitionsLost, PartitionsRevoked, error_name, group_error, negotiate_versions,
    request_version,
)
from .requests import (
    find_coordinator_request, heartbeat_request, join_group_request, leave_group_request, read_find_coordinator,
    sync_group_request,
)
from .rebalance import NONE, revoke_before_join
from ..topic_partition import TopicPartition

__all__ = ["GroupMembership"]

E = ErrorCode
ResponseHandler = Callable[[OutgoingRequest, Any, float], None]
# Java's JOIN_GROUP_TIMEOUT_LAPSE: JoinGroup may be parked for the whole rebalance timeout.
_JOIN_TIMEOUT_LAPSE_MS = 5000


class GroupMembership(MembershipHooks):
    """A member's place in the group (see the module docstring). Abstract, as Java's AbstractCoordinator:
    GroupMember (``member``) adds what a consumer does with it (``MembershipHooks``)."""

    def __init__(self, config: ConsumerConfig, *, group_instance_id: str | None = None,
                 api_versions: Mapping[int, object] | None = None):
        if config.group_id is None or config.group_id == "":
            raise ValueError("a consumer group member needs a group.id")
        if group_instance_id is not None and (not isinstance(group_instance_id, str) or not group_instance_id):
            raise ValueError(f"group.instance.id must be a non-empty string, not {group_instance_id!r}")
        self.config = config
        self.group_id: str = config.group_id
        self.group_instance_id = group_instance_id
        self._versions: dict[ApiKey, int] = {}
        self.set_api_versions(api_versions)

        self._phase = MemberState.UNJOINED
        self.subscription: tuple[str, ...] | None = None
        self.coordinator: Coordinator | None = None
        self.generation = Generation()
        self.leader = False
        self.assignment: tuple[TopicPartition, ...] = ()
        self.last_assignment: tuple[tuple[TopicPartition, ...], int] = ((), NO_GENERATION)  # for sticky user data

        self._events: deque[object] = deque()
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
        self._leave_sent = False
        self._close_deadline: float | None = None
        self._outbox: list[OutgoingRequest] = []  # requests made outside poll(), handed out by the next one
        self._handlers = self._response_handlers()

    def _response_handlers(self) -> dict[ApiKey, ResponseHandler]:
        """What reads the answer to each request the member sends, by API key."""
        return {ApiKey.FIND_COORDINATOR: self._on_find_response, ApiKey.JOIN_GROUP: self._on_join_response,
                ApiKey.SYNC_GROUP: self._on_sync_response, ApiKey.HEARTBEAT: self._on_heartbeat_response,
                ApiKey.LEAVE_GROUP: self._on_leave_response}

    # ---- configuration ------------------------------------------------------------------------------

    def set_api_versions(self, api_versions: Mapping[int, object] | None) -> None:
        """What the broker supports, per API key: ``(min, max)`` or just ``max``. None: our newest versions.
        Each request then goes out at the highest version both sides support."""
        self._versions = negotiate_versions(api_versions)

    def version(self, api_key: ApiKey) -> int:
        """The version requests of ``api_key`` are sent at; GroupError if the broker supports none of ours."""
        return request_version(self._versions, api_key, static=self.group_instance_id is not None)

    # ---- what the application does --------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        if self._phase is MemberState.JOINING and self.coordinator is None:
            return MemberState.FINDING_COORDINATOR
        return self._phase

    @property
    def rebalance_protocol(self) -> str:
        """"EAGER" or "COOPERATIVE" once the member joined a generation, "NONE" before (confluent-kafka's words)."""
        return self.config.rebalance_protocol if self.generation.protocol is not None else NONE

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
            self._request_rejoin("subscription changed", now_ms)

    def unsubscribe(self, now_ms: float) -> None:
        """Give up the assignment and leave the group (LeaveGroup for a dynamic member)."""
        self._check_open()
        self.subscription = None
        self._give_up_partitions(lost=self.generation.generation_id == NO_GENERATION)
        self._send_leave_and_reset(now_ms, "the consumer unsubscribed")
        self._phase = MemberState.UNJOINED

    def record_poll(self, now_ms: float) -> None:
        """The application polled: restarts the max.poll.interval.ms clock; retries a join stopped by an
        error or by a poll timeout."""
        self._last_poll = now_ms
        self._blocked = False
        if self._phase is MemberState.UNJOINED and self.subscription:
            self._phase = MemberState.JOINING

    def close(self, now_ms: float, timeout_ms: int | None = None) -> None:
        """Leave: auto-commit (if enabled), give up the partitions, LeaveGroup (dynamic members), within
        ``timeout_ms`` (default request.timeout.ms). Keep driving until ``closed``."""
        if self._phase in (MemberState.LEAVING, MemberState.CLOSED):
            return
        self._close_deadline = now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms)
        self._commit_before_revoking(now_ms)
        self._give_up_partitions(lost=self.generation.generation_id == NO_GENERATION)
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
        times.extend(self._offset_timers())
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
            if self._phase is MemberState.REBALANCING and not self._unacked_prepare and not self._commits_pending():
                self._phase = MemberState.JOINING
            if self._phase is MemberState.LEAVING:
                self._step_leaving(out, now_ms)
            if self._phase is not MemberState.CLOSED:
                if self.coordinator is None:
                    if self._needs_coordinator() and self._find_request is None and now_ms >= self._find_retry_at:
                        version = self.version(ApiKey.FIND_COORDINATOR)
                        self._find_request = self._send(out, self._request(
                            "find", find_coordinator_request(version, self.group_id), version, now_ms, anywhere=True))
                else:
                    self._step_membership(out, now_ms)
                    self._step_offsets(out, now_ms)
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

    # ---- membership steps ----------------------------------------------------------------------------

    def _step_membership(self, out: list, now_ms: float) -> None:
        phase = self._phase
        if phase is MemberState.JOINING and not self._blocked and self._join_request is None \
                and now_ms >= self._join_retry_at:
            self._send(out, self._join_group_request(now_ms))
        elif phase is MemberState.SYNCING and self._sync_request is None and self._pending_sync is not None:
            body, version = self._pending_sync
            self._pending_sync = None
            self._sync_request = self._send(out, self._request("sync", body, version, now_ms))
        if self._heartbeating() and self._heartbeat_request is None and now_ms >= self._heartbeat_due:
            heartbeat = heartbeat_request(self.group_id, self.generation, self.group_instance_id)
            self._heartbeat_request = self._send(out, self._request(
                "heartbeat", heartbeat, self.version(ApiKey.HEARTBEAT), now_ms, context=self.generation.generation_id))
            self._heartbeat_due = now_ms + self.config.heartbeat_interval_ms

    def _step_leaving(self, out: list, now_ms: float) -> None:
        if self._unacked_prepare or self._commits_pending() or self._leave_sent:
            return  # (a LeaveGroup sent: its answer or failure closes)
        if self.group_instance_id is not None or not self.generation.member_id:
            self._finish_close()  # nothing to leave: a static member stays until its session times out
        elif self.coordinator is not None:
            self._send(out, self._leave_group_request(now_ms, "the consumer is being closed"))
            self._leave_sent = True

    def _heartbeating(self) -> bool:
        # Not while JoinGroup or SyncGroup is parked at the coordinator: a member awaiting either is kept
        # alive there, and a heartbeat would only queue behind it on the connection.
        return (self._phase in (MemberState.STABLE, MemberState.REBALANCING)
                and self.coordinator is not None and self.generation.generation_id != NO_GENERATION
                and bool(self.generation.member_id))

    def _needs_coordinator(self) -> bool:
        if self._has_offset_work():
            return True
        if self._phase is MemberState.LEAVING:
            return self._leave_sent is False and self.group_instance_id is None and bool(self.generation.member_id)
        return self._phase in (MemberState.JOINING, MemberState.SYNCING, MemberState.STABLE,
                               MemberState.REBALANCING) and not self._blocked

    def _check_clocks(self, now_ms: float) -> None:
        self._expire_offsets(now_ms)
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
        revoked = revoke_before_join(self.config.rebalance_protocol, self.assignment, self.subscription or ())
        if self._phase is MemberState.STABLE and revoked:
            self._commit_before_revoking(now_ms)
            self._revoke(revoked)
        self._drop_join_and_sync()
        self._phase = MemberState.REBALANCING
        if not self.assignment:
            self._stop_assignment_offsets()

    def _reset_generation(self, reason: str, now_ms: float, *, member_id_too: bool) -> None:
        """The coordinator no longer knows our generation (and maybe member id): lose the partitions
        (they may belong to someone else already) and join again."""
        self._forget_generation(keep_member_id=not member_id_too)
        self._fail_unsent_commits(reason)
        self._give_up_partitions(lost=True)
        if self._phase not in (MemberState.LEAVING, MemberState.CLOSED, MemberState.UNJOINED):
            self._rejoin_reason = reason
            self._drop_join_and_sync()
            self._phase = MemberState.REBALANCING

    def _forget_generation(self, *, keep_member_id: bool) -> None:
        self.generation = Generation(member_id=self.generation.member_id if keep_member_id else "")
        self.leader = False
        self._session_deadline = None
        self._stop_assignment_offsets()

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

    def _drop_join_and_sync(self) -> None:
        for request in (self._join_request, self._sync_request):
            if request is not None:
                self._in_flight.discard(request)
        self._join_request = self._sync_request = None
        self._pending_sync = None

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
        self._fail_offsets(error)

    def _finish_close(self) -> None:
        self._fail_offsets(GroupError("the consumer was closed before this completed"))
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

    def _join_group_request(self, now_ms: float) -> OutgoingRequest:
        version = self.version(ApiKey.JOIN_GROUP)
        config = self.config
        rebalance_timeout = config.max_poll_interval_ms
        body = join_group_request(
            version, self.group_id, self.generation, self.group_instance_id, self.subscription or (),
            config.partition_assignment_strategy, session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout, rack=config.client_rack,
            reason=self._rejoin_reason or "joining the group", owned=self.assignment,
            last_assignment=self.last_assignment)
        timeout = max(config.request_timeout_ms, rebalance_timeout + _JOIN_TIMEOUT_LAPSE_MS)
        self._join_request = self._request("join", body, version, now_ms, timeout_ms=timeout)
        return self._join_request

    def _leave_group_request(self, now_ms: float, reason: str) -> OutgoingRequest:
        version = self.version(ApiKey.LEAVE_GROUP)
        body = leave_group_request(version, self.group_id, self.generation.member_id, self.group_instance_id, reason)
        return self._request("leave", body, version, now_ms)

    # ---- responses ---------------------------------------------------------------------------------------

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

    def _on_join_response(self, request: OutgoingRequest, response: JoinGroupResponse, now_ms: float) -> None:
        if request is not self._join_request:
            return
        self._join_request = None
        code = response.error_code
        if code == E.NONE:
            self._joined(request, response, now_ms)
        elif code == E.MEMBER_ID_REQUIRED:  # KIP-394: join again at once with the id we were given
            self.generation = Generation(member_id=response.member_id)
        elif code == E.UNKNOWN_MEMBER_ID:
            self.generation = Generation()
        elif code == E.ILLEGAL_GENERATION:
            self.generation = Generation(member_id=self.generation.member_id)
        elif code == E.REBALANCE_IN_PROGRESS:
            pass  # join again at once
        elif code in COORDINATOR_ERRORS:
            self._coordinator_lost(f"JoinGroup answered {error_name(code)}", now_ms)
        elif ErrorCode.of(code) in RETRIABLE_CODES:  # e.g. COORDINATOR_LOAD_IN_PROGRESS
            self._join_retry_at = now_ms + self.config.retry_backoff_ms
        else:
            if code == E.GROUP_MAX_SIZE_REACHED:
                self.generation = Generation()
            self._fatal(group_error(code, "JoinGroup failed"), now_ms)

    def _joined(self, request: OutgoingRequest, response: JoinGroupResponse, now_ms: float) -> None:
        protocol = response.protocol_name
        if protocol not in self.config.partition_assignment_strategy or \
                (response.protocol_type is not None and response.protocol_type != CONSUMER_PROTOCOL_TYPE):
            self._fatal(GroupError(f"JoinGroup chose protocol {response.protocol_type}/{protocol}, which this "
                                   f"member did not offer", E.INCONSISTENT_GROUP_PROTOCOL), now_ms)
            return
        self.generation = Generation(response.generation_id, response.member_id, protocol)
        self.leader = response.leader == response.member_id
        self._session_deadline = now_ms + self.config.session_timeout_ms
        self._heartbeat_due = now_ms + self.config.heartbeat_interval_ms
        assignments = self._sync_assignments(response, protocol)
        version = self.version(ApiKey.SYNC_GROUP)
        body = sync_group_request(version, self.group_id, response, self.group_instance_id, assignments)
        self._pending_sync = (body, version)
        self._phase = MemberState.SYNCING

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
            self._join_complete(response.assignment, now_ms)
        elif code == E.REBALANCE_IN_PROGRESS:
            self._phase = MemberState.JOINING
        elif code == E.UNKNOWN_MEMBER_ID:
            self._reset_generation("SyncGroup answered UNKNOWN_MEMBER_ID", now_ms, member_id_too=True)
        elif code == E.ILLEGAL_GENERATION:
            self._reset_generation("SyncGroup answered ILLEGAL_GENERATION", now_ms, member_id_too=False)
        elif code in COORDINATOR_ERRORS:
            self._phase = MemberState.JOINING
            self._coordinator_lost(f"SyncGroup answered {error_name(code)}", now_ms)
        elif ErrorCode.of(code) in RETRIABLE_CODES:
            self._phase = MemberState.JOINING
            self._join_retry_at = now_ms + self.config.retry_backoff_ms
        else:
            self._fatal(group_error(code, "SyncGroup failed"), now_ms)

    def _on_heartbeat_response(self, request: OutgoingRequest, response: HeartbeatResponse, now_ms: float) -> None:
        if request is self._heartbeat_request:
            self._heartbeat_request = None
        code = response.error_code
        if request.context != self.generation.generation_id and code != E.NONE:
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
        elif code in COORDINATOR_ERRORS:
            self._coordinator_lost(f"Heartbeat answered {error_name(code)}", now_ms)
        elif ErrorCode.of(code) not in RETRIABLE_CODES:
            self._fatal(group_error(code, "Heartbeat failed"), now_ms)

    def _on_leave_response(self, request: OutgoingRequest, response: LeaveGroupResponse, now_ms: float) -> None:
        # Leaving succeeds either way: the member forgets its id, and the session timeout does the rest.
        if self._phase is MemberState.LEAVING:
            self._finish_close()

    def _on_failure(self, request: OutgoingRequest, now_ms: float, reason: str,
                    coordinator_known_lost: bool = False) -> None:
        kind = request.kind
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
        elif kind in ("commit", "fetch"):
            self._offset_request_failed(request, now_ms, reason)

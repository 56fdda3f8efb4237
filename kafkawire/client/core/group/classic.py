"""The classic group protocol, sans I/O, after Java's AbstractCoordinator and ConsumerCoordinator:
JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the leader's assignments. A ``GroupMember`` runs
it (``group.protocol=classic``) and owns what it shares with the KIP-848 protocol (``consumer_protocol``):
the coordinator, the subscription and assignment, the events and the offsets.

* MEMBER_ID_REQUIRED (KIP-394) joins again at once with the id given. Before joining again the member
  gives up what its rebalance protocol says (``rebalance``: eager all, cooperative only unsubscribed
  topics; PartitionsLost for all once its generation is gone) and sends JoinGroup after ``drain_events``
  took that event and the commits made before it completed.
* REBALANCE_IN_PROGRESS rejoins; UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION reset and rejoin; a session
  timeout without a heartbeat answer loses the coordinator. Static members (KIP-345) send no LeaveGroup.
* Assignments: the leader runs the chosen assignor over every member's subscription with the partition
  counts it knows, and rejoins when a group topic's count changes; an assignment naming topics the
  member does not subscribe to is refused (the member rejoins). Under the cooperative protocol what the
  new assignment takes away is revoked (committed first with auto-commit) and the member rejoins at
  once; PartitionsAssigned then names the added partitions.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.error_codes import ErrorCode
from kafkawire.errors import DecodeError
from kafkawire.messages import (
    ApiKey, HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
)

from ...errors import GroupError
from ..topic_partition import TopicPartition
from .assignors import CONSUMER_PROTOCOL_TYPE, decode_assignment
from .protocol import (
    COORDINATOR_ERRORS, NO_GENERATION, RETRIABLE_CODES, Generation, GroupFailure, MemberState, OutgoingRequest,
    PartitionsAssigned, ResponseHandler, error_name, group_error,
)
from .rebalance import EAGER, NONE, assignment_change, revoke_before_join
from .requests import heartbeat_request, join_group_request, leader_assignment, leave_group_request, sync_group_request

if TYPE_CHECKING:
    from .member import GroupMember

__all__ = ["ClassicProtocol"]

E = ErrorCode
# Java's JOIN_GROUP_TIMEOUT_LAPSE: JoinGroup may be parked for the whole rebalance timeout.
_JOIN_TIMEOUT_LAPSE_MS = 5000


class ClassicProtocol:
    """A member's JoinGroup generation (see the module docstring); ``member`` is the GroupMember it runs in."""

    def __init__(self, member: GroupMember) -> None:
        self.member = member
        self.leader = False
        self.last_assignment: tuple[tuple[TopicPartition, ...], int] = ((), NO_GENERATION)  # for sticky user data
        self.group_topics: frozenset[str] = frozenset()  # all members' topics, when leader
        self._assignment_snapshot: dict[str, int | None] | None = None  # leader: counts it assigned with
        self._join_request: OutgoingRequest | None = None
        self._join_retry_at = 0.0
        self._sync_request: OutgoingRequest | None = None
        self._pending_sync: tuple[SyncGroupRequest, int] | None = None
        self._heartbeat_request: OutgoingRequest | None = None
        self._heartbeat_due = 0.0
        self._session_deadline: float | None = None
        self._rejoin_reason: str | None = None

    def handlers(self) -> dict[ApiKey, ResponseHandler]:
        return {ApiKey.JOIN_GROUP: self._on_join_response, ApiKey.SYNC_GROUP: self._on_sync_response,
                ApiKey.HEARTBEAT: self._on_heartbeat_response, ApiKey.LEAVE_GROUP: self._on_leave_response}

    @property
    def rebalance_protocol(self) -> str:
        m = self.member
        return m.config.rebalance_protocol if m.generation.protocol is not None else NONE

    @property
    def eager(self) -> bool:
        """Whether a new assignment replaces the old one whole (offsets fetched for the old one are dropped)."""
        return self.member.config.rebalance_protocol == EAGER

    def set_api_versions(self, api_versions: object) -> None:
        pass  # every API it sends is among the member's versions

    def topic_ids_changed(self) -> None:
        pass

    # ---- the member's clock ----------------------------------------------------------------------------

    def heartbeating(self) -> bool:
        # Not while JoinGroup or SyncGroup is parked at the coordinator: a member awaiting either is kept
        # alive there, and a heartbeat would only queue behind it on the connection.
        m = self.member
        return (m._phase in (MemberState.STABLE, MemberState.REBALANCING)
                and m.coordinator is not None and m.generation.generation_id != NO_GENERATION
                and bool(m.generation.member_id))

    def timers(self) -> list[float]:
        m = self.member
        times = []
        if self.heartbeating():
            if self._heartbeat_request is None:
                times.append(self._heartbeat_due)
            if self._session_deadline is not None:
                times.append(self._session_deadline)
        if m._phase is MemberState.JOINING and self._join_request is None and not m._blocked:
            times.append(self._join_retry_at)
        return times

    def check_clocks(self, now_ms: float) -> None:
        if self._session_deadline is not None and now_ms >= self._session_deadline:
            self.member._coordinator_lost("session timed out without a heartbeat response", now_ms)
            self._session_deadline = now_ms + self.member.config.session_timeout_ms

    # ---- steps -------------------------------------------------------------------------------------------

    def step(self, out: list[OutgoingRequest], now_ms: float) -> None:
        m = self.member
        phase = m._phase
        if phase is MemberState.JOINING and not m._blocked and self._join_request is None \
                and now_ms >= self._join_retry_at:
            m._send(out, self._join_group_request(now_ms))
        elif phase is MemberState.SYNCING and self._sync_request is None and self._pending_sync is not None:
            body, version = self._pending_sync
            self._pending_sync = None
            self._sync_request = m._send(out, m._request("sync", body, version, now_ms))
        if self.heartbeating() and self._heartbeat_request is None and now_ms >= self._heartbeat_due:
            heartbeat = heartbeat_request(m.group_id, m.generation, m.group_instance_id)
            self._heartbeat_request = m._send(out, m._request(
                "heartbeat", heartbeat, m.version(ApiKey.HEARTBEAT), now_ms, context=m.generation.generation_id))
            self._heartbeat_due = now_ms + m.config.heartbeat_interval_ms

    def step_leaving(self, out: list[OutgoingRequest], now_ms: float) -> None:
        m = self.member
        if m._unacked_prepare or m.offsets.commits_pending() or m._leave_sent:
            return  # (a LeaveGroup sent: its answer or failure closes)
        if m.group_instance_id is not None or not m.generation.member_id:
            m._finish_close()  # nothing to leave: a static member stays until its session times out
        elif m.coordinator is not None:
            m._send(out, self._leave_group_request(now_ms, "the consumer is being closed"))
            m._leave_sent = True

    # ---- transitions -------------------------------------------------------------------------------------

    def request_rejoin(self, reason: str, now_ms: float) -> None:
        """Rejoin with the current generation: commit (auto-commit), revoke, then JoinGroup."""
        m = self.member
        if m._phase in (MemberState.LEAVING, MemberState.CLOSED, MemberState.UNJOINED):
            return
        self._rejoin_reason = reason
        if m._phase in (MemberState.JOINING, MemberState.REBALANCING) and self._join_request is None:
            return  # the next JoinGroup carries the change
        revoked = revoke_before_join(m.config.rebalance_protocol, m.assignment, m.subscription or ())
        if m._phase is MemberState.STABLE and revoked:
            m.offsets.commit_before_revoking(now_ms)
            m._revoke(revoked)
        self.drop_requests()
        m._phase = MemberState.REBALANCING
        if not m.assignment:
            m.offsets.stop_assignment_work()

    def reset(self, reason: str) -> None:
        """The generation is gone (the member rejoins): JoinGroup says why."""
        self._rejoin_reason = reason
        self.drop_requests()

    def forget_generation(self) -> None:
        self.leader = False
        self._session_deadline = None
        self.group_topics, self._assignment_snapshot = frozenset(), None

    def drop_requests(self) -> None:
        """Forget a JoinGroup or SyncGroup in flight (their answers are ignored)."""
        m = self.member
        for request in (self._join_request, self._sync_request):
            if request is not None:
                m._in_flight.discard(request)
        self._join_request = self._sync_request = None
        self._pending_sync = None

    def send_leave_and_reset(self, now_ms: float, reason: str) -> None:
        """LeaveGroup for a dynamic member the coordinator knows (its answer changes nothing), then forget
        the generation and member id."""
        m = self.member
        if m.group_instance_id is None and m.generation.member_id and m.coordinator is not None:
            try:
                request = self._leave_group_request(now_ms, reason)
            except GroupError:
                request = None
            if request is not None:
                m._in_flight.add(request)
                m._outbox.append(request)
        self.drop_requests()
        m._forget_generation(keep_member_id=False)

    def metadata_updated(self, now_ms: float) -> None:
        """A leader rejoins when a group topic's count is now known and differs from the one it assigned
        with, so that new partitions (or a topic it could not assign before) get assigned."""
        m = self.member
        if self.leader and self._assignment_snapshot is not None and m._phase is MemberState.STABLE:
            changed = [topic for topic, assigned in self._assignment_snapshot.items()
                       if m._metadata.get(topic) is not None and m._metadata[topic] != assigned]
            if changed:
                self.request_rejoin(f"the partition count of {', '.join(sorted(changed))} changed", now_ms)

    # ---- requests ----------------------------------------------------------------------------------------

    def _join_group_request(self, now_ms: float) -> OutgoingRequest:
        m = self.member
        version = m.version(ApiKey.JOIN_GROUP)
        config = m.config
        rebalance_timeout = config.max_poll_interval_ms
        body = join_group_request(
            version, m.group_id, m.generation, m.group_instance_id, m.subscription or (),
            config.partition_assignment_strategy, session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout, rack=config.client_rack,
            reason=self._rejoin_reason or "joining the group", owned=m.assignment,
            last_assignment=self.last_assignment)
        timeout = max(config.request_timeout_ms, rebalance_timeout + _JOIN_TIMEOUT_LAPSE_MS)
        self._join_request = m._request("join", body, version, now_ms, timeout_ms=timeout)
        return self._join_request

    def _leave_group_request(self, now_ms: float, reason: str) -> OutgoingRequest:
        m = self.member
        version = m.version(ApiKey.LEAVE_GROUP)
        body = leave_group_request(version, m.group_id, m.generation.member_id, m.group_instance_id, reason)
        return m._request("leave", body, version, now_ms)

    # ---- responses ---------------------------------------------------------------------------------------

    def _on_join_response(self, request: OutgoingRequest, response: JoinGroupResponse, now_ms: float) -> None:
        if request is not self._join_request:
            return
        m = self.member
        self._join_request = None
        code = response.error_code
        if code == E.NONE:
            self._joined(response, now_ms)
        elif code == E.MEMBER_ID_REQUIRED:  # KIP-394: join again at once with the id we were given
            m.generation = Generation(member_id=response.member_id)
        elif code == E.UNKNOWN_MEMBER_ID:
            m.generation = Generation()
        elif code == E.ILLEGAL_GENERATION:
            m.generation = Generation(member_id=m.generation.member_id)
        elif code == E.REBALANCE_IN_PROGRESS:
            pass  # join again at once
        elif code in COORDINATOR_ERRORS:
            m._coordinator_lost(f"JoinGroup answered {error_name(code)}", now_ms)
        elif ErrorCode.of(code) in RETRIABLE_CODES:  # e.g. COORDINATOR_LOAD_IN_PROGRESS
            self._join_retry_at = now_ms + m.config.retry_backoff_ms
        else:
            if code == E.GROUP_MAX_SIZE_REACHED:
                m.generation = Generation()
            m._fatal(group_error(code, "JoinGroup failed"), now_ms)

    def _joined(self, response: JoinGroupResponse, now_ms: float) -> None:
        m = self.member
        protocol = response.protocol_name
        if protocol not in m.config.partition_assignment_strategy or \
                (response.protocol_type is not None and response.protocol_type != CONSUMER_PROTOCOL_TYPE):
            m._fatal(GroupError(f"JoinGroup chose protocol {response.protocol_type}/{protocol}, which this "
                                f"member did not offer", E.INCONSISTENT_GROUP_PROTOCOL), now_ms)
            return
        m.generation = Generation(response.generation_id, response.member_id, protocol)
        self.leader = response.leader == response.member_id
        self._session_deadline = now_ms + m.config.session_timeout_ms
        self._heartbeat_due = now_ms + m.config.heartbeat_interval_ms
        assignments = self._sync_assignments(response, protocol)
        version = m.version(ApiKey.SYNC_GROUP)
        body = sync_group_request(version, m.group_id, response, m.group_instance_id, assignments)
        self._pending_sync = (body, version)
        m._phase = MemberState.SYNCING

    def _sync_assignments(self, response: JoinGroupResponse,
                          protocol: str) -> list[SyncGroupRequest.SyncGroupRequestAssignment]:
        """The SyncGroup assignments, once JoinGroup succeeded: the leader's for everyone, else none."""
        if not self.leader:
            self.group_topics, self._assignment_snapshot = frozenset(), None
            return []
        if response.skip_assignment:  # a static leader rejoining: the assignments stand (KIP-814)
            return []
        leading = leader_assignment(protocol, response.members, self.member._metadata)
        for member_id, exc in leading.undecodable:
            self.member._events.append(GroupFailure(GroupError(
                f"member {member_id} sent a subscription that does not decode ({exc}); it gets no partitions"),
                fatal=False))
        self.group_topics, self._assignment_snapshot = leading.group_topics, leading.counts
        return leading.assignments

    def _on_sync_response(self, request: OutgoingRequest, response: SyncGroupResponse, now_ms: float) -> None:
        if request is not self._sync_request:
            return
        m = self.member
        self._sync_request = None
        code = response.error_code
        if code == E.NONE:
            if request.version >= 5 and ((response.protocol_type not in (None, CONSUMER_PROTOCOL_TYPE))
                                         or response.protocol_name not in (None, m.generation.protocol)):
                m._fatal(GroupError(f"SyncGroup answered protocol {response.protocol_type}/"
                                    f"{response.protocol_name}, JoinGroup chose {m.generation.protocol}",
                                    E.INCONSISTENT_GROUP_PROTOCOL), now_ms)
                return
            self._join_complete(response.assignment, now_ms)
        elif code == E.REBALANCE_IN_PROGRESS:
            m._phase = MemberState.JOINING
        elif code == E.UNKNOWN_MEMBER_ID:
            m._reset_generation("SyncGroup answered UNKNOWN_MEMBER_ID", now_ms, member_id_too=True)
        elif code == E.ILLEGAL_GENERATION:
            m._reset_generation("SyncGroup answered ILLEGAL_GENERATION", now_ms, member_id_too=False)
        elif code in COORDINATOR_ERRORS:
            m._phase = MemberState.JOINING
            m._coordinator_lost(f"SyncGroup answered {error_name(code)}", now_ms)
        elif ErrorCode.of(code) in RETRIABLE_CODES:
            m._phase = MemberState.JOINING
            self._join_retry_at = now_ms + m.config.retry_backoff_ms
        else:
            m._fatal(group_error(code, "SyncGroup failed"), now_ms)

    def _join_complete(self, assignment: bytes | bytearray | memoryview, now_ms: float) -> None:
        """SyncGroup succeeded with ``assignment`` (the consumer protocol's bytes): take it up."""
        m = self.member
        try:
            partitions = decode_assignment(assignment).partitions
        except DecodeError as exc:
            m._fatal(GroupError(f"the assignment from the group leader does not decode: {exc}"), now_ms)
            return
        self._session_deadline = now_ms + m.config.session_timeout_ms
        stray = sorted({tp.topic for tp in partitions} - set(m.subscription or ()))
        if stray:
            # Java refuses an assignment that does not match the subscription and rejoins.
            m._events.append(GroupFailure(GroupError(
                f"the leader assigned partitions of topics this member does not subscribe to ({', '.join(stray)}); "
                f"rejoining"), fatal=False))
            m._phase = MemberState.REBALANCING
            self._rejoin_reason = "assignment did not match the subscription"
            self._join_retry_at = now_ms + m.config.retry_backoff_ms
            return
        change = assignment_change(m.config.rebalance_protocol, m.assignment, partitions)
        self.last_assignment = (partitions, m.generation.generation_id)
        m._phase = MemberState.STABLE
        self._rejoin_reason = None
        m.offsets.restart_auto_commit(now_ms)
        if change.revoked:  # cooperative: what the leader moves elsewhere goes first (committed with auto-commit)
            m.offsets.commit_before_revoking(now_ms)
            m._revoke(change.revoked)
        m.assignment = partitions
        m._events.append(PartitionsAssigned(partitions, m.generation.generation_id, m.generation.member_id,
                                            self.leader, added=change.added if change.incremental else None))
        if change.added:
            m.offsets.fetch_for_assignment(change.added)
        if change.revoked:  # so that the leader can give them to their new owners (KIP-429)
            self.request_rejoin(f"{len(change.revoked)} partitions revoked for other members", now_ms)

    def _on_heartbeat_response(self, request: OutgoingRequest, response: HeartbeatResponse, now_ms: float) -> None:
        m = self.member
        if request is self._heartbeat_request:
            self._heartbeat_request = None
        code = response.error_code
        if request.context != m.generation.generation_id and code != E.NONE:
            return  # about a generation we have left already
        if code == E.NONE:
            self._session_deadline = now_ms + m.config.session_timeout_ms
            return
        self._heartbeat_due = now_ms + m.config.retry_backoff_ms
        if code == E.REBALANCE_IN_PROGRESS:
            if m._phase is MemberState.STABLE:
                self.request_rejoin("the group is rebalancing", now_ms)
        elif code == E.UNKNOWN_MEMBER_ID:
            m._reset_generation("Heartbeat answered UNKNOWN_MEMBER_ID", now_ms, member_id_too=True)
        elif code == E.ILLEGAL_GENERATION:
            m._reset_generation("Heartbeat answered ILLEGAL_GENERATION", now_ms, member_id_too=False)
        elif code in COORDINATOR_ERRORS:
            m._coordinator_lost(f"Heartbeat answered {error_name(code)}", now_ms)
        elif ErrorCode.of(code) not in RETRIABLE_CODES:
            m._fatal(group_error(code, "Heartbeat failed"), now_ms)

    def _on_leave_response(self, request: OutgoingRequest, response: LeaveGroupResponse, now_ms: float) -> None:
        # Leaving succeeds either way: the member forgets its id, and the session timeout does the rest.
        if self.member._phase is MemberState.LEAVING:
            self.member._finish_close()

    def on_failure(self, request: OutgoingRequest, now_ms: float, reason: str, coordinator_known_lost: bool) -> None:
        """One of its requests got no answer."""
        m = self.member
        kind = request.kind
        if kind == "leave" and m._phase is MemberState.LEAVING:
            m._finish_close()
            return
        # Java marks the coordinator unknown when a request to it fails.
        if not coordinator_known_lost:
            m._coordinator_lost(reason, now_ms)
        if kind == "join" and request is self._join_request:
            self._join_request = None
        elif kind == "sync" and request is self._sync_request:
            self._sync_request = None
            if m._phase is MemberState.SYNCING:
                m._phase = MemberState.JOINING  # join again: the generation may be complete without us
        elif kind == "heartbeat" and request is self._heartbeat_request:
            self._heartbeat_request = None
            self._heartbeat_due = now_ms + m.config.retry_backoff_ms

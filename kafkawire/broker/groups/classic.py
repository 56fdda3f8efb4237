"""The classic group protocol's membership, as Kafka's ``GroupCoordinator.scala`` runs it: JoinGroup,
SyncGroup, Heartbeat and LeaveGroup, the rebalance that moves a group from one generation to the
next, and the timers that drive it (session, rebalance, initial delay, pending sync). The
``GroupCoordinator`` owns one ``ClassicMembership``, and the groups and the store it works on."""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Callable

from ...error_codes import ErrorCode
from ... import messages  # (each message's module loads on first use)
from .classic_state import (
    COMPLETING, DEAD, EMPTY, NONE, PREPARING, STABLE, _Group, _JoinArgs, _JoinResult, _Member, _resolve,
    _SyncResult, _Timer,
)
from .offsets_store import GroupRecord, MemberRecord

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

__all__ = ["ClassicMembership"]

log = logging.getLogger(__name__)


class ClassicMembership:
    """Membership and rebalancing of the classic groups of a ``GroupCoordinator``."""

    def __init__(self, coordinator: GroupCoordinator):
        self.coordinator = coordinator  # its settings may change while it runs (tests shorten sessions)
        self.groups = coordinator.groups
        self.store = coordinator.store
        self.consumer = coordinator.consumer

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self.coordinator.loop
        assert loop is not None, "the group coordinator has not started"
        return loop

    # -- timers ----------------------------------------------------------------------------------------

    def _timer(self, delay_ms: float, callback: Callable[[], None]) -> _Timer:
        return _Timer(self.loop, self.coordinator.clock, delay_ms / 1000.0, callback)

    def schedule_member_expiry(self, group: _Group, member: _Member, timeout_ms: int | None = None) -> None:
        """completeAndScheduleNextExpiration: the member must be heard from again within the timeout."""
        timeout_ms = member.session_timeout_ms if timeout_ms is None else timeout_ms
        if member.timer is None:
            member.timer = self._timer(timeout_ms, lambda: self._on_member_expired(group, member))
        else:
            member.timer.reset(timeout_ms / 1000.0)

    def _on_member_expired(self, group: _Group, member: _Member) -> None:
        """onExpireHeartbeat (member.hasSatisfiedHeartbeat decides whether this is a failure)."""
        if group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.join_future is not None or member.sync_future is not None):
            return  # parked in a rebalance: the rebalance and pending-sync timeouts govern it
        log.info("member %s of group %s failed its session timeout; removing it",
                 member.member_id, group.group_id)
        self._remove_member_and_update_group(group, member)

    def _on_pending_member_expired(self, group: _Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            if group.state is PREPARING:
                self._try_complete_join(group)

    # -- rebalance machinery ---------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: _Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: _Group, reason: str) -> None:
        if group.state is COMPLETING:  # members waiting in SyncGroup must rejoin
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        if group.join_timer is not None:
            group.join_timer.cancel()
        if group.state is EMPTY:
            delay = self.coordinator.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self._set_initial_join_timer(group, delay, remaining)
        else:
            group.join_timer_initial = False
            group.join_timer = self._timer(group.rebalance_timeout_ms, lambda: self._on_join_timeout(group))
        log.info("preparing to rebalance group %s in state %s with old generation %d (reason: %s)",
                 group.group_id, group.state.value, group.generation_id, reason)
        group.state = PREPARING
        self._try_complete_join(group)

    def _set_initial_join_timer(self, group: _Group, delay_ms: int, remaining_ms: int) -> None:
        group.join_timer_initial = True
        group.join_timer = self._timer(delay_ms, lambda: self._on_initial_join_timeout(group, delay_ms,
                                                                                        remaining_ms))

    def _on_initial_join_timeout(self, group: _Group, delay_ms: int, remaining_ms: int) -> None:
        """InitialDelayedJoin.onComplete: wait another delay while new members keep joining."""
        group.join_timer = None
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.coordinator.initial_rebalance_delay_ms, remaining_ms)
            self._set_initial_join_timer(group, delay, max(remaining_ms - delay_ms, 0))
        else:
            self._complete_join(group)

    def _on_join_timeout(self, group: _Group) -> None:
        group.join_timer = None
        self._complete_join(group)

    def _try_complete_join(self, group: _Group) -> None:
        """DelayedJoin.tryComplete (an InitialDelayedJoin only completes by its timer)."""
        if group.state is not PREPARING or group.join_timer is None or group.join_timer_initial:
            return
        if group.has_all_members_joined():
            group.join_timer.cancel()
            group.join_timer = None
            self._complete_join(group)

    def _complete_join(self, group: _Group) -> None:
        """onCompleteJoin: drop dynamic members that did not rejoin, start the next generation."""
        if group.state is not PREPARING:
            return
        for member in [m for m in group.members.values()
                       if m.join_future is None and m.group_instance_id is None]:
            log.info("group %s: removing member %s, which did not rejoin", group.group_id, member.member_id)
            self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait another rebalance timeout.
            group.join_timer_initial = False
            group.join_timer = self._timer(group.rebalance_timeout_ms, lambda: self._on_join_timeout(group))
            return
        self._init_next_generation(group)
        group.new_member_added = False
        self._record_group(group)
        if group.state is EMPTY:
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            return
        log.info("stabilized group %s generation %d (protocol %s) with %d members", group.group_id,
                 group.generation_id, group.protocol_name, len(group.members))
        all_metadata = group.current_member_metadata()
        for member in group.members.values():
            fut, member.join_future = member.join_future, None
            _resolve(fut, _JoinResult(
                NONE, member.member_id, group.generation_id, group.protocol_type, group.protocol_name,
                group.leader_id or "", False, all_metadata if group.is_leader(member.member_id) else []))
            self.schedule_member_expiry(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation_id
        group.sync_timer = self._timer(group.rebalance_timeout_ms,
                                       lambda: self._on_pending_sync_expired(group, generation))

    def _init_next_generation(self, group: _Group) -> None:
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.state = COMPLETING
        else:
            group.protocol_name = None
            group.state = EMPTY
        group.pending_sync.clear()

    def _record_group(self, group: _Group) -> None:
        """Store the group's metadata: with its members once it is Stable (the assignment known),
        else only its generation."""
        members: tuple[MemberRecord, ...] = ()
        if group.state is STABLE:
            members = tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                         m.rebalance_timeout_ms, m.session_timeout_ms,
                                         bytes(m.metadata(group.protocol_name)), bytes(m.assignment))
                            for m in group.members.values())
        record = GroupRecord(group.generation_id, group.protocol_type, group.protocol_name if members else None,
                             group.leader_id if members else None, members)
        try:
            self.store.record_group(group.group_id, record)
        except OSError as exc:  # as Kafka: a failed write of group metadata is only logged
            log.warning("could not record generation %d of group %s: %s", group.generation_id,
                        group.group_id, exc)

    def _remove_sync_expiration(self, group: _Group) -> None:
        group.pending_sync.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _remove_pending_sync_member(self, group: _Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _on_pending_sync_expired(self, group: _Group, generation: int) -> None:
        """onExpirePendingSync: members that never sent SyncGroup are removed; the group rebalances."""
        group.sync_timer = None
        if generation != group.generation_id or group.state not in (COMPLETING, STABLE):
            return
        if group.pending_sync:
            missing = sorted(group.pending_sync)
            for member_id in missing:
                member = group.members.get(member_id)
                if member is not None:
                    self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
            log.info("group %s: removed members that sent no SyncGroup: %s", group.group_id, missing)
            self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def _set_and_propagate_assignment(self, group: _Group, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, NONE)

    def _reset_and_propagate_assignment_error(self, group: _Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: _Group, error: int) -> None:
        ok = error == NONE
        for member in group.members.values():
            fut, member.sync_future = member.sync_future, None
            if _resolve(fut, _SyncResult(error, group.protocol_type if ok else None,
                                         group.protocol_name if ok else None, member.assignment)):
                self.schedule_member_expiry(group, member)

    def _remove_member(self, group: _Group, member: _Member, error: int) -> None:
        """group.remove, answering the member's parked requests (if any) with ``error``."""
        fut, member.join_future = member.join_future, None
        _resolve(fut, _JoinResult(error, ""))
        fut, member.sync_future = member.sync_future, None
        _resolve(fut, _SyncResult(error))
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: _Group, member: _Member) -> None:
        self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}")
        elif group.state is PREPARING:
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: _Group, member_id: str) -> None:
        timer = group.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        if group.state is PREPARING:
            self._try_complete_join(group)

    def validate_current_member(self, group: _Group, member_id: str, group_instance_id: str | None):
        if group_instance_id is not None:
            current = group.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def status_error(self, group_id: str, allow_empty: bool = False):
        """validateGroupStatus for this single, always-loaded coordinator."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        if not self.coordinator.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return None

    # -- JoinGroup -------------------------------------------------------------------------------------

    async def join_group(self, request, version: int, client_id: str, client_host: str) -> messages.JoinGroupResponse:
        result = self._handle_join(request, version, client_id or "", client_host or "")
        if isinstance(result, asyncio.Future):
            result = await result
        return _join_response(result, version)

    def _handle_join(self, request, version, client_id, client_host):
        group_id = request.group_id
        member_id = request.member_id or ""
        error = self.status_error(group_id)
        if error is None and group_id not in self.coordinator.groups and (
                self.coordinator.share_group(group_id) or group_id in self.coordinator.streams_groups):
            return _JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")  # a share or streams group of that id
        if error is None and group_id in self.consumer.groups:  # a KIP-848 group of that id
            if self.consumer.groups[group_id].members:
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            else:
                try:
                    self.consumer.forget(group_id)  # an empty one becomes a classic group
                except OSError:
                    error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if error is not None:
            return _JoinResult(error, member_id)
        session_timeout_ms = request.session_timeout_ms
        if not self.coordinator.min_session_timeout_ms <= session_timeout_ms <= self.coordinator.max_session_timeout_ms:
            return _JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        join = _JoinArgs(
            group_instance_id=request.group_instance_id if version >= 5 else None,
            client_id=client_id, client_host=client_host,
            rebalance_timeout_ms=session_timeout_ms if version == 0 else request.rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
            version=version)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return _JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = _Group(group_id)
        if not member_id:
            result = self._new_member_join(group, join)
        else:
            result = self._current_member_join(group, member_id, join)
        if group.state is PREPARING:
            self._try_complete_join(group)
        return result

    def _new_member_join(self, group: _Group, join: _JoinArgs):
        if group.state is DEAD:
            return _JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, "")
        if not group.supports_protocols(join.protocol_type, {name for name, _ in join.protocols}):
            return _JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
        new_member_id = f"{join.group_instance_id or join.client_id}-{uuid.uuid4()}"
        if join.group_instance_id is not None:
            old_member_id = group.static_members.get(join.group_instance_id)
            if old_member_id is not None:
                return self._update_static_member_and_rebalance(group, old_member_id, new_member_id, join)
            return self._add_member_and_rebalance(group, new_member_id, join)
        if join.version >= 4:  # KIP-394: hand out the id, expect the member back with it
            group.pending_members[new_member_id] = self._timer(
                join.session_timeout_ms, lambda: self._on_pending_member_expired(group, new_member_id))
            return _JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id)
        return self._add_member_and_rebalance(group, new_member_id, join)

    def _current_member_join(self, group: _Group, member_id: str, join: _JoinArgs):
        if group.state is DEAD:
            return _JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(join.protocol_type, {name for name, _ in join.protocols}):
            return _JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if member_id in group.pending_members:
            if join.group_instance_id is not None:  # pending members are never static
                return _JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            return self._add_member_and_rebalance(group, member_id, join)
        error = self.validate_current_member(group, member_id, join.group_instance_id)
        if error is not None:
            return _JoinResult(error, member_id)
        member = group.members[member_id]
        if group.state is PREPARING:
            return self._update_member_and_rebalance(group, member, join, "member rejoining")
        if group.state is COMPLETING:
            if member.matches(join.protocols):
                # The member lost its JoinGroup answer: give it the current generation again.
                return self._current_generation_result(
                    group, member_id, group.current_member_metadata() if group.is_leader(member_id) else [])
            return self._update_member_and_rebalance(group, member, join, "member changed its metadata")
        if group.state is STABLE:
            if group.is_leader(member_id) or not member.matches(join.protocols):
                # The leader rejoining forces a rebalance (it may have seen a metadata change).
                return self._update_member_and_rebalance(group, member, join, "leader or changed member rejoining")
            return self._current_generation_result(group, member_id, [])
        return _JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)  # Empty

    def _current_generation_result(self, group: _Group, member_id: str, members) -> _JoinResult:
        return _JoinResult(NONE, member_id, group.generation_id, group.protocol_type, group.protocol_name,
                           group.leader_id or "", False, members)

    def _add_member_and_rebalance(self, group: _Group, member_id: str, join: _JoinArgs) -> asyncio.Future:
        member = _Member(member_id, join.group_instance_id, join.client_id, join.client_host,
                         join.rebalance_timeout_ms, join.session_timeout_ms, join.protocol_type,
                         join.protocols)
        member.is_new = True
        if group.state is PREPARING and group.generation_id == 0:
            group.new_member_added = True  # lets the initial rebalance delay extend
        group.add(member)
        future = member.join_future = self.loop.create_future()
        # A new member parked in JoinGroup cannot heartbeat: it gets the (long) new-member timeout.
        self.schedule_member_expiry(group, member, self.coordinator.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")
        return future

    def _update_member(self, group: _Group, member: _Member, join: _JoinArgs, future) -> None:
        member.protocols = join.protocols
        member.rebalance_timeout_ms = join.rebalance_timeout_ms
        member.session_timeout_ms = join.session_timeout_ms
        old, member.join_future = member.join_future, future
        if old is not None and old is not future:  # a retried JoinGroup supersedes the parked one
            _resolve(old, _JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))

    def _update_member_and_rebalance(self, group: _Group, member: _Member, join: _JoinArgs,
                                     reason: str) -> asyncio.Future:
        future = self.loop.create_future()
        self._update_member(group, member, join, future)
        self._maybe_prepare_rebalance(group, reason)
        return future

    def _update_static_member_and_rebalance(self, group: _Group, old_member_id: str, new_member_id: str,
                                            join: _JoinArgs) -> asyncio.Future:
        """A static member rejoins without its member id: it takes over its instance's membership."""
        current_leader = group.leader_id
        member = group.members.pop(old_member_id)
        # Fence the old incarnation's parked requests.
        fut, member.join_future = member.join_future, None
        _resolve(fut, _JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        fut, member.sync_future = member.sync_future, None
        _resolve(fut, _SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        group.members[new_member_id] = member
        if group.leader_id == old_member_id:
            group.leader_id = new_member_id
        assert join.group_instance_id is not None  # a static member's rejoin
        group.static_members[join.group_instance_id] = new_member_id
        if old_member_id in group.pending_sync:
            group.pending_sync.discard(old_member_id)
            group.pending_sync.add(new_member_id)
        member.client_id, member.client_host = join.client_id, join.client_host
        self.schedule_member_expiry(group, member)
        future = self.loop.create_future()
        self._update_member(group, member, join, future)
        if group.state is STABLE:
            if group.select_protocol() == group.protocol_name:
                # No rebalance: the member keeps its assignment, under its new id (stored, as Kafka does)
                self._record_group(group)
                fut, member.join_future = member.join_future, None
                if join.version >= 9:  # the leader learns it leads, but skips the assignment
                    is_leader = group.is_leader(new_member_id)
                    _resolve(fut, _JoinResult(
                        NONE, new_member_id, group.generation_id, group.protocol_type, group.protocol_name,
                        group.leader_id or "", is_leader, group.current_member_metadata() if is_leader else []))
                else:  # the old leader id keeps a rejoining leader from assigning
                    _resolve(fut, _JoinResult(
                        NONE, new_member_id, group.generation_id, group.protocol_type, group.protocol_name,
                        current_leader or "", False, []))
            else:
                self._maybe_prepare_rebalance(group, f"static member {join.group_instance_id} changed protocols")
        elif group.state is COMPLETING:
            self._prepare_rebalance(group, f"static member {join.group_instance_id} rejoined")
        return future

    # -- SyncGroup -------------------------------------------------------------------------------------

    async def sync_group(self, request, version: int) -> messages.SyncGroupResponse:
        result = self._handle_sync(request, version)
        if isinstance(result, asyncio.Future):
            result = await result
        return messages.SyncGroupResponse(throttle_time_ms=0, error_code=result.error,
                                 protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                                 assignment=result.assignment)

    def _handle_sync(self, request, version):
        if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
            return _SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        error = self.status_error(request.group_id)
        if error is not None:
            return _SyncResult(error)
        group = self.groups.get(request.group_id)
        if group is None:
            return _SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        member_id = request.member_id
        instance_id = request.group_instance_id if version >= 3 else None
        if group.state is DEAD:
            return _SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self.validate_current_member(group, member_id, instance_id)
        if error is None:
            if request.generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            elif version >= 5 and (request.protocol_type != group.protocol_type
                                   or request.protocol_name != group.protocol_name):
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            return _SyncResult(error)
        if group.state is EMPTY:
            return _SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is PREPARING:
            return _SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        if group.state is COMPLETING:
            future = self.loop.create_future()
            old, member.sync_future = member.sync_future, future
            if old is not None:  # a retried SyncGroup supersedes the parked one
                _resolve(old, _SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                assignment = {a.member_id: bytes(a.assignment) for a in request.assignments}
                missing = [m for m in group.members if m not in assignment]
                if missing:
                    log.warning("group %s generation %d: empty assignment for members %s",
                                group.group_id, group.generation_id, missing)
                self._set_and_propagate_assignment(group, assignment)
                group.state = STABLE
                self._record_group(group)  # Kafka's storeGroup: members carry on after a restart
                log.info("group %s generation %d is stable", group.group_id, group.generation_id)
            return future
        # Stable: the assignment is already known.
        self._remove_pending_sync_member(group, member_id)
        self.schedule_member_expiry(group, member)
        return _SyncResult(NONE, group.protocol_type, group.protocol_name, member.assignment)

    # -- Heartbeat -------------------------------------------------------------------------------------

    async def heartbeat(self, request, version: int) -> messages.HeartbeatResponse:
        return messages.HeartbeatResponse(throttle_time_ms=0, error_code=self._handle_heartbeat(request, version))

    def _handle_heartbeat(self, request, version) -> int:
        error = self.status_error(request.group_id)
        if error is not None:
            return error
        group = self.groups.get(request.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        member_id = request.member_id
        error = self.validate_current_member(
            group, member_id, request.group_instance_id if version >= 3 else None)
        if error is not None:
            return error
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.schedule_member_expiry(group, group.members[member_id])
        if group.state is PREPARING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return NONE  # Stable, or CompletingRebalance (heartbeats may precede SyncGroup)

    # -- LeaveGroup ------------------------------------------------------------------------------------

    async def leave_group(self, request, version: int) -> messages.LeaveGroupResponse:
        if version <= 2:
            leaving = [(request.member_id, None)]
        else:
            leaving = [(m.member_id, m.group_instance_id) for m in request.members]
        top_error, member_errors = self._handle_leave(request.group_id, leaving)
        if version <= 2:
            error = top_error if top_error != NONE else (member_errors[0][2] if member_errors else NONE)
            return messages.LeaveGroupResponse(throttle_time_ms=0, error_code=error)
        return messages.LeaveGroupResponse(throttle_time_ms=0, error_code=top_error, members=[
            messages.LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=e)
            for m, i, e in member_errors])

    def _handle_leave(self, group_id: str, leaving):
        error = self.status_error(group_id)
        if error is not None:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in leaving]
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in leaving:
            if not member_id:  # administrative removal by group instance id
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    results.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                self._remove_member_and_update_group(group, group.members[current])
                results.append((member_id, instance_id, NONE))
            elif member_id in group.pending_members:
                self._remove_pending_member_and_update_group(group, member_id)
                results.append((member_id, instance_id, NONE))
            else:
                error = self.validate_current_member(group, member_id, instance_id)
                if error is None:
                    log.info("member %s left group %s", member_id, group_id)
                    self._remove_member_and_update_group(group, group.members[member_id])
                    error = NONE
                results.append((member_id, instance_id, error))
        return NONE, results


def _join_response(result: _JoinResult, version: int) -> messages.JoinGroupResponse:
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:  # not nullable before v7
        protocol_name = ""
    Member = messages.JoinGroupResponse.JoinGroupResponseMember
    return messages.JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader,
        skip_assignment=result.skip_assignment if version >= 9 else False, member_id=result.member_id,
        members=[Member(member_id=m, group_instance_id=i if version >= 5 else None, metadata=md)
                 for m, i, md in result.members])

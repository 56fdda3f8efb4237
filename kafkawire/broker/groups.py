"""The classic consumer-group coordinator and the committed-offset store.

A port of the protocol logic of Kafka's ``GroupCoordinator.scala`` / ``GroupMetadata.scala`` (the classic
group protocol) to asyncio: the purgatories become futures the request handlers await, and the delayed
operations (heartbeat expiry, rebalance timeout, initial rebalance delay, pending-sync expiry) become
loop timers; there is no polling loop.

Group states and their transitions are Kafka's::

    Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance -> ...

- JoinGroup parks the member until every known member has rejoined (or the rebalance timeout passes; the
  first rebalance of an empty group waits ``initial_rebalance_delay_ms``, extended while new members keep
  arriving, as ``InitialDelayedJoin`` does). Then a new generation starts, a protocol every member supports
  is chosen by the members' votes, and every parked JoinGroup is answered; the leader's answer carries all
  members' metadata. v4+ dynamic members without an id are answered MEMBER_ID_REQUIRED with a new id.
- SyncGroup from the leader stores the assignments and answers every member waiting in SyncGroup;
  members that do not send SyncGroup within the rebalance timeout are removed.
- Heartbeat answers REBALANCE_IN_PROGRESS while a rebalance prepares; a member that misses its session
  timeout is removed and the group rebalances.
- OffsetCommit / OffsetFetch keep offsets in an :class:`~kafkawire.broker.offsets_store.OffsetStore`.

The broker is always the coordinator, so NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS never arise
(``start()`` loads everything before requests are served).
"""
from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..error_codes import ErrorCode
from ..messages.describe_groups_response import DescribeGroupsResponse
from ..messages.heartbeat_response import HeartbeatResponse
from ..messages.join_group_response import JoinGroupResponse
from ..messages.leave_group_response import LeaveGroupResponse
from ..messages.list_groups_response import ListGroupsResponse
from ..messages.offset_commit_response import OffsetCommitResponse
from ..messages.offset_fetch_response import OffsetFetchResponse
from ..messages.sync_group_response import SyncGroupResponse
from .offsets_store import CommittedOffset, GroupRecord, MemberRecord, OffsetStore

__all__ = ["GroupCoordinator", "GroupState"]

log = logging.getLogger(__name__)

NONE = ErrorCode.NONE
# GroupCoordinator.NewMemberJoinTimeoutMs: a new member parked in JoinGroup is dropped after this long
# (its socket may be gone; if it is still there it retries).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
# offset.metadata.max.bytes
OFFSET_METADATA_MAX_BYTES = 4096
# AclOperation bits a group supports (READ 3, DELETE 6, DESCRIBE 8): all allowed, there are no ACLs.
_GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_NO_AUTHORIZED_OPERATIONS = -2147483648


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


# -- results handed to parked requests ------------------------------------------------------------------

@dataclass(slots=True)
class _JoinResult:
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list = field(default_factory=list)  # (member id, group instance id, metadata) for the leader


@dataclass(slots=True)
class _SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# -- timers ---------------------------------------------------------------------------------------------

class _Timer:
    """A one-shot loop timer whose deadline is measured on the coordinator's clock (seconds).

    The deadline may be moved later cheaply (``extend``): the loop callback re-arms itself for the rest
    instead of being cancelled and recreated on every heartbeat.
    """

    __slots__ = ("_loop", "_clock", "deadline", "_callback", "_handle")

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Callable[[], float], delay_s: float,
                 callback: Callable[[], None]) -> None:
        self._loop = loop
        self._clock = clock
        self._callback = callback
        self.deadline = clock() + delay_s
        self._handle = loop.call_later(max(delay_s, 0.0), self._fire)

    def _fire(self) -> None:
        remaining = self.deadline - self._clock()
        if remaining > 0:
            self._handle = self._loop.call_later(remaining, self._fire)
            return
        self._handle = None
        self._callback()

    def reset(self, delay_s: float) -> None:
        deadline = self._clock() + delay_s
        if self._handle is None:  # already fired: arm again
            self._handle = self._loop.call_later(max(delay_s, 0.0), self._fire)
        elif deadline < self.deadline:  # sooner than armed: re-arm
            self._handle.cancel()
            self._handle = self._loop.call_later(max(delay_s, 0.0), self._fire)
        self.deadline = deadline

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @property
    def active(self) -> bool:
        return self._handle is not None


# -- group and member state -----------------------------------------------------------------------------

class _Member:
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_future",
                 "sync_future", "is_new", "timer")

    def __init__(self, member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                 session_timeout_ms, protocol_type, protocols):
        self.member_id: str = member_id
        self.group_instance_id: str | None = group_instance_id
        self.client_id: str = client_id
        self.client_host: str = client_host
        self.rebalance_timeout_ms: int = rebalance_timeout_ms
        self.session_timeout_ms: int = session_timeout_ms
        self.protocol_type: str = protocol_type
        self.protocols: list[tuple[str, bytes]] = protocols  # in the member's order of preference
        self.assignment: bytes = b""
        self.join_future: asyncio.Future | None = None  # set while the member is "awaiting join"
        self.sync_future: asyncio.Future | None = None  # set while the member is "awaiting sync"
        self.is_new = False
        self.timer: _Timer | None = None  # session (heartbeat) expiry

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class _Group:
    __slots__ = ("group_id", "state", "generation_id", "protocol_type", "protocol_name", "leader_id",
                 "members", "static_members", "pending_members", "pending_sync", "new_member_added",
                 "join_timer", "join_timer_initial", "sync_timer")

    def __init__(self, group_id: str, generation_id: int = 0, protocol_type: str | None = None) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, _Member] = {}  # in joining order
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: dict[str, _Timer] = {}  # ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()  # members yet to send SyncGroup this generation
        self.new_member_added = False
        self.join_timer: _Timer | None = None  # DelayedJoin / InitialDelayedJoin
        self.join_timer_initial = False
        self.sync_timer: _Timer | None = None  # DelayedSync

    # GroupMetadata's queries

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in (STABLE, COMPLETING, EMPTY)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_future is not None for m in self.members.values())

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.state is EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        count = len(self.members)
        return any(self._support_count(name) == count for name in names)

    def _support_count(self, name: str) -> int:
        return sum(1 for m in self.members.values() if any(p == name for p, _ in m.protocols))

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the order of the first member's preference."""
        members = list(self.members.values())
        common = set.intersection(*({p for p, _ in m.protocols} for m in members))
        return [p for p, _ in members[0].protocols if p in common]

    def select_protocol(self) -> str:
        """The candidate with the most members' votes (each member votes for its first candidate).

        Kafka breaks ties by hash order; this breaks them by the first member's preference.
        """
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(set(candidates))
            votes[choice] = votes.get(choice, 0) + 1
        return max(candidates, key=lambda p: (votes.get(p, 0), -candidates.index(p)))

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    # GroupMetadata's updates

    def add(self, member: _Member) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        timer = self.pending_members.pop(member.member_id, None)
        if timer is not None:
            timer.cancel()

    def remove(self, member_id: str) -> _Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            if member.group_instance_id is not None and \
                    self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
            if member.timer is not None:
                member.timer.cancel()
                member.timer = None
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        timer = self.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        self.pending_sync.discard(member_id)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.join_future is not None:
            return True
        for member_id, member in self.members.items():
            if member.join_future is not None:
                self.leader_id = member_id
                return True
        return False

    def cancel_timers(self) -> None:
        for timer in (self.join_timer, self.sync_timer, *self.pending_members.values(),
                      *(m.timer for m in self.members.values())):
            if timer is not None:
                timer.cancel()
        self.join_timer = self.sync_timer = None
        self.pending_members.clear()
        for member in self.members.values():
            member.timer = None


def _resolve(future: asyncio.Future | None, result) -> bool:
    if future is None:
        return False
    if not future.done():  # a handler whose connection went away cancelled it
        future.set_result(result)
    return True


# -- the coordinator ------------------------------------------------------------------------------------

class GroupCoordinator:
    """Kafka's classic group coordinator and offset manager for a single broker (always the coordinator).

    Request methods take the decoded request and its version and return the response to encode at that
    version; JoinGroup and SyncGroup may wait (for the rebalance, for the leader's assignment).
    """

    def __init__(self, data_dir: Path, *, initial_rebalance_delay_ms: int = 3000, clock=time.monotonic,
                 min_session_timeout_ms: int = 6000, max_session_timeout_ms: int = 1800000,
                 new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS,
                 offset_metadata_max_bytes: int = OFFSET_METADATA_MAX_BYTES,
                 partition_exists: Callable[[str, int], bool] | None = None,
                 fsync: bool = False) -> None:
        """``partition_exists(topic, partition)``, if given, makes OffsetCommit answer
        UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist (as KafkaApis does); ``fsync`` makes
        every commit fsync the offsets file (otherwise it is written, not synced, before the answer)."""
        self.data_dir = Path(data_dir)
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.clock = clock
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.new_member_join_timeout_ms = new_member_join_timeout_ms
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.partition_exists = partition_exists
        self.store = OffsetStore(self.data_dir, fsync=fsync)
        self._groups: dict[str, _Group] = {}
        self._active = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load committed offsets and group generations from ``data_dir``; start serving."""
        self._loop = asyncio.get_running_loop()
        self.store.load()
        self._groups.clear()
        for group_id in set(self.store.offsets) | set(self.store.groups):
            record = self.store.groups.get(group_id)
            self._groups[group_id] = self._restore(group_id, record) if record else _Group(group_id)
        self._active = True

    def _restore(self, group_id: str, record: GroupRecord) -> _Group:
        """A group as stored: Stable with its members (each given a session timeout to be heard from
        again, as Kafka's loadGroup does), or Empty at its generation."""
        group = _Group(group_id, record.generation, record.protocol_type)
        if not record.members:
            return group
        group.state = STABLE
        group.protocol_name = record.protocol
        for stored in record.members:
            member = _Member(stored.member_id, stored.group_instance_id, stored.client_id, stored.client_host,
                             stored.rebalance_timeout_ms, stored.session_timeout_ms, record.protocol_type,
                             [(record.protocol, stored.metadata)])
            member.assignment = stored.assignment
            group.add(member)
            self._schedule_member_expiry(group, member)
        group.leader_id = record.leader if record.leader in group.members else next(iter(group.members))
        return group

    async def close(self) -> None:
        """Cancel every timer, answer parked requests NOT_COORDINATOR (clients look the coordinator up
        again) and close the offsets file."""
        self._active = False
        for group in self._groups.values():
            group.cancel_timers()
            for member in group.members.values():
                fut, member.join_future = member.join_future, None
                _resolve(fut, _JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                fut, member.sync_future = member.sync_future, None
                _resolve(fut, _SyncResult(ErrorCode.NOT_COORDINATOR))
        self.store.close()

    async def __aenter__(self) -> GroupCoordinator:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- queries for tests and tools -------------------------------------------------------------------

    def committed(self, group_id: str) -> dict[tuple[str, int], tuple[int, str]]:
        """``{(topic, partition): (offset, metadata)}`` committed by ``group_id``."""
        return {key: (c.offset, c.metadata) for key, c in self.store.offsets.get(group_id, {}).items()}

    def group_state(self, group_id: str) -> str:
        """The group's state name (Kafka's), "Dead" for an unknown group."""
        group = self._groups.get(group_id)
        return DEAD.value if group is None else group.state.value

    # -- timers ----------------------------------------------------------------------------------------

    def _timer(self, delay_ms: float, callback: Callable[[], None]) -> _Timer:
        return _Timer(self._loop, self.clock, delay_ms / 1000.0, callback)

    def _schedule_member_expiry(self, group: _Group, member: _Member, timeout_ms: int | None = None) -> None:
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
            delay = self.initial_rebalance_delay_ms
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
            delay = min(self.initial_rebalance_delay_ms, remaining_ms)
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
            self._schedule_member_expiry(group, member)
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
        members = ()
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
                self._schedule_member_expiry(group, member)

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

    def _validate_current_member(self, group: _Group, member_id: str, group_instance_id: str | None):
        if group_instance_id is not None:
            current = group.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _status_error(self, group_id: str, allow_empty: bool = False):
        """validateGroupStatus for this single, always-loaded coordinator."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return None

    # -- JoinGroup -------------------------------------------------------------------------------------

    async def join_group(self, request, version: int, client_id: str, client_host: str) -> JoinGroupResponse:
        result = self._handle_join(request, version, client_id or "", client_host or "")
        if isinstance(result, asyncio.Future):
            result = await result
        return _join_response(result, version)

    def _handle_join(self, request, version, client_id, client_host):
        group_id = request.group_id
        member_id = request.member_id or ""
        error = self._status_error(group_id)
        if error is not None:
            return _JoinResult(error, member_id)
        session_timeout_ms = request.session_timeout_ms
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return _JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        join = _JoinArgs(
            group_instance_id=request.group_instance_id if version >= 5 else None,
            client_id=client_id, client_host=client_host,
            rebalance_timeout_ms=session_timeout_ms if version == 0 else request.rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
            version=version)
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return _JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self._groups[group_id] = _Group(group_id)
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
        error = self._validate_current_member(group, member_id, join.group_instance_id)
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
        future = member.join_future = self._loop.create_future()
        # A new member parked in JoinGroup cannot heartbeat: it gets the (long) new-member timeout.
        self._schedule_member_expiry(group, member, self.new_member_join_timeout_ms)
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
        future = self._loop.create_future()
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
        group.static_members[join.group_instance_id] = new_member_id
        if old_member_id in group.pending_sync:
            group.pending_sync.discard(old_member_id)
            group.pending_sync.add(new_member_id)
        member.client_id, member.client_host = join.client_id, join.client_host
        self._schedule_member_expiry(group, member)
        future = self._loop.create_future()
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

    async def sync_group(self, request, version: int) -> SyncGroupResponse:
        result = self._handle_sync(request, version)
        if isinstance(result, asyncio.Future):
            result = await result
        return SyncGroupResponse(throttle_time_ms=0, error_code=result.error,
                                 protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                                 assignment=result.assignment)

    def _handle_sync(self, request, version):
        if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
            return _SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        error = self._status_error(request.group_id)
        if error is not None:
            return _SyncResult(error)
        group = self._groups.get(request.group_id)
        if group is None:
            return _SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        member_id = request.member_id
        instance_id = request.group_instance_id if version >= 3 else None
        if group.state is DEAD:
            return _SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self._validate_current_member(group, member_id, instance_id)
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
            future = self._loop.create_future()
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
        self._schedule_member_expiry(group, member)
        return _SyncResult(NONE, group.protocol_type, group.protocol_name, member.assignment)

    # -- Heartbeat -------------------------------------------------------------------------------------

    async def heartbeat(self, request, version: int) -> HeartbeatResponse:
        return HeartbeatResponse(throttle_time_ms=0, error_code=self._handle_heartbeat(request, version))

    def _handle_heartbeat(self, request, version) -> int:
        error = self._status_error(request.group_id)
        if error is not None:
            return error
        group = self._groups.get(request.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        member_id = request.member_id
        error = self._validate_current_member(
            group, member_id, request.group_instance_id if version >= 3 else None)
        if error is not None:
            return error
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_member_expiry(group, group.members[member_id])
        if group.state is PREPARING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return NONE  # Stable, or CompletingRebalance (heartbeats may precede SyncGroup)

    # -- LeaveGroup ------------------------------------------------------------------------------------

    async def leave_group(self, request, version: int) -> LeaveGroupResponse:
        if version <= 2:
            leaving = [(request.member_id, None)]
        else:
            leaving = [(m.member_id, m.group_instance_id) for m in request.members]
        top_error, member_errors = self._handle_leave(request.group_id, leaving)
        if version <= 2:
            error = top_error if top_error != NONE else (member_errors[0][2] if member_errors else NONE)
            return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=top_error, members=[
            LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=e)
            for m, i, e in member_errors])

    def _handle_leave(self, group_id: str, leaving):
        error = self._status_error(group_id)
        if error is not None:
            return error, []
        group = self._groups.get(group_id)
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
                error = self._validate_current_member(group, member_id, instance_id)
                if error is None:
                    log.info("member %s left group %s", member_id, group_id)
                    self._remove_member_and_update_group(group, group.members[member_id])
                    error = NONE
                results.append((member_id, instance_id, error))
        return NONE, results

    # -- OffsetCommit ----------------------------------------------------------------------------------

    async def offset_commit(self, request, version: int) -> OffsetCommitResponse:
        errors = self._handle_commit(request, version)
        Topic, Partition = OffsetCommitResponse.OffsetCommitResponseTopic, \
            OffsetCommitResponse.OffsetCommitResponsePartition
        return OffsetCommitResponse(throttle_time_ms=0, topics=[
            Topic(name=topic.name, topic_id=topic.topic_id, partitions=[
                Partition(partition_index=p.partition_index, error_code=e)
                for p, e in zip(topic.partitions, topic_errors)])
            for topic, topic_errors in zip(request.topics, errors)])

    def _handle_commit(self, request, version) -> list[list[int]]:
        """Per request topic, the error code of each of its partitions."""
        group_id = request.group_id
        generation = request.generation_id_or_member_epoch if version >= 1 else -1
        member_id = request.member_id if version >= 1 else ""
        instance_id = request.group_instance_id if version >= 7 else None
        error = self._status_error(group_id, allow_empty=True)
        group = None
        if error is None:
            group = self._groups.get(group_id)
            if group is None:
                if generation < 0:  # not using group management: a standalone commit
                    group = self._groups[group_id] = _Group(group_id)
                else:
                    error = ErrorCode.ILLEGAL_GENERATION
        if error is None:
            error = self._validate_offset_commit(group, generation, member_id, instance_id)
        if error is None:
            if group.state is COMPLETING:
                # The member has its JoinGroup answer but not its assignment yet.
                error = ErrorCode.REBALANCE_IN_PROGRESS
            elif group.state in (STABLE, PREPARING):
                # Commits during a rebalance are allowed (heartbeats tell the member to rejoin).
                member = group.members.get(member_id)
                if member is not None:
                    self._schedule_member_expiry(group, member)
        if error is not None:
            return [[error] * len(topic.partitions) for topic in request.topics]

        now_ms = int(time.time() * 1000)
        results: list[list[int]] = []
        entries: list[tuple[tuple[str, int], CommittedOffset]] = []
        positions: list[tuple[int, int]] = []  # where each entry's result goes
        for t, topic in enumerate(request.topics):
            topic_errors = []
            for p, partition in enumerate(topic.partitions):
                metadata = partition.committed_metadata
                if metadata is not None and len(metadata.encode("utf-8")) > self.offset_metadata_max_bytes:
                    topic_errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                elif self.partition_exists is not None and \
                        not self.partition_exists(topic.name, partition.partition_index):
                    topic_errors.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    topic_errors.append(NONE)
                    entries.append(((topic.name, partition.partition_index), CommittedOffset(
                        partition.committed_offset,
                        partition.committed_leader_epoch if version >= 6 else -1,
                        metadata or "", now_ms)))
                    positions.append((t, p))
            results.append(topic_errors)
        if entries:
            try:
                self.store.commit(group_id, entries)
            except OSError as exc:
                log.error("could not store offsets of group %s: %s", group_id, exc)
                for t, p in positions:
                    results[t][p] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return results

    def _validate_offset_commit(self, group: _Group, generation: int, member_id: str,
                                instance_id: str | None):
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation >= 0 or member_id or instance_id is not None:
            error = self._validate_current_member(group, member_id, instance_id)
            if error is None and generation != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            return error
        if group.state is not EMPTY:  # only members may commit for a group that has members
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # -- OffsetFetch -----------------------------------------------------------------------------------

    async def offset_fetch(self, request, version: int) -> OffsetFetchResponse:
        if version >= 8:
            Group = OffsetFetchResponse.OffsetFetchResponseGroup
            Topic = OffsetFetchResponse.OffsetFetchResponseTopics
            Partition = OffsetFetchResponse.OffsetFetchResponsePartitions
            groups = []
            for requested in request.groups:
                error, topics = self._fetch_offsets(requested.group_id, requested.topics)
                groups.append(Group(group_id=requested.group_id, error_code=error, topics=[
                    Topic(name=name, partitions=[Partition(
                        partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                        error_code=pe) for p, o, e, m, pe in partitions])
                    for name, partitions in topics]))
            return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
        Topic = OffsetFetchResponse.OffsetFetchResponseTopic
        Partition = OffsetFetchResponse.OffsetFetchResponsePartition
        error, topics = self._fetch_offsets(request.group_id, request.topics)
        if error != NONE and version < 2:  # no top-level error code: report it on every partition
            topics = [(name, [(p, -1, -1, "", error) for p, *_ in partitions]) for name, partitions in topics]
        return OffsetFetchResponse(throttle_time_ms=0, error_code=error if version >= 2 else 0, topics=[
            Topic(name=name, partitions=[Partition(
                partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=pe)
                for p, o, e, m, pe in partitions])
            for name, partitions in topics])

    def _fetch_offsets(self, group_id: str, requested_topics):
        """(group error, [(topic, [(partition, offset, leader epoch, metadata, error)])]).

        ``requested_topics`` None means every partition the group has committed. Requested partitions
        without a committed offset get offset -1 and no error, as in Kafka.
        """
        error = self._status_error(group_id, allow_empty=True)
        if error is not None:
            return error, [(t.name, [(p, -1, -1, "", error) for p in t.partition_indexes])
                           for t in requested_topics or ()]
        committed = self.store.offsets.get(group_id, {})
        if requested_topics is None:
            by_topic: dict[str, list] = {}
            for (topic, partition), c in sorted(committed.items()):
                by_topic.setdefault(topic, []).append(
                    (partition, c.offset, c.leader_epoch, c.metadata, NONE))
            return NONE, list(by_topic.items())
        topics = []
        for topic in requested_topics:
            partitions = []
            for p in topic.partition_indexes:
                c = committed.get((topic.name, p))
                if c is None:
                    partitions.append((p, -1, -1, "", NONE))
                else:
                    partitions.append((p, c.offset, c.leader_epoch, c.metadata, NONE))
            topics.append((topic.name, partitions))
        return NONE, topics

    # -- ListGroups / DescribeGroups -------------------------------------------------------------------

    async def list_groups(self, request, version: int) -> ListGroupsResponse:
        if not self._active:
            return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        states = {s.lower() for s in request.states_filter} if version >= 4 else set()
        types = {t.lower() for t in request.types_filter} if version >= 5 else set()
        listed = []
        if not types or "classic" in types:
            for group in self._groups.values():
                if states and group.state.value.lower() not in states:
                    continue
                listed.append(ListGroupsResponse.ListedGroup(
                    group_id=group.group_id, protocol_type=group.protocol_type or "",
                    group_state=group.state.value, group_type="classic"))
        return ListGroupsResponse(throttle_time_ms=0, error_code=NONE, groups=listed)

    async def describe_groups(self, request, version: int) -> DescribeGroupsResponse:
        include_ops = version >= 3 and request.include_authorized_operations
        described = [self._describe(group_id, version, include_ops) for group_id in request.groups]
        return DescribeGroupsResponse(throttle_time_ms=0, groups=described)

    def _describe(self, group_id: str, version: int, include_ops: bool):
        Described, Member = DescribeGroupsResponse.DescribedGroup, DescribeGroupsResponse.DescribedGroupMember
        operations = _GROUP_AUTHORIZED_OPERATIONS if include_ops else _NO_AUTHORIZED_OPERATIONS
        error = self._status_error(group_id, allow_empty=True)
        if error is not None:
            return Described(error_code=error, group_id=group_id, authorized_operations=operations)
        group = self._groups.get(group_id)
        if group is None:
            # v6 says so (KIP-1043); before, an unknown group is described as Dead with no error
            return Described(error_code=ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else NONE,
                             error_message=f"Group {group_id} not found." if version >= 6 else None,
                             group_id=group_id, group_state=DEAD.value, protocol_type="",
                             protocol_data="", members=[], authorized_operations=operations)
        stable = group.state is STABLE
        members = [Member(
            member_id=m.member_id, group_instance_id=m.group_instance_id if version >= 4 else None,
            client_id=m.client_id, client_host=m.client_host,
            member_metadata=m.metadata(group.protocol_name) if stable else b"",
            member_assignment=m.assignment if stable else b"") for m in group.members.values()]
        return Described(error_code=NONE, group_id=group_id, group_state=group.state.value,
                         protocol_type=group.protocol_type or "",
                         protocol_data=(group.protocol_name or "") if stable else "",
                         members=members, authorized_operations=operations)


@dataclass(slots=True)
class _JoinArgs:
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    version: int


def _join_response(result: _JoinResult, version: int) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:  # not nullable before v7
        protocol_name = ""
    Member = JoinGroupResponse.JoinGroupResponseMember
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader,
        skip_assignment=result.skip_assignment if version >= 9 else False, member_id=result.member_id,
        members=[Member(member_id=m, group_instance_id=i if version >= 5 else None, metadata=md)
                 for m, i, md in result.members])

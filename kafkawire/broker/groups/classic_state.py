"""The classic group protocol's state as data: group states, members, groups, the timers they use
and the results handed to parked JoinGroup and SyncGroup requests (the coordinator acts on them in
``group_membership`` and ``group_offsets``)."""
from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Callable

from ...error_codes import ErrorCode

__all__ = ["GroupState", "NONE", "NEW_MEMBER_JOIN_TIMEOUT_MS", "OFFSET_METADATA_MAX_BYTES"]

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
        self._handle: asyncio.TimerHandle | None = loop.call_later(max(delay_s, 0.0), self._fire)

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

    def metadata(self, protocol: str | None) -> bytes:
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

"""KIP-1071 streams groups as data: members with their epochs and tasks, the group's epochs, topology
and target assignment, and reconciliation (Kafka's streams ``CurrentAssignmentBuilder``).

A task is (subtopology id, partition). A member owns active, standby and warm-up tasks; it moves
toward its target one safe step at a time, as a KIP-848 consumer does with partitions: tasks it must
give up are revoked first (the member keeps its epoch until its heartbeat no longer lists them), and a
task is handed to it only once it is released: an active task when no member owns it and the member's
process holds no standby or warm-up of it, a standby or warm-up task when the member's process holds
no other copy of it. So a task is never active on two members, nor active and standby in one process.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from ..consumer_state import LEAVE_EPOCH, STATIC_LEAVE_EPOCH
from .topology import Topology

__all__ = ["MemberState", "Tasks", "Member", "StreamsGroup", "reconcile", "Task", "LEAVE_EPOCH",
           "STATIC_LEAVE_EPOCH"]

Task = tuple[str, int]  # (subtopology id, partition)


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_TASKS = "unrevoked_tasks"  # waiting for the member to give tasks up
    UNRELEASED_TASKS = "unreleased_tasks"  # waiting for others to give its tasks up


@dataclass(frozen=True)
class Tasks:
    """Kafka's ``TasksTuple``: active, standby and warm-up tasks."""
    active: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.active or self.standby or self.warmup)

    def overlaps(self, other: Tasks) -> bool:
        return bool(self.active & other.active or self.standby & other.standby or self.warmup & other.warmup)

    def merged(self, other: Tasks) -> Tasks:
        return Tasks(self.active | other.active, self.standby | other.standby, self.warmup | other.warmup)


@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    task_offsets: tuple[tuple[str, int, int], ...] = ()  # (subtopology, partition, offset) as last reported
    task_end_offsets: tuple[tuple[str, int, int], ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Tasks = Tasks()
    pending_revocation: Tasks = Tasks()


@dataclass
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: Topology | None = None
    partition_counts: dict[str, int] = field(default_factory=dict)  # the topology's topics that exist
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Tasks] = field(default_factory=dict)  # member id -> target assignment
    endpoint_epoch: int = 0  # bumped when the partitions behind the members' user endpoints change
    endpoints: tuple = ()  # what the endpoint epoch describes
    shutdown_requested_by: str | None = None  # a member asked the whole application to stop (in memory)
    session_deadlines: dict[str, float] = field(default_factory=dict)
    rebalance_deadlines: dict[str, float] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's StreamsGroupState name (NotReady: no topology whose source topics all exist)."""
        if not self.members:
            return "Empty"
        if self.topology is None or not self.topology_ready:
            return "NotReady"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    @property
    def topology_ready(self) -> bool:
        return self.topology is not None and all(t in self.partition_counts for t in self.topology.source_topics())

    def put(self, member: Member) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        self.session_deadlines.pop(member_id, None)
        self.rebalance_deadlines.pop(member_id, None)
        if member is not None and member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        if not self.members:
            self.shutdown_requested_by = None  # the application has stopped
        return member


@dataclass(frozen=True)
class _Holders:
    """Which process owns each task now (assigned or pending revocation), over all members."""
    active: dict[Task, str]
    standby: dict[Task, set[str]]
    warmup: dict[Task, set[str]]

    @classmethod
    def of(cls, members) -> _Holders:
        holders = cls({}, {}, {})
        for member in members:
            for tasks in (member.assigned, member.pending_revocation):
                for task in tasks.active:
                    holders.active[task] = member.process_id
                for task in tasks.standby:
                    holders.standby.setdefault(task, set()).add(member.process_id)
                for task in tasks.warmup:
                    holders.warmup.setdefault(task, set()).add(member.process_id)
        return holders


def reconcile(member: Member, target_epoch: int, target: Tasks, members, owned: Tasks | None) -> Member:
    """The member's next state toward ``target`` (``members``: the group's members, for who holds what);
    ``owned``: the tasks its heartbeat lists (None: it did not say)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, members, owned)
    if member.state is MemberState.UNREVOKED_TASKS:
        if owned is None or owned.overlaps(member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, members, owned)
    return _next(member, member.member_epoch, target_epoch, target, members, owned)


def _next(member: Member, epoch: int, target_epoch: int, target: Tasks, members, owned: Tasks | None) -> Member:
    keep = Tasks(member.assigned.active & target.active, member.assigned.standby & target.standby,
                 member.assigned.warmup & target.warmup)
    revoke = Tasks(member.assigned.active - target.active, member.assigned.standby - target.standby,
                   member.assigned.warmup - target.warmup)
    if revoke and (owned is None or owned.overlaps(revoke)):
        return replace(member, state=MemberState.UNREVOKED_TASKS, member_epoch=epoch,
                       previous_member_epoch=member.member_epoch, assigned=keep, pending_revocation=revoke)
    # past its revocations the member holds only what it keeps
    holders = _Holders.of([m for m in members if m.member_id != member.member_id]
                          + [replace(member, assigned=keep, pending_revocation=Tasks())])
    process = member.process_id

    def copy_here(task: Task) -> bool:  # the member's process already holds a copy of the task
        return (holders.active.get(task) == process or process in holders.standby.get(task, ())
                or process in holders.warmup.get(task, ()))

    def active_held(task: Task) -> bool:
        return (task in holders.active or process in holders.standby.get(task, ())
                or process in holders.warmup.get(task, ()))

    adding, unreleased = [], False
    for have, want, held in ((keep.active, target.active, active_held), (keep.standby, target.standby, copy_here),
                             (keep.warmup, target.warmup, copy_here)):
        missing = want - have
        free = frozenset(task for task in missing if not held(task))
        unreleased = unreleased or len(free) < len(missing)
        adding.append(free)
    state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
    return replace(member, state=state, member_epoch=target_epoch, previous_member_epoch=member.member_epoch,
                   assigned=keep.merged(Tasks(*adding)), pending_revocation=Tasks())

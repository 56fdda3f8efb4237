"""KIP-848 consumer groups as data: members with their epochs and assignments, the group's epochs and
target assignment, and reconciliation (Kafka's ``CurrentAssignmentBuilder``).

A member moves toward its target assignment one safe step at a time: partitions it must give up are
first revoked (the member keeps its epoch until its heartbeat shows it no longer owns them), and a
partition is handed to it only once no other member owns it (assigned or pending revocation). So no
partition is ever owned by two members at once.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

__all__ = ["MemberState", "Member", "ConsumerGroup", "reconcile", "Assignment", "LEAVE_EPOCH",
           "STATIC_LEAVE_EPOCH"]

Assignment = dict[str, frozenset[int]]  # topic name -> partitions

LEAVE_EPOCH = -1  # the member leaves the group
STATIC_LEAVE_EPOCH = -2  # a static member leaves for now; its assignment waits for it


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # waiting for the member to give partitions up
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waiting for others to give its partitions up


@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def owned(self):
        """Every (topic, partition) the member owns: assigned or still to be revoked."""
        for source in (self.assigned, self.pending_revocation):
            for topic, partitions in source.items():
                for partition in partitions:
                    yield topic, partition


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target assignment
    owners: dict[tuple[str, int], str] = field(default_factory=dict)  # partition -> owning member id
    subscription_metadata: dict[str, tuple[object, int]] = field(default_factory=dict)  # topic -> (id, count)
    assignor: str = ""
    session_deadlines: dict[str, float] = field(default_factory=dict)  # member id -> when it is fenced
    rebalance_deadlines: dict[str, float] = field(default_factory=dict)  # member id -> revocation deadline

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroupState name."""
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def put(self, member: Member) -> None:
        """Add or update a member, keeping the partition owners in step."""
        self.drop_ownership(member.member_id)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for key in member.owned():
            self.owners[key] = member.member_id

    def drop_ownership(self, member_id: str) -> None:
        old = self.members.get(member_id)
        if old is not None:
            for key in old.owned():
                if self.owners.get(key) == member_id:
                    del self.owners[key]

    def remove(self, member_id: str) -> Member | None:
        self.drop_ownership(member_id)
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        self.session_deadlines.pop(member_id, None)
        self.rebalance_deadlines.pop(member_id, None)
        if member is not None and member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member


def reconcile(member: Member, target_epoch: int, target: Assignment, owners: dict[tuple[str, int], str],
              owned: Assignment | None) -> Member:
    """The member's next state toward ``target`` at ``target_epoch`` (``CurrentAssignmentBuilder.build``).
    ``owned`` is what the member's heartbeat says it owns (None: the heartbeat did not say)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, owners, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, owners, owned)
    return _next(member, member.member_epoch, target_epoch, target, owners, owned)


def _next(member: Member, epoch: int, target_epoch: int, target: Assignment, owners, owned) -> Member:
    assigned: dict[str, frozenset[int]] = {}
    revoking: dict[str, frozenset[int]] = {}
    pending: dict[str, frozenset[int]] = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        wanted = target.get(topic, frozenset())
        have = member.assigned.get(topic, frozenset())
        keep = have & wanted
        if keep:
            assigned[topic] = keep
        if have - keep:
            revoking[topic] = have - keep
        free = {p for p in wanted - keep if owners.get((topic, p), member.member_id) == member.member_id}
        unreleased = unreleased or len(free) < len(wanted - keep)
        if free:
            pending[topic] = frozenset(free)
    if revoking and _still_owns(owned, revoking):
        return replace(member, state=MemberState.UNREVOKED_PARTITIONS, member_epoch=epoch,
                       previous_member_epoch=member.member_epoch, assigned=assigned, pending_revocation=revoking)
    for topic, partitions in pending.items():
        assigned[topic] = assigned.get(topic, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(member, state=state, member_epoch=target_epoch, previous_member_epoch=member.member_epoch,
                   assigned=assigned, pending_revocation={})


def _still_owns(owned: Assignment | None, revoking: Assignment) -> bool:
    """Whether the heartbeat shows partitions that are being revoked (None: it did not say, so assume so)."""
    if owned is None:
        return True
    return any(owned.get(topic, frozenset()) & partitions for topic, partitions in revoking.items())

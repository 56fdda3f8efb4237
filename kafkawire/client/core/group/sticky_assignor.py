"""The sticky assignors, after the rules of Java's AbstractStickyAssignor: ``sticky`` (KIP-54, eager) and
``cooperative-sticky`` (KIP-429). Both hand out partitions as evenly as possible and keep each member's
previous partitions where the balance allows.

* What a member owned, and in which generation: ``sticky`` reads it from the subscription's UserData,
  StickyAssignorUserData v1 (``[topic: string, partitions: [int32]]``, then the int32 generation; v0
  has no generation), the member's last assignment, since eager members give everything up before
  joining. ``cooperative-sticky`` reads the subscription's OwnedPartitions, with the generation of
  subscription v2+ or else of its UserData (a bare int32, as Java's CooperativeStickyAssignor writes).
  A claim from an older generation loses to a newer one; a partition claimed twice in the same
  generation belongs to neither claim.
* Equal subscriptions: every member gets ``floor(P/N)`` partitions and ``P % N`` of them one more;
  each keeps as many of its own as its quota allows, the rest go round-robin to the members below
  quota (sorted by member id). Otherwise partitions (those with the fewest possible consumers first)
  go to the eligible member with the fewest, then single moves from a member with at least two more
  than an eligible one rebalance it, until none is left.
* ``cooperative-sticky`` then takes out of each member's assignment every partition another member
  still reports owning: that member revokes it first, rejoins, and the partition is assigned in the
  follow-up rebalance, so no partition ever has two owners at once.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..topic_partition import TopicPartition
from .assignor_base import COOPERATIVE, EAGER, Assignor, java_string_key, member_order, partition_key

if TYPE_CHECKING:
    from .assignors import Subscription

__all__ = ["StickyAssignor", "CooperativeStickyAssignor", "encode_sticky_user_data", "decode_sticky_user_data",
           "encode_cooperative_user_data", "decode_cooperative_user_data", "NO_GENERATION"]

NO_GENERATION = -1  # AbstractStickyAssignor.DEFAULT_GENERATION
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")

MemberData = tuple[tuple[TopicPartition, ...], "int | None"]  # (owned partitions, generation or None)


# ---- user data ---------------------------------------------------------------------------------------------

def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None) -> bytes:
    """StickyAssignorUserData v1 (v0 when ``generation`` is None), topics in name order."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    out = [_INT32.pack(len(by_topic))]
    for topic in sorted(by_topic, key=java_string_key):
        name = topic.encode("utf-8")
        numbers = sorted(by_topic[topic])
        out += [_INT16.pack(len(name)), name, _INT32.pack(len(numbers)), struct.pack(f">{len(numbers)}i", *numbers)]
    if generation is not None:
        out.append(_INT32.pack(generation))
    return b"".join(out)


def decode_sticky_user_data(data: bytes | bytearray | memoryview | None) -> MemberData:
    """A ``sticky`` member's previous partitions and generation. As Java's StickyAssignor: read as v1, else
    as v0 (no generation); bytes neither reads are no partitions in generation -1; no bytes, none at all."""
    if data is None or len(data) == 0:
        return (), None
    view = memoryview(data).cast("B")
    try:
        partitions, end = _read_assignment(view)
    except (ValueError, struct.error, UnicodeDecodeError):
        return (), NO_GENERATION
    if end + 4 <= len(view):
        return partitions, _INT32.unpack_from(view, end)[0]
    return partitions, None  # v0


def _read_assignment(view: memoryview) -> tuple[tuple[TopicPartition, ...], int]:
    offset = 0

    def take(fmt: struct.Struct) -> int:
        nonlocal offset
        value = fmt.unpack_from(view, offset)[0]
        offset += fmt.size
        return value

    topics = take(_INT32)
    if topics < 0 or topics * 6 > len(view):  # each topic takes at least 6 bytes: no allocation beyond the data
        raise ValueError(f"bad topic count {topics}")
    partitions = []
    for _ in range(topics):
        length = take(_INT16)
        if length < 0 or offset + length > len(view):
            raise ValueError(f"bad topic name length {length}")
        topic = bytes(view[offset:offset + length]).decode("utf-8")
        offset += length
        count = take(_INT32)
        if count < 0 or offset + 4 * count > len(view):
            raise ValueError(f"bad partition count {count}")
        partitions += [TopicPartition(topic, p) for p in struct.unpack_from(f">{count}i", view, offset)]
        offset += 4 * count
    return tuple(partitions), offset


def encode_cooperative_user_data(generation: int) -> bytes:
    """Java's CooperativeStickyAssignor user data: the member's generation as one int32."""
    return _INT32.pack(generation)


def decode_cooperative_user_data(data: bytes | bytearray | memoryview | None) -> int | None:
    """The generation in a ``cooperative-sticky`` member's user data (None: no user data; -1: unreadable)."""
    if data is None:
        return None
    if len(data) < 4:
        return NO_GENERATION
    return _INT32.unpack_from(data, 0)[0]


# ---- the assignors -----------------------------------------------------------------------------------------

class StickyAssignor(Assignor):
    """Balanced and sticky, eager (see the module docstring)."""

    name = "sticky"
    supported_protocols: tuple[str, ...] = (EAGER,)

    def member_data(self, subscription: Subscription) -> MemberData:
        return decode_sticky_user_data(subscription.user_data)

    def user_data(self, owned: Iterable[TopicPartition], generation: int) -> bytes | None:
        owned = tuple(owned)
        if generation == NO_GENERATION and not owned:
            return None  # never assigned yet (Java sends no user data then)
        return encode_sticky_user_data(owned, generation)

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Iterable[str]],
               instance_ids: Mapping[str, str | None] | None = None) -> dict[str, list[TopicPartition]]:
        """A fresh assignment (no member owns anything yet)."""
        from .assignors import Subscription
        return self.assign_subscriptions(partitions_per_topic, {member: Subscription(tuple(topics))
                                                                for member, topics in subscriptions.items()},
                                         instance_ids)

    def assign_subscriptions(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                             instance_ids: Mapping[str, str | None] | None = None) -> dict[str, list[TopicPartition]]:
        for topic, count in partitions_per_topic.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"partition count of topic {topic!r} must be a non-negative int, not {count!r}")
        members = member_order(subscriptions, instance_ids or {})
        topics_of = {member: frozenset(subscriptions[member].topics) for member in members}
        data = {member: self.member_data(subscriptions[member]) for member in members}
        counts = {topic: count for topic, count in partitions_per_topic.items() if count}
        if not members:
            return {}
        if len(set(topics_of.values())) == 1:
            assignment = _equal_subscriptions(counts, topics_of[members[0]], members, data)
        else:
            assignment = _unequal_subscriptions(counts, topics_of, members, data)
        assignment = self._adjust(assignment, subscriptions)
        return {member: sorted(assignment[member], key=partition_key) for member in subscriptions}

    def _adjust(self, assignment: dict[str, list[TopicPartition]],
                subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        return assignment


class CooperativeStickyAssignor(StickyAssignor):
    """The same assignment, run incrementally (KIP-429; see the module docstring)."""

    name = "cooperative-sticky"
    supported_protocols = (COOPERATIVE, EAGER)

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.generation_id >= 0:  # subscription v2+ carries the generation itself
            return subscription.owned_partitions, subscription.generation_id
        return subscription.owned_partitions, decode_cooperative_user_data(subscription.user_data)

    def user_data(self, owned: Iterable[TopicPartition], generation: int) -> bytes | None:
        return encode_cooperative_user_data(generation)

    def _adjust(self, assignment: dict[str, list[TopicPartition]],
                subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        claimants: dict[TopicPartition, set[str]] = {}
        for member, subscription in subscriptions.items():
            for tp in subscription.owned_partitions:
                claimants.setdefault(tp, set()).add(member)
        return {member: [tp for tp in partitions if not claimants.get(tp, set()) - {member}]
                for member, partitions in assignment.items()}


# ---- the two cases ------------------------------------------------------------------------------------------

def _equal_subscriptions(counts: Mapping[str, int], topics: frozenset[str], members: list[str],
                         data: Mapping[str, MemberData]) -> dict[str, list[TopicPartition]]:
    """Every member subscribes to ``topics``: quotas of floor(P/N) and ceil(P/N), owned partitions kept
    up to the quota, the rest dealt round-robin."""
    partitions = sorted((TopicPartition(t, p) for t in topics if t in counts for p in range(counts[t])),
                        key=partition_key)
    existing = set(partitions)
    owned = _owned_by_newest_generation(members, data, existing)

    min_quota, over_quota = divmod(len(partitions), len(members))
    max_quota = min_quota + (1 if over_quota else 0)
    assignment: dict[str, list[TopicPartition]] = {member: [] for member in members}
    above_min = 0  # members given max_quota (at most over_quota of them)
    under_min: list[str] = []  # members still below min_quota
    at_min: list[str] = []  # members at min_quota that may take one more
    for member in members:
        mine = owned[member]
        if len(mine) < min_quota:
            assignment[member] += mine
            under_min.append(member)
        elif len(mine) >= max_quota and above_min < over_quota:
            assignment[member] += mine[:max_quota]
            above_min += 1
        else:
            assignment[member] += mine[:min_quota]
            at_min.append(member)
    taken = {tp for partitions_ in assignment.values() for tp in partitions_}
    under_min.sort(key=java_string_key)
    at_min.sort(key=java_string_key)
    index = 0
    for tp in (tp for tp in partitions if tp not in taken):
        if under_min:
            index %= len(under_min)
            member = under_min[index]
            assignment[member].append(tp)
            if len(assignment[member]) >= min_quota:
                under_min.pop(index)
                at_min.append(member)
            else:
                index += 1
        else:
            if above_min >= over_quota or not at_min:
                raise AssertionError("sticky assignor: partitions left over once every member is at its quota")
            member = at_min.pop(0)
            assignment[member].append(tp)
            above_min += 1
    return assignment


def _unequal_subscriptions(counts: Mapping[str, int], topics_of: Mapping[str, frozenset[str]], members: list[str],
                           data: Mapping[str, MemberData]) -> dict[str, list[TopicPartition]]:
    """Members subscribe to different topics: keep each valid claim, give the rest to the least loaded
    eligible member, then move single partitions while a move evens the load."""
    order = {member: index for index, member in enumerate(members)}
    eligible: dict[TopicPartition, list[str]] = {}
    for topic in sorted({t for topics in topics_of.values() for t in topics if t in counts}, key=java_string_key):
        subscribers = [member for member in members if topic in topics_of[member]]
        for partition in range(counts[topic]):
            eligible[TopicPartition(topic, partition)] = subscribers
    by_scarcity = sorted(eligible, key=lambda tp: (len(eligible[tp]), partition_key(tp)))

    owner = _owner_by_generation(members, data)
    assignment: dict[str, list[TopicPartition]] = {member: [] for member in members}
    holder: dict[TopicPartition, str] = {}
    for tp in by_scarcity:
        member = owner.get(tp)
        if member is not None and tp.topic in topics_of[member]:
            assignment[member].append(tp)
            holder[tp] = member
    fresh = [tp for tp in by_scarcity if tp not in holder]
    kept = [tp for tp in by_scarcity if tp in holder]
    for tp in fresh:
        member = min(eligible[tp], key=lambda m: (len(assignment[m]), order[m]))
        assignment[member].append(tp)
        holder[tp] = member

    # Each move takes a partition from a member with at least two more than the one it goes to, so the
    # sum of squared loads falls with every move and the loop ends. Partitions nobody kept move first.
    movable = [tp for tp in fresh + kept if len(eligible[tp]) > 1]
    moved = True
    while moved:
        moved = False
        for tp in movable:
            current = holder[tp]
            target = min(eligible[tp], key=lambda m: (len(assignment[m]), order[m]))
            if len(assignment[current]) > len(assignment[target]) + 1:
                assignment[current].remove(tp)
                assignment[target].append(tp)
                holder[tp] = target
                moved = True
    return assignment


# ---- who owned what --------------------------------------------------------------------------------------

def _owned_by_newest_generation(members: list[str], data: Mapping[str, MemberData],
                                existing: set[TopicPartition]) -> dict[str, list[TopicPartition]]:
    """Each member's claims that count (equal subscriptions): only the members of the newest generation
    seen keep theirs (a member without a generation only while no generation was seen); a partition
    claimed twice among them is nobody's: it is dealt like an unowned one."""
    owned: dict[str, list[TopicPartition]] = {member: [] for member in members}
    newest = NO_GENERATION
    current: list[str] = []
    owner_of: dict[TopicPartition, str] = {}
    contested: set[TopicPartition] = set()
    for member in members:
        claims, generation = data[member]
        if generation is None and newest != NO_GENERATION:
            continue
        if generation is not None:
            if generation < newest:
                continue
            if generation > newest:
                for stale in current:
                    owned[stale] = []
                current, owner_of, contested, newest = [], {}, set(), generation
        current.append(member)
        for tp in dict.fromkeys(claims):
            if tp not in existing:
                continue  # a topic no longer subscribed or a partition that does not exist
            other = owner_of.get(tp)
            if other is None and tp not in contested:
                owner_of[tp] = member
                owned[member].append(tp)
            else:
                if other is not None:
                    owned[other].remove(tp)
                    del owner_of[tp]
                contested.add(tp)
    return owned


def _owner_by_generation(members: list[str], data: Mapping[str, MemberData]) -> dict[TopicPartition, str]:
    """Per partition, the member claiming it in the newest generation (unequal subscriptions). A second
    claim in the same generation is ignored, as Java does."""
    best: dict[TopicPartition, tuple[int, str]] = {}
    for member in members:
        claims, generation = data[member]
        generation = NO_GENERATION if generation is None else generation
        for tp in claims:
            known = best.get(tp)
            if known is None or generation > known[0]:
                best[tp] = (generation, member)
    return {tp: member for tp, (_generation, member) in best.items()}

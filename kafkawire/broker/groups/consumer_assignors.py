"""The server-side assignors of KIP-848 consumer groups (``group.consumer.assignors``): ``uniform``
(Kafka's default: balanced and sticky) and ``range`` (each topic's partitions split into contiguous
ranges over its subscribers, so co-partitioned topics line up).

An assignor sees each member's subscribed topics (regular expressions already resolved), the topics'
partition counts and the current target assignment, and returns the next target: member id ->
{topic: partitions}. Assignments are by topic name here; the coordinator turns them into ids.
"""
from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ASSIGNORS", "uniform", "range_assignor", "Assignment"]

Assignment = dict[str, set[int]]  # topic name -> partitions


def uniform(subscriptions: Mapping[str, frozenset[str]], partition_counts: Mapping[str, int],
            current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Every subscribed partition to one of its subscribers, as evenly as the subscriptions allow, moving
    as few partitions as possible from where ``current`` has them."""
    members = sorted(subscriptions)
    owner: dict[tuple[str, int], str] = {}
    counts = dict.fromkeys(members, 0)
    for member in members:  # stickiness: keep what is still subscribed and still exists
        for topic, partitions in sorted(current.get(member, {}).items()):
            if topic not in subscriptions[member]:
                continue
            for partition in sorted(partitions):
                key = (topic, partition)
                if partition < partition_counts.get(topic, 0) and key not in owner:
                    owner[key] = member
                    counts[member] += 1
    subscribers: dict[str, list[str]] = {}
    for member in members:
        for topic in subscriptions[member]:
            if topic in partition_counts:
                subscribers.setdefault(topic, []).append(member)
    for topic in sorted(subscribers):  # the rest, each to its least loaded subscriber
        for partition in range(partition_counts[topic]):
            if (topic, partition) not in owner:
                chosen = min(subscribers[topic], key=lambda m: (counts[m], m))
                owner[(topic, partition)] = chosen
                counts[chosen] += 1
    _balance(owner, counts, subscribers)
    result: dict[str, Assignment] = {member: {} for member in members}
    for (topic, partition), member in owner.items():
        result[member].setdefault(topic, set()).add(partition)
    return result


def _balance(owner: dict[tuple[str, int], str], counts: dict[str, int], subscribers: dict[str, list[str]]) -> None:
    """Move partitions from the most to the least loaded of their subscribers until no move narrows the
    gap (each move lowers the sum of squared counts, so this ends)."""
    moved = True
    while moved:
        moved = False
        for key in sorted(owner, key=lambda k: (-counts[owner[k]], k)):
            current = owner[key]
            target = min(subscribers[key[0]], key=lambda m: (counts[m], m))
            if counts[target] < counts[current] - 1:
                owner[key] = target
                counts[current] -= 1
                counts[target] += 1
                moved = True


def range_assignor(subscriptions: Mapping[str, frozenset[str]], partition_counts: Mapping[str, int],
                   current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Per topic, its subscribers in member id order take contiguous ranges, the first ones one more."""
    result: dict[str, Assignment] = {member: {} for member in subscriptions}
    for topic, count in sorted(partition_counts.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = share + (index < extra)
            if size:
                result[member][topic] = set(range(start, start + size))
            start += size
    return result


ASSIGNORS = {"uniform": uniform, "range": range_assignor}

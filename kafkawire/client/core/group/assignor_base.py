"""What every client-side partition assignor shares: the interface the group leader calls, and the
orders Java's assignors sort members and partitions in (so that every client in a group agrees)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..topic_partition import TopicPartition

if TYPE_CHECKING:
    from .assignors import Subscription

__all__ = ["Assignor", "EAGER", "COOPERATIVE", "java_string_key", "partition_key", "member_order"]

# ConsumerPartitionAssignor.RebalanceProtocol, by name (as confluent-kafka's rebalance_protocol() says them).
EAGER, COOPERATIVE = "EAGER", "COOPERATIVE"


def java_string_key(text: str) -> bytes:
    """Sort key giving Java's ``String.compareTo`` order (UTF-16 code units, not code points), so that
    member ids with characters beyond U+FFFF sort as the Java leader would sort them."""
    return text.encode("utf-16-be", "surrogatepass")


def partition_key(tp: TopicPartition) -> tuple[bytes, int]:
    return java_string_key(tp.topic), tp.partition


def member_order(member_ids: Iterable[str], instance_ids: Mapping[str, str | None]) -> list[str]:
    """Java's MemberInfo order: static members by group instance id, then dynamic members by member id."""
    def key(member_id: str):
        instance = instance_ids.get(member_id)
        if instance is not None:
            return (0, java_string_key(instance), java_string_key(member_id))
        return (1, java_string_key(member_id), b"")
    return sorted(member_ids, key=key)


class Assignor:
    """A partition assignor: ``name`` is its protocol name in JoinGroup; ``supported_protocols`` the
    rebalance protocols it can run under (Java's supportedProtocols)."""

    name = ""
    supported_protocols: tuple[str, ...] = (EAGER,)

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Iterable[str]],
               instance_ids: Mapping[str, str | None] | None = None) -> dict[str, list[TopicPartition]]:
        """Every member's partitions. ``subscriptions`` maps member id to its topics;
        ``partitions_per_topic`` gives partition counts (a topic missing or with 0 partitions is not
        assigned); ``instance_ids`` maps static members to their group instance id."""
        topics_of = {member: frozenset(topics) for member, topics in subscriptions.items()}
        _check_counts(partitions_per_topic)
        members = member_order(topics_of, instance_ids or {})
        assignment = self._assign(partitions_per_topic, topics_of, members)
        return {member: sorted(assignment.get(member, ()), key=partition_key) for member in subscriptions}

    def assign_subscriptions(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                             instance_ids: Mapping[str, str | None] | None = None) -> dict[str, list[TopicPartition]]:
        """``assign`` from the members' whole subscriptions (the sticky assignors read the partitions
        each member owns from them)."""
        return self.assign(partitions_per_topic, {member: s.topics for member, s in subscriptions.items()},
                           instance_ids)

    def user_data(self, owned: Iterable[TopicPartition], generation: int) -> bytes | None:
        """The subscription's UserData for a member whose last assignment was ``owned`` in
        ``generation`` (-1: none yet). None: no user data."""
        return None

    def _assign(self, partitions_per_topic, topics_of, members) -> dict[str, list[TopicPartition]]:
        raise NotImplementedError


def _check_counts(partitions_per_topic: Mapping[str, int]) -> None:
    for topic, count in partitions_per_topic.items():
        if not isinstance(count, int) or count < 0:
            raise ValueError(f"partition count of topic {topic!r} must be a non-negative int, not {count!r}")

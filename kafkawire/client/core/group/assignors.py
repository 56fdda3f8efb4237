"""The consumer protocol's partition assignors and its subscription and assignment payloads.

The group leader runs an assignor over every member's subscription and sends each member its share
in SyncGroup. Both payloads are opaque to the broker; they must be read the same way by every client
in the group, so they follow Java's ``ConsumerProtocol`` exactly:

* bytes = int16 version, then ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment`` of that
  version. A version newer than ours is read as our newest, ignoring what follows (Java does the same,
  so fields added later never break older readers). Subscriptions are written at v3, as Java writes
  them; an assignment is written at the version of the member's own subscription (at most 3; the
  layout is the same in every version, so older readers see the version they sent).
* "range" and "roundrobin" assign exactly as Java's RangeAssignor and RoundRobinAssignor do when no
  partition rack information is given (kafka-python's assignors agree where they are not buggy, see
  the tests): members ordered static members first (by group instance id), then dynamic members (by
  member id), strings compared as Java compares them (UTF-16 code units); partitions in numeric
  order; topics without partition information are left out.
* Each member's partitions are returned sorted by (topic, partition) and written grouped by topic in
  that order, which is also kafka-python's byte layout. Java groups topics in hash order, so its bytes
  can differ in topic order only; every reader takes the same partitions from either.
"""
from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafkawire.errors import DecodeError
from kafkawire.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from ..topic_partition import TopicPartition
from .assignor_base import Assignor, java_string_key, partition_key

__all__ = ["Subscription", "Assignment", "RangeAssignor", "RoundRobinAssignor", "ASSIGNORS", "get_assignor", "Assignor",
           "encode_subscription", "decode_subscription", "encode_assignment", "decode_assignment",
           "SUBSCRIPTION_VERSION", "ASSIGNMENT_VERSION", "CONSUMER_PROTOCOL_TYPE"]

CONSUMER_PROTOCOL_TYPE = "consumer"  # JoinGroup ProtocolType of every consumer group
SUBSCRIPTION_VERSION = ConsumerProtocolSubscription.VALID_VERSIONS[1]
ASSIGNMENT_VERSION = ConsumerProtocolAssignment.VALID_VERSIONS[1]
_VERSION = struct.Struct(">h")


# ---- payloads ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Subscription:
    """What a member sends in JoinGroup: its topics, plus the fields later versions added.

    ``version`` is the version the bytes were written at (how they were decoded); ``owned_partitions``
    is empty for the eager protocol, which gives up every partition before joining."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = SUBSCRIPTION_VERSION


@dataclass(frozen=True)
class Assignment:
    """What a member receives in SyncGroup: its partitions, sorted by (topic, partition)."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None
    version: int = ASSIGNMENT_VERSION


def encode_subscription(subscription: Subscription | Iterable[str], version: int = SUBSCRIPTION_VERSION) -> bytes:
    """JoinGroup protocol metadata for ``subscription`` (a Subscription or just its topics)."""
    if not isinstance(subscription, Subscription):
        subscription = Subscription(tuple(subscription))
    _check_version(version, ConsumerProtocolSubscription)
    owned = _grouped(subscription.owned_partitions) if version >= 1 else ()
    message = ConsumerProtocolSubscription(
        topics=list(subscription.topics), user_data=subscription.user_data,
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition(topic=topic, partitions=partitions)
                          for topic, partitions in owned],
        generation_id=subscription.generation_id if version >= 2 else -1,
        rack_id=subscription.rack_id if version >= 3 else None)
    return _VERSION.pack(version) + message.encode(version)


def decode_subscription(data) -> Subscription:
    """A member's JoinGroup metadata; DecodeError when the bytes are not a consumer subscription."""
    version, message = _decode(data, ConsumerProtocolSubscription, "subscription")
    owned = tuple(TopicPartition(entry.topic, partition)
                  for entry in message.owned_partitions for partition in entry.partitions)
    return Subscription(topics=tuple(message.topics), user_data=_bytes_or_none(message.user_data),
                        owned_partitions=owned, generation_id=message.generation_id, rack_id=message.rack_id,
                        version=version)


def encode_assignment(partitions: Iterable[TopicPartition], user_data: bytes | None = None,
                      version: int = ASSIGNMENT_VERSION) -> bytes:
    """SyncGroup assignment bytes for one member, topics in name order and partitions ascending."""
    _check_version(version, ConsumerProtocolAssignment)
    message = ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=numbers)
                             for topic, numbers in _grouped(partitions)],
        user_data=user_data)
    return _VERSION.pack(version) + message.encode(version)


def decode_assignment(data) -> Assignment:
    """A member's SyncGroup assignment. Empty bytes are an empty assignment: the coordinator sends them to
    a member the leader gave nothing (Java reads them the same way)."""
    if len(data) == 0:
        return Assignment(())
    version, message = _decode(data, ConsumerProtocolAssignment, "assignment")
    partitions = sorted({TopicPartition(entry.topic, partition)
                         for entry in message.assigned_partitions for partition in entry.partitions},
                        key=partition_key)
    return Assignment(tuple(partitions), _bytes_or_none(message.user_data), version)


def _decode(data, cls, what: str):
    if len(data) < 2:
        raise DecodeError(f"consumer protocol {what} of {len(data)} bytes has no version", 0, [cls.NAME])
    version = _VERSION.unpack_from(data, 0)[0]
    if version < 0:
        raise DecodeError(f"consumer protocol {what} has negative version {version}", 0, [cls.NAME])
    # Newer versions only append fields: read them as our newest and ignore the rest, as Java does.
    readable = min(version, cls.VALID_VERSIONS[1])
    message, _end = cls.decode_from(memoryview(data).cast("B")[2:], readable)
    return version, message


def _check_version(version: int, cls) -> None:
    low, high = cls.VALID_VERSIONS
    if not low <= version <= high:
        raise ValueError(f"{cls.NAME} version {version} is not in {low}-{high}")


def _bytes_or_none(value) -> bytes | None:
    return None if value is None else bytes(value)


def _grouped(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, set[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, set()).add(partition)
    return [(topic, sorted(by_topic[topic])) for topic in sorted(by_topic, key=java_string_key)]


# ---- assignors --------------------------------------------------------------------------------------

class RangeAssignor(Assignor):
    """Per topic: its partitions in order, split into contiguous ranges over the members subscribed to
    it in member order; the first ``partitions % members`` members get one extra."""

    name = "range"

    def _assign(self, partitions_per_topic, topics_of, members):
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in members}
        for topic in sorted({t for topics in topics_of.values() for t in topics}, key=java_string_key):
            count = partitions_per_topic.get(topic, 0)
            consumers = [member for member in members if topic in topics_of[member]]
            if not count or not consumers:
                continue
            per_member, extra = divmod(count, len(consumers))
            start = 0
            for index, member in enumerate(consumers):
                length = per_member + (1 if index < extra else 0)
                assignment[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
                start += length
        return assignment


class RoundRobinAssignor(Assignor):
    """All subscribed partitions sorted by (topic, partition), dealt to the members in member order,
    skipping a member not subscribed to the partition's topic."""

    name = "roundrobin"

    def _assign(self, partitions_per_topic, topics_of, members):
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in members}
        topics = sorted({t for topics in topics_of.values() for t in topics}, key=java_string_key)
        dealer = itertools.cycle(members)
        for topic in topics:
            # Every topic here has at least one subscriber, so the skipping below ends.
            for partition in range(partitions_per_topic.get(topic, 0)):
                member = next(dealer)
                while topic not in topics_of[member]:
                    member = next(dealer)
                assignment[member].append(TopicPartition(topic, partition))
        return assignment


def _registry() -> dict[str, Assignor]:
    from .sticky_assignor import CooperativeStickyAssignor, StickyAssignor  # (they build on this module)
    return {assignor.name: assignor for assignor in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor(),
                                                     CooperativeStickyAssignor())}


ASSIGNORS: dict[str, Assignor] = _registry()


def get_assignor(name: str) -> Assignor:
    """The assignor called ``name`` (as in partition.assignment.strategy); ValueError for an unknown one."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise ValueError(f"unknown partition assignor {name!r} (known: {', '.join(ASSIGNORS)})") from None

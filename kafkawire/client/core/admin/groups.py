"""Consumer groups for the admin client: listings and descriptions of both protocols (classic groups through
DescribeGroups, KIP-848 groups through ConsumerGroupDescribe, as confluent-kafka's AdminClient does), their
deletion (DeleteGroups) and the deletion of their offsets (OffsetDelete). Committed offsets are read and
written with the consumer's own requests (``core.group.requests``)."""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkawire.error_codes import ErrorCode
from kafkawire.errors import DecodeError
from kafkawire.messages import (
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, DeleteGroupsRequest, DeleteGroupsResponse,
    DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest, ListGroupsResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
)

from ...errors import KafkaError
from ..group.assignors import CONSUMER_PROTOCOL_TYPE, decode_assignment
from ..group.protocol import OffsetAndMetadata
from ..group.requests import read_offset_fetch
from ..topic_partition import TopicPartition
from .errors import Retry, error_for, outcome_of
from .topics import Node, operations

__all__ = ["ConsumerGroupState", "ConsumerGroupType", "ConsumerGroupListing", "ListConsumerGroupsResult",
           "MemberAssignment", "MemberDescription", "ConsumerGroupDescription", "ConsumerGroupTopicPartitions",
           "list_groups_request", "read_list_groups", "describe_groups_request", "read_describe_groups",
           "consumer_group_describe_request", "read_consumer_group_describe", "delete_groups_request",
           "read_delete_groups", "offset_delete_request", "read_offset_delete", "OFFSET_FETCH_MAX_VERSION",
           "OFFSET_COMMIT_MAX_VERSION", "offset_fetch_request", "group_outcome", "read_group_offsets",
           "offsets_to_commit"]

E = ErrorCode


class ConsumerGroupState(enum.Enum):
    """A group's state, as ListGroups and the describe APIs name it."""

    UNKNOWN = "Unknown"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    EMPTY = "Empty"
    ASSIGNING = "Assigning"  # KIP-848 groups
    RECONCILING = "Reconciling"

    @classmethod
    def of(cls, text: str | None) -> ConsumerGroupState:
        for state in cls:
            if text is not None and state.value.lower() == text.lower():
                return state
        return cls.UNKNOWN


class ConsumerGroupType(enum.Enum):
    UNKNOWN = "Unknown"
    CONSUMER = "Consumer"  # KIP-848
    CLASSIC = "Classic"

    @classmethod
    def of(cls, text: str | None) -> ConsumerGroupType:
        for kind in cls:
            if text is not None and kind.value.lower() == text.lower():
                return kind
        return cls.UNKNOWN


@dataclass(frozen=True)
class ConsumerGroupListing:
    group_id: str
    is_simple_consumer_group: bool  # no members ever joined: offsets committed by id only
    state: ConsumerGroupState = ConsumerGroupState.UNKNOWN
    type: ConsumerGroupType = ConsumerGroupType.UNKNOWN


@dataclass(frozen=True)
class ListConsumerGroupsResult:
    valid: tuple[ConsumerGroupListing, ...]
    errors: tuple[Exception, ...] = ()  # brokers that could not list theirs


@dataclass(frozen=True)
class MemberAssignment:
    topic_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    assignment: MemberAssignment
    group_instance_id: str | None = None
    target_assignment: MemberAssignment | None = None  # KIP-848 groups: where reconciliation is heading


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    is_simple_consumer_group: bool
    members: tuple[MemberDescription, ...]
    partition_assignor: str
    state: ConsumerGroupState
    coordinator: Node | None
    authorized_operations: tuple[int, ...] | None = None
    type: ConsumerGroupType = ConsumerGroupType.UNKNOWN


@dataclass
class ConsumerGroupTopicPartitions:
    """A group and its partitions: the ones to list (None: every partition with a committed offset), or a
    mapping of partition to offset to alter; results come back as a mapping to OffsetAndMetadata (None
    where nothing is committed)."""

    group_id: str
    topic_partitions: (Mapping[TopicPartition, OffsetAndMetadata | int | None] | Sequence[TopicPartition]
                       | None) = None


# ---- ListGroups --------------------------------------------------------------------------------------------

def list_groups_request(version: int, states: Iterable[ConsumerGroupState],
                        types: Iterable[ConsumerGroupType]) -> ListGroupsRequest:
    state_names = [ConsumerGroupState(s).value for s in states]
    type_names = [ConsumerGroupType(t).value.lower() for t in types]
    if state_names and version < 4:
        raise ValueError("filtering groups by state needs ListGroups v4 (Kafka 2.6)")
    if type_names and version < 5:
        raise ValueError("filtering groups by type needs ListGroups v5 (Kafka 3.8)")
    return ListGroupsRequest(states_filter=state_names, types_filter=type_names)


def read_list_groups(response: ListGroupsResponse) -> list[ConsumerGroupListing] | KafkaError:
    """The consumer groups listed (other protocol types, Connect's say, left out), or the broker's error."""
    if response.error_code:
        return error_for(response.error_code, None, "ListGroups")
    listings = []
    for group in response.groups:
        kind = ConsumerGroupType.of(group.group_type) if group.group_type else ConsumerGroupType.UNKNOWN
        if group.protocol_type not in (CONSUMER_PROTOCOL_TYPE, "") and kind != ConsumerGroupType.CONSUMER:
            continue
        if kind == ConsumerGroupType.UNKNOWN and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            kind = ConsumerGroupType.CLASSIC
        listings.append(ConsumerGroupListing(group.group_id, group.protocol_type == "" and
                                             kind != ConsumerGroupType.CONSUMER,
                                             ConsumerGroupState.of(group.group_state), kind))
    return listings


# ---- DescribeGroups (classic) and ConsumerGroupDescribe (KIP-848) ------------------------------------------

def describe_groups_request(version: int, group_ids: Sequence[str], authorized_operations: bool
                            ) -> DescribeGroupsRequest:
    return DescribeGroupsRequest(groups=list(group_ids),
                                 include_authorized_operations=authorized_operations and version >= 3)


def _assignment(data: bytes | bytearray | memoryview) -> MemberAssignment:
    try:
        return MemberAssignment(decode_assignment(data).partitions)
    except DecodeError:
        return MemberAssignment()  # a member of another protocol, or bytes this client cannot read


def read_describe_groups(response: DescribeGroupsResponse, coordinator: Node | None) -> dict[str, object]:
    """group id -> ConsumerGroupDescription, a Retry, or the group's error."""
    found: dict[str, object] = {}
    for group in response.groups:
        if group.error_code == E.GROUP_ID_NOT_FOUND:
            found[group.group_id] = error_for(group.error_code, group.error_message, f"group {group.group_id!r}")
            continue
        failure = outcome_of(group.error_code, group.error_message, f"group {group.group_id!r}", coordinator=True)
        if failure is not None:
            found[group.group_id] = failure
            continue
        consumer = group.protocol_type == CONSUMER_PROTOCOL_TYPE
        members = tuple(MemberDescription(
            m.member_id, m.client_id, m.client_host,
            _assignment(m.member_assignment) if consumer else MemberAssignment(), m.group_instance_id)
            for m in group.members)
        found[group.group_id] = ConsumerGroupDescription(
            group.group_id, group.protocol_type == "", members, group.protocol_data,
            ConsumerGroupState.of(group.group_state), coordinator, operations(group.authorized_operations),
            ConsumerGroupType.CLASSIC)
    return found


def consumer_group_describe_request(group_ids: Sequence[str], authorized_operations: bool
                                    ) -> ConsumerGroupDescribeRequest:
    return ConsumerGroupDescribeRequest(group_ids=list(group_ids), include_authorized_operations=authorized_operations)


def _partitions(assignment: ConsumerGroupDescribeResponse.Assignment) -> MemberAssignment:
    return MemberAssignment(tuple(sorted(TopicPartition(t.topic_name, p)
                                         for t in assignment.topic_partitions for p in t.partitions)))


def read_consumer_group_describe(response: ConsumerGroupDescribeResponse, coordinator: Node | None
                                 ) -> dict[str, object]:
    """group id -> ConsumerGroupDescription, a Retry, an error, or ``"classic"`` where the coordinator has no
    KIP-848 group of that id (GROUP_ID_NOT_FOUND): it may be a classic group, which Java's and librdkafka's
    admin clients then describe with DescribeGroups."""
    found: dict[str, object] = {}
    for group in response.groups:
        if group.error_code == E.GROUP_ID_NOT_FOUND:
            found[group.group_id] = "classic"
            continue
        failure = outcome_of(group.error_code, group.error_message, f"group {group.group_id!r}", coordinator=True)
        if failure is not None:
            found[group.group_id] = failure
            continue
        members = tuple(MemberDescription(m.member_id, m.client_id, m.client_host, _partitions(m.assignment),
                                          m.instance_id, _partitions(m.target_assignment))
                        for m in group.members)
        found[group.group_id] = ConsumerGroupDescription(
            group.group_id, False, members, group.assignor_name, ConsumerGroupState.of(group.group_state),
            coordinator, operations(group.authorized_operations), ConsumerGroupType.CONSUMER)
    return found


# ---- DeleteGroups and OffsetDelete --------------------------------------------------------------------------

def delete_groups_request(group_ids: Sequence[str]) -> DeleteGroupsRequest:
    return DeleteGroupsRequest(groups_names=list(group_ids))


def read_delete_groups(response: DeleteGroupsResponse) -> dict[str, object]:
    return {r.group_id: outcome_of(r.error_code, None, f"group {r.group_id!r}", coordinator=True)
            for r in response.results}


def offset_delete_request(group_id: str, partitions: Iterable[TopicPartition]) -> OffsetDeleteRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return OffsetDeleteRequest(group_id=group_id, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name=topic, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in numbers])
        for topic, numbers in by_topic.items()])


def read_offset_delete(response: OffsetDeleteResponse, group_id: str,
                       partitions: Iterable[TopicPartition]) -> object:
    """None when every partition's offset was deleted; a Retry or the group's error; else the first
    partition's error (GROUP_SUBSCRIBED_TO_TOPIC, UNKNOWN_TOPIC_OR_PARTITION...), as Java fails the group."""
    top = outcome_of(response.error_code, None, f"group {group_id!r}", coordinator=True)
    if top is not None:
        return top
    wanted = set(partitions)
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if tp in wanted and p.error_code:
                return error_for(p.error_code, None, f"group {group_id!r} partition {tp}")
    return None


# ---- committed offsets (OffsetFetch and OffsetCommit, at most the versions that name topics) ---------------

OFFSET_FETCH_MAX_VERSION = 9  # v10 answers by topic id only
OFFSET_COMMIT_MAX_VERSION = 9


def offset_fetch_request(version: int, group_id: str, partitions: Sequence[TopicPartition] | None,
                         require_stable: bool) -> OffsetFetchRequest:
    """Committed offsets of ``partitions`` (None: of every partition the group has committed)."""
    topics: dict[str, list[int]] | None = None
    if partitions is not None:
        topics = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
    stable = require_stable and version >= 7
    if version >= 8:
        return OffsetFetchRequest(require_stable=stable, groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group_id, topics=None if topics is None else [OffsetFetchRequest.OffsetFetchRequestTopics(
                name=topic, partition_indexes=numbers) for topic, numbers in topics.items()])])
    return OffsetFetchRequest(group_id=group_id, require_stable=stable, topics=None if topics is None else [
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=numbers)
        for topic, numbers in topics.items()])


def group_outcome(codes: Iterable[int], group_id: str) -> object:
    """None for no error; a Retry where a retry may cure one (the coordinator moved, an offset not yet
    stable); else the group's error."""
    codes = set(codes)
    for code in codes:
        failure = outcome_of(code, None, f"group {group_id!r}", coordinator=True)
        if isinstance(failure, Retry):
            return failure
    if codes:
        return error_for(min(codes), None, f"group {group_id!r}")
    return None


def read_group_offsets(response: OffsetFetchResponse, version: int, group_id: str,
                       partitions: Sequence[TopicPartition] | None) -> object:
    """ConsumerGroupTopicPartitions with each partition's OffsetAndMetadata (None: nothing committed), or
    a Retry, or the group's error."""
    codes, offsets = read_offset_fetch(response, version, group_id, partitions or (), {})
    failure = group_outcome(codes, group_id)
    if failure is not None:
        return failure
    if partitions is not None:
        offsets = {tp: offsets.get(tp) for tp in partitions}
    else:
        offsets = {tp: value for tp, value in offsets.items() if value is not None}
    return ConsumerGroupTopicPartitions(group_id, offsets)


def offsets_to_commit(offsets: Mapping[TopicPartition, OffsetAndMetadata | int | None]
                      ) -> dict[TopicPartition, OffsetAndMetadata]:
    committed = {}
    for tp, value in offsets.items():
        if value is None:
            raise ValueError(f"partition {tp}: an offset to commit is needed")
        committed[tp] = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
        if committed[tp].offset < 0:
            raise ValueError(f"partition {tp}: offset {committed[tp].offset} is negative")
    return committed

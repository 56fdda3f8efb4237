"""Share groups (KIP-932) for the admin client, as Java's Admin has them: listings (ListGroups of the type
"share"), descriptions (ShareGroupDescribe), the share partitions' start offsets and lag
(DescribeShareGroupOffsets), moving them (AlterShareGroupOffsets) and forgetting them
(DeleteShareGroupOffsets). Deleting share groups is DeleteGroups (``groups``)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import (
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
    ListGroupsRequest, ListGroupsResponse, ShareGroupDescribeRequest, ShareGroupDescribeResponse,
)

from ...errors import KafkaError
from ..topic_partition import TopicPartition
from .errors import Retry, error_for, outcome_of
from .groups import ConsumerGroupState, MemberAssignment
from .topics import Node, operations

__all__ = ["SHARE_GROUP_TYPE", "ShareGroupListing", "ListShareGroupsResult", "ShareMemberDescription",
           "ShareGroupDescription", "SharePartitionOffsetInfo", "list_share_groups_request",
           "read_list_share_groups", "share_group_describe_request", "read_share_group_describe",
           "describe_share_group_offsets_request", "read_describe_share_group_offsets",
           "alter_share_group_offsets_request", "read_alter_share_group_offsets",
           "delete_share_group_offsets_request", "read_delete_share_group_offsets"]

K = TypeVar("K")

SHARE_GROUP_TYPE = "share"  # ListGroups' group type and protocol type of share groups
_LIST_GROUPS_TYPES_VERSION = 5  # the first ListGroups with TypesFilter (KIP-848)


@dataclass(frozen=True)
class ShareGroupListing:
    group_id: str
    state: ConsumerGroupState = ConsumerGroupState.UNKNOWN  # Empty, Stable or Dead


@dataclass(frozen=True)
class ListShareGroupsResult:
    valid: tuple[ShareGroupListing, ...]
    errors: tuple[Exception, ...] = ()  # brokers that could not list theirs


@dataclass(frozen=True)
class ShareMemberDescription:
    member_id: str
    client_id: str
    host: str
    assignment: MemberAssignment  # every member may be given every partition (Kafka's SimpleAssignor)
    rack_id: str | None = None
    member_epoch: int = 0


@dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    members: tuple[ShareMemberDescription, ...]
    partition_assignor: str
    state: ConsumerGroupState
    coordinator: Node | None
    authorized_operations: tuple[int, ...] | None = None
    group_epoch: int = 0
    target_assignment_epoch: int = 0


@dataclass(frozen=True)
class SharePartitionOffsetInfo:
    """A share partition's start offset (the first record not yet acknowledged or archived), the leader
    epoch it was recorded in (None if unknown) and its lag (None if the broker does not report it)."""

    start_offset: int
    leader_epoch: int | None = None
    lag: int | None = None


# ---- ListGroups (type "share") ------------------------------------------------------------------------------

def list_share_groups_request(version: int, states: Iterable[ConsumerGroupState]) -> ListGroupsRequest:
    if version < _LIST_GROUPS_TYPES_VERSION:
        raise ValueError("listing share groups needs ListGroups v5 (Kafka 3.8)")
    return ListGroupsRequest(states_filter=[ConsumerGroupState(s).value for s in states],
                             types_filter=[SHARE_GROUP_TYPE])


def read_list_share_groups(response: ListGroupsResponse) -> list[ShareGroupListing] | KafkaError:
    """The share groups listed, or the broker's error."""
    if response.error_code:
        return error_for(response.error_code, None, "ListGroups")
    return [ShareGroupListing(group.group_id, ConsumerGroupState.of(group.group_state))
            for group in response.groups if group.group_type.lower() == SHARE_GROUP_TYPE]


# ---- ShareGroupDescribe -------------------------------------------------------------------------------------

def share_group_describe_request(group_ids: Sequence[str], authorized_operations: bool
                                 ) -> ShareGroupDescribeRequest:
    return ShareGroupDescribeRequest(group_ids=list(group_ids), include_authorized_operations=authorized_operations)


def read_share_group_describe(response: ShareGroupDescribeResponse, coordinator: Node | None
                              ) -> dict[str, object]:
    """group id -> ShareGroupDescription, a Retry, or the group's error (GROUP_ID_NOT_FOUND for an unknown
    group or one of another type)."""
    found: dict[str, object] = {}
    for group in response.groups:
        failure = outcome_of(group.error_code, group.error_message, f"group {group.group_id!r}", coordinator=True)
        if failure is not None:
            found[group.group_id] = failure
            continue
        members = tuple(ShareMemberDescription(
            m.member_id, m.client_id, m.client_host,
            MemberAssignment(tuple(sorted(TopicPartition(t.topic_name, p)
                                          for t in m.assignment.topic_partitions for p in t.partitions))),
            m.rack_id, m.member_epoch) for m in group.members)
        found[group.group_id] = ShareGroupDescription(
            group.group_id, members, group.assignor_name, ConsumerGroupState.of(group.group_state), coordinator,
            operations(group.authorized_operations), group.group_epoch, group.assignment_epoch)
    return found


# ---- DescribeShareGroupOffsets ------------------------------------------------------------------------------

def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return topics


def describe_share_group_offsets_request(group_id: str, partitions: Sequence[TopicPartition] | None
                                         ) -> DescribeShareGroupOffsetsRequest:
    """The share partitions of one group: ``partitions``, or None for every one it has state for."""
    Request = DescribeShareGroupOffsetsRequest
    topics = None if partitions is None else [
        Request.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=numbers)
        for topic, numbers in _by_topic(partitions).items()]
    return Request(groups=[Request.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=topics)])


def read_describe_share_group_offsets(response: DescribeShareGroupOffsetsResponse, version: int,
                                      group_id: str) -> object:
    """``{partition: SharePartitionOffsetInfo, or None where the group has no state}``, a Retry, or the
    group's error (GROUP_ID_NOT_FOUND) or the first partition's (UNKNOWN_TOPIC_OR_PARTITION...)."""
    for group in response.groups:
        if group.group_id != group_id:
            continue
        failure = outcome_of(group.error_code, group.error_message, f"group {group_id!r}", coordinator=True)
        if failure is not None:
            return failure
        offsets: dict[TopicPartition, SharePartitionOffsetInfo | None] = {}
        for topic in group.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                if p.error_code:
                    return error_for(p.error_code, p.error_message, f"group {group_id!r} partition {tp}")
                offsets[tp] = None if p.start_offset < 0 else SharePartitionOffsetInfo(
                    p.start_offset, p.leader_epoch if p.leader_epoch >= 0 else None,
                    p.lag if version >= 1 and p.lag >= 0 else None)
        return offsets
    return error_for(ErrorCode.UNKNOWN_SERVER_ERROR, "the response has no such group", f"group {group_id!r}")


# ---- AlterShareGroupOffsets and DeleteShareGroupOffsets -----------------------------------------------------

def alter_share_group_offsets_request(group_id: str, offsets: Mapping[TopicPartition, int]
                                      ) -> AlterShareGroupOffsetsRequest:
    Request = AlterShareGroupOffsetsRequest
    topics: dict[str, list[AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition]] = {}
    for tp, offset in offsets.items():
        topics.setdefault(tp.topic, []).append(
            Request.AlterShareGroupOffsetsRequestPartition(partition_index=tp.partition, start_offset=offset))
    return Request(group_id=group_id, topics=[Request.AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=partitions) for topic, partitions in topics.items()])


def _per_resource(group_id: str, code: int, message: str | None, wanted: Iterable[K],
                  answered: Mapping[K, Any]) -> Retry | dict[K, object]:
    """Each wanted resource's outcome from its ``answered`` entry (error_code, error_message): None or its
    error; the group's error (``code``, such as NON_EMPTY_GROUP) for each; or a Retry for the group."""
    top = outcome_of(code, message, f"group {group_id!r}", coordinator=True)
    if isinstance(top, Retry):
        return top
    found: dict[K, object] = {}
    for key in wanted:
        entry = answered.get(key)
        found[key] = (top if top is not None
                      else error_for(ErrorCode.UNKNOWN_SERVER_ERROR, "not in the answer", key) if entry is None
                      else error_for(entry.error_code, entry.error_message, f"group {group_id!r}: {key}")
                      if entry.error_code else None)
    return found


def read_alter_share_group_offsets(response: AlterShareGroupOffsetsResponse, group_id: str,
                                   partitions: Iterable[TopicPartition]) -> Retry | dict[TopicPartition, object]:
    """partition -> None or its error (the group's, such as NON_EMPTY_GROUP, for each); or a Retry."""
    answered = {TopicPartition(t.topic_name, p.partition_index): p for t in response.responses for p in t.partitions}
    return _per_resource(group_id, response.error_code, response.error_message, partitions, answered)


def delete_share_group_offsets_request(group_id: str, topics: Sequence[str]) -> DeleteShareGroupOffsetsRequest:
    Request = DeleteShareGroupOffsetsRequest
    return Request(group_id=group_id, topics=[Request.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)
                                              for topic in topics])


def read_delete_share_group_offsets(response: DeleteShareGroupOffsetsResponse, group_id: str,
                                    topics: Iterable[str]) -> Retry | dict[str, object]:
    """topic -> None or its error (the group's, such as NON_EMPTY_GROUP, for each); or a Retry."""
    answered = {t.topic_name: t for t in response.responses}
    return _per_resource(group_id, response.error_code, response.error_message, topics, answered)

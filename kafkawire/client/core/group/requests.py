"""The group requests' bodies at each version, and what their answers say: plain functions, no state.
The group member (``membership``, ``member``) decides what to send and when."""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, cast

from kafkawire.error_codes import ErrorCode
from kafkawire.errors import DecodeError
from kafkawire.messages import (
    FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest,
)

from ..topic_partition import TopicPartition
from .assignors import (
    ASSIGNMENT_VERSION, ASSIGNORS, CONSUMER_PROTOCOL_TYPE, Subscription, decode_subscription, encode_assignment,
    encode_subscription,
)
from .protocol import TOPIC_ID_VERSION, Generation, OffsetAndMetadata

__all__ = ["find_coordinator_request", "read_find_coordinator", "join_group_request", "sync_group_request",
           "LeaderAssignment", "leader_assignment", "heartbeat_request", "leave_group_request",
           "offset_commit_request", "commit_error_codes", "offset_fetch_request", "read_offset_fetch"]

E = ErrorCode
_ZERO_UUID = uuid.UUID(int=0)
_REASON_MAX_CHARS = 255  # JoinGroupRequest.maybeTruncateReason


# ---- finding the coordinator -----------------------------------------------------------------------------

def find_coordinator_request(version: int, key: str, key_type: int = 0) -> FindCoordinatorRequest:
    """FindCoordinator for ``key``: a group id (key_type 0) or a transactional id (1, from v1)."""
    if version >= 4:
        return FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
    return FindCoordinatorRequest(key=key, key_type=key_type)


def read_find_coordinator(response: FindCoordinatorResponse, version: int,
                          group_id: str) -> tuple[int, int, str, int, str | None]:
    """(error code, node id, host, port, error message) for ``group_id`` (or the transactional id asked for)."""
    if version >= 4:
        entry = next((c for c in response.coordinators if c.key == group_id), None)
        if entry is None:
            return E.COORDINATOR_NOT_AVAILABLE, -1, "", -1, "group missing"
        return entry.error_code, entry.node_id, entry.host, entry.port, entry.error_message
    return response.error_code, response.node_id, response.host, response.port, response.error_message


# ---- joining -----------------------------------------------------------------------------------------------

def join_group_request(version: int, group_id: str, generation: Generation, group_instance_id: str | None,
                       topics: Sequence[str], strategies: Sequence[str], *, session_timeout_ms: int,
                       rebalance_timeout_ms: int, rack: str, reason: str, owned: Sequence[TopicPartition] = (),
                       last_assignment: tuple[Sequence[TopicPartition], int] = ((), -1)) -> JoinGroupRequest:
    """JoinGroup offering one protocol per assignor in ``strategies``, each with the subscription: the
    partitions the member still owns (none after an eager revocation), its generation, and the user data
    that assignor writes from the member's last assignment and its generation (``last_assignment``)."""
    protocols = []
    for name in strategies:
        metadata = encode_subscription(Subscription(
            topics=tuple(topics), user_data=ASSIGNORS[name].user_data(*last_assignment), owned_partitions=tuple(owned),
            generation_id=generation.generation_id, rack_id=rack or None))
        protocols.append(JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata))
    return JoinGroupRequest(
        group_id=group_id, session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms if version >= 1 else -1, member_id=generation.member_id,
        group_instance_id=group_instance_id, protocol_type=CONSUMER_PROTOCOL_TYPE, protocols=protocols,
        reason=reason[:_REASON_MAX_CHARS] if version >= 8 else None)


def sync_group_request(version: int, group_id: str, response: JoinGroupResponse, group_instance_id: str | None,
                       assignments: list[SyncGroupRequest.SyncGroupRequestAssignment]) -> SyncGroupRequest:
    """SyncGroup for the generation ``response`` (JoinGroup's answer) made."""
    return SyncGroupRequest(
        group_id=group_id, generation_id=response.generation_id, member_id=response.member_id,
        group_instance_id=group_instance_id, protocol_type=CONSUMER_PROTOCOL_TYPE if version >= 5 else None,
        protocol_name=response.protocol_name if version >= 5 else None, assignments=assignments)


class LeaderAssignment(NamedTuple):
    """What the group leader sends in SyncGroup, and what it assigned with."""

    assignments: list[SyncGroupRequest.SyncGroupRequestAssignment]
    group_topics: frozenset[str]  # every member's topics
    counts: dict[str, int | None]  # the partition counts it assigned with (None: unknown)
    undecodable: list[tuple[str, DecodeError]]  # members whose subscription does not decode: given nothing


def leader_assignment(protocol: str, members: Iterable[JoinGroupResponse.JoinGroupResponseMember],
                      partition_counts: Mapping[str, int]) -> LeaderAssignment:
    """Run the assignor ``protocol`` over every member's subscription; each member's assignment is written
    at the version of its own subscription (at most ours)."""
    subscriptions: dict[str, Subscription] = {}
    instance_ids: dict[str, str | None] = {}
    versions: dict[str, int] = {}
    undecodable: list[tuple[str, DecodeError]] = []
    for member in members:
        try:
            subscription = decode_subscription(member.metadata)
            subscriptions[member.member_id] = subscription
            versions[member.member_id] = min(subscription.version, ASSIGNMENT_VERSION)
        except DecodeError as exc:  # assign it nothing rather than stall the whole group
            subscriptions[member.member_id] = Subscription(())
            versions[member.member_id] = 0
            undecodable.append((member.member_id, exc))
        instance_ids[member.member_id] = member.group_instance_id
    topics = frozenset(t for wanted in subscriptions.values() for t in wanted.topics)
    counts = {topic: partition_counts.get(topic) for topic in topics}
    known = {topic: count for topic, count in counts.items() if count is not None}
    result = ASSIGNORS[protocol].assign_subscriptions(known, subscriptions, instance_ids)
    assignments = [SyncGroupRequest.SyncGroupRequestAssignment(
        member_id=member_id, assignment=encode_assignment(partitions, version=versions[member_id]))
        for member_id, partitions in result.items()]
    return LeaderAssignment(assignments, topics, counts, undecodable)


# ---- staying and leaving -----------------------------------------------------------------------------------

def heartbeat_request(group_id: str, generation: Generation, group_instance_id: str | None) -> HeartbeatRequest:
    return HeartbeatRequest(group_id=group_id, generation_id=generation.generation_id,
                            member_id=generation.member_id, group_instance_id=group_instance_id)


def leave_group_request(version: int, group_id: str, member_id: str, group_instance_id: str | None,
                        reason: str) -> LeaveGroupRequest:
    if version >= 3:
        return LeaveGroupRequest(group_id=group_id, members=[LeaveGroupRequest.MemberIdentity(
            member_id=member_id, group_instance_id=group_instance_id, reason=reason if version >= 5 else None)])
    return LeaveGroupRequest(group_id=group_id, member_id=member_id)


# ---- offsets -----------------------------------------------------------------------------------------------

def offset_commit_request(version: int, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                          generation: Generation | None, group_instance_id: str | None,
                          topic_ids: Mapping[str, uuid.UUID]) -> OffsetCommitRequest:
    """OffsetCommit of ``offsets``; ``generation`` None outside group management (a plain commit)."""
    ids = topic_ids if version >= TOPIC_ID_VERSION else {}
    by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
    for tp, value in offsets.items():
        by_topic.setdefault(tp.topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=tp.partition, committed_offset=value.offset,
            committed_leader_epoch=value.leader_epoch if value.leader_epoch is not None and version >= 6 else -1,
            committed_metadata=value.metadata))
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation.generation_id if generation is not None else -1,
        member_id=generation.member_id if generation is not None else "",
        group_instance_id=group_instance_id if generation is not None and version >= 7 else None,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, topic_id=ids.get(topic, _ZERO_UUID),
                                                             partitions=partitions)
                for topic, partitions in by_topic.items()])


def commit_error_codes(response: OffsetCommitResponse) -> set[int]:
    """The partitions' error codes other than NONE."""
    return {ErrorCode.of(p.error_code) for t in response.topics for p in t.partitions} - {E.NONE}


def offset_fetch_request(version: int, group_id: str, partitions: Iterable[TopicPartition],
                         topic_ids: Mapping[str, uuid.UUID]) -> OffsetFetchRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    ids = topic_ids if version >= TOPIC_ID_VERSION else {}
    if version >= 8:
        return OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group_id, topics=[OffsetFetchRequest.OffsetFetchRequestTopics(
                name=topic, topic_id=ids.get(topic, _ZERO_UUID), partition_indexes=numbers)
                for topic, numbers in by_topic.items()])])
    return OffsetFetchRequest(group_id=group_id, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
        name=topic, partition_indexes=numbers) for topic, numbers in by_topic.items()])


def read_offset_fetch(response: OffsetFetchResponse, version: int, group_id: str,
                      partitions: Iterable[TopicPartition], topic_ids: Mapping[str, uuid.UUID]
                      ) -> tuple[set[int], dict[TopicPartition, OffsetAndMetadata | None]]:
    """The error codes in the answer (other than NONE), and the committed offsets it carries (None where
    nothing is committed)."""
    if version >= 8:
        group = next((g for g in response.groups if g.group_id == group_id), None)
        top = group.error_code if group is not None else E.UNKNOWN_SERVER_ERROR
        topics = cast("Sequence[Any]", group.topics if group is not None else ())  # (their type changes at v8)
    else:
        top = response.error_code if version >= 2 else E.NONE
        topics = cast("Sequence[Any]", response.topics)
    offsets: dict[TopicPartition, OffsetAndMetadata | None] = {}
    codes = {ErrorCode.of(top)} - {E.NONE}
    names = {topic_ids.get(tp.topic): tp.topic for tp in partitions}  # v10 answers by id
    for topic in topics:
        name = names.get(topic.topic_id) if version >= TOPIC_ID_VERSION else topic.name
        for p in topic.partitions:
            if p.error_code != E.NONE:
                codes.add(ErrorCode.of(p.error_code))
                continue
            if name is None:
                continue  # a topic id asked for by no partition
            epoch = p.committed_leader_epoch if version >= 5 and p.committed_leader_epoch >= 0 else None
            offsets[TopicPartition(name, p.partition_index)] = (
                None if p.committed_offset < 0 else OffsetAndMetadata(p.committed_offset, p.metadata or "", epoch))
    return codes, offsets

"""DeleteGroups and OffsetDelete over the group coordinator (classic, KIP-848 consumer and KIP-1071
streams groups), as Kafka's ``GroupCoordinator.handleDeleteGroups`` / ``handleDeleteOffsets``: only an
empty group is deleted, and a group's offsets are deleted except those of topics its consumers are
subscribed to (a streams group's: the topics its tasks read)."""
from __future__ import annotations

import re

from ...errors import DecodeError
from ...error_codes import ErrorCode
from ... import messages  # (each message's module loads on first use)
from .classic_state import DEAD, EMPTY

__all__ = ["delete_groups", "delete_offsets"]


def delete_groups(coordinator, group_ids: list[str]) -> list[tuple[str, int]]:
    """Each group id with its error: GROUP_ID_NOT_FOUND (unknown), NON_EMPTY_GROUP (members), or NONE
    once the group and its committed offsets are gone (for good: the deletion is written first)."""
    results = []
    for group_id in group_ids:
        error = coordinator.membership.status_error(group_id)
        group = coordinator.groups.get(group_id)
        consumer_group = coordinator.consumer.groups.get(group_id)
        streams_group = coordinator.streams_groups.get(group_id)
        known = (group is not None and group.state is not DEAD) or consumer_group is not None \
            or streams_group is not None or group_id in coordinator.store.offsets
        if error is None and not known:
            error = ErrorCode.GROUP_ID_NOT_FOUND
        elif error is None and ((group is not None and group.state not in (EMPTY, DEAD))
                                or (consumer_group is not None and consumer_group.members)
                                or (streams_group is not None and streams_group.members)):
            error = ErrorCode.NON_EMPTY_GROUP
        if error is None:
            try:
                coordinator.store.delete_group(group_id)
                coordinator.consumer.forget(group_id)
                if streams_group is not None:  # (else the streams coordinator may not even be built)
                    coordinator.streams.forget(group_id)
            except OSError:
                error = ErrorCode.KAFKA_STORAGE_ERROR
            else:
                if group is not None:
                    group.cancel_timers()
                    group.state = DEAD
                    del coordinator.groups[group_id]
        results.append((group_id, error if error is not None else ErrorCode.NONE))
    return results


def delete_offsets(coordinator, group_id: str, partitions: list[tuple[str, int]]) -> tuple[int, dict]:
    """(group error, {(topic, partition): error}): GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP for a group with
    members of another protocol than ``consumer``; GROUP_SUBSCRIBED_TO_TOPIC for the partitions of topics
    its consumers are subscribed to; the other partitions' offsets are deleted."""
    error = coordinator.membership.status_error(group_id)
    group = coordinator.groups.get(group_id)
    consumer_group = coordinator.consumer.groups.get(group_id)
    streams_group = coordinator.streams_groups.get(group_id)
    if error is None and (group is None or group.state is DEAD) and consumer_group is None \
            and streams_group is None and group_id not in coordinator.store.offsets:
        error = ErrorCode.GROUP_ID_NOT_FOUND
    if error is not None:
        return error, {}
    subscribed: set[str] | None = set()
    if consumer_group is not None and consumer_group.members:  # KIP-848: its members' subscriptions
        subscribed = _consumer_group_topics(coordinator, consumer_group)
    elif streams_group is not None and streams_group.members and streams_group.topology is not None:
        # KIP-1071: the topics its tasks read
        subscribed = {t for sub in streams_group.topology.subtopologies for t in sub.inputs()}
    elif group is not None and group.state not in (EMPTY, DEAD):
        if group.protocol_type != "consumer":
            return ErrorCode.NON_EMPTY_GROUP, {}
        subscribed = _subscribed_topics(group)
    errors = {}
    deletable = []
    for key in partitions:
        if subscribed is None or key[0] in subscribed:  # unknown subscriptions count as subscribed
            errors[key] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        else:
            errors[key] = ErrorCode.NONE
            deletable.append(key)
    try:
        coordinator.store.delete_offsets(group_id, deletable)
    except OSError:
        return ErrorCode.KAFKA_STORAGE_ERROR, {}
    return ErrorCode.NONE, errors


def _consumer_group_topics(coordinator, group) -> set[str]:
    """The topics a KIP-848 group's members subscribe to, by name or by regular expression."""
    names = set(coordinator.consumer.topics())
    topics: set[str] = set()
    for member in group.members.values():
        topics.update(member.subscribed_names)
        if member.subscribed_regex:
            pattern = re.compile(member.subscribed_regex)
            topics.update(name for name in names if pattern.fullmatch(name))
    return topics


def _subscribed_topics(group) -> set[str] | None:
    """The topics the group's consumers subscribe to (``GroupMetadata.computeSubscribedTopics``); None
    when a member's metadata cannot be read as a consumer subscription."""
    protocol = group.protocol_name
    if protocol is None:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        data = member.metadata(protocol)
        try:
            if len(data) < 2:
                return None
            version = int.from_bytes(data[:2], "big", signed=True)
            readable = min(max(version, 0), messages.ConsumerProtocolSubscription.VALID_VERSIONS[1])
            message, _ = messages.ConsumerProtocolSubscription.decode_from(memoryview(data).cast("B")[2:], readable)
        except (DecodeError, ValueError):
            return None
        topics.update(message.topics)
    return topics

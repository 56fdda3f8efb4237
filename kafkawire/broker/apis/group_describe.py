"""What ConsumerGroupDescribe (KIP-848) and ShareGroupDescribe (KIP-932) answer alike: each asked group
described, or its error (GROUP_AUTHORIZATION_FAILED without DESCRIBE on the group, GROUP_ID_NOT_FOUND for a
group of another type or none), and assignments named by topic id as well as by name."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from ...error_codes import ErrorCode
from ..groups.classic_state import _GROUP_AUTHORIZED_OPERATIONS, _NO_AUTHORIZED_OPERATIONS
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["describe_groups", "assigned_by_id"]

G = TypeVar("G")  # a group of the coordinator asked
D = TypeVar("D")  # its response's DescribedGroup


def describe_groups(state: BrokerState, context: RequestContext, group_ids: Iterable[str],
                    include_authorized_operations: bool, kind: str, groups: Mapping[str, G],
                    described: Callable[[G, int], D], failed: Callable[[str, int, str | None, int], D]) -> list[D]:
    """``described(group, operations)`` for each of ``group_ids`` in ``groups`` (the ``kind`` groups, such
    as "consumer" or "share"), else ``failed(group_id, error, message, operations)`` with Kafka's error and
    message. ``operations`` is the group's authorized operations, if asked for."""
    operations = _GROUP_AUTHORIZED_OPERATIONS if include_authorized_operations else _NO_AUTHORIZED_OPERATIONS
    answers = []
    for group_id in group_ids:
        group = groups.get(group_id)
        if not state.allowed(context, Operation.DESCRIBE, ResourceType.GROUP, group_id):
            answers.append(failed(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None, operations))
        elif group is None:
            other = state.groups.group_state(group_id) != "Dead"  # a group of another type has the id
            message = f"Group {group_id} is not a {kind} group." if other else f"Group {group_id} not found."
            answers.append(failed(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message, operations))
        else:
            answers.append(described(group, operations))
    return answers


def assigned_by_id(state: BrokerState, assignment: Mapping[str, Iterable[int]]
                   ) -> Iterator[tuple[uuid.UUID, str, list[int]]]:
    """(topic id, name, sorted partitions) for the topics of ``assignment`` that still exist."""
    for name, partitions in sorted(assignment.items()):
        topic = state.topics.get(name)
        if topic is not None and partitions:
            yield topic.topic_id, name, sorted(partitions)

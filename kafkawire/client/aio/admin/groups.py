"""The admin client's consumer group calls (a part of AsyncAdminClient, ``aio.admin``): listing groups on
every broker, and the rest sent to each group's coordinator (found with FindCoordinator, found again when
it moves), built and read by ``core.admin_groups``."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kafkawire.messages import (
    ConsumerGroupDescribeRequest, DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
)

from ...core.admin import groups
from ...core.admin.groups import (
    ConsumerGroupState, ConsumerGroupTopicPartitions, ConsumerGroupType, ListConsumerGroupsResult,
)
from ...core.group.requests import commit_error_codes, offset_commit_request
from ...core.topic_partition import TopicPartition
from ..connection import BrokerConnection
from .calls import AdminCalls, AdminPart, unique
from .router import GROUP

__all__ = ["GroupAdmin", "delete_groups"]

_CONSUMER_GROUP_DESCRIBE = ConsumerGroupDescribeRequest.API_KEY


class GroupAdmin(AdminPart):
    """list/describe/delete_consumer_groups and list/alter/delete_consumer_group_offsets."""

    async def list_consumer_groups(self, *, states: Iterable[ConsumerGroupState] = (),
                                   types: Iterable[ConsumerGroupType] = (),
                                   request_timeout: float | None = None) -> ListConsumerGroupsResult:
        """The consumer groups of every broker (ListGroups to each), optionally only those in ``states`` or
        of ``types`` (CLASSIC, CONSUMER); a broker that could not answer is in ``errors``."""
        states, types = list(states), list(types)
        valid, errors = await self._calls.on_every_broker(
            ListGroupsRequest.API_KEY, lambda version: groups.list_groups_request(version, states, types),
            groups.read_list_groups, request_timeout, "list_consumer_groups")
        return ListConsumerGroupsResult(tuple(valid), tuple(errors))

    async def describe_consumer_groups(self, group_ids: Sequence[str], *, request_timeout: float | None = None,
                                       include_authorized_operations: bool = False) -> dict[str, object]:
        """``{group id: ConsumerGroupDescription or exception}``: KIP-848 groups by ConsumerGroupDescribe
        where the coordinator serves it, classic groups by DescribeGroups."""
        async def send(connection: BrokerConnection, node: int, batch: list[str]) -> dict[str, object]:
            coordinator = self._calls.node(node)
            outcomes: dict[str, object] = {}
            classic = batch
            if _CONSUMER_GROUP_DESCRIBE in connection.api_versions:
                response = await connection.send(
                    groups.consumer_group_describe_request(batch, include_authorized_operations))
                outcomes = groups.read_consumer_group_describe(response, coordinator)
                classic = [g for g in batch if outcomes.get(g) == "classic"]
            if classic:
                version = connection.api_version(DescribeGroupsRequest.API_KEY)
                described = groups.describe_groups_request(version, classic, include_authorized_operations)
                outcomes.update(groups.read_describe_groups(await connection.send(described, version), coordinator))
            return outcomes

        async def attempt(pending: list[str]) -> dict[str, object]:
            return await self._router.per_coordinator(GROUP, pending, send)
        return await self._router.run(unique(group_ids, "group id"), attempt, self._calls.timeout_ms(request_timeout),
                                      "describe_consumer_groups")

    async def delete_consumer_groups(self, group_ids: Sequence[str], *, request_timeout: float | None = None
                                     ) -> dict[str, object]:
        """Delete empty groups and their offsets: ``{group id: None or exception}`` (NON_EMPTY_GROUP while
        members remain, GROUP_ID_NOT_FOUND)."""
        return await delete_groups(self._calls, group_ids, request_timeout, "delete_consumer_groups")

    async def list_consumer_group_offsets(self, requests: Sequence[ConsumerGroupTopicPartitions], *,
                                          require_stable: bool = False, request_timeout: float | None = None
                                          ) -> dict[str, object]:
        """Each group's committed offsets, of its ``topic_partitions`` (None: all it has):
        ``{group id: ConsumerGroupTopicPartitions or exception}``. With ``require_stable`` offsets of
        transactions not yet committed are waited for (UNSTABLE_OFFSET_COMMIT is retried)."""
        wanted = {r.group_id: None if r.topic_partitions is None else list(r.topic_partitions) for r in requests}
        unique((r.group_id for r in requests), "group id")

        async def send(connection: BrokerConnection, node: int, batch: list[str]) -> dict[str, object]:
            outcomes = {}
            version = connection.api_version(OffsetFetchRequest.API_KEY, 2, groups.OFFSET_FETCH_MAX_VERSION)
            for group_id in batch:
                request = groups.offset_fetch_request(version, group_id, wanted[group_id], require_stable)
                response = await connection.send(request, version)
                outcomes[group_id] = groups.read_group_offsets(response, version, group_id, wanted[group_id])
            return outcomes

        async def attempt(pending: list[str]) -> dict[str, object]:
            return await self._router.per_coordinator(GROUP, pending, send)
        return await self._router.run(list(wanted), attempt, self._calls.timeout_ms(request_timeout),
                                      "list_consumer_group_offsets")

    async def alter_consumer_group_offsets(self, requests: Sequence[ConsumerGroupTopicPartitions], *,
                                           request_timeout: float | None = None) -> dict[str, object]:
        """Commit each group's offsets (``topic_partitions`` a mapping of partition to offset or
        OffsetAndMetadata), as a client outside the group: the group must have no members (else
        UNKNOWN_MEMBER_ID). ``{group id: ConsumerGroupTopicPartitions or exception}``."""
        wanted = {}
        for r in unique(requests, "request"):
            if not isinstance(r.topic_partitions, Mapping) or not r.topic_partitions:
                raise ValueError(f"group {r.group_id!r}: topic_partitions must map partitions to offsets")
            wanted[r.group_id] = groups.offsets_to_commit(r.topic_partitions)
        unique((r.group_id for r in requests), "group id")

        async def send(connection: BrokerConnection, node: int, batch: list[str]) -> dict[str, object]:
            outcomes: dict[str, object] = {}
            version = connection.api_version(OffsetCommitRequest.API_KEY, None, groups.OFFSET_COMMIT_MAX_VERSION)
            for group_id in batch:
                request = offset_commit_request(version, group_id, wanted[group_id], None, None, {})
                codes = commit_error_codes(await connection.send(request, version))
                failure = groups.group_outcome(codes, group_id)
                outcomes[group_id] = failure if failure is not None else ConsumerGroupTopicPartitions(
                    group_id, dict(wanted[group_id]))
            return outcomes

        async def attempt(pending: list[str]) -> dict[str, object]:
            return await self._router.per_coordinator(GROUP, pending, send)
        return await self._router.run(list(wanted), attempt, self._calls.timeout_ms(request_timeout),
                                      "alter_consumer_group_offsets")

    async def delete_consumer_group_offsets(self, requests: Sequence[ConsumerGroupTopicPartitions], *,
                                            request_timeout: float | None = None) -> dict[str, object]:
        """Delete committed offsets of partitions the group no longer reads (OffsetDelete):
        ``{group id: ConsumerGroupTopicPartitions or exception}`` (GROUP_SUBSCRIBED_TO_TOPIC while a member
        subscribes to the topic)."""
        wanted: dict[str, list[TopicPartition]] = {}
        for r in requests:
            if not r.topic_partitions:
                raise ValueError(f"group {r.group_id!r}: name the partitions whose offsets to delete")
            wanted[r.group_id] = list(r.topic_partitions)
        unique((r.group_id for r in requests), "group id")

        async def send(connection: BrokerConnection, node: int, batch: list[str]) -> dict[str, object]:
            outcomes: dict[str, object] = {}
            version = connection.api_version(OffsetDeleteRequest.API_KEY)
            for group_id in batch:
                request = groups.offset_delete_request(group_id, wanted[group_id])
                failure = groups.read_offset_delete(await connection.send(request, version), group_id,
                                                    wanted[group_id])
                outcomes[group_id] = failure if failure is not None else ConsumerGroupTopicPartitions(
                    group_id, wanted[group_id])
            return outcomes

        async def attempt(pending: list[str]) -> dict[str, object]:
            return await self._router.per_coordinator(GROUP, pending, send)
        return await self._router.run(list(wanted), attempt, self._calls.timeout_ms(request_timeout),
                                      "delete_consumer_group_offsets")


async def delete_groups(calls: AdminCalls, group_ids: Sequence[str], request_timeout: float | None,
                        what: str) -> dict[str, object]:
    """DeleteGroups to each group's coordinator (of consumer groups and share groups alike)."""
    async def send(connection: BrokerConnection, node: int, batch: list[str]) -> dict[str, object]:
        version = connection.api_version(DeleteGroupsRequest.API_KEY)
        return groups.read_delete_groups(await connection.send(groups.delete_groups_request(batch), version))

    async def attempt(pending: list[str]) -> dict[str, object]:
        return await calls.router.per_coordinator(GROUP, pending, send)
    return await calls.router.run(unique(group_ids, "group id"), attempt, calls.timeout_ms(request_timeout), what)

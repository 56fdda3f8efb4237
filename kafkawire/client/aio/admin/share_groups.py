"""The admin client's share group calls (KIP-932; a part of AsyncAdminClient, ``aio.admin``), under Java
Admin's names: listing share groups on every broker, the rest sent to each group's coordinator (found
with FindCoordinator, found again when it moves), built and read by ``core.admin.share_groups``."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kafkawire.messages import (
    AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest, ListGroupsRequest,
)

from ...core.admin import share_groups
from ...core.admin.groups import ConsumerGroupState
from ...core.admin.share_groups import ListShareGroupsResult
from ...core.topic_partition import TopicPartition
from ..connection import BrokerConnection
from .calls import AdminPart, raise_or, unique
from .groups import delete_groups
from .router import GROUP

__all__ = ["ShareGroupAdmin"]


class ShareGroupAdmin(AdminPart):
    """list/describe/delete_share_groups and list/alter/delete_share_group_offsets."""

    async def list_share_groups(self, *, states: Iterable[ConsumerGroupState] = (),
                                request_timeout: float | None = None) -> ListShareGroupsResult:
        """The share groups of every broker (ListGroups of the type "share" to each), optionally only those in
        ``states`` (EMPTY, STABLE); a broker that could not answer is in ``errors``."""
        states = list(states)
        valid, errors = await self._calls.on_every_broker(
            ListGroupsRequest.API_KEY, lambda version: share_groups.list_share_groups_request(version, states),
            share_groups.read_list_share_groups, request_timeout, "list_share_groups")
        return ListShareGroupsResult(tuple(valid), tuple(errors))

    async def describe_share_groups(self, group_ids: Sequence[str], *, request_timeout: float | None = None,
                                    include_authorized_operations: bool = False) -> dict[str, object]:
        """``{group id: ShareGroupDescription or exception}`` (GroupIdNotFound for an unknown group or one of
        another type)."""
        async def send(connection: BrokerConnection, node: int, batch: list[str]) -> dict[str, object]:
            request = share_groups.share_group_describe_request(batch, include_authorized_operations)
            return share_groups.read_share_group_describe(await connection.send(request), self._calls.node(node))

        async def attempt(pending: list[str]) -> dict[str, object]:
            return await self._router.per_coordinator(GROUP, pending, send)
        return await self._router.run(unique(group_ids, "group id"), attempt, self._calls.timeout_ms(request_timeout),
                                      "describe_share_groups")

    async def delete_share_groups(self, group_ids: Sequence[str], *, request_timeout: float | None = None
                                  ) -> dict[str, object]:
        """Delete empty share groups and their share partitions' state: ``{group id: None or exception}``
        (NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND)."""
        return await delete_groups(self._calls, group_ids, request_timeout, "delete_share_groups")

    async def list_share_group_offsets(self, group_specs: Mapping[str, Iterable[TopicPartition] | None], *,
                                       request_timeout: float | None = None) -> dict[str, object]:
        """Each group's share partitions, those given or (None) every one it has state for:
        ``{group id: {partition: SharePartitionOffsetInfo, or None where it has no state} or exception}``."""
        wanted = {group_id: None if partitions is None else list(partitions)
                  for group_id, partitions in group_specs.items()}

        async def send(connection: BrokerConnection, node: int, batch: list[str]) -> dict[str, object]:
            outcomes = {}
            version = connection.api_version(DescribeShareGroupOffsetsRequest.API_KEY)
            for group_id in batch:
                request = share_groups.describe_share_group_offsets_request(group_id, wanted[group_id])
                response = await connection.send(request, version)
                outcomes[group_id] = share_groups.read_describe_share_group_offsets(response, version, group_id)
            return outcomes

        async def attempt(pending: list[str]) -> dict[str, object]:
            return await self._router.per_coordinator(GROUP, pending, send)
        return await self._router.run(list(wanted), attempt, self._calls.timeout_ms(request_timeout),
                                      "list_share_group_offsets")

    async def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], *,
                                        request_timeout: float | None = None) -> dict[TopicPartition, object]:
        """Start an empty share group's partitions afresh at ``offsets``: ``{partition: None or exception}``
        (each NON_EMPTY_GROUP while the group has members)."""
        wanted = {tp: int(offset) for tp, offset in offsets.items()}
        return await self._per_group_resource(
            group_id, lambda: share_groups.alter_share_group_offsets_request(group_id, wanted),
            AlterShareGroupOffsetsRequest.API_KEY,
            lambda response: share_groups.read_alter_share_group_offsets(response, group_id, wanted),
            request_timeout, "alter_share_group_offsets")

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str], *,
                                         request_timeout: float | None = None) -> dict[str, object]:
        """Forget an empty share group's state of ``topics``: ``{topic: None or exception}`` (each
        NON_EMPTY_GROUP while the group has members)."""
        names = unique(topics, "topic")
        return await self._per_group_resource(
            group_id, lambda: share_groups.delete_share_group_offsets_request(group_id, names),
            DeleteShareGroupOffsetsRequest.API_KEY,
            lambda response: share_groups.read_delete_share_group_offsets(response, group_id, names),
            request_timeout, "delete_share_group_offsets")

    async def _per_group_resource(self, group_id: str, build: Callable[[], object], api_key: int,
                                  read: Callable[[Any], object], request_timeout: float | None, what: str) -> Any:
        """One request about one group to its coordinator, sent again after a Retry: the per-resource
        outcomes ``read`` makes of the answer."""
        async def send(connection: BrokerConnection, node: int, batch: list[str]) -> dict[str, object]:
            return {group_id: read(await connection.send(build(), connection.api_version(api_key)))}

        async def attempt(pending: list[str]) -> dict[str, object]:
            return await self._router.per_coordinator(GROUP, pending, send)
        outcomes = await self._router.run([group_id], attempt, self._calls.timeout_ms(request_timeout), what)
        return raise_or(outcomes[group_id])

"""DeleteGroups and OffsetDelete (``broker.groups.deletion``; share groups by ``apis.share``), authorized
as Kafka's KafkaApis does: DELETE on each group; for OffsetDelete also READ on each topic, whose
partitions must exist."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ..groups.deletion import delete_groups, delete_offsets
from ...acl_types import AclOperation as Operation, ResourceType
from .share import ShareApis
from .state import BrokerState, RequestContext

__all__ = ["GroupAdminApis"]


class GroupAdminApis:
    def __init__(self, state: BrokerState, share: ShareApis):
        self.state = state
        self.share = share

    async def delete_groups(self, request: m.DeleteGroupsRequest, version: int,
                            context: RequestContext) -> m.DeleteGroupsResponse:
        allowed = [g for g in request.groups_names
                   if self.state.allowed(context, Operation.DELETE, ResourceType.GROUP, g)]
        allowed = list(dict.fromkeys(allowed))
        errors = {g: self.share.delete_group(g) for g in allowed if g in self.share.groups.groups}
        errors.update(delete_groups(self.state.groups, [g for g in allowed if g not in errors]))
        return m.DeleteGroupsResponse(results=[m.DeleteGroupsResponse.DeletableGroupResult(
            group_id=g, error_code=errors.get(g, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            for g in dict.fromkeys(request.groups_names)])

    async def offset_delete(self, request: m.OffsetDeleteRequest, version: int,
                            context: RequestContext) -> m.OffsetDeleteResponse:
        Topic, Partition = m.OffsetDeleteResponse.OffsetDeleteResponseTopic, m.OffsetDeleteResponse.OffsetDeleteResponsePartition
        if not self.state.allowed(context, Operation.DELETE, ResourceType.GROUP, request.group_id):
            return m.OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[])
        refused: dict[tuple[str, int], int] = {}
        wanted: list[tuple[str, int]] = []
        for topic in request.topics:
            readable = self.state.allowed(context, Operation.READ, ResourceType.TOPIC, topic.name)
            for p in topic.partitions:
                key = (topic.name, p.partition_index)
                if not readable:
                    refused[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif self.state.topics.log(topic.name, p.partition_index) is None:
                    refused[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    wanted.append(key)
        group_error, errors = delete_offsets(self.state.groups, request.group_id, wanted)
        if group_error:
            return m.OffsetDeleteResponse(error_code=group_error, topics=[])
        errors.update(refused)
        return m.OffsetDeleteResponse(error_code=0, topics=[Topic(name=topic.name, partitions=[
            Partition(partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions]) for topic in request.topics])

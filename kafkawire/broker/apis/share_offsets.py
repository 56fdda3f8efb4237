"""DescribeShareGroupOffsets (KIP-932): each share partition's start offset and, from v1 (KIP-1226),
its lag, as Kafka's ``GroupCoordinatorService`` computes them: the partition's latest offset less the
start offset less the in-flight records already acknowledged or archived. A partition without state
(never fetched by the group), and a topic that does not exist, answer start offset -1 and lag -1; a
request without topics describes every partition the group has state for (GROUP_ID_NOT_FOUND for a
group that has none and no members). DESCRIBE on the group, and on each topic."""
from __future__ import annotations

import uuid

from ... import messages as m
from ...codec.primitives import ZERO_UUID
from ...error_codes import ErrorCode
from ..security.acls import Operation, ResourceType
from .share import ShareApis
from .state import BrokerState, RequestContext

__all__ = ["ShareOffsetApis"]

_UNINITIALIZED = -1


class ShareOffsetApis:
    def __init__(self, state: BrokerState, share: ShareApis):
        self.state = state
        self.share = share

    async def describe_offsets(self, request, version: int, context: RequestContext):
        Response = m.DescribeShareGroupOffsetsResponse
        groups = []
        for group in request.groups:
            if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.GROUP, group.group_id):
                groups.append(Response.DescribeShareGroupOffsetsResponseGroup(
                    group_id=group.group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
                continue
            groups.append(self._group(group, context))
        return Response(groups=groups)

    def _group(self, group, context: RequestContext):
        Response = m.DescribeShareGroupOffsetsResponse
        partitions = self.share.partitions
        if group.topics is None:
            keys = partitions.initialized(group.group_id)
            if not keys and group.group_id not in self.share.groups.groups:
                return Response.DescribeShareGroupOffsetsResponseGroup(
                    group_id=group.group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=f"Group {group.group_id} not found.")
            wanted: dict[str, list[int]] = {}
            for _, topic_id, partition in keys:
                name = self.state.topic_name(topic_id)
                if name is not None:
                    wanted.setdefault(name, []).append(partition)
        else:
            wanted = {topic.topic_name: list(topic.partitions) for topic in group.topics}
        topics, missing = [], []
        for name, indexes in wanted.items():
            topic = self.state.topics.get(name)
            if topic is None:  # absent data, not an error (as OffsetFetch answers)
                missing.append(Response.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name, topic_id=ZERO_UUID, partitions=[_partition(p) for p in indexes]))
                continue
            denied = not self.state.allowed(context, Operation.DESCRIBE, ResourceType.TOPIC, name)
            topics.append(Response.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic.topic_id, partitions=[
                    _partition(p, error=ErrorCode.TOPIC_AUTHORIZATION_FAILED) if denied
                    else self._described(group.group_id, topic.topic_id, name, p) for p in indexes]))
        return Response.DescribeShareGroupOffsetsResponseGroup(group_id=group.group_id, topics=topics + missing)

    def _described(self, group_id: str, topic_id: uuid.UUID, name: str, partition: int):
        summary = self.share.partitions.summary((group_id, topic_id, partition))
        partition_log = self.state.topics.log(name, partition)
        if summary is None or partition_log is None:
            return _partition(partition)
        start, complete = summary
        return _partition(partition, start=start, leader_epoch=0,
                          lag=partition_log.high_watermark - start - complete)


def _partition(index: int, *, start: int = _UNINITIALIZED, leader_epoch: int = 0, lag: int = _UNINITIALIZED,
               error: int = ErrorCode.NONE):
    return m.DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponsePartition(
        partition_index=index, start_offset=start, leader_epoch=leader_epoch, lag=lag, error_code=error)

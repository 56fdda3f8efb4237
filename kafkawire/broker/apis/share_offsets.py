"""The share-group offset APIs (KIP-932), as Kafka's ``KafkaApis`` and ``GroupCoordinatorService``
answer them.

- DescribeShareGroupOffsets: each share partition's start offset and, from v1 (KIP-1226), its lag:
  the partition's latest offset less the start offset less the in-flight records already acknowledged
  or archived. A partition without state (never fetched by the group) and a topic that does not exist
  answer start offset -1 and lag -1; a request without topics describes every partition the group
  has state for (GROUP_ID_NOT_FOUND for a group with neither state nor members). DESCRIBE on the
  group and on each topic.
- AlterShareGroupOffsets: start share partitions afresh at the offsets given (their in-flight records
  forgotten), in an empty group (NON_EMPTY_GROUP otherwise; a group id not in use becomes a share
  group). READ on the group and on each topic.
- DeleteShareGroupOffsets: forget the share partitions of the topics named, in an empty group. DELETE
  on the group, READ on each topic.
"""
from __future__ import annotations

import uuid

from ... import messages as m
from ...codec.primitives import ZERO_UUID
from ...error_codes import ErrorCode
from ...acl_types import AclOperation as Operation, ResourceType
from .share import ShareApis
from .state import BrokerState, RequestContext

__all__ = ["ShareOffsetApis"]

_UNINITIALIZED = -1
_NO_OFFSETS = "There is no offset information to delete."


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

    def _group_error(self, group_id: str, create: bool) -> int | None:
        """INVALID_GROUP_ID, GROUP_ID_NOT_FOUND (not a share group; an unknown one too unless ``create``)
        or NON_EMPTY_GROUP; None when the offsets may change (the group created if ``create``)."""
        groups = self.share.groups
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = groups.groups.get(group_id)
        if group is None:
            if self.share.is_other_group(group_id):
                return ErrorCode.GROUP_ID_NOT_FOUND
            if not create and not self.share.partitions.initialized(group_id):
                return ErrorCode.GROUP_ID_NOT_FOUND
            if create:
                groups.create(group_id)
            return None
        return ErrorCode.NON_EMPTY_GROUP if group.members else None

    async def alter_offsets(self, request, version: int, context: RequestContext):
        Response = m.AlterShareGroupOffsetsResponse
        group_id = request.group_id
        if not self.state.allowed(context, Operation.READ, ResourceType.GROUP, group_id):
            return Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        error = self._group_error(group_id, create=True)
        if error is not None:
            return Response(error_code=error)
        topics = []
        for requested in request.topics:
            name = requested.topic_name
            topic = self.state.topics.get(name)
            denied = not self.state.allowed(context, Operation.READ, ResourceType.TOPIC, name)
            rows = []
            for p in requested.partitions:
                if denied:
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif topic is None or self.state.topics.log(name, p.partition_index) is None:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.start_offset < 0:
                    code = ErrorCode.INVALID_REQUEST
                else:
                    written = self.share.partitions.reset((group_id, topic.topic_id, p.partition_index), p.start_offset)
                    code = ErrorCode.NONE if written else ErrorCode.UNKNOWN_SERVER_ERROR
                rows.append(Response.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index,
                                                                             error_code=code))
            topics.append(Response.AlterShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic.topic_id if topic is not None and not denied else ZERO_UUID,
                partitions=rows))
        return Response(error_code=ErrorCode.NONE, responses=topics)

    async def delete_offsets(self, request, version: int, context: RequestContext):
        Response = m.DeleteShareGroupOffsetsResponse
        Row = Response.DeleteShareGroupOffsetsResponseTopic
        group_id = request.group_id
        if not self.state.allowed(context, Operation.DELETE, ResourceType.GROUP, group_id):
            return Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        denied = [t.topic_name for t in request.topics
                  if not self.state.allowed(context, Operation.READ, ResourceType.TOPIC, t.topic_name)]
        error = self._group_error(group_id, create=False)
        if error is not None:
            return Response(error_code=error)
        deleted, refused = [], []
        initialized = self.share.partitions.initialized(group_id)
        for requested in request.topics:
            name = requested.topic_name
            if name in denied:
                continue
            topic = self.state.topics.get(name)
            keys = [key for key in initialized if topic is not None and key[1] == topic.topic_id]
            if topic is None or not keys:
                refused.append(Row(topic_name=name, topic_id=ZERO_UUID, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   error_message=None if topic is None else _NO_OFFSETS))
                continue
            written = all([self.share.partitions.delete(key) for key in keys])
            deleted.append(Row(topic_name=name, topic_id=topic.topic_id,
                               error_code=ErrorCode.NONE if written else ErrorCode.UNKNOWN_SERVER_ERROR))
        return Response(error_code=ErrorCode.NONE, responses=[
            Row(topic_name=name, topic_id=ZERO_UUID, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message="Topic authorization failed.") for name in denied] + deleted + refused)

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

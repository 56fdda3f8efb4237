"""OffsetCommit and OffsetFetch: the group coordinator's, with v10's topics by id (KIP-848) resolved to
names first (the coordinator keeps offsets by name) and unknown ids answered UNKNOWN_TOPIC_ID, and
Kafka's authorization: READ on the group and each topic to commit, DESCRIBE on the group and each topic
to fetch (topics it may not describe are left out of an all-topics fetch)."""
from __future__ import annotations

from ... import messages as m
from ...codec.primitives import ZERO_UUID
from ...error_codes import ErrorCode
from ...messages import ApiKey
from ..dispatch.error_responses import error_response
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["OffsetApis"]

_GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class OffsetApis:
    def __init__(self, state: BrokerState):
        self.state = state
        self.groups = state.groups
        self.topics = state.topics
        self._topic_name = state.topic_name

    # ---- OffsetCommit -----------------------------------------------------------------------------
    async def offset_commit(self, request: m.OffsetCommitRequest, version: int,
                            context: RequestContext) -> m.OffsetCommitResponse:
        allowed = self.state.allowed
        if not allowed(context, Operation.READ, ResourceType.GROUP, request.group_id):
            return error_response(ApiKey.OFFSET_COMMIT, request, version, _GROUP_DENIED)
        Topic, Partition = (m.OffsetCommitResponse.OffsetCommitResponseTopic,
                            m.OffsetCommitResponse.OffsetCommitResponsePartition)
        extra = []  # answered here: unknown ids, topics the principal may not read
        if version >= 10:
            known, unknown = self._topics_by_id(request.topics)
            request.topics = known
            extra += [Topic(topic_id=t.topic_id, partitions=[Partition(
                partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partitions])
                for t in unknown]
        denied = [t for t in request.topics if not allowed(context, Operation.READ, ResourceType.TOPIC, t.name)]
        if denied:
            request.topics = [t for t in request.topics if t not in denied]
            extra += [Topic(name=t.name if version < 10 else "", topic_id=t.topic_id if version >= 10 else ZERO_UUID,
                            partitions=[Partition(partition_index=p.partition_index, error_code=_TOPIC_DENIED)
                                        for p in t.partitions]) for t in denied]
        response = await self.groups.offsets.offset_commit(request, version)
        if extra:
            response.topics = list(response.topics) + extra
        return response

    # ---- OffsetFetch ------------------------------------------------------------------------------
    async def offset_fetch(self, request: m.OffsetFetchRequest, version: int,
                           context: RequestContext) -> m.OffsetFetchResponse:
        allowed = self.state.allowed
        if version < 8:
            if not allowed(context, Operation.DESCRIBE, ResourceType.GROUP, request.group_id):
                return error_response(ApiKey.OFFSET_FETCH, request, version, _GROUP_DENIED)
            denied = self._deny_topics(request, context)
            response = await self.groups.offsets.offset_fetch(request, version)
            self._answer_denied(response, denied, version, context)
            return response
        unknown_by_group, denied_by_group, refused = [], [], []
        for group in request.groups:
            if not allowed(context, Operation.DESCRIBE, ResourceType.GROUP, group.group_id):
                refused.append(group.group_id)
                group.topics = []
            if version >= 10 and group.topics is not None:
                known, unknown = self._topics_by_id(group.topics)
                group.topics = known
            else:
                unknown = []
            unknown_by_group.append(unknown)
            denied_by_group.append(self._deny_topics(group, context))
        response = await self.groups.offsets.offset_fetch(request, version)
        Topic, Partition = (m.OffsetFetchResponse.OffsetFetchResponseTopics,
                            m.OffsetFetchResponse.OffsetFetchResponsePartitions)
        for answered, unknown, denied in zip(response.groups, unknown_by_group, denied_by_group):
            if answered.group_id in refused:
                answered.error_code, answered.topics = _GROUP_DENIED, []
                continue
            if version >= 10:  # every topic (a null request list) is answered only for topics that still exist
                topics = []
                for topic in answered.topics:
                    existing = self.topics.get(topic.name)
                    if existing is not None:
                        topic.topic_id = existing.topic_id
                        topics.append(topic)
                answered.topics = topics + [Topic(topic_id=t.topic_id, partitions=[Partition(
                    partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partition_indexes]) for t in unknown]
            self._answer_denied(answered, denied, version, context)
        return response

    def _deny_topics(self, holder, context: RequestContext) -> list:
        """Take the topics the principal may not DESCRIBE out of a request (or group) and return them;
        with every topic asked for (None), the answer is filtered afterwards instead."""
        if self.state.authorizer is None or holder.topics is None:
            return []
        denied = [t for t in holder.topics
                  if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.TOPIC, t.name)]
        holder.topics = [t for t in holder.topics if t not in denied]
        return denied

    def _answer_denied(self, holder, denied: list, version: int, context: RequestContext) -> None:
        """Answer the denied topics with TOPIC_AUTHORIZATION_FAILED, and keep out of an all-topics answer
        the topics the principal may not describe."""
        if self.state.authorizer is not None:
            holder.topics = [t for t in holder.topics if not t.name or self.state.allowed(
                context, Operation.DESCRIBE, ResourceType.TOPIC, t.name)]
        if not denied:
            return
        Response = m.OffsetFetchResponse
        if version >= 8:  # the topics of a group's answer
            holder.topics = list(holder.topics) + [Response.OffsetFetchResponseTopics(
                name=t.name, partitions=[Response.OffsetFetchResponsePartitions(
                    partition_index=p, committed_offset=-1, metadata="", error_code=_TOPIC_DENIED)
                    for p in t.partition_indexes]) for t in denied]
        else:
            holder.topics = list(holder.topics) + [Response.OffsetFetchResponseTopic(
                name=t.name, partitions=[Response.OffsetFetchResponsePartition(
                    partition_index=p, committed_offset=-1, metadata="", error_code=_TOPIC_DENIED)
                    for p in t.partition_indexes]) for t in denied]

    def _topics_by_id(self, topics) -> tuple[list, list]:
        """The request topics whose id this broker knows, each given its name (for the group coordinator,
        which keeps offsets by name), and those it does not (answered UNKNOWN_TOPIC_ID)."""
        known, unknown = [], []
        for topic in topics:
            name = self._topic_name(topic.topic_id)
            if name is None:
                unknown.append(topic)
            else:
                topic.name = name
                known.append(topic)
        return known, unknown

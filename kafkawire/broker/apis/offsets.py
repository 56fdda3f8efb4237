"""OffsetCommit and OffsetFetch: the group coordinator's, with v10's topics by id (KIP-848) resolved to
names first (the coordinator keeps offsets by name) and unknown ids answered UNKNOWN_TOPIC_ID."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from .state import BrokerState

__all__ = ["OffsetApis"]


class OffsetApis:
    def __init__(self, state: BrokerState):
        self.groups = state.groups
        self.topics = state.topics
        self._topic_name = state.topic_name

    async def offset_commit(self, request, version: int):
        if version < 10:
            return await self.groups.offset_commit(request, version)
        known, unknown = self._topics_by_id(request.topics)
        request.topics = known
        response = await self.groups.offset_commit(request, version)
        Topic, Partition = (m.OffsetCommitResponse.OffsetCommitResponseTopic,
                            m.OffsetCommitResponse.OffsetCommitResponsePartition)
        response.topics = list(response.topics) + [Topic(topic_id=t.topic_id, partitions=[
            Partition(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partitions])
            for t in unknown]
        return response

    async def offset_fetch(self, request, version: int):
        if version < 10:
            return await self.groups.offset_fetch(request, version)
        unknown_by_group = []
        for group in request.groups:
            known, unknown = self._topics_by_id(group.topics) if group.topics is not None else (None, [])
            group.topics = known
            unknown_by_group.append(unknown)
        response = await self.groups.offset_fetch(request, version)
        Topic, Partition = (m.OffsetFetchResponse.OffsetFetchResponseTopics,
                            m.OffsetFetchResponse.OffsetFetchResponsePartitions)
        for group, unknown in zip(response.groups, unknown_by_group):
            # every topic (a null request list) is answered only for topics that still exist
            topics = []
            for topic in group.topics:
                existing = self.topics.get(topic.name)
                if existing is not None:
                    topic.topic_id = existing.topic_id
                    topics.append(topic)
            group.topics = topics + [Topic(topic_id=t.topic_id, partitions=[Partition(
                partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partition_indexes]) for t in unknown]
        return response

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

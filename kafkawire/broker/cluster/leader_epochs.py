"""OffsetForLeaderEpoch (KIP-101, KIP-320) on a cluster's nodes: where a leader epoch ended, so that a
consumer that saw a leader change can check its position (kafka-python and the Java client validate
their offsets with it after a new leader epoch). A single broker's leader epoch never changes, and it
does not serve this API."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ...messages import ApiKey
from ..apis.state import RequestContext
from ...acl_types import AclOperation as Operation, ResourceType
from .controller import Controller

__all__ = ["OffsetForLeaderEpochApi"]


class OffsetForLeaderEpochApi:
    def __init__(self, controller: Controller, node: int, state):
        self.controller = controller
        self.node = node
        self.state = state  # the node's BrokerState (authorizer, topics)

    async def offset_for_leader_epoch(self, request, version: int, context: RequestContext):
        Response = m.OffsetForLeaderEpochResponse
        topics = []
        for topic in request.topics:
            described = self.state.allowed(context, Operation.DESCRIBE, ResourceType.TOPIC, topic.topic)
            partitions = []
            for p in topic.partitions:
                result = Response.EpochEndOffset(partition=p.partition, error_code=0, leader_epoch=-1, end_offset=-1)
                current = p.current_leader_epoch if version >= 2 else -1
                if not described:
                    result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif self.state.topics.log(topic.topic, p.partition) is None:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif refused := self.controller.leader_error(self.node, topic.topic, p.partition, current):
                    result.error_code = refused
                else:
                    result.leader_epoch, result.end_offset = self.controller.end_offset_for(
                        topic.topic, p.partition, p.leader_epoch)
                partitions.append(result)
            topics.append(Response.OffsetForLeaderTopicResult(topic=topic.topic, partitions=partitions))
        return Response(topics=topics)

    def install(self, handlers) -> None:
        """Serve the API on this node's handlers (advertised in its ApiVersions)."""
        handlers.table[ApiKey.OFFSET_FOR_LEADER_EPOCH] = self.offset_for_leader_epoch
        handlers.versions[ApiKey.OFFSET_FOR_LEADER_EPOCH] = m.api(ApiKey.OFFSET_FOR_LEADER_EPOCH).valid_versions

"""Metadata, with topic auto-creation (``auto.create.topics.enable``) for the topics it names."""
from __future__ import annotations

import uuid

from ... import messages as m
from ...codec.primitives import ZERO_UUID
from ...error_codes import ErrorCode
from ..node_view import PartitionInfo
from ..topics import Topic, TopicError
from ..security.acls import Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["MetadataApi"]

_NO_OPERATIONS = -(1 << 31)  # authorized operations not computed


class MetadataApi:
    def __init__(self, state: BrokerState):
        self.state = state
        self.config = state.config
        self.topics = state.topics

    async def metadata(self, request: m.MetadataRequest, version: int, context: RequestContext) -> m.MetadataResponse:
        view = self.state.view
        # every live broker's address on the listener the request came in on
        brokers = [m.MetadataResponse.MetadataResponseBroker(node_id=node.node_id, host=node.host, port=node.port,
                                                             rack=None)
                   for node in view.brokers(context.listener.name, context.advertised)]
        refused = _metadata_topics_refused(request, version)
        if refused is not None:
            return refused
        allowed = self.state.allowed
        if request.topics is None or (version == 0 and not request.topics):
            # every topic the principal may describe, and no other name
            wanted: list[tuple[str | None, uuid.UUID | None]] = [
                (topic.name, None) for topic in self.topics.topics.values()
                if allowed(context, Operation.DESCRIBE, ResourceType.TOPIC, topic.name)]
        else:
            wanted = [(t.name, t.topic_id if version >= 10 else None) for t in request.topics]
        auto_create = self.config.auto_create_topics and (version < 4 or request.allow_auto_topic_creation)
        creatable = [name for name, _ in wanted if name is not None and self._may_create(context, name)]
        created = await self._auto_create(creatable) if auto_create else {}
        results = []
        for name, topic_id in wanted:
            if name is not None:
                topic = self.topics.get(name)
            else:  # by id (v10+); neither: unknown
                topic = self.topics.by_id.get(topic_id) if topic_id is not None else None
            checked = topic.name if topic is not None else name
            if checked is not None and not allowed(context, Operation.DESCRIBE, ResourceType.TOPIC, checked):
                # the principal learns neither the topic nor whether it exists
                results.append(m.MetadataResponse.MetadataResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=topic_id or ZERO_UUID,
                    is_internal=False, partitions=[], topic_authorized_operations=_NO_OPERATIONS))
                continue
            error = ErrorCode.NONE
            failure = created.get(name) if name is not None else None
            if topic is None and isinstance(failure, TopicError):
                error = failure.code
            if topic is None:
                error = error or (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else ErrorCode.UNKNOWN_TOPIC_ID)
                results.append(m.MetadataResponse.MetadataResponseTopic(
                    error_code=error, name=name, topic_id=topic_id or ZERO_UUID, is_internal=False, partitions=[],
                    topic_authorized_operations=_NO_OPERATIONS))
                continue
            partitions = [_partition(index, view.partition(topic.name, index)) for index in range(len(topic.partitions))]
            results.append(m.MetadataResponse.MetadataResponseTopic(
                error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal,
                partitions=partitions, topic_authorized_operations=_NO_OPERATIONS))
        return m.MetadataResponse(brokers=brokers, cluster_id=self.config.cluster_id,
                                  controller_id=view.controller_id, topics=results)

    def _may_create(self, context: RequestContext, name: str) -> bool:
        """CREATE on the cluster or on the topic, as Kafka's auto-creation asks."""
        return (self.state.allowed(context, Operation.CREATE, ResourceType.CLUSTER, "kafka-cluster")
                or self.state.allowed(context, Operation.CREATE, ResourceType.TOPIC, name))

    async def _auto_create(self, names: list[str]) -> dict[str, Topic | TopicError]:
        """Create the named topics that do not exist (auto.create.topics.enable), as one creation."""
        outcomes: dict[str, Topic | TopicError] = {}
        planned = []
        for name in dict.fromkeys(names):
            if self.topics.get(name) is not None:
                continue
            if await self.topics.wait_for_creation(name) is not None:  # another request is creating it
                continue
            try:
                planned.append(self.topics.plan(name))
            except TopicError as failure:
                outcomes[name] = failure
        try:
            self.topics.check_request_size(planned)
        except TopicError as failure:
            return {**outcomes, **{topic.name: failure for topic in planned}}
        for topic, result in zip(planned, await self.topics.create(planned)):
            outcomes[topic.name] = result
        return outcomes


def _partition(index: int, info: PartitionInfo) -> m.MetadataResponse.MetadataResponsePartition:
    """A partition as the node view describes it: LEADER_NOT_AVAILABLE while no replica is live."""
    return m.MetadataResponse.MetadataResponsePartition(
        error_code=ErrorCode.LEADER_NOT_AVAILABLE if info.leader < 0 else 0, partition_index=index,
        leader_id=info.leader, leader_epoch=info.leader_epoch, replica_nodes=info.replicas, isr_nodes=info.isr,
        offline_replicas=info.offline)


def _metadata_topics_refused(request: m.MetadataRequest, version: int) -> m.MetadataResponse | None:
    """Metadata v10 and v11 carry topic ids and nullable names that only v12 may use: Kafka refuses such
    a request with INVALID_REQUEST on every topic (a null name answered as "", which the response allows)."""
    if version not in (10, 11) or not request.topics:
        return None
    if all(t.name is not None and t.topic_id == ZERO_UUID for t in request.topics):
        return None
    return m.MetadataResponse(topics=[m.MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.INVALID_REQUEST, name=t.name or "", topic_id=t.topic_id, is_internal=False,
        partitions=[]) for t in request.topics])

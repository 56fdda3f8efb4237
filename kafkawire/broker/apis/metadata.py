"""Metadata, with topic auto-creation (``auto.create.topics.enable``) for the topics it names."""
from __future__ import annotations

import uuid

from ... import messages as m
from ...codec.primitives import ZERO_UUID
from ...error_codes import ErrorCode
from ..encoded_response import EncodedResponse
from ..loop_slices import Slices
from ..metadata_cache import NO_OPERATIONS, encode_topic, metadata_response, with_operations
from ..topics import Topic, TopicError
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["MetadataApi"]

_LARGE_ANSWER_PARTITIONS = 1000  # answers of more partitions wait their turn (loop_slices) before they are made


class MetadataApi:
    def __init__(self, state: BrokerState):
        self.state = state
        self.config = state.config
        self.topics = state.topics

    async def metadata(self, request: m.MetadataRequest, version: int,
                       context: RequestContext) -> m.MetadataResponse | EncodedResponse:
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
        operations = version >= 8 and request.include_topic_authorized_operations
        pieces: list[bytes] = []
        hosted: list[tuple[int, Topic]] = []  # (position, topic): the pieces the cache gives
        for name, topic_id in wanted:
            if name is not None:
                topic = self.topics.get(name)
            else:  # by id (v10+); neither: unknown
                topic = self.topics.by_id.get(topic_id) if topic_id is not None else None
            checked = topic.name if topic is not None else name
            if checked is not None and not allowed(context, Operation.DESCRIBE, ResourceType.TOPIC, checked):
                # the principal learns neither the topic nor whether it exists
                pieces.append(encode_topic(m.MetadataResponse.MetadataResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=topic_id or ZERO_UUID,
                    is_internal=False, partitions=[], topic_authorized_operations=NO_OPERATIONS), version))
                continue
            if topic is None:
                failure = created.get(name) if name is not None else None
                error = failure.code if isinstance(failure, TopicError) else ErrorCode.NONE
                error = error or (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else ErrorCode.UNKNOWN_TOPIC_ID)
                known = self.state.topic_operations(context, name) if operations and name is not None else None
                pieces.append(encode_topic(m.MetadataResponse.MetadataResponseTopic(
                    error_code=error, name=name, topic_id=topic_id or ZERO_UUID, is_internal=False, partitions=[],
                    topic_authorized_operations=NO_OPERATIONS if known is None else known), version))
                continue
            hosted.append((len(pieces), topic))
            pieces.append(b"")
        if sum(len(topic.partitions) for _, topic in hosted) > _LARGE_ANSWER_PARTITIONS:
            await Slices(first_in_line=True).pause()  # large answers are written one per turn of the loop
        cached = await self.topics.metadata_cache.pieces([topic for _, topic in hosted], version, view.partition,
                                                         self.topics.get)
        for (position, topic), piece in zip(hosted, cached):
            if operations:
                piece = with_operations(piece, version, self.state.topic_operations(context, topic.name))
            pieces[position] = piece
        head = m.MetadataResponse(brokers=brokers, cluster_id=self.config.cluster_id, controller_id=view.controller_id,
                                  topics=[])
        return metadata_response(version, head, pieces)

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

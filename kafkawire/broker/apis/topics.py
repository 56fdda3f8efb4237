"""CreateTopics and DeleteTopics: topics planned on the loop and created off it
(``broker.topics``), with Kafka's caps on one operation and on the broker's partitions."""
from __future__ import annotations

from ... import messages as m
from ...codec.primitives import ZERO_UUID
from ...error_codes import ErrorCode
from ...messages import ApiKey
from ..quotas import MutationQuota
from ..quotas.throttling import THROTTLED
from ..topics import Topic, TopicError
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["TopicApis"]


class TopicApis:
    def __init__(self, state: BrokerState):
        self.state = state
        self.config = state.config
        self.topics = state.topics
        self._topic_name = state.topic_name

    async def create_topics(self, request: m.CreateTopicsRequest, version: int,
                            context: RequestContext) -> m.CreateTopicsResponse:
        validate_only = request.validate_only if version >= 1 else False
        results = [m.CreateTopicsResponse.CreatableTopicResult(name=creatable.name, error_code=0, num_partitions=-1,
                                                               replication_factor=-1)
                   for creatable in request.topics]
        names = [creatable.name for creatable in request.topics]
        duplicates = {name for name in names if names.count(name) > 1} if len(set(names)) < len(names) else set()
        planned: list[tuple[int, Topic]] = []
        allowed = self.state.allowed
        cluster_create = allowed(context, Operation.CREATE, ResourceType.CLUSTER, "kafka-cluster")
        for index, creatable in enumerate(request.topics):
            try:
                if not cluster_create and not allowed(context, Operation.CREATE, ResourceType.TOPIC, creatable.name):
                    raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                if creatable.name in duplicates:
                    raise TopicError(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {creatable.name!r} in the request.")
                if creatable.assignments:
                    raise TopicError(ErrorCode.INVALID_REQUEST, "manual replica assignments are not supported")
                null_configs = [c.name for c in creatable.configs if c.value is None]
                if null_configs:  # as Kafka's controller refuses them
                    raise TopicError(ErrorCode.INVALID_CONFIG,
                                     "Null value not supported for topic configs: " + ",".join(null_configs))
                configs = {c.name: c.value for c in creatable.configs if c.value is not None}
                planned.append((index, self.topics.plan(creatable.name, creatable.num_partitions,
                                                        creatable.replication_factor, configs)))
            except TopicError as failure:
                _fail(results[index], failure)
        try:
            self.topics.check_request_size([topic for _, topic in planned],
                                           sum(len(c.configs) for c in request.topics))
        except TopicError as failure:
            for result in results:
                _fail(result, failure)
            return m.CreateTopicsResponse(topics=results)
        quota = self.state.quotas.mutations(ApiKey.CREATE_TOPICS, version, context.user, context.client_id)
        planned = [(index, topic) for index, topic in planned if _admitted(quota, topic.planned_partitions,
                                                                           results[index])]
        context.throttle_ms = max(context.throttle_ms, self.state.quotas.settle(quota))
        created = [topic for _, topic in planned] if validate_only else await self.topics.create(
            [topic for _, topic in planned])
        for (index, _), outcome in zip(planned, created):
            result = results[index]
            if isinstance(outcome, TopicError):
                _fail(result, outcome)
                continue
            result.topic_id = outcome.topic_id
            result.num_partitions = outcome.planned_partitions
            result.replication_factor = 1
            result.configs = [m.CreateTopicsResponse.CreatableTopicConfigs(  # every config, as Kafka (v5+)
                name=entry.name, value=entry.value, read_only=False, config_source=entry.source, is_sensitive=False)
                for entry in self.topics.configs.describe_topic(outcome.configs)]
        return m.CreateTopicsResponse(topics=results)

    async def delete_topics(self, request: m.DeleteTopicsRequest, version: int,
                            context: RequestContext) -> m.DeleteTopicsResponse:
        if version >= 6:
            wanted = [(t.name if t.name is not None else self._topic_name(t.topic_id), t.topic_id)
                      for t in request.topics]
        else:
            wanted = [(name, ZERO_UUID) for name in request.topic_names]
        results = []
        quota = self.state.quotas.mutations(ApiKey.DELETE_TOPICS, version, context.user, context.client_id)
        for name, topic_id in wanted:
            result = m.DeleteTopicsResponse.DeletableTopicResult(name=name, topic_id=topic_id, error_code=0)
            if name is not None and not self.state.allowed(context, Operation.DELETE, ResourceType.TOPIC, name):
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif name is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                try:
                    existing = self.topics.get(name)
                    if existing is not None and not quota.admit(len(existing.partitions)):
                        raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
                    deleted = await self.topics.delete(name)
                    result.topic_id = deleted.topic_id
                except TopicError as failure:
                    result.error_code = failure.code
                    result.error_message = failure.message
            results.append(result)
        context.throttle_ms = max(context.throttle_ms, self.state.quotas.settle(quota))
        return m.DeleteTopicsResponse(responses=results)


def _admitted(quota: MutationQuota, partitions: int, result: m.CreateTopicsResponse.CreatableTopicResult) -> bool:
    """Whether the controller mutation quota lets the topic be created (else its result says why)."""
    if quota.admit(partitions):
        return True
    _fail(result, TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED))
    return False


def _fail(result: m.CreateTopicsResponse.CreatableTopicResult, failure: TopicError) -> None:
    result.error_code = failure.code
    result.error_message = failure.message

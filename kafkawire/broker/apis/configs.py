"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and the broker (``config.topic_configs``),
the broker's loggers (``config.loggers``), client metrics subscriptions (``client_metrics``) and groups
(``groups.group_configs``): sources and synonyms as Kafka's ConfigHelper
reports them; changes checked, saved and applied to the running logs; ``validate_only`` checks and
changes nothing."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ..config.loggers import LoggerError, alter_logger_levels, logger_levels
from ..client_metrics import ClientMetrics, SubscriptionError
from ..groups.group_configs import GroupConfigError, GroupConfigs
from ..encoded_response import EncodedResponse, array_items
from ..loop_slices import Slices
from ...acl_types import AclOperation as Operation, ResourceType
from ..config.topic_configs import TOPIC_CONFIGS, ConfigEntry, ConfigError, ConfigType
from ..topics import TopicError
from .state import BrokerState, RequestContext

__all__ = ["ConfigApis"]

_TOPIC, _BROKER, _BROKER_LOGGER, _CLIENT_METRICS, _GROUP = 2, 4, 8, 16, 32
_DYNAMIC_BROKER_LOGGER_CONFIG, _CLIENT_METRICS_CONFIG = 6, 7  # ConfigSource
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3


class _Refused(Exception):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message


class ConfigApis:
    def __init__(self, state: BrokerState, client_metrics: ClientMetrics):
        self.state = state
        self.client_metrics = client_metrics
        self.config = state.config
        self.topics = state.topics
        self.group_configs: GroupConfigs = (state.groups.configs if state.groups.configs is not None
                                            else GroupConfigs(state.config))

    # ---- DescribeConfigs ------------------------------------------------------------------------
    async def describe_configs(self, request: m.DescribeConfigsRequest, version: int,
                               context: RequestContext) -> EncodedResponse:
        synonyms = request.include_synonyms
        items = array_items(m.DescribeConfigsResponse, "results", version,
                            m.DescribeConfigsResponse.DescribeConfigsResult(resource_name="p", configs=[]))
        results = []  # each written at once: no objects of every config held across the slices
        slices = Slices(first_in_line=True)  # every topic's configs: others are served in between
        for resource in request.resources:
            if slices.due():
                await slices.pause()
            result = m.DescribeConfigsResponse.DescribeConfigsResult(
                error_code=0, resource_type=resource.resource_type, resource_name=resource.resource_name, configs=[])
            try:
                self._authorize(context, resource, Operation.DESCRIBE_CONFIGS)
                entries = self._describe(resource)
                keys = resource.configuration_keys
                result.configs = [_entry(e, synonyms) for e in entries if not keys or e.name in keys]
            except (_Refused, GroupConfigError) as refused:
                result.error_code, result.error_message = refused.code, refused.message
            results.append(items.encode(result))
        return items.response(m.DescribeConfigsResponse(results=[]), results)

    def _describe(self, resource: m.DescribeConfigsRequest.DescribeConfigsResource) -> list[ConfigEntry]:
        configs = self.topics.configs
        if resource.resource_type == _TOPIC:
            topic = self.topics.get(resource.resource_name)
            if topic is None:
                raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return configs.describe_topic(topic.configs)
        if resource.resource_type == _CLIENT_METRICS:
            if not resource.resource_name:
                raise _Refused(ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")
            subscription = self.client_metrics.subscriptions.get(resource.resource_name, {})
            return [ConfigEntry(name, value, _CLIENT_METRICS_CONFIG, [],
                                ConfigType.INT if name == "interval.ms" else ConfigType.LIST)
                    for name, value in sorted(subscription.items())]
        if resource.resource_type == _BROKER_LOGGER:
            self._broker_logger_resource(resource.resource_name)
            return [ConfigEntry(name, level, _DYNAMIC_BROKER_LOGGER_CONFIG, [], 0) for name, level in logger_levels()]
        if resource.resource_type == _GROUP:
            return [ConfigEntry(e.name, e.value, e.source, e.synonyms, e.kind)
                    for e in self.group_configs.describe(resource.resource_name)]
        return configs.describe_broker(per_broker=self._broker_resource(resource.resource_name))

    # ---- AlterConfigs / IncrementalAlterConfigs -------------------------------------------------
    async def alter_configs(self, request: m.AlterConfigsRequest, version: int,
                            context: RequestContext) -> m.AlterConfigsResponse:
        """AlterConfigs: each resource's dynamic configs replaced by the request's."""
        return m.AlterConfigsResponse(responses=self._alter(
            request, context, lambda resource, current: {c.name: c.value for c in resource.configs},
            m.AlterConfigsResponse.AlterConfigsResourceResponse))

    async def incremental_alter_configs(self, request: m.IncrementalAlterConfigsRequest, version: int,
                                        context: RequestContext) -> m.IncrementalAlterConfigsResponse:
        """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on each resource's dynamic configs."""
        return m.IncrementalAlterConfigsResponse(responses=self._alter(
            request, context, _incremental, m.IncrementalAlterConfigsResponse.AlterConfigsResourceResponse))

    def _alter(self, request, context: RequestContext, new_values, Result) -> list:
        seen = [(r.resource_type, r.resource_name) for r in request.resources]
        responses = []
        for resource in request.resources:
            response = Result(error_code=0, resource_type=resource.resource_type,
                              resource_name=resource.resource_name)
            try:
                self._authorize(context, resource, Operation.ALTER_CONFIGS)
                if seen.count((resource.resource_type, resource.resource_name)) > 1:
                    raise _Refused(ErrorCode.INVALID_REQUEST, "Error due to duplicate resources in the request")
                names = [c.name for c in resource.configs]
                if len(set(names)) < len(names):
                    raise _Refused(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
                self._apply(resource, new_values, request.validate_only)
            except _Refused as refused:
                response.error_code, response.error_message = refused.code, refused.message
            except (ConfigError, TopicError, SubscriptionError, LoggerError, GroupConfigError) as failure:
                response.error_code, response.error_message = failure.code, failure.message
            responses.append(response)
        return responses

    def _apply(self, resource, new_values, validate_only: bool) -> None:
        topics = self.topics
        if resource.resource_type == _TOPIC:
            topic = topics.get(resource.resource_name)
            if topic is None:
                raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
            values = new_values(resource, topic.configs)
            if any(value is None for value in values.values()):
                raise _Refused(ErrorCode.INVALID_REQUEST, "Null value not supported for topic configs: "
                               + ",".join(name for name, value in values.items() if value is None))
            topics.alter_topic_configs(topic, values, validate_only)
            return
        if resource.resource_type == _BROKER_LOGGER:
            self._broker_logger_resource(resource.resource_name)
            if new_values is not _incremental:
                raise _Refused(ErrorCode.INVALID_REQUEST, "AlterConfigs does not support the BROKER_LOGGER resource; "
                                                          "use IncrementalAlterConfigs")
            alter_logger_levels([(c.config_operation, c.name, c.value) for c in resource.configs], validate_only)
            return
        if resource.resource_type == _GROUP:
            try:
                self.group_configs.alter(resource.resource_name, lambda current: new_values(resource, current),
                                         validate_only)
            except OSError as exc:
                raise _Refused(ErrorCode.UNKNOWN_SERVER_ERROR, f"Could not write the group configs: {exc}") from None
            return
        if resource.resource_type == _CLIENT_METRICS:
            current = self.client_metrics.subscriptions.get(resource.resource_name, {})
            values = new_values(resource, current)
            self.client_metrics.set_subscription(resource.resource_name, {
                k: v for k, v in values.items() if v is not None}, validate_only)
            return
        per_broker = self._broker_resource(resource.resource_name)
        configs = topics.configs
        current = configs.dynamic_broker if per_broker else configs.dynamic_default
        values = new_values(resource, current)
        topics.alter_broker_configs(per_broker, {k: v for k, v in values.items() if v is not None}, validate_only)

    # ---- shared -----------------------------------------------------------------------------------
    def _authorize(self, context: RequestContext, resource, operation: Operation) -> None:
        """ALTER_CONFIGS / DESCRIBE_CONFIGS on the topic or group, or on the cluster for the broker."""
        if resource.resource_type == _TOPIC:
            if not self.state.allowed(context, operation, ResourceType.TOPIC, resource.resource_name):
                raise _Refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
        elif resource.resource_type == _GROUP:
            if not self.state.allowed(context, operation, ResourceType.GROUP, resource.resource_name):
                raise _Refused(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
        elif resource.resource_type in (_BROKER, _BROKER_LOGGER, _CLIENT_METRICS):
            if not self.state.allowed(context, operation, ResourceType.CLUSTER, "kafka-cluster"):
                raise _Refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        else:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.resource_type}")

    def _broker_logger_resource(self, name: str) -> None:
        """A BROKER_LOGGER resource names this broker (``ConfigHelper``'s checks)."""
        if not name:
            raise _Refused(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if name != str(self.config.node_id):
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {self.config.node_id} but "
                                                      f"received {name}")

    def _broker_resource(self, name: str) -> bool:
        """True for this broker's own resource, False for the cluster default (""); INVALID_REQUEST otherwise."""
        if not name:
            return False
        if name != str(self.config.node_id):
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {self.config.node_id} or "
                                                      f"empty string, but received {name}")
        return True


def _incremental(resource, current: dict[str, str]) -> dict[str, str | None]:
    """The resource's overrides after the request's operations (``ConfigAdminManager.prepareIncrementalConfigs``)."""
    values: dict[str, str | None] = dict(current)
    for op in resource.configs:
        operation, name = op.config_operation, op.name
        if operation == _SET:
            values[name] = op.value
        elif operation == _DELETE:
            values.pop(name, None)
        elif operation in (_APPEND, _SUBTRACT):
            definition = TOPIC_CONFIGS.get(name) if resource.resource_type == _TOPIC else None
            if resource.resource_type == _BROKER:
                definition = next((d for d in TOPIC_CONFIGS.values() if d.synonyms and d.synonyms[0][0] == name), None)
            listed = definition is not None and definition.kind == ConfigType.LIST
            if resource.resource_type == _CLIENT_METRICS and name in ("metrics", "match"):
                listed = True
            if not listed:
                verb = "append" if operation == _APPEND else "subtract"
                raise _Refused(ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}")
            base = values.get(name)
            default = definition.default if definition is not None else ""
            items = [item.strip() for item in (base if base is not None else default or "").split(",")
                     if item.strip()]
            changes = [item.strip() for item in (op.value or "").split(",") if item.strip()]
            if operation == _APPEND:
                items += [item for item in changes if item not in items]
            else:
                items = [item for item in items if item not in changes]
            values[name] = ",".join(items)
        else:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown alter configs operation {operation} for {name}")
    return values


def _entry(entry, include_synonyms: bool):
    Result = m.DescribeConfigsResponse.DescribeConfigsResourceResult
    return Result(name=entry.name, value=entry.value, read_only=entry.read_only, config_source=entry.source,
                  is_sensitive=False, config_type=entry.kind, synonyms=[
                      m.DescribeConfigsResponse.DescribeConfigsSynonym(name=name, value=value, source=source)
                      for name, value, source in entry.synonyms] if include_synonyms else [])

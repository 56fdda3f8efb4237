"""ListConfigResources (KIP-1142; KIP-1000's ListClientMetricsResources at v0): the resources that
DescribeConfigs can describe, as Kafka's ``KafkaApis.handleListConfigResources`` lists them: groups with
configs of their own, client metrics subscriptions, each broker as a BROKER_LOGGER and as a BROKER, and
the topics, in that order of types (names sorted within a type)."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ..client_metrics import ClientMetrics
from ..groups.group_configs import GroupConfigs
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["ConfigResourceApis"]

_TOPIC, _BROKER, _BROKER_LOGGER, _CLIENT_METRICS, _GROUP = 2, 4, 8, 16, 32  # ConfigResource.Type
# what each version lists (ListConfigResourcesRequest.supportedResourceTypes); an empty filter is all of them
_SUPPORTED = {0: (_CLIENT_METRICS,), 1: (_TOPIC, _BROKER, _BROKER_LOGGER, _CLIENT_METRICS, _GROUP)}

Resource = m.ListConfigResourcesResponse.ConfigResource


class ConfigResourceApis:
    def __init__(self, state: BrokerState, group_configs: GroupConfigs, client_metrics: ClientMetrics):
        self.state = state
        self.group_configs = group_configs
        self.client_metrics = client_metrics

    async def list_config_resources(self, request: m.ListConfigResourcesRequest, version: int,
                                    context: RequestContext) -> m.ListConfigResourcesResponse:
        if not self.state.allowed(context, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, "kafka-cluster"):
            return m.ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, config_resources=[])
        supported = _SUPPORTED[min(version, 1)]
        asked = set(request.resource_types if version >= 1 and request.resource_types else supported)
        if not asked <= set(supported):  # one unknown type fails the whole request
            return m.ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=[])
        live = self.state.view.brokers(context.listener.name, context.advertised)  # on this listener
        brokers = [str(node) for node in sorted(address.node_id for address in live)]
        listed = {
            _GROUP: sorted(group for group, values in self.group_configs.overrides.items() if values),
            _CLIENT_METRICS: sorted(self.client_metrics.subscriptions),
            _BROKER_LOGGER: brokers,
            _BROKER: brokers,
            _TOPIC: sorted(self.state.topics.topics),
        }
        return m.ListConfigResourcesResponse(error_code=0, config_resources=[
            Resource(resource_name=name, resource_type=kind)
            for kind in (_GROUP, _CLIENT_METRICS, _BROKER_LOGGER, _BROKER, _TOPIC) if kind in asked
            for name in listed[kind]])

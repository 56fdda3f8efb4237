"""Cluster-level APIs: ApiVersions, DescribeCluster and FindCoordinator (this broker is every
coordinator, of groups and of transactional ids)."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ...messages import ApiKey
from ..dispatch.error_responses import error_response
from ..node_view import GROUP, TRANSACTION
from ...acl_types import AclOperation as Operation, ResourceType
from .features import FinalizedFeatures, report_features
from .controller_listener import CONTROLLER_APIS, describe_controllers
from .state import BrokerState, RequestContext

__all__ = ["ClusterApis"]

_AUTHORIZATION_FAILED = {ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
                         ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
_BROKER_ENDPOINT = 1
_ENDPOINT_NAMES = {_BROKER_ENDPOINT: "BROKER", 2: "CONTROLLER"}
# the operations Kafka's AclEntry.supportedOperations lists for the CLUSTER resource
_CLUSTER_OPERATIONS = (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
                       Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE)


class ClusterApis:
    def __init__(self, state: BrokerState, features: FinalizedFeatures):
        self.state = state
        self.config = state.config
        self.features = features

    async def api_versions(self, request: m.ApiVersionsRequest, version: int,
                           context: RequestContext) -> m.ApiVersionsResponse:
        keys = [m.ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
                for key, (low, high) in sorted(self.state.versions.items())
                if key in CONTROLLER_APIS or not context.listener.controller]
        response = m.ApiVersionsResponse(error_code=0, api_keys=keys)
        if version >= 3:  # the features clients look at: transaction.version picks KIP-890's protocol
            report_features(response, self.features)
        return response

    async def describe_cluster(self, request: m.DescribeClusterRequest, version: int,
                               context: RequestContext) -> m.DescribeClusterResponse:
        if context.listener.controller:
            return describe_controllers(self.state, request, version, context)
        # Kafka answers every principal: no ACL is needed to describe the cluster, only the cluster's
        # authorized operations, when asked for, depend on CLUSTER DESCRIBE (computeDescribeClusterResponse).
        endpoint = request.endpoint_type if version >= 1 else _BROKER_ENDPOINT
        if endpoint not in _ENDPOINT_NAMES:
            return m.DescribeClusterResponse(
                error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE if version else ErrorCode.INVALID_REQUEST,
                error_message=f"Unsupported endpoint type {endpoint}", brokers=[])
        if endpoint != _BROKER_ENDPOINT:  # a broker describes brokers, not controllers
            return m.DescribeClusterResponse(
                error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE if version else ErrorCode.INVALID_REQUEST,
                error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                              f"type {_ENDPOINT_NAMES[endpoint]}", brokers=[])
        view = self.state.view  # every live broker, at its address on the listener the request came in on
        brokers = [m.DescribeClusterResponse.DescribeClusterBroker(broker_id=node.node_id, host=node.host,
                                                                   port=node.port, rack=None)
                   for node in view.brokers(context.listener.name, context.advertised)]
        response = m.DescribeClusterResponse(error_code=0, endpoint_type=_BROKER_ENDPOINT,
                                             cluster_id=self.config.cluster_id, controller_id=view.controller_id,
                                             brokers=brokers)
        if request.include_cluster_authorized_operations:
            response.cluster_authorized_operations = self._cluster_operations(context)
        return response

    def _cluster_operations(self, context: RequestContext) -> int:
        """The bit field of the CLUSTER operations the principal may do; 0 without CLUSTER DESCRIBE."""
        if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
            return 0
        bits = 0
        for operation in _CLUSTER_OPERATIONS:
            if self.state.allowed(context, operation, ResourceType.CLUSTER, "kafka-cluster"):
                bits |= 1 << operation
        return bits

    async def find_coordinator(self, request: m.FindCoordinatorRequest, version: int,
                               context: RequestContext) -> m.FindCoordinatorResponse:
        kind = ResourceType.GROUP if request.key_type == GROUP else ResourceType.TRANSACTIONAL_ID
        if request.key_type not in (GROUP, TRANSACTION):  # share groups (2) are not served
            return error_response(ApiKey.FIND_COORDINATOR, request, version, ErrorCode.INVALID_REQUEST,
                                  f"Unknown coordinator type {request.key_type}")
        view = self.state.view
        addresses = {node.node_id: node for node in view.brokers(context.listener.name, context.advertised)}

        def coordinator(key: str):
            """(node id, host, port, error) of the key's coordinator, as the view places it."""
            node = addresses.get(view.coordinator(request.key_type, key))
            if node is None:  # no live broker for it
                return -1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE
            return node.node_id, node.host, node.port, 0

        if version >= 4:
            Coordinator = m.FindCoordinatorResponse.Coordinator
            answers = []
            for key in request.coordinator_keys:
                if self.state.allowed(context, Operation.DESCRIBE, kind, key):
                    node, host, port, error = coordinator(key)
                    answers.append(Coordinator(key=key, node_id=node, host=host, port=port, error_code=error))
                else:
                    answers.append(Coordinator(key=key, node_id=-1, host="", port=-1,
                                               error_code=_AUTHORIZATION_FAILED[kind]))
            return m.FindCoordinatorResponse(coordinators=answers)
        if not self.state.allowed(context, Operation.DESCRIBE, kind, request.key):
            return m.FindCoordinatorResponse(error_code=_AUTHORIZATION_FAILED[kind], node_id=-1, host="", port=-1)
        node, host, port, error = coordinator(request.key)
        return m.FindCoordinatorResponse(error_code=error, node_id=node, host=host, port=port)

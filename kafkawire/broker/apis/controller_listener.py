"""What a listener named in ``controller.listener.names`` answers: what Kafka's controller
(``ControllerApis``) answers a client that bootstraps from it (``--bootstrap-controller``, KIP-919),
as far as kafkawire serves those APIs. Its ApiVersions lists only these; any other API closes the
connection, as Kafka closes one that sends an API its listener does not enable. The quorum's own
APIs (Vote, the metadata log's Fetch, broker registration, ...) have no use in one process and are
not served.
"""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ...messages import ApiKey
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["CONTROLLER_APIS", "describe_controllers"]

CONTROLLER_APIS = frozenset({
    ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.API_VERSIONS,
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
    ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
    ApiKey.ELECT_LEADERS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_QUORUM,
    ApiKey.UPDATE_FEATURES, ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ApiKey.ALTER_CLIENT_QUOTAS,
})
_BROKER_ENDPOINT, _CONTROLLER_ENDPOINT = 1, 2


def describe_controllers(state: BrokerState, request: m.DescribeClusterRequest, version: int,
                         context: RequestContext) -> m.DescribeClusterResponse:
    """DescribeCluster on a controller listener: the controllers, to a principal with ALTER on the
    cluster (a controller asks more than a broker's DESCRIBE)."""
    cluster_id = state.config.cluster_id
    if not state.allowed(context, Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster"):
        return m.DescribeClusterResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                         error_message="Cluster authorization failed.", cluster_id=cluster_id,
                                         brokers=[])
    asked = request.endpoint_type if version >= 1 else _BROKER_ENDPOINT
    if asked not in (_BROKER_ENDPOINT, _CONTROLLER_ENDPOINT):
        code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE if version >= 1 else ErrorCode.INVALID_REQUEST
        return m.DescribeClusterResponse(error_code=code, error_message=f"Unsupported endpoint type {asked}",
                                         cluster_id=cluster_id, brokers=[])
    if asked != _CONTROLLER_ENDPOINT:
        code = ErrorCode.MISMATCHED_ENDPOINT_TYPE if version >= 1 else ErrorCode.INVALID_REQUEST
        return m.DescribeClusterResponse(error_code=code, cluster_id=cluster_id, brokers=[],
                                         error_message="The request was sent to an endpoint of type CONTROLLER, "
                                                       "but we wanted an endpoint of type BROKER")
    view = state.view  # the combined nodes, at their address on this controller listener
    controllers = [m.DescribeClusterResponse.DescribeClusterBroker(broker_id=node.node_id, host=node.host,
                                                                   port=node.port, rack=None)
                   for node in view.brokers(context.listener.name, context.advertised)]
    return m.DescribeClusterResponse(error_code=0, endpoint_type=_CONTROLLER_ENDPOINT, cluster_id=cluster_id,
                                     controller_id=view.controller_id, brokers=controllers)

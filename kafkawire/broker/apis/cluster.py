"""Cluster-level APIs: ApiVersions, DescribeCluster and FindCoordinator (this broker is every
coordinator)."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from .state import BrokerState

__all__ = ["ClusterApis"]


class ClusterApis:
    def __init__(self, state: BrokerState):
        self.state = state
        self.config = state.config

    @property
    def port(self) -> int:
        return self.state.port

    async def api_versions(self, request, version: int):
        keys = [m.ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
                for key, (low, high) in sorted(self.state.versions.items())]
        return m.ApiVersionsResponse(error_code=0, api_keys=keys)

    async def describe_cluster(self, request, version: int):
        if version >= 1 and request.endpoint_type != 1:  # a broker describes brokers, not controllers
            return m.DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                             error_message="The broker only handles the BROKER endpoint type",
                                             endpoint_type=request.endpoint_type, cluster_id=self.config.cluster_id,
                                             brokers=[])
        broker = m.DescribeClusterResponse.DescribeClusterBroker(
            broker_id=self.config.node_id, host=self.config.advertised, port=self.port, rack=None)
        return m.DescribeClusterResponse(error_code=0, endpoint_type=1, cluster_id=self.config.cluster_id,
                                         controller_id=self.config.node_id, brokers=[broker])

    async def find_coordinator(self, request, version: int):
        host, port, node = self.config.advertised, self.port, self.config.node_id
        if version >= 4:
            return m.FindCoordinatorResponse(coordinators=[
                m.FindCoordinatorResponse.Coordinator(key=key, node_id=node, host=host, port=port, error_code=0)
                for key in request.coordinator_keys])
        if version >= 1 and request.key_type != 0:
            return m.FindCoordinatorResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                             error_message="transactions are not supported", node_id=-1, host="",
                                             port=-1)
        return m.FindCoordinatorResponse(error_code=0, node_id=node, host=host, port=port)

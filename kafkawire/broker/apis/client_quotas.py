"""DescribeClientQuotas and AlterClientQuotas (KIP-546): the client quotas ``broker.quotas`` keeps and
enforces, authorized as Kafka authorizes them (DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster)."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ..quotas.store import ClientQuotaStore, QuotaError
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["ClientQuotaApis"]


class ClientQuotaApis:
    def __init__(self, state: BrokerState, store: ClientQuotaStore):
        self.state = state
        self.store = store

    async def describe_client_quotas(self, request: m.DescribeClientQuotasRequest, version: int,
                                     context: RequestContext) -> m.DescribeClientQuotasResponse:
        if not self.state.allowed(context, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, "kafka-cluster"):
            return m.DescribeClientQuotasResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                  error_message="Cluster authorization failed.", entries=None)
        try:
            found = self.store.describe([(c.entity_type, c.match_type, c.match) for c in request.components],
                                        request.strict)
        except QuotaError as error:
            return m.DescribeClientQuotasResponse(error_code=error.code, error_message=error.message, entries=None)
        Entry = m.DescribeClientQuotasResponse.EntryData
        Entity = m.DescribeClientQuotasResponse.EntityData
        Value = m.DescribeClientQuotasResponse.ValueData
        return m.DescribeClientQuotasResponse(error_code=0, entries=[
            Entry(entity=[Entity(entity_type=t, entity_name=n) for t, n in key],
                  values=[Value(key=k, value=v) for k, v in sorted(values.items())])
            for key, values in found])

    async def alter_client_quotas(self, request: m.AlterClientQuotasRequest, version: int,
                                  context: RequestContext) -> m.AlterClientQuotasResponse:
        Entry = m.AlterClientQuotasResponse.EntryData
        Entity = m.AlterClientQuotasResponse.EntityData

        def entry(requested: m.AlterClientQuotasRequest.EntryData, code: int,
                  message: str | None) -> m.AlterClientQuotasResponse.EntryData:
            return Entry(error_code=code, error_message=message, entity=[
                Entity(entity_type=e.entity_type, entity_name=e.entity_name) for e in requested.entity])

        if not self.state.allowed(context, Operation.ALTER_CONFIGS, ResourceType.CLUSTER, "kafka-cluster"):
            return m.AlterClientQuotasResponse(entries=[
                entry(e, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
                for e in request.entries])
        results = self.store.alter(
            [([(e.entity_type, e.entity_name) for e in requested.entity],
              [(op.key, None if op.remove else op.value) for op in requested.ops]) for requested in request.entries],
            request.validate_only)
        return m.AlterClientQuotasResponse(entries=[
            entry(requested, code, message) for requested, (code, message) in zip(request.entries, results)])

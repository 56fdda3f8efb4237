"""The broker's request handlers: each API family's handlers (``broker.apis``) built over the shared
state, and the table from API key to the coroutine that answers it."""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..apis.acls import AclApis
from ..apis.cluster import ClusterApis
from ..apis.consumer_groups import ConsumerGroupApis
from ..apis.configs import ConfigApis
from ..apis.fetch import FetchApi
from ..apis.group_admin import GroupAdminApis
from ..apis.list_offsets import ListOffsetsApi
from ..apis.metadata import MetadataApi
from ..apis.offsets import OffsetApis
from ..apis.partitions_admin import PartitionAdminApis
from ..apis.produce import ProduceHandler
from ..apis.producer_ids import ProducerIdApi
from ..apis.scram_credentials import ScramCredentialApis
from ..apis.state import BrokerState, RequestContext
from ..apis.telemetry import TelemetryApis
from ..apis.topics import TopicApis
from ..apis.transactions import TransactionApis
from .coordinator_keys import coordinator_keys
from ...error_codes import ErrorCode
from ..client_metrics import ClientMetrics
from ..config.broker_config import BrokerConfig
from .error_responses import error_response
from ..fetch.reads import FetchPurgatory
from ..fetch.sessions import FetchSessionCache
from ..groups import GroupCoordinator
from ..node_view import NodeView, SingleNode
from ..security.acls import Authorizer, Operation, ResourceType
from ..security.scram_store import ScramStore
from ..topics import TopicManager
from ..transactions import MarkerWriter, ProducerIdBlock, TransactionCoordinator, TransactionStateLog
from .versions import served_versions, with_transaction_version

__all__ = ["Handlers"]

log = logging.getLogger(__name__)


class Handlers:
    """The broker's request handlers over its shared state: ``handle(api_key, ...)`` answers a request."""

    purgatory: FetchPurgatory
    producer_ids: ProducerIdBlock
    transactions: TransactionCoordinator

    def __init__(self, config: BrokerConfig, topics: TopicManager, groups: GroupCoordinator, port: int,
                 scram: ScramStore | None = None, authorizer: Authorizer | None = None, metrics=None,
                 view: NodeView | None = None, shared: Handlers | None = None):
        """``view``: what this node leads and coordinates (default: everything, a single broker);
        ``shared``: another node's handlers, whose purgatory and transaction coordinator this node
        shares (an in-process cluster's nodes serve the same logs)."""
        self.state = BrokerState(
            config, topics, groups, port,
            with_transaction_version(served_versions(upstream=config.upstream_versions), config.transaction_version),
            shared.purgatory if shared is not None else FetchPurgatory(),
            FetchSessionCache(config.fetch_session_cache_slots, config.fetch_session_eviction_ms),
            scram if scram is not None else ScramStore(None), authorizer,
            view if view is not None else SingleNode(config.node_id))
        self._owns_transactions = shared is None
        self.groups = groups
        self.purgatory = self.state.purgatory
        self.versions = self.state.versions  # API key -> (oldest, newest)
        cluster, metadata, fetch = ClusterApis(self.state), MetadataApi(self.state), FetchApi(self.state, metrics)
        offsets, topic_apis = OffsetApis(self.state), TopicApis(self.state)
        if shared is not None:
            producer_ids, self.transactions = shared.producer_ids, shared.transactions
        else:
            producer_ids = ProducerIdBlock(config.data_dir / "producer_ids.json")  # one block: ids never repeat
            self.transactions = TransactionCoordinator(
                TransactionStateLog(config.data_dir), producer_ids,
                MarkerWriter(topics.log, self.purgatory.notify, groups.offsets.complete_transactional_offsets),
                max_timeout_ms=config.transaction_max_timeout_ms,
                id_expiration_ms=config.transactional_id_expiration_ms)
        self.producer_ids = producer_ids
        self.producer = ProduceHandler(topics, self.purgatory.notify, config.produce_max_decompressed_bytes,
                                       allowed=self.state.allowed if authorizer is not None else None,
                                       transactions=self.transactions, metrics=metrics,
                                       verify_transactions=config.transaction_partition_verification,
                                       view=self.state.view)
        txn = TransactionApis(self.state, self.transactions)
        consumer_groups = ConsumerGroupApis(self.state)
        acls, scram_apis = AclApis(self.state), ScramCredentialApis(self.state)
        self.client_metrics = ClientMetrics(config.data_dir, config.telemetry_max_bytes)
        self.client_metrics.load()
        configs, admin = ConfigApis(self.state, self.client_metrics), PartitionAdminApis(self.state)
        group_admin, telemetry = GroupAdminApis(self.state), TelemetryApis(self.state, self.client_metrics)
        group = self._group_api  # READ on the group, as Kafka checks it for the membership APIs
        self.table: dict[int, Callable[..., Awaitable[Any]]] = {
            0: self.producer.produce, 1: fetch.fetch, 2: ListOffsetsApi(self.state).list_offsets, 3: metadata.metadata,
            8: offsets.offset_commit, 9: offsets.offset_fetch, 10: cluster.find_coordinator,
            11: group(11, lambda request, version, context: groups.membership.join_group(request, version, context.client_id,
                                                                                context.client_host)),
            12: group(12, _plain(groups.membership.heartbeat)), 13: group(13, _plain(groups.membership.leave_group)),
            14: group(14, _plain(groups.membership.sync_group)), 15: self._describe_groups, 16: self._list_groups,
            18: cluster.api_versions, 19: topic_apis.create_topics, 20: topic_apis.delete_topics,
            22: ProducerIdApi(self.state, producer_ids, self.transactions).init_producer_id,
            24: txn.add_partitions_to_txn, 25: txn.add_offsets_to_txn, 26: txn.end_txn, 27: txn.write_txn_markers,
            28: txn.txn_offset_commit, 29: acls.describe_acls, 30: acls.create_acls,
            31: acls.delete_acls, 32: configs.describe_configs, 50: scram_apis.describe_user_scram_credentials,
            51: scram_apis.alter_user_scram_credentials, 60: cluster.describe_cluster,
            61: txn.describe_producers, 65: txn.describe_transactions, 66: txn.list_transactions,
            68: consumer_groups.heartbeat, 69: consumer_groups.describe,
            21: admin.delete_records, 23: admin.offset_for_leader_epoch, 33: configs.alter_configs,
            35: admin.describe_log_dirs, 37: admin.create_partitions, 42: group_admin.delete_groups,
            43: admin.elect_leaders, 44: configs.incremental_alter_configs, 47: group_admin.offset_delete,
            71: telemetry.get_telemetry_subscriptions, 72: telemetry.push_telemetry,
            75: admin.describe_topic_partitions,
        }

    def _group_api(self, api_key: int, handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def checked(request: Any, version: int, context: RequestContext) -> Any:
            if not self.state.allowed(context, Operation.READ, ResourceType.GROUP, request.group_id):
                return error_response(api_key, request, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
            return await handler(request, version, context)
        return checked

    async def _describe_groups(self, request: Any, version: int, context: RequestContext) -> Any:
        response = await self.groups.describe_groups(request, version)
        for described in response.groups:  # DESCRIBE on each group
            if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.GROUP, described.group_id):
                denied = error_response(15, type(request)(groups=[described.group_id]), version,
                                        ErrorCode.GROUP_AUTHORIZATION_FAILED)
                response.groups = [denied.groups[0] if g is described else g for g in response.groups]
        return response

    async def _list_groups(self, request: Any, version: int, context: RequestContext) -> Any:
        response = await self.groups.list_groups(request, version)
        if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
            response.groups = [g for g in response.groups  # only the groups it may describe
                               if self.state.allowed(context, Operation.DESCRIBE, ResourceType.GROUP, g.group_id)]
        return response

    def close(self) -> None:
        self.producer.close()
        if self._owns_transactions:
            self.transactions.close()

    async def handle(self, api_key: int, request: Any, version: int, context: RequestContext) -> Any:
        """The response to one request (None: no response is sent)."""
        view = self.state.view
        if not view.leads_everything:
            for key_type, key in coordinator_keys(api_key, request, version):
                code = view.coordinator_error(key_type, key)  # NOT_COORDINATOR on another node
                if code:
                    response = error_response(api_key, request, version, code)
                    if response is not None:
                        return response
        return await self.table[api_key](request, version, context)


def _plain(handler: Callable[[Any, int], Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A handler that needs no request context."""
    return lambda request, version, context: handler(request, version)

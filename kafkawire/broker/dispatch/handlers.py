"""The broker's request handlers: each API family's handlers (``broker.apis``) built over the shared
state, and the table from API key to the coroutine that answers it."""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..apis.features import FinalizedFeatures
from ..apis.state import BrokerState, RequestContext
from .coordinator_keys import coordinator_keys
from ...error_codes import ErrorCode
from ...messages import ApiKey
from ..config.broker_config import BrokerConfig
from .error_responses import error_response
from ..fetch.purgatory import FetchPurgatory
from ..fetch.sessions import FetchSessionCache
from ..groups.state_files import SHARE_GROUPS_FILE_NAME
from ..node_view import NodeView, SingleNode
from ..quotas import ClientQuotas, ClientQuotaStore
from ...acl_types import AclOperation as Operation, ResourceType
from ..topics import TopicManager
from ..transactions.state_file import TRANSACTION_STATE_FILE_NAME
from .versions import TRANSACTION_V2_VERSIONS, served_versions, with_transaction_version

if TYPE_CHECKING:
    from ..apis.produce import ProduceHandler
    from ..client_metrics import ClientMetrics
    from ..apis.share import ShareApis
    from ..delegation_tokens import DelegationTokens
    from ..groups.classic import ClassicMembership
    from ..groups.coordinator import GroupCoordinator
    from ..groups.group_configs import GroupConfigs
    from ..security.acls import Authorizer
    from ..security.scram_store import ScramStore
    from ..transactions.coordinator import TransactionCoordinator
    from ..transactions.producer_ids import ProducerIdBlock

__all__ = ["Handlers", "ROUTES"]

log = logging.getLogger(__name__)

# API key -> (its module in ``broker.apis``, the handler class there, the method that answers it). The
# module is imported, and the class built over the shared state, when the first such request arrives, so
# a broker loads only the APIs it is asked for. Registering an API is one line here (a class that needs
# more than the state also names its other arguments in ``Handlers._arguments``).
ROUTES: dict[int, tuple[str, str, str]] = {
    ApiKey.FETCH: ("fetch", "FetchApi", "fetch"),
    ApiKey.LIST_OFFSETS: ("list_offsets", "ListOffsetsApi", "list_offsets"),
    ApiKey.METADATA: ("metadata", "MetadataApi", "metadata"),
    ApiKey.OFFSET_COMMIT: ("offsets", "OffsetApis", "offset_commit"),
    ApiKey.OFFSET_FETCH: ("offsets", "OffsetApis", "offset_fetch"),
    ApiKey.FIND_COORDINATOR: ("cluster", "ClusterApis", "find_coordinator"),
    ApiKey.API_VERSIONS: ("cluster", "ClusterApis", "api_versions"),
    ApiKey.DESCRIBE_CLUSTER: ("cluster", "ClusterApis", "describe_cluster"),
    ApiKey.DESCRIBE_QUORUM: ("quorum", "QuorumApis", "describe_quorum"),
    ApiKey.UPDATE_FEATURES: ("features", "FeatureApis", "update_features"),
    ApiKey.CREATE_TOPICS: ("topics", "TopicApis", "create_topics"),
    ApiKey.DELETE_TOPICS: ("topics", "TopicApis", "delete_topics"),
    ApiKey.DELETE_RECORDS: ("partitions_admin", "PartitionAdminApis", "delete_records"),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ("partitions_admin", "PartitionAdminApis", "offset_for_leader_epoch"),
    ApiKey.DESCRIBE_LOG_DIRS: ("partitions_admin", "PartitionAdminApis", "describe_log_dirs"),
    ApiKey.ALTER_REPLICA_LOG_DIRS: ("log_dirs", "LogDirApis", "alter_replica_log_dirs"),
    ApiKey.CREATE_PARTITIONS: ("partitions_admin", "PartitionAdminApis", "create_partitions"),
    ApiKey.ELECT_LEADERS: ("reassignments", "ReassignmentApis", "elect_leaders"),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ("reassignments", "ReassignmentApis", "alter_partition_reassignments"),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ("reassignments", "ReassignmentApis", "list_partition_reassignments"),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: ("partitions_admin", "PartitionAdminApis", "describe_topic_partitions"),
    ApiKey.INIT_PRODUCER_ID: ("producer_ids", "ProducerIdApi", "init_producer_id"),
    ApiKey.ADD_PARTITIONS_TO_TXN: ("transactions", "TransactionApis", "add_partitions_to_txn"),
    ApiKey.ADD_OFFSETS_TO_TXN: ("transactions", "TransactionApis", "add_offsets_to_txn"),
    ApiKey.END_TXN: ("transactions", "TransactionApis", "end_txn"),
    ApiKey.WRITE_TXN_MARKERS: ("transactions", "TransactionApis", "write_txn_markers"),
    ApiKey.TXN_OFFSET_COMMIT: ("transactions", "TransactionApis", "txn_offset_commit"),
    ApiKey.DESCRIBE_PRODUCERS: ("transactions", "TransactionApis", "describe_producers"),
    ApiKey.DESCRIBE_TRANSACTIONS: ("transactions", "TransactionApis", "describe_transactions"),
    ApiKey.LIST_TRANSACTIONS: ("transactions", "TransactionApis", "list_transactions"),
    ApiKey.DESCRIBE_ACLS: ("acls", "AclApis", "describe_acls"),
    ApiKey.CREATE_ACLS: ("acls", "AclApis", "create_acls"),
    ApiKey.DELETE_ACLS: ("acls", "AclApis", "delete_acls"),
    ApiKey.DESCRIBE_CONFIGS: ("configs", "ConfigApis", "describe_configs"),
    ApiKey.ALTER_CONFIGS: ("configs", "ConfigApis", "alter_configs"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ("configs", "ConfigApis", "incremental_alter_configs"),
    ApiKey.LIST_CONFIG_RESOURCES: ("config_resources", "ConfigResourceApis", "list_config_resources"),
    ApiKey.DELETE_GROUPS: ("group_admin", "GroupAdminApis", "delete_groups"),
    ApiKey.OFFSET_DELETE: ("group_admin", "GroupAdminApis", "offset_delete"),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ("client_quotas", "ClientQuotaApis", "describe_client_quotas"),
    ApiKey.ALTER_CLIENT_QUOTAS: ("client_quotas", "ClientQuotaApis", "alter_client_quotas"),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ("scram_credentials", "ScramCredentialApis",
                                             "describe_user_scram_credentials"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ("scram_credentials", "ScramCredentialApis", "alter_user_scram_credentials"),
    ApiKey.CREATE_DELEGATION_TOKEN: ("delegation_tokens", "DelegationTokenApis", "create_delegation_token"),
    ApiKey.RENEW_DELEGATION_TOKEN: ("delegation_tokens", "DelegationTokenApis", "renew_delegation_token"),
    ApiKey.EXPIRE_DELEGATION_TOKEN: ("delegation_tokens", "DelegationTokenApis", "expire_delegation_token"),
    ApiKey.DESCRIBE_DELEGATION_TOKEN: ("delegation_tokens", "DelegationTokenApis", "describe_delegation_token"),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ("consumer_groups", "ConsumerGroupApis", "heartbeat"),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ("consumer_groups", "ConsumerGroupApis", "describe"),
    ApiKey.STREAMS_GROUP_HEARTBEAT: ("streams_groups", "StreamsGroupApis", "heartbeat"),
    ApiKey.STREAMS_GROUP_DESCRIBE: ("streams_groups", "StreamsGroupApis", "describe"),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: ("telemetry", "TelemetryApis", "get_telemetry_subscriptions"),
    ApiKey.PUSH_TELEMETRY: ("telemetry", "TelemetryApis", "push_telemetry"),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ("share_offsets", "ShareOffsetApis", "describe_offsets"),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: ("share_offsets", "ShareOffsetApis", "alter_offsets"),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: ("share_offsets", "ShareOffsetApis", "delete_offsets"),
}


class Handlers:
    """The broker's request handlers over its shared state: ``handle(api_key, ...)`` answers a request."""

    purgatory: FetchPurgatory
    features: FinalizedFeatures

    def __init__(self, config: BrokerConfig, topics: TopicManager,
                 groups: GroupCoordinator | Callable[[], GroupCoordinator], port: int,
                 scram: ScramStore | Callable[[], ScramStore] | None = None, authorizer: Authorizer | None = None,
                 metrics=None, view: NodeView | None = None, shared: Handlers | None = None,
                 tokens: DelegationTokens | Callable[[], DelegationTokens] | None = None):
        """``groups``, ``scram``, ``tokens``: each the object, or a function that gives it (the broker's,
        which builds it on first use); ``view``: what this node leads and coordinates (default: everything,
        a single broker); ``shared``: another node's handlers, whose purgatory and transaction coordinator
        this node shares (an in-process cluster's nodes serve the same logs)."""
        self._config, self._topics = config, topics
        self._scram: ScramStore | None = None  # without the broker's: credentials in memory (built on first use)
        # the finalized features, one set for an in-process cluster's nodes
        self.features = shared.features if shared is not None else FinalizedFeatures(
            config.data_dir / "features.json", config.transaction_version)
        served = served_versions(upstream=config.upstream_versions)
        # the client quotas: configured for the cluster, enforced by each node over its own clients
        self.quota_store: ClientQuotaStore = shared.quota_store if shared is not None else ClientQuotaStore(
            config.data_dir / "client-quotas.json")
        self.quotas = ClientQuotas(self.quota_store, config.quota_window_num, config.quota_window_size_seconds,
                                   config.controller_quota_window_num, config.controller_quota_window_size_seconds,
                                   metrics)
        self.state = BrokerState(
            config, topics, _given(groups), port,
            dict(with_transaction_version(served, self.features.level("transaction.version"))),  # changes live
            shared.purgatory if shared is not None else FetchPurgatory(),
            FetchSessionCache(config.fetch_session_cache_slots, config.fetch_session_eviction_ms),
            _given(scram) if scram is not None else self._scram_in_memory, authorizer,
            view if view is not None else SingleNode(config.node_id), self.quotas)
        self._owns_transactions = shared is None
        self.purgatory = self.state.purgatory
        self.versions = self.state.versions  # API key -> (oldest, newest)
        self._served = served  # before transaction.version caps it
        self.features.listeners.append(self._apply_transaction_version)
        # the producer ids, transaction coordinator and produce path: built on first use (``transactions``
        # at start, by ``recover_transactions``, when a transaction state log is there to recover)
        self._producer_ids: ProducerIdBlock | None = None
        self._transactions: TransactionCoordinator | None = None
        self._producer: ProduceHandler | None = None
        self._client_metrics: ClientMetrics | None = None  # KIP-714's subscriptions: read on first use
        # share groups: state shared with the other nodes of an in-process cluster, as transactions are;
        # built now if durable state is there to recover, else on first use (``share``)
        self._shared, self._metrics = shared, metrics
        self._share: ShareApis | None = None
        if (shared is not None and shared.share_built) or (config.data_dir / SHARE_GROUPS_FILE_NAME).exists():
            self._build_share()
        # what a handler class in ROUTES takes after the shared state
        self._arguments: dict[str, tuple[Any, ...] | Callable[[], tuple[Any, ...]]] = {
            "FetchApi": (metrics,), "TransactionApis": lambda: (self.transactions,),
            "ProducerIdApi": lambda: (self.producer_ids, self.transactions),
            "ConfigApis": lambda: (self.client_metrics,), "TelemetryApis": lambda: (self.client_metrics,),
            "ConfigResourceApis": lambda: (self._group_configs(), self.client_metrics),
            "ClusterApis": (self.features,), "FeatureApis": (self.features,),
            "GroupAdminApis": lambda: (self.share,), "ShareOffsetApis": lambda: (self.share,),
            "DelegationTokenApis": lambda: (_given(tokens)() if tokens is not None else _tokens_disabled(),),
            "ClientQuotaApis": (self.quota_store,)}
        self._apis: dict[str, Any] = {}  # class name -> the handler object built on first use
        group = self._group_api  # READ on the group, as Kafka checks it for the membership APIs

        def membership() -> ClassicMembership:  # (the coordinator is built on first use)
            return self.groups.membership

        self.table: dict[int, Callable[..., Awaitable[Any]]] = {
            **{api_key: self._on_first_use(api_key, *route) for api_key, route in ROUTES.items()},
            ApiKey.PRODUCE: self._first_produce,
            ApiKey.JOIN_GROUP: group(ApiKey.JOIN_GROUP, lambda request, version, context: membership().join_group(
                request, version, context.client_id, context.client_host)),
            ApiKey.HEARTBEAT: group(ApiKey.HEARTBEAT, lambda request, version, context: membership().heartbeat(
                request, version)),
            ApiKey.LEAVE_GROUP: group(ApiKey.LEAVE_GROUP, lambda request, version, context: membership().leave_group(
                request, version)),
            ApiKey.SYNC_GROUP: group(ApiKey.SYNC_GROUP, lambda request, version, context: membership().sync_group(
                request, version)),
            ApiKey.DESCRIBE_GROUPS: self._describe_groups,
            ApiKey.LIST_GROUPS: self._list_groups,
            ApiKey.SHARE_GROUP_HEARTBEAT: lambda *request: self.share.heartbeat(*request),
            ApiKey.SHARE_GROUP_DESCRIBE: lambda *request: self.share.describe(*request),
            ApiKey.SHARE_FETCH: lambda *request: self.share.share_fetch(*request),
            ApiKey.SHARE_ACKNOWLEDGE: lambda *request: self.share.share_acknowledge(*request),
        }

    @property
    def groups(self) -> GroupCoordinator:
        return self.state.groups

    def _group_configs(self) -> GroupConfigs:
        """The groups' own configs (in memory only where a coordinator is built without them, as in tests)."""
        configs = self.groups.configs
        if configs is None:
            from ..groups.group_configs import GroupConfigs
            configs = GroupConfigs(self._config)
        return configs

    @property
    def client_metrics(self) -> ClientMetrics:
        """The client metrics subscriptions and client instances (KIP-714), read on first use."""
        if self._client_metrics is None:
            from ..client_metrics import ClientMetrics  # (only telemetry and its configs need them)
            self._client_metrics = ClientMetrics(self._config.data_dir, self._config.telemetry_max_bytes)
            self._client_metrics.load()
        return self._client_metrics

    @property
    def producer_ids(self) -> ProducerIdBlock:
        """The producer ids (one block: ids never repeat), shared by an in-process cluster's nodes."""
        if self._producer_ids is None:
            if self._shared is not None:
                self._producer_ids = self._shared.producer_ids
            else:
                from ..transactions.producer_ids import ProducerIdBlock
                self._producer_ids = ProducerIdBlock(self._config.data_dir / "producer_ids.json")
        return self._producer_ids

    @property
    def transactions(self) -> TransactionCoordinator:
        """The transaction coordinator, shared by an in-process cluster's nodes; built, and its state log
        read, on first use."""
        return self._transactions if self._transactions is not None else self._build_transactions()

    def _build_transactions(self) -> TransactionCoordinator:
        if self._shared is not None:
            self._transactions = self._shared.transactions
            return self._transactions
        from ..transactions.coordinator import TransactionCoordinator  # (most brokers never see a transaction)
        from ..transactions.markers import MarkerWriter
        from ..transactions.state_log import TransactionStateLog
        config = self._config
        self._transactions = TransactionCoordinator(
            TransactionStateLog(config.data_dir), self.producer_ids,
            MarkerWriter(self._topics.log, self.purgatory.notify,  # (the groups: built on first use)
                         lambda *done: self.groups.offsets.complete_transactional_offsets(*done)),
            max_timeout_ms=config.transaction_max_timeout_ms, id_expiration_ms=config.transactional_id_expiration_ms)
        self._transactions.load()
        return self._transactions

    @property
    def transactions_built(self) -> bool:
        """Whether the transaction coordinator is built (if not, there is no transaction)."""
        return self._transactions is not None

    def recover_transactions(self) -> None:
        """At start: load the transaction state log, if there is one (transactions a crash left in
        PrepareCommit or PrepareAbort complete); without one the coordinator is built on first use."""
        if self._transactions is None and (self._config.data_dir / TRANSACTION_STATE_FILE_NAME).exists():
            self._build_transactions()

    @property
    def producer(self) -> ProduceHandler:
        """The produce path, built on the first Produce request."""
        if self._producer is None:
            from ..apis.produce import ProduceHandler
            config, state = self._config, self.state
            self._producer = ProduceHandler(
                self._topics, self.purgatory.notify, config.produce_max_decompressed_bytes,
                allowed=state.allowed if state.authorizer is not None else None,
                transactions=lambda: self.transactions, metrics=self._metrics,
                verify_transactions=config.transaction_partition_verification, view=state.view)
        return self._producer

    def _first_produce(self, request: Any, version: int, context: RequestContext) -> Awaitable[Any]:
        produce = self.table[ApiKey.PRODUCE] = self.producer.produce  # (the table holds it from now on)
        return produce(request, version, context)

    def _scram_in_memory(self) -> ScramStore:
        if self._scram is None:
            from ..security.scram_store import ScramStore  # (only SCRAM's admin APIs and SASL/SCRAM need it)
            self._scram = ScramStore(None)
        return self._scram

    @property
    def share(self) -> ShareApis:
        """The share groups' APIs and state, built on first use."""
        return self._share if self._share is not None else self._build_share()

    @property
    def share_built(self) -> bool:
        """Whether share groups' state is built (if not, there is no share group)."""
        return self._share is not None

    def _build_share(self) -> ShareApis:
        from ..apis.share import ShareApis  # (most brokers never see a share group)
        shared = self._shared
        self._share = ShareApis(self.state, shared.share if shared is not None else None, self._metrics)
        return self._share

    def _on_first_use(self, api_key: int, module: str, class_name: str,
                      method: str) -> Callable[..., Awaitable[Any]]:
        """A table entry that imports the API's module, builds its handler object (one per class,
        shared by its APIs) and puts the handler's method in its place, on the first request."""
        def first_request(request: Any, version: int, context: RequestContext) -> Awaitable[Any]:
            api = self._apis.get(class_name)
            if api is None:
                api_class = getattr(import_module(f"..apis.{module}", __package__), class_name)
                arguments = self._arguments.get(class_name, ())
                if callable(arguments):  # (what is itself built on first use)
                    arguments = arguments()
                api = self._apis[class_name] = api_class(self.state, *arguments)
            handler: Callable[..., Awaitable[Any]] = getattr(api, method)
            if self.table.get(api_key) is first_request:  # (unless something else has taken the key since)
                self.table[api_key] = handler
            return handler(request, version, context)
        return first_request

    def _apply_transaction_version(self, levels: dict[str, int]) -> None:
        """Serves the KIP-890 part 2 versions only while transaction.version is finalized at 2 or more
        (in place: connections read this node's table on every request)."""
        capped = with_transaction_version(self._served, levels.get("transaction.version", 0))
        for key in TRANSACTION_V2_VERSIONS:
            self.versions[key] = capped[key]

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
                denied = error_response(ApiKey.DESCRIBE_GROUPS, type(request)(groups=[described.group_id]), version,
                                        ErrorCode.GROUP_AUTHORIZATION_FAILED)
                response.groups = [denied.groups[0] if g is described else g for g in response.groups]
        return response

    async def _list_groups(self, request: Any, version: int, context: RequestContext) -> Any:
        response = await self.groups.list_groups(request, version)
        if response.error_code == ErrorCode.NONE:
            response.groups = [*response.groups, *(self.share.listed(request, version) if self.share_built else [])]
        if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
            response.groups = [g for g in response.groups  # only the groups it may describe
                               if self.state.allowed(context, Operation.DESCRIBE, ResourceType.GROUP, g.group_id)]
        return response

    def close(self) -> None:
        if self._apply_transaction_version in self.features.listeners:  # a stopped node serves nothing
            self.features.listeners.remove(self._apply_transaction_version)
        if self._producer is not None:
            self._producer.close()
        if self._share is not None:
            self._share.close()
        self.quotas.close()
        if self._owns_transactions and self._transactions is not None:
            self._transactions.close()

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


def _given(value: Any) -> Callable[[], Any]:
    """A function that gives ``value``: itself if it is one (the broker's, that builds the object on first
    use), else one that returns it."""
    return value if callable(value) else lambda: value


def _tokens_disabled() -> DelegationTokens:
    from ..delegation_tokens import DelegationTokens  # (only the delegation token APIs need them)
    return DelegationTokens(None, None, 1, 1)

"""AsyncAdminClient: Kafka's admin operations on asyncio, under confluent-kafka's AdminClient method names.

::

    async with AsyncAdminClient(bootstrap_servers="localhost:9092") as admin:
        results = await admin.create_topics([NewTopic("events", num_partitions=3)])
        if isinstance(results["events"], Exception):
            raise results["events"]

A call about several resources (topics, partitions, groups, config resources, ACL bindings, users)
returns a dict from each resource to its result, or to the exception it failed with, as
``asyncio.gather(..., return_exceptions=True)`` does: one topic that exists already does not hide the
others' outcomes. A call with one result returns it or raises. Exceptions are the client's own
(``kafkawire.client.errors``): a KafkaError (``code`` and ``name`` from the broker's error code, such
as TOPIC_ALREADY_EXISTS), UnknownTopicError, KafkaTimeoutError when retries ran out of time (naming the
broker(s) and the last cause), or an AuthenticationException.

Each request goes to the broker that can answer it, and retriable errors are retried until the call's
``request_timeout`` (default.api.timeout.ms): see ``router``. The calls are in parts, objects the client
owns, one concept a module: topics, cluster and configs (``topics``), partition leaders' (``partitions``),
replica moves and leader elections (``replicas``),
consumer groups (``groups``), share groups (``share_groups``), transactions (``transactions``), ACLs
SCRAM users and client quotas (``security``), delegation tokens (``delegation_tokens``).
Each part is given the client's AdminCalls (its router and call timeouts); the client's methods of
that name are the part's (``part_call``), which carry the signatures and docstrings.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.admin.config import AdminConfig
from ...core.properties import resolve
from ...errors import KafkaConnectionError
from .calls import AdminCalls, part_call
from .delegation_tokens import DelegationTokenAdmin
from .groups import GroupAdmin
from .partitions import PartitionAdmin
from .replicas import ReplicaAdmin
from .router import AdminRouter
from .security import SecurityAdmin
from .share_groups import ShareGroupAdmin
from .topics import TopicAdmin
from .transactions import TransactionAdmin

__all__ = ["AsyncAdminClient"]


class AsyncAdminClient:
    """Kafka's admin client on asyncio (see the module docstring). Settings: an AdminConfig, a mapping of
    Kafka's property names, or keyword properties."""

    def __init__(self, config: AdminConfig | Mapping[str, Any] | None = None, **properties: Any) -> None:
        self.config = resolve(AdminConfig, config, properties)
        if not self.config.bootstrap_servers:
            raise ValueError("bootstrap.servers is required")
        self._router = AdminRouter(self.config)
        calls = AdminCalls(self._router)
        self._topics = TopicAdmin(calls)
        self._partitions = PartitionAdmin(calls)
        self._replicas = ReplicaAdmin(calls)
        self._groups = GroupAdmin(calls)
        self._share_groups = ShareGroupAdmin(calls)
        self._transactions = TransactionAdmin(calls)
        self._security = SecurityAdmin(calls)
        self._tokens = DelegationTokenAdmin(calls)

    # ---- the parts' calls ------------------------------------------------------------------------------------
    create_topics = part_call("_topics", TopicAdmin.create_topics)
    delete_topics = part_call("_topics", TopicAdmin.delete_topics)
    create_partitions = part_call("_topics", TopicAdmin.create_partitions)
    describe_topics = part_call("_topics", TopicAdmin.describe_topics)
    describe_cluster = part_call("_topics", TopicAdmin.describe_cluster)
    list_topics = part_call("_topics", TopicAdmin.list_topics)
    describe_configs = part_call("_topics", TopicAdmin.describe_configs)
    alter_configs = part_call("_topics", TopicAdmin.alter_configs)
    incremental_alter_configs = part_call("_topics", TopicAdmin.incremental_alter_configs)

    list_offsets = part_call("_partitions", PartitionAdmin.list_offsets)
    delete_records = part_call("_partitions", PartitionAdmin.delete_records)
    describe_producers = part_call("_partitions", PartitionAdmin.describe_producers)

    alter_partition_reassignments = part_call("_replicas", ReplicaAdmin.alter_partition_reassignments)
    list_partition_reassignments = part_call("_replicas", ReplicaAdmin.list_partition_reassignments)
    elect_leaders = part_call("_replicas", ReplicaAdmin.elect_leaders)

    list_consumer_groups = part_call("_groups", GroupAdmin.list_consumer_groups)
    describe_consumer_groups = part_call("_groups", GroupAdmin.describe_consumer_groups)
    delete_consumer_groups = part_call("_groups", GroupAdmin.delete_consumer_groups)
    list_consumer_group_offsets = part_call("_groups", GroupAdmin.list_consumer_group_offsets)
    alter_consumer_group_offsets = part_call("_groups", GroupAdmin.alter_consumer_group_offsets)
    delete_consumer_group_offsets = part_call("_groups", GroupAdmin.delete_consumer_group_offsets)

    list_share_groups = part_call("_share_groups", ShareGroupAdmin.list_share_groups)
    describe_share_groups = part_call("_share_groups", ShareGroupAdmin.describe_share_groups)
    delete_share_groups = part_call("_share_groups", ShareGroupAdmin.delete_share_groups)
    list_share_group_offsets = part_call("_share_groups", ShareGroupAdmin.list_share_group_offsets)
    alter_share_group_offsets = part_call("_share_groups", ShareGroupAdmin.alter_share_group_offsets)
    delete_share_group_offsets = part_call("_share_groups", ShareGroupAdmin.delete_share_group_offsets)

    describe_transactions = part_call("_transactions", TransactionAdmin.describe_transactions)
    list_transactions = part_call("_transactions", TransactionAdmin.list_transactions)

    create_acls = part_call("_security", SecurityAdmin.create_acls)
    describe_acls = part_call("_security", SecurityAdmin.describe_acls)
    delete_acls = part_call("_security", SecurityAdmin.delete_acls)
    describe_user_scram_credentials = part_call("_security", SecurityAdmin.describe_user_scram_credentials)
    alter_user_scram_credentials = part_call("_security", SecurityAdmin.alter_user_scram_credentials)
    describe_client_quotas = part_call("_security", SecurityAdmin.describe_client_quotas)
    alter_client_quotas = part_call("_security", SecurityAdmin.alter_client_quotas)

    create_delegation_token = part_call("_tokens", DelegationTokenAdmin.create_delegation_token)
    renew_delegation_token = part_call("_tokens", DelegationTokenAdmin.renew_delegation_token)
    expire_delegation_token = part_call("_tokens", DelegationTokenAdmin.expire_delegation_token)
    describe_delegation_token = part_call("_tokens", DelegationTokenAdmin.describe_delegation_token)

    # ---- lifecycle ------------------------------------------------------------------------------------------

    @property
    def retries(self) -> int:
        """Resources sent again after a retriable error, since the client was made."""
        return self._router.retries

    async def start(self) -> None:
        """Connect and load the cluster's metadata (the first call does it otherwise), trying the
        bootstrap servers again for up to default.api.timeout.ms. Raises KafkaTimeoutError when none
        answers in time, an AuthenticationException when one refuses the credentials."""
        if self._router.closed:
            raise KafkaConnectionError("the admin client is closed")
        await self._router.metadata.refresh_within(self.config.default_api_timeout_ms, "fetching metadata")

    async def close(self) -> None:
        """Close the connections; calls in flight end with KafkaConnectionError, later ones too."""
        await self._router.close()

    async def __aenter__(self) -> AsyncAdminClient:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()



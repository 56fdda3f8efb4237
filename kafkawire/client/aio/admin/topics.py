"""The admin client's topic, cluster and config calls (a part of AsyncAdminClient, ``aio.admin``): requests
any broker answers, built and read by ``core.admin_topics`` and ``core.admin_configs``."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import (
    AlterConfigsRequest, DeleteTopicsRequest, DescribeConfigsRequest, DescribeTopicPartitionsRequest,
    IncrementalAlterConfigsRequest, MetadataRequest,
)

from ...core.admin import resource_configs as configs
from ...core.admin import topics
from ...core.admin.errors import Retry
from ...core.admin.resource_configs import ConfigResource, ConfigResourceType
from ...core.admin.topics import DescribeClusterResult, NewPartitions, NewTopic, TopicDescription
from ...errors import AuthenticationException, KafkaConnectionError
from ..connection import BrokerConnection
from .calls import AdminPart, raise_or, unique

__all__ = ["TopicAdmin"]

_DESCRIBE_TOPIC_PARTITIONS = DescribeTopicPartitionsRequest.API_KEY
_NODE_RESOURCES = (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER)  # answered by that broker only


class TopicAdmin(AdminPart):
    """create_topics, delete_topics, create_partitions, describe_topics, describe_cluster and the config
    calls. Per-resource calls return ``{resource: result or exception}``."""

    partitions_per_page = 2000  # DescribeTopicPartitions' ResponsePartitionLimit (Kafka's default)

    # ---- topics ------------------------------------------------------------------------------------------
    async def create_topics(self, new_topics: Sequence[NewTopic], *, operation_timeout: float | None = None,
                            request_timeout: float | None = None, validate_only: bool = False
                            ) -> dict[str, object]:
        """Create topics: ``{name: None or exception}`` (TOPIC_ALREADY_EXISTS, INVALID_CONFIG, ...)."""
        by_name = {t.topic: t for t in new_topics}
        unique((t.topic for t in new_topics), "topic")
        broker_timeout = self._calls.operation_ms(operation_timeout, request_timeout)

        async def attempt(names: list[str]) -> dict[str, object]:
            request = topics.create_topics_request([by_name[n] for n in names], broker_timeout, validate_only)
            return topics.read_create_topics(await self._calls.send_any(request))
        return await self._router.run(by_name, attempt, self._calls.timeout_ms(request_timeout), "create_topics")

    async def delete_topics(self, names: Sequence[str], *, operation_timeout: float | None = None,
                            request_timeout: float | None = None) -> dict[str, object]:
        """Delete topics by name: ``{name: None or exception}``."""
        broker_timeout = self._calls.operation_ms(operation_timeout, request_timeout)

        async def attempt(pending: list[str]) -> dict[str, object]:
            connection = await self._router.any_connection()
            version = connection.api_version(DeleteTopicsRequest.API_KEY)
            response = await connection.send(topics.delete_topics_request(version, pending, broker_timeout), version)
            return topics.read_delete_topics(response)
        return await self._router.run(unique(names, "topic"), attempt, self._calls.timeout_ms(request_timeout),
                                      "delete_topics")

    async def create_partitions(self, new_partitions: Sequence[NewPartitions], *,
                                operation_timeout: float | None = None, request_timeout: float | None = None,
                                validate_only: bool = False) -> dict[str, object]:
        """Add partitions to topics: ``{name: None or exception}`` (INVALID_PARTITIONS when not a growth)."""
        by_name = {p.topic: p for p in new_partitions}
        unique((p.topic for p in new_partitions), "topic")
        broker_timeout = self._calls.operation_ms(operation_timeout, request_timeout)

        async def attempt(names: list[str]) -> dict[str, object]:
            request = topics.create_partitions_request([by_name[n] for n in names], broker_timeout, validate_only)
            return topics.read_create_partitions(await self._calls.send_any(request))
        return await self._router.run(by_name, attempt, self._calls.timeout_ms(request_timeout), "create_partitions")

    async def describe_topics(self, names: Sequence[str] | object, *, request_timeout: float | None = None,
                              include_authorized_operations: bool = False) -> dict[str, object]:
        """``{name: TopicDescription or exception}``, by DescribeTopicPartitions (KIP-966, paged) where the
        broker serves it, else Metadata. ``names`` may be a confluent-style TopicCollection."""
        names = unique(cast("Iterable[str]", getattr(names, "topic_names", names)), "topic")

        async def attempt(pending: list[str]) -> dict[str, object]:
            connection = await self._router.any_connection()
            if _DESCRIBE_TOPIC_PARTITIONS in connection.api_versions:
                return await self._describe_topic_partitions(connection, pending)
            version = connection.api_version(MetadataRequest.API_KEY, 1)
            request = topics.metadata_request(version, pending, include_authorized_operations)
            return topics.read_topic_descriptions(await connection.send(request, version), pending)
        return await self._router.run(names, attempt, self._calls.timeout_ms(request_timeout), "describe_topics")

    async def _describe_topic_partitions(self, connection: BrokerConnection,
                                         names: list[str]) -> dict[str, object]:
        collected: dict[str, tuple[object, list]] = {}
        cursor = None
        while True:
            request = topics.describe_topic_partitions_request(names, cursor, self.partitions_per_page)
            response = await connection.send(request)
            cursor = topics.read_describe_topic_partitions(response, collected)
            if cursor is None:
                break
        if not self._router.nodes():
            await self._router.metadata.refresh()
        return topics.topic_descriptions_from_pages(collected, self._router.nodes(), names)

    async def describe_cluster(self, *, request_timeout: float | None = None,
                               include_authorized_operations: bool = False) -> DescribeClusterResult:
        """The cluster id, controller and brokers (DescribeCluster)."""
        async def attempt() -> object:
            request = topics.describe_cluster_request(include_authorized_operations)
            return topics.read_describe_cluster(await self._calls.send_any(request))
        return raise_or(await self._router.run_one(attempt, self._calls.timeout_ms(request_timeout),
                                                    "describe_cluster"))

    async def list_topics(self, *, request_timeout: float | None = None,
                          include_internal: bool = False) -> dict[str, TopicDescription]:
        """Every topic (Metadata for all topics), by name."""
        async def attempt() -> object:
            connection = await self._router.any_connection()
            version = connection.api_version(MetadataRequest.API_KEY, 1)
            request = MetadataRequest(topics=None, allow_auto_topic_creation=version < 4)
            response = await connection.send(request, version)
            names = [t.name for t in response.topics if t.name is not None]
            found = topics.read_topic_descriptions(response, names)
            return {name: d for name, d in found.items()
                    if isinstance(d, TopicDescription) and (include_internal or not d.is_internal)}
        return raise_or(await self._router.run_one(attempt, self._calls.timeout_ms(request_timeout), "list_topics"))

    # ---- configs -----------------------------------------------------------------------------------------
    async def _per_config_node(self, resources: Sequence[ConfigResource], build, read, what: str,
                               request_timeout: float | None) -> dict[ConfigResource, object]:
        """Send the resources of each broker (BROKER, BROKER_LOGGER) to that broker, the rest to any."""
        by_key = {r.key: r for r in unique(resources, "config resource")}

        async def attempt(pending: list[ConfigResource]) -> dict[ConfigResource, object]:
            groups: dict[int | None, list[ConfigResource]] = {}
            for resource in pending:
                node = None
                if resource.restype in _NODE_RESOURCES and resource.name:
                    node = int(resource.name)
                groups.setdefault(node, []).append(resource)
            outcomes: dict[ConfigResource, object] = {}
            for node, batch in groups.items():
                if node is not None and node not in self._router.metadata.cluster.brokers \
                        and node not in await self._router.broker_ids():
                    outcomes.update(dict.fromkeys(batch, KafkaConnectionError(f"broker {node} is not in the cluster")))
                    continue
                try:
                    connection = (await self._router.any_connection() if node is None
                                  else await self._router.connection(node))
                    request, version = build(connection, batch)
                    response = await connection.send(request, version)
                except KafkaConnectionError as error:
                    if isinstance(error, AuthenticationException):
                        raise
                    outcomes.update(dict.fromkeys(batch, Retry(ErrorCode.NETWORK_EXCEPTION, str(error))))
                    continue
                for key, outcome in read(response).items():
                    if key in by_key:
                        outcomes[by_key[key]] = outcome
            return outcomes
        return await self._router.run(list(by_key.values()), attempt, self._calls.timeout_ms(request_timeout), what)

    async def describe_configs(self, resources: Sequence[ConfigResource], *, request_timeout: float | None = None,
                               include_synonyms: bool = False, include_documentation: bool = False
                               ) -> dict[ConfigResource, object]:
        """``{resource: {config name: ConfigEntry} or exception}``."""
        def build(connection: BrokerConnection, batch: list[ConfigResource]):
            version = connection.api_version(DescribeConfigsRequest.API_KEY)
            return configs.describe_configs_request(version, batch, include_synonyms, include_documentation), version
        return await self._per_config_node(resources, build, configs.read_describe_configs, "describe_configs",
                                           request_timeout)

    async def alter_configs(self, resources: Sequence[ConfigResource], *, request_timeout: float | None = None,
                            validate_only: bool = False) -> dict[ConfigResource, object]:
        """Replace each resource's configs with its ``set_config`` (AlterConfigs: configs not named return
        to their defaults; prefer ``incremental_alter_configs``): ``{resource: None or exception}``."""
        def build(connection: BrokerConnection, batch: list[ConfigResource]):
            version = connection.api_version(AlterConfigsRequest.API_KEY)
            return configs.alter_configs_request(batch, validate_only), version
        return await self._per_config_node(resources, build, configs.read_alter_configs, "alter_configs",
                                           request_timeout)

    async def incremental_alter_configs(self, resources: Sequence[ConfigResource], *,
                                        request_timeout: float | None = None, validate_only: bool = False
                                        ) -> dict[ConfigResource, object]:
        """Apply each resource's ``incremental_configs`` (SET, DELETE, APPEND, SUBTRACT), leaving the other
        configs as they are: ``{resource: None or exception}``."""
        for resource in resources:  # refused before anything is sent, as confluent-kafka does
            configs.incremental_alter_configs_request([resource], validate_only)

        def build(connection: BrokerConnection, batch: list[ConfigResource]):
            version = connection.api_version(IncrementalAlterConfigsRequest.API_KEY)
            return configs.incremental_alter_configs_request(batch, validate_only), version
        return await self._per_config_node(resources, build, configs.read_alter_configs,
                                           "incremental_alter_configs", request_timeout)


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
``request_timeout`` (default.api.timeout.ms): see ``router``. The calls are in parts, one concept
a module: topics, cluster and configs (``topics``), partition leaders' (``partitions``),
consumer groups (``groups``), transactions (``transactions``), ACLs and SCRAM users
(``security``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.admin.config import AdminConfig
from ...core.properties import resolve
from ...errors import KafkaConnectionError
from .groups import GroupAdmin
from .partitions import PartitionAdmin
from .router import AdminRouter
from .security import SecurityAdmin
from .topics import TopicAdmin
from .transactions import TransactionAdmin

__all__ = ["AsyncAdminClient"]



class AsyncAdminClient(TopicAdmin, PartitionAdmin, GroupAdmin, TransactionAdmin, SecurityAdmin):
    """Kafka's admin client on asyncio (see the module docstring). Settings: an AdminConfig, a mapping of
    Kafka's property names, or keyword properties."""

    def __init__(self, config: AdminConfig | Mapping[str, Any] | None = None, **properties: Any) -> None:
        self.config = resolve(AdminConfig, config, properties)
        if not self.config.bootstrap_servers:
            raise ValueError("bootstrap.servers is required")
        self._router = AdminRouter(self.config)

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



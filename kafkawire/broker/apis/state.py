"""What the request handlers share: the broker's settings, topics, groups and fetch machinery."""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...acl_types import TOPIC_OPERATIONS, ResourceType
from ...acl_types import AclOperation as Operation

if TYPE_CHECKING:  # (the state is built by dispatch.handlers: the classes are only named here)
    from ..config.broker_config import BrokerConfig
    from ..fetch.purgatory import FetchPurgatory
    from ..fetch.sessions import FetchSessionCache
    from ..groups.coordinator import GroupCoordinator
    from ..network.listeners import Listener
    from ..node_view import NodeView
    from ..quotas import ClientQuotas
    from ..security.acls import Authorizer
    from ..security.scram_store import ScramStore
    from ..topics import TopicManager

__all__ = ["BrokerState", "RequestContext", "CLOSE_CONNECTION", "CloseConnection"]


class CloseConnection:
    """What a handler returns when Kafka answers by closing the connection (acks=0 produce with errors)."""


CLOSE_CONNECTION = CloseConnection()


@dataclass
class RequestContext:
    """Who sent a request, and where: the listener (whose advertised address Metadata gives), the
    principal (``User:<name>``, ``User:ANONYMOUS`` before or without authentication), the client."""

    listener: Listener
    port: int  # the listener's bound port
    principal: str
    client_host: str
    client_id: str
    client_software_name: str = ""  # from the connection's ApiVersions (v3+)
    client_software_version: str = ""
    token_authenticated: bool = False  # authenticated with a delegation token (SCRAM's tokenauth)
    throttle_ms: int = 0  # a throttle time the handler gave (controller mutations), for the response

    @property
    def may_manage_tokens(self) -> bool:
        """Kafka's ``allowTokenRequests``: delegation token requests need a SASL connection, or TLS with a
        client certificate, not authenticated with a token itself."""
        if self.token_authenticated:
            return False
        return self.listener.sasl or (self.listener.tls and self.principal != "User:ANONYMOUS")

    @property
    def user(self) -> str:
        """The principal's name, as client quotas name users (``ANONYMOUS`` before authentication)."""
        return self.principal.partition(":")[2] or self.principal

    @property
    def advertised(self) -> tuple[str, int]:
        return self.listener.advertised(self.port)


@dataclass
class BrokerState:
    config: BrokerConfig
    topics: TopicManager
    group_coordinator: Callable[[], GroupCoordinator]  # gives it (the broker builds it on first use)
    port: int
    versions: dict[int, tuple[int, int]]  # API key -> (oldest, newest) served
    purgatory: FetchPurgatory
    sessions: FetchSessionCache
    scram_store: Callable[[], ScramStore]  # gives it (read on first use)
    authorizer: Authorizer | None  # None: every request is allowed (no authorizer.class.name)
    view: NodeView  # what this node leads and coordinates (a single broker: everything)
    quotas: ClientQuotas  # the client quotas this node enforces

    @property
    def groups(self) -> GroupCoordinator:
        return self.group_coordinator()

    @property
    def scram(self) -> ScramStore:
        return self.scram_store()

    def allowed(self, context: RequestContext, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether the request's principal may do ``operation`` on the resource (always, without an
        authorizer)."""
        authorizer = self.authorizer
        return authorizer is None or authorizer.authorize(context.principal, context.client_host, operation,
                                                          resource_type, name)

    def topic_operations(self, context: RequestContext, name: str) -> int:
        """The bit field of the operations the principal may do on the topic (Kafka's authorizedOperations,
        as Metadata and DescribeTopicPartitions report them)."""
        bits = 0
        for operation in TOPIC_OPERATIONS:
            if self.allowed(context, operation, ResourceType.TOPIC, name):
                bits |= 1 << operation
        return bits

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.topics.by_id.get(topic_id)
        return topic.name if topic is not None else None

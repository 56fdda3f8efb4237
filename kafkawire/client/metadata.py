"""Cluster metadata: brokers, topic ids, partitions and their leaders, from Metadata responses.

``ClusterMetadata`` is the state, sans I/O: ``update(response)`` takes a MetadataResponse in, the
rest are lookups. ``Metadata`` keeps it fresh over a ConnectionManager: it bootstraps from
``bootstrap.servers``, refreshes the topics the client uses on demand (``request_update()`` after
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION and the like, or when a topic is first needed),
every ``metadata.max.age.ms`` otherwise, and lets callers wait for a topic to appear.

Only one Metadata request is in flight at a time; callers asking meanwhile share its answer, and a
request for topics it did not cover starts another once it is done.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from uuid import UUID

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import MetadataRequest, MetadataResponse

from .common import TopicPartition
from .connection import ConnectionManager, IncompatibleBrokerError, KafkaConnectionError, KafkaError

__all__ = ["ClusterMetadata", "Metadata", "BrokerInfo", "PartitionInfo", "TopicInfo", "UnknownTopicError",
           "METADATA_REFRESH_ERRORS"]

log = logging.getLogger(__name__)

_ZERO_UUID = UUID(int=0)
_METADATA_MIN_VERSION = 1  # v1 is the first that can ask for no topics and that names the controller
# Partition or topic errors in produce, fetch and offset responses that mean "look the leader up again".
METADATA_REFRESH_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.INCONSISTENT_TOPIC_ID,
})
# Topic errors in a Metadata response that waiting may cure (the topic is being created, elected...).
_TRANSIENT_TOPIC_ERRORS = frozenset({ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_ID})


class UnknownTopicError(KafkaError):
    """A topic the cluster does not have (and would not create), or whose metadata did not arrive in time."""


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int | None  # None: no leader now
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    error_code: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: UUID
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    is_internal: bool = False


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class ClusterMetadata:
    """What the last Metadata responses said about the cluster."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_errors: dict[str, int] = {}  # topics whose last lookup failed, and why
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.updated_ms: float | None = None
        self.version = 0  # bumped by every update, so callers can tell whether anything was learned

    def update(self, response: MetadataResponse, now_ms: float, requested: Iterable[str] | None = None) -> None:
        """Take a response in. Topics in it replace what was known of them; with ``requested`` (the
        names asked for), a name the response left out counts as unknown."""
        if response.brokers:
            self.brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        seen = set()
        for topic in response.topics:
            name = topic.name
            if name is None:
                continue
            seen.add(name)
            if topic.error_code:
                self.topic_errors[name] = topic.error_code
                # a topic between leaders keeps its last known layout; a missing or refused one is dropped
                if topic.error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                    self.topics.pop(name, None)
                continue
            self.topic_errors.pop(name, None)
            info = TopicInfo(name, topic.topic_id or _ZERO_UUID, {}, bool(topic.is_internal))
            for p in topic.partitions:
                leader = p.leader_id if p.leader_id >= 0 and not p.error_code else None
                info.partitions[p.partition_index] = PartitionInfo(
                    name, p.partition_index, leader, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes),
                    p.error_code)
            self.topics[name] = info
        for name in requested or ():
            if name not in seen:
                self.topics.pop(name, None)
                self.topic_errors[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        self.updated_ms = now_ms
        self.version += 1

    # ---- lookups ---------------------------------------------------------------------------------
    def broker(self, node_id: int) -> BrokerInfo | None:
        return self.brokers.get(node_id)

    def partitions_for(self, topic: str) -> list[int] | None:
        """The topic's partition numbers, None if the topic is not known."""
        info = self.topics.get(topic)
        return sorted(info.partitions) if info is not None else None

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions of ``topic`` that have a leader."""
        info = self.topics.get(topic)
        if info is None:
            return []
        return [p for p, data in sorted(info.partitions.items()) if data.leader is not None]

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        info = self.topics.get(tp.topic)
        return info.partitions.get(tp.partition) if info is not None else None

    def leader(self, tp: TopicPartition) -> int | None:
        data = self.partition(tp)
        if data is None or data.leader is None or data.leader not in self.brokers:
            return None
        return data.leader

    def leaders(self, topics: Iterable[str]) -> dict[TopicPartition, int | None]:
        """Every partition of ``topics`` (those known) with its leader (None when there is none)."""
        out: dict[TopicPartition, int | None] = {}
        for topic in topics:
            info = self.topics.get(topic)
            if info is None:
                continue
            for p, data in info.partitions.items():
                leader = data.leader if data.leader in self.brokers else None
                out[TopicPartition(topic, p)] = leader
        return out

    def topic_id(self, topic: str) -> UUID | None:
        info = self.topics.get(topic)
        if info is None or info.topic_id == _ZERO_UUID:
            return None
        return info.topic_id

    def topic_ids(self) -> dict[str, UUID]:
        return {name: info.topic_id for name, info in self.topics.items() if info.topic_id != _ZERO_UUID}

    def __repr__(self) -> str:
        return f"ClusterMetadata(brokers={sorted(self.brokers)}, topics={sorted(self.topics)})"


class Metadata:
    """Keeps a ClusterMetadata fresh for the topics a client uses."""

    def __init__(self, connections: ConnectionManager, bootstrap_servers: Iterable[str], *,
                 allow_auto_topic_creation: bool = True, metadata_max_age_ms: float = 300_000,
                 retry_backoff_ms: float = 100):
        self.connections = connections
        self.bootstrap_servers = tuple(bootstrap_servers)
        if not self.bootstrap_servers:
            raise ValueError("bootstrap.servers is empty: name at least one broker as host:port")
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.cluster = ClusterMetadata()
        self.topics: set[str] = set()  # the topics this client needs
        self.refreshes = 0
        self.last_error: BaseException | None = None
        self._needs_update = True
        self._refresh: asyncio.Task | None = None
        self._refresh_topics: frozenset[str] = frozenset()
        self._listeners: list[Callable[[ClusterMetadata], None]] = []
        self._last_attempt_ms = float("-inf")

    def add_listener(self, listener: Callable[[ClusterMetadata], None]) -> None:
        """Call ``listener(cluster)`` after every successful refresh."""
        self._listeners.append(listener)

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track ``topics`` too; True if any was new (a refresh is then due)."""
        new = set(topics) - self.topics
        if new:
            self.topics |= new
            self._needs_update = True
        return bool(new)

    def set_topics(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        if topics != self.topics:
            self.topics = topics
            self._needs_update = True

    def request_update(self) -> None:
        """Refresh at the next ``maybe_refresh`` (a leader moved, a topic is missing, ...)."""
        self._needs_update = True

    @property
    def needs_update(self) -> bool:
        if self._needs_update:
            return True
        updated = self.cluster.updated_ms
        return updated is None or _now_ms() - updated >= self.metadata_max_age_ms

    def maybe_refresh(self) -> asyncio.Task | None:
        """Start a refresh in the background if one is due (and not backing off); returns its task."""
        if self._refresh is not None and not self._refresh.done():
            return self._refresh
        if not self.needs_update or _now_ms() - self._last_attempt_ms < self.retry_backoff_ms:
            return None
        return self._start_refresh()

    async def refresh(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Fetch metadata now for the tracked topics (plus ``topics``); shares a refresh in flight
        when it covers them. Raises KafkaConnectionError when no broker answers."""
        if topics is not None:
            self.add_topics(topics)
        while True:
            task = self._refresh
            if task is None or task.done() or not self.topics <= self._refresh_topics:
                if task is not None and not task.done():
                    await asyncio.shield(task)  # one at a time; then ask for what it lacked
                    continue
                task = self._start_refresh()
            await asyncio.shield(task)
            error = task.exception()
            if error is not None:
                raise error
            return self.cluster

    def _start_refresh(self) -> asyncio.Task:
        self._refresh_topics = frozenset(self.topics)
        self._needs_update = False
        self._last_attempt_ms = _now_ms()
        self._refresh = asyncio.get_running_loop().create_task(self._do_refresh(self._refresh_topics))
        self._refresh.add_done_callback(_consume_exception)
        return self._refresh

    async def _do_refresh(self, topics: frozenset[str]) -> None:
        try:
            connection = await self._any_connection()
            version = connection.api_version(MetadataRequest.API_KEY, _METADATA_MIN_VERSION)
            names = sorted(topics)
            request = MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=name, topic_id=_ZERO_UUID) for name in names],
                allow_auto_topic_creation=self.allow_auto_topic_creation,
                include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
            response = await connection.send(request, version)
        except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
            self._needs_update = True
            self.last_error = error
            raise
        self.cluster.update(response, _now_ms(), names)
        self.refreshes += 1
        self.last_error = None
        self.connections.update_brokers({b.node_id: (b.host, b.port) for b in self.cluster.brokers.values()})
        if self.cluster.brokers and connection.node_id is None:
            await self.connections.close_bootstrap()  # from now on brokers are reached by node id
        if any(code in _TRANSIENT_TOPIC_ERRORS for name, code in self.cluster.topic_errors.items() if name in topics) \
                or any(p.leader is None for t in topics if t in self.cluster.topics
                       for p in self.cluster.topics[t].partitions.values()):
            self._needs_update = True  # a topic being created or a leader being elected: look again soon
        for listener in tuple(self._listeners):
            listener(self.cluster)

    async def _any_connection(self):
        """A connection to a known broker, else to a bootstrap server."""
        for node_id in sorted(self.cluster.brokers):
            ready = self.connections.get_ready(node_id)
            if ready is not None:
                return ready
        for node_id in sorted(self.cluster.brokers):
            try:
                return await self.connections.connection(node_id)
            except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
                log.debug("metadata: broker %d unreachable: %s", node_id, error)
        return await self.connections.bootstrap(self.bootstrap_servers)

    async def wait_for_topic(self, topic: str, timeout_ms: float) -> TopicInfo:
        """The topic's metadata, refreshing until it has partitions with leaders or ``timeout_ms`` passes
        (then UnknownTopicError, or the last connection error)."""
        self.add_topics([topic])
        deadline = _now_ms() + timeout_ms
        while True:
            info = self.cluster.topics.get(topic)
            if info is not None and any(p.leader is not None for p in info.partitions.values()):
                return info
            code = self.cluster.topic_errors.get(topic)
            if code is not None and code not in _TRANSIENT_TOPIC_ERRORS:
                raise UnknownTopicError(code, f"topic {topic!r}")
            remaining = deadline - _now_ms()
            if remaining <= 0:
                if isinstance(self.last_error, KafkaConnectionError):
                    raise KafkaConnectionError(f"no metadata for topic {topic!r} within {timeout_ms:.0f} ms: "
                                               f"{self.last_error}")
                raise UnknownTopicError(code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        f"topic {topic!r} not present in metadata after {timeout_ms:.0f} ms")
            try:
                await asyncio.wait_for(self.refresh(), remaining / 1000)
            except asyncio.TimeoutError:
                continue
            except (KafkaConnectionError, IncompatibleBrokerError):
                await asyncio.sleep(min(self.retry_backoff_ms, max(remaining, 0)) / 1000)
                continue
            if topic not in self.cluster.topics or not self.cluster.topics[topic].partitions:
                await asyncio.sleep(min(self.retry_backoff_ms, max(deadline - _now_ms(), 0)) / 1000)

    async def close(self) -> None:
        if self._refresh is not None and not self._refresh.done():
            self._refresh.cancel()


def _consume_exception(task: asyncio.Task) -> None:
    # a background refresh's failure is kept in last_error; do not log "never retrieved"
    if not task.cancelled():
        task.exception()

"""Cluster metadata as data: brokers, topic ids, partitions and their leaders, from Metadata responses.

``ClusterMetadata.update(response)`` takes a MetadataResponse in; the rest are lookups. Keeping it
fresh is the driver's job (``kafkawire.client.aio.metadata_refresh``).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import MetadataResponse

from .topic_partition import TopicPartition

__all__ = ["ClusterMetadata", "BrokerInfo", "PartitionInfo", "TopicInfo", "METADATA_REFRESH_ERRORS",
           "TRANSIENT_TOPIC_ERRORS"]

_ZERO_UUID = UUID(int=0)
# Partition or topic errors in produce, fetch and offset responses that mean "look the leader up again".
METADATA_REFRESH_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.INCONSISTENT_TOPIC_ID,
})
# Topic errors in a Metadata response that waiting may cure (the topic is being created, elected...).
TRANSIENT_TOPIC_ERRORS = frozenset({ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_ID})


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

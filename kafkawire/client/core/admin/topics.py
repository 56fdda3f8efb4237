"""Topics and the cluster for the admin client: what a caller passes (NewTopic, NewPartitions), what it
gets back (TopicDescription, DescribeClusterResult), and the requests and answers of CreateTopics,
DeleteTopics, CreatePartitions, DescribeTopicPartitions, Metadata and DescribeCluster at each version.
Plain data and functions: the drivers (``kafkawire.client.aio.admin.client``) send them."""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import (
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterRequest, DescribeClusterResponse,
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, MetadataRequest, MetadataResponse,
)

from ...errors import KafkaError
from .errors import Retry, error_for, outcome_of

__all__ = ["Node", "NewTopic", "NewPartitions", "TopicPartitionInfo", "TopicDescription", "DescribeClusterResult",
           "create_topics_request", "read_create_topics", "delete_topics_request", "read_delete_topics",
           "create_partitions_request", "read_create_partitions", "metadata_request", "read_topic_descriptions",
           "describe_topic_partitions_request", "read_describe_topic_partitions", "describe_cluster_request",
           "read_describe_cluster", "topic_descriptions_from_pages", "operations"]

_ZERO_UUID = uuid.UUID(int=0)
Outcome = object  # a resource's result, None for success without one, a Retry, or a KafkaError


@dataclass(frozen=True)
class Node:
    """A broker: its id, address and rack."""

    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class NewTopic:
    """A topic to create: ``num_partitions`` and ``replication_factor`` (-1: the broker's defaults), or
    ``replica_assignment`` (one list of broker ids per partition), and topic ``config``."""

    topic: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: Sequence[Sequence[int]] | None = None
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass
class NewPartitions:
    """Grow ``topic`` to ``new_total_count`` partitions (optionally placing the new ones)."""

    topic: str
    new_total_count: int
    replica_assignment: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True)
class TopicPartitionInfo:
    id: int
    leader: Node | None
    replicas: tuple[Node, ...]
    isr: tuple[Node, ...]


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: tuple[TopicPartitionInfo, ...]
    authorized_operations: tuple[int, ...] | None = None


@dataclass(frozen=True)
class DescribeClusterResult:
    controller: Node | None
    nodes: tuple[Node, ...]
    cluster_id: str | None = None
    authorized_operations: tuple[int, ...] | None = None


def operations(bits: int) -> tuple[int, ...] | None:
    """The AclOperation values in a bit field of authorized operations (None when not asked: -2^31)."""
    if bits == -2147483648:
        return None
    return tuple(op for op in range(32) if bits & (1 << op))


# ---- CreateTopics / DeleteTopics / CreatePartitions ---------------------------------------------------------

def create_topics_request(topics: Iterable[NewTopic], timeout_ms: int, validate_only: bool) -> CreateTopicsRequest:
    creatable = []
    for topic in topics:
        assignments = [CreateTopicsRequest.CreatableReplicaAssignment(partition_index=index, broker_ids=list(ids))
                       for index, ids in enumerate(topic.replica_assignment or ())]
        creatable.append(CreateTopicsRequest.CreatableTopic(
            name=topic.topic, num_partitions=-1 if assignments else topic.num_partitions,
            replication_factor=-1 if assignments else topic.replication_factor, assignments=assignments,
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=name, value=None if value is None else str(value))
                     for name, value in topic.config.items()]))
    return CreateTopicsRequest(topics=creatable, timeout_ms=timeout_ms, validate_only=validate_only)


def _topic_outcome(code: int, message: str | None, name: str | None) -> Outcome:
    if code == ErrorCode.NOT_CONTROLLER:  # the controller moved: ask again
        return Retry(code, message)
    if code == ErrorCode.REQUEST_TIMED_OUT:  # outlasted TimeoutMs, and may yet complete: say so, as Java does
        return error_for(code, message, f"topic {name!r}")
    return outcome_of(code, message, f"topic {name!r}")


def read_create_topics(response: CreateTopicsResponse) -> dict[str, Outcome]:
    return {t.name: _topic_outcome(t.error_code, t.error_message, t.name) for t in response.topics}


def delete_topics_request(version: int, names: Sequence[str], timeout_ms: int) -> DeleteTopicsRequest:
    if version >= 6:
        return DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name, topic_id=_ZERO_UUID)
                                           for name in names], timeout_ms=timeout_ms)
    return DeleteTopicsRequest(topic_names=list(names), timeout_ms=timeout_ms)


def read_delete_topics(response: DeleteTopicsResponse) -> dict[str, Outcome]:
    return {t.name: _topic_outcome(t.error_code, t.error_message, t.name)
            for t in response.responses if t.name is not None}


def create_partitions_request(partitions: Iterable[NewPartitions], timeout_ms: int,
                              validate_only: bool) -> CreatePartitionsRequest:
    topics = []
    for new in partitions:
        assignments = None
        if new.replica_assignment is not None:
            assignments = [CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=list(ids))
                           for ids in new.replica_assignment]
        topics.append(CreatePartitionsRequest.CreatePartitionsTopic(name=new.topic, count=new.new_total_count,
                                                                    assignments=assignments))
    return CreatePartitionsRequest(topics=topics, timeout_ms=timeout_ms, validate_only=validate_only)


def read_create_partitions(response: CreatePartitionsResponse) -> dict[str, Outcome]:
    return {t.name: _topic_outcome(t.error_code, t.error_message, t.name) for t in response.results}


# ---- describing topics: DescribeTopicPartitions (KIP-966), else Metadata ------------------------------------

def metadata_request(version: int, names: Sequence[str], authorized_operations: bool) -> MetadataRequest:
    return MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name, topic_id=_ZERO_UUID) for name in names],
        allow_auto_topic_creation=version < 4,  # before v4 brokers decide (kafkawire's do not create then)
        include_cluster_authorized_operations=authorized_operations and 8 <= version <= 10,
        include_topic_authorized_operations=authorized_operations and version >= 8)


def _nodes(ids: Iterable[int], nodes: Mapping[int, Node]) -> tuple[Node, ...]:
    return tuple(nodes.get(i, Node(i, "", -1)) for i in ids)


def _description(topic, nodes: Mapping[int, Node], partitions) -> TopicDescription:
    infos = tuple(TopicPartitionInfo(p.partition_index, nodes.get(p.leader_id) if p.leader_id >= 0 else None,
                                     _nodes(p.replica_nodes, nodes), _nodes(p.isr_nodes, nodes))
                  for p in sorted(partitions, key=lambda p: p.partition_index))
    return TopicDescription(topic.name, topic.topic_id or _ZERO_UUID, bool(topic.is_internal), infos,
                            operations(topic.topic_authorized_operations))


def read_topic_descriptions(response: MetadataResponse, names: Sequence[str]) -> dict[str, Outcome]:
    nodes = {b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
    found: dict[str, Outcome] = {}
    for topic in response.topics:
        if topic.name is None:
            continue
        if topic.error_code:
            found[topic.name] = _topic_outcome(topic.error_code, None, topic.name)
            if topic.error_code == ErrorCode.LEADER_NOT_AVAILABLE:
                found[topic.name] = Retry(topic.error_code)
        else:
            found[topic.name] = _description(topic, nodes, topic.partitions)
    for name in names:
        found.setdefault(name, error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, f"topic {name!r}"))
    return found


def describe_topic_partitions_request(names: Sequence[str], cursor: tuple[str, int] | None,
                                      limit: int = 2000) -> DescribeTopicPartitionsRequest:
    return DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=name) for name in names],
        response_partition_limit=limit,
        cursor=DescribeTopicPartitionsRequest.Cursor(topic_name=cursor[0], partition_index=cursor[1])
        if cursor is not None else None)


def read_describe_topic_partitions(response: DescribeTopicPartitionsResponse,
                                   collected: dict[str, tuple[object, list]]) -> tuple[str, int] | None:
    """Adds each topic's partitions (or its error code) to ``collected``; returns the cursor to ask from
    next (None when the answer was the last page)."""
    for topic in response.topics:
        if topic.name is None:
            continue
        entry = collected.setdefault(topic.name, (topic, []))
        entry[1].extend(topic.partitions)
    cursor = response.next_cursor
    return (cursor.topic_name, cursor.partition_index) if cursor is not None else None


def topic_descriptions_from_pages(collected: Mapping[str, tuple[object, list]], nodes: Mapping[int, Node],
                                  names: Sequence[str]) -> dict[str, Outcome]:
    found: dict[str, Outcome] = {}
    for name, (topic, partitions) in collected.items():
        code = getattr(topic, "error_code")
        found[name] = _topic_outcome(code, None, name) if code else _description(topic, nodes, partitions)
    for name in names:
        found.setdefault(name, error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, f"topic {name!r}"))
    return found


# ---- DescribeCluster ---------------------------------------------------------------------------------------

def describe_cluster_request(authorized_operations: bool) -> DescribeClusterRequest:
    return DescribeClusterRequest(include_cluster_authorized_operations=authorized_operations)


def read_describe_cluster(response: DescribeClusterResponse) -> DescribeClusterResult | KafkaError:
    if response.error_code:
        return error_for(response.error_code, response.error_message)
    nodes = tuple(Node(b.broker_id, b.host, b.port, b.rack) for b in response.brokers)
    controller = next((n for n in nodes if n.id == response.controller_id), None)
    return DescribeClusterResult(controller, nodes, response.cluster_id,
                                 operations(response.cluster_authorized_operations))

"""What the admin client asks the controller about replicas: moving a partition's replicas to other
brokers (AlterPartitionReassignments), the moves in progress (ListPartitionReassignments) and leader
elections (ElectLeaders). Requests are built from the partitions asked about; answers come back per
partition."""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkawire.messages import (
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ElectLeadersRequest,
    ElectLeadersResponse, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
)

from ..topic_partition import TopicPartition
from .errors import error_for, outcome_of

__all__ = ["ElectionType", "PartitionReassignment", "alter_reassignments_request", "read_alter_reassignments",
           "list_reassignments_request", "read_list_reassignments", "elect_leaders_request", "read_elect_leaders"]


class ElectionType(enum.IntEnum):
    """confluent-kafka's ElectionType: the preferred replica, or any live replica of a leaderless partition."""
    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class PartitionReassignment:
    """A move in progress: the replicas (the target's, then those leaving), those joining, those leaving."""
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for tp in partitions:
        found.setdefault(tp.topic, []).append(tp.partition)
    return found


def alter_reassignments_request(moves: Mapping[TopicPartition, Sequence[int] | None], timeout_ms: int
                                ) -> AlterPartitionReassignmentsRequest:
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    by_topic: dict[str, list] = {}
    for tp, replicas in moves.items():
        by_topic.setdefault(tp.topic, []).append(AlterPartitionReassignmentsRequest.ReassignablePartition(
            partition_index=tp.partition, replicas=None if replicas is None else list(replicas)))
    return AlterPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=[
        Topic(name=name, partitions=partitions) for name, partitions in by_topic.items()])


def read_alter_reassignments(response: AlterPartitionReassignmentsResponse,
                             asked: Iterable[TopicPartition]) -> dict[TopicPartition, object]:
    """Each partition's outcome: None, a Retry, or its exception (a top-level error is every partition's)."""
    if response.error_code:
        failure = outcome_of(response.error_code, response.error_message)
        return {tp: failure for tp in asked}
    return {TopicPartition(topic.name, p.partition_index): outcome_of(p.error_code, p.error_message)
            for topic in response.responses for p in topic.partitions}


def list_reassignments_request(partitions: Iterable[TopicPartition] | None, timeout_ms: int
                               ) -> ListPartitionReassignmentsRequest:
    Topic = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    topics = None if partitions is None else [Topic(name=name, partition_indexes=indexes)
                                              for name, indexes in _by_topic(partitions).items()]
    return ListPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=topics)


def read_list_reassignments(response: ListPartitionReassignmentsResponse
                            ) -> dict[TopicPartition, PartitionReassignment] | object:
    """The moves in progress, or the call's failure (a Retry or an exception)."""
    if response.error_code:
        return outcome_of(response.error_code, response.error_message)
    return {TopicPartition(topic.name, p.partition_index): PartitionReassignment(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for topic in response.topics for p in topic.partitions}


def elect_leaders_request(election_type: ElectionType, partitions: Iterable[TopicPartition] | None,
                          timeout_ms: int) -> ElectLeadersRequest:
    Topic = ElectLeadersRequest.TopicPartitions
    topics = None if partitions is None else [Topic(topic=name, partitions=indexes)
                                              for name, indexes in _by_topic(partitions).items()]
    return ElectLeadersRequest(election_type=int(election_type), topic_partitions=topics, timeout_ms=timeout_ms)


def read_elect_leaders(response: ElectLeadersResponse, asked: Iterable[TopicPartition] | None
                       ) -> dict[TopicPartition, object]:
    """Each partition's outcome (None: elected, else its exception). A partition's error is final, not
    retried (ELECTION_NOT_NEEDED is retriable in Kafka's taxonomy, yet an answer here), as Java's admin
    client reports it."""
    if response.error_code:
        failure = outcome_of(response.error_code)
        return {tp: failure for tp in asked or ()}
    return {TopicPartition(topic.topic, p.partition_id): error_for(p.error_code, p.error_message) if p.error_code
            else None for topic in response.replica_election_results for p in topic.partition_result}

"""What one broker node may answer for: which partitions it leads, which groups and transactional ids it
coordinates, and what Metadata says of the cluster. A single broker (``SingleNode``) leads everything
and coordinates everything; a node of an in-process cluster (``broker.cluster.ClusterNodeView``) answers
from the cluster's controller.

The request handlers ask through ``leader_error`` at the top of their partition loops and
``coordinator_error`` before the group and transaction APIs, and build Metadata, FindCoordinator and
DescribeCluster from ``brokers``, ``partition`` and ``coordinator``.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

from ..error_codes import ErrorCode

__all__ = ["NodeView", "SingleNode", "PartitionInfo", "NodeAddress", "QuorumVoter", "GROUP", "TRANSACTION",
           "OngoingReassignment", "replica_target_error"]

GROUP, TRANSACTION = 0, 1  # FindCoordinator's key types


class PartitionInfo(NamedTuple):
    leader: int  # -1: no leader (every replica offline)
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


class NodeAddress(NamedTuple):
    node_id: int
    host: str
    port: int


class QuorumVoter(NamedTuple):
    """A voter of the metadata quorum, as its leader sees it (-1: not known)."""
    node_id: int
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int


class OngoingReassignment(NamedTuple):
    """A partition's move in progress: its replicas (the target's, then those leaving), joining, leaving."""
    topic: str
    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]


class NodeView(Protocol):
    node_id: int
    leads_everything: bool

    @property
    def controller_id(self) -> int: ...

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int: ...
    def isr_error(self, topic: str, partition: int, acks: int) -> int: ...
    def coordinator_error(self, key_type: int, key: str | None) -> int: ...
    def coordinator(self, key_type: int, key: str) -> int: ...
    def partition(self, topic: str, partition: int) -> PartitionInfo: ...
    def brokers(self, listener: str, this: tuple[str, int]) -> list[NodeAddress]: ...
    def quorum(self, high_watermark: int, now_ms: int) -> tuple[int, list[QuorumVoter]]: ...
    def elect_leader(self, topic: str, partition: int, election_type: int) -> tuple[int, str | None]: ...
    def reassign(self, topic: str, partition: int, replicas: list[int] | None,
                 allow_replication_factor_change: bool) -> tuple[int, str | None]: ...
    def reassignments(self) -> list[OngoingReassignment]: ...


def replica_target_error(target: list[int], nodes: list[int]) -> tuple[int, str] | None:
    """What Kafka's controller says of a manual replica list that names no broker, one twice, or one it
    does not know; None for a valid list."""
    if not target:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    for node in target:
        if target.count(node) > 1:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {node} more than once.")
        if node not in nodes:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {node}, but no such broker is registered.")
    return None


class SingleNode:
    """One broker: it leads every partition (leader epoch 0, as its logs stamp) and is every coordinator."""

    leads_everything = True  # the handlers skip asking

    def __init__(self, node_id: int):
        self.node_id = node_id
        self.controller_id = node_id

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        return 0

    def isr_error(self, topic: str, partition: int, acks: int) -> int:
        return 0

    def coordinator_error(self, key_type: int, key: str | None) -> int:
        return 0

    def coordinator(self, key_type: int, key: str) -> int:
        return self.node_id

    def partition(self, topic: str, partition: int) -> PartitionInfo:
        node = self.node_id
        return PartitionInfo(node, 0, [node], [node], [])

    def brokers(self, listener: str, this: tuple[str, int]) -> list[NodeAddress]:
        """Every live broker's address on ``listener``; ``this`` is this node's (host, port) there."""
        return [NodeAddress(self.node_id, this[0], this[1])]

    def quorum(self, high_watermark: int, now_ms: int) -> tuple[int, list[QuorumVoter]]:
        """(leader epoch, voters): a combined node is the only voter, and leads from epoch 1 on."""
        return 1, [QuorumVoter(self.node_id, high_watermark, now_ms, now_ms)]

    def elect_leader(self, topic: str, partition: int, election_type: int) -> tuple[int, str | None]:
        """The one replica leads already, whatever the election type."""
        return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."

    def reassign(self, topic: str, partition: int, replicas: list[int] | None,
                 allow_replication_factor_change: bool) -> tuple[int, str | None]:
        """Only this broker can hold a replica: moving it here is nothing to do, and nothing is ever in
        progress to cancel."""
        if replicas is None:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No ongoing reassignment for {topic}-{partition}."
        return replica_target_error(replicas, [self.node_id]) or (ErrorCode.NONE, None)

    def reassignments(self) -> list[OngoingReassignment]:
        return []

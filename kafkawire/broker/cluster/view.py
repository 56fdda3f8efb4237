"""One node's view of an in-process cluster (``node_view.NodeView``), answered by the controller."""
from __future__ import annotations

from ...error_codes import ErrorCode
from ..node_view import NodeAddress, OngoingReassignment, PartitionInfo, QuorumVoter
from .controller import Controller

__all__ = ["ClusterNodeView"]


class ClusterNodeView:
    leads_everything = False

    def __init__(self, controller: Controller, node_id: int):
        self.controller = controller
        self.node_id = node_id

    @property
    def controller_id(self) -> int:
        return self.controller.controller_id

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        return self.controller.leader_error(self.node_id, topic, partition, current_leader_epoch)

    def isr_error(self, topic: str, partition: int, acks: int) -> int:
        return self.controller.isr_error(topic, partition, acks)

    def coordinator_error(self, key_type: int, key: str | None) -> int:
        if key is None or self.controller.coordinator(key_type, key) == self.node_id:
            return ErrorCode.NONE
        return ErrorCode.NOT_COORDINATOR

    def coordinator(self, key_type: int, key: str) -> int:
        return self.controller.coordinator(key_type, key)

    def partition(self, topic: str, partition: int) -> PartitionInfo:
        return self.controller.partition_info(topic, partition)

    def brokers(self, listener: str, this: tuple[str, int]) -> list[NodeAddress]:
        return self.controller.brokers(listener)

    def quorum(self, high_watermark: int, now_ms: int) -> tuple[int, list[QuorumVoter]]:
        return self.controller.quorum(high_watermark, now_ms)

    def elect_leader(self, topic: str, partition: int, election_type: int) -> tuple[int, str | None]:
        return self.controller.reassignments.elect(topic, partition, election_type)

    def reassign(self, topic: str, partition: int, replicas: list[int] | None,
                 allow_replication_factor_change: bool) -> tuple[int, str | None]:
        return self.controller.reassignments.alter(topic, partition, replicas, allow_replication_factor_change)

    def reassignments(self) -> list[OngoingReassignment]:
        return self.controller.reassignments.ongoing()

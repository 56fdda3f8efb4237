"""Partition reassignments and leader elections in an in-process cluster, as Kafka's controller makes them
(``ReplicationControlManager``, ``PartitionReassignmentReplicas``, ``PartitionReassignmentRevert``).

A reassignment grows the replica set to the target followed by the replicas it removes, with the
ISR unchanged. The adding replicas then catch up into the ISR. When every adding replica is in
sync, the set shrinks to the target, the removed replicas leave the ISR, the leader moves if it was
removed, and the leader epoch goes up. A reassignment that only removes replicas completes at once.
A cancellation reverts to the replicas before it, minus the adding ones.

The nodes share one copy of each log, so an adding replica has nothing to copy: a live one is caught up
at the next turn of the event loop (not inside the request, so ListPartitionReassignments can see the
move in progress), and a stopped one when its broker starts again.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...error_codes import ErrorCode
from ..node_view import OngoingReassignment, replica_target_error

if TYPE_CHECKING:
    from .controller import Controller, PartitionState

__all__ = ["Reassignments", "PREFERRED", "UNCLEAN"]

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types

Outcome = tuple[int, "str | None"]  # (error code, error message)


class Reassignments:
    def __init__(self, controller: Controller):
        self.controller = controller

    # ---- AlterPartitionReassignments -------------------------------------------------------------
    def alter(self, topic: str, partition: int, target: list[int] | None,
              allow_replication_factor_change: bool = True) -> Outcome:
        state = self.controller.state(topic, partition)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}-{partition}."
        if target is None:
            return self._cancel(topic, partition, state)
        invalid = replica_target_error(target, self.controller.nodes)
        if invalid is not None:
            return invalid
        original = [node for node in state.replicas if node not in state.adding]
        if not allow_replication_factor_change and len(target) != len(original):
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"The replication factor is changed from {len(original)} to {len(target)}")
        # a new target replaces an ongoing one, computed from the replicas before it (as Kafka's)
        removing = [node for node in original if node not in target]
        adding = [node for node in target if node not in original]
        if not adding and not removing and not state.adding and state.replicas == target:
            return ErrorCode.NONE, None  # nothing to move
        state.isr = [node for node in state.isr if node not in state.adding or node in target]
        state.replicas, state.adding, state.removing = list(target) + removing, adding, removing
        self.controller.topics.metadata_cache.changed(topic)
        if adding:
            self._catch_up_soon()
        else:
            self._try_complete(topic, partition, state)
        return ErrorCode.NONE, None

    def _cancel(self, topic: str, partition: int, state: PartitionState) -> Outcome:
        if not state.adding and not state.removing:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No ongoing reassignment for {topic}-{partition}."
        original = [node for node in state.replicas if node not in state.adding]
        isr = [node for node in state.isr if node in original]
        if not isr:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unable to revert the reassignment of {topic}-{partition}: "
                    "it would leave the partition with no in-sync replica.")
        state.replicas, state.isr, state.adding, state.removing = original, isr, [], []
        self.controller.topics.metadata_cache.changed(topic)
        if state.leader not in original:
            self.controller.set_leader(topic, partition, state, self._first_live(isr))
        return ErrorCode.NONE, None

    # ---- catching up and completing -------------------------------------------------------------
    def _catch_up_soon(self) -> None:
        try:
            asyncio.get_running_loop().call_soon(self.catch_up)
        except RuntimeError:  # called outside the cluster's loop (a script driving the controller)
            self.catch_up()

    def catch_up(self) -> None:
        """Live adding replicas join the ISR; each reassignment whose adding replicas are all in sync
        completes."""
        live = self.controller.live
        for topic, partition, state in self._moving():
            caught_up = [node for node in state.adding if node in live and node not in state.isr]
            if caught_up:
                state.isr = [node for node in state.replicas if node in state.isr or node in caught_up]
                self.controller.topics.metadata_cache.changed(topic)
            self._try_complete(topic, partition, state)

    def _try_complete(self, topic: str, partition: int, state: PartitionState) -> None:
        if any(node not in state.isr for node in state.adding):
            return
        target = [node for node in state.replicas if node not in state.removing]
        isr = [node for node in state.isr if node in target]
        if not target or not isr:
            return  # the final replica set and ISR must not be empty
        state.replicas, state.isr, state.adding, state.removing = target, isr, [], []
        leader = state.leader if state.leader in target else self._first_live(isr)
        self.controller.set_leader(topic, partition, state, leader)  # the leader epoch goes up either way

    def _first_live(self, nodes: list[int]) -> int:
        return next((node for node in nodes if node in self.controller.live), -1)

    def _moving(self) -> Iterator[tuple[str, int, PartitionState]]:
        for topic, partition, state in self.controller.each_placed():
            if state.adding or state.removing:
                yield topic, partition, state

    # ---- ListPartitionReassignments -------------------------------------------------------------
    def ongoing(self) -> list[OngoingReassignment]:
        return [OngoingReassignment(topic, partition, list(state.replicas), list(state.adding),
                                    list(state.removing))
                for topic, partition, state in self._moving()]

    # ---- ElectLeaders ---------------------------------------------------------------------------
    def elect(self, topic: str, partition: int, election_type: int) -> Outcome:
        """A preferred election makes the first replica leader when it is live and in sync; an unclean
        one gives a leaderless partition a live replica, in sync or not."""
        state = self.controller.state(topic, partition)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic or partition does not exist."
        live = self.controller.live
        if election_type == PREFERRED:
            preferred = state.replicas[0]
            if state.leader == preferred:
                return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
            if preferred not in live or preferred not in state.isr:
                return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."
            self.controller.set_leader(topic, partition, state, preferred)
            return ErrorCode.NONE, None
        if state.leader >= 0:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        candidate = self._first_live(state.isr)
        if candidate < 0:
            candidate = self._first_live(state.replicas)
        if candidate < 0:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not available."
        state.isr = [candidate]  # an unclean leader is the whole ISR, as Kafka's
        self.controller.set_leader(topic, partition, state, candidate)
        return ErrorCode.NONE, None

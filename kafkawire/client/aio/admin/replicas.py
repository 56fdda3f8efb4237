"""The admin client's calls about replicas, answered by the controller through any broker (a part of
AsyncAdminClient, ``aio.admin``): alter_partition_reassignments, list_partition_reassignments and
elect_leaders (``core.admin.reassignments`` builds and reads them)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from ...core.admin import reassignments
from ...core.admin.reassignments import ElectionType, PartitionReassignment
from ...core.topic_partition import TopicPartition
from .calls import AdminPart, as_partition, raise_or

__all__ = ["ReplicaAdmin"]



class ReplicaAdmin(AdminPart):
    """Moves of partitions between brokers, and leader elections."""

    async def alter_partition_reassignments(
            self, reassignments_: Mapping[TopicPartition, Sequence[int] | None], *,
            request_timeout: float | None = None) -> dict[TopicPartition, object]:
        """Move each partition's replicas to the brokers listed (the first is the preferred leader), or
        cancel its move in progress with None: ``{partition: None or exception}`` (the move is under way
        when None; list_partition_reassignments shows it until it completes)."""
        moves = {as_partition(tp): replicas for tp, replicas in reassignments_.items()}
        broker_timeout = self._calls.operation_ms(None, request_timeout)

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, object]:
            request = reassignments.alter_reassignments_request({tp: moves[tp] for tp in pending}, broker_timeout)
            return reassignments.read_alter_reassignments(await self._calls.send_any(request), pending)
        return await self._router.run(moves, attempt, self._calls.timeout_ms(request_timeout),
                                      "alter_partition_reassignments")

    async def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None, *,
            request_timeout: float | None = None) -> dict[TopicPartition, PartitionReassignment]:
        """The moves in progress (of ``partitions``, or of every partition)."""
        asked = None if partitions is None else [as_partition(tp) for tp in partitions]
        broker_timeout = self._calls.operation_ms(None, request_timeout)

        async def attempt() -> object:
            request = reassignments.list_reassignments_request(asked, broker_timeout)
            return reassignments.read_list_reassignments(await self._calls.send_any(request))
        found = await self._router.run_one(attempt, self._calls.timeout_ms(request_timeout),
                                           "list_partition_reassignments")
        return cast("dict[TopicPartition, PartitionReassignment]", raise_or(found))

    async def elect_leaders(self, election_type: ElectionType, partitions: Iterable[TopicPartition] | None = None,
                            *, request_timeout: float | None = None) -> dict[TopicPartition, object]:
        """A leader election for each partition (every partition with None): ``{partition: None or
        exception}``; ELECTION_NOT_NEEDED for one led as asked already (and with None, only the partitions
        where an election was needed are reported), as confluent-kafka's elect_leaders."""
        kind = ElectionType(election_type)
        broker_timeout = self._calls.operation_ms(None, request_timeout)
        if partitions is None:
            async def everything() -> object:
                request = reassignments.elect_leaders_request(kind, None, broker_timeout)
                return reassignments.read_elect_leaders(await self._calls.send_any(request, 1), None)
            found = await self._router.run_one(everything, self._calls.timeout_ms(request_timeout), "elect_leaders")
            return cast("dict[TopicPartition, object]", raise_or(found))

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, object]:
            request = reassignments.elect_leaders_request(kind, pending, broker_timeout)
            return reassignments.read_elect_leaders(await self._calls.send_any(request, 1), pending)
        return await self._router.run([as_partition(tp) for tp in partitions], attempt,
                                      self._calls.timeout_ms(request_timeout), "elect_leaders")

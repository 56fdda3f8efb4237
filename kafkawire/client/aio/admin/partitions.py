"""The admin client's calls answered by partition leaders (a part of AsyncAdminClient, ``aio.admin``):
list_offsets, delete_records and describe_producers, each sent to every leader of the partitions asked
for at once, retried for partitions whose leader moved (``core.admin_partitions`` builds and reads them)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkawire.messages import DeleteRecordsRequest, DescribeProducersRequest, ListOffsetsRequest

from ...core.admin import partitions
from ...core.admin.partitions import IsolationLevel, OffsetSpec
from ...core.topic_partition import TopicPartition
from ..connection import BrokerConnection
from .calls import AdminPart, as_partition

__all__ = ["PartitionAdmin"]



class PartitionAdmin(AdminPart):
    """list_offsets, delete_records, describe_producers: ``{partition: result or exception}``."""

    async def list_offsets(self, topic_partition_offsets: Mapping[TopicPartition, OffsetSpec], *,
                           isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
                           request_timeout: float | None = None) -> dict[TopicPartition, object]:
        """Each partition's offset by its OffsetSpec (earliest, latest, max timestamp, for a timestamp):
        ``{partition: ListOffsetsResultInfo or exception}``. READ_COMMITTED's latest is the last stable
        offset."""
        specs = {as_partition(tp): spec for tp, spec in topic_partition_offsets.items()}
        level = IsolationLevel(isolation_level)
        needed = partitions.list_offsets_min_version(specs.values(), level)

        async def send(connection: BrokerConnection, batch: list[TopicPartition]) -> dict[TopicPartition, object]:
            version = connection.api_version(ListOffsetsRequest.API_KEY, needed)
            request = partitions.list_offsets_request(version, {tp: specs[tp] for tp in batch}, level)
            return partitions.read_list_offsets(await connection.send(request, version), version)

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, object]:
            return await self._router.per_leader(pending, send)
        return await self._router.run(list(specs), attempt, self._calls.timeout_ms(request_timeout), "list_offsets")

    async def delete_records(self, topic_partition_offsets: Mapping[TopicPartition, int], *,
                             operation_timeout: float | None = None, request_timeout: float | None = None
                             ) -> dict[TopicPartition, object]:
        """Delete each partition's records below its offset (-1: below the high watermark, all of them):
        ``{partition: DeletedRecords (the new low watermark) or exception}``."""
        offsets = {as_partition(tp): int(offset) for tp, offset in topic_partition_offsets.items()}
        broker_timeout = self._calls.operation_ms(operation_timeout, request_timeout)

        async def send(connection: BrokerConnection, batch: list[TopicPartition]) -> dict[TopicPartition, object]:
            request = partitions.delete_records_request({tp: offsets[tp] for tp in batch}, broker_timeout)
            version = connection.api_version(DeleteRecordsRequest.API_KEY)
            return partitions.read_delete_records(await connection.send(request, version))

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, object]:
            return await self._router.per_leader(pending, send)
        return await self._router.run(list(offsets), attempt, self._calls.timeout_ms(request_timeout), "delete_records")

    async def describe_producers(self, topic_partitions: Iterable[TopicPartition], *,
                                 request_timeout: float | None = None) -> dict[TopicPartition, object]:
        """The producers with state in each partition's log (idempotent and transactional ones):
        ``{partition: tuple of ProducerState or exception}``."""
        wanted = list(dict.fromkeys(as_partition(tp) for tp in topic_partitions))

        async def send(connection: BrokerConnection, batch: list[TopicPartition]) -> dict[TopicPartition, object]:
            version = connection.api_version(DescribeProducersRequest.API_KEY)
            return partitions.read_describe_producers(
                await connection.send(partitions.describe_producers_request(batch), version))

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, object]:
            return await self._router.per_leader(pending, send)
        return await self._router.run(wanted, attempt, self._calls.timeout_ms(request_timeout), "describe_producers")

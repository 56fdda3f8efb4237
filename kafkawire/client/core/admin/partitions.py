"""What the admin client asks of partition leaders: offsets by spec (ListOffsets), the deletion of records
below an offset (DeleteRecords) and the producers writing to a partition (DescribeProducers). Requests are
built per leader from the partitions it leads; answers come back per partition."""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafkawire.messages import (
    DeleteRecordsRequest, DeleteRecordsResponse, DescribeProducersRequest, DescribeProducersResponse,
    ListOffsetsRequest, ListOffsetsResponse,
)

from ..topic_partition import TopicPartition
from .errors import outcome_of

__all__ = ["OffsetSpec", "IsolationLevel", "ListOffsetsResultInfo", "DeletedRecords", "ProducerState",
           "list_offsets_min_version", "list_offsets_request", "read_list_offsets", "delete_records_request",
           "read_delete_records", "describe_producers_request", "read_describe_producers"]

_EARLIEST, _LATEST, _MAX_TIMESTAMP = -2, -1, -3


class IsolationLevel(enum.IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1  # offsets up to the last stable offset


@dataclass(frozen=True)
class OffsetSpec:
    """Which offset ``list_offsets`` looks up: ``earliest()``, ``latest()``, ``max_timestamp()`` (the record
    with the largest timestamp) or ``for_timestamp(ms)`` (the first record at or after it). ``timestamp``
    is ListOffsets' Timestamp field."""

    timestamp: int

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls(_EARLIEST)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(_LATEST)

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        return cls(_MAX_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        if timestamp_ms < 0:
            raise ValueError(f"a timestamp is at least 0, not {timestamp_ms}")
        return cls(timestamp_ms)


@dataclass(frozen=True)
class ListOffsetsResultInfo:
    offset: int  # -1: no record at or after the timestamp
    timestamp: int  # -1 unless looked up by timestamp
    leader_epoch: int | None


@dataclass(frozen=True)
class DeletedRecords:
    low_watermark: int  # the partition's log start offset after the deletion


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int  # -1: no open transaction


# ---- ListOffsets -------------------------------------------------------------------------------------------

def list_offsets_min_version(specs: Iterable[OffsetSpec], isolation_level: IsolationLevel) -> int:
    """The oldest ListOffsets version that can ask for all of ``specs`` at ``isolation_level``."""
    version = 1
    if isolation_level == IsolationLevel.READ_COMMITTED:
        version = 2
    if any(spec.timestamp == _MAX_TIMESTAMP for spec in specs):
        version = 7  # KIP-734
    return version


def list_offsets_request(version: int, specs: Mapping[TopicPartition, OffsetSpec],
                         isolation_level: IsolationLevel,
                         leader_epochs: Mapping[TopicPartition, int] | None = None) -> ListOffsetsRequest:
    by_topic: dict[str, list[ListOffsetsRequest.ListOffsetsPartition]] = {}
    for tp, spec in specs.items():
        epoch = (leader_epochs or {}).get(tp, -1) if version >= 4 else -1
        by_topic.setdefault(tp.topic, []).append(ListOffsetsRequest.ListOffsetsPartition(
            partition_index=tp.partition, current_leader_epoch=epoch, timestamp=spec.timestamp))
    return ListOffsetsRequest(
        replica_id=-1, isolation_level=int(isolation_level) if version >= 2 else 0,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=partitions)
                for topic, partitions in by_topic.items()])


def read_list_offsets(response: ListOffsetsResponse, version: int) -> dict[TopicPartition, object]:
    found: dict[TopicPartition, object] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            failure = outcome_of(p.error_code, None, f"partition {tp}", leader=True)
            if failure is not None:
                found[tp] = failure
                continue
            epoch = p.leader_epoch if version >= 4 and p.leader_epoch >= 0 else None
            found[tp] = ListOffsetsResultInfo(p.offset, p.timestamp, epoch)
    return found


# ---- DeleteRecords -----------------------------------------------------------------------------------------

def delete_records_request(offsets: Mapping[TopicPartition, int], timeout_ms: int) -> DeleteRecordsRequest:
    by_topic: dict[str, list[DeleteRecordsRequest.DeleteRecordsPartition]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(DeleteRecordsRequest.DeleteRecordsPartition(
            partition_index=tp.partition, offset=offset))
    return DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(name=topic, partitions=partitions)
                                        for topic, partitions in by_topic.items()], timeout_ms=timeout_ms)


def read_delete_records(response: DeleteRecordsResponse) -> dict[TopicPartition, object]:
    found: dict[TopicPartition, object] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            failure = outcome_of(p.error_code, None, f"partition {tp}", leader=True)
            found[tp] = failure if failure is not None else DeletedRecords(p.low_watermark)
    return found


# ---- DescribeProducers -------------------------------------------------------------------------------------

def describe_producers_request(partitions: Iterable[TopicPartition]) -> DescribeProducersRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=numbers)
                                            for topic, numbers in by_topic.items()])


def read_describe_producers(response: DescribeProducersResponse) -> dict[TopicPartition, object]:
    """partition -> tuple of ProducerState (the producers with state in its log), or its error."""
    found: dict[TopicPartition, object] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            failure = outcome_of(p.error_code, p.error_message, f"partition {tp}", leader=True)
            found[tp] = failure if failure is not None else tuple(
                ProducerState(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                              s.coordinator_epoch, s.current_txn_start_offset) for s in p.active_producers)
    return found

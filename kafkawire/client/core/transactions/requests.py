"""The transactional producer's request bodies at each version, and what their answers say: plain
functions, no state. The ``manager`` decides what to send and when.

Versions, as Kafka's producer speaks them: AddPartitionsToTxn v0-3 (v4+ is the brokers' batched form);
InitProducerId v0-5 (v6, KIP-939's two-phase commit, is unstable in Kafka 4.3); EndTxn and
TxnOffsetCommit up to v4 under transaction version 1 and v5 under version 2 (KIP-890 part 2: EndTxn v5
answers with the bumped producer epoch, TxnOffsetCommit v5 adds the group's partition itself).
"""
from __future__ import annotations

from collections.abc import Mapping

from kafkawire.messages import (
    AddOffsetsToTxnRequest, ApiKey, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, EndTxnRequest,
    InitProducerIdRequest, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
)

from ...errors import TransactionFatalError
from ..group.consumer_group_metadata import ConsumerGroupMetadata
from ..group.protocol import OffsetAndMetadata
from ..topic_partition import TopicPartition

__all__ = [
    "GROUP_COORDINATOR",
    "TRANSACTION_COORDINATOR",
    "TRANSACTION_V2_VERSIONS",
    "VERSIONS",
    "add_offsets_request",
    "add_partitions_request",
    "end_txn_request",
    "init_producer_id_request",
    "read_add_partitions",
    "read_txn_offset_commit",
    "txn_offset_commit_request",
]

# (lowest, highest) version this client sends of each API under transaction version 1 ...
VERSIONS = {ApiKey.FIND_COORDINATOR: (1, 6), ApiKey.INIT_PRODUCER_ID: (0, 5), ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
            ApiKey.ADD_OFFSETS_TO_TXN: (0, 4), ApiKey.END_TXN: (0, 4), ApiKey.TXN_OFFSET_COMMIT: (0, 4)}
# ... and under version 2 (KIP-890 part 2), where only these change.
TRANSACTION_V2_VERSIONS = {**VERSIONS, ApiKey.END_TXN: (5, 5), ApiKey.TXN_OFFSET_COMMIT: (5, 5)}
TRANSACTION_COORDINATOR = 1  # FindCoordinator key types
GROUP_COORDINATOR = 0
_INIT_BUMP_VERSION = 3  # InitProducerId carries the current producer id and epoch (KIP-360)
_GROUP_METADATA_VERSION = 3  # TxnOffsetCommit carries the generation and member id (KIP-447)
_LEADER_EPOCH_VERSION = 2


def init_producer_id_request(version: int, transactional_id: str, transaction_timeout_ms: int,
                             producer_id: int = -1, producer_epoch: int = -1) -> InitProducerIdRequest:
    """InitProducerId for ``transactional_id``; from v3 with the current producer id and epoch, so that
    the coordinator bumps that epoch rather than fencing this producer (KIP-360)."""
    if version < _INIT_BUMP_VERSION:
        producer_id = producer_epoch = -1
    return InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms,
                                 producer_id=producer_id, producer_epoch=producer_epoch)


def add_partitions_request(transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: list[TopicPartition]) -> AddPartitionsToTxnRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=producer_epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=numbers)
                             for topic, numbers in by_topic.items()])


def read_add_partitions(response: AddPartitionsToTxnResponse) -> dict[TopicPartition, int]:
    """Each partition's error code (v0-3 answers)."""
    return {TopicPartition(topic.name, result.partition_index): result.partition_error_code
            for topic in response.results_by_topic_v3_and_below for result in topic.results_by_partition}


def add_offsets_request(transactional_id: str, producer_id: int, producer_epoch: int,
                        group_id: str) -> AddOffsetsToTxnRequest:
    return AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                  producer_epoch=producer_epoch, group_id=group_id)


def txn_offset_commit_request(version: int, transactional_id: str, producer_id: int, producer_epoch: int,
                              group: ConsumerGroupMetadata,
                              offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> TxnOffsetCommitRequest:
    """TxnOffsetCommit of ``offsets`` for ``group``. Below v3 the broker cannot check the generation, so
    group metadata beyond the group id is refused there (TransactionFatalError), as Kafka's producer
    refuses it: committing without that check could let a zombie consumer's offsets through."""
    if version < _GROUP_METADATA_VERSION and (group.generation_id != -1 or group.member_id
                                              or group.group_instance_id is not None):
        raise TransactionFatalError(f"the group coordinator offers TxnOffsetCommit up to v{version}, which cannot "
                                    f"carry the consumer's generation and member id (v3+)")
    by_topic: dict[str, list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = {}
    for tp, value in sorted(offsets.items()):
        epoch = value.leader_epoch if value.leader_epoch is not None and version >= _LEADER_EPOCH_VERSION else -1
        by_topic.setdefault(tp.topic, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
            partition_index=tp.partition, committed_offset=value.offset, committed_leader_epoch=epoch,
            committed_metadata=value.metadata))
    with_group = version >= _GROUP_METADATA_VERSION
    return TxnOffsetCommitRequest(
        transactional_id=transactional_id, group_id=group.group_id, producer_id=producer_id,
        producer_epoch=producer_epoch, generation_id=group.generation_id if with_group else -1,
        member_id=group.member_id if with_group else "",
        group_instance_id=group.group_instance_id if with_group else None,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=partitions)
                for topic, partitions in by_topic.items()])


def read_txn_offset_commit(response: TxnOffsetCommitResponse) -> dict[TopicPartition, int]:
    return {TopicPartition(topic.name, p.partition_index): p.error_code
            for topic in response.topics for p in topic.partitions}


def end_txn_request(transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> EndTxnRequest:
    return EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
                         committed=commit)

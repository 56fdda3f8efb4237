"""The transaction APIs over the transaction coordinator: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit, WriteTxnMarkers, DescribeProducers, DescribeTransactions and ListTransactions, with
Kafka's authorization (``KafkaApis``): WRITE on the transactional id, WRITE on the topics a transaction
adds, READ on the group whose offsets it commits, CLUSTER_ACTION for the broker-to-broker forms
(AddPartitionsToTxn v4+, WriteTxnMarkers), DESCRIBE to see transactions and READ to see producers."""
from __future__ import annotations

import re
from collections.abc import Sequence

from ... import messages as m
from ...error_codes import ErrorCode
from ..groups.offsets_topic import OFFSETS_TOPIC, offsets_partition_for
from ...acl_types import AclOperation as Operation, ResourceType
from ..transactions.coordinator import TransactionCoordinator
from ..transactions.metadata import TxnState
from .state import BrokerState, RequestContext

__all__ = ["TransactionApis"]

_CLUSTER = "kafka-cluster"
_TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class TransactionApis:
    def __init__(self, state: BrokerState, coordinator: TransactionCoordinator):
        self.state = state
        self.coordinator = coordinator

    def _may_write_txn(self, context: RequestContext, transactional_id: str) -> bool:
        return self.state.allowed(context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)

    # ---- AddPartitionsToTxn ---------------------------------------------------------------------
    async def add_partitions_to_txn(self, request: m.AddPartitionsToTxnRequest, version: int,
                                    context: RequestContext) -> m.AddPartitionsToTxnResponse:
        Response = m.AddPartitionsToTxnResponse
        if version < 4:
            results = self._add_for_client(request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                           request.v3_and_below_producer_epoch, request.v3_and_below_topics, context)
            return Response(results_by_topic_v3_and_below=_topic_results(results))
        if not self.state.allowed(context, Operation.CLUSTER_ACTION, ResourceType.CLUSTER, _CLUSTER):
            return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])
        by_transaction = []
        for txn in request.transactions:  # from other brokers: verify_only, or adding on a client's behalf
            partitions = [(t.name, p) for t in txn.topics for p in t.partitions]
            if txn.verify_only:
                errors = self.coordinator.verify_partitions(txn.transactional_id, txn.producer_id,
                                                            txn.producer_epoch, partitions)
            else:
                error = self.coordinator.add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                        partitions)
                errors = dict.fromkeys(partitions, error)
            by_transaction.append(Response.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                                    topic_results=_topic_results(errors)))
        return Response(error_code=0, results_by_transaction=by_transaction)

    def _add_for_client(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        topics: Sequence[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic],
                        context: RequestContext) -> dict[tuple[str, int], int]:
        partitions = [(t.name, p) for t in topics for p in t.partitions]
        if not self._may_write_txn(context, transactional_id):
            return dict.fromkeys(partitions, _TXN_DENIED)
        refused = {}
        for topic, index in partitions:
            if not self.state.allowed(context, Operation.WRITE, ResourceType.TOPIC, topic):
                refused[(topic, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic == OFFSETS_TOPIC or self.state.topics.log(topic, index) is None:
                refused[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if refused:  # nothing is added; the others are OPERATION_NOT_ATTEMPTED
            return {p: refused.get(p, ErrorCode.OPERATION_NOT_ATTEMPTED) for p in partitions}
        error = self.coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions)
        return dict.fromkeys(partitions, error)

    # ---- AddOffsetsToTxn ------------------------------------------------------------------------
    async def add_offsets_to_txn(self, request: m.AddOffsetsToTxnRequest, version: int,
                                 context: RequestContext) -> m.AddOffsetsToTxnResponse:
        error: int
        if not self._may_write_txn(context, request.transactional_id):
            error = _TXN_DENIED
        elif not self.state.allowed(context, Operation.READ, ResourceType.GROUP, request.group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            partition = (OFFSETS_TOPIC, offsets_partition_for(request.group_id))
            error = self.coordinator.add_partitions(request.transactional_id, request.producer_id,
                                                    request.producer_epoch, [partition])
        return m.AddOffsetsToTxnResponse(error_code=error)

    # ---- EndTxn ---------------------------------------------------------------------------------
    async def end_txn(self, request: m.EndTxnRequest, version: int, context: RequestContext) -> m.EndTxnResponse:
        if not self._may_write_txn(context, request.transactional_id):
            return m.EndTxnResponse(error_code=_TXN_DENIED, producer_id=-1, producer_epoch=-1)
        result = self.coordinator.end_transaction(request.transactional_id, request.producer_id,
                                                  request.producer_epoch, request.committed,
                                                  client_version=2 if version >= 5 else 1)
        error = result.error
        if version < 2 and error == ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH  # older clients do not know PRODUCER_FENCED
        return m.EndTxnResponse(error_code=error, producer_id=result.producer_id, producer_epoch=result.producer_epoch)

    # ---- TxnOffsetCommit ------------------------------------------------------------------------
    async def txn_offset_commit(self, request: m.TxnOffsetCommitRequest, version: int,
                                context: RequestContext) -> m.TxnOffsetCommitResponse:
        keys = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        if not self._may_write_txn(context, request.transactional_id):
            return _txn_offset_response(keys, dict.fromkeys(keys, _TXN_DENIED))
        if not self.state.allowed(context, Operation.READ, ResourceType.GROUP, request.group_id):
            return _txn_offset_response(keys, dict.fromkeys(keys, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        denied = {key: ErrorCode.TOPIC_AUTHORIZATION_FAILED for key in keys
                  if not self.state.allowed(context, Operation.READ, ResourceType.TOPIC, key[0])}
        error = self._verify_offsets_partition(request, version)
        if error:
            return _txn_offset_response(keys, {key: denied.get(key, error) for key in keys})
        if denied:
            denied_topics = {name for name, _ in denied}
            request.topics = [t for t in request.topics if t.name not in denied_topics]
        errors = self.state.groups.offsets.txn_offset_commit(request, version) if request.topics else {}
        return _txn_offset_response(keys, {**errors, **denied})

    def _verify_offsets_partition(self, request: m.TxnOffsetCommitRequest, version: int) -> int:
        """KIP-890: the group's offsets partition must be in the transaction (AddOffsetsToTxn); with
        transaction version 2 (v5) it joins the transaction here."""
        partition = (OFFSETS_TOPIC, offsets_partition_for(request.group_id))
        error = self.coordinator.verify_or_add(request.transactional_id, request.producer_id, request.producer_epoch,
                                               partition, add=version >= 5)
        if error == ErrorCode.TRANSACTION_ABORTABLE and version < 5:
            error = ErrorCode.INVALID_TXN_STATE  # TRANSACTION_ABORTABLE is known from v5
        elif error == ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        elif error == ErrorCode.CONCURRENT_TRANSACTIONS:
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # retried by every client
        return error

    # ---- WriteTxnMarkers ------------------------------------------------------------------------
    async def write_txn_markers(self, request: m.WriteTxnMarkersRequest, version: int,
                                context: RequestContext) -> m.WriteTxnMarkersResponse:
        Response = m.WriteTxnMarkersResponse
        allowed = self.state.allowed(context, Operation.CLUSTER_ACTION, ResourceType.CLUSTER, _CLUSTER)
        results = []
        for marker in request.markers:
            partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
            errors: dict[tuple[str, int], int]
            if not allowed:
                errors = dict.fromkeys(partitions, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            else:
                errors = self.coordinator.markers.write_each(marker.producer_id, marker.producer_epoch,
                                                             marker.transaction_result, marker.coordinator_epoch,
                                                             partitions)
            by_topic: dict[str, list] = {}
            for (topic, index), error in errors.items():
                by_topic.setdefault(topic, []).append(Response.WritableTxnMarkerPartitionResult(
                    partition_index=index, error_code=error))
            results.append(Response.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
                Response.WritableTxnMarkerTopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]))
        return Response(markers=results)

    # ---- DescribeProducers ----------------------------------------------------------------------
    async def describe_producers(self, request: m.DescribeProducersRequest, version: int,
                                 context: RequestContext) -> m.DescribeProducersResponse:
        Response = m.DescribeProducersResponse
        topics = []
        for topic in request.topics:
            may_read = self.state.allowed(context, Operation.READ, ResourceType.TOPIC, topic.name)
            partitions = []
            for index in topic.partition_indexes:
                partition_log = self.state.topics.log(topic.name, index) if may_read else None
                if not may_read:
                    partitions.append(Response.PartitionResponse(partition_index=index, active_producers=[],
                                                                 error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                elif partition_log is None:
                    partitions.append(Response.PartitionResponse(partition_index=index, active_producers=[],
                                                                 error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                elif refused := self.state.view.leader_error(topic.name, index):
                    partitions.append(Response.PartitionResponse(partition_index=index, active_producers=[],
                                                                 error_code=refused))
                else:
                    partitions.append(Response.PartitionResponse(partition_index=index, error_code=0, active_producers=[
                        Response.ProducerState(producer_id=entry.producer_id, producer_epoch=entry.producer_epoch,
                                               last_sequence=entry.last_seq, last_timestamp=entry.last_timestamp,
                                               coordinator_epoch=entry.coordinator_epoch,
                                               current_txn_start_offset=entry.current_txn_first_offset)
                        for entry in partition_log.producers.values()]))
            topics.append(Response.TopicResponse(name=topic.name, partitions=partitions))
        return Response(topics=topics)

    # ---- DescribeTransactions, ListTransactions -------------------------------------------------
    async def describe_transactions(self, request: m.DescribeTransactionsRequest, version: int,
                                    context: RequestContext) -> m.DescribeTransactionsResponse:
        Response = m.DescribeTransactionsResponse
        states = []
        for transactional_id in request.transactional_ids:
            metadata = None
            if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
                error = _TXN_DENIED
            else:
                metadata = self.coordinator.describe(transactional_id)
                error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND if metadata is None else ErrorCode.NONE
            if metadata is None:
                states.append(Response.TransactionState(error_code=error, transactional_id=transactional_id,
                                                        transaction_state="", transaction_timeout_ms=0,
                                                        transaction_start_time_ms=-1, producer_id=-1,
                                                        producer_epoch=-1, topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(metadata.partitions):
                by_topic.setdefault(topic, []).append(index)
            states.append(Response.TransactionState(
                error_code=0, transactional_id=transactional_id, transaction_state=metadata.state.value,
                transaction_timeout_ms=metadata.timeout_ms, transaction_start_time_ms=metadata.start_ms,
                producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch,
                topics=[Response.TopicData(topic=topic, partitions=parts) for topic, parts in by_topic.items()]))
        return Response(transaction_states=states)

    async def list_transactions(self, request: m.ListTransactionsRequest, version: int,
                                context: RequestContext) -> m.ListTransactionsResponse:
        Response = m.ListTransactionsResponse
        known = {state.value for state in TxnState}
        unknown = [state for state in request.state_filters if state not in known]
        pattern = request.transactional_id_pattern if version >= 2 else None
        try:
            found = self.coordinator.list(set(request.state_filters) - set(unknown), set(request.producer_id_filters),
                                          request.duration_filter if version >= 1 else -1, pattern)
        except re.error:
            return Response(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION, unknown_state_filters=[],
                            transaction_states=[])
        if unknown and len(unknown) == len(request.state_filters):
            found = []  # only unknown states asked for: nothing matches
        return Response(error_code=0, unknown_state_filters=unknown, transaction_states=[
            Response.TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                      transaction_state=t.state.value)
            for t in found
            if self.state.allowed(context, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id)])


def _topic_results(errors: dict[tuple[str, int], int]) -> list:
    Response = m.AddPartitionsToTxnResponse
    by_topic: dict[str, list] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(Response.AddPartitionsToTxnPartitionResult(
            partition_index=index, partition_error_code=error))
    return [Response.AddPartitionsToTxnTopicResult(name=name, results_by_partition=parts)
            for name, parts in by_topic.items()]


def _txn_offset_response(keys: list[tuple[str, int]], errors: dict[tuple[str, int], int]) -> m.TxnOffsetCommitResponse:
    """Each requested (topic, partition) with its error (NONE where ``errors`` has none), in request order."""
    Response = m.TxnOffsetCommitResponse
    by_topic: dict[str, list[m.TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition]] = {}
    for topic, index in keys:
        by_topic.setdefault(topic, []).append(Response.TxnOffsetCommitResponsePartition(
            partition_index=index, error_code=errors.get((topic, index), ErrorCode.NONE)))
    return Response(topics=[Response.TxnOffsetCommitResponseTopic(name=name, partitions=parts)
                            for name, parts in by_topic.items()])

"""Produce: records checked on a worker thread, appended on the event loop.

Checking a batch means decompressing it and decoding every record (as Kafka's LogValidator does), which
for one request of many compressed batches takes long enough to stall every other connection if it
ran on the loop. So the checks of a request with compressed batches, or with many MiBs of records, run
on a small thread pool (the codecs release the GIL while they expand data); the rest, and the appends,
which are short writes, run on the loop.

A request's batches share a budget of decompressed bytes (``produce_max_decompressed_bytes``, see
``storage.validation``), so one request full of compression bombs is refused, batch by batch with
INVALID_RECORD, after a bounded amount of work; a refused batch keeps nothing of what it expanded to.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from ... import messages as m
from ...codec.base import Bytes
from ...error_codes import ErrorCode
from ...records.batch import CODEC_MASK, TRANSACTIONAL_FLAG
from ...records.layouts import ATTRIBUTES_OFFSET, BATCH_HEADER_SIZE, MAGIC_OFFSET
from ...acl_types import AclOperation as Operation, ResourceType
from .state import CLOSE_CONNECTION, CloseConnection, RequestContext
from ..storage.errors import LogAppendError
from ..storage.log import PartitionLog
from ..storage.validation import DecompressionBudget
from ..storage.validation import ValidatedBatch

__all__ = ["ProduceHandler", "CLOSE_CONNECTION"]

# Uncompressed batches up to this much a request are checked on the loop: the check is a CRC and one
# pass over the records in C (a few milliseconds at worst, for MiBs of empty records), and a thread
# hop costs more than that for the 1 MB batches producers send by default, and contends for the GIL.
_INLINE_BYTES = 4 * 1024 * 1024


class _Item:
    """One partition of a Produce request on its way through the checks and the append."""

    __slots__ = ("topic", "topic_id", "partition", "records", "log", "batch", "error", "denied", "refused")

    def __init__(self, topic: str | None, topic_id: uuid.UUID, partition: int, records: Bytes | None,
                 log: PartitionLog | None):
        self.topic = topic  # None: an id (v13+) this broker does not know
        self.topic_id = topic_id
        self.partition = partition
        self.records = records
        self.log = log
        self.batch: ValidatedBatch | None = None  # set once validated
        self.error: LogAppendError | None = None
        self.denied = False  # no WRITE on the topic for this principal
        self.refused = 0  # not the leader here, or too few in-sync replicas (the node view's error)


class ProduceHandler:
    """Serves ProduceRequest for the broker's handlers (``notify(topic, partition)`` wakes parked fetches)."""

    def __init__(self, topics, notify, max_decompressed_bytes: int, workers: int = 2, allowed=None,
                 transactions=None, verify_transactions: bool = True, metrics=None, view=None):
        """``allowed(context, operation, resource type, name)``: the authorizer's answer (None: all);
        ``transactions()``: the transaction coordinator (built on first use), asked before a transaction's
        first write to a partition (KIP-890; ``verify_transactions`` is transaction.partition.verification.enable)."""
        self.topics = topics
        self.allowed = allowed
        self.transactions = transactions
        self.verify_transactions = verify_transactions
        self.metrics = metrics  # BrokerMetrics, or None
        self.view = view  # node_view.NodeView: what this node leads (None: everything)
        self.notify = notify
        self.max_decompressed_bytes = max_decompressed_bytes
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kafkawire-produce")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    async def produce(self, request: m.ProduceRequest, version: int,
                      context: RequestContext) -> m.ProduceResponse | CloseConnection | None:
        if _has_transactional_records(request) and not self._may_write_transactionally(request, context):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif request.acks not in (-1, 0, 1):
            error = ErrorCode.INVALID_REQUIRED_ACKS
        else:
            error = ErrorCode.NONE
        now = time.time_ns() // 1_000_000
        items = []
        for topic in request.topic_data:
            name = self._topic_name(topic, version)
            items += [_Item(name, topic.topic_id, data.index, data.records,
                            self.topics.log(name, data.index) if name is not None else None)
                      for data in topic.partition_data]
        if self.allowed is not None:  # WRITE on each topic; names it may not see are refused the same way
            for item in items:
                item.denied = not self.allowed(context, Operation.WRITE, ResourceType.TOPIC, item.topic or "")
        if self.view is not None and not self.view.leads_everything:
            for item in items:
                if item.log is not None:
                    item.refused = (self.view.leader_error(item.topic, item.partition)
                                    or self.view.isr_error(item.topic, item.partition, request.acks))
        if not error:
            to_check = [item for item in items if item.log is not None and item.records is not None
                        and not item.denied and not item.refused]
            if _needs_thread(to_check):
                await asyncio.get_running_loop().run_in_executor(self._pool, self._check, to_check, now)
            else:
                self._check(to_check, now)
        responses, failed = self._append(request, version, items, error, now)
        endpoints = (self._tell_leaders(responses, items, context)
                     if version >= 10 and any(item.refused for item in items) else ())
        if request.acks == 0:
            # Kafka closes the connection when an acks=0 produce fails, so that the client notices
            return CLOSE_CONNECTION if failed else None
        return m.ProduceResponse(responses=responses, node_endpoints=endpoints)

    def _tell_leaders(self, responses, items: list[_Item], context: RequestContext) -> list:
        """KIP-951 (Produce v10+): with NOT_LEADER_OR_FOLLOWER, the partition's current leader and the
        leaders' addresses, so the client need not wait for a metadata refresh."""
        refused = {(item.topic or "", item.partition) for item in items
                   if item.refused == ErrorCode.NOT_LEADER_OR_FOLLOWER}
        leaders = set()
        for topic in responses:
            for partition in topic.partition_responses:
                if (topic.name, partition.index) in refused:
                    info = self.view.partition(topic.name, partition.index)
                    partition.current_leader = m.ProduceResponse.LeaderIdAndEpoch(leader_id=info.leader,
                                                                                  leader_epoch=info.leader_epoch)
                    leaders.add(info.leader)
        return [m.ProduceResponse.NodeEndpoint(node_id=node.node_id, host=node.host, port=node.port, rack=None)
                for node in self.view.brokers(context.listener.name, context.advertised) if node.node_id in leaders]

    def _may_write_transactionally(self, request: m.ProduceRequest, context: RequestContext) -> bool:
        """Transactional batches need a transactional id, and WRITE on it."""
        tid = request.transactional_id
        return tid is not None and (self.allowed is None or
                                    self.allowed(context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid))

    def _verify_transaction(self, request: m.ProduceRequest, version: int, item: _Item) -> None:
        """Before a transaction's first write to a partition, the coordinator confirms the partition is
        in the transaction, or (Produce v12+, transaction version 2) adds it. Raises LogAppendError with
        the error Kafka's ``ReplicaManager`` gives the producer."""
        batch, log = item.batch, item.log
        assert batch is not None and log is not None  # called for a validated batch only
        if log.has_ongoing_transaction(batch.producer_id, batch.producer_epoch):
            return
        add = version >= 12
        if not add and not self.verify_transactions:
            return
        code = self.transactions().verify_or_add(request.transactional_id, batch.producer_id, batch.producer_epoch,
                                               (item.topic, item.partition), add)
        if code == ErrorCode.NONE:
            return
        if code == ErrorCode.PRODUCER_FENCED:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        elif code == ErrorCode.TRANSACTION_ABORTABLE and version != 11:
            code = ErrorCode.INVALID_TXN_STATE  # TRANSACTION_ABORTABLE is for Produce v11 clients (KIP-890)
        elif code in _RETRIABLE_VERIFICATION:  # one older clients retry without a metadata refresh
            code = ErrorCode.NOT_ENOUGH_REPLICAS
        message = ("Partition was not added to the transaction" if code == ErrorCode.INVALID_TXN_STATE else
                   "Unable to verify the partition has been added to the transaction")
        raise LogAppendError(ErrorCode(code), message)

    def _topic_name(self, topic: m.ProduceRequest.TopicProduceData, version: int) -> str | None:
        """The topic a request's entry names: by name, or from v13 by id (KIP-516; None if unknown)."""
        if version < 13:
            return topic.name
        found = self.topics.by_id.get(topic.topic_id)
        return found.name if found is not None else None

    def _check(self, items: list[_Item], now: int) -> None:
        """Validate each item's batch (on a worker thread for large or compressed requests), the request's
        compressed batches sharing one budget of decompressed bytes."""
        budget = DecompressionBudget(self.max_decompressed_bytes)
        for item in items:
            assert item.log is not None and item.records is not None  # the items to check have both
            try:
                item.batch = item.log.validate(item.records, now, budget)
            except LogAppendError as failure:
                # A copy without the traceback and the chained errors: their frames hold the records
                # this batch expanded to, which the answer does not need.
                item.error = LogAppendError(failure.error_code, failure.message, failure.record_errors)

    def _append(self, request: m.ProduceRequest, version: int, items: list[_Item], error: ErrorCode,
                now: int) -> tuple[list[m.ProduceResponse.TopicProduceResponse], bool]:
        responses: list = []
        by_topic: dict[tuple, list] = {}
        failed = False
        last = None
        answer = m.ProduceResponse  # the classes looked up once a request, not once a partition
        partition_answer, topic_answer = answer.PartitionProduceResponse, answer.TopicProduceResponse
        for item in items:
            response = partition_answer(index=item.partition, base_offset=-1, log_append_time_ms=-1,
                                        log_start_offset=-1)
            if item.denied:
                response.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif error:
                response.error_code = error
            elif item.topic is None:
                response.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            elif item.log is None:
                response.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif item.refused:
                response.error_code = item.refused
            elif item.log.offline:  # its log directory failed
                response.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            elif item.records is None:
                response.error_code = ErrorCode.CORRUPT_MESSAGE
            elif item.error is not None:
                _set_error(response, item.error, item.log)
            else:
                batch = item.batch
                assert batch is not None  # validated without an error
                try:
                    verified = False
                    if self.transactions is not None and batch.attributes & TRANSACTIONAL_FLAG \
                            and batch.producer_id >= 0:
                        self._verify_transaction(request, version, item)
                        verified = True
                    # the request's buffer is the connection's own, read once: the offsets go into it
                    result = item.log.append_batch(batch, now_ms=now, transaction_verified=verified,
                                                   in_place=True)
                except LogAppendError as failure:
                    _set_error(response, failure, item.log)
                    if failure.error_code == ErrorCode.KAFKA_STORAGE_ERROR and not item.log.closed:
                        self.topics.dir_failed(item.log, failure.message)
                else:
                    response.base_offset = result.base_offset
                    response.log_append_time_ms = result.log_append_time
                    response.log_start_offset = result.log_start_offset
                    if not result.duplicate:
                        self.notify(item.topic, item.partition)
                        if self.metrics is not None:
                            self.metrics.bytes_in.labels(item.topic).inc(batch.size)
                            self.metrics.messages_in.labels(item.topic).inc(batch.count)
            failed = failed or response.error_code != 0
            key = (item.topic, item.topic_id)
            partitions = by_topic.get(key)
            if partitions is None or last != key:  # topics as they came, consecutively
                partitions = by_topic[key] = []
                responses.append(topic_answer(  # by name before v13, by id from v13
                    name=item.topic or "", topic_id=item.topic_id, partition_responses=partitions))
                last = key
            partitions.append(response)
        return responses, failed


def _set_error(response: m.ProduceResponse.PartitionProduceResponse, failure: LogAppendError,
               log: PartitionLog) -> None:
    response.error_code = failure.error_code
    response.error_message = failure.message
    response.log_start_offset = log.log_start_offset
    response.record_errors = [m.ProduceResponse.BatchIndexAndErrorMessage(batch_index=index,
                                                                         batch_index_error_message=text)
                              for index, text in failure.record_errors]


_RETRIABLE_VERIFICATION = (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                           ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)


def _has_transactional_records(request: m.ProduceRequest) -> bool:
    """Whether any partition's first batch is a transactional v2 batch (``hasTransactionalRecords``)."""
    for topic in request.topic_data:
        for data in topic.partition_data:
            records = data.records
            if records is not None and len(records) >= BATCH_HEADER_SIZE and records[MAGIC_OFFSET] == 2 \
                    and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG:
                return True
    return False


def _is_compressed(records: Bytes) -> bool:
    return len(records) >= BATCH_HEADER_SIZE and (records[ATTRIBUTES_OFFSET + 1] & CODEC_MASK) != 0


def _needs_thread(items: list[_Item]) -> bool:
    total = 0
    for item in items:
        records = item.records
        if records is None:  # not checked
            continue
        if _is_compressed(records):
            return True
        total += len(records)
    return total > _INLINE_BYTES

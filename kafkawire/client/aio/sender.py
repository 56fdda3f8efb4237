"""The producer's sender: a task that drains the RecordAccumulator into Produce requests.

It asks the accumulator which nodes have sendable batches (``ready``), drains them (``drain``) into
one Produce request per node, at the highest Produce version both sides speak (v3+, record batch
v2), with at most ``max.in.flight.requests.per.connection`` requests in flight per broker. With
``enable.idempotence`` it first gets a producer id (InitProducerId); batches get sequence numbers as
they are drained, and a failed request's batches go back in sequence order to be sent again (the
broker drops duplicates by sequence), only once the batches before them are acknowledged, so retries
never reorder. A transactional producer's sender also runs its TransactionDriver (producer id, epoch
and requests to the transaction coordinator) and sends only partitions added to the transaction.
Retriable errors are retried until ``delivery.timeout.ms`` after the batch was created
(or ``retries`` runs out); leader and topic errors refresh metadata first. A batch that fails for
good while later ones hold sequences makes the producer fetch a new epoch (KIP-360) once nothing is
in flight, since the broker would refuse the gap.

The sender runs on the producer's event loop. ``lock`` is held around every use of the accumulator
and its pool: a no-op for the AsyncProducer, a real lock when the blocking Producer appends from
other threads.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import InitProducerIdRequest, ProduceRequest

from ..core.cluster_metadata import METADATA_REFRESH_ERRORS, ClusterMetadata
from ..core.producer.accumulator import RecordAccumulator
from ..core.producer.batch import ProducerBatch
from ..core.producer.config import ProducerConfig
from ..core.topic_partition import TopicPartition
from ..errors import IncompatibleBrokerError, KafkaConnectionError, KafkaError, error_for_code
from .connection import BrokerConnection
from .connection_manager import ConnectionManager
from .metadata_refresh import Metadata
from .transaction_driver import TransactionDriver
from .waiting import wait_event

__all__ = ["Sender"]

log = logging.getLogger(__name__)

_PRODUCE_MIN_VERSION = 3  # record batch v2
_PRODUCE_MAX_VERSION = 13
_PRODUCE_TOPIC_ID_VERSION = 13  # KIP-516: topics named by id
_INIT_PRODUCER_ID_BUMP_VERSION = 3  # KIP-360: an idempotent producer may bump its own epoch


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class Sender:
    """The sender task and its state (see the module docstring)."""

    def __init__(self, config: ProducerConfig, accumulator: RecordAccumulator, metadata: Metadata,
                 connections: ConnectionManager, lock: AbstractContextManager, stats: dict[str, float],
                 on_fatal: Callable[[BaseException], None]):
        assert config.delivery_timeout_ms is not None  # (ProducerConfig resolves it)
        self.config = config
        self.delivery_timeout_ms = config.delivery_timeout_ms
        self.accumulator = accumulator
        self.metadata = metadata
        self.connections = connections
        self.lock = lock
        self.stats = stats
        self.on_fatal = on_fatal  # told once the producer can send no more
        self.leaders: dict[TopicPartition, int | None] = {}
        self.in_flight: dict[int, int] = {}  # node -> produce requests awaiting a response
        self.fatal: BaseException | None = None
        self.closing = False  # close() began: everything queued is sendable
        self.stopped = False
        self.due = False  # woken and not yet run: appends need not wake it again
        self.wakeup = asyncio.Event()  # bound to the loop that first waits on it
        self.progress = asyncio.Event()  # set when batches settle
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._connecting: set[int] = set()
        self._producer_id_task: asyncio.Task | None = None
        self._epoch_bump_needed = False
        self.transactions: TransactionDriver | None = None  # set by a transactional producer

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="kafkawire-sender")

    def wake(self) -> None:
        """Run a pass soon (from the loop's thread)."""
        self.due = True
        self.wakeup.set()

    def wake_from_thread(self) -> None:
        """``wake`` from another thread; a no-op while a wake-up is already on its way."""
        if not self.due:
            assert self._loop is not None  # (appends from threads start after start())
            self.due = True
            self._loop.call_soon_threadsafe(self.wakeup.set)

    def on_metadata(self, cluster: ClusterMetadata) -> None:
        self.leaders = cluster.leaders(self.metadata.topics)
        if self._task is not None:
            self.wake()

    async def wait_until(self, condition: Callable[[], bool], timeout_ms: float | None) -> None:
        """Wait for ``condition`` (checked whenever batches settle); TimeoutError after ``timeout_ms``."""
        deadline = None if timeout_ms is None else _now_ms() + timeout_ms
        while not condition():
            if self._task is not None and self._task.done():
                if not self._task.cancelled():
                    self._task.result()  # re-raise what stopped the sender
                return
            self.progress.clear()
            remaining = None if deadline is None else (deadline - _now_ms()) / 1000
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"the records were not all acknowledged within {timeout_ms} ms")
            await wait_event(self.progress, remaining)

    async def stop(self, timeout_s: float = 5.0) -> None:
        """End the task (it checks ``stopped`` on every pass); waits at most ``timeout_s`` for it."""
        self.stopped = True
        txn_task = self.transactions.task if self.transactions is not None else None
        tasks = {task for task in (self._task, self._producer_id_task, txn_task) if task is not None and not task.done()}
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    # ---- the loop --------------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self.stopped:
            self.wakeup.clear()
            self.due = False
            try:
                with self.lock:
                    delay_ms = self._run_once(_now_ms())
                    settled = self.closing and not self.accumulator.has_incomplete()
            except Exception as error:  # a bug here must not leave send() and flush() waiting forever
                log.exception("the producer's sender failed")
                self.fail_fatally(error)
                raise
            if settled:
                self.progress.set()
            await wait_event(self.wakeup, None if math.isinf(delay_ms) else max(delay_ms, 0.5) / 1000)

    def _run_once(self, now: float) -> float:
        """One pass: expire, look up what is missing, drain and send. Returns ms until the next pass."""
        accumulator = self.accumulator
        expired = accumulator.expire_batches(now)
        if expired:
            if self.transactions is not None:
                for batch in expired:
                    error = batch.result.error
                    assert error is not None  # (expired batches failed with DeliveryTimeout)
                    self.transactions.manager.handle_failed_batch(error, batch.has_sequence)
            self.progress.set()
        self.metadata.maybe_refresh()  # when due; its listener wakes the sender
        transactions = self.transactions
        txn_delay = math.inf
        if transactions is not None:
            txn_delay = transactions.pump(now)
            if not transactions.manager.has_producer_id:
                return txn_delay  # init_transactions first; its answer wakes the sender
        elif self.config.enable_idempotence and (accumulator.producer_id is None or self._epoch_bump_needed):
            self._ensure_producer_id()
            if accumulator.producer_id is None or self._epoch_bump_needed:
                return float(self.config.retry_backoff_ms)  # InitProducerId's answer wakes the sender sooner
        check = accumulator.ready(self.leaders, now)
        if check.unknown_leader_topics:
            self.metadata.add_topics(check.unknown_leader_topics)
            self.metadata.request_update()
            self.metadata.maybe_refresh()
        nodes = []
        for node in check.ready_nodes:
            if self.in_flight.get(node, 0) >= self.config.max_in_flight_requests_per_connection:
                continue
            if self.connections.get_ready(node) is None:
                self._connect(node)
                continue
            nodes.append(node)
        delay = min(check.next_ready_check_delay_ms, txn_delay)
        if nodes:
            sent = False
            for node, batches in accumulator.drain(self.leaders, nodes, self.config.max_request_size, now).items():
                if batches:
                    self._send_produce(node, batches)
                    sent = True
            if sent:
                # Drain takes one batch per partition; a backlog goes out in further requests now, while
                # in-flight room lasts, rather than one request per round trip (as Java's sender loops).
                self.wake()
        if check.unknown_leader_topics or self.metadata.needs_update:
            delay = min(delay, self.config.retry_backoff_ms)
        return delay

    def _connect(self, node: int) -> None:
        if node in self._connecting:
            return
        self._connecting.add(node)

        async def connect():
            try:
                await self.connections.connection(node)
            except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
                log.debug("producer: cannot connect to node %d: %s", node, error)
                self.metadata.request_update()
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            finally:
                self._connecting.discard(node)
                if not self.stopped:
                    self.wake()
        asyncio.get_running_loop().create_task(connect())

    # ---- producer id -----------------------------------------------------------------------------
    def _ensure_producer_id(self) -> None:
        if self._producer_id_task is not None and not self._producer_id_task.done():
            return
        if self._epoch_bump_needed and any(self.in_flight.values()):
            return  # the new epoch restarts sequences: wait for every answer first
        self._producer_id_task = asyncio.get_running_loop().create_task(self._init_producer_id())

    async def _init_producer_id(self) -> None:
        self.stats["producer-id-requests"] += 1
        try:
            connection = await self.least_loaded_connection()
            version = connection.api_version(InitProducerIdRequest.API_KEY)
            current = self.accumulator.producer_id
            bump = self._epoch_bump_needed and version >= _INIT_PRODUCER_ID_BUMP_VERSION
            producer_id, epoch = (current, self.accumulator.producer_epoch) if bump and current is not None else (-1, -1)
            request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1, producer_id=producer_id,
                                            producer_epoch=epoch)
            response = await connection.send(request, version)
        except IncompatibleBrokerError as error:
            self.fail_fatally(error)
            return
        except KafkaConnectionError as error:
            log.debug("InitProducerId failed: %s", error)
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            self.wake()
            return
        if response.error_code:
            refused = KafkaError(response.error_code, "InitProducerId")
            if not refused.retriable:
                self.fail_fatally(refused)
                return
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        else:
            with self.lock:
                self.accumulator.set_producer_id(response.producer_id, response.producer_epoch)
            self._epoch_bump_needed = False
        self.wake()

    def fail_fatally(self, error: BaseException, *, logged: bool = False) -> None:
        """The producer cannot go on: fail everything queued; later sends raise ``error`` (logged here
        unless it was already)."""
        if not logged:
            log.error("producer failed: %s", error)
        self.fatal = error
        if self.transactions is not None:
            self.transactions.manager.fail(error)
        self.on_fatal(error)
        with self.lock:
            self.accumulator.abort_undrained(error)
        self.progress.set()

    async def least_loaded_connection(self) -> BrokerConnection:
        nodes = sorted(self.metadata.cluster.brokers, key=lambda n: self.in_flight.get(n, 0))
        for node in nodes:
            ready = self.connections.get_ready(node)
            if ready is not None:
                return ready
        if nodes:
            return await self.connections.connection(nodes[0])
        return await self.connections.bootstrap(self.config.bootstrap_servers)

    # ---- produce requests ------------------------------------------------------------------------
    def _send_produce(self, node: int, batches: list[ProducerBatch]) -> None:
        connection = self.connections.get_ready(node)
        assert connection is not None  # (drained for ready nodes only, in this same pass)
        acks = self.config.acks
        topics: dict[str, list] = {}
        size = 0
        records = 0
        for batch in batches:
            data = batch.build()
            size += len(data)
            if batch.attempts == 0:
                records += batch.record_count
            topics.setdefault(batch.tp.topic, []).append(
                ProduceRequest.PartitionProduceData(index=batch.tp.partition, records=data))
        request = ProduceRequest(transactional_id=self.config.transactional_id, acks=acks, timeout_ms=self.config.request_timeout_ms,
                                 topic_data=[ProduceRequest.TopicProduceData(name=name, partition_data=parts)
                                             for name, parts in topics.items()])
        stats = self.stats
        stats["record-send-total"] += records
        stats["produce-request-total"] += 1
        stats["batch-total"] += len(batches)
        stats["bytes-sent-total"] += size
        versions = (_PRODUCE_MIN_VERSION, _PRODUCE_MAX_VERSION)
        if self.transactions is not None:
            versions = self.transactions.produce_versions(*versions)
        try:
            version = connection.api_version(ProduceRequest.API_KEY, *versions)
        except IncompatibleBrokerError as error:
            for batch in batches:
                self._fail(batch, error)
            return
        version = _name_topics_by_id(request, version, self.metadata.cluster.topic_id)
        future = connection.request(request, version)
        if acks == 0:
            for batch in batches:  # nobody will say where they went
                self.accumulator.complete_batch(batch, -1)
            self.progress.set()
            return
        self.in_flight[node] = self.in_flight.get(node, 0) + 1
        future.add_done_callback(lambda done: self._on_produce_response(node, batches, done))

    def _on_produce_response(self, node: int, batches: list[ProducerBatch], done: asyncio.Future) -> None:
        self.in_flight[node] = max(0, self.in_flight.get(node, 0) - 1)
        now = _now_ms()
        error = done.exception() if not done.cancelled() else KafkaConnectionError("request cancelled")
        with self.lock:
            batches = [batch for batch in batches if not batch.done]  # not failed by a forced close meanwhile
            if error is not None:
                log.debug("produce request to node %d failed: %s", node, error)
                self.metadata.request_update()
                for batch in _in_sequence_order(batches):
                    self._retry_or_fail(batch, error, now, retriable=isinstance(error, KafkaConnectionError))
            else:
                self._take_answers(batches, done.result(), now)
        self.progress.set()
        if not self.stopped:
            self.wake()

    def _take_answers(self, batches: list[ProducerBatch], response, now: float) -> None:
        names = {self.metadata.cluster.topic_id(b.tp.topic): b.tp.topic for b in batches}  # v13 answers by id
        answers = {(names.get(topic.topic_id, topic.name), p.index): p
                   for topic in response.responses for p in topic.partition_responses}
        for batch in _in_sequence_order(batches):
            answer = answers.get(batch.tp)
            if answer is None:
                self._retry_or_fail(batch, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                      f"no answer for {batch.tp} in the produce response"),
                                    now, retriable=False)
                continue
            code = answer.error_code
            if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                self.accumulator.complete_batch(batch, answer.base_offset, answer.log_append_time_ms)
                continue
            if code in METADATA_REFRESH_ERRORS:
                self.metadata.request_update()
            failure = error_for_code(code, f"producing to {batch.tp.topic}-{batch.tp.partition}"
                                       + (f": {answer.error_message}" if answer.error_message else ""))
            retriable = failure.retriable
            if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                # caused by an earlier batch that failed in this same round: it goes again first
                retriable = not self._is_oldest_unacknowledged(batch)
            self._retry_or_fail(batch, failure, now, retriable=retriable)

    def _is_oldest_unacknowledged(self, batch: ProducerBatch) -> bool:
        # the accumulator keeps each partition's unacknowledged batches in sequence order
        return not self.accumulator._retry_waits_for_earlier(batch)  # noqa: SLF001

    def _retry_or_fail(self, batch: ProducerBatch, error: BaseException, now: float, retriable: bool) -> None:
        within = now - batch.created_ms < self.delivery_timeout_ms
        if retriable and within and batch.attempts < self.config.retries and not self.stopped:
            self.stats["record-retry-total"] += batch.record_count
            self.accumulator.reenqueue(batch, now)
            return
        if retriable and not within:
            error = TimeoutError(f"expiring {batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition}: "
                                 f"delivery.timeout.ms ({self.delivery_timeout_ms}) passed; last error: {error}")
        self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        sequenced = batch.has_sequence
        self.stats["record-error-total"] += batch.record_count
        self.accumulator.fail_batch(batch, error)
        if self.transactions is not None:
            self.transactions.manager.handle_failed_batch(error, sequenced)  # aborts the transaction or is fatal
        elif sequenced and self.config.enable_idempotence:
            self._epoch_bump_needed = True  # later batches would hit the gap: restart sequences


def _in_sequence_order(batches: list[ProducerBatch]) -> list[ProducerBatch]:
    # reenqueue puts retried batches back in sequence order only if they come back oldest first
    return sorted(batches, key=lambda b: (b.tp, b.base_sequence))


def _name_topics_by_id(request: ProduceRequest, version: int, topic_id: Callable[[str], uuid.UUID | None]) -> int:
    """The version to send ``request`` at: from v13 its topics go by id (``topic_id(name)``, None when the
    metadata has none), else at v12, the same request by name."""
    if version < _PRODUCE_TOPIC_ID_VERSION:
        return version
    ids = [topic_id(topic.name) for topic in request.topic_data]
    if None in ids:
        return _PRODUCE_TOPIC_ID_VERSION - 1
    for topic, found in zip(request.topic_data, ids):
        if found is not None:
            topic.topic_id = found
    return version

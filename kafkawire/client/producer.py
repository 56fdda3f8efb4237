"""AsyncProducer: the RecordAccumulator and its sender run over broker connections.

``send()`` waits (up to ``max.block.ms``) for the topic's metadata and for ``buffer.memory`` in the
BufferPool, appends the record, and returns an awaitable for its RecordMetadata::

    async with AsyncProducer(bootstrap_servers="localhost:9092") as producer:
        delivery = await producer.send("events", b"value", key=b"key")
        metadata = await delivery                # or: await producer.send_and_wait(...)

Appends are served in call order: once one waits for memory, later ones wait behind it, so records
of one partition are never reordered by the wait.

The sender task asks the accumulator which nodes have sendable batches (``ready``), drains them
(``drain``) into one Produce request per node, at the highest Produce version both sides speak
(v3+, record batch v2), with at most ``max.in.flight.requests.per.connection`` requests in flight
per broker. With ``enable.idempotence`` it first gets a producer id (InitProducerId); batches get
sequence numbers as they are drained, and a failed request's batches go back in sequence order to be
sent again (the broker drops duplicates by sequence), only once the batches before them are
acknowledged, so retries never reorder. Retriable errors are retried until ``delivery.timeout.ms``
after the batch was created (or ``retries`` runs out); leader and topic errors refresh metadata
first. A batch that fails for good while later ones hold sequences makes the producer fetch a new
epoch (KIP-360) once nothing is in flight, since the broker would refuse the gap.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import InitProducerIdRequest, ProduceRequest

from .accumulator import RecordAccumulator
from .buffer_pool import BufferPool
from .common import TopicPartition
from .connection import ConnectionManager, IncompatibleBrokerError, KafkaConnectionError, KafkaError
from .metadata import METADATA_REFRESH_ERRORS, Metadata
from .partitioner import Partitioner
from .producer_batch import ProducerBatch, RecordFuture, RecordMetadata
from . import settings
from .producer_config import ProducerConfig

__all__ = ["AsyncProducer", "RecordMetadata", "ProducerClosed"]

log = logging.getLogger(__name__)

_PRODUCE_MIN_VERSION = 3  # record batch v2
_PRODUCE_MAX_VERSION = 13
_PRODUCE_TOPIC_ID_VERSION = 13  # KIP-516: topics named by id
_INIT_PRODUCER_ID_BUMP_VERSION = 3  # KIP-360: an idempotent producer may bump its own epoch


class ProducerClosed(RuntimeError):
    """``send`` after ``close``."""


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class AsyncProducer:
    """A Kafka producer on asyncio (see the module docstring)."""

    def __init__(self, config: ProducerConfig | Mapping[str, Any] | None = None, **properties: Any) -> None:
        self.config = settings.resolve(ProducerConfig, config, properties)
        if not self.config.bootstrap_servers:
            raise ValueError("bootstrap.servers is required")
        self.pool = BufferPool(self.config.buffer_memory, self.config.batch_size)
        self.accumulator = RecordAccumulator(self.config, self.pool)
        self.partitioner = Partitioner.from_config(self.config)
        self.connections = ConnectionManager(client_id=self.config.client_id or "kafkawire-producer",
                                             request_timeout_ms=self.config.request_timeout_ms)
        self.metadata = Metadata(self.connections, self.config.bootstrap_servers, allow_auto_topic_creation=True,
                                 retry_backoff_ms=self.config.retry_backoff_ms)
        self.metadata.add_listener(self._on_metadata)
        self._leaders: dict[TopicPartition, int | None] = {}
        self._in_flight: dict[int, int] = {}  # node -> produce requests awaiting a response
        self._started = False
        self._start_lock: asyncio.Lock | None = None
        self._closing = False
        self._closed = False
        self._sender: asyncio.Task | None = None
        self._wakeup: asyncio.Event | None = None
        self._progress: asyncio.Event | None = None
        self._append_queue: list[asyncio.Future] = []  # sends waiting for memory, in call order
        self._connecting: set[int] = set()
        self._producer_id_task: asyncio.Task | None = None
        self._epoch_bump_needed = False
        self._fatal: BaseException | None = None
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._stats = {"record-send-total": 0, "record-error-total": 0, "record-retry-total": 0,
                       "produce-request-total": 0, "batch-total": 0, "bytes-sent-total": 0,
                       "metadata-refresh-total": 0, "producer-id-requests": 0}

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect, load metadata and start the sender (``send`` does this on first use)."""
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            if self._closed:
                raise ProducerClosed("the producer is closed")
            self._wakeup = asyncio.Event()
            self._progress = asyncio.Event()
            await self.metadata.refresh()
            self._sender = asyncio.get_running_loop().create_task(self._run_sender(), name="kafkawire-sender")
            self._started = True

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- sending ---------------------------------------------------------------------------------
    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, headers: Iterable[tuple[str, bytes | None]] | None = None,
                   timestamp_ms: int | None = None) -> asyncio.Future[RecordMetadata]:
        """Append a record; returns a future for its RecordMetadata. Waits at most ``max.block.ms`` for
        metadata and memory (then BufferExhausted, or UnknownTopicError / KafkaConnectionError)."""
        if self._closing or self._closed:
            raise ProducerClosed("cannot send: the producer is closed")
        if self._fatal is not None:
            raise self._fatal
        if not self._started:
            await self.start()
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, not {topic!r}")
        started = _now_ms()
        block = self.config.max_block_ms
        partitions = self.metadata.cluster.partitions_for(topic)
        if not partitions:
            await self.metadata.wait_for_topic(topic, block)
            partitions = self.metadata.cluster.partitions_for(topic)
        count = len(partitions)
        if partition is None:
            partition = self.partitioner.partition(topic, key, count, self.metadata.cluster.available_partitions(topic))
        elif isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < count:
            raise ValueError(f"partition {partition!r} is not a partition of {topic!r} (it has {count})")
        headers = tuple(headers) if headers else ()
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000  # CreateTime is wall-clock; the accumulator's clock is not
        turn = await self._take_turn() if self._append_queue else None
        try:
            remaining = max(0.0, block - (_now_ms() - started))
            result = self.accumulator.append(topic, partition, key, value, headers, timestamp_ms, _now_ms(),
                                             max_block_ms=remaining)
            if result.pending is not None:
                if turn is None:  # nobody queued (no await since the check): this send leads the queue
                    turn = asyncio.get_running_loop().create_future()
                    turn.set_result(None)
                    self._append_queue.append(turn)
                await self._memory(result.pending)
                # raises BufferExhausted after max.block.ms, or PoolClosed
                result = self.accumulator.append(topic, partition, key, value, headers, timestamp_ms, _now_ms(),
                                                 allocation=result.pending)
        finally:
            if turn is not None:
                self._leave_queue(turn)
        self.partitioner.on_append(topic, partition, result.appended_bytes, result.batch_is_full)
        self._stats["record-send-total"] += 1
        if result.new_batch_created or result.batch_is_full:
            self._wakeup.set()
        return _as_asyncio_future(result.future)

    async def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                            partition: int | None = None, headers: Iterable[tuple[str, bytes | None]] | None = None,
                            timestamp_ms: int | None = None) -> RecordMetadata:
        """``send`` and wait for the broker's acknowledgement."""
        return await (await self.send(topic, value, key, partition, headers, timestamp_ms))

    # Once a send waits for memory, later sends queue behind it (the head of _append_queue is the one
    # appending), so that a record cannot overtake an earlier one of the same partition.
    async def _take_turn(self) -> asyncio.Future:
        turn = asyncio.get_running_loop().create_future()
        self._append_queue.append(turn)
        if len(self._append_queue) == 1:
            turn.set_result(None)
        try:
            await turn
        except BaseException:
            self._leave_queue(turn)
            raise
        return turn

    def _leave_queue(self, turn: asyncio.Future) -> None:
        if turn not in self._append_queue:
            return
        first = self._append_queue[0] is turn
        self._append_queue.remove(turn)
        if first and self._append_queue and not self._append_queue[0].done():
            self._append_queue[0].set_result(None)

    async def _memory(self, allocation) -> None:
        waiter = asyncio.get_running_loop().create_future()
        allocation.add_done_callback(lambda _a: waiter.done() or waiter.set_result(None))
        self._wakeup.set()  # a waiting allocation makes every batch sendable (the pool is exhausted)
        self._schedule_pool_expiry()
        try:
            await waiter
        except BaseException:
            allocation.cancel()
            raise

    def _schedule_pool_expiry(self) -> None:
        deadline = self.pool.next_deadline_ms()
        if deadline is None:
            return
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        delay = max(0.0, deadline - self.pool.clock_ms()) / 1000

        def expire():
            self._expiry_timer = None
            self.pool.expire()
            self._schedule_pool_expiry()
        self._expiry_timer = asyncio.get_running_loop().call_later(delay + 0.001, expire)

    async def flush(self, timeout_ms: float | None = None) -> None:
        """Send everything appended so far and wait until each record is acknowledged or failed."""
        if not self._started:
            return
        self.accumulator.begin_flush()
        self._wakeup.set()
        try:
            await self._wait_until(lambda: not self.accumulator.has_incomplete(), timeout_ms)
        finally:
            self.accumulator.end_flush()

    async def _wait_until(self, condition, timeout_ms: float | None) -> None:
        deadline = None if timeout_ms is None else _now_ms() + timeout_ms
        while not condition():
            if self._sender is not None and self._sender.done():
                self._sender.result()  # re-raise what stopped the sender
                return
            self._progress.clear()
            remaining = None if deadline is None else (deadline - _now_ms()) / 1000
            if remaining is not None and remaining <= 0:
                raise asyncio.TimeoutError(f"flush did not finish within {timeout_ms} ms")
            try:
                await asyncio.wait_for(self._progress.wait(), remaining)
            except asyncio.TimeoutError:
                continue

    async def close(self, timeout_ms: float | None = None) -> None:
        """Flush (up to ``timeout_ms``; None waits), then stop. Records still unsent after the timeout fail."""
        if self._closed:
            return
        self._closing = True
        try:
            if self._started:
                self.accumulator.close()
                self._wakeup.set()
                try:
                    await self._wait_until(lambda: not self.accumulator.has_incomplete(), timeout_ms)
                except asyncio.TimeoutError:
                    log.warning("closing the producer with records still unacknowledged")
        finally:
            self._closed = True
            self.accumulator.close()
            self.pool.close()
            self.accumulator.abort_undrained(ProducerClosed("the producer closed before the record was sent"))
            if self._sender is not None:
                self._sender.cancel()
                try:
                    await self._sender
                except (asyncio.CancelledError, Exception):
                    pass
            if self._expiry_timer is not None:
                self._expiry_timer.cancel()
            await self.metadata.close()
            await self.connections.close()

    # ---- metadata --------------------------------------------------------------------------------
    def _on_metadata(self, cluster) -> None:
        self._stats["metadata-refresh-total"] += 1
        self._leaders = cluster.leaders(self.metadata.topics)
        if self._wakeup is not None:
            self._wakeup.set()

    async def partitions_for(self, topic: str) -> list[int]:
        if not self._started:
            await self.start()
        await self.metadata.wait_for_topic(topic, self.config.max_block_ms)
        return self.metadata.cluster.partitions_for(topic)

    # ---- the sender ------------------------------------------------------------------------------
    async def _run_sender(self) -> None:
        while True:
            self._wakeup.clear()
            try:
                delay_ms = self._run_once(_now_ms())
            except Exception as error:  # a bug here must not leave send() and flush() waiting forever
                log.exception("the producer's sender failed")
                self._fatal = error
                self.accumulator.abort_undrained(error)
                self._progress.set()
                raise
            if self._closing and not self.accumulator.has_incomplete():
                self._progress.set()
            timeout = None if math.isinf(delay_ms) else max(delay_ms, 0.5) / 1000
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    def _run_once(self, now: float) -> float:
        """One pass: expire, look up what is missing, drain and send. Returns ms until the next pass."""
        accumulator = self.accumulator
        if accumulator.expire_batches(now):
            self._progress.set()
        self.metadata.maybe_refresh()  # when due; its listener wakes the sender
        if self.config.enable_idempotence and (accumulator.producer_id is None or self._epoch_bump_needed):
            self._ensure_producer_id()
            if accumulator.producer_id is None or self._epoch_bump_needed:
                return float(self.config.retry_backoff_ms)  # InitProducerId's answer wakes the sender sooner
        check = accumulator.ready(self._leaders, now)
        if check.unknown_leader_topics:
            self.metadata.add_topics(check.unknown_leader_topics)
            self.metadata.request_update()
            self.metadata.maybe_refresh()
        nodes = []
        for node in check.ready_nodes:
            if self._in_flight.get(node, 0) >= self.config.max_in_flight_requests_per_connection:
                continue
            if self.connections.get_ready(node) is None:
                self._connect(node)
                continue
            nodes.append(node)
        delay = check.next_ready_check_delay_ms
        if nodes:
            sent = False
            for node, batches in accumulator.drain(self._leaders, nodes, self.config.max_request_size, now).items():
                if batches:
                    self._send_produce(node, batches)
                    sent = True
            if sent:
                # Drain takes one batch per partition; a backlog goes out in further requests now, while
                # in-flight room lasts, rather than one request per round trip (as Java's sender loops).
                self._wakeup.set()
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
                self._wakeup.set()
        asyncio.get_running_loop().create_task(connect())

    # ---- producer id -----------------------------------------------------------------------------
    def _ensure_producer_id(self) -> None:
        if self._producer_id_task is not None and not self._producer_id_task.done():
            return
        if self._epoch_bump_needed and any(self._in_flight.values()):
            return  # the new epoch restarts sequences: wait for every answer first
        self._producer_id_task = asyncio.get_running_loop().create_task(self._init_producer_id())

    async def _init_producer_id(self) -> None:
        self._stats["producer-id-requests"] += 1
        try:
            connection = await self._least_loaded_connection()
            version = connection.api_version(InitProducerIdRequest.API_KEY)
            current = self.accumulator.producer_id
            bump = self._epoch_bump_needed and current is not None and version >= _INIT_PRODUCER_ID_BUMP_VERSION
            request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1,
                                            producer_id=current if bump else -1,
                                            producer_epoch=self.accumulator.producer_epoch if bump else -1)
            response = await connection.send(request, version)
        except IncompatibleBrokerError as error:
            self._fail_fatally(error)
            return
        except KafkaConnectionError as error:
            log.debug("InitProducerId failed: %s", error)
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            self._wakeup.set()
            return
        if response.error_code:
            error = KafkaError(response.error_code, "InitProducerId")
            if not error.retriable:
                self._fail_fatally(error)
                return
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        else:
            self.accumulator.set_producer_id(response.producer_id, response.producer_epoch)
            self._epoch_bump_needed = False
        self._wakeup.set()

    def _fail_fatally(self, error: BaseException) -> None:
        log.error("producer failed: %s", error)
        self._fatal = error
        self.accumulator.abort_undrained(error)
        self._progress.set()

    async def _least_loaded_connection(self):
        nodes = sorted(self.metadata.cluster.brokers, key=lambda n: self._in_flight.get(n, 0))
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
        acks = self.config.acks
        topics: dict[str, list] = {}
        size = 0
        for batch in batches:
            data = batch.build()
            size += len(data)
            topics.setdefault(batch.tp.topic, []).append(
                ProduceRequest.PartitionProduceData(index=batch.tp.partition, records=data))
        request = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=self.config.request_timeout_ms,
                                 topic_data=[ProduceRequest.TopicProduceData(name=name, partition_data=parts)
                                             for name, parts in topics.items()])
        self._stats["produce-request-total"] += 1
        self._stats["batch-total"] += len(batches)
        self._stats["bytes-sent-total"] += size
        try:
            version = connection.api_version(ProduceRequest.API_KEY, _PRODUCE_MIN_VERSION, _PRODUCE_MAX_VERSION)
        except IncompatibleBrokerError as error:
            for batch in batches:
                self._fail(batch, error)
            return
        version = _name_topics_by_id(request, version, self.metadata.cluster.topic_id)
        future = connection.request(request, version)
        if acks == 0:
            for batch in batches:  # nobody will say where they went
                self.accumulator.complete_batch(batch, -1)
            self._progress.set()
            return
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        future.add_done_callback(lambda done: self._on_produce_response(node, batches, done))

    def _on_produce_response(self, node: int, batches: list[ProducerBatch], done: asyncio.Future) -> None:
        self._in_flight[node] = max(0, self._in_flight.get(node, 0) - 1)
        now = _now_ms()
        error = done.exception() if not done.cancelled() else KafkaConnectionError("request cancelled")
        if error is not None:
            log.debug("produce request to node %d failed: %s", node, error)
            self.metadata.request_update()
            for batch in _in_sequence_order(batches):
                self._retry_or_fail(batch, error, now, retriable=isinstance(error, KafkaConnectionError))
        else:
            names = {self.metadata.cluster.topic_id(b.tp.topic): b.tp.topic for b in batches}  # v13 answers by id
            answers = {(names.get(topic.topic_id, topic.name), p.index): p
                       for topic in done.result().responses for p in topic.partition_responses}
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
                failure = KafkaError(code, f"producing to {batch.tp.topic}-{batch.tp.partition}"
                                           + (f": {answer.error_message}" if answer.error_message else ""))
                retriable = failure.retriable
                if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                    # caused by an earlier batch that failed in this same round: it goes again first
                    retriable = not self._is_oldest_unacknowledged(batch)
                self._retry_or_fail(batch, failure, now, retriable=retriable)
        self._progress.set()
        self._wakeup.set()

    def _is_oldest_unacknowledged(self, batch: ProducerBatch) -> bool:
        # the accumulator keeps each partition's unacknowledged batches in sequence order
        return not self.accumulator._retry_waits_for_earlier(batch)  # noqa: SLF001

    def _retry_or_fail(self, batch: ProducerBatch, error: BaseException, now: float, retriable: bool) -> None:
        within = now - batch.created_ms < self.config.delivery_timeout_ms
        if retriable and within and batch.attempts < self.config.retries and not self._closed:
            self._stats["record-retry-total"] += batch.record_count
            self.accumulator.reenqueue(batch, now)
            return
        if retriable and not within:
            error = TimeoutError(f"expiring {batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition}: "
                                 f"delivery.timeout.ms ({self.config.delivery_timeout_ms}) passed; last error: {error}")
        self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        sequenced = batch.has_sequence
        self._stats["record-error-total"] += batch.record_count
        self.accumulator.fail_batch(batch, error)
        if sequenced and self.config.enable_idempotence:
            self._epoch_bump_needed = True  # later batches would hit the gap: restart sequences

    # ---- metrics ---------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """The BufferPool's metrics plus the sender's counters, by Kafka's names where it has them."""
        out: dict[str, float] = dict(self.pool.metrics())
        out.update(self._stats)
        out["requests-in-flight"] = sum(self._in_flight.values())
        out["bufferpool-peak-in-use"] = self.pool.peak_in_use
        return out


def _in_sequence_order(batches: list[ProducerBatch]) -> list[ProducerBatch]:
    # reenqueue puts retried batches back in sequence order only if they come back oldest first
    return sorted(batches, key=lambda b: (b.tp, b.base_sequence))


def _as_asyncio_future(record_future: RecordFuture) -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()

    def resolve(done: RecordFuture) -> None:
        if future.cancelled():
            return
        error = done.exception()
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(done.result())
    record_future.add_done_callback(resolve)
    return future


def _name_topics_by_id(request: ProduceRequest, version: int, topic_id) -> int:
    """The version to send ``request`` at: from v13 its topics go by id (``topic_id(name)``, None when the
    metadata has none), else at v12, the same request by name."""
    if version < _PRODUCE_TOPIC_ID_VERSION:
        return version
    ids = [topic_id(topic.name) for topic in request.topic_data]
    if None in ids:
        return _PRODUCE_TOPIC_ID_VERSION - 1
    for topic, found in zip(request.topic_data, ids):
        topic.topic_id = found
    return version

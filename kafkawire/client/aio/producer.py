"""AsyncProducer: the RecordAccumulator and its sender (``sender``) run over broker connections.

``send()`` appends the record and returns an awaitable future for its RecordMetadata::

    async with AsyncProducer(bootstrap_servers="localhost:9092") as producer:
        delivery = await producer.send("events", b"value", key=b"key")
        metadata = await delivery                # or: await producer.send_and_wait(...)

The common case is one synchronous step, with no coroutine of its own per record: the topic's
partitions are known (cached per topic with its sticky partition, until metadata changes) and the
partition's open batch has room, so the record is written in place (``RecordAccumulator.try_append``).
Otherwise ``send`` waits (up to ``max.block.ms``) for the topic's metadata and for ``buffer.memory``
in the BufferPool (``core.producer.memory``). Once an append gives the sender work (a new batch, or one at ``batch.size``), a
send yields to the event loop once, at most every 2 ms (or linger.ms if less), so a loop that never
waits still has its batches sent, several to a request.

Appends are served in call order: once one waits for memory, later ones wait behind it, so records
of one partition are never reordered by the wait.

With ``transactional.id`` the producer is transactional (KIP-98), with confluent-kafka's calls::

    await producer.init_transactions()           # once: fences older producers with the same id
    await producer.begin_transaction()
    await producer.send("out", b"value")         # only inside a transaction
    await producer.send_offsets_to_transaction({TopicPartition("in", 0): 42}, consumer.consumer_group_metadata())
    await producer.commit_transaction()          # or abort_transaction()

The calls that wait take ``timeout`` in seconds (None: ``max.block.ms``); one that times out raises
TransactionTimeout and may be called again to go on waiting. A ProducerFencedError or other
TransactionFatalError leaves only ``close``; after a TransactionAbortableError, abort_transaction and
go on. The TransactionManager (sans I/O) keeps the state; the sender runs it (``transaction_driver``).

The blocking Producer (``kafkawire.client.blocking``) shares this producer with other threads: its ``send`` appends in
the caller's thread through ``append_now`` and ``append_blocking``, under ``lock`` (which the sender
takes too), and waits in that thread for memory; only a topic's first metadata is fetched on the
event loop.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.cluster_metadata import ClusterMetadata
from ..core.group.consumer_group_metadata import ConsumerGroupMetadata
from ..core.group.protocol import OffsetAndMetadata
from ..core.producer.accumulator import AppendResult, RecordAccumulator
from ..core.producer.config import ProducerConfig
from ..core.producer.delivery import RecordFuture, RecordMetadata
from ..core.producer.memory import Allocation, BufferPool
from ..core.producer.partitioner import Partitioner, StickyState, partition_for_key
from ..core.properties import resolve
from ..core.topic_partition import TopicPartition
from ..core.transactions.manager import TransactionManager
from ..errors import (
    AuthenticationException, ProducerClosed, TransactionError, TransactionStateError,
)
from .connection_manager import ConnectionManager
from .metadata_refresh import Metadata
from .sender import Sender
from .transaction_driver import TransactionDriver
from .waiting import wait_for_delivery

__all__ = ["AsyncProducer", "TopicRoute"]

log = logging.getLogger(__name__)


# A loop of sends that never waits yields to the sender at most this often (at most linger.ms), so
# the sender takes several full batches per request (docs/performance.md, "Producer throughput").
_YIELD_INTERVAL_MS = 2


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class TopicRoute:
    """What send's per-record path needs of a topic: its partition count and sticky partition."""

    __slots__ = ("count", "sticky")

    def __init__(self, count: int, sticky: StickyState) -> None:
        self.count = count
        self.sticky = sticky


class AsyncProducer:
    """A Kafka producer on asyncio (see the module docstring)."""

    def __init__(self, config: ProducerConfig | Mapping[str, Any] | None = None, **properties: Any) -> None:
        self.config = resolve(ProducerConfig, config, properties)
        if not self.config.bootstrap_servers:
            raise ValueError("bootstrap.servers is required")
        self.pool = BufferPool(self.config.buffer_memory, self.config.batch_size)
        self.accumulator = RecordAccumulator(self.config, self.pool)
        self.accumulator.loop_waiter = wait_for_delivery  # what awaiting a record's future waits on
        self.partitioner = Partitioner.from_config(self.config)
        self.connections = ConnectionManager.of(self.config, self.config.client_id or "kafkawire-producer",
                                                on_authentication_failure=self._on_authentication_failure)
        self.metadata = Metadata(self.connections, self.config.bootstrap_servers, allow_auto_topic_creation=True,
                                 retry_backoff_ms=self.config.retry_backoff_ms)
        self.lock: contextlib.AbstractContextManager = contextlib.nullcontext()  # see share_with_threads
        self._stats: dict[str, float] = {"record-send-total": 0, "record-error-total": 0, "record-retry-total": 0,
                       "produce-request-total": 0, "batch-total": 0, "bytes-sent-total": 0,
                       "metadata-refresh-total": 0, "producer-id-requests": 0}
        self.sender = Sender(self.config, self.accumulator, self.metadata, self.connections, self.lock,
                             self._stats, self._on_fatal)
        self.metadata.add_listener(self._on_metadata)
        self.transactions: TransactionManager | None = None
        self._txn_driver: TransactionDriver | None = None
        if self.config.transactional_id is not None:
            self.transactions = TransactionManager(self.config.transactional_id, self.config.transaction_timeout_ms,
                                                   self.config.retry_backoff_ms)
            self._txn_driver = TransactionDriver(self.transactions, self.sender, self.connections)
        self._routes: dict[str, TopicRoute] = {}  # topics send() may append to synchronously
        self._ignore_keys = self.config.partitioner_ignore_keys
        self._sticky_bytes = self.partitioner.sticky.batch_size
        self._wake = self._wake_and_yield
        self._yield_due = False  # the sender has work from an append: a send soon yields to it once
        self._next_yield = 0.0
        self._yield_interval = min(self.config.linger_ms, _YIELD_INTERVAL_MS) / 1000
        self._started = False
        self._start_lock: asyncio.Lock | None = None
        self._closing = False
        self._closed = False
        self._append_queue: list[asyncio.Future] = []  # sends waiting for memory, in call order
        self._expiry_timer: asyncio.TimerHandle | None = None

    def share_with_threads(self) -> None:
        """Let other threads append (the blocking Producer's ``send``); call before ``start``, on the
        loop the producer will run on."""
        self.lock = self.sender.lock = threading.RLock()  # re-entrant: record callbacks may send
        self.accumulator.waitable = threading.get_ident()
        self._wake = self.sender.wake_from_thread

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self, timeout_ms: float | None = None) -> None:
        """Connect, load metadata and start the sender (``send`` does this on first use). The bootstrap
        servers are tried again, after each one's reconnect backoff, for up to ``timeout_ms``
        (max.block.ms): then KafkaTimeoutError naming the brokers tried and the last cause."""
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            if self._closing or self._closed:
                raise ProducerClosed("the producer is closed")
            await self.metadata.refresh_within(self.config.max_block_ms if timeout_ms is None else timeout_ms,
                                               "fetching metadata (max.block.ms)")
            self.sender.start()
            self._started = True

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- sending ---------------------------------------------------------------------------------
    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, headers: Iterable[tuple[str, bytes | None]] | None = None,
                   timestamp_ms: int | None = None) -> RecordFuture:
        """Append a record; returns an awaitable future for its RecordMetadata. Waits at most
        ``max.block.ms`` for metadata and memory (then BufferExhausted, or UnknownTopicError /
        KafkaTimeoutError naming the brokers and why they did not answer)."""
        if not self._append_queue:
            future = self.append_now(topic, value, key, partition, headers, timestamp_ms)
            if future is not None:
                if self._yield_due and time.monotonic() >= self._next_yield:
                    self._yield_due = False
                    await asyncio.sleep(0)  # a batch is ready: the sender takes it and what filled since
                    self._next_yield = time.monotonic() + self._yield_interval
                return future
        return await self._send_waiting(topic, value, key, partition, headers, timestamp_ms)

    async def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                            partition: int | None = None, headers: Iterable[tuple[str, bytes | None]] | None = None,
                            timestamp_ms: int | None = None) -> RecordMetadata:
        """``send`` and wait for the broker's acknowledgement."""
        return await (await self.send(topic, value, key, partition, headers, timestamp_ms))

    def _wake_and_yield(self) -> None:
        self._yield_due = True
        self.sender.wake()

    def append_now(self, topic: str, value: bytes | None, key: bytes | None, partition: int | None,
                   headers: Iterable[tuple[str, bytes | None]] | None, timestamp_ms: int | None
                   ) -> RecordFuture | None:
        """``send``'s common case without waiting or a coroutine: the topic's partitions are known and
        the partition's open batch has room. None when ``send`` must take its longer path (which also
        reports bad input). The blocking Producer calls it holding ``lock``."""
        try:
            route = self._routes.get(topic)
        except TypeError:  # an unhashable topic: the longer path says what is wrong
            return None
        if route is None:
            return None
        sticky = None
        if partition is None:
            if key is None or self._ignore_keys:
                sticky = route.sticky
                partition = sticky.partition
            else:
                try:
                    partition = partition_for_key(key, route.count)
                except TypeError:
                    return None
        elif type(partition) is not int or not 0 <= partition < route.count:
            return None
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000  # CreateTime is wall-clock
        elif type(timestamp_ms) is not int or timestamp_ms < 0:
            return None
        if self.transactions is not None:
            self._add_to_transaction(topic, partition)
        appended = self.accumulator.try_append(topic, partition, key, value, () if headers is None else headers,
                                               timestamp_ms)
        if appended is None:
            return None
        future, size, full, wake = appended
        if sticky is not None:
            sticky.produced_bytes += size
            if sticky.produced_bytes >= self._sticky_bytes:
                self.partitioner.sticky.switch_if_due(sticky, full)
        if wake:
            self._wake()
        return future

    async def _send_waiting(self, topic: str, value, key, partition, headers, timestamp_ms) -> RecordFuture:
        """``send`` when the record cannot be appended at once: metadata or memory to wait for."""
        self.check_open()
        started = _now_ms()  # max.block.ms bounds the whole wait: the first metadata, the topic's, memory
        if not self._started:
            await self.start()
        partition, headers, timestamp_ms = await self._prepare(topic, key, partition, headers, timestamp_ms,
                                                               self.config.max_block_ms - (_now_ms() - started))
        if self.transactions is not None:
            self._add_to_transaction(topic, partition)
        turn = await self._take_turn() if self._append_queue else None
        try:
            remaining = max(0.0, self.config.max_block_ms - (_now_ms() - started))
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
        return self._appended(topic, partition, result)

    async def _prepare(self, topic: str, key: bytes | None, partition: int | None,
                       headers: Iterable[tuple[str, bytes | None]] | None, timestamp_ms: int | None,
                       wait_ms: float) -> tuple[int, tuple[tuple[str, bytes | None], ...], int]:
        """A record's partition, headers and timestamp, once the topic's metadata is known (waited
        for up to ``wait_ms``); bad arguments raise here."""
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, not {topic!r}")
        partition = self._partition(topic, key, partition, await self.route(topic, wait_ms))
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        return partition, tuple(headers) if headers else (), timestamp_ms

    def known_route(self, topic: str) -> TopicRoute | None:
        """The topic's route if send() may use it now (None: metadata to fetch or recheck first)."""
        return self._routes.get(topic) if isinstance(topic, str) else None

    async def route(self, topic: str, timeout_ms: float | None = None) -> TopicRoute:
        """The topic's route, waiting (up to ``timeout_ms``, max.block.ms) for its metadata on first use."""
        route = self._routes.get(topic)
        if route is None:
            if not self.metadata.cluster.partitions_for(topic):
                await self.metadata.wait_for_topic(topic, max(0.0, self.config.max_block_ms if timeout_ms is None
                                                              else timeout_ms))
            self.check_open()
            cluster = self.metadata.cluster
            partitions = cluster.partitions_for(topic)
            assert partitions is not None  # known: it had partitions, or wait_for_topic returned
            count = len(partitions)
            with self.lock:
                sticky = self.partitioner.sticky.state(topic, count, cluster.available_partitions(topic))
                route = self._routes[topic] = TopicRoute(count, sticky)
        return route

    def _partition(self, topic: str, key: bytes | None, partition: int | None, route: TopicRoute) -> int:
        if partition is None:
            if key is not None and not self._ignore_keys:
                return partition_for_key(key, route.count)
            return route.sticky.partition
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < route.count:
            raise ValueError(f"partition {partition!r} is not a partition of {topic!r} (it has {route.count})")
        return partition

    def _appended(self, topic: str, partition: int, result: AppendResult) -> RecordFuture:
        """Account for a record appended (not pending: its allocation done) and return its future."""
        self.partitioner.on_append(topic, partition, result.appended_bytes, result.batch_is_full)
        if result.new_batch_created or result.batch_is_full:
            self._wake()
        assert result.future is not None  # (None only while an allocation is pending)
        return result.future

    def check_open(self) -> None:
        """Raise ProducerClosed after close, or what stopped the sender."""
        if self._closing or self._closed:
            raise ProducerClosed("cannot send: the producer is closed")
        if self.sender.fatal is not None:
            raise self.sender.fatal

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

    async def _memory(self, allocation: Allocation) -> None:
        waiter = asyncio.get_running_loop().create_future()

        def wake(_allocation: Allocation) -> None:
            if not waiter.done():
                waiter.set_result(None)

        allocation.add_done_callback(wake)
        self.sender.wake()  # a waiting allocation makes every batch sendable (the pool is exhausted)
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

    # ---- transactions ----------------------------------------------------------------------------
    def _transactional(self) -> tuple[TransactionManager, TransactionDriver]:
        if self.transactions is None or self._txn_driver is None:
            raise TransactionStateError("a transactional call on a producer without transactional.id")
        return self.transactions, self._txn_driver

    def _timeout(self, timeout: float | None) -> float | None:
        """A transactional call's timeout in seconds: ``max.block.ms`` by default, as Kafka's producer;
        a negative one waits as long as it takes (confluent-kafka's -1)."""
        if timeout is None:
            return self.config.max_block_ms / 1000
        return None if timeout < 0 else timeout

    def _add_to_transaction(self, topic: str, partition: int) -> None:
        assert self.transactions is not None  # (called for a transactional producer only)
        if self.transactions.maybe_add_partition(TopicPartition(topic, partition)):
            self._wake()  # AddPartitionsToTxn to send

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Get the transactional.id's producer id and epoch (fencing older producers with the id, whose
        open transaction the coordinator aborts). Call once, before the first transaction."""
        manager, driver = self._transactional()
        await self.start()
        with self.lock:
            result = manager.initialize()
        await driver.wait(result, self._timeout(timeout))

    def begin_transaction(self) -> None:
        """Start a transaction: the records sent until commit_transaction or abort_transaction belong to it."""
        manager, _ = self._transactional()
        with self.lock:
            manager.begin()

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition | tuple[str, int],
                                                                 int | OffsetAndMetadata] | Iterable[Any],
                                          group_metadata: ConsumerGroupMetadata | str,
                                          timeout: float | None = None) -> None:
        """Commit a consumer's ``offsets`` (the next offset to read, per partition) with the transaction:
        a mapping of partitions to offsets, or confluent-kafka's list of TopicPartitions carrying
        ``offset``. ``group_metadata`` is the consumer's ``consumer_group_metadata()``, which lets the
        group coordinator refuse offsets from a consumer that has lost its partitions (KIP-447)."""
        manager, driver = self._transactional()
        group = ConsumerGroupMetadata(group_metadata) if isinstance(group_metadata, str) else group_metadata
        if isinstance(offsets, Mapping):
            pairs: Iterable[tuple[tuple[str, int], int | OffsetAndMetadata]] = offsets.items()
        else:
            positions: Iterable[Any] = offsets  # confluent-kafka's TopicPartitions, each with its offset
            pairs = (((position.topic, position.partition), position.offset) for position in positions)
        commits = {TopicPartition(*tp): value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
                   for tp, value in pairs}
        with self.lock:
            result = manager.send_offsets(commits, group)
        await driver.wait(result, self._timeout(timeout))

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, then commit it (EndTxn goes once the last record is
        acknowledged). A TransactionAbortableError (a record failed) means: abort_transaction, then go on."""
        manager, driver = self._transactional()
        with self.lock:
            result = manager.begin_commit()
        self.accumulator.begin_flush()  # the transaction's records go now, without waiting for linger.ms
        try:
            await driver.wait(result, self._timeout(timeout))
        finally:
            self.accumulator.end_flush()

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not yet sent fail with TransactionAbortedError, those sent are
        marked aborted (read_committed consumers skip them)."""
        manager, driver = self._transactional()
        with self.lock:
            result = manager.begin_abort()
        await driver.wait(result, self._timeout(timeout))

    # ---- sending from other threads (the blocking Producer) ---------------------------------------
    def append_blocking(self, topic: str, value: bytes | None, key: bytes | None, partition: int | None,
                        headers: Iterable[tuple[str, bytes | None]] | None, timestamp_ms: int | None,
                        route: TopicRoute, started_ms: float) -> RecordFuture:
        """``send``'s longer path in the calling thread, once the topic has a ``route``: appends,
        blocking the thread while ``buffer.memory`` is exhausted, until ``max.block.ms`` after
        ``started_ms`` (then BufferExhausted)."""
        if self.accumulator.waitable == threading.get_ident():
            raise RuntimeError("the blocking producer cannot wait for memory on its own thread")
        headers = tuple(headers) if headers else ()
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        with self.lock:
            self.check_open()
            partition = self._partition(topic, key, partition, route)
            if self.transactions is not None:
                self._add_to_transaction(topic, partition)
            result = self.accumulator.append(topic, partition, key, value, headers, timestamp_ms, _now_ms(),
                                             max_block_ms=max(0.0, self.config.max_block_ms - (_now_ms() - started_ms)))
        pending = result.pending
        if pending is not None:
            freed = threading.Event()
            pending.add_done_callback(lambda _allocation: freed.set())
            self._wake()  # a waiting allocation makes every batch sendable (the pool is exhausted)
            while not pending.done():
                freed.wait(max(0.0, pending.deadline_ms - self.pool.clock_ms()) / 1000 + 0.001)
                with self.lock:
                    self.pool.expire()  # past max.block.ms the allocation fails with BufferExhausted
            with self.lock:
                result = self.accumulator.append(topic, partition, key, value, headers, timestamp_ms, _now_ms(),
                                                 allocation=pending)
        with self.lock:
            return self._appended(topic, partition, result)

    # ---- flush and close -------------------------------------------------------------------------
    async def flush(self, timeout_ms: float | None = None) -> None:
        """Send everything appended so far and wait until each record is acknowledged or failed."""
        if not self._started:
            return
        self.accumulator.begin_flush()
        self.sender.wake()
        try:
            await self.sender.wait_until(lambda: not self.accumulator.has_incomplete(), timeout_ms)
        finally:
            self.accumulator.end_flush()

    async def close(self, timeout_ms: float | None = None) -> None:
        """Send what is queued and wait for the answers, at most ``timeout_ms`` (default
        ``delivery.timeout.ms``, when every record is acknowledged or failed anyway, as in Kafka);
        then fail whatever is left and close the connections, whatever the broker does."""
        if self._closed:
            return
        timeout = self.accumulator.delivery_timeout_ms if timeout_ms is None else timeout_ms
        with self.lock:
            self._closing = True
            self._routes.clear()
            self.accumulator.close()
        try:
            if self._started and self.sender.fatal is None:
                await self._abort_open_transaction(timeout)
                self.sender.closing = True
                self.sender.wake()
                try:
                    await self.sender.wait_until(lambda: not self.accumulator.has_incomplete(), timeout)
                except TimeoutError:
                    log.warning("closing the producer with records still unacknowledged after %s ms", timeout)
        finally:
            self._closed = True
            with self.lock:
                self.pool.close()
                self.accumulator.abort_undrained(ProducerClosed("the producer closed before the record was sent"))
            await self.sender.stop()
            with self.lock:  # answers still on their way are for batches settled here
                self.accumulator.abort_incomplete(ProducerClosed("the producer closed before the record was "
                                                                 "acknowledged"))
            if self._expiry_timer is not None:
                self._expiry_timer.cancel()
            await self.metadata.close()
            await self.connections.close()

    async def _abort_open_transaction(self, timeout_ms: float) -> None:
        """Closing with a transaction open aborts it, as Kafka's sender does on shutdown."""
        manager, driver = self.transactions, self._txn_driver
        if (manager is None or driver is None or not manager.has_ongoing_transaction or manager.is_completing
                or manager.fatal_error is not None):
            return
        try:
            with self.lock:
                result = manager.begin_abort()
            await driver.wait(result, timeout_ms / 1000)
        except TransactionError as error:
            log.warning("closing with the transaction of %r open: aborting it failed: %s",
                        manager.transactional_id, error)

    # ---- metadata --------------------------------------------------------------------------------
    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        self._stats["metadata-refresh-total"] += 1
        with self.lock:
            self._routes.clear()  # partition counts and leaders may have changed: rebuilt on the next send
        self.sender.on_metadata(cluster)

    def _on_authentication_failure(self, error: AuthenticationException) -> None:
        # not retriable (the credentials must change): queued records fail with it, and so does every send
        if self.sender.fatal is None:
            self.sender.fail_fatally(error, logged=True)  # (the connection manager logged it)

    def _on_fatal(self, error: BaseException) -> None:
        with self.lock:
            self._routes.clear()  # every send takes the path that raises the error

    async def partitions_for(self, topic: str) -> list[int]:
        if not self._started:
            await self.start()
        info = await self.metadata.wait_for_topic(topic, self.config.max_block_ms)
        return sorted(info.partitions)  # (what cluster.partitions_for says of a known topic)

    # ---- metrics ---------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """The BufferPool's metrics plus the sender's counters and the brokers' throttling (ms), by
        Kafka's names where it has them."""
        out: dict[str, float] = dict(self.pool.metrics())
        out.update(self._stats)
        out["requests-in-flight"] = sum(self.sender.in_flight.values())
        out["bufferpool-peak-in-use"] = self.pool.peak_in_use
        out.update(self.connections.throttle_metrics("produce"))
        return out

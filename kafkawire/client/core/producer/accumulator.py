"""RecordAccumulator: per-partition queues of batches between ``send`` and the sender, with KIP-782's
expandable batches. Sans-IO: every call takes the time, nothing blocks, nothing touches a socket.

Batch sizes (KIP-782):

* A new batch gets ``batch.initial.size`` from the pool (more if its first record needs it: the
  smallest growth step that holds it, or exactly its size past ``batch.max.size``).
* A record that does not fit grows the batch by ``batch.reallocation.factor`` (steps land exactly on
  ``batch.size``, so returned buffers of that size are reusable), re-allocating from the pool. A batch
  whose growth the pool cannot grant at once (it never waits for growth) is closed and the record
  starts a new batch, which may wait for memory.
* A batch is ready at ``batch.size`` but keeps taking records up to ``batch.max.size`` until the
  sender drains it.

Readiness and draining follow upstream: a partition is sendable when its head batch is full, or has
waited ``linger.ms`` (the retry backoff when retrying), or the pool has waiters, or on flush/close.
``drain`` takes at most one batch per partition per node and rotates where it starts; a partition
cut off by ``max.request.size`` leads the next drain.

Idempotence: sequence numbers are assigned when a batch is drained; a retried batch keeps its
sequence, goes back in sequence order, and is sent again only once it is the oldest unacknowledged
batch of its partition, so retries never reorder records.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Literal, NamedTuple, overload

from kafkawire.records.appender import HeaderPair
from kafkawire.records.batch import increment_sequence

from ...errors import AccumulatorClosed, DeliveryTimeout, RecordTooLarge
from ..topic_partition import TopicPartition
from .batch import (
    BATCH_OVERHEAD, CompressionRatioEstimator, ProducerBatch, record_size_upper_bound, size_factor,
)
from .config import ProducerConfig
from .delivery import LoopWaiter, RecordFuture
from .memory import Allocation, BufferPool

__all__ = ["RecordAccumulator", "AppendResult", "ReadyCheck"]


class AppendResult(NamedTuple):
    """What ``append`` did. ``pending`` set means no record was added yet: wait for that allocation,
    then call ``append`` again with ``allocation=pending``."""

    future: RecordFuture | None
    batch_is_full: bool  # the partition's last batch has reached batch.size (lets the sticky partitioner move on)
    new_batch_created: bool
    appended_bytes: int
    pending: Allocation | None = None


class ReadyCheck(NamedTuple):
    ready_nodes: set[int]
    next_ready_check_delay_ms: float  # math.inf when no batch is lingering
    unknown_leader_topics: set[str]


class RecordAccumulator:
    def __init__(self, config: ProducerConfig, pool: BufferPool | None = None) -> None:
        self.config = config
        self.pool = pool if pool is not None else BufferPool(config.buffer_memory, config.batch_size)
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._in_flight: dict[TopicPartition, int] = {}  # batches sent and awaiting a response
        # idempotence: per partition, batches holding a sequence and not yet acknowledged, oldest first
        self._unacknowledged: dict[TopicPartition, list[ProducerBatch]] = {}
        self._next_sequence: dict[TopicPartition, int] = {}
        self._drain_index: dict[int, int] = {}
        self._ratios = CompressionRatioEstimator()
        self._flushes = 0
        self._closed = False
        self.producer_id: int | None = None
        self.producer_epoch = -1
        # each partition's newest batch, the one try_append writes to while it is open
        self._open: dict[tuple[str, int], ProducerBatch] = {}
        # the blocking Producer's loop thread: its records' futures block in result() (delivery.py)
        self.waitable: int | None = None
        # how the records' futures are awaited, given by the driver (kafkawire.client.aio)
        self.loop_waiter: LoopWaiter | None = None
        # a transactional producer's batches carry the transactional bit, and only partitions already
        # added to the transaction may be sent (``may_send``, set by the driver)
        self.transactional = config.transactional_id is not None
        self.may_send: Callable[[TopicPartition], bool] | None = None
        # the sizes ProducerConfig resolves from others (None only in a config not built yet)
        self._batch_initial_size = _resolved(config.batch_initial_size)
        self._batch_limit = min(_resolved(config.batch_max_size), self.pool.total_memory)
        self.delivery_timeout_ms = _resolved(config.delivery_timeout_ms)

    # ---- appending -------------------------------------------------------------------------------
    def try_append(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
                   headers: Iterable[HeaderPair], timestamp_ms: int) -> tuple[
            RecordFuture, int, bool, bool] | None:
        """``append`` without waiting, the producer's per-record path: the record goes into the
        partition's open batch in one call when it has room; otherwise ``append`` grows that batch
        or starts a new one if the memory is free now. Returns (future, bytes appended, whether the
        batch has reached ``batch.size``, whether the sender should look: a new batch, or one that
        reached ``batch.size`` with this record), or None when memory must be waited for (``append``
        with ``max_block_ms``). Bad input raises as in ``append``. ``headers``: a tuple or list
        (anything else takes ``append``'s path)."""
        batch = self._open.get((topic, partition))
        if batch is not None:
            appender = batch.appender
            try:
                # a tuple or list; anything else raises TypeError here and takes append()'s path
                size = appender.append(key, value, headers, timestamp_ms, None,  # type: ignore[arg-type]
                                       batch.records_limit)
            except (TypeError, ValueError, OverflowError):
                size = -1  # append() below refuses it with a message naming the partition
            if size >= 0:
                future = RecordFuture(batch.result, appender.count - 1, timestamp_ms,
                                      -1 if key is None else len(key), -1 if value is None else len(value))
                if batch.full_signalled:
                    return future, size, True, False
                if appender.size < batch.full_at:
                    return future, size, False, False
                batch.full_signalled = True
                return future, size, True, True
        result = self.append(topic, partition, key, value, headers, timestamp_ms, self.pool.clock_ms(), wait=False)
        if result is None:
            return None
        assert result.future is not None  # (None only with a pending allocation, which wait=False never makes)
        return (result.future, result.appended_bytes, result.batch_is_full,
                result.new_batch_created or result.batch_is_full)

    @overload
    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
               headers: Iterable[HeaderPair] = (), timestamp_ms: int | None = None, now_ms: float = 0, *,
               allocation: Allocation | None = None, max_block_ms: float | None = None,
               wait: Literal[True] = True) -> AppendResult: ...

    @overload
    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
               headers: Iterable[HeaderPair] = (), timestamp_ms: int | None = None, now_ms: float = 0, *,
               allocation: Allocation | None = None, max_block_ms: float | None = None,
               wait: Literal[False]) -> AppendResult | None: ...

    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
               headers: Iterable[HeaderPair] = (), timestamp_ms: int | None = None, now_ms: float = 0, *,
               allocation: Allocation | None = None, max_block_ms: float | None = None,
               wait: bool = True) -> AppendResult | None:
        """Add a record to the partition's last batch, growing it or starting a new one.

        ``timestamp_ms`` None stamps the record with ``now_ms``. When memory for a new batch must be
        waited for, the result carries the pending Allocation; retry with ``allocation=`` once it is
        done (BufferExhausted surfaces then, after ``max.block.ms``). With ``wait`` false nothing
        waits: None instead of a pending result.
        """
        if self._closed:
            if allocation is not None:
                self._give_back(allocation)
            raise AccumulatorClosed("cannot append: the producer is closed")
        tp = TopicPartition(topic, partition)
        headers = tuple(headers)
        _check_record(tp, key, value, headers, timestamp_ms)
        bound = record_size_upper_bound(key, value, headers)
        self._check_record_size(tp, bound)
        timestamp = int(now_ms) if timestamp_ms is None else timestamp_ms
        queue = self._batches.get(tp)
        if queue is None:
            queue = self._batches[tp] = deque()
        if queue and not queue[-1].closed:
            appended = self._try_append(queue[-1], key, value, headers, timestamp, bound)
            if appended is not None:
                if allocation is not None:
                    self._give_back(allocation)  # another append made room meanwhile
                full = queue[-1].is_full(self.config.batch_size)
                if full:
                    queue[-1].full_signalled = True
                return AppendResult(appended[0], full, False, appended[1])
        if allocation is None:
            factor = size_factor(self.config.codec, self._ratios.estimate(topic))
            capacity = self._first_capacity(BATCH_OVERHEAD + math.ceil(bound * factor))
            if not wait:
                buffer = self.pool.try_allocate(capacity)
                if buffer is None:
                    return None
            else:
                wait_ms = self.config.max_block_ms if max_block_ms is None else max_block_ms
                allocation = self.pool.allocate(capacity, wait_ms)
                if not allocation.done():
                    return AppendResult(None, False, False, 0, allocation)
                buffer = allocation.result()  # raises BufferExhausted
        else:
            buffer = allocation.result()  # raises BufferExhausted or PoolClosed
        batch = ProducerBatch(tp, buffer, now_ms, codec=self.config.codec,
                              compression_level=self.config.compression_level,
                              compression_ratio=self._ratios.estimate(topic), batch_size=self.config.batch_size,
                              waitable=self.waitable, loop_waiter=self.loop_waiter)
        batch.builder.transactional = self.transactional
        try:
            future, size = batch.append(key, value, headers, timestamp)  # a batch always takes its first record
        except Exception:
            self.pool.deallocate(buffer)
            raise
        queue.append(batch)
        self._incomplete.add(batch)
        if buffer.capacity <= self._batch_limit:
            self._open[tp] = batch
        else:
            batch.close()  # a record past batch.max.size has a batch of its own
        full = batch.is_full(self.config.batch_size)
        batch.full_signalled = full
        return AppendResult(future, full, True, size)

    def _try_append(self, batch: ProducerBatch, key: bytes | None, value: bytes | None,
                    headers: tuple[HeaderPair, ...], timestamp: int, bound: int) -> tuple[RecordFuture, int] | None:
        appended = batch.try_append(key, value, headers, timestamp)  # it fits as it is
        if appended is not None:
            return appended
        needed = batch.estimated_size(bound)
        if needed > batch.capacity:
            capacity = self._grown_capacity(batch.capacity, needed)
            current = batch.buffer  # (an open batch always has its buffer)
            grown = self.pool.reallocate(current, capacity) if capacity is not None and current is not None else None
            if grown is None:
                self._close(batch)  # at batch.max.size, or memory is short: the next record starts a new batch
                return None
            batch.buffer = grown
        return batch.append(key, value, headers, timestamp)

    def _first_capacity(self, needed: int) -> int:
        initial = self._batch_initial_size
        if needed <= initial:
            return initial
        if initial == 0:
            return needed
        grown = self._grown_capacity(initial, needed)
        return grown if grown is not None else needed  # past batch.max.size: a batch of its own

    def _grown_capacity(self, capacity: int, needed: int) -> int | None:
        """The first growth step from ``capacity`` that holds ``needed`` bytes, None past batch.max.size."""
        limit = self._batch_limit
        batch_size = self.config.batch_size
        factor = self.config.batch_reallocation_factor
        if needed > limit:
            return None
        while capacity < needed:
            step = max(math.ceil(capacity * factor), capacity + 1)
            if capacity < batch_size < step:
                step = batch_size
            capacity = min(step, limit)
        return capacity

    def _check_record_size(self, tp: TopicPartition, bound: int) -> None:
        size = BATCH_OVERHEAD + bound
        if size > self.config.max_request_size:
            raise RecordTooLarge(f"a record of up to {size} bytes for {tp.topic}-{tp.partition} exceeds "
                                 f"max.request.size ({self.config.max_request_size})")
        if size > self.config.buffer_memory:
            raise RecordTooLarge(f"a record of up to {size} bytes for {tp.topic}-{tp.partition} exceeds "
                                 f"buffer.memory ({self.config.buffer_memory})")

    def _give_back(self, allocation: Allocation) -> None:
        if not allocation.done():
            allocation.cancel()
        elif allocation.exception() is None:
            self.pool.deallocate(allocation.result())

    # ---- readiness -------------------------------------------------------------------------------
    def ready(self, cluster_leaders: Mapping[TopicPartition, int | None], now_ms: float) -> ReadyCheck:
        """Nodes leading a partition with a sendable batch, when to look again, and topics whose
        partitions with data have no known leader (their metadata needs refreshing)."""
        ready_nodes: set[int] = set()
        unknown: set[str] = set()
        next_delay = math.inf
        exhausted = self.pool.queued > 0
        forced = exhausted or self._closed or self._flushes > 0
        linger = self.config.linger_ms
        batch_size = self.config.batch_size
        for tp, queue in self._batches.items():
            if not queue:
                continue
            leader = cluster_leaders.get(tp)
            if leader is None:
                unknown.add(tp.topic)
                continue
            if leader in ready_nodes or self._muted(tp) or (self.may_send is not None and not self.may_send(tp)):
                continue
            head = queue[0]
            if self._retry_waits_for_earlier(head):
                continue  # the response that unblocks it will prompt the next check
            waited = now_ms - head.last_attempt_ms
            backoff = self.config.retry_backoff(head.attempts)
            backing_off = head.attempts > 0 and waited < backoff
            time_to_wait = backoff if backing_off else linger
            sendable = forced or len(queue) > 1 or head.is_full(batch_size) or waited >= time_to_wait
            if sendable and not backing_off:
                ready_nodes.add(leader)
            else:
                next_delay = min(next_delay, max(time_to_wait - waited, 0))
        return ReadyCheck(ready_nodes, next_delay, unknown)

    def _muted(self, tp: TopicPartition) -> bool:
        # max.in.flight.requests.per.connection=1 asks for strict order: one batch per partition in flight
        return self.config.max_in_flight_requests_per_connection == 1 and self._in_flight.get(tp, 0) > 0

    def _retry_waits_for_earlier(self, head: ProducerBatch) -> bool:
        # a retried batch goes again only once every earlier batch of its partition is acknowledged
        if not head.has_sequence:
            return False
        order = self._unacknowledged.get(head.tp)
        return order is not None and bool(order) and order[0] is not head

    # ---- draining --------------------------------------------------------------------------------
    def drain(self, cluster_leaders: Mapping[TopicPartition, int | None], nodes: Iterable[int],
              max_request_size: int, now_ms: float) -> dict[int, list[ProducerBatch]]:
        """For each node, head batches of the partitions it leads, one per partition, up to
        ``max_request_size`` bytes (a first batch always goes). Drained batches are closed and built.
        With idempotence and no producer id yet, nothing is drained."""
        if self.config.enable_idempotence and self.producer_id is None:
            return {}
        wanted = set(nodes)
        by_node: dict[int, list[TopicPartition]] = {node: [] for node in wanted}
        for tp, leader in cluster_leaders.items():
            if leader in wanted:
                by_node[leader].append(tp)
        return {node: self._drain_node(node, sorted(parts), max_request_size, now_ms)
                for node, parts in by_node.items()}

    def _drain_node(self, node: int, parts: list[TopicPartition], max_request_size: int,
                    now_ms: float) -> list[ProducerBatch]:
        count = len(parts)
        if not count:
            return []
        start = self._drain_index.get(node, 0) % count
        self._drain_index[node] = (start + 1) % count  # rotate the lead even when everything fits
        taken: list[ProducerBatch] = []
        size = 0
        for step in range(count):
            tp = parts[(start + step) % count]
            queue = self._batches.get(tp)
            if not queue or self._muted(tp) or (self.may_send is not None and not self.may_send(tp)):
                continue
            head = queue[0]
            if head.attempts > 0 and now_ms - head.last_attempt_ms < self.config.retry_backoff(head.attempts):
                continue
            if self._retry_waits_for_earlier(head):
                continue
            if taken and size + head.size_in_bytes > max_request_size:
                self._drain_index[node] = (start + step) % count  # the partition cut off leads next time
                break
            queue.popleft()
            self._prepare(head, now_ms)
            size += head.size_in_bytes
            taken.append(head)
        return taken

    def _close(self, batch: ProducerBatch) -> None:
        batch.close()
        if self._open.get(batch.tp) is batch:
            del self._open[batch.tp]

    def _prepare(self, batch: ProducerBatch, now_ms: float) -> None:
        self._close(batch)
        tp = batch.tp
        if self.config.enable_idempotence and not batch.has_sequence:
            sequence = self._next_sequence.get(tp, 0)
            assert self.producer_id is not None  # ready() holds idempotent batches back until it is known
            batch.set_producer_state(self.producer_id, self.producer_epoch, sequence)
            self._next_sequence[tp] = increment_sequence(sequence, batch.record_count)
            self._unacknowledged.setdefault(tp, []).append(batch)
        batch.drained_ms = now_ms
        batch.in_flight = True
        first_build = batch.compressed_ratio is None
        batch.build()
        if first_build and batch.compressed_ratio is not None:
            self._ratios.observe(tp.topic, batch.compressed_ratio)
        self._in_flight[tp] = self._in_flight.get(tp, 0) + 1

    # ---- outcomes --------------------------------------------------------------------------------
    def complete_batch(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int = -1) -> None:
        """The broker acknowledged the batch: resolve its records' futures and free its memory."""
        self._settle(batch)
        batch.complete(base_offset, log_append_time_ms)

    def fail_batch(self, batch: ProducerBatch, error: BaseException) -> None:
        """The batch will not be delivered: fail its records' futures and free its memory."""
        self._settle(batch)
        batch.fail(error)

    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        """Put a drained batch back to be retried after the backoff, in sequence order."""
        tp = batch.tp
        if not batch.in_flight:
            raise ValueError(f"{batch!r} is not in flight: only drained batches are retried")
        self._leave_flight(batch)
        batch.attempts += 1
        batch.last_attempt_ms = now_ms
        queue = self._batches.setdefault(tp, deque())
        if not batch.has_sequence:
            queue.appendleft(batch)
            return
        order = self._unacknowledged.get(tp, [])
        rank = order.index(batch) if batch in order else -1
        position = 0
        for queued in queue:
            # retried batches sit in sequence order ahead of every batch not yet sequenced
            if not queued.has_sequence or (queued in order and order.index(queued) > rank):
                break
            position += 1
        queue.insert(position, batch)

    def deallocate(self, batch: ProducerBatch) -> None:
        """Return the batch's memory to the pool (once); it takes no more records."""
        self._close(batch)
        self._incomplete.discard(batch)
        if batch.buffer is not None:
            buffer, batch.buffer = batch.buffer, None
            self.pool.deallocate(buffer)

    def expire_batches(self, now_ms: float) -> list[ProducerBatch]:
        """Fail and free the queued batches created ``delivery.timeout.ms`` ago or more."""
        timeout = self.delivery_timeout_ms
        oldest = now_ms - timeout  # created at or before this: expired
        expired: list[ProducerBatch] = []
        for tp, queue in self._batches.items():
            if not any(batch.created_ms <= oldest for batch in queue):
                continue  # the usual case, checked without building anything
            kept: deque[ProducerBatch] = deque()
            for batch in queue:
                (expired if batch.created_ms <= oldest else kept).append(batch)
            self._batches[tp] = kept
        for batch in expired:
            waited = now_ms - batch.created_ms
            self._drop_sequence(batch)
            self.deallocate(batch)
            batch.fail(DeliveryTimeout(f"expiring {batch.record_count} record(s) for {batch.tp.topic}-"
                                       f"{batch.tp.partition}: {waited:.0f} ms has passed since batch creation "
                                       f"(delivery.timeout.ms is {timeout})"))
        return expired

    def _settle(self, batch: ProducerBatch) -> None:
        if batch.done:
            raise ValueError(f"{batch!r} was already completed")
        if batch.in_flight:
            self._leave_flight(batch)
        else:
            queue = self._batches.get(batch.tp)
            if queue and batch in queue:
                queue.remove(batch)
        self._drop_sequence(batch)
        self.deallocate(batch)

    def _leave_flight(self, batch: ProducerBatch) -> None:
        batch.in_flight = False
        tp = batch.tp
        count = self._in_flight.get(tp, 0)
        if count <= 1:
            self._in_flight.pop(tp, None)
        else:
            self._in_flight[tp] = count - 1

    def _drop_sequence(self, batch: ProducerBatch) -> None:
        order = self._unacknowledged.get(batch.tp)
        if order and batch in order:
            order.remove(batch)

    # ---- producer state, flush, close ------------------------------------------------------------
    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id or epoch (InitProducerId): sequences restart at 0 and queued batches
        that held an old sequence get a new one when drained. Call it with nothing in flight."""
        if (producer_id, producer_epoch) == (self.producer_id, self.producer_epoch):
            return
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._next_sequence.clear()
        self._unacknowledged.clear()
        for queue in self._batches.values():
            for batch in queue:
                batch.clear_producer_state()

    def begin_flush(self) -> None:
        """Everything queued is ready until ``end_flush``."""
        self._flushes += 1

    def end_flush(self) -> None:
        self._flushes = max(0, self._flushes - 1)

    def close(self) -> None:
        """No more appends; everything queued is ready."""
        self._closed = True
        self._open.clear()

    def abort_undrained(self, error: BaseException) -> list[ProducerBatch]:
        """Fail and free every queued batch (a forced close)."""
        aborted = [batch for queue in self._batches.values() for batch in queue]
        self._batches.clear()
        for batch in aborted:
            self._drop_sequence(batch)
            self.deallocate(batch)
            batch.fail(error)
        return aborted

    def abort_incomplete(self, error: BaseException) -> list[ProducerBatch]:
        """Fail and free every batch not yet settled, in flight or not (the end of a forced close:
        answers that arrive later are for batches already failed)."""
        aborted = self.abort_undrained(error)
        for batch in list(self._incomplete):
            self._settle(batch)
            batch.fail(error)
            aborted.append(batch)
        return aborted

    # ---- introspection ---------------------------------------------------------------------------
    def batches(self, topic: str, partition: int) -> tuple[ProducerBatch, ...]:
        return tuple(self._batches.get(TopicPartition(topic, partition), ()))

    def has_undrained(self) -> bool:
        return any(self._batches.values())

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)


def _bytes_like(data: object) -> bool:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return True
    try:
        memoryview(data)  # type: ignore[arg-type]  # any buffer, as the record appender takes
    except TypeError:
        return False
    return True


def _resolved(size: int | None) -> int:
    if size is None:
        raise ValueError("the producer config is not resolved: build it with ProducerConfig(...)")
    return size


def _check_record(tp: TopicPartition, key: object, value: object, headers: tuple[object, ...],
                  timestamp_ms: object) -> None:
    """Refuse malformed records before any memory is taken for them (what the record appender would
    refuse, with the partition named)."""
    where = f"{tp.topic}-{tp.partition}"
    for name, data in (("key", key), ("value", value)):
        if data is not None and not _bytes_like(data):
            raise TypeError(f"record {name} for {where} must be bytes or None, not {type(data).__name__}")
    for header in headers:
        if (not isinstance(header, (tuple, list)) or len(header) != 2 or not isinstance(header[0], str)
                or not (header[1] is None or _bytes_like(header[1]))):
            raise TypeError(f"record header for {where} must be (str, bytes or None), not {header!r}")
    if timestamp_ms is not None and (isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int)
                                     or timestamp_ms < 0):
        raise ValueError(f"record timestamp for {where} must be a non-negative integer, not {timestamp_ms!r}")

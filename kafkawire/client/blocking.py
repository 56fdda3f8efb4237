"""Blocking Producer, Consumer and ShareConsumer for scripts: the asyncio clients on an event loop of their own,
in a background thread, behind the same method names.

::

    with Producer(bootstrap_servers="localhost:9092") as producer:
        future = producer.send("events", b"value")    # blocks only for metadata and buffer.memory
        producer.flush()
        print(future.result())                         # RecordMetadata

    with Consumer(bootstrap_servers="localhost:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("events", 0)])
        records = consumer.poll(timeout_ms=1000)

Every call runs on the client's loop thread and waits for it, except ``Producer.send``: it appends
in the calling thread, as Kafka's producer does (only a topic's first metadata is fetched on the
loop), and returns a RecordFuture whose ``result(timeout)`` waits for the record's metadata. A
Producer may be shared by threads. A Consumer is meant for one calling thread at a time, like
Kafka's (calls from several threads are serialized by the loop, not checked).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from .aio.consumer import AsyncConsumer, CommitCallback
from .aio.producer import AsyncProducer, TopicRoute
from .aio.share_consumer import AcknowledgementCommitCallback, AsyncShareConsumer
from .core.consumer.config import ConsumerConfig
from .core.consumer.record import ConsumerRecord
from .core.group.consumer_group_metadata import ConsumerGroupMetadata
from .core.group.protocol import OffsetAndMetadata
from .core.producer.config import ProducerConfig
from .core.producer.delivery import RecordFuture, RecordMetadata
from .core.share.config import ShareConsumerConfig
from .core.share.record import AcknowledgeType, ShareConsumerRecord
from .core.topic_partition import TopicPartition

__all__ = ["Producer", "Consumer", "ShareConsumer"]

log = logging.getLogger(__name__)

_Client = TypeVar("_Client")
_CLOSE_MARGIN_S = 10.0  # past close's own timeout: stopping the sender and closing sockets
_TASKS_STOP_S = 1.0  # a stopping loop's cancelled tasks: how long they get to end


class _LoopThread:
    """An event loop running forever on a daemon thread. When it stops, whatever still runs on it is
    cancelled (connections close as their tasks end) and the loop is closed, so that no task is left
    pending and no socket open; ``watch`` does that too, after closing the client, for a client dropped
    without ``close()`` (or still open when the interpreter exits)."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._finalizer: weakref.finalize | None = None

    def _main(self) -> None:
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(_cancel_tasks())
            self.loop.close()

    def watch(self, owner: object, closing: Callable[[], Coroutine[Any, Any, None]], bound_s: float) -> None:
        """Once ``owner`` (the blocking client) is collected or the interpreter exits, run ``closing()``
        (for at most ``bound_s``) and stop, unless ``stop`` came first."""
        self._finalizer = weakref.finalize(owner, self._abandoned, closing, bound_s)

    def _abandoned(self, closing: Callable[[], Coroutine[Any, Any, None]], bound_s: float) -> None:
        if self.loop.is_closed() or not self._thread.is_alive():
            return
        if threading.current_thread() is self._thread:  # collected by the loop's own thread
            self.loop.create_task(closing()).add_done_callback(lambda _task: self.loop.stop())
            return
        try:
            self.run(closing(), bound_s)
        except Exception as error:  # noqa: BLE001 (a finalizer must not raise)
            log.debug("closing a client dropped without close() failed: %r", error)
        self.stop()

    def run(self, coroutine, timeout: float | None = None):
        """Run ``coroutine`` on the loop and wait for its result."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a blocking client cannot be called from its own event loop")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def create(self, make: Callable[[], _Client]) -> _Client:
        """Build a client on the loop (its futures and events bind to it); the thread stops if that fails."""
        async def create() -> _Client:
            return make()
        try:
            return self.run(create())
        except BaseException:
            self.stop()
            raise

    def call(self, function, *args):
        """Run a plain function on the loop thread (it may touch the loop's objects) and return its result."""
        async def call():
            return function(*args)
        return self.run(call())

    def stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
        if self.loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # (closed meanwhile)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


async def _cancel_tasks() -> None:
    """Cancel every other task of the running loop and wait (briefly) for them to end."""
    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=_TASKS_STOP_S)


def _chain(source: asyncio.Future) -> concurrent.futures.Future:
    """A thread-safe future resolved from an asyncio future (on the loop's thread)."""
    target: concurrent.futures.Future = concurrent.futures.Future()

    def copy(done: asyncio.Future) -> None:
        if done.cancelled():
            target.cancel()
        elif done.exception() is not None:
            target.set_exception(done.exception())
        else:
            target.set_result(done.result())
    source.add_done_callback(copy)
    return target


class Producer:
    """A blocking facade over AsyncProducer (same settings: a ProducerConfig, a mapping of property
    names, or keyword properties). Safe to share between threads."""

    config: ProducerConfig

    def __init__(self, config: ProducerConfig | Mapping[str, Any] | None = None, **properties: Any) -> None:
        self._thread = _LoopThread("kafkawire-producer")

        async def create() -> AsyncProducer:
            producer = AsyncProducer(config, **properties)
            producer.share_with_threads()
            await producer.start()
            return producer
        try:
            self._producer = self._thread.run(create())
        except BaseException:
            self._thread.stop()
            raise
        self.config = self._producer.config
        self._lock = self._producer.lock
        # dropped without close(): close as close() would, delivering what was sent (as Kafka's
        # producer thread goes on sending after its KafkaProducer is out of reach)
        self._thread.watch(self, self._producer.close, self._close_bound_s(None))

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, partition: int | None = None,
             headers: Iterable[tuple[str, bytes | None]] | None = None,
             timestamp_ms: int | None = None) -> RecordFuture:
        """Append a record in the calling thread (blocking up to max.block.ms for metadata and
        memory); the returned future's ``result(timeout)`` waits for its RecordMetadata."""
        with self._lock:
            future = self._producer.append_now(topic, value, key, partition, headers, timestamp_ms)
        if future is not None:
            return future
        started = time.monotonic() * 1000
        producer = self._producer
        producer.check_open()
        route = producer.known_route(topic)
        if route is None:  # the topic's first send, or metadata changed: the loop fetches and checks
            route = self._thread.run(self._route(topic))
        return producer.append_blocking(topic, value, key, partition, headers, timestamp_ms, route, started)

    async def _route(self, topic: str) -> TopicRoute:
        producer = self._producer
        producer.check_open()
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, not {topic!r}")
        return await producer.route(topic)

    def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                      partition: int | None = None, headers: Iterable[tuple[str, bytes | None]] | None = None,
                      timestamp_ms: int | None = None) -> RecordMetadata:
        return self.send(topic, value, key, partition, headers, timestamp_ms).result()

    def flush(self, timeout_ms: float | None = None) -> None:
        self._thread.run(self._producer.flush(timeout_ms))

    # transactions (with transactional.id): AsyncProducer's calls, run on the loop thread
    def init_transactions(self, timeout: float | None = None) -> None:
        self._thread.run(self._producer.init_transactions(timeout))

    def begin_transaction(self) -> None:
        self._thread.call(self._producer.begin_transaction)

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetAndMetadata]
                                    | Iterable[Any], group_metadata: ConsumerGroupMetadata | str, timeout: float | None = None) -> None:
        self._thread.run(self._producer.send_offsets_to_transaction(offsets, group_metadata, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._thread.run(self._producer.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._thread.run(self._producer.abort_transaction(timeout))

    def partitions_for(self, topic: str) -> list[int]:
        return self._thread.run(self._producer.partitions_for(topic))

    def metrics(self) -> dict[str, float]:
        return self._thread.call(self._producer.metrics)

    def close(self, timeout_ms: float | None = None) -> None:
        """AsyncProducer.close on the loop; bounded even if that hangs (its timeout plus a margin)."""
        if self._thread.loop.is_closed():
            return
        bound = self._close_bound_s(timeout_ms)
        try:
            self._thread.run(self._producer.close(timeout_ms), bound)
        except TimeoutError:
            log.error("the producer did not close within %.1f s; stopping its thread regardless", bound)
        finally:
            self._thread.stop()

    def _close_bound_s(self, timeout_ms: float | None) -> float:
        default = self.config.delivery_timeout_ms or 0  # (resolved by ProducerConfig: never None here)
        return (default if timeout_ms is None else timeout_ms) / 1000 + _CLOSE_MARGIN_S

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Consumer:
    """A blocking facade over AsyncConsumer (same settings and method names)."""

    config: ConsumerConfig

    def __init__(self, config: ConsumerConfig | Mapping[str, Any] | None = None, **properties: Any) -> None:
        self._thread = _LoopThread("kafkawire-consumer")
        self._consumer = self._thread.create(lambda: AsyncConsumer(config, **properties))
        self.config = self._consumer.config
        # dropped without close(): leave the group and close at once, committing nothing
        self._thread.watch(self, functools.partial(self._consumer.close, False, 0), _CLOSE_MARGIN_S)

    # subscriptions
    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._thread.call(self._consumer.assign, list(partitions))

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        return self._thread.call(self._consumer.consumer_group_metadata)

    def assignment(self) -> set[TopicPartition]:
        return self._thread.call(self._consumer.assignment)

    def rebalance_protocol(self) -> str:
        return self._thread.call(self._consumer.rebalance_protocol)

    def subscribe(self, topics: Iterable[str], listener: object = None) -> None:
        """Join the group; ``listener``'s callbacks run on the client's loop thread."""
        self._thread.call(self._consumer.subscribe, list(topics), listener)

    def unsubscribe(self) -> None:
        self._thread.run(self._consumer.unsubscribe())

    def subscription(self) -> set[str]:
        return self._thread.call(self._consumer.subscription)

    # records
    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        return self._thread.run(self._consumer.poll(timeout_ms, max_records))

    # positions
    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        self._thread.call(self._consumer.seek, partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._thread.call(self._consumer.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._thread.call(self._consumer.seek_to_end, *partitions)

    def position(self, partition: TopicPartition | tuple[str, int], timeout_ms: float | None = None) -> int:
        return self._thread.run(self._consumer.position(partition, timeout_ms))

    def highwater(self, partition: TopicPartition | tuple[str, int]) -> int:
        return self._thread.call(self._consumer.highwater, partition)

    def pause(self, *partitions: TopicPartition) -> None:
        self._thread.call(self._consumer.pause, *partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._thread.call(self._consumer.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        return self._thread.call(self._consumer.paused)

    # offsets
    def commit(self, offsets: Mapping[TopicPartition, int] | None = None, timeout_ms: float | None = None) -> None:
        self._thread.run(self._consumer.commit(offsets, timeout_ms))

    def commit_async(self, offsets: Mapping[TopicPartition, int] | None = None,
                     callback: CommitCallback | None = None) -> concurrent.futures.Future[dict[TopicPartition, Any]]:
        """Start a commit; ``callback(offsets, error)`` runs on the client's thread when it ends."""
        return self._thread.call(lambda: _chain(self._consumer.commit_async(offsets, callback)))

    def committed(self, partitions: Iterable[TopicPartition],
                  timeout_ms: float | None = None) -> dict[TopicPartition, int | None]:
        return self._thread.run(self._consumer.committed(list(partitions), timeout_ms))

    def metrics(self) -> dict[str, float]:
        return self._thread.call(self._consumer.metrics)

    def close(self, autocommit: bool = True, timeout_ms: float | None = None) -> None:
        """AsyncConsumer.close on the loop; bounded even if that hangs (its timeout plus a margin)."""
        if self._thread.loop.is_closed():
            return
        bound = (self.config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000 + _CLOSE_MARGIN_S
        try:
            self._thread.run(self._consumer.close(autocommit, timeout_ms), bound)
        except TimeoutError:
            log.error("the consumer did not close within %.1f s; stopping its thread regardless", bound)
        finally:
            self._thread.stop()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ShareConsumer:
    """A blocking facade over AsyncShareConsumer (same settings and method names). The acknowledgement
    commit callback runs on the client's loop thread, while ``poll``, ``commit_sync``, ``commit_async``
    or ``close`` waits for it, as confluent-kafka runs it within those calls."""

    config: ShareConsumerConfig

    def __init__(self, config: ShareConsumerConfig | Mapping[str, Any] | None = None, **properties: Any) -> None:
        self._thread = _LoopThread("kafkawire-share-consumer")
        self._consumer = self._thread.create(lambda: AsyncShareConsumer(config, **properties))
        self.config = self._consumer.config
        # dropped without close(): leave at once (the broker releases what this member held)
        self._thread.watch(self, functools.partial(self._consumer.close, 0), _CLOSE_MARGIN_S)

    def subscribe(self, topics: Iterable[str]) -> None:
        self._thread.call(self._consumer.subscribe, list(topics))

    def unsubscribe(self) -> None:
        self._thread.call(self._consumer.unsubscribe)

    def subscription(self) -> set[str]:
        return self._thread.call(self._consumer.subscription)

    def assignment(self) -> set[TopicPartition]:
        return self._thread.call(self._consumer.assignment)

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None) -> None:
        self._thread.call(self._consumer.set_acknowledgement_commit_callback, callback)

    def poll(self, timeout_ms: float = 0) -> list[ShareConsumerRecord]:
        return self._thread.run(self._consumer.poll(timeout_ms))

    def acknowledge(self, record: ShareConsumerRecord, type: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        self._thread.call(self._consumer.acknowledge, record, type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           type: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        self._thread.call(self._consumer.acknowledge_offset, topic, partition, offset, type)

    def commit_sync(self, timeout_ms: float | None = None) -> dict[TopicPartition, Exception | None]:
        return self._thread.run(self._consumer.commit_sync(timeout_ms))

    def commit_async(self) -> concurrent.futures.Future[dict[TopicPartition, Exception | None]]:
        return self._thread.call(lambda: _chain(self._consumer.commit_async()))

    def metrics(self) -> dict[str, float]:
        return self._thread.call(self._consumer.metrics)

    def close(self, timeout_ms: float | None = None) -> None:
        """AsyncShareConsumer.close on the loop; bounded even if that hangs (its timeout plus a margin)."""
        if self._thread.loop.is_closed():
            return
        bound = (self.config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000 + _CLOSE_MARGIN_S
        try:
            self._thread.run(self._consumer.close(timeout_ms), bound)
        except TimeoutError:
            log.error("the share consumer did not close within %.1f s; stopping its thread regardless", bound)
        finally:
            self._thread.stop()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

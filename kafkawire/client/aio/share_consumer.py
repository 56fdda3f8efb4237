"""AsyncShareConsumer: a share group consumer (KIP-932, "queues for Kafka") on asyncio, with the names
and semantics of Kafka's ``KafkaShareConsumer`` and confluent-kafka's ``ShareConsumer``.

::

    consumer = AsyncShareConsumer(bootstrap_servers="localhost:9092", group_id="workers")
    consumer.subscribe(["jobs"])
    while True:
        for record in await consumer.poll(timeout_ms=500):
            ...                      # implicit mode: accepted by the next poll (or commit)
    await consumer.close()

Members of one share group read the same partitions cooperatively: the broker hands each record to one
member at a time, under an acquisition lock, and counts its deliveries (``record.delivery_count``).

* ``share.acknowledgement.mode=implicit`` (the default): the records a poll returned are ACCEPTed by
  the next ``poll``, ``commit_sync`` or ``commit_async``. ``explicit``: ``acknowledge(record, type)``
  each one (ACCEPT, RELEASE to have it delivered again, REJECT to archive it, RENEW to keep its lock)
  before polling again; ``poll`` raises RuntimeError otherwise.
* Acknowledgements ride on the next ShareFetch to the partition's leader, or go at once in a
  ShareAcknowledge on ``commit_sync`` (which waits, and returns each partition's outcome) and
  ``commit_async``. The acknowledgement commit callback (``set_acknowledgement_commit_callback``) gets
  ``({partition: offsets}, error)`` for every answered acknowledgement, from within ``poll``,
  ``commit_sync``, ``commit_async`` and ``close``, as Kafka calls it.
* ``close`` acknowledges as Kafka does (implicit mode: the last poll's records ACCEPTed; records fetched
  but not handed out RELEASEd) in a final ShareAcknowledge, then leaves the group (epoch -1).
* Security, connections, metadata and the KIP-81 memory pool (``buffer.memory``) are the consumer's.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from ..core.cluster_metadata import ClusterMetadata
from ..core.properties import resolve
from ..core.share.config import ShareConsumerConfig
from ..core.share.fetcher import AcknowledgementResult, ShareFetcher
from ..core.share.membership import ShareMember
from ..core.share.record import AcknowledgeType, ShareConsumerRecord
from ..core.topic_partition import TopicPartition
from ..errors import ConsumerClosed, KafkaTimeoutError
from .connection_manager import ConnectionManager
from .metadata_refresh import Metadata
from .share_driver import ShareDriver
from .waiting import wait_event

__all__ = ["AsyncShareConsumer", "AcknowledgementCommitCallback"]

log = logging.getLogger(__name__)

_TASKS_STOP_S = 1.0  # closing: how long cancelled tasks get to finish

# Called with ({partition: acknowledged offsets}, None or the error) once acknowledgements are answered.
AcknowledgementCommitCallback = Callable[[dict[TopicPartition, set[int]], "Exception | None"], object]


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class AsyncShareConsumer:
    """A share group consumer on asyncio (see the module docstring)."""

    def __init__(self, config: ShareConsumerConfig | Mapping[str, Any] | None = None, **properties: Any) -> None:
        self.config = config = resolve(ShareConsumerConfig, config, properties)
        if not config.bootstrap_servers:
            raise ValueError("bootstrap.servers is required")
        assert config.group_id is not None  # (the config insists on one)
        self.member = ShareMember(config.group_id, config.client_rack, config.retry_backoff_ms)
        self.fetcher = ShareFetcher(config, self.member.member_id)
        # as Kafka's ShareConsumeRequestManager, acknowledgements are reported only while a callback is set
        self.fetcher.report_acknowledged = False
        self.pool = self.fetcher.pool
        self.connections = ConnectionManager.of(config, config.client_id or "kafkawire-share-consumer",
                                                memory_pool=self.pool,
                                                on_authentication_failure=lambda _error: self._wake_up())
        self.metadata = Metadata(self.connections, config.bootstrap_servers, allow_auto_topic_creation=False,
                                 retry_backoff_ms=config.retry_backoff_ms)
        self._stats = {"records-consumed-total": 0, "share-fetch-request-total": 0,
                       "share-acknowledge-request-total": 0, "bytes-fetched-total": 0, "heartbeat-total": 0}
        self._driver = ShareDriver(config, self.member, self.fetcher, self.connections, self.metadata, self._stats,
                                   spawn=self._spawn, wake=self._wake_up)
        self.metadata.add_listener(self._on_metadata)
        self._callback: AcknowledgementCommitCallback | None = None
        self._in_callback = False
        self._started = False
        self._closed = False
        self._wake = asyncio.Event()  # (binds to the running loop on first use)
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---- lifecycle -------------------------------------------------------------------------------------
    async def start(self, timeout_ms: float | None = None) -> None:
        """Bootstrap metadata and start the group member (the first call that needs the cluster does this);
        KafkaTimeoutError after ``timeout_ms`` (default.api.timeout.ms)."""
        self._check_open()
        if self._started:
            return
        await self.metadata.refresh_within(self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms,
                                           "fetching metadata")
        if not self._started and not self._closed:
            self._started = True
            self._driver.start()

    async def __aenter__(self) -> AsyncShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout_ms: float | None = None) -> None:
        """Acknowledge as Kafka does (see the module docstring), leave the group, close the connections;
        each step within what is left of ``timeout_ms`` (request.timeout.ms)."""
        if self._closed:
            return
        deadline = _now_ms() + (self.config.request_timeout_ms if timeout_ms is None else timeout_ms)
        try:
            if self._started:
                # the requests in flight first: a share session's requests follow each other
                await self._wait(lambda: not self.fetcher.in_flight, deadline)
                finals = self._driver.send(self.fetcher.close_requests())
                if finals:
                    await asyncio.wait(finals, timeout=max(0.0, deadline - _now_ms()) / 1000)
                self._run_callbacks()
                if self.member.active:
                    self.member.leave(_now_ms())
                    self._driver.wake_member()
                    await self._wait(lambda: self.member.left, deadline)
        finally:
            self._closed = True
            self._driver.close()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=_TASKS_STOP_S)
            self.fetcher.release_all()
            await self.metadata.close()
            await self.connections.close()

    async def _wait(self, condition: Callable[[], bool], deadline: float) -> bool:
        """Wait (pumping) until ``condition()`` or the deadline; whether it came true."""
        while not condition():
            remaining = deadline - _now_ms()
            if remaining <= 0:
                return False
            self._wake.clear()
            self._driver.pump()
            if condition():
                break
            await wait_event(self._wake, remaining / 1000)
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosed("the share consumer is closed")
        if self.connections.authentication_error is not None:
            raise self.connections.authentication_error
        if self._in_callback:
            raise RuntimeError("the share consumer cannot be called from its acknowledgement commit callback")

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not self._closed:
            log.error("share consumer background task failed", exc_info=task.exception())

    def _wake_up(self) -> None:
        self._wake.set()

    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        if not self._closed:
            self._driver.update_leaders(cluster)
            self._wake.set()

    # ---- subscriptions ----------------------------------------------------------------------------------
    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for ``topics`` (replacing the subscription; an empty list unsubscribes)."""
        self._check_open()
        if isinstance(topics, str):
            raise TypeError("subscribe() takes a list of topics, not a string")
        names = list(topics)
        if any(not isinstance(name, str) or not name for name in names) or len(set(names)) != len(names):
            raise ValueError(f"subscribe() needs distinct, non-empty topic names, not {names!r}")
        if not names:
            self.unsubscribe()
            return
        self.member.subscribe(tuple(sorted(names)), _now_ms())
        self.metadata.set_topics(set(names) | self.fetcher.topics())
        self._driver.wake_member()

    def unsubscribe(self) -> None:
        """Leave the share group; records fetched but not handed out are released."""
        self._check_open()
        if self.member.active:
            self.member.leave(_now_ms())
            self.fetcher.set_assignment({})
            self._driver.wake_member()

    def subscription(self) -> set[str]:
        return set(self.member.subscription)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group assigned to this member (shared with the group's other members)."""
        return self.fetcher.assignment()

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None) -> None:
        """``callback(offsets, error)`` for each partition's answered acknowledgements (None clears it)."""
        if callback is not None and not callable(callback):
            raise TypeError(f"the acknowledgement commit callback must be callable, not {callback!r}")
        self._callback = callback
        self.fetcher.report_acknowledged = callback is not None

    # ---- records -----------------------------------------------------------------------------------------
    async def poll(self, timeout_ms: float = 0) -> list[ShareConsumerRecord]:
        """Up to ``max.poll.records`` records acquired for this member, waiting up to ``timeout_ms`` for
        some. Settles the last poll's records first (see the module docstring)."""
        self._check_open()
        if not self.member.subscription:
            raise RuntimeError("poll() needs a subscription: call subscribe() first")
        deadline = _now_ms() + timeout_ms
        if not self._started:
            try:
                await self.start(timeout_ms)
            except KafkaTimeoutError as error:  # as Kafka's poll: no records yet, not an error
                log.log(logging.WARNING if timeout_ms > 0 else logging.DEBUG, "%s", error)
                return []
        max_records = self.config.max_poll_records
        while True:
            self._check_open()
            if self.member.errors:
                raise self.member.errors.pop(0)
            records = self.fetcher.poll(max_records)
            self._run_callbacks()
            self._wake.clear()
            self._driver.pump()  # what is due goes out: acknowledgements, the next fetch once these are settled
            if records:
                self._stats["records-consumed-total"] += len(records)
                return records
            remaining = deadline - _now_ms()
            if remaining <= 0:
                return []
            await wait_event(self._wake, remaining / 1000)

    def acknowledge(self, record: ShareConsumerRecord, type: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge ``record`` of the last poll (explicit mode); sent with the next poll or commit."""
        self._check_open()
        self.fetcher.acknowledge(record.topic_partition, record.offset, type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           type: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        """``acknowledge`` by the record's coordinates (confluent-kafka's ``acknowledge_offset``)."""
        self._check_open()
        self.fetcher.acknowledge(TopicPartition(topic, partition), offset, type)

    async def commit_sync(self, timeout_ms: float | None = None) -> dict[TopicPartition, Exception | None]:
        """Send the acknowledgements made so far and wait for them (up to ``timeout_ms``,
        default.api.timeout.ms; then KafkaTimeoutError): each partition's outcome, None where acknowledged."""
        self._check_open()
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        deadline = _now_ms() + timeout
        if not self._started:
            await self.start(timeout)
        commit = self.fetcher.commit()
        done = await self._wait(lambda: commit.done, deadline)
        self._run_callbacks()
        if not done:
            raise self.connections.timeout_error("commit_sync of share acknowledgements", timeout)
        return dict(commit.results)

    def commit_async(self) -> asyncio.Future[dict[TopicPartition, Exception | None]]:
        """Send the acknowledgements made so far and return at once; the future (and the callback) say
        how it went."""
        self._check_open()
        if not self._started:
            raise RuntimeError("commit_async() needs a started share consumer (poll first)")
        self._run_callbacks()
        commit = self.fetcher.commit()
        future: asyncio.Future[dict[TopicPartition, Exception | None]] = asyncio.get_running_loop().create_future()
        self._spawn(self._finish_async(commit, future))
        return future

    async def _finish_async(self, commit: Any, future: asyncio.Future[Any]) -> None:
        try:
            await self._wait(lambda: commit.done, float("inf"))
        finally:
            if not future.done():
                future.set_result(dict(commit.results))

    def _run_callbacks(self) -> None:
        completed: list[AcknowledgementResult] = self.fetcher.completed
        if not completed:
            return
        self.fetcher.completed = []
        callback = self._callback
        if callback is None:
            for offsets, error in completed:
                if error is not None:
                    log.warning("acknowledging %s failed: %s", sorted(offsets), error)
            return
        self._in_callback = True
        try:
            for offsets, error in completed:
                try:
                    callback(offsets, error)
                except Exception:  # noqa: BLE001 (the application's code must not stop the consumer)
                    log.exception("the acknowledgement commit callback failed")
        finally:
            self._in_callback = False

    # ---- metrics -----------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """KIP-81's memory-pool metrics, plus fetch and acknowledgement counters."""
        out: dict[str, float] = dict(self.pool.metrics())
        out["memory-pool-peak-used"] = self.pool.peak_used
        out["memory-pool-size"] = self.pool.size
        out.update(self._stats)
        return out

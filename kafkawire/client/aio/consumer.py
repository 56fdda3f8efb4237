"""AsyncConsumer: the Fetcher run over broker connections, with offsets and commits.

::

    consumer = AsyncConsumer(bootstrap_servers="localhost:9092", auto_offset_reset="earliest")
    consumer.assign([TopicPartition("events", 0), TopicPartition("events", 1)])
    while True:
        for record in await consumer.poll(timeout_ms=500):
            ...
    await consumer.close()

How the pieces run:

* Fetches go out from ``poll`` per the Fetcher's rules (one in flight per broker, buffered partitions
  left out, KIP-74 rotation, KIP-41 prefetch only while fewer than ``max.poll.records`` records are
  retained): while ``poll`` waits for data, and before it returns records, so the next round is in
  flight while the application works on these.
* Fetches travel on a connection of their own per broker, charged to the consumer's memory pool
  (``buffer.memory``, KIP-81) before they are read (``fetch_driver``); metadata and ListOffsets use
  another connection, and the group coordinator a third, so neither ever waits for fetch memory.
* Partitions without a position take the group's committed offset (OffsetFetch, when ``group.id``
  is set), else ``auto.offset.reset`` (ListOffsets to the leader: earliest or latest).
* With a ``group.id``, a ``GroupMember`` runs in a task of its own (``group_driver``): ``subscribe()``
  joins the classic group, and in both modes it carries ``commit()`` / ``commit_async()`` /
  ``committed()`` to the coordinator. ``enable.auto.commit`` commits positions every
  ``auto.commit.interval.ms`` and on ``close``.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import ListOffsetsRequest

from ..core.cluster_metadata import METADATA_REFRESH_ERRORS, ClusterMetadata
from ..core.consumer.config import ConsumerConfig
from ..core.consumer.fetcher import Fetcher
from ..core.consumer.record import ConsumerRecord
from ..core.group.consumer_group_metadata import ConsumerGroupMetadata
from ..core.group.member import GroupMember
from ..core.group.protocol import (
    CommittedOffsets, OffsetAndMetadata, PartitionsAssigned, PartitionsLost, PartitionsRevoked,
)
from ..core.properties import resolve
from ..core.topic_partition import TopicPartition
from ..errors import (
    ConfigError, ConsumerClosed, GroupError, IncompatibleBrokerError, KafkaConnectionError, KafkaError,
    KafkaTimeoutError,
)
from .connection import DEFAULT_ROLE, FETCH_ROLE, BrokerConnection
from .connection_manager import ConnectionManager
from .fetch_driver import FetchDriver
from .group_driver import GroupDriver
from .metadata_refresh import Metadata
from .waiting import wait_event

__all__ = ["AsyncConsumer", "CommitCallback"]

log = logging.getLogger(__name__)

_TASKS_STOP_S = 1.0  # closing: how long cancelled tasks get to finish
_LIST_OFFSETS_MIN_VERSION = 1  # one offset per partition, not the v0 array

# commit_async's callback: called with the offsets and None, or the error, when the commit ends.
CommitCallback = Callable[[Mapping[TopicPartition, "int | OffsetAndMetadata"], "BaseException | None"], object]


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class AsyncConsumer:
    """A Kafka consumer on asyncio (see the module docstring)."""

    def __init__(self, config: ConsumerConfig | Mapping[str, Any] | None = None, **properties: Any) -> None:
        self.config = config = resolve(ConsumerConfig, config, properties)
        if not config.bootstrap_servers:
            raise ValueError("bootstrap.servers is required")
        self.fetcher = Fetcher(config)
        self.pool = self.fetcher.pool
        self.connections = ConnectionManager.of(config, config.client_id or "kafkawire-consumer", memory_pool=self.pool,
                                                on_authentication_failure=lambda _error: self._wake.set())
        self.metadata = Metadata(self.connections, config.bootstrap_servers, allow_auto_topic_creation=False,
                                 retry_backoff_ms=config.retry_backoff_ms)
        self.metadata.add_listener(self._on_metadata)
        self._stats = {"records-consumed-total": 0, "fetch-request-total": 0, "fetch-response-total": 0,
                       "fetch-error-total": 0, "bytes-fetched-total": 0, "list-offsets-total": 0,
                       "commit-total": 0, "rebalance-total": 0}
        self._fetching = FetchDriver(self.fetcher, config, self.connections, self.metadata, self._stats,
                                     spawn=self._spawn, wake=self._wake_poll, connected=self._fetch_connected)
        # group membership and offsets, with a group.id
        self.member = None
        if config.group_id:
            self.member = GroupMember(config, positions=self._positions, group_instance_id=config.group_instance_id)
        self._group = (GroupDriver(self.member, config.group_id, self.connections, self.metadata, self._stats,
                                   spawn=self._spawn, any_connection=self._any_connection,
                                   on_event=self._on_group_event)
                       if self.member is not None else None)
        self._subscribed: tuple[str, ...] = ()
        self._listener: object = None
        self._started = False
        self._closed = False
        self._wake = asyncio.Event()  # (binds to the running loop on first use, not here)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._resetting: set[TopicPartition] = set()  # ListOffsets in flight
        self._looking_up: set[TopicPartition] = set()  # committed offsets being fetched
        self._lookups: dict[int, tuple[TopicPartition, ...]] = {}  # our OffsetFetch request ids
        self._position_retry_at = 0.0
        self._next_auto_commit = 0.0

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self, timeout_ms: float | None = None) -> None:
        """Bootstrap metadata and start the group member (the first call that needs the cluster does
        this). The bootstrap servers are tried again, after each one's reconnect backoff, for up to
        ``timeout_ms`` (default.api.timeout.ms): then KafkaTimeoutError naming the brokers tried and the
        last cause."""
        await self._start(self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms,
                          "fetching metadata")

    async def _start(self, timeout_ms: float, what: str) -> None:
        if self._closed:
            raise ConsumerClosed("the consumer is closed")
        if self._started:
            return
        await self.metadata.refresh_within(timeout_ms, what)
        if self._started or self._closed:  # another call started it meanwhile, or close() came
            return
        self._started = True
        self._next_auto_commit = _now_ms() + self.config.auto_commit_interval_ms
        if self.member is not None and self._group is not None:
            self.member.set_api_versions((await self._any_connection()).api_versions)
            self._group.start()

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, autocommit: bool = True, timeout_ms: float | None = None) -> None:
        """Commit positions (with ``enable.auto.commit``; ``autocommit=False`` skips that in assign()
        mode), leave the group, close every connection."""
        if self._closed:
            return
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = _now_ms() + timeout  # the commit and the leave share it: close is bounded by it
        member, group = self.member, self._group
        try:
            if group is not None and group.task is not None and member is not None and not member.closed:
                if autocommit and self.config.enable_auto_commit and not self._subscribed and self._positions():
                    try:  # assign() mode; a group member commits its own positions as it leaves
                        remaining = max(0.0, deadline - _now_ms())
                        async with asyncio.timeout(remaining / 1000):
                            await self.commit(timeout_ms=remaining)
                    except (GroupError, KafkaConnectionError, TimeoutError) as error:
                        log.warning("auto-commit on close failed: %r", error)
                remaining = max(0.0, deadline - _now_ms())
                member.close(_now_ms(), int(remaining))
                group.wake()
                # asyncio.wait neither cancels the task nor can lose this task's own cancellation
                done, _ = await asyncio.wait({group.task}, timeout=remaining / 1000)
                if not done:
                    log.warning("leaving the group did not finish within %.0f ms", timeout)
                elif not group.task.cancelled() and group.task.exception() is not None:
                    log.warning("leaving the group failed: %r", group.task.exception())
        finally:
            self._closed = self._fetching.closed = True
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=_TASKS_STOP_S)
            if group is not None:
                group.fail_waiters(ConsumerClosed("the consumer closed before this completed"))
            self.fetcher.close()
            await self.metadata.close()
            await self.connections.close()

    def _check_open(self) -> None:
        """Raise ConsumerClosed after close, or the AuthenticationException that stopped the consumer
        from connecting (not retriable: the credentials must change first)."""
        if self._closed:
            raise ConsumerClosed("the consumer is closed")
        if self.connections.authentication_error is not None:
            raise self.connections.authentication_error

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not self._closed:
            log.error("consumer background task failed", exc_info=task.exception())

    def _wake_poll(self) -> None:
        self._wake.set()

    def _wake_group(self) -> None:
        if self._group is not None:
            self._group.wake()

    # ---- subscriptions ---------------------------------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (no group management). New ones start at the committed
        offset (with a group.id) or per auto.offset.reset."""
        self._check_open()
        if self._subscribed:
            raise RuntimeError("assign() cannot be mixed with subscribe(); call unsubscribe() first")
        self._assign([TopicPartition(*tp) for tp in partitions])

    def _assign(self, partitions: list[TopicPartition]) -> None:
        self.fetcher.assign(partitions)
        kept = set(partitions)
        self._resetting &= kept
        self._looking_up &= kept
        self._track_topics()
        if self._started:
            self._on_metadata(self.metadata.cluster)
            self._wake.set()

    def _track_topics(self) -> None:
        topics = {tp.topic for tp in self.fetcher.assignment()} | set(self._subscribed)
        if self.member is not None:
            topics |= self.member.metadata_topics
        self.metadata.set_topics(topics)

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer's group, generation and member id, for a transactional producer's
        ``send_offsets_to_transaction`` (KIP-447: the group coordinator refuses the offsets once this
        member has lost its partitions). Outside a group's management (``assign``) the generation is -1."""
        if self.member is None:
            raise ConfigError("consumer_group_metadata needs a group.id")
        generation = self.member.generation
        return ConsumerGroupMetadata(self.member.group_id, generation.generation_id, generation.member_id,
                                     self.member.group_instance_id)

    def assignment(self) -> set[TopicPartition]:
        return set(self.fetcher.assignment())

    def rebalance_protocol(self) -> str:
        """"COOPERATIVE", "EAGER", or "NONE" (not joined yet, no group), as confluent-kafka's Consumer says."""
        return "NONE" if self.member is None else self.member.rebalance_protocol

    def subscribe(self, topics: Iterable[str], listener: object = None) -> None:
        """Join ``group.id`` and consume the partitions the group assigns from ``topics``.

        ``listener`` may have ``on_partitions_revoked(partitions)``, ``on_partitions_lost(partitions)``
        and ``on_partitions_assigned(partitions)`` (plain functions, called on the event loop)."""
        self._check_open()
        if self.member is None:
            raise RuntimeError("subscribe() needs a group.id")
        if isinstance(topics, str):
            raise TypeError("subscribe() takes a list of topics, not a string")
        names = tuple(sorted(set(topics)))
        if self.fetcher.assignment() and not self._subscribed:
            raise RuntimeError("subscribe() cannot be mixed with assign(); assign([]) first")
        self.member.subscribe(names, _now_ms())
        self._subscribed = names
        self._listener = listener
        self._track_topics()
        if self._started:
            self._wake_group()

    def subscription(self) -> set[str]:
        return set(self._subscribed)

    async def unsubscribe(self) -> None:
        """Give up the group's partitions and leave the group."""
        self._check_open()
        if self.member is not None and self._subscribed:
            self.member.unsubscribe(_now_ms())
            if self._started:
                self._wake_group()
        self._subscribed = ()
        self._assign([])

    # ---- polling ---------------------------------------------------------------------------------
    async def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to ``max.poll.records`` (and ``max_records``) records, waiting at most ``timeout_ms`` for
        some. A partition's failure (CorruptRecordException, OffsetOutOfRangeException, ...) is raised
        here, after the records before it have been returned; the other partitions keep going; so is a
        fatal group error."""
        self._check_open()
        if not self.fetcher.assignment() and not self._subscribed:
            raise RuntimeError("poll() needs partitions: call assign() or subscribe() first")
        deadline = _now_ms() + timeout_ms
        if not self._started:
            try:
                await self._start(timeout_ms, "poll")
            except KafkaTimeoutError as error:  # as Kafka's poll: no records yet, not an error
                log.log(logging.WARNING if timeout_ms > 0 else logging.DEBUG, "%s", error)
                return []
        while True:
            now = _now_ms()
            self._check_open()  # an authentication failure wakes this wait
            if self._group is not None and self._group.errors:
                raise self._group.errors.pop(0)
            if self._subscribed and self.member is not None:
                self.member.record_poll(now)
                self._wake_group()
            else:
                self._maybe_auto_commit(now)
            records = self.fetcher.poll(max_records)
            if records:
                self._stats["records-consumed-total"] += len(records)
                self._pump()  # prefetch: the next round goes out before the application gets these
                return records
            self._wake.clear()
            self._pump()
            remaining = deadline - _now_ms()
            if remaining <= 0:
                return []
            await wait_event(self._wake, remaining / 1000)

    def _pump(self) -> None:
        """Start whatever network work is due: metadata, position lookups, fetches. Never waits."""
        if self._closed or not self._started:
            return
        fetcher = self.fetcher
        if fetcher.metadata_refresh_needed and not self._fetching.connecting:
            self.metadata.request_update()
        self.metadata.maybe_refresh()
        now = _now_ms()
        if now >= self._position_retry_at:
            self._update_positions()
        self._fetching.send(now)

    # ---- positions -------------------------------------------------------------------------------
    def _update_positions(self) -> None:
        fetcher = self.fetcher
        missing = [tp for tp in fetcher.partitions_without_position() if tp not in self._looking_up]
        if missing:
            if self.member is not None and not self.member.closed:
                request_id = self.member.fetch_committed(missing, _now_ms())
                self._lookups[request_id] = tuple(missing)
                self._looking_up.update(missing)
                self._wake_group()
            else:
                for tp in missing:
                    fetcher.request_offset_reset(tp)
        resets = {tp: ts for tp, ts in fetcher.pending_offset_resets().items() if tp not in self._resetting}
        if not resets:
            return
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, timestamp in resets.items():
            node = self.metadata.cluster.leader(tp)
            if node is None:
                self.metadata.add_topics([tp.topic])
                self.metadata.request_update()
                continue
            by_node.setdefault(node, {})[tp] = timestamp
        for node, wanted in by_node.items():
            self._resetting.update(wanted)
            self._spawn(self._reset_offsets(node, wanted))

    def _restore_committed(self, partitions: Iterable[TopicPartition], offsets: Mapping[TopicPartition, OffsetAndMetadata | None]) -> None:
        """Positions from committed offsets; auto.offset.reset where nothing is committed."""
        assigned = set(self.fetcher.assignment())
        for tp in partitions:
            self._looking_up.discard(tp)
            if tp not in assigned or self.fetcher.position(tp) is not None:
                continue  # unassigned or sought meanwhile
            committed = offsets.get(tp)
            if committed is not None:
                self.fetcher.seek(tp, committed.offset, committed.leader_epoch)
            elif tp not in self.fetcher.pending_offset_resets():
                self.fetcher.request_offset_reset(tp)
        self._wake.set()

    async def _reset_offsets(self, node: int, wanted: dict[TopicPartition, int]) -> None:
        self._stats["list-offsets-total"] += 1
        try:
            connection = await self.connections.connection(node)
            version = connection.api_version(ListOffsetsRequest.API_KEY, _LIST_OFFSETS_MIN_VERSION)
            topics: dict[str, list[ListOffsetsRequest.ListOffsetsPartition]] = {}
            for tp, timestamp in wanted.items():
                topics.setdefault(tp.topic, []).append(ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=-1, timestamp=timestamp))
            request = ListOffsetsRequest(
                replica_id=-1, isolation_level=self.config.isolation_level_code,
                topics=[ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=parts) for name, parts in topics.items()],
                timeout_ms=self.config.request_timeout_ms)
            response = await connection.send(request, version)
        except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
            log.debug("ListOffsets to node %d failed: %s", node, error)
            self.metadata.request_update()
            self._position_retry_at = _now_ms() + self.config.retry_backoff_ms
            return
        finally:
            self._resetting.difference_update(wanted)
        failed = False
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in wanted:
                    continue
                if p.error_code == ErrorCode.NONE and p.offset >= 0:
                    self.fetcher.complete_offset_reset(tp, p.offset, p.leader_epoch if p.leader_epoch >= 0 else None)
                else:
                    failed = True
                    if p.error_code in METADATA_REFRESH_ERRORS:
                        self.metadata.request_update()
        if failed:
            self._position_retry_at = _now_ms() + self.config.retry_backoff_ms
        self._wake.set()
        self._pump()

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Fetch ``partition`` from ``offset`` next (buffered records are dropped; a failure is cleared)."""
        self._check_open()
        self.fetcher.seek(TopicPartition(*partition), offset)
        self._resetting.discard(TopicPartition(*partition))

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Reset to the log start (of every assigned partition when none is named)."""
        self._reset_to("earliest", partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Reset to the log end (of every assigned partition when none is named)."""
        self._reset_to("latest", partitions)

    def _reset_to(self, strategy: str, partitions: Iterable[TopicPartition]) -> None:
        self._check_open()
        for given in (partitions or self.fetcher.assignment()):
            tp = TopicPartition(*given)
            self.fetcher.request_offset_reset(tp, strategy)
            self._resetting.discard(tp)
        if self._started:
            self._wake.set()

    async def position(self, partition: TopicPartition | tuple[str, int], timeout_ms: float | None = None) -> int:
        """The offset of the next record ``poll`` will return for ``partition``, looking it up if needed
        for up to ``timeout_ms`` (default.api.timeout.ms; then KafkaTimeoutError)."""
        self._check_open()
        tp = TopicPartition(*partition)
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        started = _now_ms()
        deadline = started + timeout
        if not self._started:
            await self._start(timeout, f"position of {tp}")
        while True:
            position = self.fetcher.position(tp)
            if position is not None:
                return position
            remaining = deadline - _now_ms()
            if remaining <= 0:
                raise self.connections.timeout_error(f"position of {tp}", timeout, self.metadata.last_error)
            self._wake.clear()
            self._pump()
            await wait_event(self._wake, remaining / 1000)

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching and returning records of these partitions (buffered records are kept)."""
        self.fetcher.pause(TopicPartition(*tp) for tp in partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.fetcher.resume(TopicPartition(*tp) for tp in partitions)
        if self._started:
            self._wake.set()

    def paused(self) -> set[TopicPartition]:
        return self.fetcher.paused()

    def highwater(self, partition: TopicPartition | tuple[str, int]) -> int:
        """The high watermark of the partition's last fetch response (-1 before one)."""
        return self.fetcher.high_watermark(TopicPartition(*partition))

    # ---- fetching ---------------------------------------------------------------------------------
    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        if self._closed:
            return
        self._fetching.update_leaders(cluster)
        if self.member is not None:
            self.member.set_topic_ids(cluster.topic_ids())  # OffsetCommit/OffsetFetch v10 go by topic id
        self._wake.set()

    def _fetch_connected(self) -> None:
        self._on_metadata(self.metadata.cluster)
        self._pump()

    # ---- commits ---------------------------------------------------------------------------------
    def _require_member(self) -> GroupMember:
        if self.member is None:
            raise RuntimeError("committed offsets need a group.id")
        if self.member.closed:
            raise ConsumerClosed("the consumer is closed")
        return self.member

    def _positions(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for tp in self.fetcher.assignment():
            position = self.fetcher.position(tp)
            if position is not None:
                out[tp] = position
        return out

    def _await_group(self, request_id: int) -> asyncio.Future[Any]:
        assert self._group is not None  # (a member has its driver)
        return self._group.wait_for(request_id)

    async def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
                     timeout_ms: float | None = None) -> None:
        """Commit ``offsets`` (default: the positions, i.e. everything poll returned) and wait;
        retriable errors are retried for ``timeout_ms`` (default.api.timeout.ms). Raises GroupError
        (CommitFailedError after a rebalance took the partitions away)."""
        self._check_open()
        member = self._require_member()
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        deadline = _now_ms() + timeout
        if not self._started:
            await self._start(timeout, "commit")
        offsets = self._positions() if offsets is None else offsets
        await self._await_group(member.commit(offsets, _now_ms(), int(max(0.0, deadline - _now_ms()))))

    def commit_async(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
                     callback: CommitCallback | None = None) -> asyncio.Future[dict[TopicPartition, Any]]:
        """Send one commit and return at once; the future (and ``callback(offsets, error)``) says how it went."""
        self._check_open()
        member = self._require_member()
        if not self._started:
            raise RuntimeError("commit_async() needs a started consumer (poll first)")
        to_commit: dict[TopicPartition, int | OffsetAndMetadata] = (
            dict(self._positions()) if offsets is None else dict(offsets))
        future = self._await_group(member.commit(to_commit, _now_ms()))
        if callback is not None:
            future.add_done_callback(lambda done: callback(
                to_commit, None if done.cancelled() else done.exception()))
        else:
            future.add_done_callback(_log_commit_failure)
        return future

    def _maybe_auto_commit(self, now: float) -> None:
        """assign() mode (a group member auto-commits by itself while subscribed)."""
        if not self.config.enable_auto_commit or now < self._next_auto_commit or self.member is None:
            return
        self._next_auto_commit = now + self.config.auto_commit_interval_ms
        if self._positions():
            self.commit_async()

    async def committed(self, partitions: Iterable[TopicPartition],
                        timeout_ms: float | None = None) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where nothing is committed), within ``timeout_ms``
        (default.api.timeout.ms; then KafkaTimeoutError)."""
        self._check_open()
        member = self._require_member()
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        started = _now_ms()
        if not self._started:
            await self._start(timeout, "committed offsets")
        waiting = self._await_group(member.fetch_committed([TopicPartition(*tp) for tp in partitions], _now_ms()))
        done, _ = await asyncio.wait({waiting}, timeout=max(0.0, started + timeout - _now_ms()) / 1000)
        if not done:
            waiting.cancel()
            raise self.connections.timeout_error("committed offsets", timeout)
        offsets = waiting.result()
        return {tp: (value.offset if value is not None else None) for tp, value in offsets.items()}

    # ---- the group member's events ------------------------------------------------------------------
    def _on_group_event(self, event: object) -> None:
        if isinstance(event, (PartitionsRevoked, PartitionsLost)):
            gone = set(event.partitions)
            self._assign([tp for tp in self.fetcher.assignment() if tp not in gone])
            self._call_listener("on_partitions_lost" if isinstance(event, PartitionsLost) else "on_partitions_revoked",
                                event.partitions)
        elif isinstance(event, PartitionsAssigned):
            self._stats["rebalance-total"] += 1
            added = event.partitions if event.added is None else event.added  # incremental: only the new ones
            self._looking_up.update(added)  # the member fetches their committed offsets itself
            self._assign(list(event.partitions))
            self._call_listener("on_partitions_assigned", added)
        elif isinstance(event, CommittedOffsets):  # (callers waiting on it are told by the GroupDriver)
            partitions = self._lookups.pop(event.request_id, None) if event.request_id is not None else None
            if event.error is not None:
                self._looking_up.difference_update(partitions or event.offsets or ())
                if event.request_id is None or partitions is not None:
                    log.warning("fetching committed offsets failed: %s", event.error)
                    self._looking_up.difference_update(self.fetcher.partitions_without_position())
                    self._position_retry_at = _now_ms() + self.config.retry_backoff_ms
                return
            if event.request_id is None or partitions is not None:
                self._restore_committed(partitions or tuple(event.offsets), event.offsets)
        self._wake.set()

    def _call_listener(self, name: str, partitions: Iterable[TopicPartition]) -> None:
        callback = getattr(self._listener, name, None)
        if callback is None:
            return
        try:
            callback(set(partitions))
        except Exception:  # noqa: BLE001 (the application's code must not stop the group member)
            log.exception("the rebalance listener's %s failed", name)

    async def _any_connection(self) -> BrokerConnection:
        for node in sorted(self.metadata.cluster.brokers):
            ready = self.connections.get_ready(node, DEFAULT_ROLE)
            if ready is not None:
                return ready
        for node in sorted(self.metadata.cluster.brokers):
            try:
                return await self.connections.connection(node, DEFAULT_ROLE)
            except KafkaConnectionError:
                continue
        return await self.connections.bootstrap(self.config.bootstrap_servers)

    # ---- metrics ---------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """KIP-81's four memory-pool metrics, plus fetch and position counters and the brokers'
        throttling (ms)."""
        out: dict[str, float] = dict(self.pool.metrics())
        out["memory-pool-peak-used"] = self.pool.peak_used
        out["memory-pool-size"] = self.pool.size
        out.update(self._stats)
        out["buffered-bytes"] = self.fetcher.buffered_bytes()
        out["buffered-records"] = self.fetcher.retained_records()
        out["reads-paused-total"] = sum(c.reads_paused_total for c in self.connections.connections()
                                        if c.role == FETCH_ROLE)
        out.update(self.connections.throttle_metrics("fetch"))
        return out


def _log_commit_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("asynchronous commit failed: %s", future.exception())

"""Metadata: keeps a ClusterMetadata fresh over a ConnectionManager for the topics a client uses.

It bootstraps from ``bootstrap.servers``, refreshes on demand (``request_update()`` after
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION and the like, or when a topic is first needed),
every ``metadata.max.age.ms`` otherwise, and lets callers wait for a topic to appear. One Metadata
request is in flight at a time; callers asking meanwhile share its answer, and a request for topics
it did not cover starts another once it is done.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from uuid import UUID

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import MetadataRequest

from ..core.cluster_metadata import TRANSIENT_TOPIC_ERRORS, ClusterMetadata, TopicInfo
from ..errors import (
    AuthenticationException, IncompatibleBrokerError, KafkaConnectionError, KafkaError, UnknownTopicError,
    error_for_code,
)
from .connection import BrokerConnection
from .connection_manager import ConnectionManager

__all__ = ["Metadata"]

log = logging.getLogger(__name__)

_ZERO_UUID = UUID(int=0)
_METADATA_MIN_VERSION = 1  # v1 is the first that can ask for no topics and that names the controller


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class Metadata:
    """Keeps a ClusterMetadata fresh for the topics a client uses."""

    def __init__(self, connections: ConnectionManager, bootstrap_servers: Iterable[str], *,
                 allow_auto_topic_creation: bool = True, metadata_max_age_ms: float = 300_000,
                 retry_backoff_ms: float = 100):
        self.connections = connections
        self.bootstrap_servers = tuple(bootstrap_servers)
        if not self.bootstrap_servers:
            raise ValueError("bootstrap.servers is empty: name at least one broker as host:port")
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.cluster = ClusterMetadata()
        self.topics: set[str] = set()  # the topics this client needs
        self.refreshes = 0
        self.last_error: BaseException | None = None
        self._needs_update = True
        self._refresh: asyncio.Task | None = None
        self._refresh_topics: frozenset[str] = frozenset()
        self._listeners: list[Callable[[ClusterMetadata], None]] = []
        self._last_attempt_ms = float("-inf")

    def add_listener(self, listener: Callable[[ClusterMetadata], None]) -> None:
        """Call ``listener(cluster)`` after every successful refresh."""
        self._listeners.append(listener)

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track ``topics`` too; True if any was new (a refresh is then due)."""
        new = set(topics) - self.topics
        if new:
            self.topics |= new
            self._needs_update = True
        return bool(new)

    def set_topics(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        if topics != self.topics:
            self.topics = topics
            self._needs_update = True

    def request_update(self) -> None:
        """Refresh at the next ``maybe_refresh`` (a leader moved, a topic is missing, ...)."""
        self._needs_update = True

    @property
    def needs_update(self) -> bool:
        if self._needs_update:
            return True
        updated = self.cluster.updated_ms
        return updated is None or _now_ms() - updated >= self.metadata_max_age_ms

    def maybe_refresh(self) -> asyncio.Task | None:
        """Start a refresh in the background if one is due (and not backing off); returns its task."""
        if self._refresh is not None and not self._refresh.done():
            return self._refresh
        if not self.needs_update or _now_ms() - self._last_attempt_ms < self.retry_backoff_ms:
            return None
        return self._start_refresh()

    async def refresh(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Fetch metadata now for the tracked topics (plus ``topics``); shares a refresh in flight
        when it covers them. Raises KafkaConnectionError when no broker answers."""
        if topics is not None:
            self.add_topics(topics)
        while True:
            task = self._refresh
            if task is None or task.done() or not self.topics <= self._refresh_topics:
                if task is not None and not task.done():
                    await asyncio.shield(task)  # one at a time; then ask for what it lacked
                    continue
                task = self._start_refresh()
            await asyncio.shield(task)
            error = task.exception()
            if error is not None:
                raise error
            return self.cluster

    def _start_refresh(self) -> asyncio.Task:
        self._refresh_topics = frozenset(self.topics)
        self._needs_update = False
        self._last_attempt_ms = _now_ms()
        self._refresh = asyncio.get_running_loop().create_task(self._do_refresh(self._refresh_topics))
        self._refresh.add_done_callback(_consume_exception)
        return self._refresh

    async def _do_refresh(self, topics: frozenset[str]) -> None:
        try:
            connection = await self._any_connection()
            version = connection.api_version(MetadataRequest.API_KEY, _METADATA_MIN_VERSION)
            names = sorted(topics)
            request = MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=name, topic_id=_ZERO_UUID) for name in names],
                allow_auto_topic_creation=self.allow_auto_topic_creation,
                include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
            response = await connection.send(request, version)
        except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
            self._needs_update = True
            self.last_error = error
            raise
        self.cluster.update(response, _now_ms(), names)
        self.refreshes += 1
        self.last_error = None
        self.connections.update_brokers({b.node_id: (b.host, b.port) for b in self.cluster.brokers.values()})
        if self.cluster.brokers and connection.node_id is None:
            await self.connections.close_bootstrap()  # from now on brokers are reached by node id
        if any(code in TRANSIENT_TOPIC_ERRORS for name, code in self.cluster.topic_errors.items() if name in topics) \
                or any(p.leader is None for t in topics if t in self.cluster.topics
                       for p in self.cluster.topics[t].partitions.values()):
            self._needs_update = True  # a topic being created or a leader being elected: look again soon
        for listener in tuple(self._listeners):
            listener(self.cluster)

    async def any_connection(self) -> BrokerConnection:
        """A connection to a known broker (one already up first), else to a bootstrap server."""
        return await self._any_connection()

    async def _any_connection(self) -> BrokerConnection:
        """A connection to a known broker, else to a bootstrap server."""
        for node_id in sorted(self.cluster.brokers):
            ready = self.connections.get_ready(node_id)
            if ready is not None:
                return ready
        for node_id in sorted(self.cluster.brokers):
            try:
                return await self.connections.connection(node_id)
            except AuthenticationException:
                raise
            except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
                log.debug("metadata: broker %d unreachable: %s", node_id, error)
        return await self.connections.bootstrap(self.bootstrap_servers)

    async def refresh_within(self, timeout_ms: float, what: str,
                             topics: Iterable[str] | None = None) -> ClusterMetadata:
        """``refresh``, tried again (each broker after its reconnect backoff, and retry.backoff.ms apart)
        until it succeeds or ``timeout_ms`` has passed: then a KafkaTimeoutError saying that ``what`` timed
        out, naming the broker(s) tried and the last cause. An AuthenticationException or an
        IncompatibleBrokerError is raised at once (trying again cannot help)."""
        started = _now_ms()
        done, cause = await self._refresh_until(started + timeout_ms, topics)
        if done:
            return self.cluster
        raise self.connections.timeout_error(what, timeout_ms, cause)

    async def _refresh_until(self, deadline_ms: float, topics: Iterable[str] | None = None
                             ) -> tuple[bool, BaseException | None]:
        """(True, None) once a refresh succeeded; at the deadline, (False, the last failure if any)."""
        cause: BaseException | None = None
        while True:
            # even with no time left, one refresh starts: it goes on in the background, and a caller
            # that polls with no timeout (poll(0) in a loop) finds its outcome later
            try:
                async with asyncio.timeout(max(deadline_ms - _now_ms(), 0) / 1000):  # see waiting.wait_event
                    await self.refresh(topics)
                return True, None
            except (AuthenticationException, IncompatibleBrokerError):
                raise  # not retriable: the credentials or the broker must change first
            except (KafkaConnectionError, KafkaError) as error:  # (before TimeoutError: RequestTimedOut is one)
                cause = error
            except TimeoutError:
                return False, cause
            remaining = deadline_ms - _now_ms()
            if remaining <= 0:
                return False, cause
            await asyncio.sleep(min(self.retry_backoff_ms, remaining) / 1000)

    async def wait_for_topic(self, topic: str, timeout_ms: float) -> TopicInfo:
        """The topic's metadata, refreshing until it has partitions with leaders or ``timeout_ms`` passes:
        then UnknownTopicError when brokers answered without it, else KafkaTimeoutError naming the
        broker(s) and why they did not answer."""
        self.add_topics([topic])
        started = _now_ms()
        deadline = started + timeout_ms
        cause: BaseException | None = None
        while True:
            info = self.cluster.topics.get(topic)
            if info is not None and any(p.leader is not None for p in info.partitions.values()):
                return info
            code = self.cluster.topic_errors.get(topic)
            if code is not None and code not in TRANSIENT_TOPIC_ERRORS:
                raise error_for_code(code, f"topic {topic!r}")
            if deadline - _now_ms() <= 0:
                if cause is not None or self.cluster.updated_ms is None or self.cluster.updated_ms < started:
                    raise self.connections.timeout_error(f"metadata for topic {topic!r}", timeout_ms, cause)
                raise UnknownTopicError(code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        f"topic {topic!r} not present in metadata after {timeout_ms:.0f} ms")
            done, failure = await self._refresh_until(deadline)
            cause = None if done else failure or cause
            if done and (topic not in self.cluster.topics or not self.cluster.topics[topic].partitions):
                await asyncio.sleep(min(self.retry_backoff_ms, max(deadline - _now_ms(), 0)) / 1000)

    async def close(self) -> None:
        if self._refresh is not None and not self._refresh.done():
            self._refresh.cancel()


def _consume_exception(task: asyncio.Task) -> None:
    # a background refresh's failure is kept in last_error; do not log "never retrieved"
    if not task.cancelled():
        task.exception()

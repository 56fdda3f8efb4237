"""GroupDriver: the consumer's GroupMember (``kafkawire.client.core.group.member``, sans I/O) run by a
task of its own.

The task sends what the member asks for (to any broker, or to the coordinator over a connection of its
own, so that group traffic never waits behind fetches or their memory), hands it the answers and the
partition counts it needs, and passes its events on: to callers waiting on a commit or on committed
offsets, to the next ``poll`` (a fatal error), and to the consumer (assignments, committed positions).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from kafkawire.messages import ApiKey

from ..core.group.member import GroupMember
from ..core.group.protocol import CommitCompleted, CommittedOffsets, GroupFailure, OutgoingRequest
from ..errors import GroupError, IncompatibleBrokerError, KafkaConnectionError, KafkaError
from .connection import COORDINATOR_ROLE, BrokerConnection
from .connection_manager import ConnectionManager
from .metadata_refresh import Metadata
from .waiting import wait_event

__all__ = ["GroupDriver"]

log = logging.getLogger(__name__)



def _now_ms() -> float:
    return time.monotonic() * 1000.0


class GroupDriver:
    """Runs ``member`` (see the module docstring). ``spawn`` runs a coroutine as one of the consumer's
    tasks, ``any_connection`` gives a connection to any broker, ``on_event`` takes every event after the
    driver's own handling."""

    def __init__(self, member: GroupMember, group_id: str | None, connections: ConnectionManager,
                 metadata: Metadata, stats: dict[str, int], *,
                 spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
                 any_connection: Callable[[], Awaitable[BrokerConnection]], on_event: Callable[[object], None]):
        self.member = member
        self.group_id = group_id
        self.connections = connections
        self.metadata = metadata
        self.stats = stats
        self.task: asyncio.Task[None] | None = None
        self.errors: list[GroupError] = []  # fatal group errors, raised by the next poll
        self._spawn = spawn
        self._any_connection = any_connection
        self._on_event = on_event
        self._waiters: dict[int, asyncio.Future[Any]] = {}  # commit / committed request ids -> their callers
        self._wake = asyncio.Event()  # (binds to the running loop on first use, not here)

    def start(self) -> None:
        self.task = self._spawn(self._drive())

    def wake(self) -> None:
        """Run the member soon: something it should know or send has changed."""
        self._wake.set()

    def wait_for(self, request_id: int) -> asyncio.Future[Any]:
        """A future for the outcome of the member's request ``request_id`` (a commit or an OffsetFetch)."""
        future = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = future
        self._wake.set()
        return future

    def fail_waiters(self, error: BaseException) -> None:
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(error)
        self._waiters.clear()

    async def _drive(self) -> None:
        """Send what the member asks, hand it the answers, act on its events."""
        member = self.member
        while not member.closed:
            self._wake.clear()
            now = _now_ms()
            for request in member.poll(now):
                self._spawn(self._send(request))
            events = member.drain_events()
            for event in events:
                self._handle(event)
            counts: dict[str, int | None] = {}
            for topic in member.metadata_topics:
                partitions = self.metadata.cluster.partitions_for(topic)
                counts[topic] = len(partitions) if partitions else None
            if counts:
                member.update_metadata(counts, now)
                if self.metadata.add_topics(member.metadata_topics):
                    self.metadata.maybe_refresh()
            if member.closed:
                break
            if events:
                continue  # taking events may have let a JoinGroup or LeaveGroup go out
            timeout = member.timeout_ms(_now_ms())
            await wait_event(self._wake, None if timeout is None else max(timeout, 1) / 1000)

    async def _send(self, request: OutgoingRequest) -> None:
        member = self.member
        try:
            if request.destination is None:
                connection = await self._any_connection()
            else:
                coordinator = request.destination
                self.connections.brokers[coordinator.node_id] = (coordinator.host, coordinator.port)
                connection = await self.connections.connection(coordinator.node_id, COORDINATOR_ROLE)
            response = await connection.request(request.body, request.version, timeout_ms=request.timeout_ms)
        except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
            member.handle_failure(request, _now_ms(), str(error))
        else:
            member.handle_response(request, response, _now_ms())
            if request.api_key == ApiKey.OFFSET_COMMIT:  # (the commit counter)
                self.stats["commit-total"] += 1
        # Act on what the answer changed before anything else runs: a revocation must take its partitions
        # away before the application can poll records past the positions committed for them.
        for event in member.drain_events():
            self._handle(event)
        self._wake.set()

    def _handle(self, event: object) -> None:
        if isinstance(event, CommittedOffsets):
            waiter = self._waiters.pop(event.request_id, None) if event.request_id is not None else None
            if waiter is not None and not waiter.done():
                if event.error is not None:
                    waiter.set_exception(event.error)
                else:
                    waiter.set_result(event.offsets)
        elif isinstance(event, CommitCompleted):
            waiter = self._waiters.pop(event.request_id, None)
            if waiter is not None and not waiter.done():
                if event.error is not None:
                    waiter.set_exception(event.error)
                else:
                    waiter.set_result(event.offsets)
            elif event.error is not None and event.auto:
                log.warning("auto-commit failed: %s", event.error)
        elif isinstance(event, GroupFailure):
            if event.fatal:
                self.errors.append(event.error)
            log.warning("consumer group %r: %s", self.group_id, event.error)
        self._on_event(event)

"""ShareDriver: a share consumer's ShareMember and ShareFetcher (``kafkawire.client.core.share``, sans I/O)
run over broker connections.

* The member runs in a task of its own: FindCoordinator to any broker, then ShareGroupHeartbeat to the
  coordinator over a connection of its own (``COORDINATOR_ROLE``), so that heartbeats never wait behind
  share fetches or their memory. A new assignment goes to the fetcher at once.
* ShareFetch travels on a fetch connection per leader (``FETCH_ROLE``), whose responses are charged to
  the memory pool (KIP-81) before they are read; ShareAcknowledge goes on the same connection (one share
  session per broker, one request at a time), uncharged. A leader reaches the fetcher once its fetch
  connection is up.
* Every answer wakes the consumer (``wake``), which sends what is due next from its calls (``pump``).
"""
from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, cast

from kafkawire.messages import (
    FindCoordinatorRequest, FindCoordinatorResponse, ShareAcknowledgeRequest, ShareAcknowledgeResponse,
    ShareFetchResponse, ShareGroupHeartbeatResponse,
)

from ..core.cluster_metadata import ClusterMetadata
from ..core.share.config import ShareConsumerConfig
from ..core.share.fetcher import RENEW_VERSION, ShareFetcher, ShareRequest
from ..core.share.membership import ShareMember
from ..core.topic_partition import TopicPartition
from ..errors import IncompatibleBrokerError, KafkaConnectionError, KafkaError
from .connection import COORDINATOR_ROLE, FETCH_ROLE, Reply
from .connection_manager import ConnectionManager
from .metadata_refresh import Metadata
from .waiting import wait_event

__all__ = ["ShareDriver"]

log = logging.getLogger(__name__)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class ShareDriver:
    """See the module docstring. ``spawn`` runs a coroutine as one of the consumer's tasks; ``wake``
    wakes the consumer's waits."""

    def __init__(self, config: ShareConsumerConfig, member: ShareMember, fetcher: ShareFetcher,
                 connections: ConnectionManager, metadata: Metadata, stats: dict[str, int], *,
                 spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]], wake: Callable[[], None]):
        self.config = config
        self.member = member
        self.fetcher = fetcher
        self.connections = connections
        self.metadata = metadata
        self.stats = stats
        self.closed = False
        self.heartbeats: asyncio.Task[None] | None = None
        self._spawn = spawn
        self._wake = wake
        self._member_wake = asyncio.Event()  # (binds to the running loop on first use)
        self._connecting: set[int] = set()

    # ---- the member ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.heartbeats = self._spawn(self._run_member())

    def wake_member(self) -> None:
        self._member_wake.set()

    async def _run_member(self) -> None:
        member = self.member
        while not self.closed:
            self._member_wake.clear()
            now = _now_ms()
            kind = member.next_request(now)
            if kind is not None:
                self._spawn(self._send_member(kind))
            timeout = member.timeout_ms(_now_ms())
            await wait_event(self._member_wake, None if timeout is None else max(timeout, 1) / 1000)

    async def _send_member(self, kind: str) -> None:
        member = self.member
        try:
            if kind == "find":
                connection = await self.metadata.any_connection()
                version = connection.api_version(FindCoordinatorRequest.API_KEY)
                response = await connection.send(member.find_coordinator_request(version), version)
                member.handle_find_coordinator(cast("FindCoordinatorResponse", response), version, _now_ms())
            else:
                coordinator = member.coordinator
                assert coordinator is not None  # (a heartbeat is asked for only once it is known)
                self.connections.brokers.setdefault(coordinator.node_id, (coordinator.host, coordinator.port))
                connection = await self.connections.connection(coordinator.node_id, COORDINATOR_ROLE)
                request = member.heartbeat_request()
                response = await connection.send(request)
                member.handle_heartbeat(request, cast("ShareGroupHeartbeatResponse", response), _now_ms())
                self.stats["heartbeat-total"] += 1
        except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
            member.handle_failure(kind, _now_ms(), str(error))
        if member.assignment_changed:
            member.assignment_changed = False
            self.fetcher.set_assignment(member.assignment)
            self.metadata.set_topics(set(member.subscription) | self.fetcher.topics())
            self.update_leaders(self.metadata.cluster)
        self._member_wake.set()
        self._wake()

    # ---- leaders and fetch connections ---------------------------------------------------------------
    def update_leaders(self, cluster: ClusterMetadata) -> None:
        """Give the fetcher the topic ids and the leaders whose fetch connection is up; connect to the others,
        and to the leaders of the subscribed topics before the group assigns them (a share group may give
        every member every partition), so that the connection is up when the assignment comes."""
        self.fetcher.set_topic_ids(cluster.topic_ids())
        for node in set(cluster.leaders(self.member.subscription).values()):
            if node is not None and self.connections.get_ready(node, FETCH_ROLE) is None:
                self._connect(node)
        leaders: dict[TopicPartition, int | None] = {}
        for tp in self.fetcher.assignment() | self.fetcher.pending_partitions():
            node = cluster.leader(tp)
            if node is not None and self.connections.get_ready(node, FETCH_ROLE) is None:
                self._connect(node)
                node = None
            leaders[tp] = node
        self.fetcher.update_leaders(leaders)

    def _connect(self, node: int) -> None:
        if node in self._connecting or self.closed:
            return
        self._connecting.add(node)
        self._spawn(self._open_connection(node))

    async def _open_connection(self, node: int) -> None:
        try:
            connection = await self.connections.connection(node, FETCH_ROLE)
            if connection.api_version(ShareAcknowledgeRequest.API_KEY) < RENEW_VERSION:
                self.fetcher.renew_supported = False
        except (KafkaConnectionError, KafkaError, IncompatibleBrokerError) as error:
            log.debug("share fetch connection to node %d failed: %s", node, error)
            self.metadata.request_update()
            return
        finally:
            self._connecting.discard(node)
        self.update_leaders(self.metadata.cluster)
        self._wake()

    # ---- share fetches and acknowledgements -----------------------------------------------------------
    def pump(self) -> None:
        """Send what is due: a metadata refresh, share fetches and acknowledgements. Never waits."""
        if self.closed:
            return
        if self.fetcher.metadata_refresh_needed:
            self.fetcher.metadata_refresh_needed = False
            self.metadata.request_update()
        self.metadata.maybe_refresh()
        self.send(self.fetcher.prepare_requests())

    def send(self, requests: list[ShareRequest]) -> list[asyncio.Future[Any]]:
        sent = []
        for request in requests:
            connection = self.connections.get_ready(request.node, FETCH_ROLE)
            if connection is None:
                self.fetcher.handle_failure(request, KafkaConnectionError(f"no connection to node {request.node}"))
                self._connect(request.node)
                continue
            try:
                version = connection.api_version(type(request.body).API_KEY)
            except IncompatibleBrokerError as error:
                self.fetcher.handle_failure(request, error)
                continue
            if request.is_fetch:
                self.stats["share-fetch-request-total"] += 1
                future = connection.request(request.body, version, charge_pool=True,
                                            timeout_ms=self.config.request_timeout_ms + self.config.fetch_max_wait_ms)
            else:
                self.stats["share-acknowledge-request-total"] += 1
                future = connection.request(request.body, version, timeout_ms=self.config.request_timeout_ms)
            future.add_done_callback(functools.partial(self._on_response, request))
            sent.append(future)
        return sent

    def _on_response(self, request: ShareRequest, done: asyncio.Future[Any]) -> None:
        fetcher = self.fetcher
        if done.cancelled() or done.exception() is not None:
            error = done.exception() if not done.cancelled() else KafkaConnectionError("request cancelled")
            log.debug("share request to node %d failed: %s", request.node, error)
            fetcher.handle_failure(request, cast("Exception", error))
        elif request.is_fetch:
            reply: Reply = done.result()
            self.stats["bytes-fetched-total"] += reply.size
            try:
                fetcher.handle_fetch_response(request, cast("ShareFetchResponse", reply.body), reply.lease)
            except ValueError as error:  # a response that does not fit the request
                log.warning("share fetch response from node %d rejected: %s", request.node, error)
                if reply.lease is not None:
                    reply.lease.release()
                fetcher.handle_failure(request, error)
        else:
            fetcher.handle_acknowledge_response(request, cast("ShareAcknowledgeResponse", done.result()))
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._member_wake.set()


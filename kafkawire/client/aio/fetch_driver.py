"""FetchDriver: the consumer's Fetcher run over fetch connections.

Fetches travel on a connection of their own per leader (``FETCH_ROLE``), which charges each response
to the consumer's memory pool (``buffer.memory``, KIP-81) before reading its body and stops reading
while the pool is exhausted; metadata, ListOffsets and group traffic use other connections and so never
wait for fetch memory. A leader reaches the Fetcher once its fetch connection is up, with the Fetch
version negotiated on it.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

from kafkawire.messages import FetchRequest

from ..core.cluster_metadata import METADATA_REFRESH_ERRORS, ClusterMetadata
from ..core.consumer.config import ConsumerConfig
from ..core.consumer.fetcher import FETCH_VERSION_MIN, Fetcher, Leader
from ..core.topic_partition import TopicPartition
from ..errors import KafkaConnectionError, KafkaError
from .connection import FETCH_ROLE, Reply
from .connection_manager import ConnectionManager
from .metadata_refresh import Metadata

if TYPE_CHECKING:
    from kafkawire.messages import FetchResponse

__all__ = ["FetchDriver"]

log = logging.getLogger(__name__)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class FetchDriver:
    """Sends the Fetcher's requests and feeds it their answers. ``spawn`` runs a coroutine as one of the
    consumer's tasks; ``wake`` wakes the consumer's poll; ``connected`` is called once a fetch
    connection is up (the consumer then hands the Fetcher its leaders again and sends what is due)."""

    def __init__(self, fetcher: Fetcher, config: ConsumerConfig, connections: ConnectionManager, metadata: Metadata,
                 stats: dict[str, int], *, spawn: Callable[[Coroutine[Any, Any, None]], object],
                 wake: Callable[[], None], connected: Callable[[], None]):
        self.fetcher = fetcher
        self.config = config
        self.connections = connections
        self.metadata = metadata
        self.stats = stats
        self.closed = False
        self._spawn = spawn
        self._wake = wake
        self._connected = connected
        self._connecting: set[int] = set()

    @property
    def connecting(self) -> bool:
        """A fetch connection is being opened (its leaders are not the Fetcher's yet)."""
        return bool(self._connecting)

    def update_leaders(self, cluster: ClusterMetadata) -> None:
        """Give the Fetcher the leaders whose fetch connection is up; connect to the others first."""
        leaders: dict[TopicPartition, Leader | None] = {}
        for tp in self.fetcher.assignment():
            node = cluster.leader(tp)
            if node is None:
                leaders[tp] = None
            elif self.connections.get_ready(node, FETCH_ROLE) is None:
                self._connect(node)
            else:
                info = cluster.partition(tp)
                leaders[tp] = Leader(node, info.leader_epoch if info is not None else -1)
        self.fetcher.update_metadata(leaders, cluster.topic_ids())

    def send(self, now: float) -> None:
        """Send the fetches the Fetcher wants now."""
        for node, (request, version) in self.fetcher.prepare_fetch_requests(now).items():
            connection = self.connections.get_ready(node, FETCH_ROLE)
            if connection is None:
                self.fetcher.handle_fetch_failure(node, now)
                self._connect(node)
                continue
            self.stats["fetch-request-total"] += 1
            future = connection.request(request, version, charge_pool=True,
                                        timeout_ms=self.config.request_timeout_ms + self.config.fetch_max_wait_ms)
            future.add_done_callback(self._response_callback(node, request, version))

    # ---- connections -----------------------------------------------------------------------------
    def _connect(self, node: int) -> None:
        if node in self._connecting or self.closed:
            return
        self._connecting.add(node)
        self._spawn(self._open_connection(node))

    async def _open_connection(self, node: int) -> None:
        try:
            connection = await self.connections.connection(node, FETCH_ROLE)
            self.fetcher.set_fetch_version(node, connection.api_version(FetchRequest.API_KEY, FETCH_VERSION_MIN))
        except (KafkaConnectionError, KafkaError) as error:
            log.debug("fetch connection to node %d failed: %s", node, error)
            self.metadata.request_update()
            return
        finally:
            self._connecting.discard(node)
        self._connected()

    # ---- responses -------------------------------------------------------------------------------
    def _response_callback(self, node: int, request: FetchRequest,
                           version: int) -> Callable[[asyncio.Future[Any]], None]:
        return lambda done: self._on_response(node, request, version, done)

    def _on_response(self, node: int, request: FetchRequest, version: int, done: asyncio.Future[Any]) -> None:
        now = _now_ms()
        if done.cancelled() or done.exception() is not None:
            self.stats["fetch-error-total"] += 1
            if not done.cancelled():
                log.debug("fetch from node %d failed: %s", node, done.exception())
            self.fetcher.handle_fetch_failure(node, now)
            if not self.closed:
                self.metadata.request_update()
                self._wake()
            return
        reply: Reply = done.result()
        if self.closed:
            if reply.lease is not None:
                reply.lease.release()
            return
        self.stats["fetch-response-total"] += 1
        self.stats["bytes-fetched-total"] += reply.size
        try:
            outcome = self.fetcher.handle_fetch_response(node, request, cast("FetchResponse", reply.body), version,
                                                         reply.size, now, lease=reply.lease)
        except ValueError as error:  # a response that does not fit the request: drop it, fetch again
            log.warning("fetch response from node %d rejected: %s", node, error)
            if reply.lease is not None:
                reply.lease.release()
            self.fetcher.handle_fetch_failure(node, now)
            return
        if outcome.errors or outcome.ignored:
            self.stats["fetch-error-total"] += 1
            if any(code in METADATA_REFRESH_ERRORS for code in outcome.errors.values()):
                self.metadata.request_update()
        # The next fetch goes out from poll, once it has drained what it could: sent from here, it
        # would leave out the partitions just buffered and could park at the broker for
        # fetch.max.wait.ms while they are drained (Kafka sends fetches from poll for the same reason).
        self._wake()

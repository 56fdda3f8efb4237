"""The broker's network side: an asyncio server speaking Kafka's framing, one request at a time per
connection (as Kafka mutes a channel until its response is sent), so responses keep request order.

Responses are written as the encoder's pieces: fetched log bytes (``FileRecords``) go from the page
cache to the socket with sendfile(2), everything else in one write per run of small pieces.

A request the broker cannot read (an unknown API, a version it does not serve, a malformed body,
an oversized frame) closes the connection, as Kafka does; the one exception is an ApiVersions
request of a version too new, answered with a v0 UNSUPPORTED_VERSION response naming the versions
served (KIP-511) so the client can retry. A handler that fails answers with UNKNOWN_SERVER_ERROR
(``error_responses``). Kafka's limits guard the rest: ``max.connections`` and
``max.connections.per.ip`` (``connection_limits``), ``queued.max.request.bytes`` (``request_memory``),
``socket.request.max.bytes`` and ``connections.max.idle.ms``.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from .. import messages as m
from ..error_codes import ErrorCode
from ..errors import DecodeError
from ..framing import FrameBuffer, FrameTooLarge, encode_response_parts, peek_request, read_request
from .config import BrokerConfig
from .connection_limits import ConnectionLimits, descriptor_budget
from .error_responses import error_response
from .fetch_encoder import EncodedFetchResponse
from .groups import GroupCoordinator
from .handlers import Handlers
from .apis.produce import CLOSE_CONNECTION
from .request_memory import RequestMemory
from .sending import send_parts
from .storage import FileRecords
from .storage.descriptors import DescriptorCache
from .storage.remote import describe_closed_segment
from .tap import WireTap
from .topics import TopicManager

if TYPE_CHECKING:
    from ..codec.base import Bytes

__all__ = ["Broker"]

log = logging.getLogger(__name__)

_API_VERSIONS = 18
_READ_SIZE = 1 << 16
_RETENTION_SLICE = 16  # partitions whose retention runs between two turns of the loop


class Broker:
    """A single-node Kafka broker. Use as ``async with Broker(data_dir=..., port=0) as broker:``;
    ``broker.port`` is the port bound and ``broker.bootstrap`` the address for clients."""

    def __init__(self, config: BrokerConfig | None = None, **settings: Any) -> None:
        self.config = config if config is not None else BrokerConfig(**settings)
        connection_descriptors, file_descriptors = descriptor_budget()
        self.descriptors = DescriptorCache(max(file_descriptors // 3, 16))  # segments hold up to 3 each
        self.topics = TopicManager(self.config, self.descriptors)
        self.groups = GroupCoordinator(self.config.data_dir / "__consumer_offsets",
                                       initial_rebalance_delay_ms=self.config.group_initial_rebalance_delay_ms,
                                       partition_exists=lambda topic, p: self.topics.log(topic, p) is not None)
        self.handlers: Handlers | None = None
        self.port: int | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[asyncio.Task[None], _Connection] = {}
        self._retention: asyncio.TimerHandle | None = None
        self._idle_sweeper: asyncio.Task[None] | None = None
        self.limits = ConnectionLimits(self.config.max_connections, self.config.connection_limit_for,
                                       connection_descriptors)
        self.memory = RequestMemory(self.config.queued_max_request_bytes)
        self.tap: WireTap | None = None  # records every byte read and written (config.tap_path)

    @property
    def bootstrap(self) -> str:
        return f"{self.config.advertised}:{self.port}"

    async def start(self) -> None:
        if self.config.tap_path is not None and self.tap is None:
            self.tap = WireTap(self.config.tap_path)
        self.descriptors.bind_to_current_thread()  # the loop's: only it closes segment files
        self.topics.load()
        await self.groups.start()
        self._server = await asyncio.start_server(self._serve, self.config.host, self.config.port)
        self.port = self._server.sockets[0].getsockname()[1]
        self.handlers = Handlers(self.config, self.topics, self.groups, self.port)
        self._schedule_retention()
        self._idle_sweeper = asyncio.get_running_loop().create_task(self._close_idle_connections())
        log.info("kafkawire broker listening on %s", self.bootstrap)

    async def close(self) -> None:
        if self._retention is not None:
            self._retention.cancel()
        if self._idle_sweeper is not None:
            self._idle_sweeper.cancel()
        if self._server is not None:
            self._server.close()
            for connection in self._connections.values():
                connection.writer.close()  # each connection's read ends, and its task with it
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
        if self.handlers is not None:
            self.handlers.close()
        await self.groups.close()
        self.topics.close()
        if self.tap is not None:
            self.tap.close()

    async def __aenter__(self) -> "Broker":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def serve_forever(self) -> None:
        if self._server is None:
            raise RuntimeError("the broker is not started")
        await self._server.serve_forever()

    # ---- retention ------------------------------------------------------------------------------
    def _schedule_retention(self) -> None:
        loop = asyncio.get_running_loop()
        self._retention = loop.call_later(self.config.retention_check_interval_ms / 1000,
                                          lambda: loop.create_task(self._apply_retention()))

    async def _apply_retention(self) -> None:
        """Retention over every partition, a few at a time: with thousands of partitions one pass
        would otherwise hold the loop (it stays on the loop, which owns the segments' files)."""
        now = time.time_ns() // 1_000_000
        for count, (topic, index, partition_log) in enumerate(list(self.topics.all_logs()), 1):
            try:
                remote = partition_log.remote
                if remote is not None:
                    for segment in partition_log.segments_to_copy():  # to the remote tier, the files off the loop
                        closed = describe_closed_segment(segment)
                        copied = await asyncio.to_thread(remote.copy_files, partition_log.name, closed)
                        partition_log.add_remote_segment(copied)
                partition_log.apply_retention(now, copy_to_remote=False)
            except OSError:
                log.exception("retention of %s-%d failed", topic.name, index)
            if count % _RETENTION_SLICE == 0:
                await asyncio.sleep(0)
        self._schedule_retention()

    # ---- connections ----------------------------------------------------------------------------
    async def _close_idle_connections(self) -> None:
        """connections.max.idle.ms: close connections with no bytes read or written for that long (a
        connection whose request is being handled, say a parked fetch, is not idle)."""
        idle_s = self.config.connections_max_idle_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.01), 30.0))
            deadline = loop.time() - idle_s
            for task, connection in list(self._connections.items()):
                if not connection.busy and connection.last_active < deadline:
                    log.debug("closing connection from %s: idle for %.0f ms", connection.host,
                              (loop.time() - connection.last_active) * 1000)
                    connection.closing = True
                    connection.writer.close()
                    self.memory.wake()  # it may be waiting for request memory rather than reading

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        host = peer[0] if peer else ""
        if not self.limits.admit(host):
            writer.close()
            return
        task = cast("asyncio.Task[None]", asyncio.current_task())  # (a connection's handler runs in its task)
        loop = asyncio.get_running_loop()
        connection = _Connection(host, writer, loop.time())
        self._connections[task] = connection
        frames = FrameBuffer(self.config.max_request_bytes)
        memory = self.memory
        taken = 0  # request memory taken for the frame at the head of the buffer (whole or partial)
        tap = self.tap
        client_closed = aborted = False  # how the connection ended, for the tap
        if tap is not None:
            conn = tap.connection_opened(peer, writer.get_extra_info("sockname"), time.time_ns())
        try:
            while True:
                pending = frames.pending_size
                if pending is not None and not taken:  # a request started: take its size from the pool
                    while memory.must_wait(pending + 4):
                        await memory.wait()
                        if connection.closing:
                            return
                    taken = pending + 4
                    memory.take(taken)
                data = await reader.read(_READ_SIZE)
                if not data:  # the client closed, unless the broker's own shutdown ended the read
                    client_closed = self._server is not None and self._server.is_serving()
                    return
                connection.last_active = loop.time()
                if tap is not None:
                    tap.client_sent(conn, data, time.time_ns())
                frames.feed(data)
                while (frame := frames.next_frame()) is not None:
                    if not taken:  # it came whole in one read
                        taken = len(frame) + 4
                        memory.take(taken)
                    connection.busy = True
                    try:
                        response = await self._respond(frame, host)
                    finally:
                        connection.busy = False
                        memory.give_back(taken)  # answered: its bytes are free (Kafka frees them then)
                        taken = 0
                    if response is False:
                        return  # closing: the request could not be read, or Kafka closes here
                    if response is None:
                        if len(frames):
                            await asyncio.sleep(0)
                        continue
                    if tap is not None:  # the tap needs the bytes themselves: send them as bytes too
                        response = [b"".join(p.read() if isinstance(p, FileRecords) else p for p in response)]
                        tap.broker_sent(conn, response[0], time.time_ns())
                    await send_parts(writer, response)
                    connection.last_active = loop.time()
                    if len(frames):  # pipelined requests: let other connections in between them
                        await asyncio.sleep(0)
        except FrameTooLarge as error:
            log.warning("closing connection from %s: %s", host, error)
        except (ConnectionError, asyncio.IncompleteReadError):
            client_closed = aborted = True
        finally:
            memory.give_back(taken)
            self.limits.release(host)
            self._connections.pop(task, None)
            writer.close()
            if tap is not None:
                tap.connection_closed(conn, time.time_ns(), aborted=aborted, by_client=client_closed)

    async def _respond(self, frame: bytes, host: str) -> Sequence[Bytes | FileRecords] | None | Literal[False]:
        """The response frame for one request frame, as pieces; None for no response; False to close."""
        try:
            api_key, version, correlation_id = peek_request(frame)
        except DecodeError as error:
            log.warning("closing connection from %s: %s", host, error)
            return False
        served = self.handlers.versions.get(api_key) if self.handlers is not None else None
        if api_key == _API_VERSIONS and served is not None and version > served[1]:
            body = m.ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
                m.ApiVersionsResponse.ApiVersion(api_key=_API_VERSIONS, min_version=served[0], max_version=served[1])])
            return encode_response_parts(_API_VERSIONS, 0, correlation_id, body)
        if served is None or not served[0] <= version <= served[1]:
            log.warning("closing connection from %s: API key %d version %d is not served", host, api_key, version)
            return False
        try:
            header, request, trailing = read_request(frame)
        except DecodeError as error:
            log.warning("closing connection from %s: bad request: %s", host, error)
            return False
        if trailing:  # served, as Kafka serves them (librdkafka's all-topics Metadata has 3 extra bytes)
            log.debug("%d bytes after the body of API key %d version %d from %s", trailing, api_key, version, host)
        try:
            if self.handlers is None:  # (set by start, before any connection is served)
                raise RuntimeError("the broker is not started")
            response = await self.handlers.handle(api_key, request, version, header.client_id, host)
        except Exception as error:
            log.exception("handling API key %d version %d from %s failed", api_key, version, host)
            response = error_response(api_key, request, version, ErrorCode.UNKNOWN_SERVER_ERROR, str(error))
            if response is None or (isinstance(request, m.ProduceRequest) and request.acks == 0):
                return False  # nothing to answer with: Kafka closes the connection
        if response is None:
            return None
        if response is CLOSE_CONNECTION:
            return False
        if type(response) is EncodedFetchResponse:
            return response.frame(correlation_id)
        return encode_response_parts(api_key, version, correlation_id, response)


class _Connection:
    """What the broker tracks of one open connection."""

    __slots__ = ("host", "writer", "last_active", "busy", "closing")

    def __init__(self, host: str, writer: asyncio.StreamWriter, now: float):
        self.host = host
        self.writer = writer
        self.last_active = now
        self.busy = False  # a request of this connection is being handled
        self.closing = False  # closed by the broker (idle) while it may be waiting for request memory

"""The broker's network side: an asyncio server speaking Kafka's framing, one request at a time per
connection (as Kafka mutes a channel until its response is sent), so responses keep request order.

Responses are written as the encoder's pieces: fetched log bytes (``FileRecords``) go from the page
cache to the socket with sendfile(2), everything else in one write per run of small pieces.

A request the broker cannot read (an unknown API, a version it does not serve, a malformed body,
an oversized frame) closes the connection, as Kafka does; the one exception is an ApiVersions
request of a version too new, answered with a v0 UNSUPPORTED_VERSION response naming the versions
served (KIP-511) so the client can retry.
"""
from __future__ import annotations

import asyncio
import logging
import time

from .. import messages as m
from ..error_codes import ErrorCode
from ..errors import DecodeError
from ..framing import FrameBuffer, FrameTooLarge, encode_response_parts, peek_request, read_request
from .config import BrokerConfig
from .fetch_response import EncodedFetchResponse
from .groups import GroupCoordinator
from .handlers import Handlers
from .sending import send_parts
from .storage import FileRecords
from .tap import WireTap
from .topics import TopicManager

__all__ = ["Broker"]

log = logging.getLogger(__name__)

_API_VERSIONS = 18
_READ_SIZE = 1 << 16


class Broker:
    """A single-node Kafka broker. Use as ``async with Broker(data_dir=..., port=0) as broker:``;
    ``broker.port`` is the port bound and ``broker.bootstrap`` the address for clients."""

    def __init__(self, config: BrokerConfig | None = None, **settings):
        self.config = config if config is not None else BrokerConfig(**settings)
        self.topics = TopicManager(self.config)
        self.groups = GroupCoordinator(self.config.data_dir / "__consumer_offsets",
                                       initial_rebalance_delay_ms=self.config.group_initial_rebalance_delay_ms,
                                       partition_exists=lambda topic, p: self.topics.log(topic, p) is not None)
        self.handlers: Handlers | None = None
        self.port: int | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self._retention: asyncio.TimerHandle | None = None
        self.tap: WireTap | None = None  # records every byte read and written (config.tap_path)

    @property
    def bootstrap(self) -> str:
        return f"{self.config.advertised}:{self.port}"

    async def start(self) -> None:
        if self.config.tap_path is not None and self.tap is None:
            self.tap = WireTap(self.config.tap_path)
        self.topics.load()
        await self.groups.start()
        self._server = await asyncio.start_server(self._serve, self.config.host, self.config.port)
        self.port = self._server.sockets[0].getsockname()[1]
        self.handlers = Handlers(self.config, self.topics, self.groups, self.port)
        self._schedule_retention()
        log.info("kafkawire broker listening on %s", self.bootstrap)

    async def close(self) -> None:
        if self._retention is not None:
            self._retention.cancel()
        if self._server is not None:
            self._server.close()
            for writer in self._connections.values():
                writer.close()  # each connection's read ends, and its task with it
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
        await self.groups.close()
        self.topics.close()
        if self.tap is not None:
            self.tap.close()

    async def __aenter__(self) -> "Broker":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def serve_forever(self) -> None:
        await self._server.serve_forever()

    # ---- retention ------------------------------------------------------------------------------
    def _schedule_retention(self) -> None:
        loop = asyncio.get_running_loop()
        self._retention = loop.call_later(self.config.retention_check_interval_ms / 1000, self._apply_retention)

    def _apply_retention(self) -> None:
        now = time.time_ns() // 1_000_000
        for topic, index, partition_log in self.topics.all_logs():
            try:
                partition_log.apply_retention(now)
            except OSError:
                log.exception("retention of %s-%d failed", topic.name, index)
        self._schedule_retention()

    # ---- connections ----------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections[task] = writer
        peer = writer.get_extra_info("peername")
        host = peer[0] if peer else ""
        frames = FrameBuffer(self.config.max_request_bytes)
        tap = self.tap
        client_closed = aborted = False  # how the connection ended, for the tap
        if tap is not None:
            conn = tap.connection_opened(peer, writer.get_extra_info("sockname"), time.time_ns())
        try:
            while True:
                data = await reader.read(_READ_SIZE)
                if not data:  # the client closed, unless the broker's own shutdown ended the read
                    client_closed = self._server is not None and self._server.is_serving()
                    return
                if tap is not None:
                    tap.client_sent(conn, data, time.time_ns())
                frames.feed(data)
                while (frame := frames.next_frame()) is not None:
                    response = await self._respond(frame, host)
                    if response is False:
                        return  # closing: the request could not be read
                    if response is None:
                        continue
                    if tap is not None:  # the tap needs the bytes themselves: send them as bytes too
                        response = [b"".join(p.read() if type(p) is FileRecords else p for p in response)]
                        tap.broker_sent(conn, response[0], time.time_ns())
                    await send_parts(writer, response)
        except FrameTooLarge as error:
            log.warning("closing connection from %s: %s", host, error)
        except (ConnectionError, asyncio.IncompleteReadError):
            client_closed = aborted = True
        finally:
            self._connections.pop(task, None)
            writer.close()
            if tap is not None:
                tap.connection_closed(conn, time.time_ns(), aborted=aborted, by_client=client_closed)

    async def _respond(self, frame: bytes, host: str) -> list | None | bool:
        """The response frame for one request frame, as pieces; None for no response; False to close."""
        try:
            api_key, version, correlation_id = peek_request(frame)
        except DecodeError as error:
            log.warning("closing connection from %s: %s", host, error)
            return False
        served = self.handlers.versions.get(api_key)
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
            response = await self.handlers.handle(api_key, request, version, header.client_id, host)
        except Exception:
            log.exception("handling API key %d version %d from %s failed; closing the connection",
                          api_key, version, host)
            return False
        if response is None:
            return None
        if type(response) is EncodedFetchResponse:
            return response.frame(correlation_id)
        return encode_response_parts(api_key, version, correlation_id, response)

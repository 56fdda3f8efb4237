"""A fake broker that answers ApiVersions and Metadata and nothing else: the broker that stops
answering, for testing that a client's shutdown is bounded whatever the broker fails to do.

It runs on a thread of its own (so blocking clients can be tested against it too), offers every API
version kafkawire knows, and describes itself as the only broker, leading every partition of every
topic asked for. ``go_silent()`` stops even those answers; requests are read and never answered.
"""
from __future__ import annotations

import asyncio
import threading

from kafkawire.framing import FrameBuffer, decode_request, encode_response, peek_request
from kafkawire.messages import ApiVersionsResponse, MetadataResponse, apis

_API_VERSIONS, _METADATA = 18, 3


class SilentBroker:
    def __init__(self, partitions: int = 2):
        self.partitions = partitions
        self.silent = False
        self.unanswered: list[str] = []  # names of the requests left unanswered, in arrival order
        self.port: int | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="silent-broker", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> SilentBroker:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def go_silent(self) -> None:
        """Answer nothing from now on, not even ApiVersions and Metadata."""
        self.silent = True

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        frames = FrameBuffer()
        try:
            while data := await reader.read(1 << 16):
                frames.feed(data)
                for frame in frames.frames():
                    key, version, correlation_id = peek_request(frame)
                    _, body = decode_request(frame)
                    answer = None if self.silent else self._answer(key, body)
                    if answer is None:
                        self.unanswered.append(body.NAME)
                    else:
                        writer.write(encode_response(key, version, correlation_id, answer))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.transport.abort()

    def _answer(self, key: int, body):
        if key == _API_VERSIONS:
            return ApiVersionsResponse(api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=info.key, min_version=info.min_version,
                                               max_version=info.max_version) for info in apis()])
        if key == _METADATA:
            topics = [MetadataResponse.MetadataResponseTopic(name=topic.name, partitions=[
                MetadataResponse.MetadataResponsePartition(partition_index=p, leader_id=0, leader_epoch=0,
                                                           replica_nodes=[0], isr_nodes=[0])
                for p in range(self.partitions)]) for topic in body.topics or ()]
            return MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(
                node_id=0, host="127.0.0.1", port=self.port)], cluster_id="silent", controller_id=0, topics=topics)
        return None

"""FrameStream, the reading side of a client connection, driven as a transport drives a buffered
protocol: data lands where ``get_buffer`` says, a large read is filled in place, reading stops while
the read-ahead is full and nobody reads, and the peer's end or failure reaches the reader."""
from __future__ import annotations

import asyncio

import pytest

from kafkawire.client.aio.frame_stream import FrameStream


class FakeTransport(asyncio.Transport):
    """Receives what a peer sends the way a transport does: into the protocol's buffers, unless paused."""

    def __init__(self, protocol: FrameStream):
        super().__init__()
        self.protocol = protocol
        self.paused = False
        self.backlog = b""  # what the kernel holds while reading is paused
        self.empty_buffers = 0

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False
        self.deliver(b"")

    def deliver(self, data: bytes, chunk: int = 1 << 20) -> None:
        self.backlog += data
        while self.backlog and not self.paused:
            buffer = self.protocol.get_buffer(-1)
            if len(buffer) == 0:
                self.empty_buffers += 1
                return
            n = min(len(buffer), len(self.backlog), chunk)
            buffer[:n] = self.backlog[:n]
            self.backlog = self.backlog[n:]
            self.protocol.buffer_updated(n)


def _stream(capacity: int = 16) -> tuple[FrameStream, FakeTransport]:
    stream = FrameStream(capacity)
    transport = FakeTransport(stream)
    stream.connection_made(transport)
    return stream, transport


def test_small_reads_come_from_the_read_ahead_and_large_ones_are_filled_in_place():
    async def run():
        stream, transport = _stream(16)
        transport.deliver(b"\x00\x00\x00\x05hello" + b"\x00\x00\x00\x28")
        assert await stream.read_exactly(4) == b"\x00\x00\x00\x05"
        assert await stream.read_exactly(5) == b"hello"
        assert await stream.read_exactly(4) == b"\x00\x00\x00\x28"
        body = asyncio.ensure_future(stream.read_exactly(40))
        await asyncio.sleep(0)
        for i in range(4):  # the body arrives in pieces, straight into the reader's buffer
            transport.deliver(bytes([i]) * 10, chunk=7)
        frame = await body
        assert isinstance(frame, bytearray) and frame == b"".join(bytes([i]) * 10 for i in range(4))
        assert transport.empty_buffers == 0
    asyncio.run(run())


def test_a_read_that_completes_leaves_what_follows_for_the_next_one():
    async def run():
        stream, transport = _stream(8)
        body = asyncio.ensure_future(stream.read_exactly(12))
        await asyncio.sleep(0)
        transport.deliver(b"A" * 12 + b"\x00\x00\x00\x02BC")  # all in one go, past the read's end
        assert await body == b"A" * 12
        assert transport.empty_buffers == 0
        assert await stream.read_exactly(4) == b"\x00\x00\x00\x02"
        assert await stream.read_exactly(2) == b"BC"
    asyncio.run(run())


def test_reading_stops_while_the_read_ahead_is_full_and_goes_on_when_read():
    async def run():
        stream, transport = _stream(8)
        transport.deliver(b"x" * 20)  # nobody reads (a consumer waiting for its memory pool)
        assert transport.paused and len(transport.backlog) == 12  # the rest stays in the kernel
        assert await stream.read_exactly(4) == b"xxxx"
        assert await stream.read_exactly(16) == b"x" * 16
        assert not transport.paused and not transport.backlog
    asyncio.run(run())


def test_the_peers_end_mid_read_is_an_incomplete_read():
    async def run():
        stream, transport = _stream(8)
        transport.deliver(b"\x00\x00\x00\x09abc")
        assert await stream.read_exactly(4) == b"\x00\x00\x00\x09"
        body = asyncio.ensure_future(stream.read_exactly(9))
        await asyncio.sleep(0)
        stream.eof_received()
        with pytest.raises(asyncio.IncompleteReadError) as raised:
            await body
        assert raised.value.partial == b"abc" and raised.value.expected == 9
    asyncio.run(run())


def test_a_transport_failure_reaches_the_reader():
    async def run():
        stream, _ = _stream(8)
        body = asyncio.ensure_future(stream.read_exactly(4))
        await asyncio.sleep(0)
        stream.connection_lost(ConnectionResetError("reset by peer"))
        with pytest.raises(ConnectionResetError):
            await body
        with pytest.raises(ConnectionResetError):  # and to every read after it
            await stream.read_exactly(4)
    asyncio.run(run())

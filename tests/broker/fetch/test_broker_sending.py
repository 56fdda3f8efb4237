"""send_parts: a response's pieces reach the socket whole and in order, whether the kernel takes them
at once (direct sendfile / write) or pushes back (the transport's way), and every file slice is closed."""
from __future__ import annotations

import asyncio
import os
import socket

import pytest

from kafkawire.broker.network.sending import send_parts
from kafkawire.broker.storage.file_records import FileRecords


def _slices(path, sizes):
    """A file of random bytes and FileRecords over consecutive slices of it: (slices, their bytes)."""
    blob = os.urandom(sum(sizes) + 100)
    path.write_bytes(blob)
    fd = os.open(path, os.O_RDONLY)
    try:
        slices, position = [], 50  # not at the start of the file: offsets must be honoured
        for size in sizes:
            slices.append(FileRecords(fd, position, size))
            position += size
    finally:
        os.close(fd)
    return slices, [blob[s.position:s.position + s.size] for s in slices]


async def _exchange(parts, *, prebuffer: bytes = b"", reader_delay: float = 0.0, rcvbuf: int | None = None) -> bytes:
    """Serve one connection that sends ``prebuffer`` through the transport, then ``parts`` with
    send_parts; return everything a (possibly slow, small-buffered) client read."""
    done = asyncio.Event()

    async def serve(reader, writer):
        if prebuffer:
            writer.write(prebuffer)  # may stay queued in the transport: send_parts must go after it
        await send_parts(writer, parts)
        writer.close()
        done.set()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    received = bytearray()
    while True:
        if reader_delay:
            await asyncio.sleep(reader_delay)
        chunk = await loop.sock_recv(sock, 1 << 16)
        if not chunk:
            break
        received += chunk
    sock.close()
    await done.wait()
    server.close()
    await server.wait_closed()
    return bytes(received)


def test_pieces_arrive_in_order_when_the_kernel_takes_them_at_once(tmp_path):
    slices, blobs = _slices(tmp_path / "seg", [1000, 70_000, 3])
    parts = [b"head", b"er", slices[0], b"mid", slices[1], slices[2], b"tail"]
    got = asyncio.run(_exchange(parts))
    assert got == b"header" + blobs[0] + b"mid" + blobs[1] + blobs[2] + b"tail"
    assert all(s.fileno() == -1 for s in slices)


def test_pieces_arrive_in_order_when_the_kernel_pushes_back(tmp_path, monkeypatch):
    # a slow reader with a small receive buffer: sendfile and write both hit a full socket, the
    # remainders go through the transport, and later pieces must wait for them
    transport_sendfiles = []
    original = asyncio.base_events.BaseEventLoop.sendfile

    async def counting(self, transport, file, offset=0, count=None, **kwargs):
        transport_sendfiles.append(count)
        return await original(self, transport, file, offset, count, **kwargs)

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "sendfile", counting)
    slices, blobs = _slices(tmp_path / "seg", [3 << 20, 5 << 20, 1 << 20])
    big = os.urandom(2 << 20)
    parts = [b"a" * 10, slices[0], big, slices[1], b"b" * 10, slices[2]]
    got = asyncio.run(_exchange(parts, reader_delay=0.0005, rcvbuf=64 << 10))
    assert got == b"a" * 10 + blobs[0] + big + blobs[1] + b"b" * 10 + blobs[2]
    assert all(s.fileno() == -1 for s in slices)
    assert transport_sendfiles, "the slow reader never made the kernel push back: the test proves less"


def test_bytes_already_queued_in_the_transport_go_first(tmp_path):
    slices, blobs = _slices(tmp_path / "seg", [1 << 20])
    queued = os.urandom(8 << 20)  # more than the socket takes at once: part of it stays in the transport
    got = asyncio.run(_exchange([b"x", slices[0]], prebuffer=queued, reader_delay=0.0005, rcvbuf=64 << 10))
    assert got == queued + b"x" + blobs[0]


@pytest.mark.parametrize("file_size, slice_size", [(100, 100), (3 << 20, 4 << 20)])
def test_a_slice_past_the_end_of_its_file_is_an_error_not_silence(tmp_path, file_size, slice_size):
    # small: the direct sendfile finds the end; large (slow reader): the transport's sendfile does
    path = tmp_path / "seg"
    path.write_bytes(b"z" * file_size)
    fd = os.open(path, os.O_RDONLY)
    short = FileRecords(fd, 50, slice_size)  # promises bytes beyond the end of the file
    os.close(fd)

    async def run():
        server_error = asyncio.get_running_loop().create_future()

        async def serve(reader, writer):
            try:
                await send_parts(writer, [short])
            except Exception as error:  # noqa: BLE001 - handed to the test
                server_error.set_result(error)
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        sock.connect(("127.0.0.1", server.sockets[0].getsockname()[1]))
        sock.setblocking(False)
        while not server_error.done():  # a slow reader, so the large case reaches the transport's path
            await asyncio.sleep(0.001)
            try:
                if not sock.recv(1 << 16):
                    break
            except BlockingIOError:
                pass
        error = await asyncio.wait_for(server_error, 10)
        sock.close()
        server.close()
        return error

    error = asyncio.run(run())
    assert isinstance(error, OSError) and "before the end of its slice" in str(error)
    assert short.fileno() == -1


@pytest.mark.parametrize("size", [0, 1])
def test_tiny_and_empty_slices(tmp_path, size):
    slices, blobs = _slices(tmp_path / "seg", [size])
    assert asyncio.run(_exchange([b"h", slices[0], b"t"])) == b"h" + blobs[0] + b"t"

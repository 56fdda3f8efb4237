"""Writing a response's pieces to a connection: runs of bytes as writes, file slices with sendfile(2).

``loop.sendfile`` alone would do, but it ends every slice by waiting for the socket to become
writable again (its completion runs from a writer callback) and starts every slice by waiting for
the transport's buffer to empty: a fetch of several partitions then stalls once per partition until
the client has drained most of the socket's send buffer, and the two sides take turns instead of
copying at the same time. Here, while the transport has nothing buffered, pieces go straight to the
socket: ``os.sendfile`` for slices, ``os.write`` for bytes, each taking whatever the send buffer
accepts. Only when the kernel pushes back does a piece's remainder go the transport's way
(``loop.sendfile`` for a slice, ``transport.write`` for bytes), which waits without blocking the
loop; order is kept because nothing is written directly again until the transport has emptied.

What waits for the client stays bounded, as Kafka mutes a connection's reads while its answer is
queued: runs of bytes are joined at most ``_CHUNK`` at a time, and the transport is given at most a
chunk beyond its high-water mark before the send waits for the client to read (the connection reads
no next request meanwhile). A large answer built from shared pieces (Metadata's cached topics) is
then never copied whole for a client that does not read it.
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..storage.file_records import FileRecords

if TYPE_CHECKING:
    from ...codec.base import Bytes

__all__ = ["send_parts"]

_SENDFILE = getattr(os, "sendfile", None)
_TLS_CHUNK = 1 << 20  # what a TLS connection reads of a file slice at a time
_CHUNK = 1 << 16  # bytes joined into one write, and handed to a backed-up transport at a time


async def send_parts(writer: asyncio.StreamWriter, parts: Sequence[Bytes | FileRecords], direct: bool = True) -> None:
    """Write ``parts`` (bytes-like and ``FileRecords``) in order, then wait for the transport to drain.
    Every ``FileRecords`` is closed, sent or not. ``direct=False`` (a TLS connection, whose every byte must
    go through the transport's encryption) never writes to the socket itself."""
    transport = writer.transport
    if transport.is_closing():
        for piece in parts:
            if isinstance(piece, FileRecords):
                piece.close()
        raise ConnectionResetError("the connection closed before its response was sent")
    if not direct:
        await _send_through_transport(writer, parts)
        return
    sock = transport.get_extra_info("socket")
    fd = sock.fileno() if sock is not None and _SENDFILE is not None else -1
    try:
        for piece in _coalesced(parts):
            direct = fd >= 0 and not transport.is_closing() and transport.get_write_buffer_size() == 0
            if isinstance(piece, FileRecords):
                sent = _sendfile_now(fd, piece) if direct else 0
                if sent < piece.size:
                    # the kernel's buffer is full: let asyncio wait for room (it empties the transport first)
                    rest = piece.size - sent
                    if await asyncio.get_running_loop().sendfile(transport, piece.file(), piece.position + sent,
                                                                 rest) < rest:
                        raise _short_file(piece)
            else:
                sent = _write_now(fd, piece) if direct else 0
                if sent < len(piece):
                    await _write_bounded(writer, memoryview(piece)[sent:])
    finally:
        for piece in parts:
            if type(piece) is FileRecords:
                piece.close()
    await writer.drain()


async def _send_through_transport(writer: asyncio.StreamWriter, parts: Sequence[Bytes | FileRecords]) -> None:
    """Every piece through the transport (TLS): file slices read from the page cache a chunk at a time,
    each written as soon as the transport has room (asyncio's own sendfile fallback reads each chunk on
    a worker thread and waits for the socket between chunks)."""
    try:
        for piece in _coalesced(parts):
            if not isinstance(piece, FileRecords):
                await _write_bounded(writer, memoryview(piece))
                continue
            fd, position, end = piece.fileno(), piece.position, piece.position + piece.size
            while position < end:
                chunk = os.pread(fd, min(_TLS_CHUNK, end - position), position)
                if not chunk:
                    raise _short_file(piece)
                writer.write(chunk)
                position += len(chunk)
                await writer.drain()  # returns at once while the transport is under its high-water mark
    finally:
        for piece in parts:
            if type(piece) is FileRecords:
                piece.close()
    await writer.drain()


async def _write_bounded(writer: asyncio.StreamWriter, data: memoryview) -> None:
    """``data`` to the transport a chunk at a time, each once the transport is under its high-water mark
    (``drain`` returns at once until then), so a client that does not read holds about a chunk more."""
    for start in range(0, len(data), _CHUNK):
        writer.write(data[start:start + _CHUNK])
        await writer.drain()


def _coalesced(parts: Sequence[Bytes | FileRecords]) -> Iterator[Bytes | FileRecords]:
    """The pieces with runs of bytes joined up to ``_CHUNK`` (one write instead of several small ones);
    a larger piece is passed on as it is."""
    run: list[Bytes] = []
    size = 0
    for part in parts:
        if isinstance(part, FileRecords) or size + len(part) > _CHUNK:
            if run:
                yield run[0] if len(run) == 1 else b"".join(run)
                run, size = [], 0
            if isinstance(part, FileRecords):
                yield part
                continue
        run.append(part)
        size += len(part)
    if run:
        yield run[0] if len(run) == 1 else b"".join(run)


def _sendfile_now(fd: int, piece: FileRecords) -> int:
    """Bytes of ``piece`` the socket took without waiting (``sendfile`` until it would block)."""
    sendfile = _SENDFILE
    assert sendfile is not None  # (fd is -1 without it, and nothing is sent this way)
    sent = 0
    while sent < piece.size:
        try:
            n = sendfile(fd, piece.fileno(), piece.position + sent, piece.size - sent)
        except (BlockingIOError, InterruptedError):
            break
        if n == 0:
            raise _short_file(piece)
        sent += n
    return sent


def _short_file(piece: FileRecords) -> OSError:
    return OSError(f"the file ended before the end of its slice (position {piece.position}, size {piece.size})")


def _write_now(fd: int, data) -> int:
    """Bytes of ``data`` the socket took without waiting."""
    try:
        return os.write(fd, data)
    except (BlockingIOError, InterruptedError):
        return 0

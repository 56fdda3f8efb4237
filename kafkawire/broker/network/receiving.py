"""Reading a connection's request frames with as few copies as the socket allows.

asyncio's StreamReader copies every byte three times before a frame exists (the transport's ``recv``
into fresh bytes, those bytes into the reader's buffer, that buffer into what ``read`` returns), and
reassembling frames from its chunks copied them twice more. ``FrameReceiver`` is the connection's
protocol instead: a ``BufferedProtocol``, so the transport (or TLS) reads straight into memory it
provides. Small frames and size prefixes land in a scratch buffer and are sliced out of it; a frame
larger than the scratch buffer gets a buffer of its own, the exact size, and the rest of it is read
into that directly (what the scratch buffer already held of it is copied over once). The frame handed
out is that buffer: the records in it are views, never copied again before the log write.

Reading follows the connection (Kafka mutes a channel while it handles a request): each ``receive``
allows one read, and the transport is paused again as soon as it has delivered, so what a client
sends while its request is handled stays in the socket's buffers, beyond one read into the scratch
buffer. A frame's body is read only after the connection asked for more (having taken the frame's
size from the request-memory pool, see ``connection``).

On a plain TCP connection (``read_directly``) that read is first tried straight from the socket: a
client that pipelines (librdkafka keeps up to max.in.flight requests unanswered) has the next request
waiting there by the time the answer is written, and reading it at once spares the transport's resume,
a turn of the loop and the pause. Only when the socket has nothing does ``receive`` wait for the loop.

It is still a ``StreamReaderProtocol``: the connection writes through the ``StreamWriter`` as before.
"""
from __future__ import annotations

import asyncio
import os
import struct

from ...framing import FrameTooLarge

__all__ = ["FrameReceiver", "SCRATCH_SIZE"]

SCRATCH_SIZE = 128 * 1024  # one read of pipelined small requests; larger frames get their own buffer
_SIZE = struct.Struct(">i")


class FrameReceiver(asyncio.StreamReaderProtocol, asyncio.BufferedProtocol):
    """A connection's protocol: complete frames from ``frame()``, more bytes with ``await receive()``."""

    def __init__(self, reader: asyncio.StreamReader, connected, max_frame: int):
        super().__init__(reader, connected)
        self.max_frame = max_frame
        self._scratch = bytearray(SCRATCH_SIZE)
        self._head = self._tail = 0  # the unread bytes of the scratch buffer
        self._frame: bytearray | None = None  # a large frame being read into a buffer of its own
        self._filled = 0  # bytes of it received
        self._received: asyncio.Future[None] | None = None  # the connection waiting in receive()
        self._delivered = False  # bytes came since the last receive()
        self._ended = False  # EOF or connection lost
        self._error: BaseException | None = None  # why the connection was lost, when it was not clean
        self._transport: asyncio.BaseTransport | None = None
        self._consumed = 0  # stream offset of the scratch buffer's start, for error messages
        self._fd = -1  # the socket, when reads may go straight to it (read_directly)

    # ---- the connection's side ------------------------------------------------------------------
    @property
    def pending_size(self) -> int | None:
        """The declared size of the frame being received (its prefix is in, not all of it), else None."""
        if self._frame is not None:
            return len(self._frame)
        if self._tail - self._head < 4:
            return None
        size = _SIZE.unpack_from(self._scratch, self._head)[0]
        return size if self._tail - self._head - 4 < size else None

    def buffered(self) -> int:
        """Bytes received and not yet handed out as frames."""
        return self._tail - self._head + self._filled

    def frame(self) -> bytearray | None:
        """The next complete frame (without its size prefix), else None; FrameTooLarge for a size prefix
        outside 0..max_frame (nothing of that frame is read beyond its prefix). The frame is the caller's:
        nothing else refers to its buffer."""
        large = self._frame
        if large is not None:
            if self._filled < len(large):
                return None
            self._frame, self._filled = None, 0
            return large
        head, available = self._head, self._tail - self._head
        if available < 4:
            return None
        size = _SIZE.unpack_from(self._scratch, head)[0]
        if size < 0 or size > self.max_frame:
            raise FrameTooLarge(f"frame size {size} outside 0..{self.max_frame}", self._consumed + head, ["frame"])
        if available - 4 < size:
            return None
        self._head = head + 4 + size
        return self._scratch[head + 4:self._head]  # (a copy: the scratch buffer is reused)

    def read_directly(self, fd: int) -> None:
        """``receive`` may read from the socket ``fd`` itself (a plain TCP connection; never TLS, whose
        bytes must go through the transport's decryption)."""
        self._fd = fd

    async def receive(self) -> bool:
        """Read once more: True when bytes came (even with the end of the stream right after them: their
        frames are served first), False at a clean EOF; raises the error the connection was lost with.
        Bytes already waiting in the socket are read at once (``read_directly``); otherwise the transport
        is let read once and waited for."""
        if self._fd >= 0 and not self._ended and self._read_now():
            await asyncio.sleep(0)  # a turn for the other connections, as waiting for the loop gives them
            return True
        if not self._ended:
            self._received = asyncio.get_running_loop().create_future()
            transport = self._transport
            if transport is not None and not transport.is_closing():
                transport.resume_reading()  # type: ignore[attr-defined]
            try:
                await self._received
            finally:
                self._received = None
        if self._delivered:
            self._delivered = False
            return True
        if self._error is not None:
            raise self._error
        return False

    def _read_now(self) -> bool:
        """One read from the socket without waiting: whether it brought bytes. At the end of the stream,
        or when the socket has nothing yet, the transport's own read finds out (its EOF and errors)."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return False
        try:
            got = os.readv(self._fd, [self.get_buffer(-1)])
        except (BlockingIOError, InterruptedError):
            return False
        except ConnectionError as error:  # reset: as the transport's read would report it
            self._ended, self._error = True, error
            return False
        if not got:
            return False
        self._count(got)
        return True

    def _count(self, nbytes: int) -> None:
        if self._frame is not None:
            self._filled += nbytes
        else:
            self._tail += nbytes

    # ---- the transport's side (asyncio.BufferedProtocol) -----------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        super().connection_made(transport)
        transport.pause_reading()  # type: ignore[attr-defined]  # until the connection asks (receive)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is None:
            self._start_large_frame()
        if self._frame is not None:
            return memoryview(self._frame)[self._filled:]
        scratch = self._scratch
        if self._head and (self._head == self._tail or len(scratch) - self._tail < 4096):
            unread = self._tail - self._head  # move the unread bytes to the front
            scratch[:unread] = scratch[self._head:self._tail]
            self._consumed += self._head
            self._head, self._tail = 0, unread
        if self._tail == len(scratch):  # full of frames not yet handed out: read nothing more into it
            raise RuntimeError("the receive buffer is full")  # (receive() is not called then)
        return memoryview(scratch)[self._tail:]

    def buffer_updated(self, nbytes: int) -> None:
        self._count(nbytes)
        self._delivered = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()  # type: ignore[attr-defined]  # one read per receive()
        self._wake()

    def eof_received(self) -> bool | None:
        self._ended = True
        self._wake()
        return super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        if exc is not None and self._error is None:
            self._error = exc if isinstance(exc, ConnectionError) else ConnectionResetError(str(exc))
        self._wake()
        super().connection_lost(exc)

    def _wake(self) -> None:
        if self._received is not None and not self._received.done():
            self._received.set_result(None)

    def _start_large_frame(self) -> None:
        """When the frame at the head of the scratch buffer cannot fit it: its own buffer, holding what
        was received of it."""
        head, available = self._head, self._tail - self._head
        if available < 4:
            return
        size = _SIZE.unpack_from(self._scratch, head)[0]
        if size + 4 <= len(self._scratch) or size > self.max_frame or available - 4 >= size:
            return  # fits (after compaction), is refused by frame(), or is complete
        frame = bytearray(size)
        got = available - 4
        frame[:got] = memoryview(self._scratch)[head + 4:self._tail]
        self._frame, self._filled = frame, got
        self._consumed += head + 4 + size  # the scratch buffer starts again after this frame
        self._head = self._tail = 0

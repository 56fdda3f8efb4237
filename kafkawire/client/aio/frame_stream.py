"""The reading side of a broker connection: an asyncio ``BufferedProtocol`` that receives a large
response straight into the buffer it is returned in.

A stream reader copies each response three times (out of the socket, into its buffer, out to the
caller) and, once twice its limit is buffered, stops and restarts the transport for every chunk of a
large response. Here ``read_exactly(n)`` hands the socket the caller's own buffer: what is already
buffered is copied into it, and the rest is received into it in place (``recv_into``). Between reads
the protocol buffers at most ``capacity`` bytes and then stops reading from the socket, so a reader that
waits (for the memory pool, KIP-81) leaves the rest in the kernel and TCP's window closes on the broker.

Failures come as a stream reader gives them: ``asyncio.IncompleteReadError`` when the peer closed the
connection, the transport's error (``OSError``, ``ssl.SSLError``) when it failed.
"""
from __future__ import annotations

import asyncio

__all__ = ["FrameStream"]


class FrameStream(asyncio.BufferedProtocol):
    def __init__(self, capacity: int):
        self.transport: asyncio.Transport | None = None
        self._staging = bytearray(capacity)
        self._start = self._end = 0  # the buffered bytes not read yet: _staging[_start:_end]
        self._target: bytearray | None = None  # the caller's buffer, while a read fills it in place
        self._filled = 0
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._eof = False
        self._error: BaseException | None = None

    # ---- the transport's side --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        # never an empty buffer: a transport takes a read of nothing for the peer's end of stream
        if self._target is not None:  # (detached as soon as it is full)
            return memoryview(self._target)[self._filled:]
        if self._start == self._end:
            self._start = self._end = 0
        elif self._end == len(self._staging):
            unread = self._end - self._start
            if self._start == 0:  # full, yet the transport reads on (it was asked to pause): grow
                self._staging = self._staging + bytearray(len(self._staging))
            else:  # room at the front only: move the unread bytes there
                self._staging[:unread] = self._staging[self._start:self._end]
                self._start, self._end = 0, unread
        return memoryview(self._staging)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        target = self._target
        if target is not None:
            self._filled += nbytes
            if self._filled == len(target):
                self._target = None  # what arrives next is buffered for the next read
                self._wake()
            return
        self._end += nbytes
        if self._end - self._start == len(self._staging) and self.transport is not None:
            self._paused = True  # full, and nobody is reading: the kernel keeps the rest
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        if exc is not None:
            self._error = exc
        self._wake()

    # ---- the reader's side -----------------------------------------------------------------------
    async def read_exactly(self, n: int) -> bytes | bytearray:
        """The next ``n`` bytes: bytes when they were already buffered, else a bytearray filled in place."""
        buffered = self._end - self._start
        if buffered >= n:
            data = bytes(self._staging[self._start:self._start + n])
            self._start += n
            if self._end - self._start <= len(self._staging) // 2:  # (not for every small read while full)
                self._resume()
            return data
        target = bytearray(n)
        target[:buffered] = self._staging[self._start:self._end]
        self._start = self._end = 0
        self._target, self._filled = target, buffered
        self._resume()
        try:
            while self._target is not None:
                if self._error is not None:
                    raise self._error
                if self._eof:
                    raise asyncio.IncompleteReadError(bytes(target[:self._filled]), n)
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
        finally:
            self._target = None
            self._waiter = None
        return target

    def _resume(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

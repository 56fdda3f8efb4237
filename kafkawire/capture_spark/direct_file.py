"""A write-only local file that bypasses the page cache (``O_DIRECT``), for the tables' part files.

A decode writes about as many bytes of Parquet as it reads of capture (the frames table keeps the record
batches raw; ``--records`` writes them again as rows). Through the page cache, every one of those bytes
first lands in a fresh cache page, which on a VM whose host reclaims free guest memory costs more
kernel time than snappy-compressing the bytes, and many times what a direct write costs
(docs/performance.md, "Capture decoding: design measurements"). The cached copies would also push the
capture out of the page cache, which stage 2 reads payloads back from.

Direct I/O needs aligned memory, offsets and lengths, so the writes gather in a page-aligned buffer
(an anonymous mmap) that goes to disk whole; ``close`` writes the last, partial block padded and then
truncates the file to its true length. Where the file system refuses ``O_DIRECT`` (tmpfs, some
network and FUSE file systems) the same buffer is written through the page cache instead.
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os

BLOCK = 4096             # direct I/O alignment: memory, offsets and lengths (the largest common block)
BUFFER_BYTES = 4 << 20   # a multiple of BLOCK


class DirectFile:
    """``open(path, "wb")`` for a file written once from start to end: ``write``, ``tell``, ``close``
    (what pyarrow's ``PythonFile`` asks of a sink). ``direct`` says whether the writes bypass the page
    cache."""

    def __init__(self, path: str, buffer_bytes: int = BUFFER_BYTES):
        if buffer_bytes <= 0 or buffer_bytes % BLOCK:
            raise ValueError(f"buffer_bytes must be a positive multiple of {BLOCK}, not {buffer_bytes}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
        direct = getattr(os, "O_DIRECT", 0)
        self.direct = bool(direct)
        try:
            self._fd = os.open(path, flags | direct, 0o666)
        except OSError as error:
            if not direct or error.errno != errno.EINVAL:
                raise
            self._fd = os.open(path, flags, 0o666)  # the file system does not do direct I/O
            self.direct = False
        self._buffer = mmap.mmap(-1, buffer_bytes)  # page-aligned, as direct I/O wants
        self._view = memoryview(self._buffer)
        self._filled = 0   # bytes in the buffer
        self._flushed = 0  # bytes on disk
        self.closed = False

    def write(self, data) -> int:
        if self.closed:
            raise ValueError("write to a closed DirectFile")
        data = memoryview(data).cast("B")
        size = len(data)
        at = 0
        while at < size:
            taken = min(size - at, len(self._view) - self._filled)
            self._view[self._filled:self._filled + taken] = data[at:at + taken]
            self._filled += taken
            at += taken
            if self._filled == len(self._view):
                self._write_out(self._filled)
        return size

    def tell(self) -> int:
        return self._flushed + self._filled

    def flush(self) -> None:
        """Nothing: only whole blocks can go to disk before ``close``."""

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            length = self._flushed + self._filled
            if self._filled:
                padded = -(-self._filled // BLOCK) * BLOCK if self.direct else self._filled
                self._view[self._filled:padded] = bytes(padded - self._filled)
                self._write_out(padded)
                os.ftruncate(self._fd, length)
        finally:
            os.close(self._fd)
            self._view.release()
            self._buffer.close()

    def __enter__(self) -> "DirectFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write_out(self, count: int) -> None:
        """The buffer's first ``count`` bytes to disk (all of them: os.write may write less)."""
        done = 0
        while done < count:
            try:
                done += os.write(self._fd, self._view[done:count])
            except OSError as error:
                if not (self.direct and error.errno == errno.EINVAL):
                    raise
                # opened, but refused at the first write (some FUSE and network file systems)
                fcntl.fcntl(self._fd, fcntl.F_SETFL, fcntl.fcntl(self._fd, fcntl.F_GETFL) & ~os.O_DIRECT)
                self.direct = False
        self._flushed += count
        self._filled = 0

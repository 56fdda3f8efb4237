"""A slice of a segment file standing for fetched records, sent with sendfile(2) instead of being read.

Kafka's ``FileRecords.slice`` does the same: a fetch response carries the position and size of the
log bytes, and the network layer copies them from the page cache to the socket in the kernel. Here
the generated encoder takes the slice as the ``records`` value (it needs only ``len()``), and the
server hands it to ``loop.sendfile``.

A slice holds a duplicate of the segment's file descriptor: retention may close and delete the
segment while the response is still queued, and the duplicate keeps the file's bytes (and the
descriptor number) from changing under it. A segment's slices share one duplicate (its
``SliceSource``), counted: a fetch then costs no dup(2)/close(2) pair per partition, and the
duplicate is closed when the segment and the last of its slices have let go of it. Like the logs,
sources and slices belong to the event loop's thread.
"""
from __future__ import annotations

import io
import os

__all__ = ["FileRecords", "SliceSource"]


class SliceSource:
    """A duplicate of a file's descriptor for ``FileRecords`` slices of that file, open while its owner
    (who calls ``release`` when done with the file) or any slice still holds it."""

    __slots__ = ("_fd", "_holders")

    def __init__(self, fd: int):
        self._fd = os.dup(fd)
        self._holders = 1  # the owner

    def _acquire(self) -> int:
        if self._holders <= 0:
            raise ValueError("the slice source is closed")
        self._holders += 1
        return self._fd

    def release(self) -> None:
        self._holders -= 1
        if self._holders == 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class FileRecords:
    """``size`` bytes of an open file from ``position``: ``len()``, ``read()``, ``file()`` for sendfile.

    ``source`` is a descriptor (the slice takes a duplicate of its own) or a ``SliceSource`` (the slice
    shares its duplicate)."""

    __slots__ = ("_fd", "_source", "position", "size")

    def __init__(self, source: int | SliceSource, position: int, size: int):
        if position < 0 or size < 0:
            raise ValueError(f"bad file slice: position {position}, size {size}")
        self._source: SliceSource | None
        if isinstance(source, SliceSource):
            self._fd = source._acquire()
            self._source = source
        else:
            self._fd = os.dup(source)
            self._source = None
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRecords(position={self.position}, size={self.size})"

    def read(self) -> bytes:
        """The bytes of the slice (a short read means the file shrank: an error, never silent)."""
        parts, got = [], 0
        while got < self.size:
            chunk = os.pread(self._fd, self.size - got, self.position + got)
            if not chunk:
                raise OSError(f"file ended {self.size - got} bytes before the end of its slice "
                              f"(position {self.position}, size {self.size})")
            parts.append(chunk)
            got += len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def slice(self, start: int, end: int) -> FileRecords:
        """The bytes ``start``..``end`` of this slice as a slice of its own (closed on its own)."""
        if not 0 <= start <= end <= self.size:
            raise ValueError(f"bad sub-slice {start}..{end} of {self.size} bytes")
        return FileRecords(self._source if self._source is not None else self._fd, self.position + start, end - start)

    def fileno(self) -> int:
        """The slice's own descriptor, for ``os.sendfile`` (valid until ``close``)."""
        return self._fd

    def file(self) -> io.FileIO:
        """A binary file object over the descriptor for ``loop.sendfile`` (which seeks it; it is not
        closed with the slice's descriptor, which ``close`` owns)."""
        return io.FileIO(self._fd, "rb", closefd=False)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            if self._source is not None:
                self._source.release()
                self._source = None
            else:
                os.close(fd)

    def __del__(self) -> None:
        self.close()

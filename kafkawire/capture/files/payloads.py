"""Payloads left in their capture files (``PacketRef``), read back by ``PayloadReader`` through mmap.

Stage 1 of the capture job carries where each payload is instead of its bytes; stage 2 reads them back
here. Reading a file mapping keeps its pages resident in the process that read them, so both the
planning walk and the reader give them back (``release_pages``): memory then does not grow with the
capture.
"""
from __future__ import annotations

import mmap
import os

from ..model import ORDER_STRIDE, PacketRef
from .reading import CaptureError
from .remote_files import is_remote, local_path
from .remote_payloads import RemotePayloads

__all__ = ["PayloadReader", "release_pages", "MAPPED_BUDGET"]


def release_pages(mapping: mmap.mmap, end: int | None = None) -> None:
    """Drop the pages of a read-only file mapping (up to ``end``, or all) from this process: they stay
    in the page cache, and a later read maps them again. Without it a process that walks a capture
    keeps every page it touched resident, as much as the file, whatever its size."""
    if _DONTNEED is None:  # a platform without madvise(MADV_DONTNEED): the pages stay
        return
    if end is None:
        mapping.madvise(_DONTNEED)
    elif end >= mmap.PAGESIZE:
        mapping.madvise(_DONTNEED, 0, end - end % mmap.PAGESIZE)


_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


# A read that faults on a file mapping maps the pages around it: 64 KB of small pages (fault_around_bytes),
# or a whole large folio of the page cache, up to 2 MB, which is how a file read sequentially (by the
# planning walk, by stage 1) is cached on recent kernels (6.x, ext4). A PayloadReader counts the 2 MB
# regions its reads touched and releases its pages once they could hold MAPPED_BUDGET.
_REGION_SHIFT = 21
MAPPED_BUDGET = 256 << 20


class PayloadReader:
    """Reads ``PacketRef`` payloads back from the run's files (``paths[file_index]``; a URI's by ranges,
    ``remote_payloads``), each local file mmap-ed
    once, on first use, and kept open until ``close()``: a task re-reads many payloads of few files, and
    the page cache makes each read a copy. A small payload's read maps up to the 2 MB around it, and a
    task reading connection after connection across a file would keep all of it resident: once the reads
    may have mapped ``MAPPED_BUDGET``, the pages are released (why per 2 MB region and not per read, and
    why not a pread per payload: docs/performance.md, "Capture decoding: design measurements"). Use as a
    context manager."""

    def __init__(self, paths):
        self.paths = [local_path(os.fspath(path)) for path in paths]
        self._maps: dict[int, mmap.mmap] = {}
        # the files behind a URI: read by ranges (remote_payloads), fetched ahead where the reads are known
        self.remote_files = {index for index, path in enumerate(self.paths) if is_remote(path)}
        self.remote = RemotePayloads(self.paths) if self.remote_files else None
        self._regions: set[tuple[int, int]] = set()  # (file, 2 MB region) read since the last release
        self._budget = MAPPED_BUDGET >> _REGION_SHIFT

    def payload(self, ref: PacketRef) -> bytes:
        return self.read(ref.order // ORDER_STRIDE, ref.payload_offset, ref.payload_length)

    def read(self, file_index: int, offset: int, length: int) -> bytes:
        mm = self._maps.get(file_index)
        if mm is None:
            if file_index in self.remote_files:
                return self.remote.read(file_index, offset, length)
            mm = self._open(file_index)
        data = mm[offset:offset + length]
        if len(data) != length:
            raise CaptureError(f"{self.paths[file_index]}: {length} payload bytes at offset {offset} are past "
                               f"the end of the file ({len(mm)} bytes): it changed since it was read")
        regions = self._regions
        first, last = offset >> _REGION_SHIFT, (offset + length - 1) >> _REGION_SHIFT
        regions.add((file_index, first))
        if last != first:
            regions.update((file_index, region) for region in range(first + 1, last + 1))
        if len(regions) >= self._budget:
            self.release()
        return data

    def release(self) -> None:
        """Release the pages mapped so far (see ``release_pages``)."""
        self._regions.clear()
        for mm in self._maps.values():
            release_pages(mm)

    def _open(self, file_index: int) -> mmap.mmap:
        if not 0 <= file_index < len(self.paths):
            raise CaptureError(f"a payload of file {file_index} of a run of {len(self.paths)} file(s)")
        path = self.paths[file_index]
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size == 0:
                raise CaptureError(f"{path}: empty, but packets were read from it: it changed since")
            mm = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)  # stays valid after the file closes
        self._maps[file_index] = mm
        return mm

    def close(self) -> None:
        if self.remote is not None:
            self.remote.close()
        maps, self._maps = self._maps, {}
        for mm in maps.values():
            mm.close()

    def __enter__(self) -> "PayloadReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

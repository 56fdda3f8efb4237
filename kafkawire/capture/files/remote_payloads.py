"""Payloads left in remote captures, read back by coalesced ranges fetched ahead (stage 2 of the job).

A local capture's payloads are read back from its mapping one by one; a request per payload to an object
store would cost a round trip each. Stage 2 knows which payloads it will read next (its chunk rows list
them, ``capture_spark.chunks.prefetched``), so it asks for a batch of them at once: ``fetch`` sorts
each file's ranges, merges those less than ``HOLE_BYTES`` apart into one read (the gap read through:
cheaper than another request) up to ``RANGE_BYTES`` each, and reads them concurrently; ``read`` slices
a payload out of the batch that holds it. A batch is dropped once its payloads are read, so memory
holds about two batches (one read from, one on its way).
"""
from __future__ import annotations

import bisect
from concurrent.futures import Future, ThreadPoolExecutor

from .reading import CaptureError
from .remote_files import FETCH_THREADS, RemoteFile, display_name

__all__ = ["RemotePayloads", "coalesce", "HOLE_BYTES", "RANGE_BYTES", "BATCH_BYTES"]

HOLE_BYTES = 64 << 10     # a gap this small between two wanted ranges is read through
RANGE_BYTES = 16 << 20    # the longest coalesced read
# Payload bytes asked for at a time: a task holds two batches (one read from, one on its way), about what
# a local task may keep mapped (payloads.MAPPED_BUDGET). Larger batches span more of each connection,
# so fewer of its ranges stand apart (docs/performance.md has the requests against the batch size).
BATCH_BYTES = 128 << 20


def coalesce(ranges, hole: int | None = None, longest: int | None = None) -> list[tuple[int, int]]:
    """(offset, length) ranges sorted and merged where less than ``hole`` bytes apart, each merged one at
    most ``longest`` bytes (unless a single range is longer)."""
    hole = HOLE_BYTES if hole is None else hole
    longest = RANGE_BYTES if longest is None else longest
    merged: list[list[int]] = []
    for offset, length in sorted(ranges):
        end = offset + length
        if merged:
            last = merged[-1]
            if offset - last[1] <= hole and max(end, last[1]) - last[0] <= longest:
                last[1] = max(last[1], end)
                continue
        merged.append([offset, end])
    return [(start, end - start) for start, end in merged]


class _Batch:
    """One fetch: per file, the coalesced ranges' starts and their reads (futures), sorted."""

    __slots__ = ("starts", "reads")

    def __init__(self) -> None:
        self.starts: dict[int, list[int]] = {}
        self.reads: dict[int, list[tuple[int, int, Future[bytes]]]] = {}


class RemotePayloads:
    """Reads payloads of the remote files among ``paths`` (indexed as ``PayloadReader`` indexes them)."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        self._files: dict[int, RemoteFile] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._batches: list[_Batch] = []

    def _file(self, file_index: int) -> RemoteFile:
        remote = self._files.get(file_index)
        if remote is None:
            remote = self._files[file_index] = RemoteFile(self.paths[file_index])
        return remote

    def fetch(self, wanted: dict[int, list[tuple[int, int]]]) -> _Batch:
        """Starts reading the (offset, length) ranges ``wanted`` of each file, coalesced; ``read`` finds
        them until the batch is ``drop``-ped."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="capture-payloads")
        batch = _Batch()
        for file_index, ranges in wanted.items():
            remote = self._file(file_index)
            reads = [(start, length, self._pool.submit(remote.read_at, start, length))
                     for start, length in coalesce(ranges)]
            batch.starts[file_index] = [start for start, _, _ in reads]
            batch.reads[file_index] = reads
        self._batches.append(batch)
        return batch

    def drop(self, batch: _Batch) -> None:
        self._batches.remove(batch)

    def read(self, file_index: int, offset: int, length: int) -> bytes:
        if not length:
            return b""
        for batch in self._batches:
            starts = batch.starts.get(file_index)
            if not starts:
                continue
            at = bisect.bisect_right(starts, offset) - 1
            if at >= 0:
                start, span, future = batch.reads[file_index][at]
                if offset + length <= start + span:
                    data = future.result()
                    return self._checked(file_index, offset, length, data[offset - start:offset - start + length])
        # not fetched ahead (a reader used without ``prefetched``): a request of its own
        return self._checked(file_index, offset, length, self._file(file_index).read_at(offset, length))

    def _checked(self, file_index: int, offset: int, length: int, data: bytes) -> bytes:
        if len(data) != length:
            raise CaptureError(f"{display_name(self.paths[file_index])}: {length} payload bytes at offset {offset} "
                               f"are past the end of the file: it changed since it was read")
        return data

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._batches.clear()
        files, self._files = self._files, {}
        for remote in files.values():
            remote.close()

"""A directory standing in for tiered storage (Kafka's RemoteStorageManager + RemoteLogMetadataManager).

Layout: ``<remote>/<topic>-<partition>/<20-digit base>.log``, ``.index`` and, when the segment saw an
aborted transaction, ``.txnindex`` (copies of the local files),
plus ``<base>.meta``, a small JSON record of the segment's offsets, size and max timestamp. The ``.meta``
file is written last, by rename: its presence marks a finished copy (COPY_SEGMENT_FINISHED), so a copy
cut short by a crash is ignored and redone.

Reads open the files, read, and close them: safe from a worker thread while the event loop appends to
the local log. ``read_latency_ms`` is slept before each remote read.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .segment import BatchInfo, LogSegment, iter_batch_headers, segment_name
from .transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

__all__ = ["RemoteStore", "RemoteSegment", "ClosedSegment", "describe_closed_segment"]


class ClosedSegment(NamedTuple):
    """What copying a closed local segment needs, read from it on the loop's thread."""

    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_path: Path
    index_path: Path
    txn_index_path: Path


def describe_closed_segment(segment: LogSegment) -> ClosedSegment:
    segment.ensure_index()  # a sane index on disk: remote reads trust it
    return ClosedSegment(segment.base_offset, segment.next_offset, segment.size, segment.max_timestamp,
                         segment.offset_of_max_timestamp, segment.log_path, segment.index_path,
                         segment.txn_index.path)


@dataclass(frozen=True)
class RemoteSegment:
    """A finished copy of a segment in the remote tier."""

    base_offset: int
    end_offset: int  # the segment's last offset (inclusive), as RemoteLogSegmentMetadata.endOffset
    size_in_bytes: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_path: Path
    index_path: Path

    @property
    def next_offset(self) -> int:
        return self.end_offset + 1

    @property
    def txn_index(self) -> TransactionIndex:
        """The segment's aborted transactions (read afresh: remote reads run on worker threads)."""
        return TransactionIndex(self.log_path.with_suffix(TXN_INDEX_SUFFIX))

    def lookup(self, offset: int) -> int:
        """The position of the greatest index entry <= ``offset`` (0 without one or without an index)."""
        try:
            raw = self.index_path.read_bytes()
        except FileNotFoundError:
            return 0
        if len(raw) % 8:
            return 0
        entries = array("i", raw)
        if sys.byteorder == "little":
            entries.byteswap()
        i = bisect_right(entries[0::2], offset - self.base_offset) - 1
        return entries[1::2][i] if i >= 0 else 0

    def find_batch(self, fd: int, offset: int) -> BatchInfo | None:
        """The first batch whose last offset >= ``offset``."""
        for info in iter_batch_headers(fd, self.lookup(offset), self.size_in_bytes):
            if info.last_offset >= offset:
                return info
        return None


class RemoteStore:
    """Tiered storage in a local directory, with a configurable read latency."""

    def __init__(self, directory: Path, read_latency_ms: float = 0.0):
        self.directory = Path(directory)
        self.read_latency_ms = read_latency_ms
        self.directory.mkdir(parents=True, exist_ok=True)

    def partition_dir(self, name: str) -> Path:
        return self.directory / name

    def list_segments(self, name: str) -> list[RemoteSegment]:
        """The partition's finished remote segments, by base offset; leftovers of cut-short copies are removed."""
        directory = self.partition_dir(name)
        if not directory.is_dir():
            return []
        found = []
        finished = set()
        for meta in directory.glob("*.meta"):
            try:
                info = json.loads(meta.read_text())
                segment = RemoteSegment(int(info["base_offset"]), int(info["end_offset"]), int(info["size_in_bytes"]),
                                        int(info["max_timestamp"]), int(info["offset_of_max_timestamp"]),
                                        directory / f"{meta.stem}.log", directory / f"{meta.stem}.index")
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if not segment.log_path.exists():
                continue
            found.append(segment)
            finished.add(meta.stem)
        for path in directory.iterdir():  # unfinished copies
            stem = path.name.split(".", 1)[0]
            if stem not in finished or path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)
        found.sort(key=lambda segment: segment.base_offset)
        return found

    def copy_segment(self, name: str, segment: LogSegment) -> RemoteSegment:
        """Copy a closed local segment; returns its remote metadata once the copy is finished."""
        return self.copy_files(name, describe_closed_segment(segment))

    def copy_files(self, name: str, closed: ClosedSegment) -> RemoteSegment:
        """The file work of ``copy_segment``, from a description made on the loop's thread: reads the
        closed segment's files by path only, so it may run on a worker thread."""
        segment = closed
        directory = self.partition_dir(name)
        directory.mkdir(parents=True, exist_ok=True)
        stem = segment_name(segment.base_offset)
        log_path, index_path, meta_path = (directory / f"{stem}{suffix}" for suffix in (".log", ".index", ".meta"))
        for source, target in ((segment.log_path, log_path), (segment.index_path, index_path)):
            tmp = target.with_name(target.name + ".tmp")
            if source.exists():
                shutil.copyfile(source, tmp)
            else:
                tmp.write_bytes(b"")
            os.replace(tmp, target)
        if segment.txn_index_path.exists():
            target = log_path.with_suffix(TXN_INDEX_SUFFIX)
            shutil.copyfile(segment.txn_index_path, target.with_name(target.name + ".tmp"))
            os.replace(target.with_name(target.name + ".tmp"), target)
        remote = RemoteSegment(segment.base_offset, segment.next_offset - 1, segment.size, segment.max_timestamp,
                               segment.offset_of_max_timestamp, log_path, index_path)
        tmp = meta_path.with_name(meta_path.name + ".tmp")
        tmp.write_text(json.dumps({"base_offset": remote.base_offset, "end_offset": remote.end_offset,
                                   "size_in_bytes": remote.size_in_bytes, "max_timestamp": remote.max_timestamp,
                                   "offset_of_max_timestamp": remote.offset_of_max_timestamp}))
        os.replace(tmp, meta_path)
        return remote

    def delete_segment(self, segment: RemoteSegment) -> None:
        # the metadata goes first: a half-deleted segment is then just leftovers
        segment.log_path.with_suffix(".meta").unlink(missing_ok=True)
        segment.log_path.unlink(missing_ok=True)
        segment.index_path.unlink(missing_ok=True)
        segment.log_path.with_suffix(TXN_INDEX_SUFFIX).unlink(missing_ok=True)

    def delete_partition(self, name: str) -> None:
        shutil.rmtree(self.partition_dir(name), ignore_errors=True)

    def __repr__(self) -> str:
        return f"RemoteStore({str(self.directory)!r}, read_latency_ms={self.read_latency_ms})"

"""The segments of one partition on local disk: Kafka's ``LocalLog``.

Segments are kept in offset order beside their base offsets (for a bisect), the last one active. This
object knows files and offsets only; what the offsets mean (log start, stable offsets, retention) is
``PartitionLog``'s.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from .descriptors import DescriptorCache
from .segment import LogSegment

__all__ = ["LocalLog", "LogOffsetMetadata"]


class LogOffsetMetadata(NamedTuple):
    """An offset and where its batch sits: Kafka's ``LogOffsetMetadata``."""

    message_offset: int
    segment_base_offset: int
    relative_position: int


class LocalLog:
    """The ordered segments of ``directory``; ``segments[-1]`` is the active one."""

    def __init__(self, directory: Path, descriptors: DescriptorCache | None):
        self.directory = directory
        self.descriptors = descriptors  # shared with other logs: a bound on open segment files
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []

    def __len__(self) -> int:
        return len(self.segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.segments)

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def first(self) -> LogSegment:
        return self.segments[0]

    @property
    def end_offset(self) -> int:
        """The log end offset: the active segment's next offset."""
        return self.segments[-1].next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    @property
    def end_offset_metadata(self) -> LogOffsetMetadata:
        active = self.segments[-1]
        return LogOffsetMetadata(active.next_offset, active.base_offset, active.size)

    # ---- finding --------------------------------------------------------------------------------
    def index_of(self, offset: int) -> int:
        """The index of the segment with the greatest base offset <= ``offset`` (-1 when none)."""
        return bisect_right(self._bases, offset) - 1

    def metadata(self, offset: int) -> LogOffsetMetadata:
        """Where the batch holding ``offset`` starts; the end of the active segment at or past the end."""
        if offset >= self.end_offset:
            return self.end_offset_metadata
        for segment in self.segments[max(0, self.index_of(offset)):]:
            info = segment.translate(offset)
            if info is not None:
                return LogOffsetMetadata(offset, segment.base_offset, info.position)
        return self.end_offset_metadata

    # ---- changing -------------------------------------------------------------------------------
    def open_segment(self, base_offset: int, index_interval_bytes: int, now_ms: int, *, create: bool) -> LogSegment:
        """Open (or with ``create``, create) the segment at ``base_offset`` and add it at the end."""
        segment = LogSegment(self.directory, base_offset, index_interval_bytes, create=create, now_ms=now_ms,
                             descriptors=self.descriptors)
        self.segments.append(segment)
        self._bases.append(base_offset)
        return segment

    def roll(self, index_interval_bytes: int, now_ms: int) -> bool:
        """Close the active segment and start one at the log end; False (nothing done) when the active
        one is empty (Kafka deletes and recreates an empty active segment: the same thing)."""
        active = self.segments[-1]
        if active.size == 0:
            return False
        active.close_index_writer()
        self.open_segment(active.next_offset, index_interval_bytes, now_ms, create=True)
        return True

    def delete_oldest(self, count: int) -> None:
        """Delete the ``count`` oldest segments (never all: the caller rolls first)."""
        deleted = self.segments[:count]
        del self.segments[:count]
        del self._bases[:count]
        for segment in deleted:
            segment.delete()

    def truncate_to(self, offset: int) -> None:
        """Remove everything from the batch holding ``offset`` on."""
        keep = max(0, self.index_of(offset))
        for segment in self.segments[keep + 1:]:
            segment.delete()
        del self.segments[keep + 1:]
        del self._bases[keep + 1:]
        self.segments[keep].truncate_to(offset)

    def position_of(self, old: list[LogSegment]) -> int | None:
        """Where ``old`` starts when it is still a run of consecutive closed segments here, else None."""
        segments = self.segments
        first = next((index for index, segment in enumerate(segments) if old and segment is old[0]), None)
        if first is None:
            return None
        end = first + len(old)
        if end >= len(segments) or any(a is not b for a, b in zip(segments[first:end], old)):
            return None
        return first

    def replace(self, first: int, count: int, cleaned: LogSegment) -> None:
        """Put ``cleaned`` in the place of the ``count`` segments from index ``first``."""
        self.segments[first:first + count] = [cleaned]
        self._bases[first:first + count] = [cleaned.base_offset]

    def flush(self) -> None:
        for segment in self.segments:
            segment.flush()

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

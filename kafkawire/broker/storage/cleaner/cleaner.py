"""The log cleaner: compaction of a partition log whose cleanup.policy includes compact (Kafka's ``Cleaner``).

A round keeps the newest record of each key among the closed segments below the first uncleanable
offset (the active segment, the last stable offset, min.compaction.lag.ms: ``cleanable_offsets``):

1. on the event loop, a snapshot of what the round needs (``plan_round``);
2. on a worker thread, the map of each dirty key to its latest offset (bounded: a round may stop
   short of the uncleanable offset, and the next goes on), then each group of segments rewritten into
   one ``.cleaned`` segment (``rounds``, ``batches``);
3. on the loop, after each group, the swap: the cleaned files take the old segments' place, in the
   file system (``files``, crash-safe) and in the log (``PartitionLog.replace_segments``).

Offsets never change: a batch keeps its base offset and last offset delta, and gaps stay. Produce and
fetch go on meanwhile: the worker reads the files through descriptors of its own, the swap is one step
on the loop, and a fetch that took a slice of a replaced segment keeps reading its (deleted) file
through the slice's own descriptor.
"""
from __future__ import annotations

import asyncio
import threading
from bisect import bisect_right
from dataclasses import dataclass

from .batches import BatchFilter, CleanerAborted
from .files import CLEANED_SUFFIX, segment_files
from .rounds import (
    RoundPlan,
    SegmentSnapshot,
    build_offset_map,
    clean_group,
    group_segments,
)
from .transactions import CleanedTransactions
from .offset_map import OffsetMap
from .throttler import Throttler

__all__ = [
    "CleanableOffsets",
    "CleanerAborted",
    "CleanerStats",
    "LogCleaner",
    "cleanable_offsets",
    "plan_round",
]

DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
DEFAULT_IO_MAX_BYTES_PER_SECOND = 1.7976931348623157e308  # log.cleaner.io.max.bytes.per.second (no limit)
DEFAULT_IO_BUFFER_SIZE = 512 * 1024  # log.cleaner.io.buffer.size
DEFAULT_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor


@dataclass
class CleanableOffsets:
    """Kafka's ``OffsetsToClean`` and ``LogToClean``'s byte counts."""

    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment's base offset
    force_checkpoint: bool  # the checkpoint was outside the log: the first dirty offset was reset
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int  # > 0: max.compaction.lag.ms passed for some dirty record

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


@dataclass
class CleanerStats:
    end_offset: int  # the next round's first dirty offset
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    groups: int = 0
    swapped: bool = True  # False: a swap found the log changed under it, and the round stopped there


def cleanable_offsets(log, checkpoint: int | None, now_ms: int) -> CleanableOffsets:
    """``LogCleanerManager.cleanableOffsets`` / ``maxCompactionDelay`` / ``calculateCleanableBytes``."""
    start = log.log_start_offset
    dirty = checkpoint if checkpoint is not None else start
    force = False
    if dirty < start or dirty > log.log_end_offset:
        dirty, force = start, checkpoint is not None
    segments = log.segments
    active = segments[-1]
    closed = segments[:-1]
    dirty_closed = [s for s in closed if s.next_offset > dirty]
    limits = [log.last_stable_offset, active.base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        young = next((s for s in dirty_closed if s.largest_timestamp() > now_ms - lag), None)
        if young is not None:
            limits.append(young.base_offset)
    uncleanable = max(dirty, min(limits))
    if uncleanable >= active.base_offset:
        first_uncleanable = active.base_offset
    else:  # the segment holding it: rounds clean whole segments
        holding = bisect_right([s.base_offset for s in closed], uncleanable) - 1
        first_uncleanable = closed[max(holding, 0)].base_offset
    low = min(dirty, first_uncleanable)
    clean_bytes = sum(s.size for s in segments if s.base_offset < dirty)
    cleanable_bytes = sum(s.size for s in closed if s.base_offset < first_uncleanable and s.next_offset > low)
    firsts = [t for t in (s.first_batch_timestamp for s in dirty_closed) if t is not None and t > 0]
    until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    delay = until - min(firsts) if firsts and min(firsts) < until else 0
    return CleanableOffsets(dirty, first_uncleanable, force, clean_bytes, cleanable_bytes, delay)


def plan_round(log, offsets: CleanableOffsets, now_ms: int, io_buffer_size: int) -> RoundPlan:
    """What the worker needs, taken on the loop: the closed segments below the first uncleanable
    offset, the aborted transactions overlapping them, the active producers' last records."""
    segments = log.segments
    snapshots = [SegmentSnapshot(s, s.base_offset, s.next_offset, s.size, s.log_path, _mtime_ns(s))
                 for s in segments[:-1] if s.base_offset < offsets.first_uncleanable_offset]
    aborted = []
    low, high = offsets.first_dirty_offset, offsets.first_uncleanable_offset
    if snapshots:
        low = snapshots[0].base_offset
    for segment in segments:  # the markers of transactions below may be in later segments
        aborted += [txn for txn in segment.txn_index.entries if txn.last_offset >= low and txn.first_offset < high]
    producers = {pid: (entry.last_data_offset, entry.producer_epoch) for pid, entry in log.producers.items()}
    config = log.config
    return RoundPlan(log.directory, log.name, offsets.first_dirty_offset, offsets.first_uncleanable_offset,
                     snapshots, aborted, producers, now_ms, config.delete_retention_ms, config.segment_bytes,
                     config.index_interval_bytes, io_buffer_size)


def _mtime_ns(segment) -> int:
    try:
        return segment.log_path.stat().st_mtime_ns
    except FileNotFoundError:
        return segment.created_ms * 1_000_000


class LogCleaner:
    """Cleans one log at a time (Kafka's cleaner thread; the offset map is reused between rounds)."""

    def __init__(self, dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
                 io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE, load_factor: float = DEFAULT_LOAD_FACTOR,
                 io_max_bytes_per_second: float = DEFAULT_IO_MAX_BYTES_PER_SECOND):
        self.offset_map = OffsetMap(dedupe_buffer_size, load_factor)
        self.io_buffer_size = io_buffer_size
        # Kafka's default (Double.MAX_VALUE) is no limit: no throttler then
        self.throttler = (Throttler(io_max_bytes_per_second) if io_max_bytes_per_second < DEFAULT_IO_MAX_BYTES_PER_SECOND
                          else None)
        self._stop = threading.Event()
        self._lock = asyncio.Lock()

    def stop(self) -> None:
        """End a round in progress at its next batch (the broker is closing)."""
        self._stop.set()

    async def clean(self, log, offsets: CleanableOffsets | None = None, now_ms: int | None = None) -> CleanerStats:
        """One round over ``log`` (``Cleaner.doClean``). ``offsets``: what to clean (default: from the log
        start to its first uncleanable offset). Raises CleanerAborted when stopped."""
        async with self._lock:
            now = now_ms if now_ms is not None else log.now_ms()
            if offsets is None:
                offsets = cleanable_offsets(log, None, now)
            plan = plan_round(log, offsets, now, self.io_buffer_size)
            plan.stop = self._stop
            plan.throttler = self.throttler
            if offsets.first_dirty_offset >= offsets.first_uncleanable_offset or not plan.dirty_segments:
                return CleanerStats(offsets.first_dirty_offset)
            end_offset = await asyncio.to_thread(build_offset_map, plan, self.offset_map)
            stats = CleanerStats(end_offset)
            transactions = CleanedTransactions(plan.aborted)
            batch_filter = BatchFilter(self.offset_map, transactions, plan.active_producers, now,
                                       plan.delete_retention_ms)
            for group in group_segments(plan.segments, end_offset, plan.segment_bytes):
                cleaned = await asyncio.to_thread(clean_group, plan, group, batch_filter, transactions)
                stats.bytes_read += cleaned.bytes_read
                stats.bytes_written += cleaned.size
                stats.records_read += cleaned.records_read
                stats.records_kept += cleaned.records_kept
                stats.groups += 1
                if not self._swap(log, group):
                    stats.swapped = False
                    break
            return stats

    @staticmethod
    def _swap(log, group: list[SegmentSnapshot]) -> bool:
        """On the loop: the group's cleaned files replace its segments, if the log still has them as
        they were; otherwise the cleaned files are dropped."""
        directory, base = log.directory, group[0].base_offset
        old = [snapshot.segment for snapshot in group]
        unchanged = all(segment.size == snapshot.size for segment, snapshot in zip(old, group))
        if unchanged and log.replace_segments(old, base):
            return True
        for path in segment_files(directory, base, CLEANED_SUFFIX):
            path.unlink(missing_ok=True)
        return False


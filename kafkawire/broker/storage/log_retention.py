"""Retention of a partition log: Kafka's ``deleteOldSegments`` by size, time and log start offset, and
with tiered storage the remote log manager's copy and expiration tasks. ``PartitionLog`` owns one
``LogRetention``, which changes its segments, log start offset and remote segments."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .remote import RemoteSegment
from .segment import LogSegment

if TYPE_CHECKING:
    from .log import PartitionLog

__all__ = ["LogRetention"]

_Breached = Callable[[LogSegment, "LogSegment | None"], bool]


class LogRetention:
    """Retention and the remote tier of one ``PartitionLog``."""

    def __init__(self, log: PartitionLog):
        self.log = log
        self.local = log.local
        self.roll_requested = False  # a tiered log's breached active segment: roll it, then copy and delete

    # ---- retention and the remote tier ----------------------------------------------------------
    def apply_retention(self, now_ms: int | None = None, *, copy_to_remote: bool = True) -> int:
        """Kafka's ``deleteOldSegments`` (and, tiered, the RLM copy and expiration tasks): returns the
        number of segments deleted, local and remote.

        Untiered: whole segments are deleted from the oldest while retention.bytes / retention.ms are
        breached (the active one too, after rolling), advancing the log start offset. Tiered: closed
        segments are first copied to the remote store; local segments are deleted under
        local.retention.* once copied (advancing the local log start offset only); remote segments are
        deleted under retention.* (advancing the log start offset).

        ``copy_to_remote=False``: the caller copies segments itself first (``segments_to_copy`` and
        ``add_remote_segment``, the file copies on a worker thread); a segment rolled here is copied
        and deleted at the next run.
        """
        log = self.log
        now = now_ms if now_ms is not None else log.now_ms()
        removed = 0
        for _ in range(2):  # a tiered log rolls a breached active segment, then copies and deletes it
            if log.tiered and copy_to_remote:
                self._copy_to_remote()
            removed += self.delete_log_start_breached()
            if log.config.delete:  # a compact-only log keeps its old segments (the cleaner shrinks them)
                removed += self._delete_retention_size_breached()
                removed += self._delete_retention_ms_breached(now)
            if not (log.tiered and self.roll_requested):
                break
            self.roll_requested = False
            log.roll(now)
        if log.tiered:
            removed += self._expire_remote(now)
            removed += self.delete_log_start_breached()
        log.snapshots.delete_below(log.local_log_start_offset)
        return removed

    def _copy_to_remote(self) -> None:
        store = self.log.remote
        assert store is not None  # tiered
        for segment in self.segments_to_copy():
            self.add_remote_segment(store.copy_segment(self.log.name, segment))

    def segments_to_copy(self) -> list[LogSegment]:
        """Closed segments below the high watermark not yet in the remote tier, oldest first."""
        log = self.log
        if not log.tiered:
            return []
        highest = log.highest_offset_in_remote_storage
        bound = min(log.high_watermark, log.last_stable_offset)
        return [segment for segment in self.local.segments[:-1]
                if highest < segment.next_offset - 1 and segment.next_offset <= bound and segment.size > 0]

    def add_remote_segment(self, remote: RemoteSegment) -> None:
        """A segment's finished copy: it now counts as in the remote tier (if it is still the next one)."""
        log = self.log
        if remote.end_offset > log.highest_offset_in_remote_storage and not log.closed:
            log.remote_segments = (*log.remote_segments, remote)

    def _deletable(self, predicate: _Breached) -> list[LogSegment]:
        """``UnifiedLog.deletableSegments``: from the oldest, while the predicate holds."""
        log = self.log
        deletable = []
        segments = self.local.segments
        tiered = log.tiered
        high_watermark = log.high_watermark
        highest_remote = log.highest_offset_in_remote_storage
        for index, segment in enumerate(segments):
            following = segments[index + 1] if index + 1 < len(segments) else None
            upper = following.base_offset if following is not None else self.local.end_offset
            if not (high_watermark >= upper and predicate(segment, following)):
                break
            if tiered and following is None and segment.size > 0:
                self.roll_requested = True
            if following is None and segment.size == 0:
                break
            if tiered and not ((upper > 0 and upper - 1 <= highest_remote)
                               or (following is not None and log.log_start_offset >= following.base_offset)):
                break
            deletable.append(segment)
        return deletable

    def _delete_segments(self, deletable: list[LogSegment]) -> int:
        if not deletable:
            return 0
        log = self.log
        if len(deletable) == len(self.local):
            log.roll()
        count = len(deletable)
        new_start = self.local.segments[count].base_offset
        if not log.tiered:
            log.log_start_offset = max(log.log_start_offset, new_start)
        self.local.delete_oldest(count)
        return count

    def delete_log_start_breached(self) -> int:
        """Delete the segments wholly below the log start offset (the local one, tiered)."""
        log = self.log
        start = log.local_log_start_offset if log.tiered else log.log_start_offset
        return self._delete_segments(self._deletable(
            lambda segment, following: following is not None and following.base_offset <= start))

    def _delete_retention_size_breached(self) -> int:
        log = self.log
        retention = log.config.effective_local_retention_bytes if log.tiered else log.config.retention_bytes
        size = self.local.size_in_bytes
        if retention < 0 or size < retention:
            return 0
        diff = size - retention

        def breached(segment: LogSegment, _following: LogSegment | None) -> bool:
            nonlocal diff
            if diff - segment.size >= 0:
                diff -= segment.size
                return True
            return False

        return self._delete_segments(self._deletable(breached))

    def _delete_retention_ms_breached(self, now: int) -> int:
        log = self.log
        retention = log.config.effective_local_retention_ms if log.tiered else log.config.retention_ms
        if retention < 0:
            return 0
        return self._delete_segments(self._deletable(
            lambda segment, _following: now - segment.largest_timestamp() > retention))

    def _expire_remote(self, now: int) -> int:
        """The RLM expiration task: remote segments past retention.ms / retention.bytes (counted over the
        remote segments plus the local data not yet copied) are deleted, advancing the log start offset."""
        log = self.log
        remote = list(log.remote_segments)
        if not remote:
            return 0
        retention_ms, retention_bytes = log.config.retention_ms, log.config.retention_bytes
        highest = remote[-1].end_offset
        total = sum(segment.size_in_bytes for segment in remote)
        total += sum(segment.size for segment in self.local if segment.base_offset > highest)
        breached_bytes = total - retention_bytes if retention_bytes >= 0 else -1
        expired = []
        for segment in remote:
            if segment.end_offset < log.log_start_offset:
                expired.append(segment)
            elif retention_ms >= 0 and segment.max_timestamp <= now - retention_ms:
                expired.append(segment)
                breached_bytes -= segment.size_in_bytes
            elif breached_bytes >= 0 and breached_bytes - segment.size_in_bytes >= 0:
                expired.append(segment)
                breached_bytes -= segment.size_in_bytes
            else:
                break
        if not expired:
            return 0
        store = log.remote
        assert store is not None  # a log with remote segments has a store
        log.log_start_offset = max(log.log_start_offset, expired[-1].end_offset + 1)
        log.remote_segments = tuple(remote[len(expired):])
        for segment in expired:
            store.delete_segment(segment)
        return len(expired)

"""Retention of a partition log: Kafka's ``deleteOldSegments`` by size, time and log start offset, and
with tiered storage the remote log manager's copy and expiration tasks. A mixin of ``PartitionLog``
(``log``), which owns the segments."""
from __future__ import annotations

from .remote import RemoteSegment
from .segment import LogSegment

__all__ = ["LogRetention"]


class LogRetention:
    """Retention and the remote tier for ``PartitionLog``."""

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
        now = now_ms if now_ms is not None else self._clock()
        removed = 0
        for _ in range(2):  # a tiered log rolls a breached active segment, then copies and deletes it
            if self.tiered and copy_to_remote:
                self._copy_to_remote()
            removed += self._delete_log_start_breached()
            if self.config.delete:  # a compact-only log keeps its old segments (the cleaner shrinks them)
                removed += self._delete_retention_size_breached()
                removed += self._delete_retention_ms_breached(now)
            if not (self.tiered and self._roll_requested):
                break
            self._roll_requested = False
            self._roll(now)
        if self.tiered:
            removed += self._expire_remote(now)
            removed += self._delete_log_start_breached()
        self._delete_old_snapshots()
        return removed

    def _copy_to_remote(self) -> None:
        for segment in self.segments_to_copy():
            self.add_remote_segment(self.remote.copy_segment(self.name, segment))

    def segments_to_copy(self) -> list[LogSegment]:
        """Closed segments below the high watermark not yet in the remote tier, oldest first."""
        if not self.tiered:
            return []
        highest = self.highest_offset_in_remote_storage
        bound = min(self.high_watermark, self.last_stable_offset)
        return [segment for segment in self._segments[:-1]
                if highest < segment.next_offset - 1 and segment.next_offset <= bound and segment.size > 0]

    def add_remote_segment(self, remote: RemoteSegment) -> None:
        """A segment's finished copy: it now counts as in the remote tier (if it is still the next one)."""
        if remote.end_offset > self.highest_offset_in_remote_storage and not self._closed:
            self._remote_segments = (*self._remote_segments, remote)

    def _deletable(self, predicate) -> list[LogSegment]:
        """``UnifiedLog.deletableSegments``: from the oldest, while the predicate holds."""
        deletable = []
        segments = self._segments
        tiered = self.tiered
        high_watermark = self.high_watermark
        highest_remote = self.highest_offset_in_remote_storage
        for index, segment in enumerate(segments):
            following = segments[index + 1] if index + 1 < len(segments) else None
            upper = following.base_offset if following is not None else self.log_end_offset
            if not (high_watermark >= upper and predicate(segment, following)):
                break
            if tiered and following is None and segment.size > 0:
                self._roll_requested = True
            if following is None and segment.size == 0:
                break
            if tiered and not ((upper > 0 and upper - 1 <= highest_remote)
                               or (following is not None and self.log_start_offset >= following.base_offset)):
                break
            deletable.append(segment)
        return deletable

    def _delete_segments(self, deletable: list[LogSegment]) -> int:
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            self._roll(self._clock())
        count = len(deletable)
        new_start = self._segments[count].base_offset
        if not self.tiered:
            self.log_start_offset = max(self.log_start_offset, new_start)
        del self._segments[:count]
        del self._bases[:count]
        for segment in deletable:
            segment.delete()
        return count

    def _delete_log_start_breached(self) -> int:
        start = self.local_log_start_offset if self.tiered else self.log_start_offset
        return self._delete_segments(self._deletable(
            lambda segment, following: following is not None and following.base_offset <= start))

    def _delete_retention_size_breached(self) -> int:
        retention = self.config.effective_local_retention_bytes if self.tiered else self.config.retention_bytes
        size = self.size_in_bytes
        if retention < 0 or size < retention:
            return 0
        diff = size - retention

        def breached(segment: LogSegment, _following) -> bool:
            nonlocal diff
            if diff - segment.size >= 0:
                diff -= segment.size
                return True
            return False

        return self._delete_segments(self._deletable(breached))

    def _delete_retention_ms_breached(self, now: int) -> int:
        retention = self.config.effective_local_retention_ms if self.tiered else self.config.retention_ms
        if retention < 0:
            return 0
        return self._delete_segments(self._deletable(
            lambda segment, _following: now - segment.largest_timestamp() > retention))

    def _expire_remote(self, now: int) -> int:
        """The RLM expiration task: remote segments past retention.ms / retention.bytes (counted over the
        remote segments plus the local data not yet copied) are deleted, advancing the log start offset."""
        remote = list(self._remote_segments)
        if not remote:
            return 0
        retention_ms, retention_bytes = self.config.retention_ms, self.config.retention_bytes
        highest = remote[-1].end_offset
        total = sum(segment.size_in_bytes for segment in remote)
        total += sum(segment.size for segment in self._segments if segment.base_offset > highest)
        breached_bytes = total - retention_bytes if retention_bytes >= 0 else -1
        expired = []
        for segment in remote:
            if segment.end_offset < self.log_start_offset:
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
        self.log_start_offset = max(self.log_start_offset, expired[-1].end_offset + 1)
        self._remote_segments = tuple(remote[len(expired):])
        for segment in expired:
            self.remote.delete_segment(segment)
        return len(expired)

    def _delete_old_snapshots(self) -> None:
        """Snapshots below the local log start go (Kafka deletes those of deleted segments); the latest stays."""
        start = self.local_log_start_offset
        keep = [offset for offset in self._snapshots[:-1] if offset >= start] + self._snapshots[-1:]
        for offset in self._snapshots:
            if offset not in keep:
                self._snapshot_path(offset).unlink(missing_ok=True)
        self._snapshots = keep

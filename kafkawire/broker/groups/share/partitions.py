"""Every share partition of every share group, as Kafka's ``SharePartitionManager`` holds them, with
their durable state: each change is written (``ShareStateStore``) before the request that made it is
answered, and a change that cannot be written is undone and answered with an error.

A share partition starts, the first time a group fetches it, at the log end (``share.auto.offset.reset``
latest, the default), at the log start (earliest) or at the first record written since a time
(by_duration:<ISO-8601 duration>); from then on its state comes from the store. The group's settings
(its group configs, else the broker's) are read at each use, so that a change applies at once.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ....error_codes import ErrorCode
from ..group_configs import parse_reset
from .partition import AcquiredRange, Checkpoint, RecordState, SharePartition
from .store import ShareKey, ShareStateStore

__all__ = ["SharePartitions", "ShareSettings"]

_DONE_STATES = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShareSettings:
    """One share group's settings, by their group config names (broker-wide names in ``BrokerConfig``)."""
    record_lock_duration_ms: int = 30_000  # share.record.lock.duration.ms
    delivery_count_limit: int = 5  # share.delivery.count.limit
    partition_max_record_locks: int = 2000  # share.partition.max.record.locks
    auto_offset_reset: str = "latest"  # share.auto.offset.reset
    isolation_level: str = "read_uncommitted"  # share.isolation.level
    renew_enabled: bool = True  # share.renew.acknowledge.enable


# where a new share partition starts: (log start offset, log end offset, the offset of the first record
# at or after a timestamp in ms, None when there is none)
LogBounds = tuple[int, int, Callable[[int], int | None]]


class SharePartitions:
    """``settings(group_id)``: the group's settings; ``wall_clock()``: the time in seconds since the epoch
    (by_duration resets count back from it)."""

    def __init__(self, store: ShareStateStore | None, settings: Callable[[str], ShareSettings],
                 clock: Callable[[], float], wall_clock: Callable[[], float] = time.time):
        self.store = store
        self.settings = settings
        self.clock = clock
        self.wall_clock = wall_clock
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._stored: dict = {}

    def load(self) -> None:
        self._stored = self.store.load() if self.store is not None else {}
        self.partitions.clear()

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    def get(self, key: ShareKey, bounds: LogBounds) -> SharePartition:
        """The share partition, created at the reset offset (or as stored) on first use."""
        log_start_offset = bounds[0]
        partition = self.partitions.get(key)
        if partition is None:
            partition = self._new(key[0], self._reset_offset(key[0], bounds))
            stored = self._stored.pop(key, None)
            if stored is not None:
                try:
                    partition.restore(*stored)
                except ValueError as exc:
                    log.warning("share partition %s: stored state unreadable, starting afresh: %s", key, exc)
            partition.move_start(log_start_offset)
            self.partitions[key] = partition
        return self._configured(key[0], partition)

    def _reset_offset(self, group_id: str, bounds: LogBounds) -> int:
        log_start_offset, log_end_offset, offset_at = bounds
        strategy, back_s = parse_reset(self.settings(group_id).auto_offset_reset)
        if strategy == "earliest":
            return log_start_offset
        if strategy == "by_duration":
            found = offset_at(int((self.wall_clock() - back_s) * 1000))
            return log_end_offset if found is None else max(found, log_start_offset)
        return log_end_offset

    def _configured(self, group_id: str, partition: SharePartition) -> SharePartition:
        """The partition under its group's settings in force now."""
        s = self.settings(group_id)
        partition.lock_duration_s = s.record_lock_duration_ms / 1000
        partition.delivery_count_limit = s.delivery_count_limit
        partition.max_in_flight = s.partition_max_record_locks
        return partition

    def reset(self, key: ShareKey, start_offset: int) -> bool:
        """Start the share partition afresh at ``start_offset`` (AlterShareGroupOffsets); whether written."""
        partition = self._new(key[0], start_offset)
        try:
            if self.store is not None:
                self.store.save(key, partition.snapshot())
        except OSError as exc:
            log.error("share partition %s: could not write its new start: %s", key, exc)
            return False
        self._stored.pop(key, None)
        self.partitions[key] = partition
        return True

    def delete(self, key: ShareKey) -> bool:
        """Forget the share partition's state (DeleteShareGroupOffsets); whether written."""
        try:
            if self.store is not None:
                self.store.delete(key)
        except OSError as exc:
            log.error("share partition %s: could not delete its state: %s", key, exc)
            return False
        self._stored.pop(key, None)
        self.partitions.pop(key, None)
        return True

    def group_ids(self) -> set[str]:
        """The groups with share-partition state."""
        return {key[0] for key in (*self.partitions, *self._stored)}

    def initialized(self, group_id: str) -> list[ShareKey]:
        """The group's share partitions that have a state (fetched since, or stored)."""
        return sorted((key for key in (*self.partitions, *self._stored) if key[0] == group_id),
                      key=lambda key: (str(key[1]), key[2]))

    def summary(self, key: ShareKey) -> tuple[int, int] | None:
        """(start offset, records acknowledged or archived in flight) of an initialized share partition."""
        partition = self.partitions.get(key)
        if partition is not None:
            return partition.start_offset, partition.delivery_complete_count()
        stored = self._stored.get(key)
        if stored is None:
            return None
        start, runs = stored
        return start, sum(last - first + 1 for first, last, state, _ in runs if state in _DONE_STATES)

    def acquire(self, key: ShareKey, partition: SharePartition, member: str, batches: list[tuple[int, int]],
                max_records: int, batch_size: int, mode: int,
                aborted: Iterable[tuple[int, int]] = ()) -> tuple[int, list[AcquiredRange]]:
        before = partition.checkpoint()
        acquired = partition.acquire(member, batches, max_records, batch_size, self.clock(), mode, aborted)
        if not self._write(key, partition, before):
            return ErrorCode.UNKNOWN_SERVER_ERROR, []
        return ErrorCode.NONE, acquired

    def acknowledge(self, key: ShareKey, member: str, batches: list[tuple[int, int, list[int]]],
                    renew: bool) -> int:
        partition = self.partitions.get(key)
        if partition is None:  # never fetched by this group: nothing can be acquired
            return ErrorCode.INVALID_RECORD_STATE
        self._configured(key[0], partition)
        before = partition.checkpoint()
        error = partition.acknowledge(member, batches, self.clock(), renew)
        if error == ErrorCode.NONE and not self._write(key, partition, before):
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return error

    def move_start(self, key: ShareKey, partition: SharePartition, log_start_offset: int) -> None:
        """Retention or DeleteRecords passed the share partition's start: it starts at the log's."""
        before = partition.checkpoint()
        partition.move_start(log_start_offset)
        self._write(key, partition, before)

    def release_member(self, group_id: str, member: str) -> list[ShareKey]:
        """Release what ``member`` holds in the group's partitions; the keys of those that changed."""
        changed = []
        for key, partition in self.partitions.items():
            if key[0] != group_id:
                continue
            before = self._configured(group_id, partition).checkpoint()
            if partition.release_member(member) and self._write(key, partition, before):
                changed.append(key)
        return changed

    def expire(self) -> list[ShareKey]:
        """Release the records whose acquisition lock has expired; the keys of the partitions changed."""
        now = self.clock()
        changed = []
        for key, partition in self.partitions.items():
            deadline = partition.next_deadline()
            if deadline is not None and deadline <= now:
                before = self._configured(key[0], partition).checkpoint()
                partition.expire(now)
                if self._write(key, partition, before):
                    changed.append(key)
        return changed

    def _new(self, group_id: str, start_offset: int) -> SharePartition:
        s = self.settings(group_id)
        return SharePartition(start_offset, lock_duration_s=s.record_lock_duration_ms / 1000,
                              delivery_count_limit=s.delivery_count_limit, max_in_flight=s.partition_max_record_locks)

    def _write(self, key: ShareKey, partition: SharePartition, before: Checkpoint) -> bool:
        """Write what changed in the partition (an update, not its whole window); if that fails, go back
        to ``before`` (the change is refused)."""
        changes = partition.take_changes()
        if self.store is None or changes is None:
            return True
        try:
            self.store.update(key, *changes)
            return True
        except OSError as exc:
            log.error("share partition %s: could not write its state, undoing the change: %s", key, exc)
            partition.rollback(before)
            return False

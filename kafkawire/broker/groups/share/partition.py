"""One share-partition's state, as Kafka's ``SharePartition`` keeps it, without I/O: the caller passes
the time in and reads what changed.

The share-partition start offset (SPSO) is the first offset not yet acknowledged or archived; the end
offset (SPEO) the offset after the last record ever acquired. Every offset between them is in flight,
in one of Kafka's record states:

    AVAILABLE --acquire--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
                            |   |----REJECT/GAP--> ARCHIVED
                            |----RELEASE or lock expiry--> AVAILABLE (ARCHIVED at the delivery limit)

Acquiring counts a delivery and starts the acquisition lock (``group.share.record.lock.duration.ms``);
a record released or whose lock expires after ``group.share.delivery.count.limit`` deliveries is
archived instead of offered again. The SPSO moves past leading acknowledged and archived records, and
new records are acquired only while the in-flight window (SPEO - SPSO) is below
``group.share.partition.max.record.locks``. The window being bounded, each in-flight offset has its
own entry.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from enum import IntEnum

from ....error_codes import ErrorCode

__all__ = ["RecordState", "AcknowledgeType", "AcquiredRange", "SharePartition", "ACQUIRE_BATCH_OPTIMIZED",
           "ACQUIRE_RECORD_LIMIT"]

# ShareFetch's ShareAcquireMode (v2+, KIP-1206): whole log batches past MaxRecords, or MaxRecords exactly
ACQUIRE_BATCH_OPTIMIZED = 0
ACQUIRE_RECORD_LIMIT = 1


class RecordState(IntEnum):
    """Kafka's ``RecordState`` ids (as the share coordinator stores them)."""
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """The AcknowledgeTypes of ShareFetch and ShareAcknowledge (RENEW: KIP-1222, with IsRenewAck)."""
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(slots=True)
class _InFlight:
    state: RecordState
    delivery_count: int
    member: str | None = None  # the member holding the lock (ACQUIRED only)
    deadline: float = 0.0  # when the lock expires, in the caller's clock (ACQUIRED only)


class SharePartition:
    """``lock_duration_s``, ``delivery_count_limit`` and ``max_in_flight`` are the group's settings."""

    def __init__(self, start_offset: int, *, lock_duration_s: float, delivery_count_limit: int,
                 max_in_flight: int):
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.lock_duration_s = lock_duration_s
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self._records: dict[int, _InFlight] = {}  # offset -> state, for start_offset <= offset < end_offset

    # ---- queries ------------------------------------------------------------------------------------
    def state(self, offset: int) -> tuple[RecordState, int, str | None] | None:
        """(state, delivery count, holder) of an in-flight offset; None outside the window."""
        record = self._records.get(offset)
        return None if record is None else (record.state, record.delivery_count, record.member)

    def in_flight(self) -> Iterator[tuple[int, RecordState, int, str | None]]:
        for offset in range(self.start_offset, self.end_offset):
            record = self._records[offset]
            yield offset, record.state, record.delivery_count, record.member

    def delivery_complete_count(self) -> int:
        """In-flight records acknowledged or archived (Kafka's deliveryCompleteCount, for the lag)."""
        return sum(1 for r in self._records.values() if r.state in _DONE)

    def fetch_offset(self) -> int:
        """Where the next acquisition starts: the first available in-flight record, else the SPEO."""
        for offset in range(self.start_offset, self.end_offset):
            if self._records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def can_acquire_new(self) -> bool:
        return self.end_offset - self.start_offset < self.max_in_flight

    def next_deadline(self) -> float | None:
        deadlines = [r.deadline for r in self._records.values() if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def acquired_by(self, member: str) -> list[int]:
        return [o for o, r in self._records.items() if r.state is RecordState.ACQUIRED and r.member == member]

    # ---- acquisition --------------------------------------------------------------------------------
    def acquire(self, member: str, batches: Iterable[tuple[int, int]], max_records: int, batch_size: int,
                now: float, mode: int = ACQUIRE_BATCH_OPTIMIZED,
                aborted: Iterable[tuple[int, int]] = ()) -> list[AcquiredRange]:
        """Acquire for ``member`` from the log batches read (``(base offset, last offset)`` in order):
        available in-flight records, then new records past the SPEO while the window allows. Stops at
        ``max_records``; in batch-optimized mode the log batch under way is taken whole (as far as the
        window goes). The ranges come back split at most ``batch_size`` records each. Available records
        of the ``aborted`` batches (read_committed: aborted transactions) are archived instead."""
        acquired: list[int] = []
        counts: dict[int, int] = {}
        deadline = now + self.lock_duration_s
        skipped = {(base, last) for base, last in aborted}
        archived = False
        for base, last in batches:
            if (base, last) in skipped:
                archived = self._archive_batch(base, last) or archived
                continue
            if len(acquired) >= max_records:
                break
            for offset in range(max(base, self.start_offset), last + 1):
                if len(acquired) >= max_records and (mode == ACQUIRE_RECORD_LIMIT or offset < self.end_offset
                                                     or offset == base):
                    break
                record = self._records.get(offset)
                if record is None:
                    if offset != self.end_offset or not self.can_acquire_new():
                        break  # past a gap in what was read, or the window is full
                    record = self._records[offset] = _InFlight(RecordState.AVAILABLE, 0)
                    self.end_offset += 1
                if record.state is not RecordState.AVAILABLE:
                    continue
                record.state, record.member, record.deadline = RecordState.ACQUIRED, member, deadline
                record.delivery_count += 1
                acquired.append(offset)
                counts[offset] = record.delivery_count
        if archived:
            self._advance()
        return _ranges(acquired, counts, max(batch_size, 1))

    def _archive_batch(self, base: int, last: int) -> bool:
        """Archive the available records of a batch never to be delivered (new ones enter the window
        archived, while it allows); whether any was."""
        archived = False
        for offset in range(max(base, self.start_offset), last + 1):
            record = self._records.get(offset)
            if record is None:
                if offset != self.end_offset or not self.can_acquire_new():
                    break
                record = self._records[offset] = _InFlight(RecordState.AVAILABLE, 0)
                self.end_offset += 1
            if record.state is RecordState.AVAILABLE:
                self._settle(record, RecordState.ARCHIVED)
                archived = True
        return archived

    # ---- acknowledgement ----------------------------------------------------------------------------
    def acknowledge(self, member: str, batches: list[tuple[int, int, list[int]]], now: float,
                    renew_allowed: bool = False) -> int:
        """Apply ``(first offset, last offset, acknowledge types)`` batches for ``member``: all or nothing.
        Returns the error code: INVALID_REQUEST for a malformed batch, INVALID_RECORD_STATE when an offset
        is not acquired by the member."""
        plan: list[tuple[int, int]] = []
        for first, last, types in batches:
            if first > last or not types or (len(types) != 1 and len(types) != last - first + 1):
                return ErrorCode.INVALID_REQUEST
            for offset in range(first, last + 1):
                kind = types[0] if len(types) == 1 else types[offset - first]
                if kind not in _VALID_TYPES or (kind == AcknowledgeType.RENEW and not renew_allowed):
                    return ErrorCode.INVALID_REQUEST
                record = self._records.get(offset)
                if record is None or record.state is not RecordState.ACQUIRED or record.member != member:
                    return ErrorCode.INVALID_RECORD_STATE
                plan.append((offset, kind))
        if len({offset for offset, _ in plan}) != len(plan):
            return ErrorCode.INVALID_REQUEST  # an offset acknowledged twice in one request
        for offset, kind in plan:
            record = self._records[offset]
            if kind == AcknowledgeType.RENEW:
                record.deadline = now + self.lock_duration_s
            elif kind == AcknowledgeType.ACCEPT:
                self._settle(record, RecordState.ACKNOWLEDGED)
            elif kind == AcknowledgeType.RELEASE:
                self._release(record)
            else:  # REJECT, GAP
                self._settle(record, RecordState.ARCHIVED)
        self._advance()
        return ErrorCode.NONE

    def expire(self, now: float) -> bool:
        """Release the records whose lock has expired; whether any was."""
        return self._release_where(lambda record: record.deadline <= now)

    def release_member(self, member: str) -> bool:
        """Release everything ``member`` holds (its share session ended, or it left the group)."""
        return self._release_where(lambda record: record.member == member)

    def _release_where(self, held: Callable[[_InFlight], bool]) -> bool:
        released = [r for r in self._records.values() if r.state is RecordState.ACQUIRED and held(r)]
        for record in released:
            self._release(record)
        if released:
            self._advance()
        return bool(released)

    def move_start(self, offset: int) -> None:
        """The log no longer has the records below ``offset`` (retention, DeleteRecords): drop them."""
        if offset <= self.start_offset:
            return
        for gone in range(self.start_offset, min(offset, self.end_offset)):
            del self._records[gone]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance()

    def _release(self, record: _InFlight) -> None:
        exhausted = record.delivery_count >= self.delivery_count_limit
        self._settle(record, RecordState.ARCHIVED if exhausted else RecordState.AVAILABLE)

    @staticmethod
    def _settle(record: _InFlight, state: RecordState) -> None:
        record.state, record.member, record.deadline = state, None, 0.0

    def _advance(self) -> None:
        while self.start_offset < self.end_offset and self._records[self.start_offset].state in _DONE:
            del self._records[self.start_offset]
            self.start_offset += 1

    def checkpoint(self) -> tuple[int, int, dict[int, _InFlight]]:
        """Everything, to ``rollback`` to if a change cannot be written."""
        return self.start_offset, self.end_offset, {o: replace(r) for o, r in self._records.items()}

    def rollback(self, checkpoint: tuple[int, int, dict[int, _InFlight]]) -> None:
        self.start_offset, self.end_offset, records = checkpoint
        self._records = {o: replace(r) for o, r in records.items()}

    # ---- durability ---------------------------------------------------------------------------------
    def snapshot(self) -> tuple[int, list[list[int]]]:
        """(SPSO, runs of ``[first, last, state, delivery count]``) as written to the journal. Acquired
        records are written as their lock expiring would leave them (after a restart nobody holds them):
        available with their deliveries counted, archived at the delivery limit."""
        runs: list[list[int]] = []
        for offset, state, count, _ in self.in_flight():
            stored = state
            if state is RecordState.ACQUIRED:
                stored = RecordState.ARCHIVED if count >= self.delivery_count_limit else RecordState.AVAILABLE
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == stored and runs[-1][3] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, int(stored), count])
        return self.start_offset, runs

    def restore(self, start_offset: int, runs: list[list[int]]) -> None:
        """The state a snapshot describes (runs contiguous from the SPSO)."""
        self.start_offset = self.end_offset = start_offset
        self._records.clear()
        for first, last, state, count in runs:
            if first != self.end_offset or last < first:
                raise ValueError(f"share-partition runs not contiguous at {first}")
            for offset in range(first, last + 1):
                self._records[offset] = _InFlight(RecordState(state), int(count))
            self.end_offset = last + 1
        self._advance()


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_VALID_TYPES = frozenset(int(t) for t in AcknowledgeType)


def _ranges(offsets: list[int], counts: dict[int, int], batch_size: int) -> list[AcquiredRange]:
    """Consecutive offsets of one delivery count as ranges of at most ``batch_size``."""
    ranges: list[AcquiredRange] = []
    for offset in offsets:
        if ranges:
            last = ranges[-1]
            if (offset == last.last_offset + 1 and counts[offset] == last.delivery_count
                    and offset - last.first_offset < batch_size):
                ranges[-1] = AcquiredRange(last.first_offset, offset, last.delivery_count)
                continue
        ranges.append(AcquiredRange(offset, offset, counts[offset]))
    return ranges

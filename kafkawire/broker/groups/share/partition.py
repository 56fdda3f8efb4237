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
``group.share.partition.max.record.locks``.

As Kafka's ``InFlightBatch``/``InFlightState``, the window is kept as runs of consecutive offsets in one
state (same delivery count, holder and lock deadline), split only where records diverge and merged again
when they agree: acquiring or acknowledging a range touches the runs it covers, not each record. Runs
are immutable, so ``checkpoint`` is a copy of the list of runs, not of every record.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from ....error_codes import ErrorCode

__all__ = ["RecordState", "AcknowledgeType", "AcquiredRange", "SharePartition", "Checkpoint", "ACQUIRE_BATCH_OPTIMIZED",
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


class _Run(NamedTuple):
    """Offsets ``first``..``last`` in one state (Kafka's InFlightBatch, or one of its split offsets)."""
    first: int
    last: int
    state: RecordState
    delivery_count: int
    member: str | None = None  # the member holding the lock (ACQUIRED only)
    deadline: float = 0.0  # when the lock expires, in the caller's clock (ACQUIRED only)


Checkpoint = tuple[int, int, list[_Run], tuple[int, int] | None]


class SharePartition:
    """``lock_duration_s``, ``delivery_count_limit`` and ``max_in_flight`` are the group's settings."""

    def __init__(self, start_offset: int, *, lock_duration_s: float, delivery_count_limit: int,
                 max_in_flight: int):
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.lock_duration_s = lock_duration_s
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self._runs: list[_Run] = []  # contiguous from start_offset to end_offset, neighbours never alike
        self._dirty: tuple[int, int] | None = None  # the offsets changed since ``take_changes``

    # ---- queries ------------------------------------------------------------------------------------
    def state(self, offset: int) -> tuple[RecordState, int, str | None] | None:
        """(state, delivery count, holder) of an in-flight offset; None outside the window."""
        if not self.start_offset <= offset < self.end_offset:
            return None
        run = self._runs[self._index(offset)]
        return run.state, run.delivery_count, run.member

    def in_flight(self) -> Iterator[tuple[int, RecordState, int, str | None]]:
        for run in self._runs:
            for offset in range(run.first, run.last + 1):
                yield offset, run.state, run.delivery_count, run.member

    def delivery_complete_count(self) -> int:
        """In-flight records acknowledged or archived (Kafka's deliveryCompleteCount, for the lag)."""
        return sum(r.last - r.first + 1 for r in self._runs if r.state in _DONE)

    def fetch_offset(self) -> int:
        """Where the next acquisition starts: the first available in-flight record, else the SPEO."""
        for run in self._runs:
            if run.state is RecordState.AVAILABLE:
                return run.first
        return self.end_offset

    def acquirable_through(self, max_records: int) -> int:
        """The last offset an acquisition of ``max_records`` from ``fetch_offset`` could reach: through
        the available in-flight records, then new ones past the SPEO as far as the window allows (the log
        need not be read past it). ``fetch_offset() - 1`` when nothing can be acquired."""
        wanted = max_records
        last = self.fetch_offset() - 1
        for run in self._runs[self._index(last + 1):] if last + 1 < self.end_offset else ():
            if run.state is RecordState.AVAILABLE:
                if run.last - run.first + 1 >= wanted:
                    return run.first + wanted - 1
                wanted -= run.last - run.first + 1
                last = run.last
        room = min(wanted, self.max_in_flight - (self.end_offset - self.start_offset))
        return self.end_offset + room - 1 if room > 0 else last

    def can_acquire_new(self) -> bool:
        return self.end_offset - self.start_offset < self.max_in_flight

    def next_deadline(self) -> float | None:
        deadlines = [r.deadline for r in self._runs if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # ---- runs ---------------------------------------------------------------------------------------
    def _index(self, offset: int) -> int:
        """The index of the run holding an in-flight ``offset``."""
        return bisect_right(self._runs, offset, key=_first) - 1

    def _split(self, offset: int) -> int:
        """Make a run start at ``offset`` (start_offset <= offset <= end_offset); its index."""
        if offset >= self.end_offset:
            return len(self._runs)
        index = self._index(offset)
        run = self._runs[index]
        if run.first == offset:
            return index
        self._runs[index:index + 1] = [run._replace(last=offset - 1), run._replace(first=offset)]
        return index + 1

    def _set(self, first: int, last: int, change: Callable[[_Run], _Run]) -> None:
        """Replace the runs covering ``first``..``last`` (in flight) by ``change`` of each, merging alike
        neighbours; marks the offsets changed."""
        lo = self._split(first)
        hi = self._split(last + 1)
        self._runs[lo:hi] = [change(run) for run in self._runs[lo:hi]]
        self._merge(max(lo - 1, 0), min(hi + 1, len(self._runs)))
        self._touch(first, last)

    def _merge(self, lo: int, hi: int) -> None:
        runs = self._runs
        index = lo
        while index + 1 < hi and index + 1 < len(runs):
            a, b = runs[index], runs[index + 1]
            if a[2:] == b[2:]:
                runs[index:index + 2] = [a._replace(last=b.last)]
                hi -= 1
            else:
                index += 1

    def _append(self, count: int, state: RecordState, delivery_count: int, member: str | None = None,
                deadline: float = 0.0) -> None:
        """``count`` new records past the SPEO."""
        first = self.end_offset
        self.end_offset += count
        self._runs.append(_Run(first, self.end_offset - 1, state, delivery_count, member, deadline))
        self._merge(len(self._runs) - 2, len(self._runs))
        self._touch(first, self.end_offset - 1)

    def _touch(self, first: int, last: int) -> None:
        dirty = self._dirty
        self._dirty = (first, last) if dirty is None else (min(dirty[0], first), max(dirty[1], last))

    # ---- acquisition --------------------------------------------------------------------------------
    def acquire(self, member: str, batches: Iterable[tuple[int, int]], max_records: int, batch_size: int,
                now: float, mode: int = ACQUIRE_BATCH_OPTIMIZED,
                aborted: Iterable[tuple[int, int]] = ()) -> list[AcquiredRange]:
        """Acquire for ``member`` from the log batches read (``(base offset, last offset)`` in order):
        available in-flight records, then new records past the SPEO while the window allows. Stops at
        ``max_records``; in batch-optimized mode the log batch under way is taken whole (as far as the
        window goes). The ranges come back split at most ``batch_size`` records each. Available records
        of the ``aborted`` batches (read_committed: aborted transactions) are archived instead."""
        acquired: list[tuple[int, int, int]] = []  # (first, last, delivery count)
        taken = 0
        deadline = now + self.lock_duration_s

        def take(run: _Run) -> _Run:
            acquired.append((run.first, run.last, run.delivery_count + 1))
            return _Run(run.first, run.last, RecordState.ACQUIRED, run.delivery_count + 1, member, deadline)

        skipped = {(base, last) for base, last in aborted}
        archived = False
        for base, last in batches:
            if (base, last) in skipped:
                archived = self._archive_batch(base, last) or archived
                continue
            if taken >= max_records:
                break
            offset = max(base, self.start_offset)
            # in-flight records first: available ones, up to max_records in every mode
            while offset <= last and offset < self.end_offset:
                if taken >= max_records:
                    break
                run = self._runs[self._index(offset)]
                upto = min(last, run.last)
                if run.state is RecordState.AVAILABLE:
                    upto = min(upto, offset + max_records - taken - 1)
                    self._set(offset, upto, take)
                    taken += upto - offset + 1
                offset = upto + 1
            else:
                # then new records past the SPEO, contiguous with it, while the window allows
                if offset > last or offset != self.end_offset:
                    continue
                if taken >= max_records and (mode == ACQUIRE_RECORD_LIMIT or offset == base):
                    continue
                count = min(last - offset + 1, self.max_in_flight - (self.end_offset - self.start_offset))
                if mode == ACQUIRE_RECORD_LIMIT:
                    count = min(count, max_records - taken)
                if count > 0:
                    acquired.append((offset, offset + count - 1, 1))
                    self._append(count, RecordState.ACQUIRED, 1, member, deadline)
                    taken += count
        if archived:
            self._advance()
        return _ranges(acquired, max(batch_size, 1))

    def _archive_batch(self, base: int, last: int) -> bool:
        """Archive the available records of a batch never to be delivered (new ones enter the window
        archived, while it allows); whether any was."""
        archived = False
        offset = max(base, self.start_offset)
        while offset <= last and offset < self.end_offset:
            run = self._runs[self._index(offset)]
            upto = min(last, run.last)
            if run.state is RecordState.AVAILABLE:
                self._set(offset, upto, _archive)
                archived = True
            offset = upto + 1
        if offset <= last and offset == self.end_offset:
            count = min(last - offset + 1, self.max_in_flight - (self.end_offset - self.start_offset))
            if count > 0:
                self._append(count, RecordState.ARCHIVED, 0)
                archived = True
        return archived

    # ---- acknowledgement ----------------------------------------------------------------------------
    def acknowledge(self, member: str, batches: list[tuple[int, int, list[int]]], now: float,
                    renew_allowed: bool = False) -> int:
        """Apply ``(first offset, last offset, acknowledge types)`` batches for ``member``: all or nothing.
        Returns the error code: INVALID_REQUEST for a malformed batch, INVALID_RECORD_STATE when an offset
        is not acquired by the member."""
        plan: list[tuple[int, int, int]] = []  # (first, last, type) in request order
        for first, last, types in batches:
            if first > last or not types or (len(types) != 1 and len(types) != last - first + 1):
                return ErrorCode.INVALID_REQUEST
            kinds = [(first, last, types[0])] if len(types) == 1 else _same_type_spans(first, types)
            for span_first, span_last, kind in kinds:
                # the first offset failing decides: a bad type before a record not held by the member
                held_to = self._held_to(member, span_first, span_last)
                if kind not in _VALID_TYPES or (kind == AcknowledgeType.RENEW and not renew_allowed):
                    return ErrorCode.INVALID_REQUEST
                if held_to < span_last:
                    return ErrorCode.INVALID_RECORD_STATE
                if plan and plan[-1][1] == span_first - 1 and plan[-1][2] == kind:
                    plan[-1] = (plan[-1][0], span_last, kind)  # one range for records acknowledged one by one
                else:
                    plan.append((span_first, span_last, kind))
        ordered = sorted(plan)
        if any(b[0] <= a[1] for a, b in zip(ordered, ordered[1:])):
            return ErrorCode.INVALID_REQUEST  # an offset acknowledged twice in one request
        renewed = now + self.lock_duration_s
        for first, last, kind in plan:
            if kind == AcknowledgeType.RENEW:
                self._set(first, last, lambda run: run._replace(deadline=renewed))
            elif kind == AcknowledgeType.ACCEPT:
                self._set(first, last, _accept)
            elif kind == AcknowledgeType.RELEASE:
                self._set(first, last, self._released)
            else:  # REJECT, GAP
                self._set(first, last, _archive)
        self._advance()
        return ErrorCode.NONE

    def _held_to(self, member: str, first: int, last: int) -> int:
        """The last offset of ``first``..``last`` such that all from ``first`` are acquired by ``member``
        (``first - 1`` when ``first`` is not)."""
        if first < self.start_offset:
            return first - 1
        offset = first
        while offset <= last and offset < self.end_offset:
            run = self._runs[self._index(offset)]
            if run.state is not RecordState.ACQUIRED or run.member != member:
                break
            offset = run.last + 1
        return min(offset - 1, last)

    def expire(self, now: float) -> bool:
        """Release the records whose lock has expired; whether any was."""
        return self._release_where(lambda run: run.deadline <= now)

    def release_member(self, member: str) -> bool:
        """Release everything ``member`` holds (its share session ended, or it left the group)."""
        return self._release_where(lambda run: run.member == member)

    def _release_where(self, held: Callable[[_Run], bool]) -> bool:
        released = [(r.first, r.last) for r in self._runs if r.state is RecordState.ACQUIRED and held(r)]
        for first, last in released:
            self._set(first, last, self._released)
        if released:
            self._advance()
        return bool(released)

    def move_start(self, offset: int) -> None:
        """The log no longer has the records below ``offset`` (retention, DeleteRecords): drop them."""
        if offset <= self.start_offset:
            return
        index = self._split(min(offset, self.end_offset))
        del self._runs[:index]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._touch(offset, offset)
        self._advance()

    def _released(self, run: _Run) -> _Run:
        exhausted = run.delivery_count >= self.delivery_count_limit
        return _Run(run.first, run.last, RecordState.ARCHIVED if exhausted else RecordState.AVAILABLE,
                    run.delivery_count)

    def _advance(self) -> None:
        done = 0
        for run in self._runs:
            if run.state not in _DONE:
                break
            done += 1
        if done:
            self.start_offset = self._runs[done - 1].last + 1
            del self._runs[:done]
            self._touch(self.start_offset, self.start_offset)

    def checkpoint(self) -> Checkpoint:
        """Everything, to ``rollback`` to if a change cannot be written (runs are immutable: a list copy)."""
        return self.start_offset, self.end_offset, list(self._runs), self._dirty

    def rollback(self, checkpoint: Checkpoint) -> None:
        self.start_offset, self.end_offset, runs, self._dirty = checkpoint
        self._runs = list(runs)

    # ---- durability ---------------------------------------------------------------------------------
    def snapshot(self) -> tuple[int, list[list[int]]]:
        """(SPSO, runs of ``[first, last, state, delivery count]``) as written to the journal. Acquired
        records are written as their lock expiring would leave them (after a restart nobody holds them):
        available with their deliveries counted, archived at the delivery limit."""
        return self.start_offset, self._stored(self._runs)

    def take_changes(self) -> tuple[int, int, int, list[list[int]]] | None:
        """What changed since the last call, as Kafka's ShareUpdate record holds it: (SPSO, first and last
        offset changed, the stored runs covering them within the window); None if nothing did."""
        dirty, self._dirty = self._dirty, None
        if dirty is None:
            return None
        first, last = max(dirty[0], self.start_offset), min(dirty[1], self.end_offset - 1)
        runs = self._runs[self._index(first):self._index(last) + 1] if first <= last else []
        stored = self._stored(runs)
        if stored:
            stored[0][0], stored[-1][1] = max(stored[0][0], first), min(stored[-1][1], last)
        return self.start_offset, dirty[0], dirty[1], stored

    def _stored(self, runs: list[_Run]) -> list[list[int]]:
        stored: list[list[int]] = []
        for run in runs:
            state = run.state
            if state is RecordState.ACQUIRED:
                state = RecordState.ARCHIVED if run.delivery_count >= self.delivery_count_limit else RecordState.AVAILABLE
            if stored and stored[-1][2] == state and stored[-1][3] == run.delivery_count:
                stored[-1][1] = run.last
            else:
                stored.append([run.first, run.last, int(state), run.delivery_count])
        return stored

    def restore(self, start_offset: int, runs: list[list[int]]) -> None:
        """The state a snapshot describes (runs contiguous from the SPSO)."""
        self.start_offset = self.end_offset = start_offset
        self._runs = []
        for first, last, state, count in runs:
            if first != self.end_offset or last < first:
                raise ValueError(f"share-partition runs not contiguous at {first}")
            self._append(last - first + 1, RecordState(state), int(count))
        self._dirty = None
        self._advance()  # written with the next change


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_VALID_TYPES = frozenset(int(t) for t in AcknowledgeType)


def _first(run: _Run) -> int:
    return run.first


def _accept(run: _Run) -> _Run:
    return _Run(run.first, run.last, RecordState.ACKNOWLEDGED, run.delivery_count)


def _archive(run: _Run) -> _Run:
    return _Run(run.first, run.last, RecordState.ARCHIVED, run.delivery_count)


def _same_type_spans(first: int, types: list[int]) -> list[tuple[int, int, int]]:
    """Per-record acknowledge types from ``first`` as spans of consecutive offsets of one type."""
    spans: list[tuple[int, int, int]] = []
    for index, kind in enumerate(types):
        if spans and spans[-1][2] == kind:
            spans[-1] = (spans[-1][0], first + index, kind)
        else:
            spans.append((first + index, first + index, kind))
    return spans


def _ranges(acquired: list[tuple[int, int, int]], batch_size: int) -> list[AcquiredRange]:
    """Consecutive acquired offsets of one delivery count as ranges of at most ``batch_size``."""
    merged: list[list[int]] = []
    for first, last, count in acquired:
        if merged and merged[-1][1] == first - 1 and merged[-1][2] == count:
            merged[-1][1] = last
        else:
            merged.append([first, last, count])
    return [AcquiredRange(start, min(start + batch_size - 1, last), count)
            for first, last, count in merged for start in range(first, last + 1, batch_size)]

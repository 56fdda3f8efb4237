"""The share-partition state (``broker.groups.share.partition``) as a hypothesis state machine against
a model that keeps every offset of the log: acquisition in offset order within the in-flight window
and MaxRecords, acknowledgements by their holder only, lock expiry on a fake clock, the delivery-count
limit, the start offset moving past finished records, the log start moving (retention), offsets reset
(AlterShareGroupOffsets), and a restart from the journal: every change is
written as an update of what it touched (``ShareStateStore.update``), and what the file replays to must
be the partition's snapshot."""
from __future__ import annotations

import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkawire.broker.groups.share import ShareStateStore
from kafkawire.broker.groups.share.partition import (
    ACQUIRE_RECORD_LIMIT, AcknowledgeType, RecordState, SharePartition,
)
from kafkawire.error_codes import ErrorCode

LOCK_S = 10.0
LIMIT = 3
WINDOW = 6
MEMBERS = ("a", "b")
KEY = ("group", uuid.UUID(int=1), 0)


@dataclass
class _Record:
    state: RecordState = RecordState.AVAILABLE
    count: int = 0
    owner: str | None = None
    deadline: float = 0.0


class ShareModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.now = 0.0
        self.log_end = 0
        self.records: dict[int, _Record] = {}  # every offset ever acquired, below the end
        self.start = self.end = 0
        self.partition = self._new(0)
        self.directory = Path(tempfile.mkdtemp(prefix="share-model-"))
        self.store = ShareStateStore(self.directory)
        self.store.load()
        self.store.save(KEY, self.partition.snapshot())

    def teardown(self):
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _write(self) -> None:
        """What the broker does after each change: append an update of what it touched."""
        changes = self.partition.take_changes()
        if changes is not None:
            self.store.update(KEY, *changes)

    @staticmethod
    def _new(start: int) -> SharePartition:
        return SharePartition(start, lock_duration_s=LOCK_S, delivery_count_limit=LIMIT, max_in_flight=WINDOW)

    # ---- the model ----------------------------------------------------------------------------------
    def _release(self, record: _Record) -> None:
        record.state = RecordState.ARCHIVED if record.count >= LIMIT else RecordState.AVAILABLE
        record.owner = None

    def _advance(self) -> None:
        while self.start < self.end and self.records[self.start].state in (RecordState.ACKNOWLEDGED,
                                                                             RecordState.ARCHIVED):
            self.start += 1

    # ---- rules --------------------------------------------------------------------------------------
    @rule(count=st.integers(1, 5))
    def produce(self, count):
        self.log_end += count

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 8))
    def acquire(self, member, max_records):
        expected = []
        offset = self.start
        while len(expected) < max_records and offset < self.log_end:
            if offset < self.end:
                record = self.records[offset]
                if record.state is RecordState.AVAILABLE:
                    expected.append(offset)
            elif self.end - self.start < WINDOW:
                self.records[offset] = _Record()
                self.end += 1
                expected.append(offset)
            else:
                break
            offset += 1
        for offset in expected:
            record = self.records[offset]
            record.state, record.owner, record.deadline = RecordState.ACQUIRED, member, self.now + LOCK_S
            record.count += 1
        # the broker reads the log only through the last offset the acquisition could reach
        fetch_offset, through = self.partition.fetch_offset(), self.partition.acquirable_through(max_records)
        if len(expected) == max_records:
            assert through == expected[-1]
        batches = [(o, o) for o in range(fetch_offset, min(self.log_end, through + 1))]  # one record a batch
        ranges = self.partition.acquire(member, batches, max_records, 2, self.now, ACQUIRE_RECORD_LIMIT)
        self._write()
        got = [o for r in ranges for o in range(r.first_offset, r.last_offset + 1)]
        assert got == expected
        assert all(r.last_offset - r.first_offset < 2 for r in ranges)  # BatchSize
        assert all(r.delivery_count == self.records[r.first_offset].count for r in ranges)

    @rule(member=st.sampled_from(MEMBERS), first=st.integers(0, 30), length=st.integers(1, 3),
          kind=st.sampled_from([AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT]))
    def acknowledge(self, member, first, length, kind):
        offsets = range(first, first + length)
        held = all(o in self.records and o >= self.start and self.records[o].state is RecordState.ACQUIRED
                   and self.records[o].owner == member for o in offsets)
        error = self.partition.acknowledge(member, [(first, first + length - 1, [int(kind)])], self.now)
        self._write()
        assert error == (ErrorCode.NONE if held else ErrorCode.INVALID_RECORD_STATE)
        if not held:
            return  # all or nothing
        for offset in offsets:
            record = self.records[offset]
            if kind is AcknowledgeType.ACCEPT:
                record.state, record.owner = RecordState.ACKNOWLEDGED, None
            elif kind is AcknowledgeType.REJECT:
                record.state, record.owner = RecordState.ARCHIVED, None
            else:
                self._release(record)
        self._advance()

    @rule(seconds=st.sampled_from([1.0, 4.0, LOCK_S]))
    def time_passes(self, seconds):
        self.now += seconds
        for offset in range(self.start, self.end):
            record = self.records[offset]
            if record.state is RecordState.ACQUIRED and record.deadline <= self.now:
                self._release(record)
        self._advance()
        self.partition.expire(self.now)
        self._write()

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member):
        for offset in range(self.start, self.end):
            record = self.records[offset]
            if record.state is RecordState.ACQUIRED and record.owner == member:
                self._release(record)
        self._advance()
        self.partition.release_member(member)
        self._write()

    @rule(step=st.integers(1, 4))
    def log_start_moves(self, step):
        """Retention or DeleteRecords: the records below the new log start leave the window."""
        start = min(self.start + step, self.log_end)
        if start <= self.start:
            return
        for offset in range(self.start, min(start, self.end)):
            del self.records[offset]
        self.start, self.end = start, max(self.end, start)
        self._advance()
        self.partition.move_start(start)
        self._write()

    @rule(back=st.integers(0, 6))
    def offsets_reset(self, back):
        """AlterShareGroupOffsets (in an empty group): the share partition starts afresh at an offset."""
        start = max(self.log_end - back, 0)
        self.records.clear()
        self.start = self.end = start
        self.partition = self._new(start)
        self.store.save(KEY, self.partition.snapshot())

    @rule()
    def restart(self):
        """What the journal keeps comes back: acquired records as their lock expiring leaves them."""
        start, runs = self.store.load()[KEY]
        assert _offsets(start, runs) == _offsets(*self.partition.snapshot())
        self.partition = self._new(0)
        self.partition.restore(start, runs)
        self._write()
        for offset in range(self.start, self.end):
            record = self.records[offset]
            if record.state is RecordState.ACQUIRED:
                self._release(record)  # as if its lock expired
        self._advance()

    # ---- invariants ---------------------------------------------------------------------------------
    @invariant()
    def same_state(self):
        assert (self.partition.start_offset, self.partition.end_offset) == (self.start, self.end)
        modelled = [(o, self.records[o].state, self.records[o].count, self.records[o].owner)
                    for o in range(self.start, self.end)]
        assert list(self.partition.in_flight()) == modelled

    @invariant()
    def window_bounded(self):
        assert self.end - self.start <= WINDOW

    @invariant()
    def delivery_limit(self):
        assert all(self.records[o].count <= LIMIT for o in range(self.start, self.end))


def _offsets(start: int, runs: list[list[int]]) -> tuple[int, list[tuple[int, int, int]]]:
    """A stored state record by record (runs may be split differently and say the same)."""
    return start, [(offset, state, count) for first, last, state, count in runs for offset in range(first, last + 1)]


ShareModel.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestSharePartitionModel = ShareModel.TestCase


def test_batch_optimized_acquisition_takes_the_log_batch_under_way():
    partition = SharePartition(0, lock_duration_s=LOCK_S, delivery_count_limit=LIMIT, max_in_flight=100)
    ranges = partition.acquire("a", [(0, 9), (10, 19)], 3, 100, 0.0)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in ranges] == [(0, 9, 1)]
    ranges = partition.acquire("b", [(10, 19)], 3, 4, 0.0, ACQUIRE_RECORD_LIMIT)
    assert [(r.first_offset, r.last_offset) for r in ranges] == [(10, 12)]


def test_batch_optimized_acquisition_stops_at_the_window():
    partition = SharePartition(0, lock_duration_s=LOCK_S, delivery_count_limit=LIMIT, max_in_flight=5)
    ranges = partition.acquire("a", [(0, 9)], 2, 100, 0.0)
    assert [(r.first_offset, r.last_offset) for r in ranges] == [(0, 4)]


def test_renew_extends_the_lock_only_when_allowed():
    partition = SharePartition(0, lock_duration_s=LOCK_S, delivery_count_limit=LIMIT, max_in_flight=100)
    partition.acquire("a", [(0, 0)], 1, 1, 0.0)
    renew = [(0, 0, [int(AcknowledgeType.RENEW)])]
    assert partition.acknowledge("a", renew, 5.0) == ErrorCode.INVALID_REQUEST
    assert partition.acknowledge("a", renew, 5.0, renew_allowed=True) == ErrorCode.NONE
    assert not partition.expire(LOCK_S + 1)  # renewed at 5: held until 15
    assert partition.expire(5.0 + LOCK_S)
    assert partition.state(0) == (RecordState.AVAILABLE, 1, None)


def test_malformed_acknowledgements_are_invalid_requests():
    partition = SharePartition(0, lock_duration_s=LOCK_S, delivery_count_limit=LIMIT, max_in_flight=100)
    partition.acquire("a", [(0, 3)], 4, 4, 0.0)
    assert partition.acknowledge("a", [(2, 1, [1])], 0.0) == ErrorCode.INVALID_REQUEST
    assert partition.acknowledge("a", [(0, 3, [1, 1])], 0.0) == ErrorCode.INVALID_REQUEST
    assert partition.acknowledge("a", [(0, 0, [9])], 0.0) == ErrorCode.INVALID_REQUEST
    assert partition.acknowledge("a", [(0, 1, [1]), (1, 1, [1])], 0.0) == ErrorCode.INVALID_REQUEST
    assert partition.acknowledge("a", [(0, 3, [1, 0, 3, 2])], 0.0) == ErrorCode.NONE
    assert partition.start_offset == 3 and partition.state(3) == (RecordState.AVAILABLE, 1, None)


def test_an_update_holds_only_what_the_acknowledgement_changed():
    partition = SharePartition(0, lock_duration_s=LOCK_S, delivery_count_limit=LIMIT, max_in_flight=2000)
    partition.acquire("a", [(0, 999)], 1000, 1000, 0.0)
    assert partition.take_changes() == (0, 0, 999, [[0, 999, RecordState.AVAILABLE, 1]])
    one_by_one = [(offset, offset, [int(AcknowledgeType.ACCEPT)]) for offset in range(500, 510)]
    assert partition.acknowledge("a", one_by_one, 0.0) == ErrorCode.NONE
    assert partition.take_changes() == (0, 500, 509, [[500, 509, RecordState.ACKNOWLEDGED, 1]])
    assert partition.take_changes() is None
    assert partition.snapshot() == (0, [[0, 499, RecordState.AVAILABLE, 1], [500, 509, RecordState.ACKNOWLEDGED, 1],
                                        [510, 999, RecordState.AVAILABLE, 1]])

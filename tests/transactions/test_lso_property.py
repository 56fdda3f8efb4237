"""The last stable offset and the aborted-transaction index as a property: a PartitionLog driven by random
appends (plain, idempotent, transactional from a few producers), COMMIT/ABORT markers, segment rolls,
truncations, retention and reopenings (clean or after a crash) is checked after every step against a
model that keeps nothing but the list of batches in the log and the log start offset.

The model derives everything from that list (kafka-semantics.md, KIP-98): a producer's transaction in the
partition opens at its first transactional batch and ends at its marker; the LSO is the first offset of the
oldest open transaction (never below the log start), else the high watermark; an aborted transaction
is (producer id, first offset, marker offset, the LSO once it completed), as ``.txnindex`` keeps it.
Each step then checks:

* ``last_stable_offset`` equals the model's;
* a read_committed fetch (``read_partitions``) from a random offset returns no batch at or past the LSO,
  lists every aborted transaction overlapping what it returned and none that is not an aborted
  transaction overlapping the fetched segment, and, filtered as Kafka's consumer filters it (the
  AbortedTransactions list and the markers), delivers exactly the model's committed records of the range.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from kafkawire.broker.fetch.reads import PartitionRead, read_partitions
from kafkawire.broker.fetch.sessions import SessionPartition
from kafkawire.broker.storage.errors import LogAppendError
from kafkawire.broker.storage.file_records import FileRecords
from kafkawire.broker.storage.remote import RemoteStore
from kafkawire.error_codes import ErrorCode
from kafkawire.records import RecordBatch, iter_batches
from kafkawire.records.control import ControlType, control_record
from support.log_helpers import batch, open_log

TXN_PRODUCERS = (1, 2, 3)
IDEMPOTENT_PRODUCERS = (1001, 1002)
COORDINATOR_EPOCH = 5


@dataclass
class Batch:
    """A batch as the model sees it: what kind, whose, which offsets, and its records' values."""

    kind: str  # "plain", "idempotent", "txn", "commit", "abort"
    producer_id: int
    epoch: int
    base: int
    last: int
    last_seq: int = -1
    values: list[bytes] = field(default_factory=list)


class Model:
    """The partition as a list of batches; everything else is derived from it."""

    def __init__(self):
        self.batches: list[Batch] = []  # every batch appended and not truncated, retention's included
        self.log_start = 0  # retention moved it: the batches below are gone from the log, not from history

    @property
    def leo(self) -> int:
        return self.batches[-1].last + 1 if self.batches else 0

    def _transactions(self):
        """(open: pid -> first offset, aborted: [(pid, first, marker, LSO after)], offset -> visible?)"""
        open_txns: dict[int, int] = {}
        members: dict[int, list[Batch]] = {}
        aborted: list[tuple[int, int, int, int]] = []
        visible: dict[int, bool] = {}
        for b in self.batches:
            if b.kind in ("plain", "idempotent"):
                for offset in range(b.base, b.last + 1):
                    visible[offset] = True
            elif b.kind == "txn":
                open_txns.setdefault(b.producer_id, b.base)
                members.setdefault(b.producer_id, []).append(b)
            else:
                first = open_txns.pop(b.producer_id, None)
                for member in members.pop(b.producer_id, []):
                    for offset in range(member.base, member.last + 1):
                        visible[offset] = b.kind == "commit"
                if first is not None and b.kind == "abort":
                    # the LSO once it completed: the oldest other open transaction, else past the marker
                    aborted.append((b.producer_id, first, b.base, min(open_txns.values(), default=b.base + 1)))
        return open_txns, aborted, visible

    @property
    def last_stable_offset(self) -> int:
        """Never below the log start, where retention may have deleted an open transaction's start."""
        open_txns, _, _ = self._transactions()
        return min(max(min(open_txns.values()), self.log_start), self.leo) if open_txns else self.leo

    def open_transaction(self, producer_id: int) -> bool:
        return producer_id in self._transactions()[0]

    def producer(self, producer_id: int) -> tuple[int, int]:
        """(epoch, next sequence) the log expects from the producer, as its batches left them: a batch
        or marker with a new epoch resets the sequence to 0."""
        epoch, next_seq = 0, 0
        for b in self.batches:
            if b.producer_id != producer_id:
                continue
            if b.epoch != epoch:
                epoch, next_seq = b.epoch, 0
            if b.kind not in ("commit", "abort"):
                next_seq = b.last_seq + 1
        return epoch, next_seq

    def truncate(self, offset: int) -> None:
        """Drop the batch holding ``offset`` and everything after it."""
        self.batches = [b for b in self.batches if b.last < offset]


# ---- the operations -------------------------------------------------------------------------------------

_count = st.integers(1, 4)
operations = st.lists(st.one_of(
    st.tuples(st.just("plain"), _count),
    st.tuples(st.just("idempotent"), st.sampled_from(IDEMPOTENT_PRODUCERS), _count, st.just(False)),
    *[st.tuples(st.just("txn"), st.sampled_from(TXN_PRODUCERS), _count, st.booleans())] * 3,
    *[st.tuples(st.just("end"), st.sampled_from(TXN_PRODUCERS), st.booleans(), st.booleans())] * 2,
    st.tuples(st.just("plain_from_txn_producer"), st.sampled_from(TXN_PRODUCERS)),
    st.tuples(st.just("roll")),
    st.tuples(st.just("truncate"), st.integers(0, 10_000)),
    st.tuples(st.just("retention")),
    st.tuples(st.just("reopen"), st.booleans()),
), min_size=15, max_size=40)

# a fetch after every step: a random offset, a random byte limit (tiny ones cut batches)
fetches = st.tuples(st.one_of(st.integers(0, 20), st.integers(0, 10_000)),  # from the log start, or anywhere
                    st.one_of(st.integers(0, 300), st.integers(300, 5000), st.just(1 << 20), st.just(1 << 20)))


def _values(tag: str, count: int) -> list[bytes]:
    return [f"{tag}-{i}".encode() * 5 for i in range(count)]


def apply(log, model: Model, op, step: int, reopen):
    """Apply one operation to the log and the model; returns the (possibly reopened) log."""
    kind = op[0]
    if kind == "plain":
        values = _values(f"p{step}", op[1])
        result = log.append(batch(values))
        model.batches.append(Batch("plain", -1, -1, result.base_offset, result.last_offset, values=values))
    elif kind in ("idempotent", "txn"):
        _, pid, count, verified = op
        epoch, seq = model.producer(pid)
        values = _values(f"{kind[0]}{pid}-{step}", count)
        validated = log.validate(batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                       transactional=kind == "txn"), log.now_ms())
        if kind == "txn" and not verified and not model.open_transaction(pid):
            # KIP-890: the first transactional batch in a partition needs the coordinator's word
            try:
                log.append_batch(validated)
            except LogAppendError as error:
                assert error.error_code == ErrorCode.INVALID_TXN_STATE
                return log
            raise AssertionError("a transactional batch outside any transaction was accepted")
        result = log.append_batch(validated, transaction_verified=verified)
        assert not result.duplicate
        model.batches.append(Batch(kind, pid, epoch, result.base_offset, result.last_offset, seq + count - 1, values))
    elif kind == "plain_from_txn_producer":
        # a non-transactional batch from a producer with a transaction open here is refused
        pid = op[1]
        epoch, seq = model.producer(pid)
        records = batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        if model.open_transaction(pid):
            try:
                log.append(records)
            except LogAppendError as error:
                assert error.error_code == ErrorCode.INVALID_TXN_STATE
            else:
                raise AssertionError("a plain batch inside an open transaction was accepted")
        else:
            result = log.append(records)
            model.batches.append(Batch("idempotent", pid, epoch, result.base_offset, result.last_offset, seq, [b"x"]))
    elif kind == "end":
        _, pid, commit, bump = op
        epoch, _ = model.producer(pid)
        epoch += bump  # transaction version 2: the marker carries the bumped epoch
        offset = log.append_marker(pid, epoch, commit, COORDINATOR_EPOCH)
        model.batches.append(Batch("commit" if commit else "abort", pid, epoch, offset, offset))
    elif kind == "roll":
        log.roll()
    elif kind == "truncate":
        local_start = log.local_log_start_offset  # a follower never truncates into the remote tier
        if model.leo > local_start:
            offset = local_start + op[1] % (model.leo - local_start)
            truncated = Model()
            truncated.batches = [b for b in model.batches if b.last < offset]
            # nor below its high watermark: it never reopens a transaction whose data was copied to the
            # remote tier (copied as stable, read from there without the LSO bound, as Kafka does)
            if not log.tiered or all(first >= local_start for first in truncated._transactions()[0].values()):
                assert log.truncate_to(offset)
                model.truncate(offset)
    elif kind == "retention":
        log.apply_retention()
        assert log.log_start_offset >= model.log_start
        assert log.log_start_offset in {b.base for b in model.batches} | {model.leo}
        model.log_start = log.log_start_offset
        open_txns = model._transactions()[0]
        below = any(first < model.log_start for first in open_txns.values())
        event(f"retention: open transaction below the log start: {below}")
    elif kind == "reopen":
        if op[1]:
            log.close()
        else:
            log.detach()  # a crash: no producer snapshot, no clean-shutdown marker
        log = reopen()
    return log


# ---- the checks ---------------------------------------------------------------------------------------

def committed_read(log, offset: int, max_bytes: int):
    """A read_committed fetch of one partition, through the broker's fetch path."""
    request = SessionPartition(("t", 0), offset, max_bytes)
    read = PartitionRead(request, "t", 0, log)
    asyncio.run(read_partitions([read], max_bytes, read_committed=True))
    records = read.records
    if isinstance(records, FileRecords):
        data = records.read()
        records.close()
        records = data
    assert read.error == ErrorCode.NONE
    if records:
        event(f"read from the remote tier: {read.remote}")
    return bytes(records), read.aborted or [], read.last_stable_offset


def consume_committed(records: bytes, aborted, fetch_offset: int) -> tuple[list[tuple[int, bytes]], int]:
    """Kafka's consumer in read_committed (``CompletedFetch.nextFetchedRecord``): a transactional batch
    of a producer with an aborted transaction starting at or before the batch's end is skipped, until
    that producer's ABORT marker; control batches are never delivered. Returns the (offset, value) pairs
    delivered and the next offset after the last whole batch."""
    pending = sorted(aborted, key=lambda txn: txn.first_offset)
    aborting: set[int] = set()
    delivered, next_offset = [], fetch_offset
    for header in iter_batches(records):  # a partial last batch is not yielded
        assert isinstance(whole := header, RecordBatch)
        next_offset = whole.last_offset + 1
        if whole.producer_id >= 0:
            while pending and pending[0].first_offset <= whole.last_offset:
                aborting.add(pending.pop(0).producer_id)
            if whole.is_control:
                marker = control_record(next(iter(whole.records())))
                if marker.type == ControlType.ABORT:
                    aborting.discard(whole.producer_id)
                continue
            if whole.is_transactional and whole.producer_id in aborting:
                continue
        delivered += [(r.offset, r.value) for r in whole.records() if r.offset >= fetch_offset]
    return delivered, next_offset


def check(log, model: Model, fetch) -> None:
    lso = model.last_stable_offset
    assert log.log_end_offset == model.leo
    assert log.last_stable_offset == lso, (log.ongoing_transactions, model._transactions()[0])
    open_txns, aborted, visible = model._transactions()
    assert log.ongoing_transactions == open_txns

    offset = model.log_start + fetch[0] % (model.leo - model.log_start + 1)
    records, listed, read_lso = committed_read(log, offset, fetch[1])
    assert read_lso == lso
    delivered, end = consume_committed(records, listed, offset)
    assert end <= max(lso, offset), f"a read_committed fetch returned offsets up to {end - 1}, the LSO is {lso}"
    if not records:
        assert not listed
        assert offset >= lso or fetch[1] < 1 << 20, f"nothing read from {offset}, below the LSO {lso}"
        return
    # exactly the committed records of [offset, end)
    values = {o: v for b in model.batches for o, v in zip(range(b.base, b.last + 1), b.values)}
    assert delivered == [(o, values[o]) for o in range(offset, end) if visible.get(o) and o in values]
    # the AbortedTransactions list: every aborted transaction overlapping what was returned; nothing
    # but aborted transactions overlapping the rest of the fetched segment (the index bounds the search)
    listed_keys = [tuple(t) for t in listed]
    assert len(set(listed_keys)) == len(listed_keys), f"listed twice: {listed_keys}"
    needed = {t for t in aborted if t[2] >= offset and t[1] < end}  # (a marker at or past the fetch offset)
    segment_end = next((s.base_offset for s in log.segments if s.base_offset > offset), model.leo)
    allowed = {t for t in aborted if t[2] >= offset and t[1] < segment_end}
    assert needed <= set(listed_keys) <= allowed, (listed_keys, needed, allowed)
    event(f"aborted transactions listed: {min(len(listed), 3)}{'+' if len(listed) > 3 else ''}")
    event(f"LSO below the log end: {lso < model.leo}")


# retention deletes the first batches of a transaction still open: the LSO is then the log start offset
@example(ops=[("txn", 1, 2, True)] + [("plain", 3)] * 12 + [("retention",), ("reopen", False), ("end", 1, False, True)],
         checks=[(0, 1 << 20)] * 41, segment_bytes=300, interval=0, retention_bytes=700, tiered=False)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, checks=st.lists(fetches, min_size=41, max_size=41), segment_bytes=st.integers(500, 3000),
       interval=st.sampled_from([0, 100, 4096]), retention_bytes=st.sampled_from([-1, -1, 700, 2000]),
       tiered=st.booleans())
def test_lso_and_aborted_index_follow_the_model(tmp_path, ops, checks, segment_bytes, interval, retention_bytes,
                                                tiered):
    """``tiered``: retention copies closed segments to a remote store and deletes them locally under
    local.retention.bytes; fetches below the local log start read the remote tier."""
    path = tmp_path / uuid.uuid4().hex / "t-0"
    config = dict(segment_bytes=segment_bytes, index_interval_bytes=interval, retention_bytes=retention_bytes)
    if tiered:
        config.update(retention_bytes=-1, local_retention_bytes=retention_bytes, remote_storage_enable=True,
                      remote=RemoteStore(path.parent / "remote"))
    log = open_log(path, **config)
    model = Model()
    try:
        check(log, model, checks[0])
        for step, (op, fetch) in enumerate(zip(ops, checks[1:])):
            log = apply(log, model, op, step, lambda: open_log(path, **config))
            check(log, model, fetch)
    finally:
        log.close()

"""The log cleaner's rules one at a time: what is cleanable (the active segment, the last stable offset,
min.compaction.lag.ms), which log is chosen (min.cleanable.dirty.ratio, max.compaction.lag.ms), the
checkpoint file, a crash at every step of the swap, fetches while segments are replaced, and the
topic configs."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from support.compaction_helpers import Writer, clean_fully, compacted_log, read_committed, segment_batches

from kafkawire.broker.config.broker_config import BrokerConfig
from kafkawire.broker.server import Broker
from kafkawire.broker.storage.config import LogConfig
from kafkawire.broker.storage.errors import LogAppendError
from kafkawire.broker.storage.cleaner import cleaner as cleaner_module
from kafkawire.broker.storage.cleaner import files as cleaner_files
from kafkawire.broker.storage.cleaner.cleaner import (
    CleanerAborted,
    LogCleaner,
    cleanable_offsets,
)
from kafkawire.broker.storage.cleaner.manager import CHECKPOINT_FILE, LogCleanerManager
from kafkawire.broker.storage.segment import LogSegment
from kafkawire.error_codes import ErrorCode
from kafkawire.records.batch import RecordBatch
from kafkawire.records.builder import RecordBatchBuilder
from kafkawire.records.compression import Codec


def _fill(writer: Writer, rounds: int = 5, keys: int = 10) -> dict[bytes, tuple[int, bytes]]:
    latest = {}
    for round_ in range(rounds):
        for index in range(keys):
            key, value = b"key-%d" % index, b"value-%d-%d" % (round_, index)
            latest[key] = (writer.append([(key, value)]), value)
    return latest


def _expected(latest):
    return sorted((offset, key, value) for key, (offset, value) in latest.items())


# ---- what is cleanable ------------------------------------------------------------------------------
def test_the_active_segment_is_never_cleaned(tmp_path):
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock, segment_bytes=1 << 20)
    _fill(Writer(log, clock))
    offsets = cleanable_offsets(log, None, clock[0])
    assert offsets.first_uncleanable_offset == 0 and offsets.cleanable_bytes == 0
    assert asyncio.run(LogCleaner(1 << 20).clean(log)).bytes_read == 0
    assert len(read_committed(log)[0]) == 50


def test_cleaning_stops_at_the_segment_holding_the_last_stable_offset(tmp_path):
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock)
    writer = Writer(log, clock)
    _fill(writer, rounds=3)
    log.roll()
    open_at = writer.append([(b"key-1", b"in a transaction")], 21, transactional=True)
    log.roll()
    _fill(writer, rounds=2)
    log.roll()
    assert log.last_stable_offset == open_at
    offsets = cleanable_offsets(log, None, clock[0])
    holding = next(s for s in log.segments if s.base_offset <= open_at < s.next_offset)
    assert offsets.first_uncleanable_offset == holding.base_offset
    checkpoint = clean_fully(log, LogCleaner(1 << 20), clock[0])
    assert checkpoint == holding.base_offset
    seen = read_committed(log, committed=False)[0]
    assert [o for o, *_ in seen if o >= holding.base_offset] == list(range(holding.base_offset, log.log_end_offset))
    writer.end(21, True)  # the transaction ends: the rest becomes cleanable
    log.roll()
    assert clean_fully(log, LogCleaner(1 << 20), clock[0], checkpoint) == log.log_end_offset


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock, min_compaction_lag_ms=60_000)
    writer = Writer(log, clock)
    _fill(writer, rounds=2)
    log.roll()
    old_end = log.log_end_offset
    clock[0] += 60_001
    _fill(writer, rounds=2)
    log.roll()
    offsets = cleanable_offsets(log, None, clock[0])
    assert offsets.first_uncleanable_offset == old_end  # the young segments wait
    clock[0] += 60_001
    assert cleanable_offsets(log, None, clock[0]).first_uncleanable_offset == log.log_end_offset


def _markers(log) -> list[tuple[int, bool]]:
    """(offset, has a delete horizon) of each transaction marker left in the log."""
    found = []
    for segment in log.segments:
        for info in segment.batches():
            if info.attributes & 0x20 and info.count:
                found.append((info.base_offset, bool(info.attributes & 0x40)))
    return found


def test_markers_go_a_delete_retention_after_their_transaction_is_cleaned_away(tmp_path):
    """A COMMIT marker stays while its transaction has batches, an ABORT marker while the round that
    removes its records runs; then each gets a delete horizon, and a round past it drops them."""
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock, producer_id_expiration_ms=1000)
    writer = Writer(log, clock)
    writer.append([(b"a", b"committed")], 21, transactional=True)
    commit = writer.end(21, True)
    writer.append([(b"b", b"aborted")], 22, transactional=True)
    abort = writer.end(22, False)
    writer.append([(b"a", b"newer")])  # the committed record is superseded
    clock[0] += 1001
    assert log.remove_expired_producers() == 2  # no producer's last batch is kept for its sequence
    cleaner = LogCleaner(1 << 20)
    checkpoint = None
    for round_, expected in enumerate(([(commit, False), (abort, False)], [(commit, True), (abort, True)], [])):
        filler = writer.append([(b"filler-%d" % round_, b"x")])  # something dirty for the round
        log.roll()
        checkpoint = clean_fully(log, cleaner, clock[0], checkpoint)
        assert _markers(log) == expected, round_
        clock[0] += log.config.delete_retention_ms + 1
    assert read_committed(log, committed=False)[0][0] == (4, b"a", b"newer")
    assert filler == log.log_end_offset - 1


def test_a_keyless_record_is_refused_by_a_compacted_topic(tmp_path):
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock)
    builder = RecordBatchBuilder()
    builder.append(b"keyed", key=b"k")
    builder.append(b"no key")
    with pytest.raises(LogAppendError) as refused:
        log.validate(builder.build(), clock[0])
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert refused.value.record_errors == [(1, "Compacted topic cannot accept message without key in topic "
                                                "partition t-0.")]


def test_a_compact_only_log_is_not_cut_by_retention(tmp_path):
    clock = [1_000_000]
    for policy, kept in (("compact", 50), ("compact,delete", 0)):
        log = compacted_log(tmp_path / policy.replace(",", "_"), clock, cleanup_policy=policy, retention_ms=1000)
        _fill(Writer(log, clock))
        log.roll()
        log.apply_retention(clock[0] + 10_000)
        assert len(read_committed(log)[0]) == kept


def test_log_config_checks_the_compaction_settings():
    assert LogConfig(cleanup_policy="compact,delete").compact and LogConfig(cleanup_policy="delete, compact").delete
    for bad in ({"cleanup_policy": "shrink"}, {"cleanup_policy": ""}, {"min_cleanable_dirty_ratio": 1.5},
                {"delete_retention_ms": -1}, {"max_compaction_lag_ms": 0},
                {"cleanup_policy": "compact", "remote_storage_enable": True}):
        with pytest.raises(ValueError):
            LogConfig(**bad)
    assert LogConfig(cleanup_policy="compact", segment_ms=10_000, max_compaction_lag_ms=500).max_segment_ms == 500


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD, Codec.LZ4])
def test_rewritten_batches_keep_records_of_any_size_and_codec(tmp_path, codec):
    """Batches that lose some records are rewritten (recompressed; with a delete horizon, every
    timestamp delta moves): records of one-, two- and three-byte lengths come through whole."""
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock, segment_bytes=1 << 20)
    writer = Writer(log, clock)
    latest = {}
    for round_ in range(3):
        batch = [(b"key-%d" % index, None if (index + round_) % 5 == 0 else bytes([round_]) * size)
                 for index, size in enumerate((1, 10, 100, 300, 9000, 20000, 50))]
        base = writer.append(batch[round_:], compression=codec)
        for delta, (key, value) in enumerate(batch[round_:]):
            latest[key] = (base + delta, value)
        clock[0] += 7
    log.roll()
    clean_fully(log, LogCleaner(1 << 20), clock[0])
    assert read_committed(log)[0] == _expected(latest)
    timestamps = {r.offset: r.timestamp for s in log.segments for info in s.batches()
                  for r in RecordBatch(memoryview(s.pread(info.size, info.position))).records()}
    assert timestamps == {offset: 1_000_000 + 7 * (offset >= 7) + 7 * (offset >= 13) for offset in timestamps}


def test_max_compaction_lag_rolls_the_active_segment(tmp_path):
    """segment.ms is capped by max.compaction.lag.ms on a compacted log, so its records become
    cleanable in time (``LogConfig.maxSegmentMs``)."""
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock, segment_bytes=1 << 20, max_compaction_lag_ms=1000)
    writer = Writer(log, clock)
    writer.append([(b"k", b"1")])
    clock[0] += 1001
    writer.append([(b"k", b"2")])
    assert [s.base_offset for s in log.segments] == [0, 1]


# ---- what a round writes -----------------------------------------------------------------------------
def _superseded_segments(writer: Writer, log, producer_id: int = -1, count: int = 4) -> None:
    """``count`` closed segments of records a later segment overwrites, then that segment."""
    for round_ in range(count):
        for index in range(4):
            writer.append([(b"key-%d" % index, b"old-%d" % round_ + b"x" * 150)], producer_id)
        log.roll()
    for index in range(4):
        writer.append([(b"key-%d" % index, b"new")])
    log.roll()


@pytest.mark.parametrize("producer_id", [-1, 7])
def test_a_round_drops_the_batches_it_empties_unless_they_hold_a_producers_last_sequence(tmp_path, producer_id):
    """Kafka's DELETE_EMPTY: a batch with nothing left goes, the last of a segment too, unless it holds
    an active producer's last sequence; the emptied segments are left with no byte, and the next round
    merges them."""
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock)
    writer = Writer(log, clock)
    _superseded_segments(writer, log, producer_id=producer_id)
    writer.append([(b"key-9", b"other")], 8)  # another producer: producer 7's last batch is older
    log.roll()
    emptied = [s.base_offset for s in log.segments[:4]]
    stats = asyncio.run(LogCleaner(1 << 20).clean(log))
    assert stats.groups == 5  # the four full segments alone, the last two small ones together
    batches = segment_batches(log)
    empty = [(info.producer_id, info.last_offset) for segment in batches for info in segment if not info.count]
    assert empty == ([] if producer_id < 0 else [(7, 15)])  # producer 7's last sequence
    assert [s.size for s in log.segments[:4]] == [0, 0, 0, 0 if producer_id < 0 else 61]
    assert read_committed(log)[0] == [(16 + i, b"key-%d" % i, b"new") for i in range(4)] + [(20, b"key-9", b"other")]
    asyncio.run(LogCleaner(1 << 20).clean(log))  # the next round merges the small segments
    assert [s.base_offset for s in log.segments] == [emptied[0], log.log_end_offset]
    sizes = [s.size for s in log.segments]
    assert sizes[0] == sum(info.size for info in segment_batches(log)[0]) > 0 and sizes[1] == 0


def test_an_active_producers_last_batch_stays_empty_with_its_offsets_and_sequence(tmp_path):
    """Kafka's RETAIN_EMPTY: the batch holding an active producer's last sequence stays as a header
    (``writeEmptyHeader``): its base offset, last offset delta, producer, epoch, base sequence and max
    timestamp; a consumer skips it to its last offset + 1."""
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock)
    writer = Writer(log, clock)
    writer.append([(b"a", b"1"), (b"b", b"1")], 7)
    clock[0] += 5
    last = writer.append([(b"a", b"2"), (b"b", b"2"), (b"c", b"2")], 7)
    log.roll()
    original = segment_batches(log)[0]
    writer.append([(b"a", b"3"), (b"b", b"3"), (b"c", b"3")])
    log.roll()
    asyncio.run(LogCleaner(1 << 20).clean(log))
    kept, newest = segment_batches(log)[0]  # the two segments were small: one group
    before = original[1]
    assert (kept.base_offset, kept.last_offset, kept.count) == (last, last + 2, 0)
    assert (kept.producer_id, kept.producer_epoch, kept.base_sequence) == (7, 0, 2)
    assert kept.base_timestamp == kept.max_timestamp == before.max_timestamp
    assert kept.size == 61 and log.producers[7].last_seq == 4 and newest.count == 3
    assert [offset for offset, *_ in read_committed(log)[0]] == [5, 6, 7]


# ---- choosing the log ---------------------------------------------------------------------------------
def test_the_filthiest_log_past_its_ratio_is_chosen_and_the_checkpoint_kept(tmp_path):
    clock = [1_000_000]
    dirty = compacted_log(tmp_path / "dirty-0", clock)
    cleanish = compacted_log(tmp_path / "cleanish-0", clock, min_cleanable_dirty_ratio=1.0)
    deleting = compacted_log(tmp_path / "deleting-0", clock, cleanup_policy="delete")
    for log in (dirty, cleanish, deleting):
        _fill(Writer(log, clock))
        log.roll()
    manager = LogCleanerManager(tmp_path, LogCleaner(1 << 20), now_ms=lambda: clock[0])
    chosen, offsets = manager.filthiest([deleting, cleanish, dirty], clock[0])
    assert chosen is dirty and offsets.cleanable_ratio == 1.0
    stats = asyncio.run(manager.clean_filthiest([deleting, cleanish, dirty]))
    assert stats.end_offset == dirty.log_end_offset == manager.checkpoints["dirty-0"]
    assert (tmp_path / CHECKPOINT_FILE).read_text() == f"0\n1\ndirty 0 {dirty.log_end_offset}\n"
    assert manager.filthiest([deleting, cleanish, dirty], clock[0]) is None  # a ratio must pass min.cleanable.dirty.ratio
    reloaded = LogCleanerManager(tmp_path, LogCleaner(1 << 20))
    reloaded.load()
    assert reloaded.checkpoints == {"dirty-0": dirty.log_end_offset}


def test_max_compaction_lag_forces_a_clean_below_the_ratio(tmp_path):
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=5000)
    _fill(Writer(log, clock))
    log.roll()
    manager = LogCleanerManager(tmp_path, LogCleaner(1 << 20), now_ms=lambda: clock[0])
    assert manager.filthiest([log], clock[0]) is None
    clock[0] += 5001
    assert manager.filthiest([log], clock[0])[0] is log


def test_the_broker_settings_switch_the_cleaner(tmp_path):
    off = BrokerConfig.from_properties({"log.cleaner.enable": "false"}, data_dir=tmp_path)
    assert Broker(off).cleaner is None
    on = BrokerConfig.from_properties({"log.cleaner.dedupe.buffer.size": "1048576", "log.cleaner.backoff.ms": "50"},
                                      data_dir=tmp_path)
    cleaner = Broker(on).cleaner
    assert cleaner is not None and cleaner.backoff_ms == 50 and cleaner.cleaner.offset_map.limit == 943718
    with pytest.raises(ValueError, match="log.cleaner.backoff.ms must be positive"):
        BrokerConfig.from_properties({"log.cleaner.backoff.ms": "0"}, data_dir=tmp_path)


# ---- a crash at every step of the swap ---------------------------------------------------------------
class _Crash(Exception):
    pass


class _CrashingOs:
    """``os`` for cleaner_files, whose renames crash once ``budget`` steps have run."""

    def __init__(self, steps: list[int]):
        self.steps = steps

    def replace(self, source, target):
        _step(self.steps)
        os.replace(source, target)

    def __getattr__(self, name):
        return getattr(os, name)


def _step(steps: list[int]) -> None:
    if steps[0] == 0:
        raise _Crash()
    steps[0] -= 1


def _crash_after(monkeypatch, budget: int) -> None:
    """The swap's renames and segment deletions crash once ``budget`` of them have run."""
    steps = [budget]
    monkeypatch.setattr(cleaner_files, "os", _CrashingOs(steps))
    delete = LogSegment.delete

    def crashing_delete(segment):
        _step(steps)
        delete(segment)

    monkeypatch.setattr(LogSegment, "delete", crashing_delete)


def _crash_log(directory: Path, clock) -> tuple[list, list]:
    """A log with three closed segments; what a consumer reads before and after a full clean."""
    log = compacted_log(directory, clock, segment_bytes=100_000)
    writer = Writer(log, clock)
    for _ in range(3):
        _fill(writer, rounds=3, keys=5)
        writer.append([(b"key-0", b"aborted")], 21, transactional=True)
        writer.end(21, False)  # the cleaned segment gets an aborted-transaction index
        log.roll()
    before = read_committed(log)[0]
    log.close()
    return before


@pytest.mark.parametrize("crash_at", range(12))
def test_a_crash_anywhere_in_the_swap_leaves_a_log_that_opens(tmp_path, monkeypatch, crash_at):
    clock = [1_000_000]
    directory = tmp_path / "t-0"
    before = _crash_log(directory, clock)
    reference = tmp_path / "reference-0"
    _crash_log(reference, clock)
    log = compacted_log(reference, clock, segment_bytes=300_000)
    clean_fully(log, LogCleaner(1 << 20), clock[0])
    after = read_committed(log)[0]
    assert len(log.segments[0].txn_index.entries) == 3  # the aborts whose records the round removed
    log.close()
    assert after != before

    log = compacted_log(directory, clock, segment_bytes=300_000)  # the three segments make one group
    _crash_after(monkeypatch, crash_at)
    try:
        clean_fully(log, LogCleaner(1 << 20), clock[0])
        crashed = False
    except _Crash:
        crashed = True
    monkeypatch.undo()
    log.detach()  # the process dies: no clean shutdown
    reopened = compacted_log(directory, clock, segment_bytes=300_000)
    seen = read_committed(reopened)[0]
    # 3 renames to .swap (the log's last: the commit point), 3 segments deleted, 3 renames back
    assert crashed == (crash_at < 9)
    assert seen == (before if crash_at < 3 else after)
    assert not [p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert reopened.log_end_offset == 51
    # and it cleans, and takes appends, as any log
    Writer(reopened, clock).append([(b"key-0", b"later")])
    reopened.roll()
    clean_fully(reopened, LogCleaner(1 << 20), clock[0])
    assert read_committed(reopened)[0][-1] == (51, b"key-0", b"later")
    reopened.close()


@pytest.mark.parametrize("crash_at", range(8))
def test_a_crash_in_the_swap_of_a_group_whose_last_segment_empties_leaves_the_log_whole(tmp_path, monkeypatch,
                                                                                      crash_at):
    """The cleaned file ends before the group's last segment (all its batches went): recovery replaces
    the segments its offsets reach; one it does not reach stays as it was, and the log reads as
    before the round or after it, with the latest value of every key."""
    clock = [1_000_000]
    directory = tmp_path / "t-0"
    log = compacted_log(directory, clock)
    writer = Writer(log, clock)
    writer.append([(b"kept", b"v")])
    log.roll()
    writer.append([(b"gone", b"old")])
    log.roll()
    writer.append([(b"gone", b"new")] + [(b"filler-%d" % i, b"x" * 40) for i in range(15)])  # its own group
    log.roll()
    before = read_committed(log)[0]
    _crash_after(monkeypatch, crash_at)
    try:
        stats = asyncio.run(LogCleaner(1 << 20).clean(log))
        assert stats.groups == 2
    except _Crash:
        pass
    monkeypatch.undo()
    log.detach()
    reopened = compacted_log(directory, clock)
    seen = read_committed(reopened)[0]
    assert seen in (before, [r for r in before if r[0] != 1])  # "gone"'s old record, or not
    assert not [p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert reopened.log_end_offset == before[-1][0] + 1
    asyncio.run(LogCleaner(1 << 20).clean(reopened))
    assert read_committed(reopened)[0] == [r for r in before if r[0] != 1]
    reopened.close()


def test_a_stopped_round_leaves_the_log_as_it_was(tmp_path, monkeypatch):
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock)
    _fill(Writer(log, clock))
    log.roll()
    before = read_committed(log)[0]
    cleaner = LogCleaner(1 << 20)
    build = cleaner_module.build_offset_map

    def build_then_stop(plan, offsets):
        end = build(plan, offsets)
        cleaner.stop()  # the broker closes while the first group is being written
        return end

    monkeypatch.setattr(cleaner_module, "build_offset_map", build_then_stop)
    with pytest.raises(CleanerAborted):
        asyncio.run(cleaner.clean(log))
    assert read_committed(log)[0] == before
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith((".cleaned", ".swap"))]


# ---- fetches during cleaning -------------------------------------------------------------------------
def test_a_slice_of_a_replaced_segment_still_reads_its_records(tmp_path):
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock, segment_bytes=100_000)
    writer = Writer(log, clock)
    _fill(writer)
    log.roll()
    read = log.read(0, 1 << 20, True, as_file=True)
    old_bytes = read.records.read()
    clean_fully(log, LogCleaner(1 << 20), clock[0])
    assert (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size < len(old_bytes)
    assert read.records.read() == old_bytes  # the slice's descriptor keeps the deleted file
    RecordBatch(memoryview(old_bytes)[:int.from_bytes(old_bytes[8:12], "big") + 12]).verify()
    read.records.close()


def test_fetches_and_appends_go_on_while_a_log_is_cleaned(tmp_path):
    """Reads from the start and appends run on the loop between the cleaner's steps; every read batch
    is whole and CRC-checked, and every record read is the one written at its offset."""
    clock = [1_000_000]
    log = compacted_log(tmp_path / "t-0", clock, segment_bytes=4096)
    writer = Writer(log, clock)
    written: dict[int, tuple[bytes, bytes]] = {}

    def write(count: int) -> None:
        for _ in range(count):
            key, value = b"key-%d" % (len(written) % 17), b"value-%d" % len(written)
            written[writer.append([(key, value)])] = (key, value)

    write(2000)
    log.roll()

    async def main():
        cleaner = LogCleaner(1 << 20)
        task = asyncio.ensure_future(cleaner.clean(log))
        passes = 0
        while not task.done() or passes < 2:
            seen, _ = read_committed(log)
            for offset, key, value in seen:
                assert written[offset] == (key, value)
            assert [o for o, *_ in seen] == sorted({o for o, *_ in seen})
            write(5)
            passes += 1
            await asyncio.sleep(0)
        return await task, passes

    stats, passes = asyncio.run(main())
    assert stats.swapped and stats.groups > 1 and passes > 2
    seen, _ = read_committed(log)
    latest = {}
    for offset, (key, value) in sorted(written.items()):
        if offset < stats.end_offset:
            latest[key] = (offset, value)
    assert [record for record in seen if record[0] < stats.end_offset] == \
        sorted((offset, key, value) for key, (offset, value) in latest.items())

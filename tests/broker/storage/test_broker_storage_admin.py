"""The storage side of the admin APIs (issue 23): the leader-epoch cache as Kafka's LeaderEpochFileCache
answers, DeleteRecords on a PartitionLog (segments below the new start go, the start survives a
restart), a log that leads at a new epoch, and retention that a compact-only policy turns off."""
from __future__ import annotations

import pytest

from kafkawire.broker.storage.config import LogConfig
from kafkawire.broker.storage.errors import OffsetOutOfRange
from kafkawire.broker.storage.log import PartitionLog
from kafkawire.broker.storage.leader_epochs import LeaderEpochCache
from kafkawire.records import RecordBatchBuilder

NOW = 1_700_000_000_000


def _batch(count: int = 1, timestamp: int = NOW) -> bytes:
    builder = RecordBatchBuilder()
    for index in range(count):
        builder.append(b"v%d" % index, key=b"k%d" % index, timestamp=timestamp)  # a compacted log needs keys
    return builder.build()


def test_end_offset_for_as_kafka_answers(tmp_path):
    cache = LeaderEpochCache(tmp_path, [])
    for epoch, start in ((1, 0), (3, 10), (4, 25)):
        cache.assign(epoch, start)
    cache.assign(2, 30)  # older than the latest: ignored
    assert cache.entries == [(1, 0), (3, 10), (4, 25)]
    assert cache.end_offset_for(4, 40) == (4, 40)  # the latest epoch ends at the log end
    assert cache.end_offset_for(1, 40) == (1, 10)
    assert cache.end_offset_for(2, 40) == (1, 10)  # unknown but inside: the epoch below, ended where 3 began
    assert cache.end_offset_for(0, 40) == (0, 0)  # before every epoch: where the first began
    assert cache.end_offset_for(5, 40) == (-1, -1)
    assert cache.end_offset_for(-1, 40) == (-1, -1)
    assert [cache.epoch_for_offset(o) for o in (0, 9, 10, 30)] == [1, 1, 3, 4]
    cache.truncate_from_start(12)
    assert cache.entries == [(3, 12), (4, 25)]
    cache.truncate_from_end(25)
    assert cache.entries == [(3, 12)]
    assert LeaderEpochCache.load(tmp_path, []).entries == [(3, 12)]  # what the checkpoint file says


def test_a_missing_or_corrupt_checkpoint_is_rebuilt_from_the_batches(tmp_path):
    with PartitionLog(tmp_path / "t-0", LogConfig(), now_ms=lambda: NOW) as log:
        log.append(_batch(3))
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    checkpoint.write_text("garbage")
    with PartitionLog(tmp_path / "t-0", LogConfig(), now_ms=lambda: NOW, leader_epoch=2) as log:
        assert log.leader_epochs.entries == [(0, 0), (2, 3)]  # the batches' epoch, then this leadership's
        log.append(_batch(2))
        assert log.end_offset_for_epoch(0) == (0, 3) and log.end_offset_for_epoch(2) == (2, 5)
    assert checkpoint.read_text() == "0\n2\n0 0\n2 3\n"


def test_delete_records_deletes_whole_segments_below_and_survives_a_restart(tmp_path):
    config = LogConfig(segment_bytes=200)
    with PartitionLog(tmp_path / "t-0", config, now_ms=lambda: NOW) as log:
        for _ in range(6):
            log.append(_batch(2))
        segments = len(log.segments)
        assert log.delete_records_before(7) == 7
        assert log.segments[0].base_offset <= 7 < log.segments[0].next_offset
        assert len(log.segments) < segments
        with pytest.raises(OffsetOutOfRange):
            log.delete_records_before(13)
        assert log.delete_records_before(3) == 7  # never backwards
    with PartitionLog(tmp_path / "t-0", config, now_ms=lambda: NOW) as log:
        assert log.log_start_offset == 7
        assert log.leader_epochs.entries == [(0, 7)]
        assert log.delete_records_before(-1) == 12 and log.log_start_offset == log.high_watermark


def test_a_compact_only_log_keeps_old_segments(tmp_path):
    old = NOW - 10_000_000
    for policy, kept in (("delete", False), ("compact", True)):
        config = LogConfig(segment_bytes=200, retention_ms=1000, cleanup_policy=policy)
        with PartitionLog(tmp_path / f"{policy}-0", config, now_ms=lambda: NOW) as log:
            for _ in range(4):
                log.append(_batch(2, timestamp=old))
            log.apply_retention(NOW)
            assert (log.log_start_offset == 0) is kept

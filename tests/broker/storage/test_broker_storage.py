"""The broker's storage layer: partition logs in Kafka's on-disk layout (kafkawire.broker.storage).

Each test names the Kafka behaviour it pins (kafka-semantics.md sections, upstream classes).
"""
from __future__ import annotations

import os
import struct
import time
import uuid

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.broker.storage.errors import LogAppendError, OffsetInRemoteTier, OffsetOutOfRange
from kafkawire.broker.storage.file_records import FileRecords
from kafkawire.broker.storage.local_log import LogOffsetMetadata
from kafkawire.broker.storage.log import PartitionLog
from kafkawire.broker.storage.remote import RemoteStore
from kafkawire.error_codes import ErrorCode
from kafkawire.records import Codec, LegacyMessageSetBuilder, iter_batches
from kafkawire.records.record import TimestampType
from support.log_helpers import NOW, Clock, batch, open_log


def batch_of_size(size: int, *, timestamp: int = NOW) -> bytes:
    """A one-record batch exactly ``size`` bytes long (size >= 70)."""
    for length in range(max(0, size - 75), size):
        built = batch([b"x" * length], timestamp=timestamp)
        if len(built) == size:
            return built
    raise ValueError(f"no one-record batch of {size} bytes")


def offsets_in(records: bytes) -> list[int]:
    return [record.offset for record in iter_records_all(records)]


def iter_records_all(records: bytes):
    for b in iter_batches(records):
        yield from b.records()


def batch_spans(records: bytes) -> list[tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for b in iter_batches(records)]


def append_n(log: PartitionLog, count: int, values_per_batch: int = 1, size: int = 10) -> list[tuple[int, int]]:
    spans = []
    for _ in range(count):
        result = log.append(batch([b"x" * size] * values_per_batch))
        spans.append((result.base_offset, result.last_offset))
    return spans


def expect_error(code: ErrorCode, log: PartitionLog, records, **kwargs) -> LogAppendError:
    leo, size = log.log_end_offset, log.size_in_bytes
    with pytest.raises(LogAppendError) as caught:
        log.append(records, **kwargs)
    assert caught.value.error_code == code, caught.value
    assert (log.log_end_offset, log.size_in_bytes) == (leo, size), "nothing may be appended on error"
    return caught.value


# ---- appending and reading back -------------------------------------------------------------------
def test_append_assigns_offsets_and_round_trips(tmp_path):
    log = open_log(tmp_path / "t-0")
    first = log.append(batch([b"a", b"b", b"c"], key=b"k"))
    second = log.append(batch([b"d"], compression=Codec.GZIP))
    third = log.append(batch([b"e", b"f"], compression=Codec.ZSTD))
    assert (first.base_offset, first.last_offset, first.log_append_time, first.duplicate) == (0, 2, -1, False)
    assert (second.base_offset, second.last_offset) == (3, 3)
    assert (third.base_offset, third.last_offset) == (4, 5)
    assert log.log_end_offset == log.high_watermark == log.last_stable_offset == 6
    read = log.read(0, 1 << 20, True)
    assert not read.first_entry_incomplete
    batches = list(iter_batches(read.records))  # CRCs checked: the rewritten header fields are outside it
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 2), (3, 3), (4, 5)]
    assert all(b.partition_leader_epoch == 0 for b in batches)
    assert [(r.offset, r.value, r.timestamp) for r in iter_records_all(read.records)] == [
        (0, b"a", NOW), (1, b"b", NOW), (2, b"c", NOW), (3, b"d", NOW), (4, b"e", NOW), (5, b"f", NOW)]
    # the file holds exactly these bytes: Kafka's layout
    assert (tmp_path / "t-0" / f"{0:020d}.log").read_bytes() == read.records
    assert (tmp_path / "t-0" / f"{0:020d}.index").exists()


def test_records_may_be_a_memoryview(tmp_path):
    log = open_log(tmp_path / "t-0")
    frame = b"junk" + batch([b"a"])
    assert log.append(memoryview(frame)[4:]).base_offset == 0
    assert offsets_in(log.read(0, 1000, True).records) == [0]


def test_log_append_time_sets_the_flag_max_timestamp_and_crc(tmp_path):
    clock = Clock(NOW + 5000)
    log = open_log(tmp_path / "t-0", message_timestamp_type="LogAppendTime", clock=clock)
    result = log.append(batch([b"a", b"b"], timestamp=NOW))
    assert result.log_append_time == NOW + 5000
    result = log.append(batch([b"c"]), now_ms=NOW + 6000)
    assert result.log_append_time == NOW + 6000
    batches = list(iter_batches(log.read(0, 10_000, True).records))
    assert [b.timestamp_type for b in batches] == [TimestampType.LOG_APPEND_TIME] * 2
    assert [b.max_timestamp for b in batches] == [NOW + 5000, NOW + 6000]
    assert [r.timestamp for b in batches for r in b.records()] == [NOW + 5000, NOW + 5000, NOW + 6000]


def test_create_time_max_timestamp_is_recomputed_from_the_records(tmp_path):
    """LogValidator sets the batch MaxTimestamp from the records (setMaxTimestamp recomputes the CRC)."""
    log = open_log(tmp_path / "t-0")
    data = bytearray(batch([b"a", b"b"], timestamps=[NOW + 7, NOW + 3]))
    struct.pack_into(">q", data, 35, NOW - 1000)  # a producer that wrote the wrong MaxTimestamp
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    log.append(bytes(data))
    (stored,) = iter_batches(log.read(0, 1000, True).records)
    assert stored.max_timestamp == NOW + 7


# ---- validation: Kafka 4.0's codes -------------------------------------------------------------------
def test_bad_crc_is_corrupt_message_and_nothing_is_appended(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"first"]))
    data = bytearray(batch([b"a", b"b"]))
    data[-1] ^= 0xFF
    expect_error(ErrorCode.CORRUPT_MESSAGE, log, bytes(data))
    assert offsets_in(log.read(0, 10_000, True).records) == [0]
    assert log.append(batch([b"next"])).base_offset == 1


@pytest.mark.parametrize("case, code", [
    ("empty", ErrorCode.INVALID_RECORD),  # ProduceRequest.validateRecords: no batch
    ("partial-only", ErrorCode.INVALID_RECORD),
    ("magic1", ErrorCode.INVALID_RECORD),  # Kafka 4: "only allowed to contain record batches with magic version 2"
    ("magic0", ErrorCode.INVALID_RECORD),
    ("magic3", ErrorCode.CORRUPT_MESSAGE),  # ByteBufferLogInputStream: "Invalid magic found in record"
    ("tiny-size", ErrorCode.CORRUPT_MESSAGE),  # entry size below the minimum record overhead (14)
    ("two-batches", ErrorCode.INVALID_RECORD),  # "exactly one record batch per partition"
    ("base-offset", ErrorCode.INVALID_RECORD),  # analyzeAndValidateRecords: baseOffset must be 0
    ("too-large", ErrorCode.MESSAGE_TOO_LARGE),
    ("short-batch", ErrorCode.CORRUPT_MESSAGE),  # smaller than the batch header: isValid() false
    ("count-mismatch", ErrorCode.INVALID_RECORD),  # validateBatch
    ("zero-count", ErrorCode.INVALID_RECORD),
    ("control", ErrorCode.INVALID_RECORD),  # clients may not write control batches
    ("no-sequence", ErrorCode.INVALID_RECORD),  # producer id with base sequence -1
    ("transactional", ErrorCode.INVALID_TXN_STATE),  # not verified with the coordinator: no open transaction
    ("bad-records", ErrorCode.INVALID_RECORD),  # records that do not decode
    ("codec7", ErrorCode.UNKNOWN_SERVER_ERROR),  # CompressionType.forId throws a non-API exception
])
def test_invalid_produce_records(tmp_path, case, code):
    log = open_log(tmp_path / "t-0", max_message_bytes=2000)
    log.append(batch([b"before"]))

    def resign(data: bytearray) -> bytes:
        struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
        return bytes(data)

    good = batch([b"a", b"b"])
    if case == "empty":
        records = b""
    elif case == "partial-only":
        records = good[:-3]
    elif case.startswith("magic") and case != "magic3":
        builder = LegacyMessageSetBuilder(int(case[-1]))
        builder.append(b"x", timestamp=NOW if case == "magic1" else None)
        records = builder.build()
    elif case == "magic3":
        data = bytearray(good)
        data[16] = 3
        records = bytes(data)
    elif case == "tiny-size":
        records = struct.pack(">qi", 0, 10) + b"\0" * 20
    elif case == "two-batches":
        records = good + good
    elif case == "base-offset":
        records = batch([b"a"], base_offset=5)
    elif case == "too-large":
        records = batch([b"x" * 3000])
    elif case == "short-batch":
        records = struct.pack(">qiib", 0, 30, -1, 2) + b"\0" * 25
    elif case == "count-mismatch":
        data = bytearray(good)
        struct.pack_into(">i", data, 57, 3)
        records = resign(data)
    elif case == "zero-count":
        data = bytearray(good)
        struct.pack_into(">i", data, 57, 0)
        records = resign(data)
    elif case == "control":
        data = bytearray(good)
        struct.pack_into(">h", data, 21, 0x20)
        records = resign(data)
    elif case == "no-sequence":
        records = batch([b"a"], producer_id=7, producer_epoch=0, base_sequence=-1)
    elif case == "transactional":
        records = batch([b"a"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    elif case == "bad-records":
        data = bytearray(good)
        data[61] = 0x7F  # the first record's length varint: -64
        records = resign(data)
    elif case == "codec7":
        data = bytearray(good)
        struct.pack_into(">h", data, 21, 7)
        records = resign(data)
    else:
        raise AssertionError(case)
    expect_error(code, log, records)
    assert log.append(batch([b"after"])).base_offset == 1


def test_trailing_partial_batch_is_dropped_as_kafka_trims_it(tmp_path):
    """UnifiedLog.trimInvalidBytes: bytes after the one batch that do not make a whole batch are dropped."""
    log = open_log(tmp_path / "t-0")
    good = batch([b"a"])
    result = log.append(good + batch([b"b"])[:20])
    assert (result.base_offset, result.last_offset) == (0, 0)
    assert log.size_in_bytes == len(good)


def test_batch_larger_than_a_segment_is_record_list_too_large(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=500)
    expect_error(ErrorCode.RECORD_LIST_TOO_LARGE, log, batch([b"x" * 600]))


def test_timestamps_out_of_range_are_invalid_timestamp_with_record_errors(tmp_path):
    log = open_log(tmp_path / "t-0", message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)
    error = expect_error(ErrorCode.INVALID_TIMESTAMP, log,
                         batch([b"a", b"b", b"c"], timestamps=[NOW, NOW - 5000, NOW + 5000]), now_ms=NOW)
    assert [index for index, _ in error.record_errors] == [1, 2]
    assert log.append(batch([b"a"], timestamp=NOW + 999), now_ms=NOW).base_offset == 0


def test_producer_claiming_log_append_time_is_invalid_timestamp(tmp_path):
    log = open_log(tmp_path / "t-0", message_timestamp_type="LogAppendTime")
    expect_error(ErrorCode.INVALID_TIMESTAMP, log, batch([b"a"], timestamp_type=TimestampType.LOG_APPEND_TIME,
                                                           log_append_time=NOW))


# ---- §4.3: what a read returns -------------------------------------------------------------------
@pytest.fixture
def three_batches(tmp_path):
    log = open_log(tmp_path / "t-0")
    sizes = [300, 200, 150]
    for size in sizes:
        log.append(batch_of_size(size))
    return log, sizes


def test_read_mid_batch_offset_returns_the_whole_batch(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"a", b"b", b"c"]))
    log.append(batch([b"d", b"e"]))
    read = log.read(4, 10_000, True)
    assert batch_spans(read.records) == [(3, 4)]  # starts before offset 4
    read = log.read(1, 10_000, True)
    assert batch_spans(read.records) == [(0, 2), (3, 4)]
    assert read.fetch_offset_metadata == LogOffsetMetadata(1, 0, 0)


def test_min_one_message_returns_the_first_batch_beyond_max_bytes(three_batches):
    log, sizes = three_batches
    read = log.read(0, 10, True)
    assert len(read.records) == sizes[0] and not read.first_entry_incomplete
    assert batch_spans(read.records) == [(0, 0)]
    # max_bytes 0 with min_one_message still returns the first batch
    assert len(log.read(1, 0, True).records) == sizes[1]


def test_without_min_one_message_the_first_batch_is_cut_and_flagged(three_batches):
    log, sizes = three_batches
    read = log.read(0, 10, False)
    assert len(read.records) == 10 and read.first_entry_incomplete
    assert list(iter_batches(read.records)) == []
    empty = log.read(0, 0, False)
    assert empty.records == b"" and not empty.first_entry_incomplete


def test_read_may_end_with_a_partial_batch(three_batches):
    log, sizes = three_batches
    read = log.read(0, sizes[0] + 50, False)
    assert len(read.records) == sizes[0] + 50 and not read.first_entry_incomplete
    assert batch_spans(read.records) == [(0, 0)]  # the partial second batch is not a batch
    read = log.read(0, sizes[0] + 50, True)  # max(max_bytes, first batch) = max_bytes here
    assert len(read.records) == sizes[0] + 50


def test_read_at_and_beyond_the_ends(three_batches):
    log, _ = three_batches
    at_end = log.read(3, 1000, True)
    assert at_end.records == b"" and not at_end.first_entry_incomplete
    assert (at_end.high_watermark, at_end.log_start_offset, at_end.last_stable_offset) == (3, 0, 3)
    with pytest.raises(OffsetOutOfRange) as caught:
        log.read(4, 1000, True)
    assert (caught.value.log_start_offset, caught.value.log_end_offset) == (0, 3)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 1000, True)


def test_isolation_bound(three_batches):
    log, sizes = three_batches
    read = log.read(0, 10_000, True, isolation_bound=2)
    assert len(read.records) == sizes[0] + sizes[1]
    assert log.read(2, 10_000, True, isolation_bound=2).records == b""  # fetchOffset == bound
    assert log.read(3, 10_000, True, isolation_bound=2).records == b""  # beyond the bound: empty, no error


def test_a_read_through_an_offset_ends_with_the_batch_holding_it(tmp_path):
    """A share fetch reads only the batches holding records it can acquire (``through_offset``)."""
    log = open_log(tmp_path / "t-0", segment_bytes=1000)
    for values in ([b"a", b"b", b"c"], [b"d", b"e"], [b"f"], [b"g", b"h"]):
        log.append(batch(values))
    assert batch_spans(log.read(1, 10_000, True, through_offset=1).records) == [(0, 2)]
    assert batch_spans(log.read(1, 10_000, True, through_offset=3).records) == [(0, 2), (3, 4)]
    assert batch_spans(log.read(0, 10_000, True, through_offset=4).records) == [(0, 2), (3, 4)]
    assert batch_spans(log.read(0, 10_000, True, through_offset=99).records) == [(0, 2), (3, 4), (5, 5), (6, 7)]
    assert batch_spans(log.read(0, 10_000, True, isolation_bound=5, through_offset=7).records) == [(0, 2), (3, 4)]
    # max_bytes still applies first; at least the first batch with min_one_message
    first = len(batch([b"a", b"b", b"c"]))
    assert len(log.read(0, first + 5, False, through_offset=7).records) == first + 5
    assert batch_spans(log.read(3, 0, True, through_offset=3).records) == [(3, 4)]


def test_min_one_message_examples_from_the_reference(tmp_path):
    """§4.3: PartitionMaxBytes 1 MiB, first batch 2 MiB -> exactly that batch; first batch 100 KiB -> up to
    1 MiB, ending with a partial batch."""
    mib = 1 << 20
    log = open_log(tmp_path / "t-0", max_message_bytes=3 * mib)
    log.append(batch([os.urandom(2 * mib)]))
    for _ in range(15):
        log.append(batch([b"y" * (100 * 1024)]))
    big = log.read(0, mib, True)
    assert len(big.records) == len(batch([b"z" * (2 * mib)])) and batch_spans(big.records) == [(0, 0)]
    small = log.read(1, mib, True)
    assert len(small.records) == mib
    assert len(list(iter_batches(small.records))) == mib // len(batch([b"y" * (100 * 1024)]))


def test_reads_never_span_segments(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1000)
    for _ in range(20):
        log.append(batch_of_size(300))  # three batches per segment
    assert len(log.segments) == 7
    for offset in range(20):
        read = log.read(offset, 1 << 20, True)
        segment_base = offset - offset % 3
        assert batch_spans(read.records) == [(o, o) for o in range(offset, min(segment_base + 3, 20))]


def test_worked_example_4_4_at_the_storage_level(tmp_path):
    """§4.4 (MaxBytes 1000, PartitionMaxBytes 300) as the fetch loop would call each partition's log."""
    p1 = open_log(tmp_path / "t-1")
    p2 = open_log(tmp_path / "t-2")
    p3 = open_log(tmp_path / "t-3")
    p3b = open_log(tmp_path / "t-3b")
    p2.append(batch_of_size(800))
    for _ in range(5):
        p3.append(batch_of_size(150))
    p3b.append(batch_of_size(250))
    # P1: nothing at the fetch offset
    assert p1.read(0, 300, True).records == b""
    # P2: limit 1000, adjusted 300, minOneMessage -> the 800-byte batch
    read = p2.read(0, min(300, 1000), True)
    assert len(read.records) == 800 and not read.first_entry_incomplete
    # P3: limit 200 left, minOneMessage now false -> one batch + 50 bytes
    read = p3.read(0, min(300, 200), False)
    assert len(read.records) == 200 and batch_spans(read.records) == [(0, 0)]
    # P3 with a 250-byte first batch: truncated first entry, flagged for the caller to drop
    read = p3b.read(0, 200, False)
    assert read.first_entry_incomplete
    # P4: limit 0 -> empty
    assert p3.read(0, 0, False).records == b""


# ---- segments and the index ----------------------------------------------------------------------
def kafka_index(sizes_and_last_offsets, interval):
    """Kafka's LogSegment.append rule: before a batch, an entry (its last offset, its position) when more
    than ``interval`` bytes went in since the last entry."""
    entries, since, position = [], 0, 0
    for size, last in sizes_and_last_offsets:
        if since > interval:
            entries.append((last, position))
            since = 0
        since += size
        position += size
    return entries


def test_segments_roll_by_size_and_indexes_follow_kafkas_rule(tmp_path):
    config = dict(segment_bytes=4000, index_interval_bytes=500)
    log = open_log(tmp_path / "t-0", **config)
    written = []  # (size, base, last)
    for i in range(300):
        data = batch([b"v" * (i % 37)] * (1 + i % 4))
        result = log.append(data)
        written.append((len(data), result.base_offset, result.last_offset))
    segments = log.segments
    assert len(segments) >= 10
    # each segment holds what fits: a roll happens when size + batch > segment.bytes
    grouped, current, size = [], [], 0
    for entry in written:
        if current and size + entry[0] > 4000:
            grouped.append(current)
            current, size = [], 0
        current.append(entry)
        size += entry[0]
    grouped.append(current)
    assert [s.base_offset for s in segments] == [g[0][1] for g in grouped]
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix in (".log", ".index"))
    assert names == sorted([f"{s.base_offset:020d}.log" for s in segments]
                           + [f"{s.base_offset:020d}.index" for s in segments])
    for segment, group in zip(segments, grouped):
        assert segment.size == sum(e[0] for e in group)
        expected = kafka_index([(e[0], e[2]) for e in group], 500)
        assert segment.index_entries == expected
        raw = segment.index_path.read_bytes()
        assert [(segment.base_offset + o, p) for o, p in struct.iter_unpack(">ii", raw)] == expected
    # every offset finds its batch through the index
    for size, base, last in written:
        for offset in (base, last):
            read = log.read(offset, 1, True)
            assert batch_spans(read.records) == [(base, last)]
    # and the index survives a restart (rebuilt identically for the active segment)
    log.close()
    log = open_log(tmp_path / "t-0", **config)
    assert [s.index_entries for s in log.segments] == [s.index_entries for s in segments]


def test_explicit_roll_and_empty_roll(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.roll()  # an empty active segment: nothing happens
    assert len(log.segments) == 1
    append_n(log, 3)
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert log.append(batch()).base_offset == 3
    assert (tmp_path / "t-0" / f"{3:020d}.snapshot").exists()  # producer snapshot at the roll, Kafka's name


def test_segment_ms_rolls_by_the_first_batch_timestamp(tmp_path):
    log = open_log(tmp_path / "t-0", segment_ms=1000)
    log.append(batch(timestamp=NOW))
    log.append(batch(timestamp=NOW + 1000))
    assert len(log.segments) == 1
    log.append(batch(timestamp=NOW + 1001))
    assert [s.base_offset for s in log.segments] == [0, 2]


# ---- recovery ---------------------------------------------------------------------------------------
def test_torn_tail_is_truncated_on_restart(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=2000)
    append_n(log, 20, size=50)  # several segments
    leo = log.log_end_offset
    active = log.segments[-1]
    good_size = active.size
    # simulate a crash mid-write: no close(), a partial batch at the end of the active segment
    with open(active.log_path, "ab") as f:
        f.write(batch([b"torn"] * 3)[:-7])
    log = open_log(path, segment_bytes=2000)
    assert log.log_end_offset == leo
    assert log.segments[-1].size == good_size
    assert log.recovered_bytes_truncated > 0
    assert log.append(batch([b"next"])).base_offset == leo
    assert offsets_in(log.read(leo, 10_000, True).records) == [leo]


def test_corrupt_last_batch_is_truncated_on_restart(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path)
    spans = append_n(log, 5, values_per_batch=2)
    active = log.segments[-1]
    data = bytearray(active.log_path.read_bytes())
    last_batch_start = active.size - len(batch([b"x" * 10] * 2))
    data[last_batch_start + 70] ^= 0x01  # a flipped bit inside the last batch
    active.log_path.write_bytes(bytes(data))
    log = open_log(path)
    assert log.log_end_offset == spans[-1][0]  # the corrupt batch is gone
    read = log.read(0, 1 << 20, True)
    assert batch_spans(read.records) == spans[:-1]
    assert log.append(batch([b"again"])).base_offset == spans[-1][0]


def test_corrupt_batch_in_the_middle_cuts_everything_after_it(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path)
    spans = append_n(log, 6)
    sizes = len(batch([b"x" * 10]))
    data = bytearray(log.segments[-1].log_path.read_bytes())
    data[2 * sizes + 30] ^= 0x40
    log.segments[-1].log_path.write_bytes(bytes(data))
    log = open_log(path)
    assert log.log_end_offset == 2 and batch_spans(log.read(0, 10_000, True).records) == spans[:2]


def test_clean_close_reopens_without_recovery(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=3000)
    spans = append_n(log, 40)
    log.close()
    assert (path / ".kafkawire-clean-shutdown").exists()
    log = open_log(path, segment_bytes=3000)
    assert not (path / ".kafkawire-clean-shutdown").exists()  # a later crash must recover
    assert log.log_end_offset == 40 and batch_spans(log.read(0, 1 << 20, True).records)[0] == spans[0]
    # a stale marker (the file changed after it was written) is not trusted
    log.append(batch())
    log.close()
    with open(log.segments[-1].log_path, "ab") as f:
        f.write(b"\x00" * 30)
    log = open_log(path, segment_bytes=3000)
    assert log.log_end_offset == 41 and log.recovered_bytes_truncated == 30


def test_bad_index_of_a_closed_segment_is_rebuilt(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=3000, index_interval_bytes=100)
    append_n(log, 60)
    first = log.segments[0]
    expected = first.index_entries
    assert expected
    log.close()
    first.index_path.write_bytes(b"\x00\x00\x00\x05garbage")
    log = open_log(path, segment_bytes=3000, index_interval_bytes=100)
    assert log.segments[0].index_entries == expected
    for offset in range(60):
        assert offsets_in(log.read(offset, 1, True).records) == [offset]


# ---- idempotent producers ----------------------------------------------------------------------------
def pbatch(pid, epoch, seq, count=1, value=b"v", timestamp=None):
    return batch([value] * count, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                 timestamp=timestamp if timestamp is not None else NOW)


def test_duplicate_of_a_recent_batch_returns_the_original_offsets(tmp_path):
    log = open_log(tmp_path / "t-0")
    results = [log.append(pbatch(1, 0, seq, 2)) for seq in range(0, 14, 2)]  # 7 batches, seqs 0..13
    leo = log.log_end_offset
    for retry in (6, 5):  # the 5 most recent batches are remembered
        again = log.append(pbatch(1, 0, 2 * retry, 2))
        assert again.duplicate
        assert (again.base_offset, again.last_offset) == (results[retry].base_offset, results[retry].last_offset)
        assert log.log_end_offset == leo
    # an older batch than the last five is not recognised: its sequence is out of order
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, pbatch(1, 0, 0, 2))
    assert log.append(pbatch(1, 0, 14)).base_offset == leo


def test_sequence_gap_fencing_and_new_epochs(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append(pbatch(9, 3, 0))
    log.append(pbatch(9, 3, 1))
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, pbatch(9, 3, 5))  # gap
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, log, pbatch(9, 2, 2))  # an older epoch is fenced
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, pbatch(9, 4, 3))  # new epoch must start at 0
    assert log.append(pbatch(9, 4, 0)).base_offset == 2
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, log, pbatch(9, 3, 2))
    # an unknown producer may start at any sequence (no state since KIP-360)
    assert log.append(pbatch(10, 0, 42)).base_offset == 3
    assert log.append(pbatch(10, 0, 43)).base_offset == 4
    # non-idempotent batches are not checked
    assert log.append(batch()).base_offset == 5


def test_sequence_wraps_at_int32_max(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append(pbatch(5, 0, 0x7FFFFFFF - 1, count=2))  # sequences max-1, max
    assert log.append(pbatch(5, 0, 0, count=1)).base_offset == 2
    assert log.append(pbatch(5, 0, 0x7FFFFFFF - 1, count=2)).duplicate  # still among the last five


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_a_restart(tmp_path, clean):
    path = tmp_path / "t-0"
    clock = Clock(NOW)
    log = open_log(path, segment_bytes=1200, clock=clock)
    for seq in range(20):
        log.append(pbatch(77, 1, seq))
    if clean:
        log.close()
    log = open_log(path, segment_bytes=1200, clock=clock)
    assert log.append(pbatch(77, 1, 19)).duplicate
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, pbatch(77, 1, 21))
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, log, pbatch(77, 0, 0))
    assert log.append(pbatch(77, 1, 20)).base_offset == 20


def test_producer_state_is_rebuilt_from_the_log_without_snapshots(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=1200)
    for seq in range(20):
        log.append(pbatch(77, 1, seq))
    for snapshot in path.glob("*.snapshot"):
        snapshot.unlink()
    log = open_log(path, segment_bytes=1200)
    assert log.append(pbatch(77, 1, 18)).duplicate
    assert log.append(pbatch(77, 1, 20)).base_offset == 20


def test_snapshot_file_is_kafkas_format(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path)
    log.append(pbatch(123, 4, 0, count=3))
    log.close()
    data = (path / f"{3:020d}.snapshot").read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1) and crc == crc32c(data[6:])
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (123, 4, 2, 2, 2, NOW, -1, -1)


def test_expired_producers_are_forgotten(tmp_path):
    log = open_log(tmp_path / "t-0", producer_id_expiration_ms=1000)
    log.append(pbatch(1, 0, 0))
    assert log.remove_expired_producers(NOW + 999) == 0
    assert log.remove_expired_producers(NOW + 1000) == 1
    assert log.append(pbatch(1, 0, 9)).base_offset == 1  # unknown again: any sequence


# ---- retention --------------------------------------------------------------------------------------
def test_retention_by_size(tmp_path):
    size = len(batch_of_size(300))
    log = open_log(tmp_path / "t-0", segment_bytes=1000, retention_bytes=2000)
    for _ in range(20):
        log.append(batch_of_size(300))  # 7 segments of 900 bytes (the last 600)
    total = log.size_in_bytes
    assert total == 20 * size
    removed = log.apply_retention(NOW)
    # deleteRetentionSizeBreachedSegments: oldest first while (size - retention) - segment >= 0
    assert removed == 4 and log.size_in_bytes == total - 4 * 900
    assert log.log_start_offset == log.local_log_start_offset == 12
    assert not (tmp_path / "t-0" / f"{0:020d}.log").exists()
    assert not (tmp_path / "t-0" / f"{0:020d}.index").exists()
    with pytest.raises(OffsetOutOfRange) as caught:
        log.read(11, 1000, True)
    assert caught.value.log_start_offset == 12
    assert offsets_in(log.read(12, 300, True).records) == [12]
    assert log.apply_retention(NOW) == 0
    log.close()
    assert open_log(tmp_path / "t-0", segment_bytes=1000).log_start_offset == 12


def test_retention_by_time(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1000, retention_ms=10_000)
    for i in range(9):
        log.append(batch_of_size(300, timestamp=NOW + i * 1000))  # segments of 3 batches
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert log.apply_retention(NOW + 12_000) == 0  # newest in segment 0 is NOW+2000: 10000 not > 10000
    assert log.apply_retention(NOW + 12_001) == 1
    assert log.log_start_offset == 3
    # everything expired: the active segment goes too, after a roll; the log end offset stays
    assert log.apply_retention(NOW + 100_000) == 2
    assert [s.base_offset for s in log.segments] == [9]
    assert log.log_start_offset == log.log_end_offset == 9
    assert log.read(9, 1000, True).records == b""
    assert log.append(batch()).base_offset == 9


def test_no_retention_when_unlimited(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1000, retention_ms=-1, retention_bytes=-1)
    for _ in range(10):
        log.append(batch_of_size(300, timestamp=0))
    assert log.apply_retention(NOW) == 0 and log.log_start_offset == 0


# ---- the remote tier --------------------------------------------------------------------------------
def tiered_log(tmp_path, latency=0.0, **config):
    store = RemoteStore(tmp_path / "remote", read_latency_ms=latency)
    options = dict(segment_bytes=1000, remote_storage_enable=True, local_retention_bytes=1000)
    options.update(config)
    return open_log(tmp_path / "data" / "t-0", remote=store, **options), store


def test_remote_tier_moves_closed_segments_and_serves_them(tmp_path):
    log, store = tiered_log(tmp_path)
    for i in range(20):
        log.append(batch_of_size(300, timestamp=NOW + i))
    before = {offset: log.read(offset, 700, True).records for offset in range(20)}
    before_small = {offset: log.read(offset, 100, False) for offset in range(20)}
    removed = log.apply_retention(NOW)
    assert removed == 5  # local.retention.bytes 1000: keep 1 segment of 900 plus the active 600
    assert log.log_start_offset == 0 and log.local_log_start_offset == 15
    remote_dir = tmp_path / "remote" / "t-0"
    assert sorted(p.name for p in remote_dir.iterdir()) == sorted(
        f"{b:020d}{s}" for b in (0, 3, 6, 9, 12, 15) for s in (".log", ".index", ".meta"))
    assert [s.base_offset for s in log.remote_segments] == [0, 3, 6, 9, 12, 15]
    with pytest.raises(OffsetInRemoteTier) as caught:
        log.read(4, 1000, True)
    assert caught.value.local_log_start_offset == 15
    with pytest.raises(OffsetInRemoteTier):
        log.bytes_available(4, 1000)
    for offset in range(15):
        remote = log.read_remote(offset, 700, True)
        assert remote.records == before[offset]  # same bytes, never past its segment
        assert (remote.log_start_offset, remote.high_watermark) == (0, 20)
        small = log.read_remote(offset, 100, False)  # the first batch does not fit: empty records
        assert small.records == b"" and before_small[offset].first_entry_incomplete
        assert len(log.read_remote(offset, 100, True).records) == 300  # min_one_message: the whole first batch
    assert offsets_in(log.read(15, 10_000, True).records) == [15, 16, 17]
    assert log.read_remote(15, 700, True).records == before[15]  # copied, and still local too
    with pytest.raises(OffsetOutOfRange):
        log.read_remote(18, 1000, True)  # the active segment is never remote
    # the remote tier survives a restart
    log.close()
    log = open_log(tmp_path / "data" / "t-0", remote=store, segment_bytes=1000, remote_storage_enable=True,
                   local_retention_bytes=1000)
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 15)
    assert log.read_remote(3, 700, True).records == before[3]
    assert log.offset_for_timestamp(NOW + 4) == (4, NOW + 4)
    assert log.offset_for_timestamp(NOW + 16) == (16, NOW + 16)


def test_remote_read_latency_is_honoured(tmp_path):
    log, _ = tiered_log(tmp_path, latency=80)
    for _ in range(10):
        log.append(batch_of_size(300))
    log.apply_retention(NOW)
    started = time.monotonic()
    assert log.read_remote(0, 1000, True).records
    assert time.monotonic() - started >= 0.08


def test_remote_retention_advances_the_log_start_offset(tmp_path):
    log, _ = tiered_log(tmp_path, retention_bytes=3000)
    for _ in range(20):
        log.append(batch_of_size(300))
    removed = log.apply_retention(NOW)
    # local: 5 deleted (copied first). Remote: 6 segments of 900 + 600 local-only = 6000 bytes, 3000 over
    # retention: the three oldest remote segments go
    assert log.log_start_offset == 9 and log.local_log_start_offset == 15
    assert removed == 5 + 3
    assert [s.base_offset for s in log.remote_segments] == [9, 12, 15]
    with pytest.raises(OffsetOutOfRange) as caught:
        log.read(8, 1000, True)
    assert not isinstance(caught.value, OffsetInRemoteTier)
    with pytest.raises(OffsetOutOfRange):
        log.read_remote(8, 1000, True)
    assert offsets_in(log.read_remote(9, 300, True).records) == [9]


def test_tiered_log_rolls_a_breached_active_segment(tmp_path):
    log, _ = tiered_log(tmp_path, local_retention_ms=1000, local_retention_bytes=-2)
    log.append(batch_of_size(300, timestamp=NOW))
    log.append(batch_of_size(300, timestamp=NOW))
    assert len(log.segments) == 1
    removed = log.apply_retention(NOW + 5000)
    assert removed == 1
    assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset) == (0, 2, 2)
    assert offsets_in(log.read_remote(0, 1000, True).records) == [0, 1]


def test_untiered_log_ignores_the_remote_store(tmp_path):
    store = RemoteStore(tmp_path / "remote")
    log = open_log(tmp_path / "t-0", remote=store, segment_bytes=1000, retention_bytes=1000)
    for _ in range(10):
        log.append(batch_of_size(300))
    log.apply_retention(NOW)
    assert not any((tmp_path / "remote").iterdir())
    with pytest.raises(OffsetOutOfRange):
        log.read_remote(0, 1000, True)


# ---- ListOffsets ----------------------------------------------------------------------------------------
def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1000)
    log.append(batch([b"a", b"b", b"c"], timestamps=[NOW + 10, NOW + 30, NOW + 20]))  # 0..2
    log.append(batch([b"d"], timestamps=[NOW + 40]))  # 3
    for i in range(10):
        log.append(batch_of_size(300, timestamp=NOW + 100 + i))  # 4..13, several segments
    assert log.offset_for_timestamp(NOW) == (0, NOW + 10)
    assert log.offset_for_timestamp(NOW + 11) == (1, NOW + 30)  # first record >= target, inside the batch
    assert log.offset_for_timestamp(NOW + 25) == (1, NOW + 30)
    assert log.offset_for_timestamp(NOW + 31) == (3, NOW + 40)
    assert log.offset_for_timestamp(NOW + 105) == (9, NOW + 105)
    assert log.offset_for_timestamp(NOW + 110) is None
    # after retention the search starts at the log start
    log.config.retention_bytes = 1000
    log.apply_retention(NOW)
    assert log.offset_for_timestamp(NOW) == (log.log_start_offset, NOW + 100 + log.log_start_offset - 4)


def test_offset_for_timestamp_log_append_time(tmp_path):
    clock = Clock(NOW)
    log = open_log(tmp_path / "t-0", message_timestamp_type="LogAppendTime", clock=clock)
    log.append(batch([b"a", b"b"], timestamp=1))
    clock.now = NOW + 50
    log.append(batch([b"c"], timestamp=1))
    assert log.offset_for_timestamp(2) == (0, NOW)
    assert log.offset_for_timestamp(NOW + 1) == (2, NOW + 50)


def test_max_timestamp_offset(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1000)
    assert log.max_timestamp_offset() is None
    log.append(batch([b"a", b"b", b"c"], timestamps=[NOW + 10, NOW + 90, NOW + 90]))
    for i in range(6):
        log.append(batch_of_size(300, timestamp=NOW + i))
    assert log.max_timestamp_offset() == (1, NOW + 90)  # the first record holding the max
    log.close()
    assert open_log(tmp_path / "t-0", segment_bytes=1000).max_timestamp_offset() == (1, NOW + 90)


# ---- parked fetches ---------------------------------------------------------------------------------------
def test_bytes_available_and_case_f(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1000)
    log.append(batch_of_size(300))
    log.append(batch_of_size(300))
    assert log.bytes_available(0, 10_000) == 600
    assert log.bytes_available(1, 10_000) == 300
    assert log.bytes_available(0, 100) == 100
    assert log.bytes_available(2, 10_000) == 0
    assert log.bytes_available(0, 10_000, isolation_bound=1) == 300
    parked = log.read(2, 1000, True).fetch_offset_metadata
    assert parked == LogOffsetMetadata(2, 0, 600)
    assert not log.must_complete_fetch(2, fetch_metadata=parked)
    log.append(batch_of_size(300))
    log.append(batch_of_size(300))  # rolls: offset 3 starts segment 3
    assert log.must_complete_fetch(2, fetch_metadata=parked)  # the fetch is on an older segment
    assert log.must_complete_fetch(0)
    assert not log.must_complete_fetch(3)
    assert log.bytes_available(0, 10_000) == 900  # the rest of the segment holding offset 0
    with pytest.raises(OffsetOutOfRange):
        log.bytes_available(5, 100)


# ---- a property: random appends, rolls, restarts and reads against a simple model ---------------------
class Model:
    def __init__(self, segment_bytes):
        self.segment_bytes = segment_bytes
        self.segments = [[]]  # lists of (base, last, bytes)
        self.leo = 0

    def append(self, data: bytes) -> tuple[int, int]:
        count = struct.unpack_from(">i", data, 57)[0]
        base, last = self.leo, self.leo + count - 1
        stored = bytearray(data)
        struct.pack_into(">q", stored, 0, base)
        struct.pack_into(">i", stored, 12, 0)
        active = self.segments[-1]
        if sum(len(b) for _, _, b in active) > self.segment_bytes - len(stored):
            self.segments.append([])
        self.segments[-1].append((base, last, bytes(stored)))
        self.leo = last + 1
        return base, last

    def roll(self):
        if self.segments[-1]:
            self.segments.append([])

    def read(self, offset, max_bytes, min_one):
        for segment in self.segments:
            position = 0
            data = b"".join(b for _, _, b in segment)
            for base, last, stored in segment:
                if last >= offset:
                    adjusted = max(max_bytes, len(stored)) if min_one else max_bytes
                    if adjusted == 0:
                        return b"", False
                    return data[position:position + min(len(data) - position, adjusted)], adjusted < len(stored)
                position += len(stored)
        return b"", False


operations = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5), st.integers(0, 400), st.sampled_from([Codec.NONE, Codec.LZ4])),
    st.tuples(st.just("roll")),
    st.tuples(st.just("restart"), st.booleans()),
    st.tuples(st.just("read"), st.integers(0, 10_000), st.integers(0, 3000), st.booleans()),
), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, segment_bytes=st.integers(600, 3000), interval=st.sampled_from([0, 64, 500, 4096]))
def test_random_logs_read_like_the_model(tmp_path, ops, segment_bytes, interval):
    path = tmp_path / uuid.uuid4().hex / "t-0"
    config = dict(segment_bytes=segment_bytes, index_interval_bytes=interval)
    log = open_log(path, **config)
    model = Model(segment_bytes)
    try:
        for op in ops:
            if op[0] == "append":
                _, count, size, codec = op
                data = batch([os.urandom(size // count)] * count, compression=codec)
                result = log.append(data)
                assert (result.base_offset, result.last_offset) == model.append(data)
            elif op[0] == "roll":
                log.roll()
                model.roll()
            elif op[0] == "restart":
                if op[1]:
                    log.close()
                log = open_log(path, **config)
                model.segments = [s for s in model.segments if s] or [[]]
                if log.segments[-1].size == 0 and model.segments[-1]:
                    model.roll()  # a clean close may leave an empty active segment behind after a roll
            else:
                _, offset, max_bytes, min_one = op
                if model.leo == 0:
                    offset = 0
                else:
                    offset %= model.leo + 1
                read = log.read(offset, max_bytes, min_one)
                records, incomplete = model.read(offset, max_bytes, min_one)
                assert read.records == records
                assert read.first_entry_incomplete == incomplete
            assert log.log_end_offset == model.leo
            assert [s.base_offset for s in log.segments if s.size] == [s[0][0] for s in model.segments if s]
        # every offset is readable through the index
        for offset in range(model.leo):
            assert log.read(offset, 0, True).records == model.read(offset, 0, True)[0]
    finally:
        log.close()


tiered_operations = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 500)),
    st.tuples(st.just("roll")),
    st.tuples(st.just("retention")),
    st.tuples(st.just("restart"), st.booleans()),
    st.tuples(st.just("read"), st.integers(0, 10_000), st.integers(0, 2000), st.booleans()),
), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=tiered_operations, segment_bytes=st.integers(600, 2000), local_retention=st.integers(0, 3000))
def test_random_tiered_logs_serve_remote_offsets_like_local_ones(tmp_path, ops, segment_bytes, local_retention):
    """Whatever moved to the remote tier reads back as the local log would have served it (§5 semantics:
    the same slice of the same segment; a first batch that does not fit gives nothing, flagged)."""
    root = tmp_path / uuid.uuid4().hex
    store = RemoteStore(root / "remote")
    config = dict(segment_bytes=segment_bytes, remote_storage_enable=True, local_retention_bytes=local_retention)
    log = open_log(root / "data" / "t-0", remote=store, **config)
    model = Model(segment_bytes)
    try:
        for op in ops:
            if op[0] == "append":
                _, count, size = op
                data = batch([os.urandom(size // count)] * count)
                assert (log.append(data).base_offset, log.log_end_offset - 1) == model.append(data)
            elif op[0] == "roll":
                log.roll()
                model.roll()
            elif op[0] == "retention":
                log.apply_retention(NOW)
                if log.segments[-1].size == 0 and model.segments[-1]:
                    model.roll()  # a breached active segment was rolled to be tiered
            elif op[0] == "restart":
                if op[1]:
                    log.close()
                log = open_log(root / "data" / "t-0", remote=store, **config)
            else:
                _, offset, max_bytes, min_one = op
                check_tiered_read(log, model, offset % (model.leo + 1), max_bytes, min_one)
            assert log.log_start_offset == 0  # retention.* unlimited: the remote tier keeps everything
            assert log.local_log_start_offset <= log.log_end_offset == model.leo
            remote_bases = [s.base_offset for s in log.remote_segments]
            assert remote_bases == sorted(remote_bases)
            if log.local_log_start_offset > 0:
                assert log.remote_segments[0].base_offset == 0
                assert log.highest_offset_in_remote_storage >= log.local_log_start_offset - 1
        log.apply_retention(NOW)
        for offset in range(model.leo + 1):
            for max_bytes, min_one in ((0, True), (1, False), (250, False), (700, True), (5000, False)):
                check_tiered_read(log, model, offset, max_bytes, min_one)
    finally:
        log.close()


def check_tiered_read(log, model, offset, max_bytes, min_one):
    records, incomplete = model.read(offset, max_bytes, min_one)
    if offset < log.local_log_start_offset:
        with pytest.raises(OffsetInRemoteTier):
            log.read(offset, max_bytes, min_one)
        read = log.read_remote(offset, max_bytes, min_one)
        assert not read.first_entry_incomplete  # upstream answers empty records, unflagged
        assert read.records == (b"" if incomplete else records)
    else:
        read = log.read(offset, max_bytes, min_one)
        assert (read.records, read.first_entry_incomplete) == (records, incomplete)


def test_failed_write_leaves_no_torn_batch(tmp_path, monkeypatch):
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"a"]))
    size = log.size_in_bytes
    real_pwrite = os.pwrite

    def failing_pwrite(fd, data, offset):
        real_pwrite(fd, bytes(data[:10]), offset)  # part of the batch reaches the file, then the disk fails
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", failing_pwrite)
    error = expect_error(ErrorCode.KAFKA_STORAGE_ERROR, log, batch([b"b"]))
    assert "No space" in error.message
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    assert os.path.getsize(log.segments[-1].log_path) == size
    assert log.append(batch([b"c"])).base_offset == 1
    log.close()
    assert offsets_in(open_log(tmp_path / "t-0").read(0, 1000, True).records) == [0, 1]


def test_remote_reads_from_threads_while_the_log_moves(tmp_path):
    import threading

    log, _ = tiered_log(tmp_path, retention_bytes=20_000)
    for _ in range(30):
        log.append(batch_of_size(300))
    log.apply_retention(NOW)
    failures = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            offset = log.log_start_offset
            try:
                read = log.read_remote(offset, 1000, True)
                if read.records:
                    first = next(iter_batches(read.records))
                    assert first.base_offset <= offset <= first.last_offset
            except OffsetOutOfRange:
                pass
            except Exception as error:  # noqa: BLE001 - any other failure is a bug
                failures.append(error)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    for _ in range(200):
        log.append(batch_of_size(300))
        log.apply_retention(NOW)
    stop.set()
    for thread in threads:
        thread.join()
    assert not failures
    assert log.log_start_offset > 0


def test_delete_removes_local_and_remote_files(tmp_path):
    log, store = tiered_log(tmp_path)
    for _ in range(10):
        log.append(batch_of_size(300))
    log.apply_retention(NOW)
    assert any(store.partition_dir("t-0").iterdir())
    log.delete()
    assert not (tmp_path / "data" / "t-0").exists() and not store.partition_dir("t-0").exists()


def test_preallocated_kafka_index_with_zero_entries_is_rebuilt(tmp_path):
    """Kafka preallocates index files; a closed segment's index with trailing zero entries fails the
    sanity check and is rebuilt from the batches."""
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=3000, index_interval_bytes=100)
    append_n(log, 60)
    expected = log.segments[0].index_entries
    log.close()
    index = log.segments[0].index_path
    index.write_bytes(index.read_bytes() + b"\0" * 64)
    log = open_log(path, segment_bytes=3000, index_interval_bytes=100)
    assert log.segments[0].index_entries == expected


def test_reads_as_file_slices_hold_the_same_bytes_and_outlive_retention(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1000, retention_bytes=1000)
    for _ in range(8):
        log.append(batch_of_size(300))
    for offset, max_bytes, min_one in [(0, 700, True), (1, 10, True), (0, 10, False), (4, 5000, True)]:
        as_bytes, as_file = log.read(offset, max_bytes, min_one), log.read(offset, max_bytes, min_one, as_file=True)
        assert isinstance(as_file.records, FileRecords) and len(as_file.records) == len(as_bytes.records)
        assert as_file.records.read() == as_bytes.records
        assert as_file.first_entry_incomplete == as_bytes.first_entry_incomplete
    assert log.read(8, 1000, True, as_file=True).records == b""  # at the end: nothing to slice
    # A slice keeps its own descriptor: the segment deleted and closed under it, it still reads its bytes.
    kept = log.read(0, 600, True, as_file=True).records
    expected = log.read(0, 600, True).records
    assert log.apply_retention(NOW) > 0 and not (tmp_path / "t-0" / f"{0:020d}.log").exists()
    assert kept.read() == expected
    kept.close()
    with pytest.raises(OSError):
        kept.read()

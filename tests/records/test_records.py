"""kafkawire.records: round trips for every magic and codec, the layouts, control records, and the
documented errors for bad input (CRC mismatches, wrong lengths, negative counts, varint overflow,
truncated or oversized compressed data)."""
from __future__ import annotations

import struct
import zlib

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from kafkawire.errors import CompressionError, CorruptRecordError, DecompressionLimitError, RecordsError
from kafkawire.records import (
    Codec, ControlType, Header, LegacyBatch, LegacyMessageSetBuilder, Record, RecordBatch, RecordBatchBuilder,
    TimestampType, control_record, iter_batches, iter_records, read_batches, transaction_marker_batch,
)
from kafkawire.records.layouts import (
    BATCH_HEADER, BATCH_HEADER_SIZE, CONTROL_KEY, END_TXN_MARKER, LEGACY_HEADER_V0, LEGACY_HEADER_V1, packed,
)
from kafkawire.records.varints import read_varint, read_varlong, varint_size, write_varint, write_varlong

SETTINGS = settings(max_examples=60, deadline=None, database=InMemoryExampleDatabase(),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MAX = (1 << 31) - 1

maybe_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=12), maybe_bytes).map(lambda h: Header(*h)), max_size=4)


# Kafka refuses negative timestamps other than -1 (no timestamp); the extremes are the interesting ones.
timestamps = st.integers(-1, INT64_MAX) | st.sampled_from([-1, 0, INT64_MAX, INT64_MAX - 1])


def records_v2():
    """Lists of (key, value, headers, timestamp)."""
    return st.lists(st.tuples(maybe_bytes, maybe_bytes, headers, timestamps), max_size=12)


# ---- layouts and varints -------------------------------------------------------------------------------

def test_layout_sizes_match_kafka():
    assert BATCH_HEADER.sizeof() == BATCH_HEADER_SIZE == 61
    assert LEGACY_HEADER_V0.sizeof() == 18 and LEGACY_HEADER_V1.sizeof() == 26
    assert CONTROL_KEY.sizeof() == 4 and END_TXN_MARKER.sizeof() == 6
    for layout in (BATCH_HEADER, LEGACY_HEADER_V0, LEGACY_HEADER_V1, CONTROL_KEY, END_TXN_MARKER):
        assert packed(layout).size == layout.sizeof()


def test_construct_layout_reads_the_same_header_as_the_fast_path():
    builder = RecordBatchBuilder(base_offset=1234, producer_id=99, producer_epoch=3, base_sequence=17,
                                 transactional=True, partition_leader_epoch=5)
    builder.append(b"v", key=b"k", timestamp=1_700_000_000_000)
    builder.append(b"w", timestamp=1_700_000_000_500)
    data = builder.build()
    parsed = BATCH_HEADER.parse(data)
    batch = RecordBatch(memoryview(data))
    for name in ("base_offset", "length", "partition_leader_epoch", "magic", "crc", "attributes",
                 "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                 "base_sequence"):
        assert parsed[name] == getattr(batch, name), name
    assert parsed.records_count == batch.count == 2
    assert parsed.length == len(data) - 12
    assert parsed.crc == crc32c(data[21:])


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, (1 << 31) - 1, -(1 << 31)])
def test_varint_round_trip_and_size(value):
    out = bytearray()
    write_varint(out, value)
    assert read_varint(bytes(out), 0) == (value, len(out))
    assert varint_size(value) == len(out)


@pytest.mark.parametrize("value", [0, -1, 1 << 40, -(1 << 40), INT64_MAX, INT64_MIN])
def test_varlong_round_trip(value):
    out = bytearray()
    write_varlong(out, value)
    assert read_varlong(bytes(out), 0) == (value, len(out))
    assert varint_size(value) == len(out)


def test_varint_overflow_and_truncation_are_records_errors():
    with pytest.raises(RecordsError, match="longer than 5 bytes"):
        read_varint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(RecordsError, match="overflows 32 bits"):
        read_varint(b"\xff\xff\xff\xff\x7f", 0)
    with pytest.raises(RecordsError, match="longer than 10 bytes"):
        read_varlong(b"\xff" * 10 + b"\x01", 0)
    with pytest.raises(RecordsError, match="runs past the end"):
        read_varint(b"\x80\x80", 0)
    with pytest.raises(ValueError):
        write_varint(bytearray(), 1 << 31)


# ---- magic 2 round trips ---------------------------------------------------------------------------------

@SETTINGS
@given(records=records_v2(), codec=st.sampled_from(list(Codec)),
       base_offset=st.integers(0, INT64_MAX - 100), producer=st.tuples(
           st.integers(-1, INT64_MAX), st.integers(-1, 32767), st.integers(-1, INT32_MAX)),
       transactional=st.booleans(), leader_epoch=st.integers(-1, INT32_MAX))
def test_v2_round_trip(records, codec, base_offset, producer, transactional, leader_epoch):
    producer_id, producer_epoch, base_sequence = producer
    builder = RecordBatchBuilder(base_offset=base_offset, compression=codec, producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=base_sequence,
                                 transactional=transactional, partition_leader_epoch=leader_epoch)
    for key, value, record_headers, timestamp in records:
        builder.append(value, key=key, headers=record_headers, timestamp=timestamp)
    blob = builder.build()
    (batch,) = read_batches(blob)
    assert isinstance(batch, RecordBatch)
    assert (batch.base_offset, batch.count, batch.compression) == (base_offset, len(records), codec)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.is_transactional is transactional and not batch.is_control
    assert batch.partition_leader_epoch == leader_epoch and batch.is_valid()
    assert batch.last_offset == base_offset + max(len(records) - 1, 0)
    expected = [Record(base_offset + i, timestamp, TimestampType.CREATE_TIME, key, value, tuple(record_headers))
                for i, (key, value, record_headers, timestamp) in enumerate(records)]
    assert batch.records() == expected
    assert list(iter_records(blob)) == expected
    columns = batch.columns()
    assert list(columns.offsets) == [r.offset for r in expected]
    assert list(columns.timestamps) == [r.timestamp for r in expected]
    assert columns.keys() == [r.key for r in expected] and columns.values() == [r.value for r in expected]
    if records:
        assert batch.base_timestamp == records[0][3]
        assert batch.max_timestamp == max(-1, *(r[3] for r in records))
    else:
        assert batch.base_timestamp == batch.max_timestamp == -1


@SETTINGS
@given(records=records_v2(), log_append_time=st.integers(0, INT64_MAX),
       gaps=st.lists(st.integers(1, 1000), max_size=12))
def test_v2_log_append_time_and_offset_gaps(records, log_append_time, gaps):
    builder = RecordBatchBuilder(base_offset=10, timestamp_type=TimestampType.LOG_APPEND_TIME,
                                 log_append_time=log_append_time)
    delta = -1
    deltas = []
    for (key, value, record_headers, timestamp), gap in zip(records, gaps + [1] * len(records)):
        delta += gap  # compacted batches skip offsets
        deltas.append(builder.append(value, key=key, headers=record_headers, timestamp=timestamp,
                                     offset_delta=delta))
    (batch,) = read_batches(builder.build())
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    got = batch.records()
    assert [r.offset for r in got] == [10 + d for d in deltas]
    # LogAppendTime: every record's timestamp is the batch's max timestamp
    assert all(r.timestamp == log_append_time and r.timestamp_type is TimestampType.LOG_APPEND_TIME
               for r in got)


def test_several_batches_and_a_partial_tail():
    blobs = []
    for n in range(3):
        builder = RecordBatchBuilder(base_offset=n * 10, compression=Codec.LZ4 if n == 1 else Codec.NONE)
        for i in range(4):
            builder.append(f"value {n}-{i}".encode(), timestamp=n * 100 + i)
        blobs.append(builder.build())
    blob = b"".join(blobs)
    assert [b.base_offset for b in iter_batches(blob)] == [0, 10, 20]
    # every truncation leaves the whole batches before the cut, and no error
    bounds = [0, len(blobs[0]), len(blobs[0]) + len(blobs[1]), len(blob)]
    for cut in range(len(blob)):
        whole = sum(1 for b in bounds[1:] if b <= cut)
        assert len(read_batches(blob[:cut])) == whole
    assert [r.offset for r in iter_records(memoryview(blob)[: bounds[2] + 30])] == [0, 1, 2, 3, 10, 11, 12, 13]


def test_batches_are_views_of_the_blob():
    builder = RecordBatchBuilder()
    builder.append(b"x" * 100, timestamp=0)
    blob = bytearray(builder.build() * 2)
    first, second = read_batches(blob)
    assert first.buffer.obj is blob and second.buffer.obj is blob
    assert second.position == len(blob) // 2


# ---- legacy round trips ------------------------------------------------------------------------------------

@SETTINGS
@given(magic=st.sampled_from([0, 1]), codec=st.sampled_from([Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]),
       records=st.lists(st.tuples(maybe_bytes, maybe_bytes, timestamps), max_size=10),
       base_offset=st.integers(0, INT64_MAX - 5000), log_append=st.booleans(),
       gaps=st.lists(st.integers(1, 500), max_size=10))
def test_legacy_round_trip(magic, codec, records, base_offset, log_append, gaps):
    timestamp_type = TimestampType.LOG_APPEND_TIME if log_append and magic == 1 else TimestampType.CREATE_TIME
    builder = LegacyMessageSetBuilder(magic, base_offset=base_offset, compression=codec,
                                      timestamp_type=timestamp_type, log_append_time=777)
    offset = base_offset - 1
    offsets = []
    for (key, value, timestamp), gap in zip(records, gaps + [1] * len(records)):
        offset += gap
        offsets.append(builder.append(value, key=key, timestamp=timestamp, offset=offset))
    blob = builder.build()
    batches = read_batches(blob)
    assert all(isinstance(b, LegacyBatch) and b.magic == magic and b.is_valid() for b in batches)
    got = list(iter_records(blob))
    assert [r.offset for r in got] == offsets
    assert [(r.key, r.value) for r in got] == [(k, v) for k, v, _ in records]
    if magic == 0:
        assert all(r.timestamp == -1 and r.timestamp_type is TimestampType.NO_TIMESTAMP for r in got)
    elif timestamp_type is TimestampType.LOG_APPEND_TIME:
        assert all(r.timestamp == 777 for r in got)  # the append time, in every message as Java writes it
    else:
        assert [r.timestamp for r in got] == [t for _, _, t in records]
    if codec != Codec.NONE and records:
        (wrapper,) = batches
        assert wrapper.compression == codec and wrapper.last_offset == offsets[-1]
        assert wrapper.base_offset == offsets[0]


def test_legacy_v1_inner_offsets_are_relative_on_the_wire():
    builder = LegacyMessageSetBuilder(1, base_offset=500, compression=Codec.GZIP)
    for i in range(3):
        builder.append(b"v%d" % i, timestamp=i)
    (wrapper,) = read_batches(builder.build())
    inner = zlib.decompress(bytes(wrapper.value), wbits=47)
    assert [struct.unpack_from(">q", inner, pos)[0] for pos in (0, 36, 72)]  # 36-byte messages == [0, 1, 2]
    assert wrapper.offset == 502


def test_mixed_magics_in_one_blob():
    v0 = LegacyMessageSetBuilder(0, base_offset=0)
    v0.append(b"a")
    v1 = LegacyMessageSetBuilder(1, base_offset=1, compression=Codec.SNAPPY)
    v1.append(b"b", timestamp=5)
    v2 = RecordBatchBuilder(base_offset=2, compression=Codec.ZSTD)
    v2.append(b"c", timestamp=6)
    blob = v0.build() + v1.build() + v2.build()
    assert [(r.offset, r.value) for r in iter_records(blob)] == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert [b.magic for b in iter_batches(blob)] == [0, 1, 2]


# ---- control records -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
def test_transaction_markers(commit):
    blob = transaction_marker_batch(commit, producer_id=42, producer_epoch=7, coordinator_epoch=3, base_offset=9)
    (batch,) = read_batches(blob)
    assert batch.is_control and batch.is_transactional and batch.producer_id == 42
    assert list(iter_records(blob)) == []  # consumers never see control records
    (record,) = batch.records()
    marker = control_record(record)
    assert marker.type is (ControlType.COMMIT if commit else ControlType.ABORT)
    assert marker.coordinator_epoch == 3 and marker.offset == 9 and marker.is_transaction_marker


def test_kraft_control_records_decode_their_messages():
    from kafkawire.messages import LeaderChangeMessage, SnapshotHeaderRecord

    change = LeaderChangeMessage(version=0, leader_id=3, voters=[LeaderChangeMessage.Voter(voter_id=3)],
                                 granting_voters=[])
    header = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=123)
    builder = RecordBatchBuilder(control=True)
    builder.append(change.encode(0), key=struct.pack(">hh", 0, 2), timestamp=1)
    builder.append(header.encode(0), key=struct.pack(">hh", 0, 3), timestamp=1)
    builder.append(b"", key=struct.pack(">hh", 0, 99), timestamp=1)
    decoded = [control_record(r) for r in read_batches(builder.build())[0].records()]
    assert [c.type for c in decoded] == [ControlType.LEADER_CHANGE, ControlType.SNAPSHOT_HEADER, ControlType.UNKNOWN]
    assert decoded[0].message == change and decoded[1].message == header
    assert decoded[2].type_id == 99


@pytest.mark.parametrize("key, value, reason", [
    (b"\x00", b"", "key needs 4 bytes"),
    (None, b"", "key needs 4 bytes"),
    (b"\xff\xff\x00\x00", b"", "negative version"),
    (b"\x00\x00\x00\x01", b"\x00", "marker value needs 6 bytes"),
    (b"\x00\x00\x00\x02", b"\x00\x00\xff", "LeaderChangeMessage"),
])
def test_malformed_control_records(key, value, reason):
    record = Record(5, 0, TimestampType.CREATE_TIME, key, value)
    with pytest.raises(RecordsError, match=reason) as caught:
        control_record(record)
    assert caught.value.base_offset == 5


# ---- bad input -------------------------------------------------------------------------------------------------

def _batch(values=(b"hello", b"world"), **options) -> bytearray:
    builder = RecordBatchBuilder(base_offset=77, **options)
    for i, value in enumerate(values):
        builder.append(value, key=b"k", timestamp=i)
    return bytearray(builder.build())


def _recrc(blob: bytearray) -> bytearray:
    struct.pack_into(">I", blob, 17, crc32c(bytes(blob[21:])))
    return blob


def test_crc_mismatch_names_the_base_offset():
    blob = _batch()
    blob[-1] ^= 0x01
    with pytest.raises(CorruptRecordError) as caught:
        read_batches(bytes(blob))
    assert caught.value.base_offset == 77 and caught.value.offset == 17
    assert "batch at offset 77" in str(caught.value) and "CRC mismatch" in str(caught.value)
    (batch,) = read_batches(bytes(blob), verify_crc=False)  # told not to check
    assert not batch.is_valid()


def test_legacy_crc_mismatch():
    builder = LegacyMessageSetBuilder(1, base_offset=31)
    builder.append(b"payload", timestamp=1)
    blob = bytearray(builder.build())
    blob[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as caught:
        read_batches(bytes(blob))
    assert caught.value.base_offset == 31


def test_legacy_crc_mismatch_inside_a_wrapper():
    inner = LegacyMessageSetBuilder(1)
    inner.append(b"payload", timestamp=1)
    bad_inner = bytearray(inner.build())
    bad_inner[-1] ^= 0xFF
    # wrap the damaged set by hand: the builder's message writer with a gzip-compressed value
    value = zlib.compress(bytes(bad_inner), wbits=31)
    blob = LegacyMessageSetBuilder(1)._message(4, 1, Codec.GZIP, None, value)
    with pytest.raises(CorruptRecordError):
        list(iter_records(blob))


def test_negative_record_count():
    blob = _recrc(_batch())
    struct.pack_into(">i", blob, 57, -1)
    with pytest.raises(RecordsError, match="negative record count"):
        read_batches(bytes(_recrc(blob)))


def test_record_count_larger_than_the_records():
    blob = _batch()
    struct.pack_into(">i", blob, 57, 1_000_000_000)
    (batch,) = read_batches(bytes(_recrc(blob)))
    with pytest.raises(RecordsError, match="cannot fit"):
        batch.records()


def test_record_count_smaller_than_the_records():
    blob = _batch()
    struct.pack_into(">i", blob, 57, 1)
    (batch,) = read_batches(bytes(_recrc(blob)))
    with pytest.raises(RecordsError, match="bytes left after"):
        batch.records()


def test_record_length_that_lies():
    blob = _batch()
    blob[61] += 2  # the first record's length varint (zigzag: +1)
    (batch,) = read_batches(bytes(_recrc(blob)))
    with pytest.raises(RecordsError) as caught:
        batch.records()
    assert caught.value.base_offset == 77 and caught.value.path[:1] == ["records[0]"]
    assert caught.value.offset >= 61


def test_negative_value_length():
    blob = _batch(values=[b"abc"])
    index = blob.index(b"abc") - 1
    blob[index] = 5  # zigzag -3
    (batch,) = read_batches(bytes(_recrc(blob)))
    with pytest.raises(RecordsError, match="negative value length"):
        batch.records()


def test_entry_smaller_than_any_message():
    blob = struct.pack(">qi", 0, 3) + b"\x00" * 3
    with pytest.raises(RecordsError, match="smaller than the smallest"):
        read_batches(blob)


def test_unknown_magic():
    blob = bytearray(_batch())
    blob[16] = 3
    with pytest.raises(RecordsError, match="unknown magic 3"):
        read_batches(bytes(blob))


def test_unknown_codec():
    blob = _batch()
    struct.pack_into(">h", blob, 21, 6)
    (batch,) = read_batches(bytes(_recrc(blob)))
    with pytest.raises(CompressionError, match="codec 6"):
        batch.records()


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_truncated_compressed_records(codec):
    blob = _batch(values=[bytes(range(256)) * 8] * 4, compression=codec)
    cut = bytearray(blob[:61 + (len(blob) - 61) // 2])
    struct.pack_into(">i", cut, 8, len(cut) - 12)
    (batch,) = read_batches(bytes(_recrc(cut)))
    with pytest.raises(RecordsError) as caught:
        batch.records()
    assert caught.value.base_offset == 77


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_decompression_is_bounded(codec):
    blob = _batch(values=[b"\x00" * 1_000_000] * 3, compression=codec)
    assert len(blob) < 200_000
    with pytest.raises(DecompressionLimitError) as caught:
        list(iter_records(blob, decompressed_limit=1_000_000))
    assert caught.value.base_offset == 77
    assert len(list(iter_records(blob, decompressed_limit=4_000_000))) == 3


def test_decompressed_limit_is_validated():
    with pytest.raises(ValueError):
        read_batches(b"", decompressed_limit=0)
    with pytest.raises(ValueError):
        read_batches(b"", decompressed_limit=1 << 31)


def test_timestamp_arithmetic_wraps_like_java():
    # A crafted batch whose base timestamp plus delta leaves the int64 range reads as Java reads it.
    builder = RecordBatchBuilder()
    builder.append(b"v", timestamp=0)
    builder.append(b"w", timestamp=10)
    blob = bytearray(builder.build())
    struct.pack_into(">q", blob, 27, INT64_MAX)
    (batch,) = read_batches(bytes(_recrc(blob)))
    assert [r.timestamp for r in batch.records()] == [INT64_MAX, INT64_MIN + 9]


def test_builder_refuses_what_kafka_refuses():
    builder = RecordBatchBuilder()
    builder.append(b"a", offset_delta=5)
    with pytest.raises(ValueError, match="does not follow"):
        builder.append(b"b", offset_delta=5)
    with pytest.raises(ValueError, match="null"):
        builder.append(b"c", headers=[(None, b"x")])
    with pytest.raises(ValueError, match="negative timestamp"):
        builder.append(b"d", timestamp=-2)
    with pytest.raises(ValueError, match="zstd"):
        LegacyMessageSetBuilder(1, compression=Codec.ZSTD)
    with pytest.raises(ValueError):
        LegacyMessageSetBuilder(2)
    with pytest.raises(ValueError):
        RecordBatchBuilder(timestamp_type=TimestampType.NO_TIMESTAMP)


def test_empty_builders():
    (batch,) = read_batches(RecordBatchBuilder(base_offset=3).build())
    assert batch.count == 0 and batch.records() == [] and batch.base_timestamp == -1
    assert LegacyMessageSetBuilder(1, compression=Codec.GZIP).build() == b""
    assert read_batches(b"") == []


def test_headers_and_repr():
    builder = RecordBatchBuilder()
    builder.append(b"x" * 100, key=None, headers=[Header("a", None), ("b", b"2")], timestamp=5)
    (record,) = read_batches(builder.build())[0].records()
    assert record.headers == (Header("a", None), Header("b", b"2"))
    assert "100 bytes" in repr(record) and "CREATE_TIME" in repr(record)

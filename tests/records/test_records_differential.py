"""Differential tests of kafkawire.records against two independent record implementations.

* kafka-python 3.0.12 (``kafka.record``): magic 0, 1 and 2, every codec it can run (snappy needs
  python-snappy and magic-0 lz4 needs xxhash, which kafka-python imports optionally; those cases skip
  with that reason when they are missing). Batches it builds (DefaultRecordBatchBuilder,
  LegacyRecordBatchBuilder, MemoryRecordsBuilder) decode here to the records that went in and to what
  kafka-python itself decodes: offset, timestamp and its type, key, value, headers, and the batch's
  metadata (producer id/epoch, base sequence, transactional and control flags, codec, leader epoch,
  timestamps, CRC, size). Batches kafkawire builds decode in kafka-python (DefaultRecordBatch,
  LegacyRecordBatch, MemoryRecords) to the same. Identical inputs give identical bytes; where the
  two libraries' codec output legitimately differs (``CODEC_DIFFERENCES``: gzip's header, lz4's
  content-size field), the batch outside length and CRC is compared byte for byte and the compressed
  regions with exactly those fields stripped.
* kio 0.6.5 (``kio.records``): magic 2, uncompressed, the only format it has. ``write_new_batch`` output
  decodes here, ours decodes in ``read_batch`` (and ``write_batch`` re-writes it byte for byte), and the
  two writers' bytes are identical.

Where a peer disagrees with Kafka's format, the comparison is not weakened: the peer's deviation is
undone the way Kafka writes the bytes (``_javaify_legacy_wrapper``), or the case is a strict xfail
naming the peer bug (``test_kio_bug_*``, ``test_kafka_python_bug_*``), and the strategies keep that
peer's inputs inside what it can represent (kio: whole-second, non-negative timestamps).

Reference: shared/reference/kafka-semantics.md section 3; apache/kafka's DefaultRecordBatch,
AbstractLegacyRecordBatch and MemoryRecordsBuilder. Deeper run: KAFKAWIRE_RECORDS_DIFF_SCALE=20.
"""
from __future__ import annotations

import datetime
import io
import os
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

import kafka.codec as kp_codec
from kafka.record.default_records import ControlRecord as KpControlRecord
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kio.records import readers as kio_readers
from kio.records import writers as kio_writers
from kio.records.schema import NewRecordBatch as KioNewBatch
from kio.records.schema import Record as KioRecord
from kio.records.schema import RecordBatch as KioBatch
from kio.records.schema import RecordHeader as KioHeader
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from kafkawire.records import (
    Codec, ControlType, LegacyBatch, LegacyMessageSetBuilder, RecordBatch, RecordBatchBuilder, TimestampType,
    compress, control_record, decompress, iter_batches, iter_records, read_batches, transaction_marker_batch,
)

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT16_MAX = (1 << 15) - 1

EXAMPLES = 40
# Multiplies every test's examples for a deeper run: KAFKAWIRE_RECORDS_DIFF_SCALE=20.
SCALE = float(os.environ.get("KAFKAWIRE_RECORDS_DIFF_SCALE", "1"))


def _settings(max_examples: int = EXAMPLES):
    return settings(max_examples=max(1, round(max_examples * SCALE)), deadline=None, database=InMemoryExampleDatabase(),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# =========================================================================================================
# What kafka-python can do here
#
# kafka-python's codecs are optional imports: gzip always, snappy needs python-snappy, lz4 needs lz4
# (and, for magic 0's broken frame checksum, xxhash), zstd needs zstandard. It never writes zstd in a
# legacy message set, and neither does Kafka (zstd needs magic 2).

def _kp_codec_missing(codec: Codec, magic: int) -> str | None:
    if codec == Codec.SNAPPY and not kp_codec.has_snappy():
        return "kafka-python needs python-snappy for snappy, which is not installed"
    if codec == Codec.LZ4 and not kp_codec.has_lz4():
        return "kafka-python needs lz4 for lz4, which is not installed"
    if codec == Codec.LZ4 and magic == 0 and kp_codec.xxhash is None:
        return "kafka-python needs xxhash for magic-0 lz4 (Kafka's broken frame checksum), not installed"
    if codec == Codec.ZSTD and not kp_codec.has_zstd():
        return "kafka-python needs zstandard for zstd, which is not installed"
    return None


def _codec_params(magic: int, codecs):
    return [pytest.param(codec, id=codec.name.lower(),
                         marks=[pytest.mark.skip(reason=why)] if (why := _kp_codec_missing(codec, magic)) else [])
            for codec in codecs]


V2_CODECS = list(Codec)
LEGACY_CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


# =========================================================================================================
# Compressed bytes: where kafka-python's and kafkawire's differ for the same input, and why
#
# For every (codec, magic) not listed, the compressed bytes must be identical (kafkawire given
# kafka-python's gzip level, 9; Kafka's default is 6). For the listed ones, ``form`` strips exactly
# the fields that differ and the rest must be identical; ``test_codec_parameters`` checks that the raw
# bytes really differ and the stripped forms really agree, so each reason stays true.

def _gzip_form(member: bytes) -> bytes:
    """An RFC 1952 member without MTIME (bytes 4-7) and XFL (byte 8)."""
    return member[:4] + member[9:]


def _lz4_form(frame: bytes) -> bytes:
    """An LZ4 frame without its content-size field (FLG bit 3 and 8 bytes) and the header checksum
    that covers it."""
    flg = frame[4]
    descriptor_end = 6 + (8 if flg & 0x08 else 0)
    return bytes((*frame[:4], flg & ~0x08, frame[5])) + frame[descriptor_end + 1:]


CODEC_DIFFERENCES = {
    Codec.GZIP: (
        "gzip header: kafka-python's GzipFile writes the current time as MTIME (so its output changes every "
        "second) and XFL 2 (\"maximum compression\") for level 9; GZIPOutputStream and kafkawire write 0 for "
        "both. The deflate stream and the trailer are identical.", _gzip_form),
    Codec.LZ4: (
        "lz4 frame descriptor (magic 1 and 2): kafka-python's lz4.frame.compress keeps lz4's default "
        "store_size=True and writes the content size (FLG bit 3, 8 bytes, so another header checksum); "
        "Kafka's Lz4BlockOutputStream and kafkawire do not. Blocks and end mark are identical. (For magic 0 "
        "kafka-python strips the content size itself, so those bytes are identical.)", _lz4_form),
}


def codec_difference(codec: Codec, magic: int):
    """(reason, form) for a codec whose bytes legitimately differ, or None when they must be equal."""
    if codec == Codec.LZ4 and magic == 0:
        return None
    return CODEC_DIFFERENCES.get(codec)


def _kp_compress(codec: Codec, data: bytes, magic: int = 2) -> bytes:
    if codec == Codec.GZIP:
        return kp_codec.gzip_encode(data)
    if codec == Codec.SNAPPY:
        return kp_codec.snappy_encode(data)
    if codec == Codec.LZ4:
        return kp_codec.lz4_encode_old_kafka(data) if magic == 0 else kp_codec.lz4_encode(data)
    if codec == Codec.ZSTD:
        return kp_codec.zstd_encode(data)
    raise AssertionError(codec)


def _kp_decompress(codec: Codec, data: bytes, magic: int = 2) -> bytes:
    if codec == Codec.LZ4:
        return kp_codec.lz4_decode_old_kafka(data) if magic == 0 else kp_codec.lz4_decode(data)
    return {Codec.GZIP: kp_codec.gzip_decode, Codec.SNAPPY: kp_codec.snappy_decode,
            Codec.ZSTD: kp_codec.zstd_decode}[codec](data)


KP_LEVEL = {Codec.GZIP: 9}  # kafka-python's gzip_encode default; every other codec at Kafka's default


def assert_same_compressed(codec: Codec, magic: int, ours: bytes, theirs: bytes) -> None:
    difference = codec_difference(codec, magic)
    if difference is None:
        assert ours == theirs
    else:
        reason, form = difference
        assert form(ours) == form(theirs), reason


# =========================================================================================================
# Strategies

def _maybe_bytes(short: int = 24):
    """None, short bytes, or now and then 126-300 bytes (two-byte varint lengths)."""
    return st.one_of(
        st.none(), st.binary(max_size=short),
        st.integers(1, 8).flatmap(lambda n: st.binary(min_size=126, max_size=300) if n == 1 else st.binary(max_size=4)))


_header_keys = st.one_of(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=10),
                         st.text(max_size=6))
_headers = st.lists(st.tuples(_header_keys, _maybe_bytes(12)), max_size=3)

# Kafka's builder (MemoryRecordsBuilder.appendWithOffset) refuses negative timestamps other than -1
# (NO_TIMESTAMP), and so does kafkawire's; kafka-python's writes any int64, and readers must read it.
ANY = INT64_MIN
WRITABLE = -1


def _timestamps(low: int = ANY):
    """The extremes, -1 (NO_TIMESTAMP), 0, realistic ones, and anything else from ``low`` up."""
    return st.one_of(st.sampled_from([t for t in (INT64_MIN, -1, 0, 1_700_000_000_123, INT64_MAX) if t >= low]),
                     st.integers(low, INT64_MAX), st.integers(1_600_000_000_000, 1_800_000_000_000))


_timestamp = _timestamps()


@st.composite
def v2_records(draw, max_size: int = 8, low: int = ANY, min_size: int = 0):
    """[(offset_delta, timestamp, key, value, headers)]: increasing offset deltas with gaps (compacted
    batches), timestamps from ``low`` up, each within an int64 of the first (the delta is a varlong)."""
    n = draw(st.integers(min_size, max_size))
    first_ts = draw(_timestamps(low))
    low, high = max(low, first_ts + INT64_MIN), min(INT64_MAX, first_ts + INT64_MAX)
    # (INT32_MAX itself is left for with_compressible to append after)
    deltas = sorted(draw(st.sets(st.one_of(st.integers(0, 40), st.integers(0, INT32_MAX - 1)), min_size=n, max_size=n)))
    records = []
    for i, delta in enumerate(deltas):
        ts = first_ts if i == 0 else draw(st.one_of(
            st.integers(max(low, first_ts - 5000), min(high, first_ts + 5000)), st.integers(low, high)))
        records.append((delta, ts, draw(_maybe_bytes()), draw(_maybe_bytes()), draw(_headers)))
    return records


_producer = st.tuples(st.one_of(st.just(-1), st.integers(0, INT64_MAX), st.integers(INT64_MIN, INT64_MAX)),
                      st.one_of(st.just(-1), st.integers(0, INT16_MAX)),
                      st.one_of(st.just(-1), st.integers(0, INT32_MAX), st.integers(INT32_MIN, INT32_MAX)))
_leader_epoch = st.one_of(st.just(-1), st.just(0), st.integers(INT32_MIN, INT32_MAX))



def with_compressible(records):
    """``records`` and one more that every codec shrinks, so that kafka-python (which falls back to an
    uncompressed batch when compression does not pay, unlike Kafka) really writes a compressed batch."""
    delta, ts = (records[-1][0] + 1, records[0][1]) if records else (0, 1_700_000_000_000)
    return records + [(delta, ts, b"k", b"compressible " * 40, [("h", b"v" * 30)])]


def _base_offset_for(records):
    """Base offsets up to where the last offset still fits an int64 (Java's long would wrap; Python's
    int does not, so kafka-python and Kafka would disagree past it)."""
    last = records[-1][0] if records else 0
    return st.one_of(st.just(0), st.integers(0, 1 << 40), st.integers(INT64_MIN, INT64_MAX - last),
                     st.just(INT64_MAX - last))


# =========================================================================================================
# Normalised views

def kw_tuple(record) -> tuple:
    return (record.offset, record.timestamp, int(record.timestamp_type), record.key, record.value,
            tuple((h.key, h.value) for h in record.headers))


def kp_tuple(record) -> tuple:
    """kafka-python's record as kafkawire's tuple: magic 0 has timestamp None and type None, which
    Kafka calls NO_TIMESTAMP (-1) and NO_TIMESTAMP_TYPE (-1)."""
    timestamp = -1 if record.timestamp is None else record.timestamp
    timestamp_type = -1 if record.timestamp_type is None else record.timestamp_type
    return (record.offset, timestamp, timestamp_type, record.key, record.value,
            tuple((k, v) for k, v in record.headers))


def columns_tuples(batch: RecordBatch) -> list[tuple]:
    columns = batch.columns()
    return [(offset, timestamp, int(columns.timestamp_type), key, value,
             tuple((h.key, h.value) for h in columns.headers(i)))
            for i, (offset, timestamp, key, value) in enumerate(
                zip(columns.offsets, columns.timestamps, columns.keys(), columns.values()))]


def v2_metadata_kw(batch: RecordBatch) -> dict:
    return dict(base_offset=batch.base_offset, leader_epoch=batch.partition_leader_epoch, magic=batch.magic,
                crc=batch.crc, attributes=batch.attributes, last_offset_delta=batch.last_offset_delta,
                last_offset=batch.last_offset, next_offset=batch.next_offset, base_timestamp=batch.base_timestamp,
                max_timestamp=batch.max_timestamp, producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                count=batch.count, codec=int(batch.compression),
                timestamp_type=int(batch.timestamp_type), transactional=batch.is_transactional,
                control=batch.is_control, size=batch.size)


def v2_metadata_kp(batch: DefaultRecordBatch) -> dict:
    return dict(base_offset=batch.base_offset, leader_epoch=batch.leader_epoch, magic=batch.magic, crc=batch.crc,
                attributes=batch.attributes, last_offset_delta=batch.last_offset_delta,
                last_offset=batch.last_offset, next_offset=batch.next_offset, base_timestamp=batch.first_timestamp,
                max_timestamp=batch.max_timestamp, producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                count=batch.records_count, codec=batch.compression_type,
                timestamp_type=batch.timestamp_type, transactional=batch.is_transactional,
                control=batch.is_control_batch, size=batch.size_in_bytes)


def kp_read_blob(blob) -> list[tuple[object, list[tuple]]]:
    """kafka-python's consumer path: MemoryRecords over the blob, CRC checked, then the records."""
    out = []
    records = MemoryRecords(bytes(blob))
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc(), "kafka-python: CRC mismatch"
        out.append((batch, [kp_tuple(r) for r in batch]))
    return out


def expected_v2(records, base_offset: int, timestamp_type=TimestampType.CREATE_TIME,
                log_append_time: int | None = None) -> list[tuple]:
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        fixed = log_append_time if log_append_time is not None else max(r[1] for r in records)
    out = []
    for delta, ts, key, value, headers in records:
        out.append((base_offset + delta, ts if timestamp_type == TimestampType.CREATE_TIME else fixed,
                    int(timestamp_type), key, value, tuple((k, v) for k, v in headers)))
    return out


def set_base_offset_and_epoch(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """What a broker does to a produced batch: assign the base offset and the partition leader epoch.
    Both fields sit before the CRC-32C's span, so the CRC stays valid."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, leader_epoch)
    return bytes(out)


# =========================================================================================================
# Magic 2 against kafka-python

def kp_build_v2(records, codec: Codec, producer, transactional: bool) -> bytes:
    producer_id, producer_epoch, base_sequence = producer
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=1 << 30)
    for delta, ts, key, value, headers in records:
        assert builder.append(delta, timestamp=ts, key=key, value=value, headers=list(headers)) is not None
    return bytes(builder.build())


def kw_build_v2(records, codec: Codec, producer, transactional: bool, *, base_offset: int = 0,
                leader_epoch: int = 0, timestamp_type=TimestampType.CREATE_TIME,
                log_append_time: int | None = None, level: int | None = None) -> bytes:
    producer_id, producer_epoch, base_sequence = producer
    builder = RecordBatchBuilder(base_offset=base_offset, compression=codec, compression_level=level,
                                 producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=base_sequence, transactional=transactional,
                                 partition_leader_epoch=leader_epoch, timestamp_type=timestamp_type,
                                 log_append_time=log_append_time)
    for delta, ts, key, value, headers in records:
        assert builder.append(value, key=key, headers=headers, timestamp=ts, offset_delta=delta) == delta
    return builder.build()


def assert_same_v2_reading(blob: bytes, expected: list[tuple] | None = None) -> tuple[RecordBatch, object]:
    """kafkawire and kafka-python read ``blob`` (one magic-2 batch) the same way: metadata, records
    through every kafkawire path, and (when given) the records that went in."""
    (ours,) = read_batches(blob)
    assert isinstance(ours, RecordBatch) and ours.is_valid()
    ((theirs, their_records),) = kp_read_blob(blob)
    assert isinstance(theirs, DefaultRecordBatch)
    assert v2_metadata_kw(ours) == v2_metadata_kp(theirs)
    our_records = [kw_tuple(r) for r in ours.records()]
    assert our_records == their_records
    assert columns_tuples(ours) == our_records
    assert [kw_tuple(r) for r in iter_records(blob, include_control=True)] == our_records
    if expected is not None:
        assert our_records == expected
    return ours, theirs


@pytest.mark.parametrize("codec", _codec_params(2, V2_CODECS))
@_settings()
@given(records=v2_records(), producer=_producer, transactional=st.booleans(), data=st.data(),
       leader_epoch=_leader_epoch)
def test_v2_kafka_python_batches_decode_here(codec, records, producer, transactional, data, leader_epoch):
    """kafka-python's DefaultRecordBatchBuilder output (then given a base offset and leader epoch, as a
    broker does) reads here exactly as kafka-python reads it, and as the records went in."""
    if codec != Codec.NONE:
        records = with_compressible(records)
    base_offset = data.draw(_base_offset_for(records), "base_offset")
    produced = kp_build_v2(records, codec, producer, transactional)
    blob = set_base_offset_and_epoch(produced, base_offset, leader_epoch)
    ours, _ = assert_same_v2_reading(blob, expected_v2(records, base_offset))
    assert ours.compression == codec, "kafka-python did not compress; COMPRESSIBLE should have made it pay"
    assert (ours.producer_id, ours.producer_epoch, ours.base_sequence) == producer
    assert ours.is_transactional is transactional


@pytest.mark.parametrize("codec", _codec_params(2, V2_CODECS))
@_settings()
@given(records=v2_records(low=WRITABLE), producer=_producer, transactional=st.booleans(), data=st.data(),
       leader_epoch=_leader_epoch, log_append=st.booleans(),
       log_append_time=st.one_of(st.none(), _timestamps(WRITABLE)))
def test_v2_kafkawire_batches_decode_in_kafka_python(codec, records, producer, transactional, data,
                                                      leader_epoch, log_append, log_append_time):
    """RecordBatchBuilder output reads in kafka-python as the records went in (CreateTime or
    LogAppendTime; kafka-python's own builder cannot write LogAppendTime, a broker's job)."""
    base_offset = data.draw(_base_offset_for(records), "base_offset")
    timestamp_type = TimestampType.LOG_APPEND_TIME if log_append and records else TimestampType.CREATE_TIME
    blob = kw_build_v2(records, codec, producer, transactional, base_offset=base_offset,
                       leader_epoch=leader_epoch, timestamp_type=timestamp_type, log_append_time=log_append_time)
    expected = expected_v2(records, base_offset, timestamp_type, log_append_time) if records else []
    if codec == Codec.SNAPPY and not records:
        # kafka-python bug (test_kafka_python_bug_header_only_xerial_stream): only kafkawire reads it
        assert [kw_tuple(r) for r in iter_records(blob)] == []
        return
    ours, theirs = assert_same_v2_reading(blob, expected)
    assert theirs.compression_type == codec and theirs.timestamp_type == timestamp_type


@pytest.mark.parametrize("codec", _codec_params(2, V2_CODECS))
@_settings()
@given(records=v2_records(low=WRITABLE, min_size=1), producer=_producer, transactional=st.booleans())
def test_v2_same_bytes_as_kafka_python(codec, records, producer, transactional):
    """Identical inputs give identical batches. kafka-python writes 0 as the partition leader epoch
    (Kafka's producer writes -1; a broker overwrites it), so kafkawire is given 0 too. Where the
    compressed bytes legitimately differ (CODEC_DIFFERENCES), the header outside length and CRC must
    still match byte for byte, and the compressed records too once those fields are stripped. (Empty
    batches: test_v2_empty_batch.)"""
    if codec != Codec.NONE:
        records = with_compressible(records)
    theirs = kp_build_v2(records, codec, producer, transactional)
    ours = kw_build_v2(records, codec, producer, transactional, level=KP_LEVEL.get(codec))
    if codec_difference(codec, 2) is None:
        assert ours == theirs
        return
    # the header but for length and CRC (which cover the compressed bytes), then the compressed records
    assert ours[:8] == theirs[:8] and ours[12:17] == theirs[12:17] and ours[21:61] == theirs[21:61]
    assert_same_compressed(codec, 2, ours[61:], theirs[61:])
    plain = kp_build_v2(records, Codec.NONE, producer, transactional)
    assert decompress(codec, ours[61:]) == plain[61:]


@_settings(200)
@given(base_sequence=st.one_of(st.sampled_from([-1, -2, INT32_MIN, 0, INT32_MAX - 1, INT32_MAX]),
                               st.integers(INT32_MIN, INT32_MAX)),
       last_offset_delta=st.one_of(st.sampled_from([0, 1, INT32_MAX]), st.integers(0, INT32_MAX)))
def test_v2_last_sequence(base_sequence, last_offset_delta):
    """lastSequence, derived from BaseSequence and LastOffsetDelta: kafka-python's is Java's
    DefaultRecordBatch.incrementSequence (wraps past Integer.MAX_VALUE to 0; any other int32 just adds).
    (Kept out of the metadata compared above so that one derived field cannot hide the rest.)"""
    builder = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=base_sequence)
    builder.append(b"v", timestamp=0, offset_delta=last_offset_delta)
    blob = builder.build()
    (ours,) = read_batches(blob)
    theirs = DefaultRecordBatch(blob)
    assert ours.last_offset_delta == theirs.last_offset_delta == last_offset_delta
    assert ours.last_sequence == theirs.last_sequence


def test_v2_empty_batch():
    """A batch with no records. Kafka never produces one (MemoryRecordsBuilder returns no batch), but
    compaction can leave one (DefaultRecordBatch.writeEmptyHeader); both readers see zero records.
    The writers differ only in the base and max timestamps (and so the CRC): kafka-python writes 0
    (``first_timestamp or 0``), kafkawire -1 (RecordBatch.NO_TIMESTAMP). Neither is read by anyone."""
    theirs = kp_build_v2([], Codec.NONE, (-1, -1, -1), False)
    ours = kw_build_v2([], Codec.NONE, (-1, -1, -1), False)
    for blob in (theirs, ours):
        batch, kp_batch = assert_same_v2_reading(blob, [])
        assert batch.count == 0 and batch.last_offset_delta == 0
    assert ours[:17] == theirs[:17] and ours[21:27] == theirs[21:27]
    assert ours[27:43] == struct.pack(">qq", -1, -1) and theirs[27:43] == struct.pack(">qq", 0, 0)
    assert ours[43:] == theirs[43:]


@pytest.mark.parametrize("codec", _codec_params(2, V2_CODECS))
def test_v2_large_batch_both_ways(codec):
    """A 1.4 MB batch: several lz4 blocks (64 KiB) and xerial snappy chunks (32 KiB), two- and
    three-byte varints (every 100th value is 5,000 bytes); kafka-python's and kafkawire's batches read
    the same in both libraries."""
    records = [(i, 1_700_000_000_000 + i, b"key-%d" % i if i % 3 else None,
                bytes((i * 7 + j) & 0xFF for j in range(300)) * (4 if i % 100 else 17) + b"%d" % i,
                [("i", b"%d" % i)] if i % 5 == 0 else [])
               for i in range(1100)]
    expected = expected_v2(records, 0)
    producer = (7, 1, 0)
    assert_same_v2_reading(kp_build_v2(records, codec, producer, False), expected)
    assert_same_v2_reading(kw_build_v2(records, codec, producer, False), expected)


def test_v2_control_batches_decode_in_kafka_python():
    """Transaction markers from kafkawire read in kafka-python as control records of the right type
    (kafka-python cannot write control batches, so this direction only)."""
    for commit in (True, False):
        blob = transaction_marker_batch(commit, producer_id=42, producer_epoch=3, coordinator_epoch=17,
                                        base_offset=100, timestamp=1_700_000_000_000, partition_leader_epoch=5)
        ours, theirs = assert_same_v2_reading(blob)
        assert ours.is_control and theirs.is_control_batch and theirs.is_transactional
        (their_record,) = list(DefaultRecordBatch(blob))
        assert isinstance(their_record, KpControlRecord)
        assert (their_record.commit, their_record.abort, their_record.version) == (commit, not commit, 0)
        (record,) = ours.records()
        marker = control_record(record)
        assert marker.type == (ControlType.COMMIT if commit else ControlType.ABORT) == their_record.type
        assert marker.coordinator_epoch == 17 and marker.offset == their_record.offset == 100
        assert list(iter_records(blob)) == []  # consumers skip control batches


# =========================================================================================================
# Magic 0 and 1 against kafka-python

@st.composite
def legacy_records(draw, magic: int, compressed: bool, max_size: int = 8, low: int = ANY):
    """[(offset, timestamp, key, value)]. Uncompressed: any increasing offsets (each message carries
    its own). Compressed: magic 1 inner offsets relative to the first (KIP-31), 0 upwards, now and
    then with gaps (compaction); magic 0 absolute and increasing."""
    n = draw(st.integers(1 if compressed else 0, max_size))
    if compressed and magic == 1:
        offsets = [0]
        for _ in range(n - 1):
            offsets.append(offsets[-1] + draw(st.sampled_from([1, 1, 1, 2, 7])))
    else:
        lowest = 0 if compressed else INT64_MIN
        offsets = sorted(draw(st.sets(st.one_of(st.integers(lowest, INT64_MAX), st.integers(0, 50)),
                                      min_size=n, max_size=n)))
    return [(offset, -1 if magic == 0 else draw(_timestamps(low)), draw(_maybe_bytes()), draw(_maybe_bytes()))
            for offset in offsets]


def kp_build_legacy(magic: int, records, codec: Codec) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 30)
    for offset, ts, key, value in records:
        assert builder.append(offset, timestamp=ts, key=key, value=value) is not None
    return bytes(builder.build())


def kw_build_legacy(magic: int, records, codec: Codec, *, timestamp_type=TimestampType.CREATE_TIME,
                    log_append_time: int | None = None, level: int | None = None) -> bytes:
    builder = LegacyMessageSetBuilder(magic, compression=codec, compression_level=level,
                                      timestamp_type=timestamp_type if magic == 1 else TimestampType.CREATE_TIME,
                                      log_append_time=log_append_time)
    for offset, ts, key, value in records:
        assert builder.append(value, key=key, timestamp=ts, offset=offset) == offset
    return builder.build()


_LEGACY_WRAPPER = {0: struct.Struct(">qiIbb"), 1: struct.Struct(">qiIbbq")}


def _javaify_legacy_wrapper(blob: bytes, magic: int, wrapper_offset: int, timestamp: int | None = None) -> bytes:
    """Rewrite a compressed wrapper's offset (and, magic 1, its timestamp),
    recomputing the CRC: what Kafka writes where kafka-python writes 0 for both
    (MemoryRecordsBuilder.writeLegacyCompressedWrapperHeader: offset = last offset,
    timestamp = max timestamp or log-append time), and what a broker does when it assigns offsets."""
    header = _LEGACY_WRAPPER[magic]
    fields = list(header.unpack_from(blob))
    fields[0] = wrapper_offset
    if magic == 1 and timestamp is not None:
        fields[5] = timestamp
    out = bytearray(blob)
    header.pack_into(out, 0, *fields)
    struct.pack_into(">I", out, 12, zlib.crc32(out[16:]))
    return bytes(out)


def expected_legacy(magic: int, records, wrapper_offset: int | None = None,
                    log_append_time: int | None = None) -> list[tuple]:
    """What Kafka reads (AbstractLegacyRecordBatch): magic 0 offsets as written and no timestamp;
    magic 1 compressed offsets made absolute from the wrapper's (last) offset, except that a wrapper
    offset of 0 leaves them as written ("produce data from certain versions of librdkafka")."""
    base = 0
    if wrapper_offset is not None and magic == 1 and wrapper_offset != 0:
        base = wrapper_offset - records[-1][0]
    out = []
    for offset, ts, key, value in records:
        if magic == 0:
            out.append((offset, -1, -1, key, value, ()))
        elif log_append_time is not None:
            out.append((base + offset, log_append_time, 1, key, value, ()))
        else:
            out.append((base + offset, ts, 0, key, value, ()))
    return out


def assert_same_legacy_reading(blob: bytes, expected: list[tuple]) -> list[LegacyBatch]:
    ours = read_batches(blob)
    assert all(isinstance(b, LegacyBatch) and b.is_valid() for b in ours)
    theirs = kp_read_blob(blob)
    assert len(ours) == len(theirs)
    for our_batch, (their_batch, _) in zip(ours, theirs):
        assert isinstance(their_batch, LegacyRecordBatch)
        assert our_batch.magic == their_batch.magic
        assert int(our_batch.compression) == their_batch.compression_type
        assert our_batch.size == their_batch.size_in_bytes
        assert our_batch.offset == their_batch.base_offset  # the wrapper's (last) offset, as written
        assert int(our_batch.timestamp_type) == (-1 if their_batch.timestamp_type is None
                                                 else their_batch.timestamp_type)
    our_records = [kw_tuple(r) for batch in ours for r in batch.records()]
    assert [kw_tuple(r) for r in iter_records(blob)] == our_records
    assert our_records == expected
    assert [r for _, records in theirs for r in records] == expected
    return ours


@pytest.mark.parametrize("magic", [0, 1])
@_settings()
@given(data=st.data())
def test_legacy_uncompressed_both_ways_and_same_bytes(magic, data):
    """Uncompressed message sets: kafka-python's (any int64 timestamp) read here; for what both can
    write, the bytes are the same and kafkawire's read there."""
    records = data.draw(legacy_records(magic, compressed=False), "records")
    assert_same_legacy_reading(kp_build_legacy(magic, records, Codec.NONE), expected_legacy(magic, records))
    records = data.draw(legacy_records(magic, compressed=False, low=WRITABLE), "writable records")
    ours = kw_build_legacy(magic, records, Codec.NONE)
    assert ours == kp_build_legacy(magic, records, Codec.NONE)
    assert_same_legacy_reading(ours, expected_legacy(magic, records))


@_settings(20)
@given(data=st.data(), log_append_time=st.integers(0, INT64_MAX))
def test_legacy_uncompressed_log_append_time(data, log_append_time):
    """A magic-1 message set written with LogAppendTime carries the log-append time in every message,
    as Kafka's MemoryRecordsBuilder.appendLegacyRecord writes it (``if (timestampType ==
    LOG_APPEND_TIME) timestamp = logAppendTime``); kafka-python and kafkawire then read that time."""
    records = data.draw(legacy_records(1, compressed=False, low=WRITABLE), "records")
    blob = kw_build_legacy(1, records, Codec.NONE, timestamp_type=TimestampType.LOG_APPEND_TIME,
                           log_append_time=log_append_time)
    assert_same_legacy_reading(blob, expected_legacy(1, records, log_append_time=log_append_time))


@pytest.mark.parametrize("magic,codec", [
    pytest.param(m, c.values[0], id=f"v{m}-{c.id}", marks=c.marks)
    for m in (0, 1) for c in _codec_params(m, LEGACY_CODECS[1:])])
@pytest.mark.parametrize("stage", ["produced", "fetched"])
@_settings()
@given(data=st.data(), assigned=st.integers(0, 1 << 40))
def test_legacy_compressed_kafka_python_wrappers_decode_here(magic, codec, stage, data, assigned):
    """kafka-python's compressed wrappers as it produces them (wrapper offset 0 and timestamp 0), and
    as fetched after a broker assigned offsets (wrapper offset = absolute offset of the last message)."""
    records = data.draw(legacy_records(magic, compressed=True), "records")
    blob = kp_build_legacy(magic, records, codec)
    wrapper_offset = 0
    if stage == "fetched":
        wrapper_offset = assigned + records[-1][0] if magic == 1 else records[-1][0]
        blob = _javaify_legacy_wrapper(blob, magic, wrapper_offset)
    (batch,) = assert_same_legacy_reading(blob, expected_legacy(magic, records, wrapper_offset))
    assert batch.compression == codec


@pytest.mark.parametrize("magic,codec", [
    pytest.param(m, c.values[0], id=f"v{m}-{c.id}", marks=c.marks)
    for m in (0, 1) for c in _codec_params(m, LEGACY_CODECS[1:])])
@_settings()
@given(data=st.data(), log_append_time=st.one_of(st.none(), st.integers(0, INT64_MAX)), first=st.integers(0, 1 << 40))
def test_legacy_compressed_kafkawire_wrappers_decode_in_kafka_python(magic, codec, data, log_append_time, first):
    """LegacyMessageSetBuilder's compressed wrappers read in kafka-python as they went in (magic 1:
    relative inner offsets, wrapper = last absolute offset; LogAppendTime takes the wrapper's timestamp)."""
    records = data.draw(legacy_records(magic, compressed=True, low=WRITABLE), "records")
    if magic == 1:
        records = [(first + offset, ts, key, value) for offset, ts, key, value in records]
    log_append = magic == 1 and log_append_time is not None
    blob = kw_build_legacy(magic, records, codec, log_append_time=log_append_time,
                           timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME)
    (batch,) = assert_same_legacy_reading(blob, expected_legacy(
        magic, records, log_append_time=log_append_time if log_append else None))
    assert batch.offset == records[-1][0]
    if magic == 1 and not log_append:
        assert batch.timestamp == max(r[1] for r in records)


@pytest.mark.parametrize("magic,codec", [
    pytest.param(m, c.values[0], id=f"v{m}-{c.id}", marks=c.marks)
    for m in (0, 1) for c in _codec_params(m, LEGACY_CODECS[1:])])
@_settings(25)
@given(data=st.data())
def test_legacy_compressed_same_bytes_as_kafka_python(magic, codec, data):
    """Same inputs, same wrapper, once kafka-python's wrapper offset and timestamp (0 and 0) are set to
    what Kafka's MemoryRecordsBuilder writes (last offset, max timestamp). Where the codec's bytes
    legitimately differ, the wrappers' headers and the decompressed inner message sets must match."""
    records = data.draw(legacy_records(magic, compressed=True, low=WRITABLE), "records")
    theirs = kp_build_legacy(magic, records, codec)
    theirs = _javaify_legacy_wrapper(theirs, magic, records[-1][0],
                                     max(r[1] for r in records) if magic == 1 else None)
    ours = kw_build_legacy(magic, records, codec, level=KP_LEVEL.get(codec))
    if codec_difference(codec, magic) is None:
        assert ours == theirs
        return
    # the wrapper: log prefix but for the size, header after the CRC, null key; then the value
    start = _LEGACY_WRAPPER[magic].size + 8  # wrapper header, key length (-1), value length
    assert ours[:8] == theirs[:8] and ours[16:start - 4] == theirs[16:start - 4]
    assert_same_compressed(codec, magic, ours[start:], theirs[start:])
    assert decompress(codec, ours[start:], legacy_lz4=magic == 0) == kp_build_legacy(magic, records, Codec.NONE)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_kafka_python_wrapper_offset_zero_is_kafkas_librdkafka_case(magic):
    """kafka-python's producer leaves a compressed wrapper's offset at 0. Kafka reads such a magic-1
    wrapper's inner offsets as they are (AbstractLegacyRecordBatch: "The outer offset may be 0 if
    this is produce data from certain versions of librdkafka"), not as 0 - last + relative."""
    records = [(i, 1000 + i, None, b"v%d" % i) for i in range(3)]
    blob = kp_build_legacy(magic, records, Codec.GZIP)
    assert struct.unpack_from(">q", blob)[0] == 0
    assert [r.offset for r in iter_records(blob)] == [0, 1, 2]


# =========================================================================================================
# Several batches in one blob: MemoryRecordsBuilder output of every magic, then a partial tail

@st.composite
def batch_specs(draw):
    magic = draw(st.sampled_from([0, 1, 2]))
    codecs = [c for c in (V2_CODECS if magic == 2 else LEGACY_CODECS) if _kp_codec_missing(c, magic) is None]
    codec = draw(st.sampled_from(codecs))
    n = draw(st.integers(1, 4))
    records = [(draw(st.integers(0, 1 << 42)), draw(_maybe_bytes()), draw(_maybe_bytes()),
                draw(_headers) if magic == 2 else []) for _ in range(n)]
    return magic, codec, records


@_settings(30)
@given(specs=st.lists(batch_specs(), min_size=1, max_size=4), cut=st.integers(0, 200))
def test_memory_records_blob(specs, cut):
    """A fetch-response-like blob: batches of all three magics (a topic upgraded over time) that
    kafka-python's MemoryRecordsBuilder wrote, then part of another batch. kafka-python's MemoryRecords
    and kafkawire's iter_batches see the same batches and records, and both ignore the partial tail."""
    blobs = []
    next_offset = 0
    expected = []
    for magic, codec, records in specs:
        builder = MemoryRecordsBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 30,
                                       offset=next_offset if magic != 2 else 0)
        for ts, key, value, headers in records:
            assert builder.append(ts, key, value, list(headers)) is not None
        builder.close()
        blob = bytes(builder.buffer())
        if magic == 2:
            blob = set_base_offset_and_epoch(blob, next_offset, 3)
        elif codec != Codec.NONE:
            # the broker's offset assignment: the wrapper takes the absolute offset of its last message
            blob = _javaify_legacy_wrapper(blob, magic, next_offset + len(records) - 1)
        blobs.append(blob)
        for i, (ts, key, value, headers) in enumerate(records):
            expected.append((next_offset + i, -1 if magic == 0 else ts, -1 if magic == 0 else 0, key, value,
                             tuple(headers)))
        next_offset += len(records)
    whole = b"".join(blobs)
    first_entry = 12 + struct.unpack_from(">i", blobs[0], 8)[0]  # a batch, or one legacy message
    blob = whole + blobs[0][:min(cut, first_entry - 1)]
    theirs = kp_read_blob(blob)
    ours = list(iter_batches(memoryview(bytearray(blob))))  # any buffer, read in place
    # one batch per magic-2 batch or compressed wrapper, one per message of an uncompressed legacy set
    assert len(ours) == len(theirs) == sum(1 if magic == 2 or codec else len(records)
                                           for magic, codec, records in specs)
    assert [r for _, records in theirs for r in records] == expected
    assert [kw_tuple(r) for r in iter_records(blob)] == expected
    assert [kw_tuple(r) for r in iter_records(memoryview(bytearray(blob)))] == expected
    for our_batch, (their_batch, _) in zip(ours, theirs):
        assert our_batch.magic == their_batch.magic
        assert our_batch.size == their_batch.size_in_bytes


# =========================================================================================================
# kio 0.6.5: magic 2, no compression

# kio models a record's timestamp as a timezone-aware datetime (TZAwareMicros): its reader truncates to
# whole seconds and refuses negative ones (see the xfails below). Inside that domain the comparison is
# exact: timestamps are whole seconds from the epoch to the end of datetime's range.
_KIO_MAX_SECONDS = int(datetime.datetime.max.replace(tzinfo=datetime.UTC).timestamp()) - 1
_kio_timestamp = st.one_of(st.sampled_from([0, 1_700_000_000, _KIO_MAX_SECONDS]),
                           st.integers(0, _KIO_MAX_SECONDS)).map(lambda s: s * 1000)


@st.composite
def kio_batches(draw, max_size: int = 8):
    """(base_offset, [(offset_delta, timestamp, key, value, headers)], producer, transactional, epoch)."""
    n = draw(st.integers(1, max_size))
    deltas = sorted(draw(st.sets(st.one_of(st.integers(0, 40), st.integers(0, INT32_MAX)), min_size=n - 1,
                                 max_size=n - 1).filter(lambda s: 0 not in s)))
    records = [(delta, draw(_kio_timestamp), draw(_maybe_bytes()), draw(_maybe_bytes()), draw(_headers))
               for delta in [0, *deltas]]
    base_offset = draw(_base_offset_for(records))
    return base_offset, records, draw(_producer), draw(st.booleans()), draw(_leader_epoch)


def _kio_datetime(ms: int) -> TZAwareMicros:
    return TZAwareMicros.parse(datetime.datetime.fromtimestamp(ms // 1000, datetime.UTC)
                               + datetime.timedelta(milliseconds=ms % 1000))


def kio_new_batch(base_offset, records, producer, transactional, leader_epoch) -> KioNewBatch:
    producer_id, producer_epoch, base_sequence = producer
    return KioNewBatch(
        producer_id=i64(producer_id), producer_epoch=i16(producer_epoch), base_sequence=i32(base_sequence),
        partition_leader_epoch=i32(leader_epoch), attributes=i16(0x10 if transactional else 0),
        records=tuple(KioRecord(attributes=i8(0), timestamp=_kio_datetime(ts), offset=i64(base_offset + delta),
                                key=key, value=value,
                                headers=tuple(KioHeader(key=k.encode(), value=v) for k, v in headers))
                      for delta, ts, key, value, headers in records))


def kio_write(batch) -> bytes:
    out = io.BytesIO()
    kio_writers.write_batch(out, batch)
    return out.getvalue()


def kio_record_tuple(record: KioRecord) -> tuple:
    seconds = record.timestamp - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    ms = seconds // datetime.timedelta(milliseconds=1)
    return (record.offset, ms, record.attributes, record.key, record.value,
            tuple((h.key, h.value) for h in record.headers))


def kio_metadata(batch: KioBatch) -> dict:
    return dict(base_offset=batch.base_offset, length=batch.batch_length,
                leader_epoch=batch.partition_leader_epoch, crc=batch.crc, attributes=batch.attributes,
                last_offset_delta=batch.last_offset_delta, base_timestamp=batch.base_timestamp,
                max_timestamp=batch.max_timestamp, producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence, count=len(batch.records))


def kw_as_kio(batch: RecordBatch) -> tuple[dict, list[tuple]]:
    metadata = dict(base_offset=batch.base_offset, length=batch.length, leader_epoch=batch.partition_leader_epoch,
                    crc=batch.crc, attributes=batch.attributes, last_offset_delta=batch.last_offset_delta,
                    base_timestamp=batch.base_timestamp, max_timestamp=batch.max_timestamp,
                    producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                    base_sequence=batch.base_sequence, count=batch.count)
    # kio keeps each record's attributes byte (always 0: unused) and header keys as bytes
    records = [(r.offset, r.timestamp, 0, r.key, r.value, tuple((h.key.encode(), h.value) for h in r.headers))
               for r in batch.records()]
    return metadata, records


def assert_same_kio_reading(blob: bytes) -> tuple[RecordBatch, KioBatch]:
    (ours,) = read_batches(blob)
    assert ours.is_valid()
    theirs, size = kio_readers.read_batch(blob, 0)
    assert size == len(blob)
    metadata, records = kw_as_kio(ours)
    assert kio_metadata(theirs) == metadata
    assert [kio_record_tuple(r) for r in theirs.records] == records
    assert columns_tuples(ours) == [kw_tuple(r) for r in ours.records()]
    return ours, theirs


@_settings(60)
@given(spec=kio_batches())
def test_kio_both_ways_and_same_bytes(spec):
    """kio's write_new_batch and RecordBatchBuilder write the same bytes for the same records; kio
    reads them as kafkawire does, and kio's write_batch re-writes what it read byte for byte."""
    base_offset, records, producer, transactional, leader_epoch = spec
    theirs = kio_write(kio_new_batch(*spec))
    ours = kw_build_v2(records, Codec.NONE, producer, transactional, base_offset=base_offset,
                       leader_epoch=leader_epoch)
    assert ours == theirs
    batch, kio_batch = assert_same_kio_reading(ours)
    assert [kw_tuple(r) for r in batch.records()] == expected_v2(records, base_offset)
    assert kio_write(kio_batch) == ours  # write_batch of the RecordBatch kio read


def test_kio_reads_empty_and_control_batches():
    """Batches kio cannot write (no records; control) still read there as here."""
    assert_same_kio_reading(kw_build_v2([], Codec.NONE, (5, 1, 0), True))
    blob = transaction_marker_batch(True, producer_id=5, producer_epoch=1, coordinator_epoch=9,
                                    timestamp=1_700_000_000_000)
    _, theirs = assert_same_kio_reading(blob)
    assert theirs.attributes & 0x30 == 0x30


# ---- kio bugs: strict xfails, so a fixed kio shows up as XPASS --------------------------------------------

def _one_record_batch(timestamp: int, **options) -> bytes:
    builder = RecordBatchBuilder(partition_leader_epoch=0, **options)
    builder.append(b"value", key=b"key", timestamp=timestamp)
    return builder.build()


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "kio bug: kio.records.readers.read_record builds the timestamp with "
    "datetime.fromtimestamp(ms / 1000).replace(microsecond=0), dropping the milliseconds Kafka's "
    "timestamps carry"))
def test_kio_bug_millisecond_timestamps_are_truncated():
    theirs, _ = kio_readers.read_batch(_one_record_batch(1_700_000_000_123), 0)
    assert kio_record_tuple(theirs.records[0])[1] == 1_700_000_000_123


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "kio bug: kio.records.writers.write_record converts a record's datetime back to milliseconds with "
    "int(timestamp.timestamp() * 1000), which truncates the float's error: 34_870_843_104_269 ms "
    "(3075-01-05T17:18:24.269Z) is written as ...268 (about 0.6 % of ms values up to year 9999)"))
def test_kio_bug_writer_rounds_milliseconds_down():
    ms = 34_870_843_104_269
    record = KioRecord(attributes=i8(0), timestamp=_kio_datetime(ms), offset=i64(0), key=None, value=b"v",
                       headers=())
    blob = kio_write(KioNewBatch(producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
                                 attributes=i16(0), records=(record,)))
    (batch,) = read_batches(blob)
    assert batch.base_timestamp == ms


@pytest.mark.xfail(strict=True, raises=TypeError, reason=(
    "kio bug: negative timestamps (valid int64 in the format; -1 is NO_TIMESTAMP) cannot be read: "
    "TZAwareMicros refuses datetimes before the epoch"))
def test_kio_bug_negative_timestamps_are_refused():
    theirs, _ = kio_readers.read_batch(_one_record_batch(-1), 0)
    assert kio_record_tuple(theirs.records[0])[1] == -1


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "kio bug: read_record ignores the batch's timestamp type; with LogAppendTime (attribute bit 3) a "
    "record's timestamp is the batch's MaxTimestamp, not BaseTimestamp + delta"))
def test_kio_bug_log_append_time_is_ignored():
    blob = _one_record_batch(1_000_000_000_000, timestamp_type=TimestampType.LOG_APPEND_TIME,
                             log_append_time=1_700_000_000_000)
    (ours,) = read_batches(blob)
    assert ours.records()[0].timestamp == 1_700_000_000_000
    theirs, _ = kio_readers.read_batch(blob, 0)
    assert kio_record_tuple(theirs.records[0])[1] == 1_700_000_000_000


@pytest.mark.parametrize("codec", [c for c in Codec if c != Codec.NONE], ids=lambda c: c.name.lower())
@pytest.mark.xfail(strict=True, reason=(
    "kio limitation: no compression. read_batch never looks at the codec bits (attributes 0-2) and "
    "parses the compressed stream as records"))
def test_kio_bug_compressed_batches_are_not_decompressed(codec):
    blob = _one_record_batch(1_700_000_000_000, compression=codec)
    theirs, _ = kio_readers.read_batch(blob, 0)
    assert [(r.key, r.value) for r in theirs.records] == [(b"key", b"value")]


# =========================================================================================================
# The codecs themselves

@pytest.mark.parametrize("codec,magic", [
    pytest.param(c.values[0], m, id=f"{c.id}-v{m}", marks=c.marks)
    for m in (0, 1, 2) for c in _codec_params(m, V2_CODECS[1:] if m == 2 else LEGACY_CODECS[1:])])
@pytest.mark.parametrize("size", [0, 1, 5000, 200_000])
def test_codec_parameters(codec, magic, size):
    """Each library's compressed bytes decompress in the other; kafkawire's are reproducible; and they
    equal kafka-python's, or differ exactly as CODEC_DIFFERENCES says."""
    sample = (bytes(range(256)) * 40 + b"kafkawire" * 300 + bytes((i * 131) & 0xFF for i in range(9000)))
    sample = (sample * (size // len(sample) + 1))[:size]
    legacy = magic == 0
    ours = compress(codec, sample, KP_LEVEL.get(codec), legacy_lz4=legacy)
    theirs = _kp_compress(codec, sample, magic)
    assert decompress(codec, theirs, legacy_lz4=legacy) == sample
    if not (codec == Codec.SNAPPY and size == 0):  # test_kafka_python_bug_header_only_xerial_stream
        assert _kp_decompress(codec, ours, magic) == sample
    assert compress(codec, sample, KP_LEVEL.get(codec), legacy_lz4=legacy) == ours
    difference = codec_difference(codec, magic)
    if difference is None:
        assert ours == theirs
    else:
        reason, form = difference
        # (lz4 writes no content size for empty input)
        assert ours != theirs or (codec == Codec.LZ4 and size == 0), f"listed as differing, but identical: {reason}"
        assert form(ours) == form(theirs), reason


@pytest.mark.skipif(not kp_codec.has_snappy(), reason=_kp_codec_missing(Codec.SNAPPY, 2) or "")
@pytest.mark.xfail(strict=True, raises=Exception, reason=(
    "kafka-python bug: kafka.codec._detect_xerial_stream wants more than 16 bytes (len(payload) > 16), so "
    "a xerial stream of the header alone (what snappy_encode(b'') itself writes, and kafkawire for an "
    "empty compressed batch) is taken for a raw snappy block and fails to decompress"))
def test_kafka_python_bug_header_only_xerial_stream():
    stream = kp_codec.snappy_encode(b"")
    assert stream == compress(Codec.SNAPPY, b"") and len(stream) == 16
    assert decompress(Codec.SNAPPY, stream) == b""
    assert kp_codec.snappy_decode(stream) == b""

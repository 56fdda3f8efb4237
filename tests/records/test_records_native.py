"""The C record reader (kafkawire/records/_rows.c) against the Python one it stands in for.

RecordBatch.rows uses the C reader when it was built; on malformed records it answers None and the
Python reader runs to raise the error. So the two must agree exactly: the same rows (values and
types) for every well-formed batch, and None exactly where the Python reader raises.
"""
from __future__ import annotations

from array import array
from contextlib import contextmanager
from itertools import accumulate

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.errors import RecordsError
from kafkawire.records import Codec, RecordBatch, RecordBatchBuilder, RecordColumns
from kafkawire.records import batch as batch_module
from kafkawire.records.batch import wrap_int64
from kafkawire.records.layouts import BATCH_HEADER_SIZE
from kafkawire.records.record import Header, TimestampType
from kafkawire.records.varints import write_varint, write_varlong

native = batch_module._native
pytestmark = pytest.mark.skipif(native is None, reason="the C record reader was not built")

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class Row(tuple):
    __slots__ = ()


maybe_bytes = st.none() | st.binary(max_size=200)
header_lists = st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=3)
records = st.lists(st.tuples(maybe_bytes, maybe_bytes, header_lists, st.integers(-1, INT64_MAX)), max_size=30)
bases = st.integers(INT64_MIN, INT64_MAX) | st.sampled_from([0, INT64_MAX, INT64_MIN, INT64_MAX - 3])


def build(rows, *, base_offset=0, log_append_time=None, gap=1) -> RecordBatch:
    options = {}
    if log_append_time is not None:
        options = dict(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=log_append_time)
    builder = RecordBatchBuilder(base_offset=max(0, base_offset), **options)
    for index, (key, value, headers, timestamp) in enumerate(rows):
        builder.append(value, key=key, headers=headers, timestamp=timestamp, offset_delta=index * gap)
    return RecordBatch(memoryview(builder.build()))


def both(batch: RecordBatch, data: bytes, base_offset=None, base_timestamp=None, context=("t", 3, 0, None),
         row_type=tuple):
    """(C rows or None, Python rows or the RecordsError it raised) for ``data`` read as ``batch``'s records."""
    fixed = batch.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    args = (data, batch.count, batch.base_offset if base_offset is None else base_offset,
            batch.base_timestamp if base_timestamp is None else base_timestamp, fixed, context, row_type)
    ours = native.read_rows(*args)
    try:
        theirs = batch_module._read_rows(*args)
    except RecordsError as error:
        theirs = error
    return ours, theirs


def assert_same_rows(ours, theirs, row_type=tuple):
    assert not isinstance(theirs, RecordsError), theirs
    assert ours == theirs
    for mine, reference in zip(ours, theirs):
        assert type(mine) is row_type is type(reference)
        assert [type(v) for v in mine] == [type(v) for v in reference]
        assert all(type(h) is Header and type(h.key) is str for h in mine[8])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.integers(0, INT64_MAX), st.booleans(), st.integers(1, 1000))
def test_well_formed_batches_give_the_python_readers_rows(rows, base_offset, log_append, gap):
    batch = build(rows, base_offset=base_offset, log_append_time=1_700_000_000_000 if log_append else None, gap=gap)
    ours, theirs = both(batch, batch.records_data(), row_type=Row)
    assert_same_rows(ours, theirs, Row)
    assert batch.rows(("t", 3, 0, None), Row) == theirs  # what RecordBatch.rows hands out


@settings(max_examples=200)
@given(records, bases, bases)
def test_offsets_and_timestamps_wrap_like_javas_longs(rows, base_offset, base_timestamp):
    batch = build(rows)
    ours, theirs = both(batch, batch.records_data(), base_offset=base_offset, base_timestamp=base_timestamp)
    assert_same_rows(ours, theirs)


def mutated(records: bytes, count: int, data, kinds: list[str]) -> tuple[bytearray, int]:
    """``records`` (non-empty) and ``count`` after one mutation of a kind drawn from ``kinds``."""
    good = bytearray(records)
    mutation = data.draw(st.sampled_from(kinds))
    if mutation == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, len(good) - 1))
            good[at] ^= 1 << data.draw(st.integers(0, 7))
    elif mutation == "truncate":
        del good[data.draw(st.integers(0, len(good) - 1)):]
    elif mutation == "extend":
        good += data.draw(st.binary(min_size=1, max_size=20))
    elif mutation == "splice":  # bytes such as 0x80 and 0xFF make long and overlong varints
        at = data.draw(st.integers(0, len(good) - 1))
        cut = data.draw(st.integers(0, 12))
        filler = st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF])
        good[at:at + cut] = bytes(data.draw(st.lists(filler | st.integers(0, 255), max_size=12)))
    elif mutation == "random":
        good = bytearray(data.draw(st.binary(max_size=400)))
    else:
        count = data.draw(st.integers(-5, count + 5))
    return good, count


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(records.filter(bool), st.data())
def test_malformed_records_are_left_to_the_python_reader(rows, data):
    batch = build(rows)
    good, count = mutated(batch.records_data(), batch.count, data, ["flip", "truncate", "extend", "random", "count"])
    args = (bytes(good), count, batch.base_offset, batch.base_timestamp, None, ("t", 0, 0, None), tuple)
    ours = native.read_rows(*args)
    try:
        theirs = batch_module._read_rows(*args)
    except RecordsError:
        assert ours is None
    else:
        assert_same_rows(ours, theirs)


def test_rows_raise_the_python_readers_error_for_malformed_records():
    builder = RecordBatchBuilder()
    builder.append(b"value", key=b"key")
    blob = bytearray(builder.build())
    blob[BATCH_HEADER_SIZE] = 0x7E  # the record's length (zigzag 63) now runs past the records (no CRC check here)
    batch = RecordBatch(memoryview(blob))
    assert native.read_rows(batch.records_data(), 1, 0, 0, None, ("t", 0, 0, None), tuple) is None
    with pytest.raises(RecordsError, match="record length 63") as caught:
        batch.rows()
    assert caught.value.offset == BATCH_HEADER_SIZE


def test_arguments_are_checked():
    batch = build([(b"k", b"v", [], 5)])
    data = batch.records_data()
    with pytest.raises(ValueError):
        native.read_rows(data, 1, 0, 0, None, ("only", "three", "values"), tuple)
    with pytest.raises(TypeError):
        native.read_rows(data, 1, 0, 0, None, ("t", 0, 0, None), list)
    with pytest.raises(TypeError):
        native.read_rows(data, 1, 0, 0, "not a timestamp", ("t", 0, 0, None), tuple)


# ---- read_columns: the C twin of _read_records (RecordBatch.columns) --------------------------------------

COLUMN_TYPES = dict(batch_module._NATIVE_COLUMNS)
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def encode_records(records) -> bytes:
    """Records written field by field, so deltas can be anything a varint holds (the builder only
    writes what Kafka's producer would)."""
    out = bytearray()
    for timestamp_delta, offset_delta, key, value, headers in records:
        body = bytearray(b"\x00")  # attributes
        write_varlong(body, timestamp_delta)
        write_varint(body, offset_delta)
        for blob in (key, value):
            write_varint(body, -1 if blob is None else len(blob))
            body += blob or b""
        write_varint(body, len(headers))
        for header_key, header_value in headers:
            write_varint(body, len(header_key))
            body += header_key
            write_varint(body, -1 if header_value is None else len(header_value))
            body += header_value or b""
        write_varint(out, len(body))
        out += body
    return bytes(out)


raw_headers = st.lists(st.tuples(st.binary(max_size=8), maybe_bytes), max_size=4)
raw_records = st.lists(st.tuples(st.integers(INT64_MIN, INT64_MAX) | st.integers(-300, 300),
                                 st.integers(INT32_MIN, INT32_MAX) | st.integers(-300, 300),
                                 maybe_bytes, maybe_bytes, raw_headers), max_size=25)
fixed_timestamps = st.none() | st.integers(INT64_MIN, INT64_MAX)


def native_columns(data, count, base_offset, base_timestamp, fixed_timestamp):
    """read_columns' buffers as arrays by RecordColumns name, or None."""
    buffers = native.read_columns(data, count, base_offset, base_timestamp, fixed_timestamp)
    if buffers is None:
        return None
    assert len(buffers) == len(COLUMN_TYPES) and all(type(raw) is bytes for raw in buffers)
    return {name: array(typecode, raw) for (name, typecode), raw in zip(COLUMN_TYPES.items(), buffers)}


def python_columns(data, count, base_offset, base_timestamp, fixed_timestamp):
    """_read_records' columns as arrays by name, or the RecordsError it raised."""
    columns = RecordColumns(data, TimestampType.CREATE_TIME)
    try:
        batch_module._read_records(data, count, base_offset, base_timestamp, fixed_timestamp, columns)
    except RecordsError as error:
        return error
    return {name: getattr(columns, name) for name in COLUMN_TYPES}


def assert_same_columns(ours, theirs):
    assert not isinstance(theirs, RecordsError), theirs
    assert ours is not None
    for name, typecode in COLUMN_TYPES.items():
        assert ours[name].typecode == theirs[name].typecode == typecode, name
        assert ours[name] == theirs[name], name


def assert_agree(data, count, base_offset=0, base_timestamp=0, fixed_timestamp=None):
    """C gives None exactly where Python raises, and the same columns everywhere else."""
    args = (bytes(data), count, base_offset, base_timestamp, fixed_timestamp)
    ours, theirs = native_columns(*args), python_columns(*args)
    if isinstance(theirs, RecordsError):
        assert ours is None, theirs
    else:
        assert_same_columns(ours, theirs)
    return ours


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(raw_records, bases, bases, fixed_timestamps)
def test_columns_match_the_python_reader(records, base_offset, base_timestamp, fixed_timestamp):
    data = encode_records(records)
    args = (data, len(records), base_offset, base_timestamp, fixed_timestamp)
    ours = native_columns(*args)
    assert_same_columns(ours, python_columns(*args))
    # and they say what was written, offsets and timestamps wrapped as Java's longs wrap
    assert list(ours["offsets"]) == [wrap_int64(base_offset + r[1]) for r in records]
    expected_timestamps = [wrap_int64(base_timestamp + r[0]) if fixed_timestamp is None else fixed_timestamp
                           for r in records]
    assert list(ours["timestamps"]) == expected_timestamps
    assert list(ours["headers_at"]) == [0] + list(accumulate(len(r[4]) for r in records))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.integers(0, INT64_MAX), st.booleans(), st.integers(1, 1000))
def test_columns_of_built_batches_match_the_python_reader(rows, base_offset, log_append, gap):
    batch = build(rows, base_offset=base_offset, log_append_time=1_700_000_000_000 if log_append else None, gap=gap)
    fixed = batch.max_timestamp if log_append else None
    args = (batch.records_data(), batch.count, batch.base_offset, batch.base_timestamp, fixed)
    assert_same_columns(native_columns(*args), python_columns(*args))


def test_header_columns_grow_past_their_first_allocation():
    records = [(i, i, b"k%d" % i, None, [(b"h%d" % h, None if h % 3 == 0 else b"v" * h) for h in range(i % 40)])
               for i in range(60)]
    ours = assert_agree(encode_records(records), len(records), 5, 7)
    assert ours["headers_at"][-1] == sum(i % 40 for i in range(60)) == len(ours["header_key_starts"])
    assert ours["header_value_lengths"][0] == -1  # a null header value


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(raw_records.filter(bool), fixed_timestamps, st.data())
def test_malformed_columns_are_left_to_the_python_reader(records, fixed_timestamp, data):
    good, count = mutated(encode_records(records), len(records), data,
                          ["flip", "truncate", "extend", "splice", "random", "count"])
    assert_agree(good, count, 0, 1_700_000_000_000, fixed_timestamp)


def one_record(timestamp_delta: bytes = b"\x00", header_count: bytes = b"\x00", headers: bytes = b"") -> bytes:
    """A record with a null key and an empty value, its timestamp delta and header fields given as raw bytes."""
    body = b"\x00" + timestamp_delta + b"\x00" + b"\x01" + b"\x00" + header_count + headers
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out) + body


@pytest.mark.parametrize("record, readable", [
    (one_record(b"\xff" * 9 + b"\x01"), True),  # a ten-byte varlong using bit 63
    (one_record(b"\xff" * 9 + b"\x02"), False),  # ... and one past 64 bits
    (one_record(b"\xff" * 10 + b"\x00"), False),  # eleven bytes
    (one_record(header_count=b"\x80\x00"), True),  # a header count of zero in two bytes
    # (zigzag: 0x02 is one, 0x04 two, 0x01 minus one, 0x03 minus two)
    (one_record(header_count=b"\x04", headers=b"\x00\x01"), False),  # two headers in two bytes
    (one_record(header_count=b"\x04", headers=b"\x00\x01\x00\x01"), True),  # two empty keys, null values
    (one_record(header_count=b"\x01"), False),  # a header count of -1
    (one_record(header_count=b"\x02", headers=b"\x01\x00"), False),  # a null header key
    (one_record(header_count=b"\x02", headers=b"\x00\x03"), False),  # a header value length of -2
    (one_record(header_count=b"\x02", headers=b"\x04\x00"), False),  # a header key past the record's end
    (one_record(header_count=b"\x02", headers=b"\x00\xfe\xff\xff\xff\x0f"), False),  # a value of int32-max bytes
    (one_record(header_count=b"\x02", headers=b"\x00\xfe\xff\xff\xff\x1f"), False),  # a varint over 32 bits
])
def test_varint_and_header_edges_agree(record, readable):
    assert (assert_agree(record, 1) is not None) is readable


@contextmanager
def pure_python_records():
    saved, batch_module._native = batch_module._native, None
    try:
        yield
    finally:
        batch_module._native = saved


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.integers(0, INT64_MAX), st.booleans(), st.sampled_from([Codec.NONE, Codec.GZIP]))
def test_record_batch_columns_are_the_same_with_and_without_the_c_reader(rows, base_offset, log_append, codec):
    options = dict(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=1_700_000_000_000) if log_append else {}
    builder = RecordBatchBuilder(base_offset=base_offset, compression=codec, **options)
    for key, value, headers, timestamp in rows:
        builder.append(value, key=key, headers=headers, timestamp=timestamp)
    batch = RecordBatch(memoryview(builder.build()))
    ours = batch.columns()
    with pure_python_records():
        theirs = batch.columns()
    assert ours.data == theirs.data and ours.timestamp_type is theirs.timestamp_type
    assert_same_columns({name: getattr(ours, name) for name in COLUMN_TYPES},
                        {name: getattr(theirs, name) for name in COLUMN_TYPES})
    assert ours.records() == theirs.records() == batch.records()


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP])
def test_record_batch_columns_raise_the_python_readers_error(codec):
    builder = RecordBatchBuilder(compression=codec)
    builder.append(b"value", key=b"key", headers=[("h", b"x")])
    builder.append(b"second")
    batch = RecordBatch(memoryview(builder.build()))
    data = bytearray(batch.records_data())
    data[-1] = 0x02  # the last record's header count: one header that cannot fit
    assert native.read_columns(bytes(data), 2, 0, 0, None) is None
    broken = builder_free_batch(batch, bytes(data))
    with pytest.raises(RecordsError) as ours:
        broken.columns()
    with pure_python_records(), pytest.raises(RecordsError) as theirs:
        broken.columns()
    assert (ours.value.reason, ours.value.offset, ours.value.path, ours.value.base_offset) == \
        (theirs.value.reason, theirs.value.offset, theirs.value.path, theirs.value.base_offset)
    assert "header count" in ours.value.reason and ours.value.path == ["records[1]"]


def builder_free_batch(batch: RecordBatch, records_data: bytes) -> RecordBatch:
    """``batch``'s header over uncompressed ``records_data`` (no CRC check on this path)."""
    header = bytearray(batch.buffer[:BATCH_HEADER_SIZE])
    header[21:23] = (int.from_bytes(header[21:23], "big") & ~0x07).to_bytes(2, "big")  # codec bits: none
    header[8:12] = (len(header) + len(records_data) - 12).to_bytes(4, "big")  # batch length
    return RecordBatch(memoryview(bytes(header) + records_data))


def test_read_columns_checks_its_arguments():
    data = encode_records([(0, 0, b"k", b"v", [])])
    with pytest.raises(TypeError):
        native.read_columns(data, 1, 0, 0, "not a timestamp")
    with pytest.raises(OverflowError):
        native.read_columns(data, 1, 0, 0, 1 << 63)
    assert native.read_columns(data, -1, 0, 0, None) is None  # a negative count is the Python reader's to judge


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.integers(0, 1 << 40), st.integers(1, 1000), st.integers(-5, 40), st.integers(-5, 40),
       st.lists(st.integers(), max_size=2))
def test_bounded_rows_with_a_tail_are_the_full_rows_picked_and_extended(rows, base_offset, gap, low, high, tail):
    """rows(first=, last=, tail=) (a share consumer's acquired records with their delivery count): the
    rows of the records in that offset range, each ending with ``tail``, with and without the C reader."""
    batch = build(rows, base_offset=base_offset, gap=gap)
    first, last = base_offset + low * gap, base_offset + high * gap
    expected = [Row((*row, *tail)) for row in batch.rows(("t", 3, 0, None)) if first <= row[4] <= last]
    ours = batch.rows(("t", 3, 0, None), Row, tuple(tail), first, last)
    assert_same_rows(ours, expected, Row)
    with pure_python_records():
        assert_same_rows(batch.rows(("t", 3, 0, None), Row, tuple(tail), first, last), expected, Row)


def test_bounded_rows_of_malformed_records_raise_the_python_readers_error():
    builder = RecordBatchBuilder()
    builder.append(b"value", key=b"key")
    blob = bytearray(builder.build())
    blob[BATCH_HEADER_SIZE] = 0x7E  # the record's length now runs past the records
    batch = RecordBatch(memoryview(blob))
    assert native.read_rows(batch.records_data(), 1, 0, 0, None, ("t", 0, 0, None), tuple, (1,), 0, 0) is None
    with pytest.raises(RecordsError, match="record length 63"):
        batch.rows(tail=(1,), first=0, last=0)

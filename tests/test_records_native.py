"""The C record reader (kafkawire/records/_rows.c) against the Python one it stands in for.

RecordBatch.rows uses the C reader when it was built; on malformed records it answers None and the
Python reader runs to raise the error. So the two must agree exactly: the same rows (values and
types) for every well-formed batch, and None exactly where the Python reader raises.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.errors import RecordsError
from kafkawire.records import RecordBatch, RecordBatchBuilder
from kafkawire.records import batch as batch_module
from kafkawire.records.layouts import BATCH_HEADER_SIZE
from kafkawire.records.record import Header, TimestampType

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


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(records.filter(bool), st.data())
def test_malformed_records_are_left_to_the_python_reader(rows, data):
    batch = build(rows)
    good = bytearray(batch.records_data())
    mutation = data.draw(st.sampled_from(["flip", "truncate", "extend", "random", "count"]))
    count = batch.count
    if mutation == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, len(good) - 1))
            good[at] ^= 1 << data.draw(st.integers(0, 7))
    elif mutation == "truncate":
        del good[data.draw(st.integers(0, len(good) - 1)):]
    elif mutation == "extend":
        good += data.draw(st.binary(min_size=1, max_size=20))
    elif mutation == "random":
        good = bytearray(data.draw(st.binary(max_size=400)))
    else:
        count = data.draw(st.integers(-5, count + 5))
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

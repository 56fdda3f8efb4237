"""The C record appender (kafkawire/records/_append.c) against the Python one it stands in for.

Both must write the same bytes, keep the same state, answer the same to ``limit``, and refuse the
same input with the same exception type without writing anything; batches built through either
must be byte-identical for every codec and read back as the records that went in.
"""
from __future__ import annotations

from array import array

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.records import Codec, Header, RecordBatchBuilder, iter_batches
from kafkawire.records import builder as builder_module
from kafkawire.records.appender import NATIVE, PyRecordAppender, RecordAppender

pytestmark = pytest.mark.skipif(not NATIVE, reason="the C record appender was not built")

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def blobs(max_size: int):
    """None, or bytes-like data in the forms a caller may pass (bytes, bytearray, memoryview)."""
    data = st.binary(max_size=max_size)
    return st.none() | data | data.map(bytearray) | data.map(memoryview)


headers = st.lists(st.tuples(st.text(max_size=6), blobs(12)), max_size=10).map(
    lambda pairs: [Header(*pair) if i % 2 else pair for i, pair in enumerate(pairs)])
timestamps = st.integers(-1, 1 << 45) | st.sampled_from([INT64_MIN, INT64_MAX, 0])
records = st.lists(st.tuples(blobs(40), blobs(300), headers, timestamps, st.integers(0, 3)), max_size=25)


def state(appender) -> tuple:
    return (bytes(appender.records), appender.size, appender.count, appender.last_offset_delta,
            appender.base_timestamp, appender.max_timestamp)


@SETTINGS
@given(records, st.none() | st.integers(INT64_MIN, INT64_MAX), st.integers(-1, 3000))
def test_c_and_python_write_the_same_records_and_state(rows, base, limit):
    ours, reference = RecordAppender(base), PyRecordAppender(base)
    offset = -1
    for key, value, header_list, timestamp, gap in rows:
        offset += 1 + gap
        answers = [appender.append(key, value, header_list, timestamp, offset if gap else None, limit)
                   for appender in (ours, reference)]
        assert answers[0] == answers[1]
        assert state(ours) == state(reference)
        if answers[0] < 0:
            offset = ours.last_offset_delta
        else:
            assert answers[0] > 0 and ours.size <= limit or limit < 0


@pytest.mark.parametrize("arguments, error", [
    (("text", b"v", (), 0), TypeError),
    ((None, 12, (), 0), TypeError),
    ((None, b"v", [("h", "not bytes")], 0), TypeError),
    ((None, b"v", [(1, b"x")], 0), TypeError),
    ((None, b"v", [(b"h", b"x")], 0), TypeError),
    ((None, b"v", [(None, b"x")], 0), ValueError),
    ((None, b"v", [("h",)], 0), TypeError),
    ((None, b"v", ["hx"], 0), TypeError),
    ((None, b"v", [("\ud800", b"x")], 0), UnicodeEncodeError),
    ((None, b"v", iter([("h", b"x")]), 0), TypeError),
    ((None, b"v", (), 1.5), TypeError),
    ((None, b"v", (), "0"), TypeError),
    ((None, b"v", (), 1 << 63), OverflowError),
    ((None, b"v", (), 0, 0), ValueError),  # does not follow the first record's delta 0
    ((None, b"v", (), 0, 1 << 31), ValueError),
    ((None, b"v", (), 0, -7), ValueError),
    ((None, b"v", (), 0, 2.0), TypeError),
    ((None, memoryview(bytes(8))[::2], (), 0), TypeError),
])
def test_bad_input_is_refused_alike_and_writes_nothing(arguments, error):
    for appender in (RecordAppender(), PyRecordAppender()):
        appender.append(b"k", b"first", (), 5)
        before = state(appender)
        with pytest.raises(error):
            appender.append(*arguments)
        assert state(appender) == before, type(appender)


def test_limit_is_exact():
    for cls in (RecordAppender, PyRecordAppender):
        appender = cls()
        size = appender.append(None, bytes(100), (), 0)
        assert appender.append(None, bytes(100), (), 0, None, 2 * size - 1) == -1
        assert appender.append(None, bytes(100), (), 0, None, 2 * size) == size
        assert appender.size == 2 * size and appender.count == 2


def test_other_buffer_formats_write_their_bytes():
    ints = array("i", [1, 2, 3])
    for cls in (RecordAppender, PyRecordAppender):
        appender = cls()
        appender.append(None, memoryview(ints), (), 0)
        builder = RecordBatchBuilder()
        builder.appender = appender
        (record,) = next(iter_batches(builder.build()))
        assert record.value == ints.tobytes()


@SETTINGS
@given(records, st.sampled_from(list(Codec)), st.booleans())
def test_batches_from_either_appender_are_byte_identical_and_read_back(rows, codec, horizon):
    built = []
    for cls in (RecordAppender, PyRecordAppender):
        original = builder_module.RecordAppender
        builder_module.RecordAppender = cls
        try:
            builder = RecordBatchBuilder(compression=codec, producer_id=9, producer_epoch=1, base_sequence=4,
                                         delete_horizon=1_000 if horizon else None)
        finally:
            builder_module.RecordAppender = original
        assert type(builder.appender) is cls
        for key, value, header_list, timestamp, _ in rows:
            builder.append(value, key=key, headers=header_list, timestamp=max(timestamp, -1))
        built.append(builder.build())
    assert built[0] == built[1]
    (batch,) = iter_batches(built[0])
    assert batch.compression == codec and batch.count == len(rows)

    def plain(data):
        return None if data is None else bytes(data)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in batch] == [
        (plain(k), plain(v), tuple(Header(hk, plain(hv)) for hk, hv in hs), max(t, -1)) for k, v, hs, t, _ in rows]

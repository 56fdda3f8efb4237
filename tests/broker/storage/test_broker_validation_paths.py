"""The two ways a Produce batch's records are checked (kafkawire.broker.storage.validation): the one-pass
check that keeps nothing per record (``records.batch.check_records``, C), and the columns it falls back
to, which say what is wrong. Both must take the same batches and refuse the others with the same answer;
and an appended batch's offsets go into the request's own buffer, never into a caller's."""
from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.broker.storage.errors import LogAppendError
from kafkawire.broker.storage import validation
from kafkawire.broker.storage.config import LogConfig
from kafkawire.errors import RecordsError
from kafkawire.error_codes import ErrorCode
from kafkawire.records import Codec, RecordBatch, RecordBatchBuilder, compress, iter_batches
from kafkawire.records.batch import check_records
from kafkawire.records.record import TimestampType
from support.log_helpers import NOW, open_log

def build(records, *, compression=Codec.NONE, timestamp_type=TimestampType.CREATE_TIME) -> bytes:
    """records: (key, value, headers, timestamp, offset_delta) each."""
    builder = RecordBatchBuilder(compression=compression, timestamp_type=timestamp_type,
                                 log_append_time=NOW if timestamp_type == TimestampType.LOG_APPEND_TIME else None)
    for key, value, headers, timestamp, offset_delta in records:
        builder.append(value, key=key, headers=headers, timestamp=timestamp, offset_delta=offset_delta)
    return builder.build()


def resign(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def compressed(uncompressed: bytes, codec: Codec) -> bytes:
    """An uncompressed batch's records (whatever they hold) in ``codec``, the header made to match."""
    data = bytearray(uncompressed[:61]) + compress(codec, uncompressed[61:])
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | int(codec))
    return resign(data)


def swapped_offsets(uncompressed: bytes) -> bytes:
    """The first two records' offset deltas (0 and 1) swapped: records of under 64 bytes with one
    timestamp, so each record's offset delta is its fourth byte."""
    data = bytearray(uncompressed)
    first = 61
    second = first + 1 + data[first] // 2  # after the first record (its length varint, zigzag)
    data[first + 3], data[second + 3] = data[second + 3], data[first + 3]
    return resign(data)


def outcome(records: bytes, config: LogConfig) -> tuple:
    try:
        batch = validation.validate_produce_records(records, config, NOW, "t-0")
    except LogAppendError as error:
        return ("refused", error.error_code, error.message, error.record_errors)
    return ("accepted", batch.new_max_timestamp, batch.new_attributes, batch.count)


def both_paths(records: bytes, config: LogConfig, monkeypatch) -> tuple:
    """The answer with the one-pass check, and with it off (columns only); they must agree."""
    fast = outcome(records, config)
    with monkeypatch.context() as patched:
        patched.setattr(validation, "check_records", lambda *args: None)
        slow = outcome(records, config)
    assert fast == slow
    return fast


record = st.tuples(st.one_of(st.none(), st.binary(max_size=5)), st.one_of(st.none(), st.binary(max_size=20)),
                   st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3))), max_size=2),
                   st.integers(NOW - 10_000, NOW + 10_000))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(record, min_size=1, max_size=8), codec=st.sampled_from([Codec.NONE, Codec.GZIP]),
       compact=st.booleans(), flips=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 255)), max_size=2))
def test_the_one_pass_check_and_the_columns_answer_alike(records, codec, compact, flips, monkeypatch):
    data = bytearray(build([(*r, i) for i, r in enumerate(records)]))
    for position, xor in flips:  # corrupt the records, then sign the batch again: only the records are bad
        if 61 + position < len(data):
            data[61 + position] ^= xor
    records_bytes = resign(data) if codec == Codec.NONE else compressed(bytes(data), codec)
    config = LogConfig(cleanup_policy="compact" if compact else "delete", message_timestamp_before_max_ms=5000,
                       message_timestamp_after_max_ms=5000)
    both_paths(records_bytes, config, monkeypatch)


@settings(max_examples=200, deadline=None)
@given(records=st.lists(record, min_size=1, max_size=6),
       flips=st.lists(st.tuples(st.integers(0, 300), st.integers(1, 255)), max_size=3))
def test_check_records_agrees_with_columns(records, flips):
    data = bytearray(build([(*r, i) for i, r in enumerate(records)]))
    for position, xor in flips:
        if 61 + position < len(data):
            data[61 + position] ^= xor
    batch = RecordBatch(memoryview(resign(data)))
    checked = check_records(memoryview(data)[61:], batch.count, batch.base_timestamp)
    try:
        columns = batch.columns()
    except RecordsError:
        assert checked is None
        return
    if checked is None:  # no C reader here
        return
    lowest, highest, null_keys, in_order = checked
    assert (lowest, highest) == (min(columns.timestamps), max(columns.timestamps))
    assert null_keys == (-1 in columns.key_lengths)
    assert in_order == (list(columns.offsets) == list(range(batch.count)))


@pytest.mark.parametrize("case, code", [
    ("good", None),
    ("null-key-compacted", ErrorCode.INVALID_RECORD),
    ("timestamps-out-of-range", ErrorCode.INVALID_TIMESTAMP),
    ("compressed-offsets-out-of-order", ErrorCode.INVALID_RECORD),
    ("records-do-not-decode", ErrorCode.INVALID_RECORD),
    ("log-append-time-claimed", ErrorCode.INVALID_TIMESTAMP),
    ("bad-crc", ErrorCode.CORRUPT_MESSAGE),
    ("count-mismatch", ErrorCode.INVALID_RECORD),
])
def test_each_refusal_keeps_kafkas_code_on_both_paths(case, code, monkeypatch):
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)
    rows = [(b"k", b"a", [], NOW, 0), (b"k", b"b", [], NOW + 1, 1)]
    if case == "good":
        records = build(rows)
    elif case == "null-key-compacted":
        config = LogConfig(cleanup_policy="compact")
        records = build([(None, b"a", [], NOW, 0), (b"k", b"b", [], NOW, 1)])
    elif case == "timestamps-out-of-range":
        records = build([(b"k", b"a", [], NOW - 5000, 0), (b"k", b"b", [], NOW + 5000, 1)])
    elif case == "compressed-offsets-out-of-order":
        records = compressed(swapped_offsets(build([(b"k", b"a", [], NOW, 0), (b"k", b"b", [], NOW, 1)])),
                             Codec.GZIP)
    elif case == "records-do-not-decode":
        data = bytearray(build(rows))
        data[61] = 0x7F  # the first record's length varint: -64
        records = resign(data)
    elif case == "log-append-time-claimed":
        config = LogConfig(message_timestamp_type="LogAppendTime")
        records = build(rows, timestamp_type=TimestampType.LOG_APPEND_TIME)
    elif case == "bad-crc":
        data = bytearray(build(rows))
        data[-1] ^= 0xFF
        records = bytes(data)
    elif case == "count-mismatch":
        data = bytearray(build(rows))
        struct.pack_into(">i", data, 57, 3)
        records = resign(data)
    else:
        raise AssertionError(case)
    result = both_paths(records, config, monkeypatch)
    if code is None:
        assert result == ("accepted", NOW + 1, 0, 2)
    else:
        assert result[:2] == ("refused", code)


def test_an_appended_batch_leaves_the_callers_buffer_alone(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append(build([(None, b"first", [], NOW, 0)]))
    sent = bytearray(build([(None, b"a", [], NOW, 0)]))
    kept = bytes(sent)
    assert log.append(sent, now_ms=NOW).base_offset == 1
    assert sent == kept


def test_in_place_the_offsets_go_into_the_request_buffer(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append(build([(None, b"first", [], NOW, 0)]))
    request = bytearray(build([(None, b"a", [], NOW, 0), (None, b"b", [], NOW, 1)]))
    batch = log.validate(memoryview(request), NOW)
    assert log.append_batch(batch, now_ms=NOW, in_place=True).base_offset == 1
    assert struct.unpack_from(">q", request)[0] == 1  # written where the request's batch is
    (stored,) = list(iter_batches(bytes(log.read(1, 10_000, True).records)))  # its CRC checked
    assert stored.base_offset == 1 and bytes(stored.buffer) == bytes(request)

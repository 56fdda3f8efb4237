"""The records table: the columnar path (SpanBuilder buffers, per-batch values repeated at the cut)
gives exactly the table the per-record path (Python lists) gives, for any mix of batches."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.capture.tables import record_table
from kafkawire.capture.tables.record_table import RecordRows, RecordsTable
from kafkawire.capture.tables.table_schemas import TABLES
from kafkawire.records import Codec, LegacyBatch, RecordBatch, RecordBatchBuilder, iter_batches
from kafkawire.records.builder import LegacyMessageSetBuilder, transaction_marker_batch
from kafkawire.records.control import ControlType, control_key
from kafkawire.records.record import TimestampType

pytestmark = pytest.mark.skipif(record_table._spans is None, reason="the C span builder was not built")

SCHEMA = TABLES["records"]
INT64_MAX, INT32_MAX = (1 << 63) - 1, (1 << 31) - 1
NOT_UTF8 = "\x7f\x7e"  # a header key patched to b"\xff\xfe" after the batch is built

maybe_bytes = st.none() | st.binary(max_size=30)
headers = st.lists(st.tuples(st.sampled_from(["trace", "", "ключ", NOT_UTF8]), maybe_bytes), max_size=3)
timestamps = st.sampled_from([0, 1, -1, 1_700_000_000_000, INT64_MAX, INT64_MAX // 1000 + 1]) | st.integers(0, 1 << 45)
records = st.lists(st.tuples(maybe_bytes, maybe_bytes, headers, timestamps), min_size=1, max_size=12)


@st.composite
def v2_batches(draw):
    rows = draw(records)
    options = {}
    if draw(st.booleans()):
        options = dict(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=draw(timestamps))
    if draw(st.booleans()):
        options.update(producer_id=draw(st.integers(0, 1 << 40)), producer_epoch=draw(st.integers(0, 10)),
                       base_sequence=draw(st.sampled_from([0, 7, INT32_MAX - 3, INT32_MAX]) | st.integers(0, INT32_MAX)))
    options["transactional"] = draw(st.booleans())
    builder = RecordBatchBuilder(base_offset=draw(st.integers(0, 1 << 50)),
                                 compression=draw(st.sampled_from([Codec.NONE, Codec.NONE, Codec.GZIP])), **options)
    gap = draw(st.integers(1, 3))
    for index, (key, value, header_list, timestamp) in enumerate(rows):
        builder.append(value, key=key, headers=header_list, timestamp=timestamp, offset_delta=index * gap)
    data = builder.build()
    if builder.compression == Codec.NONE:
        data = data.replace(NOT_UTF8.encode(), b"\xff\xfe")  # columns() reads without checking the CRC
    return [RecordBatch(memoryview(data))]


@st.composite
def legacy_batches(draw):
    magic = draw(st.sampled_from([0, 1]))
    builder = LegacyMessageSetBuilder(magic, base_offset=draw(st.integers(0, 1 << 40)),
                                      compression=draw(st.sampled_from([Codec.NONE, Codec.GZIP])))
    for key, value, _, timestamp in draw(records):
        builder.append(value, key=key, timestamp=None if magic == 0 else max(0, min(timestamp, 1 << 45)))
    return list(iter_batches(builder.build()))  # uncompressed: one LegacyBatch per message


@st.composite
def marker_batches(draw):
    data = transaction_marker_batch(draw(st.booleans()), producer_id=draw(st.integers(0, 1 << 40)),
                                    producer_epoch=draw(st.integers(0, 10)), coordinator_epoch=draw(st.integers(0, 5)),
                                    base_offset=draw(st.integers(0, 1 << 50)), timestamp=draw(timestamps))
    return [RecordBatch(memoryview(data))]


partitions = st.lists(st.tuples(
    st.sampled_from(["fetch", "produce"]), st.none() | st.integers(0, 1 << 50), st.integers(0, 50),
    st.lists(v2_batches() | legacy_batches() | marker_batches(), min_size=1, max_size=4).map(lambda runs: sum(runs, []))),
    min_size=1, max_size=5)


def table_of(native: bool, parts, max_rows: int, max_bytes: int) -> tuple[pa.Table, list[pa.RecordBatch]]:
    table = RecordsTable(SCHEMA, max_rows, max_bytes, native=native)
    assert table.native is native
    batches = []
    for number, (source, first_offset, partition, record_batches) in enumerate(parts):
        rows = RecordRows(table, source, f"conn-{number % 2}", number, 1_000 * number, "topic", None, partition,
                          first_offset)
        for batch in record_batches:
            rows.add(batch)
        batches.extend(table.take_ready())
    table.cut()
    batches.extend(table.take_ready())
    return pa.Table.from_batches(batches, schema=SCHEMA), batches


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(partitions, st.integers(1, 40), st.sampled_from([64, 4096, 1 << 30]))
def test_the_columnar_path_builds_the_per_record_paths_table(parts, max_rows, max_bytes):
    columnar, columnar_batches = table_of(True, parts, max_rows, max_bytes)
    per_record, _ = table_of(False, parts, max_rows, max_bytes)
    columnar.validate(full=True)
    assert columnar.num_rows == sum(len(b.records()) if isinstance(b, LegacyBatch) else b.count
                                    for *_, record_batches in parts for b in record_batches)
    assert all(0 < batch.num_rows <= max_rows for batch in columnar_batches)
    assert columnar.to_pylist() == per_record.to_pylist()


def test_what_the_columns_hold():
    builder = RecordBatchBuilder(base_offset=100, producer_id=9, producer_epoch=2, base_sequence=INT32_MAX - 1)
    builder.append(b"v0", key=None, headers=[("h", b"1"), ("g", None)], timestamp=5)
    builder.append(None, key=b"k1", timestamp=-1)
    builder.append(b"v2", key=b"k2", headers=[(NOT_UTF8, b"x")], timestamp=7)
    batch = RecordBatch(memoryview(builder.build()))
    table = RecordsTable(SCHEMA, 100, 1 << 20)
    RecordRows(table, "produce", "c", 3, 1_000, "t", None, 0, 40).add(batch)
    RecordRows(table, "produce", "c", 4, 2_000, "t", None, 1, None).add(batch)
    RecordRows(table, "fetch", "c", 5, 3_000, "t", None, 2, None).add(batch)
    table.cut()
    rows = pa.Table.from_batches(table.take_ready()).to_pylist()
    assert [row["offset"] for row in rows] == [40, 41, 42, None, None, None, 100, 101, 102]
    assert [row["sequence"] for row in rows[:3]] == [INT32_MAX - 1, INT32_MAX, 0]  # wraps as Kafka's do
    assert [row["key"] for row in rows[:3]] == [None, b"k1", b"k2"]
    assert [row["value"] for row in rows[:3]] == [b"v0", None, b"v2"]
    assert rows[0]["headers"] == [{"key": "h", "value": b"1"}, {"key": "g", "value": None}]
    assert rows[2]["headers"] == [{"key": NOT_UTF8, "value": b"x"}]
    assert rows[1]["timestamp"] is None and rows[0]["timestamp"].timestamp() == 0.005
    assert {row["producer_id"] for row in rows} == {9}
    assert [row["partition"] for row in rows] == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_a_header_key_that_is_not_utf8_is_read_with_replacement_characters():
    builder = RecordBatchBuilder()
    builder.append(b"v", headers=[(NOT_UTF8, b"x")], timestamp=1)
    batch = RecordBatch(memoryview(builder.build().replace(NOT_UTF8.encode(), b"\xff\xfe")))
    table = RecordsTable(SCHEMA, 100, 1 << 20)
    RecordRows(table, "fetch", "c", 1, 0, "t", None, 0, None).add(batch)
    table.cut()
    (row,) = pa.Table.from_batches(table.take_ready()).to_pylist()
    assert row["headers"] == [{"key": "\ufffd\ufffd", "value": b"x"}]


def test_record_sequences_wrap_as_kafka_does():
    """The records table's sequences, computed per batch in bulk, equal Kafka's per-record increment
    (wrapping past the int32 maximum to 0), for gaps in offsets (compaction) and deltas in any order."""
    from array import array

    from kafkawire.capture.tables.record_table import _sequences
    from kafkawire.records.batch import increment_sequence

    for base_sequence, base_offset, deltas in [(0, 0, range(5)), (10, 1000, [0, 2, 7]), (0x7FFFFFFF - 2, 50, range(6)),
                                               (0x7FFFFFFF, 0, [0, 1]), (0x7FFFFFF0, 0, [3, 40, 1]), (5, 9, [])]:
        offsets = array("q", [base_offset + delta for delta in deltas])
        assert _sequences(base_sequence, base_offset, offsets) == [
            increment_sequence(base_sequence, offset - base_offset) for offset in offsets]


def test_control_records_name_their_type():
    """Transaction markers (COMMIT, ABORT) and other control records are rows with ``control_type``
    read from their keys, between data records whose ``control_type`` is null."""
    data = RecordBatchBuilder(base_offset=0, producer_id=7, producer_epoch=1, base_sequence=0, transactional=True)
    data.append(b"v", key=b"k", timestamp=1)
    kraft = RecordBatchBuilder(base_offset=3, control=True)
    kraft.append(b"", key=control_key(ControlType.SNAPSHOT_FOOTER), timestamp=1)
    kraft.append(b"", key=b"\0\0\0\x63", timestamp=1)  # a type this version does not know
    kraft.append(b"", key=b"\0", timestamp=1)            # too short to name one
    blobs = [data.build(), transaction_marker_batch(True, producer_id=7, producer_epoch=1, coordinator_epoch=0,
                                                    base_offset=1),
             transaction_marker_batch(False, producer_id=7, producer_epoch=1, coordinator_epoch=0, base_offset=2),
             kraft.build()]
    table = RecordsTable(SCHEMA, 100, 1 << 20)
    rows = RecordRows(table, "fetch", "c", 1, 0, "t", None, 0, None)
    for blob in blobs:
        rows.add(RecordBatch(memoryview(blob)))
    table.cut()
    found = pa.Table.from_batches(table.take_ready()).to_pylist()
    assert [(r["offset"], r["is_control"], r["is_transactional"], r["control_type"]) for r in found] == [
        (0, False, True, None), (1, True, True, "COMMIT"), (2, True, True, "ABORT"),
        (3, True, False, "SNAPSHOT_FOOTER"), (4, True, False, "UNKNOWN"), (5, True, False, None)]

"""The broker's fetch fast path against the reference code it stands in for.

- ``fetch_response`` (the FetchResponse built from the partition reads), framed by
  ``framing.encode_response_parts`` as the server frames it, gives the frame the generated codec
  writes for the same values, at every version served, for bytes and ``FileRecords`` records, and
  keeps each records value a piece of its own (the sendfile path), natively and in pure Python.
- ``LogSegment.translate`` (which may look at the next index entry's batch first) finds the same
  batch as a plain scan of the batch headers from the start of the segment, for every offset, with
  small and large batches, several index intervals, and an index whose entries span several batches
  (as Kafka writes for a multi-batch append).
- Over the wire, a librdkafka-shaped Fetch (v16, topic ids, read_committed, no session) and older
  versions decode with the records, watermarks and aborted-transaction lists expected.
"""
from __future__ import annotations

import os
import struct
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.broker_harness import RawClient, own_broker
from kafkawire import messages as m
from kafkawire.broker.fetch.reads import PartitionRead
from kafkawire.broker.fetch.response import fetch_response
from kafkawire.broker.node_view import NodeAddress
from kafkawire.broker.storage.config import LogConfig
from kafkawire.broker.storage.file_records import FileRecords
from kafkawire.broker.storage.log import PartitionLog
from kafkawire.broker.storage.segment import LogSegment, iter_batch_headers
from kafkawire.broker.dispatch.versions import SUPPORTED_VERSIONS
from kafkawire.codec.primitives import ZERO_UUID
from kafkawire.codec import native
from kafkawire.framing import encode_response, encode_response_parts, read_response
from kafkawire.records import RecordBatchBuilder
from support.broker_wire import by_partition, create_topic, produce

LOW, HIGH = SUPPORTED_VERSIONS[1]
NOW = time.time_ns() // 1_000_000


def _batch(records: int, value_size: int) -> bytes:
    builder = RecordBatchBuilder()
    for _ in range(records):
        builder.append(b"v" * value_size, timestamp=NOW)
    return builder.build()


def _joined(parts) -> bytes:
    return b"".join(p.read() if type(p) is FileRecords else bytes(p) for p in parts)


# ---- the response encoder ------------------------------------------------------------------------------

_int32 = st.integers(-(1 << 31), (1 << 31) - 1)
_int64 = st.integers(-(1 << 63), (1 << 63) - 1)
# record sizes around the varint steps (127/128, 16383/16384) and empty
_records_size = st.one_of(st.just(0), st.integers(1, 300), st.sampled_from([126, 127, 128, 16382, 16383, 16384]))
_partition = st.tuples(_int32, st.sampled_from([0, 1, 3, 100]), _int64, _int64, _int64, _records_size,
                       st.booleans())
_topic = st.tuples(st.text(st.characters(codec="utf-8"), max_size=20), st.uuids(), st.lists(_partition, max_size=4))


@pytest.fixture(scope="module")
def source_file(tmp_path_factory):
    """A file to take FileRecords slices of."""
    path = tmp_path_factory.mktemp("slices") / "data"
    path.write_bytes(os.urandom(1 << 15))
    fd = os.open(path, os.O_RDONLY)
    yield fd
    os.close(fd)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(version=st.integers(LOW, HIGH), read_committed=st.booleans(), session_id=_int32,
       correlation_id=_int32, topics=st.lists(_topic, max_size=3), data=st.data())
def test_the_response_frames_as_the_generated_codec_frames_its_values(source_file, version, read_committed,
                                                                     session_id, correlation_id, topics, data):
    if version < 7:
        session_id = 0  # not in the older versions
    grouped, message_topics = [], []
    for name, topic_id, partitions in topics:
        reads, datas = [], []
        for index, error, high, stable, start, size, as_file in partitions:
            if as_file and size:
                position = data.draw(st.integers(0, (1 << 15) - size))
                records = FileRecords(source_file, position, size)
            else:
                records = os.urandom(size)
            read = PartitionRead(None, name, index, None, error=error, records=records, high_watermark=high,
                                 last_stable_offset=stable, log_start_offset=start)
            reads.append(read)
            datas.append(m.FetchResponse.PartitionData(
                partition_index=index, error_code=error, high_watermark=high, last_stable_offset=stable,
                log_start_offset=start if version >= 5 else -1, preferred_read_replica=-1,
                aborted_transactions=[] if read_committed else None,
                records=records.read() if type(records) is FileRecords else records))
        grouped.append((name, topic_id, reads))
        message_topics.append(m.FetchResponse.FetchableTopicResponse(
            topic=name if version < 13 else "", topic_id=topic_id if version >= 13 else ZERO_UUID, partitions=datas))
    message = m.FetchResponse(error_code=0, session_id=session_id, responses=message_topics)

    response = fetch_response(version, session_id, grouped, read_committed)
    expected = encode_response(1, version, correlation_id, message)
    assert _joined(encode_response_parts(1, version, correlation_id, response)) == expected
    assert _joined(response._python_parts(version)) == message.encode(version)  # the pure-Python path too
    if native.ENCODER_ACTIVE:
        assert m.FetchResponse._ENCODERS[version].encode_parts(response) is not None  # written natively
    for _, _, reads in grouped:
        for read in reads:
            if type(read.records) is FileRecords:
                read.records.close()


def test_records_stay_pieces_of_their_own(source_file):
    """The log bytes are never copied into the bytes around them: each non-empty records value is its own
    piece of the frame, natively and through the Python writers."""
    file_slice = FileRecords(source_file, 100, 5000)
    remote = b"r" * 300
    reads = [PartitionRead(None, "t", 0, None, records=file_slice, high_watermark=9),
             PartitionRead(None, "t", 1, None, records=b"", high_watermark=0),
             PartitionRead(None, "t", 2, None, records=remote, high_watermark=3)]
    response = fetch_response(16, 7, [("t", uuid.uuid4(), reads)], True)
    for parts in (encode_response_parts(1, 16, 42, response), response._python_parts(16)):
        assert [part for part in parts if part is file_slice or part is remote] == [file_slice, remote]
        assert all(isinstance(part, (bytes, bytearray, memoryview)) for part in parts if part is not file_slice)
    if native.ENCODER_ACTIVE:
        assert m.FetchResponse._ENCODERS[16].encode_parts(response) is not None  # written natively
    file_slice.close()


@pytest.mark.parametrize("version", [12, 15, 16])
def test_a_partition_led_elsewhere_names_its_leader(version):
    """NOT_LEADER_OR_FOLLOWER carries the current leader (tagged, v12+) and, from v16, the leader's
    endpoint in the response's NodeEndpoints."""
    read = PartitionRead(None, "t", 3, None, error=6, current_leader=(2, 7))
    other = PartitionRead(None, "t", 4, None, records=b"x" * 10, high_watermark=1)
    response = fetch_response(version, 0, [("t", uuid.uuid4(), [read, other])], False,
                              [NodeAddress(2, "broker-2", 9093)])
    frame = _joined(encode_response_parts(1, version, 5, response))
    body = read_response(frame[4:], 1, version).body
    refused, fine = body.responses[0].partitions
    assert (refused.error_code, refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (6, 2, 7)
    assert fine.current_leader.leader_id == -1 and bytes(fine.records) == b"x" * 10
    expected = [(2, "broker-2", 9093, None)] if version >= 16 else []
    assert [(n.node_id, n.host, n.port, n.rack) for n in body.node_endpoints] == expected


# ---- offset lookup ---------------------------------------------------------------------------------------

def _reference_position(segment: LogSegment, offset: int) -> int | None:
    for info in iter_batch_headers(segment.fd, 0, segment.size):
        if info.last_offset >= offset:
            return info.position
    return None


def _check_every_offset(segment: LogSegment) -> None:
    for offset in range(segment.base_offset - 1, segment.next_offset + 2):
        found = segment.translate(offset)
        expected = _reference_position(segment, offset) if offset < segment.next_offset else None
        assert (found.position if found is not None else None) == expected, offset
        if found is not None:
            assert found.last_offset >= offset


@pytest.mark.parametrize("index_interval", [0, 64, 4096])
def test_translate_finds_what_a_scan_finds(tmp_path, index_interval):
    log = PartitionLog(tmp_path / "t-0", LogConfig(index_interval_bytes=index_interval, max_message_bytes=1 << 20))
    # small batches, then large ones (wider than the lookup's read), then small again
    shapes = [(1, 10)] * 30 + [(3, 20_000), (1, 70_000), (5, 9_000)] * 3 + [(2, 5)] * 40 + [(1, 200_000)]
    for records, size in shapes:
        log.append(_batch(records, size), now_ms=NOW)
    (segment,) = log.segments
    assert segment.index_entries  # the lookups start from index entries
    _check_every_offset(segment)
    log.close()


def test_translate_with_index_entries_spanning_several_batches(tmp_path):
    """Kafka indexes a multi-batch append by its last offset at the position of its first batch: the
    batch at an entry may end before the entry's offset."""
    log = PartitionLog(tmp_path / "t-0", LogConfig(max_message_bytes=1 << 20))
    for records, size in [(2, 30_000), (3, 30_000), (1, 50_000), (4, 30_000), (2, 40_000), (1, 10)]:
        log.append(_batch(records, size), now_ms=NOW)
    log.close()
    directory = tmp_path / "t-0"
    infos = []
    fd = os.open(directory / "00000000000000000000.log", os.O_RDONLY)
    try:
        infos = list(iter_batch_headers(fd, 0, os.fstat(fd).st_size))
    finally:
        os.close(fd)
    # entries: batches 1-2 as one append, batches 3-4 as another
    entries = [(infos[2].last_offset, infos[1].position), (infos[4].last_offset, infos[3].position)]
    (directory / "00000000000000000000.index").write_bytes(b"".join(struct.pack(">ii", o, p) for o, p in entries))
    segment = LogSegment(directory, 0, 4096)
    segment.next_offset = infos[-1].next_offset
    assert segment.index_entries == entries
    _check_every_offset(segment)
    segment.close()


# ---- over the wire ---------------------------------------------------------------------------------------

broker = own_broker("function", auto_create_topics=False, message_max_bytes=1 << 20)  # a broker per test: tests reuse topic names


def _split(records: bytes) -> list[bytes]:
    """Whole batches of ``records``, by their length fields."""
    out, pos = [], 0
    while pos < len(records):
        size = 12 + struct.unpack_from(">i", records, pos + 8)[0]
        out.append(records[pos:pos + size])
        pos += size
    return out


def _fetch(client, version, topic, topic_id, offsets, isolation_level, partition_max_bytes=1 << 20):
    request = m.FetchRequest(
        replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=50 << 20, isolation_level=isolation_level,
        session_id=0, session_epoch=-1, rack_id="",
        topics=[m.FetchRequest.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
            m.FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes)
            for p, o in offsets])])
    return client.request(request, version)


@pytest.mark.parametrize("version,isolation_level", [(16, 1), (13, 0), (12, 1), (11, 0), (7, 1), (4, 0)])
def test_a_librdkafka_shaped_fetch_over_the_wire(broker, version, isolation_level):
    with RawClient(broker.port) as client:
        create_topic(client, "t", 4)
        batches = {p: [_batch(1 + p, 40_000 * (1 + p)), _batch(2, 300)] for p in range(4)}
        for p, produced in batches.items():
            for data in produced:
                assert produce(client, "t", p, data).error_code == 0
        topic_id = broker.broker.topics.get("t").topic_id
        # rotated, as librdkafka rotates; partition 3 from the middle of its first batch, 1 from its second
        order = [(2, 0), (3, 2), (0, 0), (1, 2)]
        response = _fetch(client, version, "t" if version < 13 else "", topic_id if version >= 13 else ZERO_UUID,
                          order, isolation_level)
        assert response.error_code == 0
        got = by_partition(response, {topic_id: "t"})
        assert list(got) == [("t", p) for p, _ in order]
        for p, offset in order:
            part = got["t", p]
            assert part.error_code == 0
            assert part.high_watermark == part.last_stable_offset == 1 + p + 2
            if isolation_level == 1:
                assert list(part.aborted_transactions) == []
            else:
                assert part.aborted_transactions is None
            first = 0 if offset < 1 + p else 1  # the batch holding the offset: the first holds 1 + p records
            stored = _split(bytes(part.records))
            assert [struct.unpack_from(">q", b)[0] for b in stored] == [0, 1 + p][first:]
            # the broker rewrites only the base offset and the leader epoch (bytes 0-16) of what was produced
            assert [b[16:] for b in stored] == [b[16:] for b in batches[p][first:]]


def test_a_later_partition_whose_first_batch_does_not_fit_is_empty_and_keeps_its_watermark(broker):
    with RawClient(broker.port) as client:
        create_topic(client, "t", 2)
        produce(client, "t", 0, _batch(1, 5_000))
        produce(client, "t", 1, _batch(1, 9_000))
        topic_id = broker.broker.topics.get("t").topic_id
        response = _fetch(client, 16, "", topic_id, [(0, 0), (1, 0)], 1, partition_max_bytes=6_000)
        got = by_partition(response, {topic_id: "t"})
        assert len(got["t", 0].records) > 5_000 and len(got["t", 1].records) == 0
        assert got["t", 1].high_watermark == 1 and got["t", 1].error_code == 0


def test_slices_of_a_segment_share_one_descriptor_until_the_last_lets_go(tmp_path):
    log = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=2000, retention_bytes=1))
    for _ in range(3):
        log.append(_batch(1, 500), now_ms=NOW)
    first = log.read(0, 10_000, True, as_file=True).records
    second = log.read(1, 10_000, True, as_file=True).records
    expected = first.read()
    assert first.fileno() == second.fileno()  # one shared duplicate, no dup(2) per slice
    fd = first.fileno()
    log.roll()
    log.append(_batch(1, 500), now_ms=NOW)
    assert log.apply_retention(NOW) > 0  # the first segment is closed and deleted under the slices
    assert not (tmp_path / "t-0" / f"{0:020d}.log").exists()
    first.close()
    assert second.read() == expected[len(expected) - len(second):]  # still open for the other slice
    os.fstat(fd)
    second.close()
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with the last slice
    with pytest.raises(OSError):
        second.read()
    log.close()

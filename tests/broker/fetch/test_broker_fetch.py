"""The broker's fetch semantics over the wire: KIP-74 limits (kafka-semantics.md 4.2-4.4), parked
fetches (MinBytes / MaxWaitMs), fetch sessions (KIP-227), the remote tier with Fetch v19's
RemotePartitionMaxBytes (KIP-1178), and the protocol edges (ApiVersions too new, refused versions, bad
CRCs)."""
from __future__ import annotations

import threading
import time

import pytest

from support.broker_harness import BrokerThread, RawClient, own_broker
from support.broker_wire import FETCH_VERSION, batch_of, by_partition, create_topic, fetch, produce
from kafkawire import messages as m
from kafkawire.error_codes import ErrorCode
from kafkawire.records import iter_batches, read_batches

broker = own_broker("function", auto_create_topics=False)  # a broker per test: tests reuse topic names


@pytest.fixture
def client(broker):
    with RawClient(broker.port) as raw:
        yield raw


# ---- KIP-74 ------------------------------------------------------------------------------------------

def test_worked_example_of_kafka_semantics_4_4(client):
    create_topic(client, "t", 4)
    produce(client, "t", 1, batch_of(800))
    for _ in range(4):
        produce(client, "t", 2, batch_of(150))
    produce(client, "t", 3, batch_of(100))
    response = fetch(client, [("t", p, 0, 300) for p in range(4)], max_bytes=1000)
    got = by_partition(response)
    assert [("t", p) for p in range(4)] == [(t.topic, p.partition_index) for t in response.responses for p in t.partitions]
    assert len(got["t", 0].records) == 0
    assert len(got["t", 1].records) == 800  # the first partition with data: one whole batch beyond both limits
    assert len(got["t", 2].records) == 200  # what is left of MaxBytes: one batch and 50 bytes of the next
    assert len(read_batches(got["t", 2].records)) == 1
    assert len(got["t", 3].records) == 0  # MaxBytes exhausted: empty, no error
    assert all(p.error_code == 0 for p in got.values())
    assert got["t", 3].high_watermark == 1 and got["t", 2].high_watermark == 4


def test_a_later_first_batch_that_does_not_fit_returns_nothing(client):
    create_topic(client, "t", 4)
    produce(client, "t", 1, batch_of(800))
    produce(client, "t", 2, batch_of(250))
    produce(client, "t", 3, batch_of(150))
    got = by_partition(fetch(client, [("t", p, 0, 300) for p in range(4)], max_bytes=1000))
    assert len(got["t", 2].records) == 0  # 250 > the 200 left: no truncated first batch on v3+
    assert len(got["t", 3].records) == 150  # so the next partition gets the 200


def test_first_partition_limit_applies_beyond_its_first_batch(client):
    create_topic(client, "t", 1)
    for _ in range(10):
        produce(client, "t", 0, batch_of(100))
    (part,) = by_partition(fetch(client, [("t", 0, 0, 350)])).values()
    assert len(part.records) == 350  # three batches and half of the fourth
    assert [b.base_offset for b in iter_batches(part.records)] == [0, 1, 2]


def test_fetch_from_the_middle_of_a_batch_returns_the_whole_batch(client):
    create_topic(client, "t", 1)
    produce(client, "t", 0, batch_of(500, records=5))
    produce(client, "t", 0, batch_of(300, records=3))
    (part,) = by_partition(fetch(client, [("t", 0, 3, 10_000)])).values()
    assert [b.base_offset for b in iter_batches(part.records)] == [0, 5]


def test_offset_out_of_range_and_unknown_partitions(client):
    create_topic(client, "t", 1)
    produce(client, "t", 0, batch_of(100))
    response = fetch(client, [("nope", 0, 0, 100), ("t", 0, 5, 100), ("t", 7, 0, 100)])
    got = by_partition(response)
    assert got["t", 0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert got["nope", 0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert got["t", 7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # unknown partitions are not read and go after the read ones
    assert [k for k in got][-2:] == [("nope", 0), ("t", 7)]


# ---- MinBytes / MaxWaitMs -----------------------------------------------------------------------------

def test_a_parked_fetch_completes_when_data_arrives(broker, client):
    create_topic(client, "t", 1)
    def produce_later():
        time.sleep(0.3)
        with RawClient(broker.port) as other:
            produce(other, "t", 0, batch_of(200))
    threading.Thread(target=produce_later).start()
    started = time.monotonic()
    (part,) = by_partition(fetch(client, [("t", 0, 0, 10_000)], min_bytes=100, max_wait_ms=10_000)).values()
    waited = time.monotonic() - started
    assert len(part.records) == 200
    assert 0.25 < waited < 5


def test_a_parked_fetch_waits_for_min_bytes_then_times_out(broker, client):
    create_topic(client, "t", 1)
    produce(client, "t", 0, batch_of(100))
    started = time.monotonic()
    (part,) = by_partition(fetch(client, [("t", 0, 0, 10_000)], min_bytes=1000, max_wait_ms=400)).values()
    waited = time.monotonic() - started
    assert 0.35 < waited < 3
    assert len(part.records) == 100  # at MaxWaitMs it answers with what there is


def test_many_parked_fetches_all_complete_on_one_append(broker):
    clients = [RawClient(broker.port) for _ in range(50)]
    try:
        create_topic(clients[0], "t", 1)
        for raw in clients:
            fetch_request = m.FetchRequest(replica_id=-1, max_wait_ms=20_000, min_bytes=1, max_bytes=1 << 20,
                                           session_epoch=-1, topics=[m.FetchRequest.FetchTopic(topic="t", partitions=[
                                               m.FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                                             partition_max_bytes=1 << 20)])])
            raw.send(fetch_request, FETCH_VERSION)
        deadline = time.monotonic() + 10
        while len(broker.broker.handlers.purgatory) < 50 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(broker.broker.handlers.purgatory) == 50
        with RawClient(broker.port) as producer:
            produce(producer, "t", 0, batch_of(120))
        started = time.monotonic()
        for raw in clients:
            (part,) = by_partition(raw.receive()).values()
            assert len(part.records) == 120
        assert time.monotonic() - started < 5
        assert len(broker.broker.handlers.purgatory) == 0
    finally:
        for raw in clients:
            raw.close()


# ---- fetch sessions ---------------------------------------------------------------------------------------

def test_incremental_sessions_send_changes_and_rotate(client):
    create_topic(client, "t", 3)
    for p in range(3):
        produce(client, "t", p, batch_of(100))
    full = fetch(client, [("t", p, 0, 1000) for p in range(3)], max_bytes=150, session_epoch=0, version=12)
    assert full.session_id != 0
    got = by_partition(full)
    assert [len(got["t", p].records) for p in range(3)] == [100, 0, 0]
    # incremental: nothing new for p1/p2 except what the session order now puts first
    second = fetch(client, [("t", 0, 1, 1000)], max_bytes=150, session_id=full.session_id, session_epoch=1)
    assert second.error_code == 0
    got = by_partition(second)
    # p0 returned data, so it moved to the end: p1 is read first now and gets the data
    assert len(got["t", 1].records) == 100
    assert ("t", 0) not in got  # unchanged and empty: left out of an incremental response
    third = fetch(client, [("t", 1, 1, 1000)], max_bytes=150, session_id=full.session_id, session_epoch=2)
    assert len(by_partition(third)["t", 2].records) == 100


def test_session_errors(client):
    create_topic(client, "t", 1)
    assert fetch(client, [("t", 0, 0, 100)], session_id=12345, session_epoch=1).error_code == \
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    full = fetch(client, [("t", 0, 0, 100)], session_epoch=0)
    assert fetch(client, [], session_id=full.session_id, session_epoch=5).error_code == \
        ErrorCode.INVALID_FETCH_SESSION_EPOCH


# ---- remote tier ------------------------------------------------------------------------------------------

@pytest.fixture
def tiered(tmp_path):
    with BrokerThread(data_dir=tmp_path / "data", remote_dir=tmp_path / "remote", auto_create_topics=False,
                      retention_check_interval_ms=3_600_000) as running:
        yield running


def _fill_tiered_topic(broker, client, name: str, partitions: int, batches: int = 8) -> None:
    create_topic(client, name, partitions, {"remote.storage.enable": "true", "segment.bytes": "2000",
                                            "local.retention.bytes": "1"})
    for p in range(partitions):
        for _ in range(batches):
            produce(client, name, p, batch_of(300))
    def retention():
        now = time.time_ns() // 1_000_000
        for _, _, log in broker.broker.topics.all_logs():
            log.apply_retention(now)
    broker.loop.call_soon_threadsafe(retention)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        logs = [log for _, _, log in broker.broker.topics.all_logs()]
        if all(log.local_log_start_offset > 0 for log in logs):
            return
        time.sleep(0.02)
    raise AssertionError("segments did not move to the remote tier")


def test_only_the_first_remote_partition_is_read_remotely(tiered):
    with RawClient(tiered.port) as client:
        _fill_tiered_topic(tiered, client, "r", 2)
        got = by_partition(fetch(client, [("r", 0, 0, 1000), ("r", 1, 0, 1000)]))
        assert len(got["r", 0].records) > 0 and got["r", 0].error_code == 0
        assert len(got["r", 1].records) == 0 and got["r", 1].error_code == 0
        assert got["r", 0].log_start_offset == 0


def test_remote_partition_max_bytes_on_v19_and_max_bytes_accounting(tiered):
    with RawClient(tiered.port) as client:
        _fill_tiered_topic(tiered, client, "r", 1)
        create_topic(client, "local", 1)
        produce(client, "local", 0, batch_of(300))
        ids = {"r": tiered.broker.topics.get("r").topic_id}
        names = {v: k for k, v in ids.items()}
        # v19 (KIP-1178): RemotePartitionMaxBytes bounds the remote read (600: two 300-byte batches)
        got = by_partition(fetch(client, [("r", 0, 0, 100_000, 600)], version=19, topic_ids=ids), names)
        assert len(got["r", 0].records) == 600
        # v18 and older (upstream's v18 has no such field): PartitionMaxBytes bounds it, as the KIP says
        for version in (18, 17):
            got = by_partition(fetch(client, [("r", 0, 0, 900, 100)], version=version, topic_ids=ids), names)
            assert len(got["r", 0].records) == 900
        # the remote bytes count against MaxBytes: nothing left for the local partition
        got = by_partition(fetch(client, [("r", 0, 0, 1000), ("local", 0, 0, 1000)], max_bytes=1000))
        assert len(got["r", 0].records) == 1000 and len(got["local", 0].records) == 0


# ---- protocol edges ---------------------------------------------------------------------------------------

def test_too_new_api_versions_gets_a_v0_answer(broker):
    import socket
    import struct
    # ApiVersions v9 with a flexible (v2) request header: the broker must not parse the body
    header = struct.pack(">hhi", 18, 9, 42) + struct.pack(">h", 4) + b"test" + b"\x00"
    frame = header + b"\x00"
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", sock.recv(4))[0]
        data = b""
        while len(data) < size:
            data += sock.recv(size - len(data))
    assert struct.unpack_from(">i", data)[0] == 42
    body = m.ApiVersionsResponse.decode(data[4:], 0)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]


@pytest.mark.parametrize("key,version", [(0, 2), (1, 3), (1, 20), (7, 3)])
def test_old_produce_and_fetch_versions_are_refused(broker, key, version):
    """Produce v0-2 and Fetch v0-3 (gone from Kafka 4, and from the specs), a version past the newest and
    a removed API (ControlledShutdown) get a clean disconnect."""
    import socket
    import struct
    frame = struct.pack(">hhih", key, version, 1, 4) + b"test" + b"\x00" * 16
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        assert sock.recv(16) == b""


def test_a_batch_with_a_bad_crc_is_refused_and_nothing_is_appended(client):
    create_topic(client, "t", 1)
    bad = bytearray(batch_of(200))
    bad[-1] ^= 0xFF
    response = produce(client, "t", 0, bytes(bad))
    assert response.error_code == ErrorCode.CORRUPT_MESSAGE
    (part,) = by_partition(fetch(client, [("t", 0, 0, 1000)])).values()
    assert part.high_watermark == 0 and len(part.records) == 0


def test_every_served_api_and_version_answers_a_minimal_request(broker):
    """Each API the broker advertises, at each version, answers a default-valued request with a
    response that encodes at that version (a response field the version lacks would close the
    connection instead)."""
    from kafkawire.broker.dispatch.versions import SUPPORTED_VERSIONS
    with RawClient(broker.port) as client:
        for key, (low, high) in sorted(SUPPORTED_VERSIONS.items()):
            request_class = m.api(key).request_class
            for version in range(low, high + 1):
                request = request_class()
                if key == 0:
                    request.acks = 1  # acks=0 would get no response
                if key == 1:
                    request.max_wait_ms = 0
                response = client.request(request, version)
                assert type(response) is m.api(key).response_class, (key, version)

"""One bad client cannot take the broker down (issue 17).

Each test runs an abuse against a ``kafkawire broker`` process while a healthy client keeps making
ApiVersions round trips on its own connection, and checks that those round trips stay fast (median
under 100 ms, worst under 1 s), that the abuser gets Kafka's answer (an error code or a clean
disconnect), and afterwards that the broker's memory stayed within its configured limits and no
descriptor or partition directory was left behind (read from /proc and the data directory).
"""
from __future__ import annotations

import os
import socket
import statistics
import struct
import threading
import time
from pathlib import Path

import pytest
from crc32c import crc32c

from support.broker_harness import RawClient
from kafkawire import messages as m
from kafkawire.framing import Correlator, FrameBuffer
from kafkawire.records import Codec, compress
from kafkawire.records.builder import RecordBatchBuilder
from support.broker_process import BrokerProcess
from support.broker_wire import create_topic

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads the broker's /proc entries")

MiB = 1 << 20
QUEUED_MAX = 32 * MiB  # queued.max.request.bytes of the broker under test
REQUEST_MAX = 48 * MiB  # socket.request.max.bytes
MAX_PARTITIONS = 2500  # max.broker.partitions
API_VERSIONS = m.ApiVersionsRequest(client_software_name="health", client_software_version="1")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("hostile")
    process = BrokerProcess(data, "--override", f"queued.max.request.bytes={QUEUED_MAX}",
                            "--override", f"socket.request.max.bytes={REQUEST_MAX}",
                            "--override", f"max.broker.partitions={MAX_PARTITIONS}")
    process.data_dir = data
    yield process
    process.kill()


class Health:
    """A healthy client: ApiVersions round trips every 10 ms on its own connection, timed."""

    def __init__(self, port: int):
        self.client = RawClient(port, client_id="healthy")
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            assert self.client.request(API_VERSIONS, 3).error_code == 0
            self.latencies.append(time.perf_counter() - started)
            self._stop.wait(0.01)

    def __enter__(self) -> "Health":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        deadline = time.monotonic() + 2
        while len(self.latencies) < 5 and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        self._stop.set()
        self._thread.join(30)
        self.client.close()
        assert not self._thread.is_alive(), "the healthy client's round trip never came back"
        assert len(self.latencies) >= 5, "too few round trips to judge"
        median, worst = statistics.median(self.latencies), max(self.latencies)
        assert median < 0.1, f"healthy round trips took {median * 1000:.0f} ms at the median"
        assert worst < 1.0, f"a healthy round trip took {worst * 1000:.0f} ms"


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _partition_dirs(data: Path) -> set[str]:
    return {entry.name for entry in data.iterdir() if entry.is_dir()}


def _produce(client: RawClient, topic: str, batches: list[bytes], acks: int = -1):
    request = m.ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(index=i, records=batch)
                                    for i, batch in enumerate(batches)])])
    if acks == 0:
        client.send(request, 9)
        return None
    return client.request(request, 9).responses[0].partition_responses


def _bomb(codec: Codec, expanded: int) -> bytes:
    """A one-record batch whose value expands to ``expanded`` zero bytes, compressed as ``codec`` (as
    Java writes it: zstd with its content size, snappy in 32 KiB xerial chunks, lz4 in 64 KiB blocks)."""
    builder = RecordBatchBuilder(compression=Codec.NONE)
    builder.append(bytes(expanded))
    return _compressed(codec, memoryview(builder.build())[61:])  # the records section after the header


def _compressed(codec: Codec, records) -> bytes:
    """A batch of one record whose records section is ``records`` compressed as ``codec``."""
    builder = RecordBatchBuilder(compression=Codec.NONE)
    builder.append(b"x")
    packed = compress(codec, records)
    header = bytearray(builder.build()[:61])
    struct.pack_into(">i", header, 8, 49 + len(packed))  # batch length after the length field
    struct.pack_into(">h", header, 21, codec.value)
    body = bytes(header[21:]) + packed
    struct.pack_into(">I", header, 17, crc32c(body))
    return bytes(header[:21]) + body


# ---- compressed produce ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec,count", [(Codec.ZSTD, 200), (Codec.GZIP, 100)])
def test_a_request_of_compression_bombs_is_refused_without_stalling_others(broker, codec, count):
    topic = f"bombs-{codec.name.lower()}"
    with RawClient(broker.port) as client:
        create_topic(client, topic, count)
        bomb = _bomb(codec, 70 * MiB)  # past the 64 MiB a batch may expand to
        with Health(broker.port):
            started = time.monotonic()
            answers = _produce(client, topic, [bomb] * count)
            elapsed = time.monotonic() - started
        assert [a.error_code for a in answers] == [87] * count  # INVALID_RECORD, every one
        # the request's decompression budget (256 MiB) ran out after a few: the rest were refused unread
        assert sum("produce.max.decompressed.bytes" in (a.error_message or "") for a in answers) >= count - 5
        assert elapsed < 10
        ok = RecordBatchBuilder(compression=codec)
        ok.append(b"fine")
        assert _produce(client, topic, [ok.build()])[0].error_code == 0  # the connection still serves


# (codec, partitions, batch): 70 MiB bombs, as many as keep a request within a few MiB (snappy's format
# expands at most about 21 times); and batches within the 64 MiB a batch may expand to whose records do
# not decode.
BOMB_REQUESTS = {
    "zstd": (Codec.ZSTD, 200, lambda: _bomb(Codec.ZSTD, 70 * MiB)),
    "gzip": (Codec.GZIP, 100, lambda: _bomb(Codec.GZIP, 70 * MiB)),
    "lz4": (Codec.LZ4, 40, lambda: _bomb(Codec.LZ4, 70 * MiB)),
    "snappy": (Codec.SNAPPY, 6, lambda: _bomb(Codec.SNAPPY, 70 * MiB)),
    "zstd-undecodable": (Codec.ZSTD, 20, lambda: _compressed(Codec.ZSTD, bytes(60 * MiB))),
}


@pytest.mark.parametrize("kind", BOMB_REQUESTS)
def test_refused_bombs_cost_the_broker_about_one_batchs_expansion(tmp_path, kind):
    # A fresh broker, whose peak RSS (VmHWM) then says what these requests cost. Each request's budget
    # (256 MiB) lets four batches expand to about what a batch may reach (64 MiB), one after the other:
    # what a refused batch expanded to must be freed before the next is read, and the request once
    # answered. (Before, a request kept all four expansions until it was answered, and past it.)
    codec, count, make = BOMB_REQUESTS[kind]
    process = BrokerProcess(tmp_path)
    try:
        pid = process.proc.pid
        with RawClient(process.port) as client:
            # snappy's bombs are larger than the default max.message.bytes, which would refuse them unread
            create_topic(client, "bombs", count, {"max.message.bytes": str(8 * MiB)})
            batch = make()
            before = _status(pid, "VmHWM")
            with Health(process.port):
                for _ in range(3):
                    answers = _produce(client, "bombs", [batch] * count)
                    assert [a.error_code for a in answers] == [87] * count  # INVALID_RECORD, every one
            grown = _status(pid, "VmHWM") - before
        request = count * len(batch)
        assert grown < 2 * 64 * MiB + 2 * request, f"peak RSS grew by {grown // MiB} MiB ({request}-byte requests)"
    finally:
        process.kill()


def test_batches_refused_after_expanding_are_charged_to_the_requests_budget(tmp_path):
    # Batches that expand within the limit but are refused afterwards (here for their timestamps) still
    # cost the work of expanding them: they draw on the request's budget as accepted batches do.
    process = BrokerProcess(tmp_path, "--override", f"produce.max.decompressed.bytes={5 * MiB}")
    try:
        with RawClient(process.port) as client:
            create_topic(client, "stale", 4, {"message.timestamp.before.max.ms": "3600000"})
            stale = RecordBatchBuilder(compression=Codec.ZSTD)
            stale.append(bytes(2 * MiB), timestamp=1000)  # 1970: an hour is long past
            answers = _produce(client, "stale", [stale.build()] * 4)
    finally:
        process.kill()
    assert [a.error_code for a in answers] == [32, 32, 87, 87]  # INVALID_TIMESTAMP, then INVALID_RECORD
    assert "expands beyond the 1048" in answers[2].error_message  # what was left of the budget: 1 MiB
    assert "produce.max.decompressed.bytes" in answers[3].error_message


def test_acks_zero_produce_that_fails_closes_the_connection(broker):
    with RawClient(broker.port) as client:
        create_topic(client, "acks-zero", 1)
        _produce(client, "acks-zero", [b"\x00" * 70], acks=0)  # corrupt: Kafka closes, so the client notices
        with pytest.raises((ConnectionError, OSError)):
            client.request(API_VERSIONS, 3)


# ---- topic creation --------------------------------------------------------------------------------------------

def _create(client: RawClient, topics: list[tuple[str, int]]):
    request = m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=count, replication_factor=1) for name, count in topics], timeout_ms=60_000)
    return client.request(request, 7).topics


def test_one_create_topics_of_25000_partitions_is_refused_whole(broker):
    before_dirs, before_fds = _partition_dirs(broker.data_dir), _descriptors(broker.proc.pid)
    with RawClient(broker.port) as client, Health(broker.port):
        results = _create(client, [("huge", 25_000), ("small-beside-it", 1)])
    assert [(r.name, r.error_code) for r in results] == [("huge", 44), ("small-beside-it", 44)]  # POLICY_VIOLATION
    assert "excessively large" in results[0].error_message
    assert _partition_dirs(broker.data_dir) == before_dirs
    assert _descriptors(broker.proc.pid) <= before_fds + 2


def test_thousands_of_partitions_are_created_off_the_loop_within_the_broker_limit(broker):
    before_dirs = _partition_dirs(broker.data_dir)
    before_fds = _descriptors(broker.proc.pid)  # (earlier tests' connections may still be closing)
    with RawClient(broker.port) as client:
        with Health(broker.port):
            results = _create(client, [("many-a", 1000), ("many-b", 1000)])
            assert [r.error_code for r in results] == [0, 0]
            # past max.broker.partitions: refused with a message, nothing made
            (over,) = _create(client, [("one-too-many", 1000)])
        assert over.error_code == 44 and "max.broker.partitions" in over.error_message
        assert not any(name.startswith("one-too-many") for name in _partition_dirs(broker.data_dir))
        # a produce to one of them and its fetch work, with the descriptors bounded
        batch = RecordBatchBuilder()
        batch.append(b"x")
        assert _produce(client, "many-a", [batch.build()])[0].error_code == 0
        fds = _descriptors(broker.proc.pid) - before_fds
        assert fds < 250, f"{fds} more descriptors open for 2000 partitions"
        deleted = client.request(m.DeleteTopicsRequest(topic_names=["many-a", "many-b"], timeout_ms=60_000), 4)
        assert [r.error_code for r in deleted.responses] == [0, 0]
    deadline = time.monotonic() + 30
    while _partition_dirs(broker.data_dir) != before_dirs and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _partition_dirs(broker.data_dir) == before_dirs


# ---- bad sizes ---------------------------------------------------------------------------------------------------

def test_fetch_with_negative_sizes_gets_invalid_request(broker):
    with RawClient(broker.port) as client:
        create_topic(client, "negative", 1)
        partition = m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=-5)
        request = m.FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
            m.FetchRequest.FetchTopic(topic="negative", partitions=[partition])])
        (topic,) = client.request(request, 12).responses
        assert topic.partitions[0].error_code == 42  # INVALID_REQUEST
        request.max_bytes = -5
        assert client.request(request, 12).error_code == 42
        request.max_bytes = 1 << 20
        partition.partition_max_bytes = 1 << 20
        assert client.request(request, 12).responses[0].partitions[0].error_code == 0


# ---- memory ------------------------------------------------------------------------------------------------------

def _unfinished_request(port: int, declared: int, send: int) -> socket.socket:
    """A connection that declares a ``declared``-byte request and sends ``send`` bytes of it, as far
    as the broker reads them (stopping when its socket buffers stay full)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(0.5)
    header = struct.pack(">ihhi", declared, 18, 3, 1) + b"\x00\x00"  # an ApiVersions header, then padding
    sent = 0
    chunk = bytes(MiB)
    try:
        sock.sendall(header)
        while sent < send:
            sent += sock.send(chunk[:min(MiB, send - sent)])
    except socket.timeout:
        pass
    return sock


@pytest.fixture
def idle_closing_broker(tmp_path):
    process = BrokerProcess(tmp_path, "--override", f"queued.max.request.bytes={QUEUED_MAX}",
                            "--override", f"socket.request.max.bytes={REQUEST_MAX}",
                            "--override", "connections.max.idle.ms=1500", "--segment-bytes", str(1 << 30))
    yield process
    process.kill()


def test_unfinished_large_requests_hold_no_more_than_queued_max_request_bytes(idle_closing_broker):
    broker = idle_closing_broker
    pid = broker.proc.pid
    baseline = _status(pid, "VmRSS")
    sockets = []
    with Health(broker.port):
        for _ in range(4):  # 4 x 40 MiB declared, 38 MiB sent: 152 MiB if nothing bounded it
            sockets.append(_unfinished_request(broker.port, 40 * MiB, 38 * MiB))
        time.sleep(0.5)
        grown = _status(pid, "VmRSS") - baseline
    assert grown < QUEUED_MAX + 24 * MiB, f"the broker grew by {grown / MiB:.0f} MiB"
    # Their FINs wait behind unsent bytes the broker will not read: connections.max.idle.ms ends them,
    # the memory is free again, and large requests (20 x 1 MiB batches) from three connections go through.
    for sock in sockets:
        sock.close()
    time.sleep(2.5)  # connections.max.idle.ms and a sweep
    with RawClient(broker.port) as client:
        create_topic(client, "after-pressure", 20)
    big = RecordBatchBuilder()
    big.append(os.urandom(1_000_000))
    batch = big.build()
    results = []

    def produce_big():
        with RawClient(broker.port) as client:
            results.append([a.error_code for a in _produce(client, "after-pressure", [batch] * 20)])
    threads = [threading.Thread(target=produce_big) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == [[0] * 20] * 3


def test_pipelined_requests_without_reading_responses(broker):
    pid = broker.proc.pid
    baseline = _status(pid, "VmRSS")
    count = 20_000
    correlator = Correlator(client_id="pipeliner")
    frame = correlator.request(API_VERSIONS, 3, expects_response=False)
    with socket.create_connection(("127.0.0.1", broker.port)) as sock, Health(broker.port):
        sock.sendall(frame * count)  # the same request 20,000 times, nothing read back yet
        time.sleep(0.5)
        grown = _status(pid, "VmRSS") - baseline
        frames = FrameBuffer()
        answered = 0
        sock.settimeout(30)
        while answered < count:  # count the answers without decoding them (the healthy client's GIL)
            data = sock.recv(1 << 20)
            assert data, "the broker closed the pipelining connection"
            frames.feed(data)
            answered += sum(1 for _ in frames.frames())
    assert grown < 32 * MiB, f"the broker grew by {grown / MiB:.0f} MiB"


def test_slowloris_request_is_served_and_stalls_nobody(broker):
    request = RawClient(broker.port).correlator.request(API_VERSIONS, 3)
    with socket.create_connection(("127.0.0.1", broker.port)) as sock, Health(broker.port):
        for byte in request:  # one byte every 20 ms
            sock.sendall(bytes([byte]))
            time.sleep(0.02)
        sock.settimeout(5)
        assert len(sock.recv(1 << 16)) > 100  # the answer


def test_many_half_open_connections(broker):
    before = _descriptors(broker.proc.pid)
    sockets = []
    with Health(broker.port):
        for _ in range(500):
            sockets.append(socket.create_connection(("127.0.0.1", broker.port)))
        time.sleep(0.3)
        assert _descriptors(broker.proc.pid) >= before + 490  # accepted (a few from earlier tests may close)
    for sock in sockets:
        sock.close()
    deadline = time.monotonic() + 10
    while _descriptors(broker.proc.pid) > before + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _descriptors(broker.proc.pid) <= before + 2


def test_nothing_leaked(broker):
    """Run last in this module: the broker still answers and holds no more descriptors than at start."""
    with RawClient(broker.port) as client:
        assert client.request(API_VERSIONS, 3).error_code == 0

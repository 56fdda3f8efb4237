"""The broker under load and abuse: a long poll (MinBytes 1 MiB) answered when a producer crosses
1 MiB, or at MaxWaitMs; and bad input (garbage frames, frames over socket.request.max.bytes refused
from the size prefix alone, negative sizes, unknown APIs, unsupported versions, truncated and
malformed bodies) answered by an error response or a clean disconnect, never a hang, while other
connections keep being served."""
from __future__ import annotations

import random
import socket
import struct
import threading
import time

import pytest

from support.broker_harness import RawClient, own_broker
from kafkawire import messages as m
from kafkawire.framing import Correlator
from support.broker_wire import FETCH_VERSION, batch_of, by_partition, create_topic, fetch, produce

MAX_REQUEST = 1 << 20  # socket.request.max.bytes for this module's broker
TIMEOUT = 5.0  # a socket operation taking longer than this is a hang


broker = own_broker(auto_create_topics=False, max_request_bytes=MAX_REQUEST)


_topics = iter(range(1_000_000))


@pytest.fixture
def topic(broker):
    name = f"robust-{next(_topics)}"
    with RawClient(broker.port) as raw:
        create_topic(raw, name, 1)
    return name


# ---- long poll ------------------------------------------------------------------------------------------

def test_long_poll_returns_when_a_producer_crosses_min_bytes(broker, topic):
    batch = batch_of(250_000)  # four of these stay under 1 MiB, the fifth crosses it
    result: dict = {}

    def long_poll():
        with RawClient(broker.port) as raw:
            started = time.monotonic()
            result["response"] = fetch(raw, [(topic, 0, 0, 8 << 20)], min_bytes=1 << 20, max_wait_ms=10_000,
                                       max_bytes=8 << 20)
            result["returned"] = time.monotonic()
            result["waited"] = result["returned"] - started

    poller = threading.Thread(target=long_poll)
    poller.start()
    deadline = time.monotonic() + 5
    while len(broker.broker.handlers.purgatory) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(broker.broker.handlers.purgatory) == 1, "the fetch was not parked"
    with RawClient(broker.port) as producer:
        for _ in range(4):
            assert produce(producer, topic, 0, batch).error_code == 0
            time.sleep(0.1)
        time.sleep(0.2)
        assert poller.is_alive(), f"the fetch returned before MinBytes was reached: {result}"
        crossing = time.monotonic()
        assert produce(producer, topic, 0, batch).error_code == 0
    poller.join(5)
    assert not poller.is_alive(), "the fetch was not completed when the producer crossed 1 MiB"
    (part,) = by_partition(result["response"]).values()
    assert part.error_code == 0
    assert len(part.records) == 5 * len(batch) >= 1 << 20
    assert result["returned"] >= crossing
    assert result["returned"] - crossing < 2 and result["waited"] < 5  # far from MaxWaitMs (10 s)


def test_long_poll_with_nothing_produced_returns_at_max_wait(broker, topic):
    with RawClient(broker.port) as raw:
        started = time.monotonic()
        response = fetch(raw, [(topic, 0, 0, 8 << 20)], min_bytes=1 << 20, max_wait_ms=500)
        waited = time.monotonic() - started
    (part,) = by_partition(response).values()
    assert part.error_code == 0 and len(part.records) == 0
    assert 0.45 <= waited < 2.5


def test_long_poll_below_min_bytes_returns_what_there_is_at_max_wait(broker, topic):
    with RawClient(broker.port) as raw:
        produce(raw, topic, 0, batch_of(300_000))
        started = time.monotonic()
        response = fetch(raw, [(topic, 0, 0, 8 << 20)], min_bytes=1 << 20, max_wait_ms=500)
        waited = time.monotonic() - started
    (part,) = by_partition(response).values()
    assert len(part.records) == 300_000
    assert 0.45 <= waited < 2.5


# ---- bad input ------------------------------------------------------------------------------------------

def _connect(broker) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT)
    sock.settimeout(TIMEOUT)
    return sock


def _outcome(sock: socket.socket) -> str:
    """'closed' if the broker closes the connection, 'response' if it sends a whole response frame;
    a hang (nothing within TIMEOUT) fails the test."""
    data = b""
    started = time.monotonic()
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except (ConnectionResetError, BrokenPipeError):
            return "closed"
        except socket.timeout:
            pytest.fail(f"the broker neither answered nor closed within {TIMEOUT} s (got {data[:64]!r})")
        if not chunk:
            return "closed"
        data += chunk
        if len(data) >= 4 and len(data) >= 4 + struct.unpack_from(">i", data)[0]:
            return "response"
        assert time.monotonic() - started < TIMEOUT


def _send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        pass  # the broker may close before reading everything: that is a clean refusal


def _still_served(broker) -> None:
    """Another connection gets ApiVersions and Metadata answered."""
    with RawClient(broker.port) as raw:
        raw.sock.settimeout(TIMEOUT)
        response = raw.request(m.ApiVersionsRequest(client_software_name="robust", client_software_version="1"), 3)
        assert response.error_code == 0 and response.api_keys
        metadata = raw.request(m.MetadataRequest(topics=None), 12)
        assert metadata.brokers


def _header(api_key: int, version: int, correlation_id: int = 7, client_id: bytes = b"robust") -> bytes:
    """A v1 (non-flexible) request header; enough for the broker to peek at the API and version."""
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_random_garbage_frames(broker):
    rng = random.Random(20240611)
    outcomes = []
    for i in range(40):
        payload = rng.randbytes(rng.choice([0, 1, 3, 7, 8, 9, 20, 100, 1000, 60_000]))
        with _connect(broker) as sock:
            _send(sock, _frame(payload))
            outcomes.append(_outcome(sock))
        if i % 10 == 9:
            _still_served(broker)
    assert "closed" in outcomes
    _still_served(broker)


def _real_header(key: int, version: int) -> bytes:
    """The encoded request header (v1 or v2, as the API version wants) of a default request."""
    body = m.api(key).request_class()
    payload = Correlator(client_id="robust").request(body, version)[4:]
    return payload[:len(payload) - len(body.encode(version))]


def test_random_garbage_bodies_after_valid_api_headers(broker):
    """Every served API and version with a random body: an error response or a close, never a hang."""
    from kafkawire.broker.dispatch.versions import SUPPORTED_VERSIONS
    rng = random.Random(7)
    for key, (low, high) in sorted(SUPPORTED_VERSIONS.items()):
        for version in range(low, high + 1):
            payload = _real_header(key, version) + rng.randbytes(rng.randint(1, 200))
            with _connect(broker) as sock:
                _send(sock, _frame(payload))
                _outcome(sock)
    _still_served(broker)


def test_stream_of_random_bytes_then_disconnect(broker):
    rng = random.Random(99)
    for _ in range(10):
        with _connect(broker) as sock:
            _send(sock, rng.randbytes(rng.randint(1, 5000)))
            # the broker closes (bad prefix) or waits for the rest of a frame: either way, we go away
            sock.settimeout(0.2)
            try:
                sock.recv(1 << 16)
            except (socket.timeout, ConnectionResetError):
                pass
    _still_served(broker)


@pytest.mark.parametrize("size", [MAX_REQUEST + 1, 50 << 20, 0x7FFFFFFF])
def test_a_frame_over_max_request_bytes_is_refused_from_its_size_prefix(broker, size):
    with _connect(broker) as sock:
        started = time.monotonic()
        sock.sendall(struct.pack(">i", size))  # the prefix only: the broker must not wait for the body
        assert _outcome(sock) == "closed"
        assert time.monotonic() - started < 2
    _still_served(broker)


def test_a_frame_of_exactly_max_request_bytes_is_accepted_as_a_size(broker):
    """The limit is inclusive: the broker waits for the body of a frame of exactly the maximum."""
    with _connect(broker) as sock:
        sock.sendall(struct.pack(">i", MAX_REQUEST))
        sock.settimeout(0.5)
        with pytest.raises(socket.timeout):
            sock.recv(1)  # still open, waiting for the body
    _still_served(broker)


@pytest.mark.parametrize("size", [-1, -4, -(1 << 31)])
def test_a_negative_size_prefix_closes_the_connection(broker, size):
    with _connect(broker) as sock:
        started = time.monotonic()
        sock.sendall(struct.pack(">i", size))
        assert _outcome(sock) == "closed"
        assert time.monotonic() - started < 2
    _still_served(broker)


@pytest.mark.parametrize("api_key", [-1, 93, 999, 32767])
def test_an_unknown_api_key_closes_the_connection(broker, api_key):
    with _connect(broker) as sock:
        sock.sendall(_frame(_header(api_key, 0) + b"\x00" * 16))
        assert _outcome(sock) == "closed"
    _still_served(broker)


def test_an_unsupported_fetch_version_closes_the_connection(broker):
    with _connect(broker) as sock:  # Fetch v3: removed in Kafka 4.0 (and from the specs)
        sock.sendall(_frame(_header(1, 3) + b"\x00" * 32))
        assert _outcome(sock) == "closed"
    with _connect(broker) as sock:  # and a version beyond every known one
        sock.sendall(_frame(_header(1, 99) + b"\x00" * 32))
        assert _outcome(sock) == "closed"
    _still_served(broker)


def test_a_truncated_request_body_closes_the_connection(broker, topic):
    request = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1000, session_epoch=-1,
                             topics=[m.FetchRequest.FetchTopic(topic=topic, partitions=[
                                 m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=100)])])
    whole = Correlator(client_id="robust").request(request, FETCH_VERSION)[4:]
    for cut in (len(whole) - 1, len(whole) - 5, len(whole) // 2, 25, 9):
        with _connect(broker) as sock:
            sock.sendall(_frame(whole[:cut]))  # a frame whose body ends early
            assert _outcome(sock) == "closed", cut
    _still_served(broker)


def test_a_frame_cut_short_by_the_client_leaves_the_broker_serving(broker):
    """A frame announced larger than what is sent: the broker waits for it without blocking others,
    and forgets it when the client goes away."""
    frame_bytes = Correlator(client_id="robust").request(m.MetadataRequest(topics=None), 12)
    waiting = _connect(broker)
    try:
        waiting.sendall(frame_bytes[:-3])
        _still_served(broker)  # while the incomplete frame is pending
    finally:
        waiting.close()
    _still_served(broker)


@pytest.mark.parametrize("body", [
    b"\xff" * 40,  # arrays and strings with length -1 / huge varints
    b"\x7f\xff\xff\xff" * 10,  # int32 lengths of 2 GiB: must be refused without allocating
    b"\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x0f",  # a varint array length near 2**32
    b"\x00",  # much too short
    b"",  # no body at all
])
@pytest.mark.parametrize("api", [(1, 4), (1, FETCH_VERSION), (0, 9), (3, 12), (18, 3), (19, 7)])
def test_a_valid_header_with_a_malformed_body(broker, api, body):
    key, version = api
    header = _real_header(key, version)
    with _connect(broker) as sock:
        started = time.monotonic()
        sock.sendall(_frame(header + body))
        _outcome(sock)  # an error response or a clean close; a hang fails
        assert time.monotonic() - started < 2
    _still_served(broker)


def test_the_broker_still_works_after_all_this(broker, topic):
    with RawClient(broker.port) as raw:
        raw.sock.settimeout(TIMEOUT)
        assert produce(raw, topic, 0, batch_of(150)).error_code == 0
        (part,) = by_partition(fetch(raw, [(topic, 0, 0, 1000)])).values()
        assert len(part.records) == 150

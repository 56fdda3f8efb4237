"""Reading request frames off a connection (kafkawire.broker.network.receiving): frames split across
reads at any boundary, large frames read straight into a buffer of their own in large reads, one read
per ``receive`` (the connection is muted while a request is handled), oversized frames refused from
their size prefix; and the same through a running broker with 1 MiB Produce requests."""
from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest

from kafkawire import messages as m
from kafkawire.broker.network.receiving import SCRATCH_SIZE, FrameReceiver
from kafkawire.framing import Correlator, FrameBuffer, FrameTooLarge
from kafkawire.records import RecordBatchBuilder, iter_batches
from support.broker_harness import BrokerThread, RawClient
from support.broker_wire import create_topic, fetch

MiB = 1 << 20


class Socket:
    """A transport over bytes waiting in a socket: each resume_reading lets the protocol read once (at
    most ``read_size`` bytes, into the buffer it gives); the end of the bytes is the client's EOF."""

    def __init__(self, data: bytes, read_size: int, eof_with_last_read: bool = False):
        self.data, self.read_size = memoryview(data), read_size
        self.eof_with_last_read = eof_with_last_read  # the client's FIN in the same loop turn as its last bytes
        self.paused = False
        self.reads: list[int] = []  # the size of each buffer the protocol offered
        self.protocol: FrameReceiver | None = None

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False
        asyncio.get_running_loop().call_soon(self._read)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name, default=None):
        return default

    def _read(self) -> None:
        protocol = self.protocol
        assert protocol is not None and not self.paused
        if not self.data:
            protocol.eof_received()
            protocol.connection_lost(None)
            return
        buffer = protocol.get_buffer(-1)
        self.reads.append(len(buffer))
        n = min(len(buffer), self.read_size, len(self.data))
        buffer[:n] = self.data[:n]
        self.data = self.data[n:]
        protocol.buffer_updated(n)
        if self.eof_with_last_read and not self.data:
            protocol.eof_received()
            protocol.connection_lost(None)


def receive_all(data: bytes, read_size: int, max_frame: int = 100 * MiB,
                eof_with_last_read: bool = False) -> tuple[list[bytes], Socket]:
    """The frames a FrameReceiver hands out for ``data``, read as a connection reads them."""
    async def run() -> tuple[list[bytes], Socket]:
        transport = Socket(data, read_size, eof_with_last_read)
        receiver = FrameReceiver(asyncio.StreamReader(), None, max_frame)
        transport.protocol = receiver
        receiver.connection_made(transport)  # type: ignore[arg-type]
        assert transport.paused  # nothing is read until the connection asks
        frames = []
        while True:
            frame = receiver.frame()
            if frame is not None:
                frames.append(bytes(frame))
                continue
            if not await receiver.receive():
                return frames, transport
            assert transport.paused  # one read per receive()
    return asyncio.run(run())


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


SIZES = [0, 1, 9, 1000, SCRATCH_SIZE - 5, SCRATCH_SIZE - 4, SCRATCH_SIZE - 3, SCRATCH_SIZE, 3 * SCRATCH_SIZE + 7, MiB]


@pytest.mark.parametrize("read_size", [1, 3, 4, 5, 4093, 65536, SCRATCH_SIZE, 8 * MiB])
def test_frames_split_across_reads_at_any_boundary_come_out_whole(read_size):
    payloads = [bytes([i % 251]) * size for i, size in enumerate(SIZES)]
    payloads += payloads[::-1]
    if read_size < 4096:  # a loop turn per read: the tiny reads get the small frames (and a split prefix)
        payloads = [p for p in payloads if len(p) <= 1000]
    frames, _ = receive_all(framed(payloads), read_size)
    assert frames == payloads


@pytest.mark.parametrize("read_size", [5, 1 << 16])
def test_frames_that_came_with_the_end_of_the_stream_are_handed_out(read_size):
    payloads = [b"one", b"two" * 1000, b"three"]
    frames, _ = receive_all(framed(payloads), read_size, eof_with_last_read=True)
    assert frames == payloads


def test_a_large_frame_is_read_into_its_own_buffer_in_large_reads():
    payload = bytes(range(256)) * (4 * MiB // 256)
    frames, transport = receive_all(framed([payload, b"next"]), 8 * MiB)
    assert frames == [payload, b"next"]
    # the first read fills the scratch buffer; the next is offered the rest of the frame at once
    assert transport.reads[:2] == [SCRATCH_SIZE, len(payload) - (SCRATCH_SIZE - 4)]


def test_an_oversized_frame_is_refused_from_its_size_prefix():
    async def run() -> None:
        transport = Socket(struct.pack(">i", 2 * MiB) + bytes(100), 1 << 16)
        receiver = FrameReceiver(asyncio.StreamReader(), None, MiB)
        transport.protocol = receiver
        receiver.connection_made(transport)  # type: ignore[arg-type]
        assert await receiver.receive()
        with pytest.raises(FrameTooLarge):
            receiver.frame()
        assert receiver.pending_size is None or receiver.pending_size == 2 * MiB
        assert transport.paused  # and nothing more is read of it
    asyncio.run(run())


def test_a_lost_connection_raises_from_receive():
    async def run() -> None:
        receiver = FrameReceiver(asyncio.StreamReader(), None, MiB)
        transport = Socket(b"", 1)
        transport.protocol = receiver
        receiver.connection_made(transport)  # type: ignore[arg-type]
        receiver.connection_lost(ConnectionResetError("reset by peer"))
        with pytest.raises(ConnectionResetError):
            await receiver.receive()
    asyncio.run(run())


# ---- through a broker --------------------------------------------------------------------------------------------

def _batch(records: int, value_size: int, seed: int) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(records):
        builder.append(bytes([(seed + i) % 256]) * value_size)
    return builder.build()


def _produce_frame(correlator: Correlator, topic: str, batch: bytes, acks: int = 1) -> bytes:
    request = m.ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    return correlator.request(request, 9)


def test_one_mib_produce_requests_split_and_pipelined_are_appended_whole_and_in_order(tmp_path):
    batches = [_batch(1000, 1024, seed) for seed in range(3)]
    with BrokerThread(data_dir=tmp_path / "data", auto_create_topics=False) as broker:
        with RawClient(broker.port) as client:
            create_topic(client, "wire", 1)
        correlator = Correlator(client_id="splitter")
        frames = [_produce_frame(correlator, "wire", batch) for batch in batches]
        stream = b"".join(frames)
        with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # the first request in odd pieces (its size prefix split too), the others back to back
            cuts = [0, 2, 3, 1001, 70_000, SCRATCH_SIZE + 5, len(frames[0])]
            for start, end in zip(cuts, cuts[1:]):
                sock.sendall(stream[start:end])
                time.sleep(0.01)  # (each piece its own read, as far as the kernel lets them be)
            sock.sendall(stream[len(frames[0]):])
            answers = FrameBuffer()
            responses = []
            while len(responses) < len(frames):
                data = sock.recv(1 << 16)
                assert data, "the broker closed the connection"
                answers.feed(data)
                responses += [correlator.response(frame)[2] for frame in answers.frames()]
        results = [r.responses[0].partition_responses[0] for r in responses]
        assert [(p.error_code, p.base_offset) for p in results] == [(0, 0), (0, 1000), (0, 2000)]
        with RawClient(broker.port) as client:
            records = b""
            while len(records) < sum(map(len, batches)):
                response = fetch(client, [("wire", 0, len(list(iter_batches(records))) * 1000, 8 * MiB)])
                records += bytes(response.responses[0].partitions[0].records)
        stored = list(iter_batches(records))  # CRCs checked
        assert [b.base_offset for b in stored] == [0, 1000, 2000]
        for got, sent in zip(stored, batches):  # the offsets were written into the request: nothing else changed
            assert bytes(got.buffer[16:]) == sent[16:]  # (the leader epoch before it is the broker's)


def test_pipelined_produce_requests_are_answered_in_order_and_acks_zero_never(tmp_path):
    """As librdkafka pipelines (up to max.in.flight requests unanswered): twelve Produce requests sent
    at once, over two partitions and with acks 1, -1 and 0, are all appended in the order sent; the ones
    with acks 1 and -1 are answered in that order, and the acks=0 ones never (the next answer on the
    connection is the ApiVersions sent after them)."""
    acks = [1, 0, -1, 0, 0, 1, -1, 0, 1, 1, 0, -1]
    with BrokerThread(data_dir=tmp_path / "data", auto_create_topics=False) as broker:
        with RawClient(broker.port) as client:
            create_topic(client, "inflight", 2)
            sent = []
            frames = []
            for i, ack in enumerate(acks):
                body = m.ProduceRequest(acks=ack, timeout_ms=30_000, topic_data=[m.ProduceRequest.TopicProduceData(
                    name="inflight", partition_data=[m.ProduceRequest.PartitionProduceData(
                        index=i % 2, records=_batch(10 + i, 100, i))])])
                frames.append(client.correlator.request(body, 9))
                sent.append((i % 2, 10 + i))
            client.sock.sendall(b"".join(frames))  # all in flight before any answer is read
            answers = [client.receive() for ack in acks if ack != 0]  # the correlator checks their order
            client.send(m.ApiVersionsRequest(), 3)
            assert isinstance(client.receive(), m.ApiVersionsResponse)
        expected_offsets = {0: 0, 1: 0}  # each request's base offset, from all the requests before it
        expected = []
        for ack, (partition, count) in zip(acks, sent):
            if ack != 0:
                expected.append((partition, 0, expected_offsets[partition]))
            expected_offsets[partition] += count
        got = [(a.responses[0].partition_responses[0].index, a.responses[0].partition_responses[0].error_code,
                a.responses[0].partition_responses[0].base_offset) for a in answers]
        assert got == expected
        with RawClient(broker.port) as client:
            for partition in (0, 1):
                response = fetch(client, [("inflight", partition, 0, 8 * MiB)])
                stored = list(iter_batches(bytes(response.responses[0].partitions[0].records)))
                assert [b.count for b in stored] == [count for p, count in sent if p == partition]


def _over_a_socket(test) -> None:
    """Run ``test(receiver, client socket, transport's resume_reading calls)`` on a FrameReceiver over
    a real socket pair, reading straight from its socket as a plain TCP connection does."""
    async def run() -> None:
        with socket.create_server(("127.0.0.1", 0)) as server:
            theirs = socket.create_connection(server.getsockname())
            ours, _ = server.accept()
        receiver = FrameReceiver(asyncio.StreamReader(), None, MiB)
        transport, _ = await asyncio.get_running_loop().connect_accepted_socket(lambda: receiver, ours)
        resumes: list[int] = []
        resume = transport.resume_reading

        def counted() -> None:
            resumes.append(1)
            resume()
        transport.resume_reading = counted  # type: ignore[method-assign]
        receiver.read_directly(ours.fileno())
        try:
            await test(receiver, theirs, resumes)
        finally:
            theirs.close()
            transport.close()
    asyncio.run(run())


async def _next_frame(receiver: FrameReceiver) -> bytes | None:
    while True:
        frame = receiver.frame()
        if frame is not None:
            return bytes(frame)
        if not await receiver.receive():
            return None


def test_a_request_waiting_in_the_socket_is_read_without_a_turn_of_the_transport():
    """A pipelining client's next request, in the socket by the time the answer is written, is read at
    once: the transport is not resumed to read it (a turn of the loop and two epoll changes)."""
    async def test(receiver: FrameReceiver, client: socket.socket, resumes: list[int]) -> None:
        client.sendall(framed([b"first"]))
        assert await _next_frame(receiver) == b"first"
        client.sendall(framed([b"second", b"x" * (SCRATCH_SIZE + 9)]))  # sent while "first" was handled
        assert await _next_frame(receiver) == b"second"
        assert await _next_frame(receiver) == b"x" * (SCRATCH_SIZE + 9)  # (read into a buffer of its own)
        assert resumes == []
        idle = asyncio.create_task(_next_frame(receiver))  # nothing waiting: the transport reads when it comes
        await asyncio.sleep(0.05)
        assert not idle.done() and resumes == [1]
        client.sendall(framed([b"third"]))
        assert await idle == b"third"
    _over_a_socket(test)


def test_the_end_of_the_stream_and_a_reset_read_straight_from_the_socket():
    async def ended(receiver: FrameReceiver, client: socket.socket, resumes: list[int]) -> None:
        client.sendall(framed([b"last"]))
        client.shutdown(socket.SHUT_WR)
        assert await _next_frame(receiver) == b"last"
        assert await _next_frame(receiver) is None

    async def reset(receiver: FrameReceiver, client: socket.socket, resumes: list[int]) -> None:
        client.sendall(framed([b"one"]))
        assert await _next_frame(receiver) == b"one"
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # lingering 0 s: a reset
        with pytest.raises(ConnectionError):
            await _next_frame(receiver)
    _over_a_socket(ended)
    _over_a_socket(reset)

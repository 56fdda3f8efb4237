"""A broker that keeps nothing (issue 33): the floor of a produce benchmark, what the client reaches when
the broker costs next to nothing. Serves ApiVersions, Metadata (every topic asked for has one partition,
led by itself) and Produce (every partition accepted at once, offsets counted, the records dropped);
any other request closes the connection. One thread, blocking sockets under a selector.

``python bench/null_broker.py`` prints ``null broker on HOST:PORT`` once it listens, then serves until
killed. ``NullBroker`` runs it in a subprocess for a ``with`` block."""
from __future__ import annotations

import selectors
import socket
import struct
import subprocess
import sys

from kafkawire import messages as m
from kafkawire.codec.base import Message
from kafkawire.framing import encode_response, read_request
from kafkawire.messages import ApiKey

_SIZE = struct.Struct(">i")
_SERVED = {ApiKey.API_VERSIONS: 3, ApiKey.METADATA: 9, ApiKey.PRODUCE: 9}  # (api key: highest version)


def _answer(api_key: int, request, port: int, offsets: dict) -> Message | None:
    if api_key == ApiKey.API_VERSIONS:
        version = m.ApiVersionsResponse.ApiVersion
        return m.ApiVersionsResponse(error_code=0, api_keys=[version(api_key=k, min_version=0, max_version=v)
                                                             for k, v in _SERVED.items()])
    if api_key == ApiKey.METADATA:
        r = m.MetadataResponse
        return r(brokers=[r.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=port, rack=None)],
                 cluster_id="null", controller_id=1, topics=[r.MetadataResponseTopic(
                     error_code=0, name=topic.name, is_internal=False, partitions=[r.MetadataResponsePartition(
                         error_code=0, partition_index=0, leader_id=1, leader_epoch=0, replica_nodes=[1],
                         isr_nodes=[1], offline_replicas=[])]) for topic in request.topics or ()])
    if request.acks == 0:
        return None
    r = m.ProduceResponse
    topics = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            key = (topic.name, data.index)
            partitions.append(r.PartitionProduceResponse(index=data.index, error_code=0, base_offset=offsets.get(key, 0),
                                                         log_append_time_ms=-1, log_start_offset=0))
            records = data.records
            offsets[key] = offsets.get(key, 0) + (int.from_bytes(records[23:27], "big") + 1 if records else 0)
        topics.append(r.TopicProduceResponse(name=topic.name, partition_responses=partitions))
    return r(responses=topics)


class _Client:
    """A connection's bytes: read by the kernel straight into one buffer, frames answered from views of it."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = bytearray(8 << 20)
        self.end = 0  # bytes in the buffer

    def read(self) -> bool:
        """One read; False at the end of the stream."""
        if self.end == len(self.buffer):  # a frame larger than the buffer: room for it
            self.buffer.extend(bytes(len(self.buffer)))
        with memoryview(self.buffer) as view:
            try:
                got = self.sock.recv_into(view[self.end:])
            except ConnectionError:  # a client that resets rather than closes
                return False
        self.end += got
        return got > 0

    def answers(self, port: int, offsets: dict) -> list[bytes] | None:
        """The answers to the complete frames (which are then dropped); None to close."""
        answers, start = [], 0
        while self.end - start >= 4:
            end = start + 4 + _SIZE.unpack_from(self.buffer, start)[0]
            if self.end < end:
                break
            answer = _answer_frame(self.buffer, start + 4, end, port, offsets)
            if answer is False:
                return None
            if answer is not None:
                answers.append(answer)
            start = end
        if start:  # the partial frame to the front (the views into the buffer are gone by now)
            self.buffer[:self.end - start] = self.buffer[start:self.end]
            self.end -= start
        return answers


def _answer_frame(buffer: bytearray, start: int, end: int, port: int, offsets: dict) -> bytes | None | bool:
    with memoryview(buffer) as view:
        frame = view[start:end]
        header, request, _ = read_request(frame)
        api_key = header.request_api_key
        if api_key not in _SERVED:
            return False
        body = _answer(api_key, request, port, offsets)
        del request, frame  # (the records' views into the buffer)
    if body is None:
        return None
    return encode_response(api_key, min(header.request_api_version, _SERVED[api_key]), header.correlation_id, body)


def _warm_up() -> None:
    """The codecs of the messages served built before the clock starts (kafkawire loads them on first use)."""
    from kafkawire.framing import encode_request
    request = m.ProduceRequest(acks=1, timeout_ms=1, topic_data=[m.ProduceRequest.TopicProduceData(
        name="t", partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=None)])])
    frame = encode_request(m.RequestHeader(request_api_key=ApiKey.PRODUCE, request_api_version=9, correlation_id=0,
                                           client_id="warm-up"), request)
    _answer_frame(bytearray(frame), 4, len(frame), 0, {})
    for api_key in (ApiKey.API_VERSIONS, ApiKey.METADATA):
        encode_response(api_key, _SERVED[api_key], 0, _answer(api_key, m.MetadataRequest(topics=[]), 0, {}))


def serve() -> None:
    _warm_up()
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    print(f"null broker on 127.0.0.1:{port}", flush=True)
    selector = selectors.DefaultSelector()
    selector.register(server, selectors.EVENT_READ)
    offsets: dict = {}
    while True:
        for key, _ in selector.select():
            if key.fileobj is server:
                sock, _ = server.accept()
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                selector.register(sock, selectors.EVENT_READ, _Client(sock))
                continue
            client = key.data
            answers = client.answers(port, offsets) if client.read() else None
            if answers:
                client.sock.sendall(b"".join(answers))
            if answers is None:
                selector.unregister(client.sock)
                client.sock.close()


class NullBroker:
    """``serve`` in a subprocess for as long as a ``with`` block; ``bootstrap`` and ``proc`` as the other
    brokers' wrappers have them."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE)
        line = self.proc.stdout.readline().decode() if self.proc.stdout else ""
        if not line.startswith("null broker on "):
            self.close()
            raise RuntimeError("the null broker did not start")
        self.bootstrap = line.split()[-1]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> "NullBroker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    serve()

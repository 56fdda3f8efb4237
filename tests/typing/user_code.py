"""A user's program, typed: tests/test_typing.py checks it with mypy --strict (the project's
configuration) and runs it. It starts a broker, produces and consumes with the blocking clients, builds
and reads a record batch, and encodes and decodes generated messages."""
from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

from kafkawire.broker import BrokerThread
from kafkawire.client import Consumer, ConsumerRecord, Producer, RecordMetadata, TopicPartition
from kafkawire.errors import DecodeError
from kafkawire.framing import Correlator, FrameBuffer
from kafkawire.messages import FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, api
from kafkawire.records import Codec, Record, RecordBatchBuilder, iter_batches, iter_records


def produce(bootstrap: str, topic: str, count: int) -> list[RecordMetadata]:
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        futures = [producer.send(topic, f"value {n}".encode(), key=b"key", headers=[("n", str(n).encode())])
                   for n in range(count)]
        producer.flush()
        return [future.result() for future in futures]


def consume(bootstrap: str, topic: str, count: int) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        while len(records) < count:
            records += consumer.poll(timeout_ms=1000)
    return records


def values(records: list[ConsumerRecord]) -> list[str]:
    return [record.value.decode() if record.value is not None else "" for record in records]


def batch_round_trip() -> list[Record]:
    builder = RecordBatchBuilder(compression=Codec.ZSTD)
    for n in range(3):
        builder.append(f"record {n}".encode(), key=None, headers=[("trace", b"1")], timestamp=1_700_000_000_000)
    blob = builder.build()
    batches = list(iter_batches(blob))
    assert batches[0].compression is Codec.ZSTD
    return list(iter_records(blob))


def message_round_trip() -> FetchRequest:
    topic_id: uuid.UUID = uuid.uuid4()
    request = FetchRequest(max_wait_ms=500, min_bytes=1, topics=[
        FetchRequest.FetchTopic(topic_id=topic_id, partitions=[FetchRequest.FetchPartition(partition=0)])])
    decoded = FetchRequest.decode(request.encode(15), 15)
    partition: FetchRequest.FetchPartition = decoded.topics[0].partitions[0]
    assert partition.fetch_offset == 0 and decoded.topics[0].topic_id == topic_id
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic_id=topic_id, partitions=[
        FetchResponse.PartitionData(partition_index=0, records=b"\x00" * 4)])])
    records = FetchResponse.decode(response.encode(15), 15).responses[0].partitions[0].records
    assert records is not None and bytes(records) == b"\x00" * 4  # a memoryview slice of the input
    names: list[str] = [t.name for t in MetadataResponse().topics if t.name is not None]
    assert names == [] and MetadataRequest(topics=None).topics is None
    assert api("Fetch").request_class is FetchRequest
    return decoded


def framing_round_trip() -> int:
    correlator = Correlator(client_id="typed")
    frame = correlator.request(MetadataRequest(topics=None), 12)
    buffer = FrameBuffer()
    buffer.feed(frame)
    frames = list(buffer.frames())
    try:
        FetchRequest.decode(b"\x00", 12)
    except DecodeError as error:
        assert error.path[0] == "FetchRequest"
    return len(frames)


def main() -> int:
    with tempfile.TemporaryDirectory() as data_dir, BrokerThread(data_dir=Path(data_dir)) as broker:
        sent = produce(broker.bootstrap, "typed", 3)
        received = consume(broker.bootstrap, "typed", 3)
    print("offsets", [metadata.offset for metadata in sent])
    print("values", values(received))
    print("headers", [record.headers[0].value for record in received])
    print("batch", [record.value for record in batch_round_trip()])
    print("fetch", message_round_trip().max_wait_ms)
    print("frames", framing_round_trip())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Mistakes a user's type checker must catch: tests/test_typing.py runs mypy over this file and expects
exactly the errors that the E comments name (mypy's error codes), on their lines. Never run."""
from __future__ import annotations

from kafkawire.client import Consumer, Producer, Prodcuer  # E: attr-defined
from kafkawire.messages import FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, NoSuchRequest  # E: attr-defined
from kafkawire.records import RecordBatchBuilder, iter_records

FetchRequest(max_wait_ms="oops")  # E: arg-type
FetchRequest(max_wait_ms=100, replica_idd=1)  # E: call-arg
response: MetadataResponse = FetchResponse.decode(b"", 12)  # E: assignment
FetchRequest.decode(b"", 12).topics.append(FetchRequest.FetchTopic())  # E: attr-defined
FetchRequest.FetchTopic(partitions=[1])  # E: list-item
FetchRequest.FetchTopic(topic_id="not a uuid")  # E: arg-type
FetchRequest(unknown_tags={"0": b""})  # E: dict-item
FetchResponse.PartitionData(records="text")  # E: arg-type
name: str = MetadataRequest().topics[0].name  # E: assignment, index
port: str = MetadataResponse.decode(b"", 12).brokers[0].port  # E: assignment

with Producer(bootstrap_servers="127.0.0.1:9092") as producer:
    producer.send(topic=1)  # E: arg-type
    producer.send("events", "text")  # E: arg-type
    offset: str = producer.send("events", b"v").result().offset  # E: assignment

with Consumer(bootstrap_servers="127.0.0.1:9092") as consumer:
    consumer.poll(timeout_ms="1000")  # E: arg-type
    for record in consumer.poll():
        record.value.decode()  # E: union-attr

RecordBatchBuilder().append("text")  # E: arg-type
for r in iter_records(b""):
    r.offset + "1"  # E: operator

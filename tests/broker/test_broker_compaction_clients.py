"""Compaction seen by real clients: confluent-kafka creates a compacted topic, produces keyed records
(idempotently) and a consumer from the start, once the broker's cleaner has run in the background,
gets the latest value of each key at the offset it was written at; a record without a key is refused."""
from __future__ import annotations

import threading
import time

import pytest
from broker_harness import BrokerThread

confluent_kafka = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")

TIMEOUT = 30
TOPIC = "table"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("compaction"), log_cleaner_backoff_ms=20) as running:
        client = admin.AdminClient({"bootstrap.servers": running.bootstrap})
        topic = admin.NewTopic(TOPIC, 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "86400000"})
        client.create_topics([topic])[TOPIC].result(TIMEOUT)
        yield running


def _produce(bootstrap, records):
    """Produce (key, value) pairs; returns offset -> (key, value) from the delivery reports."""
    delivered = {}
    errors = []

    def report(error, message):
        if error is not None:
            errors.append(error)
        else:
            delivered[message.offset()] = (message.key(), message.value())

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                                         "batch.size": 2048, "enable.idempotence": True})
    for key, value in records:
        producer.produce(TOPIC, key=key, value=value, on_delivery=report)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    return delivered, errors


def _consume_all(bootstrap, end_offset):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)])
    seen = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while (not seen or seen[-1][0] < end_offset - 1) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                if message.error() is None:
                    seen.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return seen


def _cleaned_up_to(broker) -> int:
    async def checkpoint():
        return broker.broker.cleaner.checkpoints.get(f"{TOPIC}-0", 0), \
            broker.broker.topics.log(TOPIC, 0).segments[-1].base_offset
    return broker.call(checkpoint())


def test_a_consumer_gets_the_latest_value_of_each_key_after_cleaning(broker):
    records = [(b"user-%d" % (index % 40), b"state-%d" % index) for index in range(3000)]
    delivered, errors = _produce(broker.bootstrap, records)
    assert not errors and len(delivered) == 3000
    deadline = time.monotonic() + TIMEOUT
    while True:  # the cleaner runs in the background; it cleans up to the active segment
        cleaned, active = _cleaned_up_to(broker)
        if cleaned == active > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert cleaned == active > 0
    seen = _consume_all(broker.bootstrap, max(delivered) + 1)
    assert seen[-1][0] == max(delivered)
    for offset, key, value in seen:  # every record is the one written at its offset
        assert delivered[offset] == (key, value)
    assert len(seen) < 3000
    latest = {}
    for offset in sorted(delivered):
        latest[delivered[offset][0]] = (offset, delivered[offset][1])
    assert {key: (offset, value) for offset, key, value in seen} == latest
    cleaned_part = [key for offset, key, _ in seen if offset < cleaned]
    assert len(cleaned_part) == len(set(cleaned_part))  # below the checkpoint, one record a key


def test_a_consumer_reading_while_the_cleaner_swaps_segments_gets_whole_records(broker):
    """A consumer reads the topic from the start again and again while a producer writes and the
    cleaner rewrites segments under it: every record it gets is the one written at its offset, in
    order (a fetch of a replaced segment still sends that segment's bytes)."""
    passes: list[list[tuple[int, bytes, bytes]]] = []
    stop = threading.Event()

    def consume():
        while not stop.is_set():
            passes.append(_consume_all(broker.bootstrap, _end_offset(broker)))

    reader = threading.Thread(target=consume)
    reader.start()
    delivered, errors = {}, []
    try:
        for chunk in range(3):  # a cleaning round after each chunk, while the reader reads
            rounds = broker.call(_rounds(broker))
            records = [(b"user-%d" % (index % 40), b"chunk-%d-%d" % (chunk, index)) for index in range(1000)]
            more, failed = _produce(broker.bootstrap, records)
            delivered.update(more)
            errors += failed
            deadline = time.monotonic() + TIMEOUT
            while broker.call(_rounds(broker)) == rounds and time.monotonic() < deadline:
                time.sleep(0.02)
            assert broker.call(_rounds(broker)) > rounds
    finally:
        stop.set()
        reader.join(TIMEOUT)
    assert not errors and len(passes) >= 2
    for seen in passes:
        offsets = [offset for offset, _, _ in seen]
        assert offsets == sorted(set(offsets))
        for offset, key, value in seen:
            if offset in delivered:
                assert delivered[offset] == (key, value)


async def _rounds(broker) -> int:
    """The cleaning rounds the broker's cleaner has run (read on the broker's loop)."""
    return broker.broker.cleaner.rounds


def _end_offset(broker) -> int:
    async def end():
        return broker.broker.topics.log(TOPIC, 0).log_end_offset
    return broker.call(end())


def test_a_record_without_a_key_is_refused(broker):
    delivered, errors = _produce(broker.bootstrap, [(None, b"no key")])
    assert not delivered
    assert [error.code() for error in errors] == [confluent_kafka.KafkaError.INVALID_RECORD]


def test_the_topic_describes_its_compaction_configs(broker):
    client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = admin.ConfigResource(admin.ResourceType.TOPIC, TOPIC)
    configs = client.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["min.cleanable.dirty.ratio"].value == "0.01"
    assert configs["delete.retention.ms"].value == "86400000"

"""share.isolation.level read_committed against confluent-kafka: share fetches stop at the last stable
offset (an open transaction holds back what follows it) and the records of aborted transactions are
archived, never delivered; read_uncommitted groups get everything."""
from __future__ import annotations

import itertools
import time

import pytest

from support.broker_harness import BrokerThread

_names = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("share-txn") / "data", share_auto_offset_reset="earliest",
                      transaction_partition_verification=True) as running:
        yield running


def _topic(broker) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"share-txn-{next(_names)}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1)])[name].result(15)
    return name


def _set_isolation(broker, group: str, level: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.isolation.level", level, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def _transactional(broker, transactional_id: str):
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5})
    producer.init_transactions(15)
    return producer


def _write(producer, topic: str, values: list[str], commit: bool) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value.encode())
    producer.flush(15)
    if commit:
        producer.commit_transaction(15)
    else:
        producer.abort_transaction(15)


def _consume(broker, group: str, topic: str, wanted: int, deadline_s: float = 30) -> list[bytes]:
    from confluent_kafka import ShareConsumer
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + deadline_s
        while len(got) < wanted and time.monotonic() < deadline:
            for message in consumer.poll(1.0):
                assert message.error() is None, message.error()
                got.append(message.value())
        consumer.commit_sync(15)
    finally:
        consumer.close()
    return got


def test_read_committed_skips_aborted_records(broker):
    topic = _topic(broker)
    producer = _transactional(broker, f"txn-{topic}")
    _write(producer, topic, ["c0", "c1"], commit=True)
    _write(producer, topic, ["a0", "a1", "a2"], commit=False)
    _write(producer, topic, ["c2"], commit=True)
    group = f"committed-{topic}"
    _set_isolation(broker, group, "read_committed")
    assert _consume(broker, group, topic, 3) == [b"c0", b"c1", b"c2"]
    # every record is settled: nothing is in flight to come back
    assert _consume(broker, group, topic, 1, deadline_s=3) == []
    assert _consume(broker, f"uncommitted-{topic}", topic, 6) == [b"c0", b"c1", b"a0", b"a1", b"a2", b"c2"]


def test_read_committed_stops_at_an_open_transaction(broker):
    from confluent_kafka import Producer
    topic = _topic(broker)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"p0")
    plain.flush(15)
    producer = _transactional(broker, f"open-{topic}")
    producer.begin_transaction()
    producer.produce(topic, value=b"t0")
    producer.flush(15)
    plain.produce(topic, value=b"p1")  # after the open transaction's first record: held back
    plain.flush(15)
    group = f"open-{topic}"
    _set_isolation(broker, group, "read_committed")
    assert _consume(broker, group, topic, 3, deadline_s=4) == [b"p0"]
    producer.commit_transaction(15)
    assert _consume(broker, group, topic, 2) == [b"t0", b"p1"]

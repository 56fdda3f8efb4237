"""Group configs on GROUP resources (Kafka's ``GroupConfig``) through confluent-kafka's AdminClient:
set per group with IncrementalAlterConfigs, checked against Kafka's bounds, described with their
sources, kept across a restart, and in force for that group's share consumers only."""
from __future__ import annotations

import itertools
import time

import pytest

from support.broker_harness import BrokerThread

_names = itertools.count()
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5  # ConfigSource


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("group-configs") / "data") as running:
        yield running


def _admin(broker):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _set(broker, group: str, **values: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in values.items()])
    admin = _admin(broker)  # kept while its futures complete
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def _describe(broker, group: str) -> dict:
    from confluent_kafka.admin import ConfigResource, ResourceType
    admin = _admin(broker)
    futures = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
    (future,) = futures.values()
    return {name: (entry.value, int(entry.source)) for name, entry in future.result(15).items()}


def _topic(broker, count: int) -> str:
    from confluent_kafka.admin import NewTopic
    name = f"group-configs-{next(_names)}"
    admin = _admin(broker)
    admin.create_topics([NewTopic(name, 1)])[name].result(15)
    _produce(broker, name, 0, count)
    return name


def _produce(broker, topic: str, start: int, end: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(start, end):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(15) == 0


def _consumer(broker, group: str, topic: str, **settings):
    from confluent_kafka import ShareConsumer
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **settings})
    consumer.subscribe([topic])
    return consumer


def _poll_until(consumer, wanted: int, deadline_s: float = 30) -> list:
    got: list = []
    deadline = time.monotonic() + deadline_s
    while len(got) < wanted and time.monotonic() < deadline:
        for message in consumer.poll(1.0):
            assert message.error() is None, message.error()
            got.append(message)
    return got


def test_auto_offset_reset_applies_to_the_group_that_sets_it(broker):
    topic = _topic(broker, 10)
    _set(broker, "reset-earliest", share_auto_offset_reset="earliest")
    early = _consumer(broker, "reset-earliest", topic)
    late = _consumer(broker, "reset-default", topic)  # the broker's: latest
    try:
        assert sorted(m.offset() for m in _poll_until(early, 10)) == list(range(10))
        # the default group starts at the end once it fetches; it then gets only what comes after
        deadline = time.monotonic() + 30
        got: list = []
        while not got and time.monotonic() < deadline:
            _produce(broker, topic, 10, 11)
            got = list(late.poll(1.0))
        assert got and min(m.offset() for m in got) >= 10
    finally:
        early.close()
        late.close()


def test_delivery_count_limit_of_one_group(broker):
    topic = _topic(broker, 1)
    _set(broker, "limit-two", share_auto_offset_reset="earliest", share_delivery_count_limit="2")
    consumer = _consumer(broker, "limit-two", topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        assert _release_until_archived(consumer) == [1, 2]  # archived at the group's limit (the broker's is 5)
    finally:
        consumer.close()


def _release_until_archived(consumer, after_release=lambda deliveries: None) -> list[int]:
    """RELEASE every record delivered until none comes back; the delivery counts seen, in order.
    ``after_release(deliveries)`` runs once each delivery's release is committed."""
    from confluent_kafka import AcknowledgeType
    deliveries: list[int] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        messages = list(consumer.poll(1.0))
        for message in messages:
            deliveries.append(message.delivery_count())
            consumer.acknowledge(message, AcknowledgeType.RELEASE)
        if messages:
            consumer.commit_sync(15)
            after_release(deliveries)
        elif len(deliveries) >= 2:
            break
    return deliveries


def test_a_limit_changed_while_the_group_consumes_applies_at_once(broker):
    """The broker keeps each group's settings between fetches; a change must reach the next one."""
    topic = _topic(broker, 1)
    _set(broker, "limit-later", share_auto_offset_reset="earliest")
    consumer = _consumer(broker, "limit-later", topic, **{"share.acknowledgement.mode": "explicit"})

    def lower_the_limit(deliveries: list[int]) -> None:
        if deliveries == [1]:  # in use under the broker's limit (5): now the group's own, 2
            _set(broker, "limit-later", share_auto_offset_reset="earliest", share_delivery_count_limit="2")
    try:
        assert _release_until_archived(consumer, lower_the_limit) == [1, 2]
    finally:
        consumer.close()


def test_describe_gives_overrides_and_broker_values(broker):
    _set(broker, "described", share_record_lock_duration_ms="20000", share_isolation_level="read_committed")
    described = _describe(broker, "described")
    assert described["share.record.lock.duration.ms"] == ("20000", GROUP_CONFIG)
    assert described["share.isolation.level"] == ("read_committed", GROUP_CONFIG)
    assert described["share.delivery.count.limit"] == ("5", DEFAULT_CONFIG)
    assert described["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
    assert {"share.session.timeout.ms", "share.heartbeat.interval.ms", "share.auto.offset.reset",
            "share.partition.max.record.locks", "consumer.heartbeat.interval.ms"} <= set(described)


@pytest.mark.parametrize("values", [
    {"share.unknown.key": "1"},
    {"share.delivery.count.limit": "1"},  # the key's own bound
    {"share.delivery.count.limit": "11"},  # group.share.max.delivery.count.limit
    {"share.record.lock.duration.ms": "5000"},  # group.share.min.record.lock.duration.ms
    {"share.partition.max.record.locks": "20000"},
    {"share.session.timeout.ms": "50000", "share.heartbeat.interval.ms": "60000"},
    {"consumer.session.timeout.ms": "30000"},
    {"share.isolation.level": "READ_COMMITTED"},
    {"share.auto.offset.reset": "by_duration:-PT1H"},
    {"share.renew.acknowledge.enable": "1"},
    {"share.delivery.count.limit": "three"},
])
def test_values_out_of_kafkas_bounds_are_invalid_config(broker, values):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    from confluent_kafka.error import KafkaException
    resource = ConfigResource(ResourceType.GROUP, "refused", incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in values.items()])
    admin = _admin(broker)
    (future,) = admin.incremental_alter_configs([resource]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(15)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert all(source == DEFAULT_CONFIG for _, source in _describe(broker, "refused").values())


def test_group_configs_survive_a_restart(tmp_path):
    with BrokerThread(data_dir=tmp_path / "data") as first:
        _set(first, "kept", share_delivery_count_limit="3", share_auto_offset_reset="by_duration:PT1H")
    with BrokerThread(data_dir=tmp_path / "data") as second:
        described = _describe(second, "kept")
        assert described["share.delivery.count.limit"] == ("3", GROUP_CONFIG)
        assert described["share.auto.offset.reset"] == ("by_duration:PT1H", GROUP_CONFIG)
        topic = _topic(second, 5)  # written just now: within the hour
        consumer = _consumer(second, "kept", topic)
        try:
            assert sorted(m.offset() for m in _poll_until(consumer, 5)) == list(range(5))
        finally:
            consumer.close()

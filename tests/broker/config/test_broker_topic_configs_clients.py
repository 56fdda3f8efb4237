"""Every Kafka topic config is accepted, validated and described (issue 23), through confluent-kafka's
AdminClient and kafka-python's KafkaAdminClient: those the broker does not act on (flush.ms,
preallocate, ...) are stored and described with their sources like the rest; bad values get
INVALID_CONFIG; compression.type recompresses, message.timestamp.type=LogAppendTime and the timestamp
bounds are applied. BROKER_LOGGER resources list and set the broker's logger levels."""
from __future__ import annotations

import itertools
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic, ResourceType,
)


TIMEOUT = 15
_names = itertools.count()


@pytest.fixture(scope="module")
def admin(shared_broker):
    return AdminClient({"bootstrap.servers": shared_broker.bootstrap})


def _create(admin, config):
    name = f"tc-{next(_names)}"
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(TIMEOUT)
    return name


def _described(admin, name):
    resource = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


STORED = {"compression.type": "zstd", "compression.zstd.level": "-5", "compression.gzip.level": "9",
          "flush.messages": "1000", "flush.ms": "5000", "preallocate": "true", "segment.index.bytes": "4096",
          "segment.jitter.ms": "100", "file.delete.delay.ms": "1", "unclean.leader.election.enable": "true",
          "leader.replication.throttled.replicas": "0:0", "follower.replication.throttled.replicas": "*",
          "remote.log.copy.disable": "true"}


def test_configs_the_broker_does_not_act_on_are_stored_and_described(shared_broker, admin):
    name = _create(admin, STORED)
    configs = _described(admin, name)
    for key, value in STORED.items():
        assert configs[key].value == value, key
        assert configs[key].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, key
    assert configs["compression.lz4.level"].value == "9"  # Kafka's defaults for the rest
    assert configs["compression.lz4.level"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["compression.type"].synonyms["compression.type"].source in (
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DEFAULT_CONFIG.value)
    # kept with the topic's own configs, which a restart reads back
    assert shared_broker.broker.topics.get(name).configs["compression.type"] == "zstd"


@pytest.mark.parametrize("key, value", [
    ("compression.type", "brotli"), ("compression.gzip.level", "10"), ("compression.lz4.level", "0"),
    ("compression.zstd.level", "23"), ("flush.messages", "0"), ("segment.index.bytes", "3"),
    ("preallocate", "maybe"), ("leader.replication.throttled.replicas", "0-1"), ("segment.jitter.ms", "-1")])
def test_bad_values_are_refused_with_invalid_config(admin, key, value):
    name = f"tc-bad-{next(_names)}"
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        admin.create_topics([NewTopic(name, 1, 1, config={key: value})])[name].result(TIMEOUT)
    existing = _create(admin, {})
    resource = ConfigResource(ResourceType.TOPIC, existing, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)


def test_incremental_alter_sets_appends_and_deletes_stored_configs(admin):
    name = _create(admin, {"leader.replication.throttled.replicas": "0:0"})
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("compression.type", "gzip", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("leader.replication.throttled.replicas", "1:0", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("preallocate", None, incremental_operation=AlterConfigOpType.DELETE)])
    assert admin.incremental_alter_configs([resource])[resource].result(TIMEOUT) is None
    configs = _described(admin, name)
    assert configs["compression.type"].value == "gzip"
    assert configs["leader.replication.throttled.replicas"].value == "0:0,1:0"
    assert configs["preallocate"].value == "false"
    assert configs["preallocate"].source == ConfigSource.DEFAULT_CONFIG.value


def test_a_broker_default_for_a_stored_config_is_described_as_its_synonym(shared_broker, admin):
    name = _create(admin, {})
    resource = ConfigResource(ResourceType.BROKER, shared_broker.node, incremental_configs=[
        ConfigEntry("compression.type", "lz4", incremental_operation=AlterConfigOpType.SET)])
    assert admin.incremental_alter_configs([resource])[resource].result(TIMEOUT) is None
    try:
        entry = _described(admin, name)["compression.type"]
        assert entry.value == "lz4" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    finally:
        cleared = ConfigResource(ResourceType.BROKER, shared_broker.node, incremental_configs=[
            ConfigEntry("compression.type", None, incremental_operation=AlterConfigOpType.DELETE)])
        admin.incremental_alter_configs([cleared])[cleared].result(TIMEOUT)


def _stored_batches(shared_broker, topic):
    from kafkawire.records.reader import iter_batches
    segments = shared_broker.call(_segments(shared_broker, topic))
    return [batch for path in segments for batch in iter_batches(path.read_bytes())]


async def _segments(shared_broker, topic):
    return [segment.log_path for segment in shared_broker.broker.topics.log(topic, 0).segments]


def _consume(shared_broker, topic, count):
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": f"{topic}-reader",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("topic_codec, producer_codec, stored", [
    ("zstd", "none", 4), ("gzip", "lz4", 1), ("uncompressed", "snappy", 0), ("producer", "lz4", 3)])
def test_compression_type_recompresses_appended_batches(shared_broker, admin, topic_codec, producer_codec, stored):
    name = _create(admin, {"compression.type": topic_codec, "compression.gzip.level": "1"})
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 20,
                         "compression.type": producer_codec, "enable.idempotence": True})
    for i in range(200):
        producer.produce(name, key=b"k%d" % i, value=b"value %d " % i * 20, headers=[("h", b"%d" % i)])
    assert producer.flush(TIMEOUT) == 0
    batches = _stored_batches(shared_broker, name)
    assert batches and {int(batch.compression) for batch in batches} == {stored}
    assert all(batch.producer_id >= 0 for batch in batches)  # the producer's fields stay
    messages = _consume(shared_broker, name, 200)
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in messages] == [
        (i, b"k%d" % i, b"value %d " % i * 20, [("h", b"%d" % i)]) for i in range(200)]


def test_log_append_time_is_set_by_the_broker(shared_broker, admin):
    name = _create(admin, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 0})
    producer.produce(name, value=b"stamped", timestamp=1_000)  # the producer's own timestamp is replaced
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": f"{name}-reader",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([name])
    try:
        message = None
        deadline = time.monotonic() + TIMEOUT
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
        assert message is not None and message.error() is None
        from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
        kind, stamp = message.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= stamp <= int(time.time() * 1000)
    finally:
        consumer.close()


def test_timestamps_out_of_bounds_are_refused_with_invalid_timestamp(shared_broker, admin):
    name = _create(admin, {"message.timestamp.before.max.ms": "60000"})
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 0, "retries": 0})
    errors = []
    producer.produce(name, value=b"old", timestamp=int(time.time() * 1000) - 3_600_000,
                     on_delivery=lambda error, _message: errors.append(error))
    producer.flush(TIMEOUT)
    assert errors[0] is not None and errors[0].name() == "INVALID_TIMESTAMP"


def test_kafka_python_alters_and_describes_stored_configs(shared_broker, admin):
    from kafka.admin import ConfigResource as KpConfigResource, ConfigResourceType, KafkaAdminClient
    name = _create(admin, {})
    client = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        altered = client.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, name,
                                                         configs={"compression.type": "snappy", "flush.ms": "10"})])
        assert altered == {"topic": {name: "OK"}}
        refused = client.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, name,
                                                         configs={"compression.type": "brotli"})])
        assert "InvalidConfigurationError" in refused["topic"][name]
        described = client.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, name)])["topic"][name]
        assert described["compression.type"]["value"] == "snappy" and described["flush.ms"]["value"] == "10"
        assert described["compression.type"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert described["flush.ms"]["config_type"] == "LONG"
    finally:
        client.close()


# ---- BROKER_LOGGER (KIP-412), through kafka-python (confluent-kafka's Python ResourceType has no BROKER_LOGGER) --

@pytest.fixture(scope="module")
def kp_admin(shared_broker):
    from kafka.admin import KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    yield client
    client.close()


def _loggers(kp_admin, name):
    from kafka.admin import ConfigResource as KpConfigResource, ConfigResourceType
    described = kp_admin.describe_configs([KpConfigResource(ConfigResourceType.BROKER_LOGGER, name)])
    return described["broker_logger"][name]


def _alter_loggers(kp_admin, name, configs, validate_only=False):
    from kafka.admin import ConfigResource as KpConfigResource, ConfigResourceType
    result = kp_admin.alter_configs([KpConfigResource(ConfigResourceType.BROKER_LOGGER, name, configs=configs)],
                                    validate_only=validate_only, raise_on_unknown=False, incremental=True)
    return result["broker_logger"][name]


def test_broker_loggers_are_described_and_set_at_runtime(shared_broker, kp_admin):
    import logging
    from kafka.admin import AlterConfigOp
    name, node = "kafkawire.broker.groups.consumer", shared_broker.node
    logger = logging.getLogger(name)
    described = _loggers(kp_admin, node)
    assert {"root", "kafkawire", name} <= set(described)
    assert described[name]["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
    assert described[name]["value"] in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
    try:
        assert _alter_loggers(kp_admin, node, {name: (AlterConfigOp.SET, "TRACE")}) == "OK"
        assert _loggers(kp_admin, node)[name]["value"] == "TRACE" and logger.isEnabledFor(5)
        assert _alter_loggers(kp_admin, node, {name: (AlterConfigOp.SET, "OFF")}, validate_only=True) == "OK"
        assert _loggers(kp_admin, node)[name]["value"] == "TRACE"  # validate_only changed nothing
        assert _alter_loggers(kp_admin, node, {name: (AlterConfigOp.SET, "OFF")}) == "OK"
        assert not logger.isEnabledFor(logging.CRITICAL) and _loggers(kp_admin, node)[name]["value"] == "OFF"
    finally:
        _alter_loggers(kp_admin, node, {name: (AlterConfigOp.DELETE, None)})
    assert logger.level == logging.NOTSET  # reset: it inherits again
    levels = _loggers(kp_admin, node)
    assert levels[name]["value"] == levels["kafkawire"]["value"]


@pytest.mark.parametrize("name, operation, level, error", [
    ("kafkawire", "SET", "LOUD", "InvalidConfigurationError"),
    ("no.such.logger", "SET", "INFO", "InvalidConfigurationError"),
    ("root", "DELETE", None, "InvalidRequestError"),
    ("kafkawire", "APPEND", "INFO", "InvalidRequestError")])
def test_broker_logger_changes_kafka_refuses_are_refused(shared_broker, kp_admin, name, operation, level, error):
    from kafka.admin import AlterConfigOp
    assert error in _alter_loggers(kp_admin, shared_broker.node, {name: (AlterConfigOp[operation], level)})


@pytest.mark.parametrize("name, message", [("7", "Unexpected broker id, expected {node} but received 7"),
                                           ("", "Broker id must not be empty")])
def test_a_broker_logger_resource_names_this_broker(shared_broker, name, message):
    from support.broker_harness import RawClient
    from kafkawire import messages as m
    request = m.DescribeConfigsRequest(resources=[m.DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=8, resource_name=name, configuration_keys=None)])
    with RawClient(shared_broker.port) as client:
        (result,) = client.request(request, 4).results
    assert (result.error_code, result.error_message) == (42, message.format(node=shared_broker.node))  # INVALID_REQUEST

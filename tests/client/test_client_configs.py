"""The clients' configurations (kafkawire.client.core.producer.config, consumer_config and their shared
properties): Kafka's names and defaults, dotted names with string values, derived defaults, and errors
that name the property.
"""
from __future__ import annotations

import pytest

from kafkawire.client.core.admin.config import AdminConfig
from kafkawire.client.core.consumer.config import ConsumerConfig
from kafkawire.client.core.producer.config import ProducerConfig
from kafkawire.client.errors import ConfigError
from kafkawire.records import Codec


# ---- the producer --------------------------------------------------------------------------------

def test_producer_config_defaults_are_kafkas():
    config = ProducerConfig()
    assert (config.acks, config.batch_size, config.linger_ms, config.buffer_memory, config.max_block_ms) == (
        -1, 16384, 5, 33554432, 60000)
    assert (config.compression_type, config.enable_idempotence, config.max_in_flight_requests_per_connection) == (
        "none", True, 5)
    assert (config.retries, config.delivery_timeout_ms, config.request_timeout_ms, config.max_request_size) == (
        2147483647, 120000, 30000, 1048576)
    assert config.partitioner_ignore_keys is False and config.client_id == "" and config.bootstrap_servers == ()
    # KIP-782
    assert (config.batch_initial_size, config.batch_max_size, config.batch_reallocation_factor) == (4096, 262144, 2.0)


def test_producer_config_from_dotted_properties_with_string_values():
    config = ProducerConfig.from_properties({
        "bootstrap.servers": "a:9092, b:9093", "acks": "1", "batch.size": "32768", "linger.ms": "20",
        "compression.type": "ZSTD", "enable.idempotence": "false", "partitioner.ignore.keys": "true",
        "batch.initial.size": "0", "batch.reallocation.factor": "1.5"})
    assert config.bootstrap_servers == ("a:9092", "b:9093")
    assert config.acks == 1 and config.batch_size == 32768 and config.linger_ms == 20
    assert config.codec == Codec.ZSTD and config.compression_level == 3
    assert config.enable_idempotence is False and config.partitioner_ignore_keys is True
    assert config.batch_initial_size == 32768  # 0 turns expansion off
    assert config.batch_reallocation_factor == 1.5
    assert config.to_properties()["batch.size"] == 32768
    assert ProducerConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize("properties, names", [
    ({"batch.initial.size": 20000}, "batch.initial.size"),
    ({"batch.max.size": 8192}, "batch.max.size"),
    ({"batch.max.size": 2_000_000}, "max.request.size"),
    ({"batch.reallocation.factor": 1}, "batch.reallocation.factor"),
    ({"acks": "2"}, "acks"),
    ({"linger.ms": -1}, "linger.ms"),
    ({"buffer.memory": "lots"}, "buffer.memory"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"compression.zstd.level": 99}, "compression.zstd.level"),
    ({"enable.idempotence": True, "acks": "1"}, "enable.idempotence"),
    ({"enable.idempotence": "yes"}, "enable.idempotence"),
    ({"delivery.timeout.ms": 1000}, "delivery.timeout.ms"),
    ({"bootstrap.servers": "nohost"}, "bootstrap.servers"),
    ({"fetch.max.bytes": 1}, "fetch.max.bytes"),
])
def test_producer_config_errors_name_the_property(properties, names):
    with pytest.raises(ConfigError, match=names.replace(".", r"\.")):
        ProducerConfig.from_properties(properties)


def test_producer_config_derived_defaults_follow_other_settings():
    # idempotence quietly off when acks conflicts and it was not asked for (Kafka 3.x)
    assert ProducerConfig(acks=0).enable_idempotence is False
    assert ProducerConfig(max_in_flight_requests_per_connection=6).enable_idempotence is False
    # delivery.timeout.ms raised to linger + request timeout when not given
    assert ProducerConfig(linger_ms=100_000).delivery_timeout_ms == 130_000
    # KIP-782 defaults stay within batch.size / max.request.size
    assert ProducerConfig(batch_size=1000).batch_initial_size == 1000
    assert ProducerConfig(batch_size=1 << 20).batch_max_size == 1 << 20
    assert ProducerConfig(max_request_size=100_000).batch_max_size == 100_000


def test_transactional_id_implies_idempotence_as_kafka_requires():
    config = ProducerConfig.from_properties({"transactional.id": "orders-1", "transaction.timeout.ms": "15000"})
    assert (config.transactional_id, config.transaction_timeout_ms, config.enable_idempotence) == (
        "orders-1", 15000, True)
    assert ProducerConfig().transactional_id is None and ProducerConfig().transaction_timeout_ms == 60000


@pytest.mark.parametrize("properties, named", [
    ({"enable.idempotence": "false"}, "enable.idempotence"),
    ({"acks": "1"}, "acks"),
    ({"max.in.flight.requests.per.connection": 6}, "max.in.flight"),
    ({"retries": 0}, "retries"),
])
def test_transactional_id_refuses_what_idempotence_refuses(properties, named):
    # Kafka: "Cannot set a transactional.id without also enabling idempotence", whether idempotence
    # was turned off by hand or would quietly be off because another setting conflicts with it
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")) as raised:
        ProducerConfig.from_properties({"transactional.id": "t", **properties})
    assert "transactional.id" in str(raised.value)


@pytest.mark.parametrize("value", ["", "  ", 7])
def test_transactional_id_must_be_a_non_empty_string(value):
    with pytest.raises(ConfigError, match=r"transactional\.id"):
        ProducerConfig(transactional_id=value)


def test_retry_backoff_is_exponential_and_capped():
    config = ProducerConfig(retry_backoff_ms=100, retry_backoff_max_ms=1000)
    assert [config.retry_backoff(n) for n in range(6)] == [0, 100, 200, 400, 800, 1000]


# ---- the consumer --------------------------------------------------------------------------------

def test_consumer_config_defaults_are_kafkas():
    config = ConsumerConfig()
    assert (config.fetch_max_bytes, config.max_partition_fetch_bytes, config.fetch_min_bytes,
            config.fetch_max_wait_ms, config.max_poll_records) == (52428800, 1048576, 1, 500, 500)
    assert (config.buffer_memory, config.auto_offset_reset, config.isolation_level, config.check_crcs) == (
        104857600, "latest", "read_uncommitted", True)
    assert (config.session_timeout_ms, config.heartbeat_interval_ms, config.max_poll_interval_ms,
            config.request_timeout_ms, config.auto_commit_interval_ms) == (45000, 3000, 300000, 30000, 5000)
    assert config.remote_max_partition_fetch_bytes is None
    assert config.remote_partition_max_bytes == 1048576  # falls back to max.partition.fetch.bytes
    assert config.enable_auto_commit is False  # no group.id
    assert ConsumerConfig(group_id="g").enable_auto_commit is True
    assert config.partition_assignment_strategy == ("range",)


def test_consumer_config_from_properties_takes_dotted_names_and_strings():
    config = ConsumerConfig.from_properties({
        "bootstrap.servers": "a:9092, b:9093", "group.id": "g", "fetch.max.bytes": "1048576",
        "buffer.memory": "2097152", "remote.max.partition.fetch.bytes": "4194304", "check.crcs": "false",
        "enable.auto.commit": "false", "auto.offset.reset": "Earliest",
        "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor,range"})
    assert config.bootstrap_servers == ("a:9092", "b:9093")
    assert (config.fetch_max_bytes, config.buffer_memory, config.remote_partition_max_bytes) == (
        1048576, 2097152, 4194304)
    assert (config.check_crcs, config.enable_auto_commit, config.auto_offset_reset) == (False, False, "earliest")
    assert config.partition_assignment_strategy == ("roundrobin", "range")
    again = ConsumerConfig.from_properties(config.to_properties())
    assert again == config


def test_consumer_config_takes_the_sticky_assignors_and_derives_the_rebalance_protocol():
    # Kafka's and librdkafka's names, and Java's class names; protocols offered in the order given
    for value, names, protocol in (
            ("cooperative-sticky", ("cooperative-sticky",), "COOPERATIVE"),
            ("org.apache.kafka.clients.consumer.CooperativeStickyAssignor", ("cooperative-sticky",), "COOPERATIVE"),
            ("sticky", ("sticky",), "EAGER"),
            ("org.apache.kafka.clients.consumer.StickyAssignor,roundrobin", ("sticky", "roundrobin"), "EAGER"),
            # Java's upgrade path to cooperative: while an eager assignor is listed, the protocol is eager
            ("range, cooperative-sticky", ("range", "cooperative-sticky"), "EAGER"),
            ("range", ("range",), "EAGER")):
        config = ConsumerConfig.from_properties({"partition.assignment.strategy": value})
        assert (config.partition_assignment_strategy, config.rebalance_protocol) == (names, protocol)
        assert ConsumerConfig.from_properties(config.to_properties()) == config


def test_consumer_config_takes_read_committed():
    config = ConsumerConfig.from_properties({"isolation.level": "READ_COMMITTED"})
    assert (config.isolation_level, config.isolation_level_code, config.read_committed) == ("read_committed", 1, True)
    assert ConsumerConfig().isolation_level_code == 0 and not ConsumerConfig().read_committed


@pytest.mark.parametrize("properties, named", [
    ({"buffer.memory": 1000, "fetch.max.bytes": 2000}, "buffer.memory"),
    ({"fetch.max.bytes": "lots"}, "fetch.max.bytes"),
    ({"max.poll.records": 0}, "max.poll.records"),
    ({"fetch.max.bytes": 1 << 31}, "fetch.max.bytes"),
    ({"remote.max.partition.fetch.bytes": -1}, "remote.max.partition.fetch.bytes"),
    ({"auto.offset.reset": "smallest"}, "auto.offset.reset"),
    ({"isolation.level": "serializable"}, "isolation.level"),
    ({"heartbeat.interval.ms": 45000}, "heartbeat.interval.ms"),
    ({"enable.auto.commit": True}, "enable.auto.commit"),
    ({"partition.assignment.strategy": "uniform"}, "partition.assignment.strategy"),
    ({"check.crcs": "yes"}, "check.crcs"),
    ({"bootstrap.servers": "nohost"}, "bootstrap.servers"),
    ({"fetch.max.byte": 1}, "fetch.max.byte"),
])
def test_consumer_config_errors_name_the_property(properties, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        ConsumerConfig.from_properties(properties)


@pytest.mark.parametrize("kind", [ProducerConfig, ConsumerConfig, AdminConfig])
def test_every_client_takes_kafkas_connection_settings(kind):
    defaults = kind()
    assert (defaults.request_timeout_ms, defaults.reconnect_backoff_ms, defaults.reconnect_backoff_max_ms,
            defaults.socket_connection_setup_timeout_ms, defaults.socket_connection_setup_timeout_max_ms) \
        == (30000, 50, 1000, 10000, 30000)
    config = kind.from_properties({"reconnect.backoff.ms": "10", "reconnect.backoff.max.ms": "200",
                                   "socket.connection.setup.timeout.ms": "500",
                                   "socket.connection.setup.timeout.max.ms": "2000"})
    assert (config.reconnect_backoff_ms, config.reconnect_backoff_max_ms, config.socket_connection_setup_timeout_ms,
            config.socket_connection_setup_timeout_max_ms) == (10, 200, 500, 2000)
    with pytest.raises(ConfigError, match="socket.connection.setup.timeout.ms"):
        kind.from_properties({"socket.connection.setup.timeout.ms": "soon"})


def test_consumer_and_admin_take_default_api_timeout_ms():
    assert ConsumerConfig().default_api_timeout_ms == 60000
    assert ConsumerConfig.from_properties({"default.api.timeout.ms": "1500"}).default_api_timeout_ms == 1500
    assert AdminConfig.from_properties({"default.api.timeout.ms": "40000"}).default_api_timeout_ms == 40000
    with pytest.raises(ConfigError, match="default.api.timeout.ms"):
        ConsumerConfig.from_properties({"default.api.timeout.ms": "-1"})

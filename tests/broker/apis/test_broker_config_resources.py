"""ListConfigResources (issue 35, KIP-1142): the config resources a broker has, by type, as Kafka's
KafkaApis.handleListConfigResources lists them. Through kafka-python's list_config_resources and at the
wire level (v0, unknown types)."""
from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient

from kafkawire import messages as m
from support.broker_harness import RawClient, own_broker

broker = own_broker()
TOPIC, GROUP, SUBSCRIPTION = "listed-topic", "listed-group", "listed-metrics"
_TOPIC, _BROKER, _BROKER_LOGGER, _CLIENT_METRICS, _GROUP = 2, 4, 8, 16, 32


@pytest.fixture(scope="module")
def resources(broker):
    """A topic, a group with a config of its own and a client metrics subscription."""
    with RawClient(broker.port) as client:
        created = client.request(m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name=TOPIC, num_partitions=1, replication_factor=1)], timeout_ms=5000), 7)
        assert created.topics[0].error_code == 0
        Resource, Config = m.IncrementalAlterConfigsRequest.AlterConfigsResource, \
            m.IncrementalAlterConfigsRequest.AlterableConfig
        altered = client.request(m.IncrementalAlterConfigsRequest(validate_only=False, resources=[
            Resource(resource_type=_GROUP, resource_name=GROUP, configs=[
                Config(name="consumer.session.timeout.ms", config_operation=0, value="50000")]),
            Resource(resource_type=_CLIENT_METRICS, resource_name=SUBSCRIPTION, configs=[
                Config(name="metrics", config_operation=0, value="org.apache.kafka.producer.")])]), 1)
        assert [r.error_code for r in altered.responses] == [0, 0], altered
    return broker


def test_kafka_python_lists_every_type_and_filters(resources):
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{resources.port}", request_timeout_ms=15000)
    try:
        everything = admin.list_config_resources()
        topics_and_groups = admin.list_config_resources(["TOPIC", "GROUP"])
    finally:
        admin.close()
    assert everything == {"group": [GROUP], "client_metrics": [SUBSCRIPTION], "broker_logger": ["0"],
                          "broker": ["0"], "topic": [TOPIC]}
    assert topics_and_groups == {"group": [GROUP], "topic": [TOPIC]}


def test_the_wire_order_v0_and_unknown_types(resources):
    with RawClient(resources.port) as client:
        answer = client.request(m.ListConfigResourcesRequest(resource_types=[_TOPIC, _BROKER, _GROUP, _TOPIC]), 1)
        assert answer.error_code == 0
        assert [(r.resource_type, r.resource_name) for r in answer.config_resources] == [
            (_GROUP, GROUP), (_BROKER, "0"), (_TOPIC, TOPIC)]  # Kafka's order of types, each once
        v0 = client.request(m.ListConfigResourcesRequest(), 0)  # KIP-1000's ListClientMetricsResources
        assert [r.resource_name for r in v0.config_resources] == [SUBSCRIPTION]
        unknown = client.request(m.ListConfigResourcesRequest(resource_types=[_TOPIC, 64]), 1)
        assert (unknown.error_code, unknown.config_resources) == (35, ())  # UNSUPPORTED_VERSION, nothing listed

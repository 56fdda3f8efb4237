"""The calls people make first, with the clients they already have: list the topics (with and without
naming one), describe the cluster, describe a topic's and the broker's configs.

librdkafka 2.16 sends its all-topics Metadata request with 3 bytes after the body, which Kafka serves;
a broker that decoded requests exactly closed those connections (confluent-kafka's ``list_topics()``
failed with "Failed to get metadata")."""
from __future__ import annotations

import asyncio

import pytest

from support.broker_harness import BrokerThread

TOPIC = "first-calls"
PARTITIONS = 3
RETENTION_MS = "3600000"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("first-calls"), node_id=7) as running:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        future = admin.create_topics([NewTopic(TOPIC, PARTITIONS, config={"retention.ms": RETENTION_MS})])[TOPIC]
        future.result(10)
        yield running


# ---- confluent-kafka (librdkafka) ----------------------------------------------------------------------------

def test_confluent_list_topics_without_and_with_a_topic(broker):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient
    settings = {"bootstrap.servers": broker.bootstrap}
    clients = [AdminClient(settings), Producer(settings), Consumer({**settings, "group.id": "first-calls"})]
    try:
        for client in clients:
            everything = client.list_topics(timeout=10)
            assert TOPIC in everything.topics, type(client).__name__
            assert list(everything.brokers) == [7]
            one = client.list_topics(topic=TOPIC, timeout=10)
            assert sorted(one.topics[TOPIC].partitions) == list(range(PARTITIONS))
            assert one.topics[TOPIC].error is None
    finally:
        clients[2].close()


def test_confluent_describe_cluster_and_configs(broker):
    from confluent_kafka.admin import AdminClient, ConfigResource
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cluster = admin.describe_cluster(request_timeout=10).result(15)
    assert cluster.cluster_id == broker.broker.config.cluster_id
    assert [(node.id, node.port) for node in cluster.nodes] == [(7, broker.port)]
    assert cluster.controller.id == 7
    topic = ConfigResource("topic", TOPIC)
    configs = admin.describe_configs([topic])[topic].result(15)
    assert configs["retention.ms"].value == RETENTION_MS and not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default
    node = ConfigResource("broker", "7")
    assert "num.partitions" in admin.describe_configs([node])[node].result(15)


# ---- kafka-python -------------------------------------------------------------------------------------------

def test_kafka_python_first_calls(broker):
    from kafka import KafkaConsumer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert TOPIC in admin.list_topics()
        assert consumer.topics() >= {TOPIC}
        assert consumer.partitions_for_topic(TOPIC) == set(range(PARTITIONS))
        [described] = admin.describe_topics([TOPIC])
        assert described["error_code"] == 0 and len(described["partitions"]) == PARTITIONS
        cluster = admin.describe_cluster()
        assert cluster["cluster_id"] == broker.broker.config.cluster_id
        assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(7, broker.port)]
        # kafka-python's default filter keeps the configs set on the topic: exactly retention.ms
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
        assert list(modified["topic"][TOPIC]) == ["retention.ms"]
        every = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "7")], config_filter="all")
        assert "num.partitions" in every["broker"]["7"]
    finally:
        consumer.close()
        admin.close()


# ---- aiokafka -----------------------------------------------------------------------------------------------

def test_aiokafka_first_calls(broker):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
        await admin.start()
        await consumer.start()
        try:
            assert TOPIC in await admin.list_topics()
            assert TOPIC in await consumer.topics()
            cluster = await admin.describe_cluster()
            assert cluster["cluster_id"] == broker.broker.config.cluster_id
            assert [(b["node_id"], b["port"]) for b in cluster["brokers"]] == [(7, broker.port)]
            [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
            [resource] = response.resources
            entries = {entry[0]: entry[1] for entry in resource[4]}
            assert resource[0] == 0 and entries["retention.ms"] == RETENTION_MS
        finally:
            await consumer.stop()
            await admin.close()
    asyncio.run(run())

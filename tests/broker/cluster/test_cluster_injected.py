"""Errors injected into the in-process cluster reach real clients as Kafka's clients handle them: a
retriable Produce error (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER) is retried and the record lands
once; a fatal one (TOPIC_AUTHORIZATION_FAILED) fails the send with that error; a dropped request is
retried after request.timeout.ms; a shrunk ISR refuses acks=all with NOT_ENOUGH_REPLICAS until it grows."""
from __future__ import annotations

import asyncio

import pytest

from kafkawire.broker import ClusterThread
from kafkawire.error_codes import ErrorCode

TIMEOUT_S = 20


@pytest.fixture(scope="module")
def cluster():
    with ClusterThread(brokers=3) as running:
        yield running


def count_records(cluster, topic: str) -> int:
    broker = cluster.cluster.broker(1)
    return cluster._on_loop(lambda: broker.topics.log(topic, 0).log_end_offset)


def retried_then_fatal(cluster, topic: str, send) -> None:
    """``send(value)`` returns None once acknowledged, or the error code the client reports."""
    cluster.create_topic(topic, 1)
    leader = cluster.leader(topic, 0)
    assert send(b"warm-up") is None  # metadata and producer id in place
    cluster.push_request_errors(leader, "Produce", "NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER")
    assert send(b"retried") is None
    assert cluster.cluster.broker(leader).faults.pending(0) == 0
    assert count_records(cluster, topic) == 2  # landed once
    cluster.fail_next(leader, "Produce", "TOPIC_AUTHORIZATION_FAILED")
    assert send(b"refused") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert count_records(cluster, topic) == 2


def test_confluent_kafka_retries_and_reports(cluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                         "retry.backoff.ms": 20, "linger.ms": 0})
    outcome = []

    def send(value):
        outcome.clear()
        producer.produce("ck-injected", value, on_delivery=lambda error, message: outcome.append(error))
        producer.flush(TIMEOUT_S)
        return None if outcome[0] is None else outcome[0].code()

    retried_then_fatal(cluster, "ck-injected", send)


def test_kafka_python_retries_and_reports(cluster):
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap.split(","), enable_idempotence=True,
                                   retry_backoff_ms=20)

    def send(value):
        try:
            producer.send("kp-injected", value).get(TIMEOUT_S)
        except kafka.errors.KafkaError as error:
            return error.errno
        return None

    try:
        retried_then_fatal(cluster, "kp-injected", send)
    finally:
        producer.close(5)


def test_aiokafka_retries_and_reports(cluster):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.errors import KafkaError

    async def scenario():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=cluster.bootstrap.split(","), enable_idempotence=True,
                                             retry_backoff_ms=20)
        await producer.start()
        loop = asyncio.get_running_loop()

        async def send_async(value):
            try:
                await producer.send_and_wait("aio-injected", value)
            except KafkaError as error:
                return error.errno
            return None

        def send(value):
            return asyncio.run_coroutine_threadsafe(send_async(value), loop).result(TIMEOUT_S)

        try:
            await loop.run_in_executor(None, retried_then_fatal, cluster, "aio-injected", send)
        finally:
            await producer.stop()

    asyncio.run(scenario())


def test_kafkawire_client_retries_and_reports(cluster):
    from kafkawire.client import KafkaError, Producer
    with Producer(bootstrap_servers=cluster.bootstrap, enable_idempotence=True, retry_backoff_ms=20) as producer:
        def send(value):
            try:
                producer.send("kw-injected", value).result(TIMEOUT_S)
            except KafkaError as error:
                return error.code
            return None

        retried_then_fatal(cluster, "kw-injected", send)


def test_dropped_produce_is_retried_after_the_request_timeout(cluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cluster.create_topic("dropped", 1)
    leader = cluster.leader("dropped", 0)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                         "socket.timeout.ms": 1000, "retry.backoff.ms": 20})
    errors = []
    producer.produce("dropped", b"warm-up", on_delivery=lambda error, message: errors.append(error))
    producer.flush(TIMEOUT_S)
    cluster.drop_next(leader, "Produce")
    producer.produce("dropped", b"dropped-once", on_delivery=lambda error, message: errors.append(error))
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == [None, None]
    assert count_records(cluster, "dropped") == 2


def test_acks_all_below_min_insync_replicas(cluster):
    kafka = pytest.importorskip("kafka")
    cluster.create_topic("min-isr", 1, configs={"min.insync.replicas": "2"})
    leader = cluster.leader("min-isr", 0)
    cluster.set_isr("min-isr", 0, [leader])
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap.split(","), acks="all", retries=0)
    try:
        with pytest.raises(kafka.errors.NotEnoughReplicasError):
            producer.send("min-isr", b"refused").get(TIMEOUT_S)
        cluster.set_isr("min-isr", 0)
        assert producer.send("min-isr", b"accepted").get(TIMEOUT_S).offset == 0
    finally:
        producer.close(5)

"""Real clients against the in-process cluster: confluent-kafka (librdkafka), kafka-python, aiokafka and
kafkawire's own client each keep producing (idempotent) and consuming while partition leaders move and a
broker stops and restarts, and no acknowledged record is lost or duplicated; injected errors reach each
client as Kafka's clients handle them (retried, or reported as the documented error)."""
from __future__ import annotations

import asyncio
import time

import pytest

from kafkawire.broker import ClusterThread

PARTITIONS = 3
ROUNDS = 4  # records are sent in rounds; between rounds a fault: leaders move, a broker stops, it restarts
PER_ROUND = 60
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster():
    with ClusterThread(brokers=3, group_initial_rebalance_delay_ms=0) as running:
        yield running


def fault(cluster, topic: str, round_index: int, state: dict) -> None:
    """Between rounds: move every leader, then stop partition 0's leader, then start it again."""
    if round_index == 0:
        for partition in range(PARTITIONS):
            cluster.move_leader(topic, partition)
    elif round_index == 1:
        state["stopped"] = cluster.leader(topic, 0)
        cluster.stop_broker(state["stopped"])
    elif round_index == 2:
        cluster.start_broker(state["stopped"])


def check(acked: list[bytes], consumed: list[bytes]) -> None:
    assert len(acked) == ROUNDS * PER_ROUND
    assert sorted(consumed) == sorted(acked), "lost or duplicated records"


def values(round_index: int) -> list[bytes]:
    return [f"{round_index}-{i}".encode() for i in range(PER_ROUND)]


def test_confluent_kafka_through_leader_moves_and_a_restart(cluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = "ck-faults"
    cluster.create_topic(topic, PARTITIONS)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                         "linger.ms": 5, "retry.backoff.ms": 20, "topic.metadata.refresh.interval.ms": 500})
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ck-faults",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 50,
                                         "topic.metadata.refresh.interval.ms": 500})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(PARTITIONS)])
    acked, consumed, state = [], [], {}

    def delivered(error, message):
        assert error is None, error
        acked.append(message.value())

    try:
        for round_index in range(ROUNDS):
            for value in values(round_index):
                producer.produce(topic, value, on_delivery=delivered)
            producer.poll(0)
            fault(cluster, topic, round_index, state)  # while the round's records are in flight
            assert producer.flush(TIMEOUT_S) == 0
            deadline = time.monotonic() + TIMEOUT_S
            while len(consumed) < len(acked) and time.monotonic() < deadline:
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    consumed.append(message.value())
    finally:
        consumer.close()
    check(acked, consumed)


def test_kafka_python_through_leader_moves_and_a_restart(cluster):
    kafka = pytest.importorskip("kafka")
    topic = "kp-faults"
    cluster.create_topic(topic, PARTITIONS)
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap.split(","), enable_idempotence=True,
                                   linger_ms=5, retry_backoff_ms=20, request_timeout_ms=5000)
    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap.split(","), enable_auto_commit=False,
                                   auto_offset_reset="earliest", fetch_max_wait_ms=50, retry_backoff_ms=20,
                                   request_timeout_ms=5000)
    consumer.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    acked, consumed, state = [], [], {}
    try:
        for round_index in range(ROUNDS):
            futures = [producer.send(topic, value) for value in values(round_index)]
            fault(cluster, topic, round_index, state)
            producer.flush(TIMEOUT_S)
            acked += [future.get(TIMEOUT_S) and value for future, value in zip(futures, values(round_index))]
            deadline = time.monotonic() + TIMEOUT_S
            while len(consumed) < len(acked) and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=100).values():
                    consumed += [record.value for record in records]
    finally:
        producer.close(5)
        consumer.close()
    check(acked, consumed)


def test_aiokafka_through_leader_moves_and_a_restart(cluster):
    aiokafka = pytest.importorskip("aiokafka")
    topic = "aio-faults"
    cluster.create_topic(topic, PARTITIONS)

    async def scenario():
        bootstrap = cluster.bootstrap.split(",")
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5,
                                             retry_backoff_ms=20, request_timeout_ms=5000)
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                             auto_offset_reset="earliest", fetch_max_wait_ms=50,
                                             retry_backoff_ms=20, request_timeout_ms=5000)
        await producer.start()
        await consumer.start()
        consumer.assign([aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
        await consumer.seek_to_beginning()
        acked, consumed, state = [], [], {}
        loop = asyncio.get_running_loop()
        try:
            for round_index in range(ROUNDS):
                sends = [await producer.send(topic, value) for value in values(round_index)]
                await loop.run_in_executor(None, fault, cluster, topic, round_index, state)
                for send, value in zip(sends, values(round_index)):
                    await asyncio.wait_for(send, TIMEOUT_S)
                    acked.append(value)
                deadline = time.monotonic() + TIMEOUT_S
                while len(consumed) < len(acked) and time.monotonic() < deadline:
                    for records in (await consumer.getmany(timeout_ms=100)).values():
                        consumed += [record.value for record in records]
        finally:
            await producer.stop()
            await consumer.stop()
        return acked, consumed

    check(*asyncio.run(asyncio.wait_for(scenario(), 4 * TIMEOUT_S)))


def test_kafkawire_client_through_leader_moves_and_a_restart(cluster):
    from kafkawire.client import AsyncConsumer, AsyncProducer, TopicPartition
    topic = "kw-faults"
    cluster.create_topic(topic, PARTITIONS)

    async def scenario():
        acked, consumed, state = [], [], {}
        loop = asyncio.get_running_loop()
        async with AsyncProducer(bootstrap_servers=cluster.bootstrap, enable_idempotence=True, linger_ms=5,
                                 retry_backoff_ms=20, request_timeout_ms=5000) as producer, \
                AsyncConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                              auto_offset_reset="earliest", fetch_max_wait_ms=50, retry_backoff_ms=20,
                              request_timeout_ms=5000) as consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            for round_index in range(ROUNDS):
                sends = [await producer.send(topic, value) for value in values(round_index)]
                await loop.run_in_executor(None, fault, cluster, topic, round_index, state)
                for send, value in zip(sends, values(round_index)):
                    await asyncio.wait_for(send, TIMEOUT_S)
                    acked.append(value)
                deadline = time.monotonic() + TIMEOUT_S
                while len(consumed) < len(acked) and time.monotonic() < deadline:
                    for record in await consumer.poll(timeout_ms=100):
                        consumed.append(record.value)
        return acked, consumed

    check(*asyncio.run(asyncio.wait_for(scenario(), 4 * TIMEOUT_S)))


def test_confluent_group_follows_its_coordinator_to_another_broker(cluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic, group = "ck-group", "ck-group-members"
    cluster.create_topic(topic, 2)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                         "fetch.wait.max.ms": 50, "topic.metadata.refresh.interval.ms": 500})
    consumed: list[bytes] = []
    coordinator = None

    def produce_and_consume(prefix: str, total: int) -> None:
        for i in range(20):
            producer.produce(topic, f"{prefix}-{i}".encode())
        assert producer.flush(TIMEOUT_S) == 0
        deadline = time.monotonic() + TIMEOUT_S
        while len(consumed) < total and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                consumed.append(message.value())
        consumer.commit(asynchronous=False)  # at the coordinator of the moment

    try:
        consumer.subscribe([topic])
        produce_and_consume("before", 20)
        coordinator = cluster.coordinator(group)
        cluster.stop_broker(coordinator)
        assert cluster.coordinator(group) != coordinator
        produce_and_consume("after", 40)
        committed = consumer.committed([confluent_kafka.TopicPartition(topic, p) for p in range(2)], TIMEOUT_S)
    finally:
        consumer.close()
        if coordinator is not None:
            cluster.start_broker(coordinator)
    assert sorted(consumed) == sorted([f"{p}-{i}".encode() for p in ("before", "after") for i in range(20)])
    assert sum(tp.offset for tp in committed) == 40


def test_confluent_transactions_across_brokers(cluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = "ck-transactions"
    cluster.create_topic(topic, 3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "ck-txn"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(9):
        producer.produce(topic, f"committed-{i}".encode(), partition=i % 3)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"aborted-{i}".encode(), partition=i % 3)
    producer.abort_transaction(TIMEOUT_S)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ck-txn-reader",
                                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(3)])
    read = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(read) < 9 and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                read.append(message.value())
        extra = consumer.poll(0.5)
    finally:
        consumer.close()
    assert sorted(read) == sorted(f"committed-{i}".encode() for i in range(9))
    assert extra is None or extra.error() is not None

"""Real transactional clients against the broker: confluent-kafka (librdkafka), kafka-python and
aiokafka producers commit and abort; read_committed consumers see exactly the committed records,
read_uncommitted ones see all of them; a second instance fences the first; consume-transform-produce
commits its input offsets with its output; a transaction left open past its timeout is aborted."""
from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from support.broker_harness import own_broker

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

_names = itertools.count()
QUIET = {"log_level": 0}


broker = own_broker(transaction_abort_interval_ms=200)


@pytest.fixture
def topic(broker):
    name = f"txn-clients-{next(_names)}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(10)
    return name


def consume_all(bootstrap, topic, isolation_level, group=None):
    """Every value in the topic's two partitions as a consumer with ``isolation_level`` sees them."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group or f"reader-{time.monotonic_ns()}",
        "isolation.level": isolation_level, "auto.offset.reset": "earliest", "enable.partition.eof": True,
        "enable.auto.commit": False, **QUIET})
    consumer.subscribe([topic])
    values, at_end, deadline = [], set(), time.monotonic() + 20
    try:
        while len(at_end) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            values.append(message.value().decode())
    finally:
        consumer.close()
    assert len(at_end) == 2, "the consumer did not reach the end of both partitions"
    return sorted(values)


def check_visibility(bootstrap, topic, committed, aborted):
    assert consume_all(bootstrap, topic, "read_committed") == sorted(committed)
    assert consume_all(bootstrap, topic, "read_uncommitted") == sorted(committed + aborted)


def test_confluent_kafka_commits_and_aborts(broker, topic):
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic, **QUIET})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, value=f"committed-{i}", partition=i % 2)
    producer.commit_transaction(15)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"aborted-{i}", partition=i % 2)
    producer.flush(10)
    producer.abort_transaction(15)
    check_visibility(broker.bootstrap, topic, [f"committed-{i}" for i in range(6)],
                     [f"aborted-{i}" for i in range(4)])


def test_kafka_python_commits_and_aborts(broker, topic):
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=topic)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, value=f"committed-{i}".encode(), partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, value=f"aborted-{i}".encode(), partition=i % 2)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    committed, aborted = [f"committed-{i}" for i in range(4)], [f"aborted-{i}" for i in range(3)]
    check_visibility(broker.bootstrap, topic, committed, aborted)
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                                   auto_offset_reset="earliest", consumer_timeout_ms=2000)
    try:
        assert sorted(record.value.decode() for record in consumer) == committed
    finally:
        consumer.close()


def test_aiokafka_commits_and_aborts(broker, topic):
    aiokafka = pytest.importorskip("aiokafka")

    async def run():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=topic)
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(4):
                    await producer.send_and_wait(topic, f"committed-{i}".encode(), partition=i % 2)
            await producer.begin_transaction()
            for i in range(2):
                await producer.send_and_wait(topic, f"aborted-{i}".encode(), partition=i % 2)
            await producer.abort_transaction()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap,
                                             isolation_level="read_committed", auto_offset_reset="earliest")
        await consumer.start()
        values = []
        try:
            while batches := await consumer.getmany(timeout_ms=1000):
                values += [record.value.decode() for records in batches.values() for record in records]
        finally:
            await consumer.stop()
        return sorted(values)

    committed = [f"committed-{i}" for i in range(4)]
    assert asyncio.run(run()) == committed
    check_visibility(broker.bootstrap, topic, committed, ["aborted-0", "aborted-1"])


def test_a_second_instance_fences_the_first(broker, topic):
    config = {"bootstrap.servers": broker.bootstrap, "transactional.id": topic, **QUIET}
    zombie = confluent_kafka.Producer(config)
    zombie.init_transactions(15)
    zombie.begin_transaction()
    zombie.produce(topic, value="zombie", partition=0)
    zombie.flush(10)
    successor = confluent_kafka.Producer(config)
    successor.init_transactions(15)  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce(topic, value="successor", partition=0)
    successor.commit_transaction(15)
    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic, value="late", partition=1)
        zombie.commit_transaction(15)
    assert raised.value.args[0].fatal() or raised.value.args[0].code() in (
        KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    check_visibility(broker.bootstrap, topic, ["successor"], ["zombie"])


def test_consume_transform_produce_commits_offsets_with_the_output(broker, topic):
    source = f"{topic}-in"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(source, 1, 1)])[source].result(10)
    plain = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(5):
        plain.produce(source, value=f"in-{i}", partition=0)
    plain.flush(10)
    group = f"{topic}-app"
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **QUIET})
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": group, **QUIET})
    producer.init_transactions(15)
    consumer.subscribe([source])
    try:
        seen: list = []
        deadline = time.monotonic() + 20
        while len(seen) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                seen.append(message)
        producer.begin_transaction()
        for message in seen:
            producer.produce(topic, value=message.value().decode().replace("in", "out"), partition=0)
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 15)
        producer.commit_transaction(15)
        committed = consumer.committed([confluent_kafka.TopicPartition(source, 0)], 10)
        assert committed[0].offset == 5
    finally:
        consumer.close()
    assert consume_all(broker.bootstrap, topic, "read_committed") == [f"out-{i}" for i in range(5)]


def test_a_transaction_left_open_past_its_timeout_is_aborted(broker, topic):
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic,
                                         "transaction.timeout.ms": 1000, **QUIET})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, value="forgotten", partition=1)
    producer.flush(10)
    coordinator = broker.broker.handlers.transactions
    deadline = time.monotonic() + 10
    while coordinator.describe(topic).state.value != "CompleteAbort":
        assert time.monotonic() < deadline, "the transaction was not aborted"
        time.sleep(0.05)
    partition = broker.broker.topics.log(topic, 1)
    assert partition.last_stable_offset == partition.high_watermark == 2  # the record and the abort marker
    assert consume_all(broker.bootstrap, topic, "read_committed") == []
    assert consume_all(broker.bootstrap, topic, "read_uncommitted") == ["forgotten"]
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)

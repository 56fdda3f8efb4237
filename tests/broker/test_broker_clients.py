"""Real Kafka clients against the reference broker: kafka-python, aiokafka and confluent-kafka
(librdkafka) each produce 10,000 records to a 4-partition topic and consume them all back in order
per partition; then two consumers in one group split the partitions and commit, and a restarted
consumer resumes at the committed offsets."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import defaultdict

import pytest

from support.broker_harness import BrokerThread, own_broker

RECORDS = 10_000
PARTITIONS = 4
TIMEOUT = 60


broker = own_broker("function", num_partitions=PARTITIONS)  # a broker per test: tests reuse topic names


def _values(prefix: str, count: int, start: int = 0) -> list[tuple[bytes, bytes]]:
    return [(f"key-{i % 97}".encode(), f"{prefix}-{i}".encode()) for i in range(start, start + count)]


def _check_in_order(produced: list[tuple[bytes, bytes]], consumed: dict[int, list[tuple[int, bytes, bytes]]]):
    """Every produced record came back once, and each partition's records in produced order."""
    got = [(key, value) for records in consumed.values() for _, key, value in records]
    assert sorted(got) == sorted(produced)
    position = {value: i for i, (_, value) in enumerate(produced)}
    for partition, records in consumed.items():
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), partition
        order = [position[value] for _, _, value in records]
        assert order == sorted(order), f"partition {partition} is out of order"
    assert len(consumed) == PARTITIONS


# ---- kafka-python -------------------------------------------------------------------------------------------

class KafkaPythonKit:
    name = "kafka-python"

    def produce(self, bootstrap, topic, records):
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
        for key, value in records:
            producer.send(topic, key=key, value=value)
        producer.flush(TIMEOUT)
        producer.close()

    def consumer(self, bootstrap, topic, group=None):
        from kafka import KafkaConsumer
        return KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=500, session_timeout_ms=10_000,
                             heartbeat_interval_ms=500, max_poll_interval_ms=60_000)

    def poll(self, consumer):
        batches = consumer.poll(timeout_ms=300)
        return [(r.partition, r.offset, r.key, r.value) for records in batches.values() for r in records]

    def assignment(self, consumer):
        return {tp.partition for tp in consumer.assignment()}

    def commit(self, consumer):
        consumer.commit()

    def close(self, consumer):
        consumer.close()


# ---- confluent-kafka ------------------------------------------------------------------------------------------

class ConfluentKit:
    name = "confluent-kafka"

    def produce(self, bootstrap, topic, records):
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                             "enable.idempotence": True})
        for key, value in records:
            while True:
                try:
                    producer.produce(topic, key=key, value=value)
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(TIMEOUT) == 0

    def consumer(self, bootstrap, topic, group=None):
        from confluent_kafka import Consumer
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"solo-{time.monotonic_ns()}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
        consumer.subscribe([topic])
        return consumer

    def poll(self, consumer):
        out = []
        for message in consumer.consume(num_messages=1000, timeout=0.3):
            if message.error():
                continue
            out.append((message.partition(), message.offset(), message.key(), message.value()))
        return out

    def assignment(self, consumer):
        return {tp.partition for tp in consumer.assignment()}

    def commit(self, consumer):
        from confluent_kafka import KafkaError, KafkaException
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as error:
            if error.args[0].code() != KafkaError._NO_OFFSET:  # nothing new since the last commit is fine
                raise

    def close(self, consumer):
        consumer.close()


# ---- aiokafka (its own event loop, in a thread per consumer) -----------------------------------------------------

class AiokafkaKit:
    name = "aiokafka"

    def __init__(self):
        self.loops = {}

    def _run(self, consumer, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loops[id(consumer)]).result(TIMEOUT)

    def produce(self, bootstrap, topic, records):
        from aiokafka import AIOKafkaProducer

        async def run():
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
            await producer.start()
            try:
                for key, value in records:
                    await producer.send(topic, key=key, value=value)
                await producer.flush()
            finally:
                await producer.stop()
        asyncio.run(run())

    def consumer(self, bootstrap, topic, group=None):
        from aiokafka import AIOKafkaConsumer
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()

        async def start():
            consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                        auto_offset_reset="earliest", enable_auto_commit=False,
                                        session_timeout_ms=10_000, heartbeat_interval_ms=500)
            await consumer.start()
            return consumer
        consumer = asyncio.run_coroutine_threadsafe(start(), loop).result(TIMEOUT)
        self.loops[id(consumer)] = loop
        return consumer

    def poll(self, consumer):
        batches = self._run(consumer, consumer.getmany(timeout_ms=300))
        return [(r.partition, r.offset, r.key, r.value) for records in batches.values() for r in records]

    def assignment(self, consumer):
        return {tp.partition for tp in consumer.assignment()}

    def commit(self, consumer):
        self._run(consumer, consumer.commit())

    def close(self, consumer):
        loop = self.loops.pop(id(consumer))
        asyncio.run_coroutine_threadsafe(consumer.stop(), loop).result(TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)


KITS = [KafkaPythonKit, AiokafkaKit, ConfluentKit]


def _consume(kit, consumer, wanted: int, consumed=None) -> dict:
    consumed = consumed if consumed is not None else defaultdict(list)
    deadline = time.monotonic() + TIMEOUT
    while sum(len(v) for v in consumed.values()) < wanted:
        assert time.monotonic() < deadline, f"{kit.name}: consumed {sum(len(v) for v in consumed.values())} of {wanted}"
        for partition, offset, key, value in kit.poll(consumer):
            consumed[partition].append((offset, key, value))
    return consumed


@pytest.mark.parametrize("kit_class", KITS, ids=[k.name for k in KITS])
def test_produce_and_consume_everything_in_order(broker, kit_class):
    kit = kit_class()
    produced = _values(kit.name, RECORDS)
    kit.produce(broker.bootstrap, "orders", produced)
    consumer = kit.consumer(broker.bootstrap, "orders", group=f"{kit.name}-solo")
    try:
        consumed = _consume(kit, consumer, RECORDS)
    finally:
        kit.close(consumer)
    _check_in_order(produced, consumed)
    logs = [log for topic, _, log in broker.broker.topics.all_logs() if topic.name == "orders"]
    assert sum(log.log_end_offset for log in logs) == RECORDS


@pytest.mark.parametrize("kit_class", KITS, ids=[k.name for k in KITS])
def test_a_group_of_two_splits_commits_and_resumes(broker, kit_class):
    kit = kit_class()
    group = f"{kit.name}-group"
    first = _values(kit.name, 2_000)
    kit.produce(broker.bootstrap, "events", first)

    members = [kit.consumer(broker.bootstrap, "events", group) for _ in range(2)]
    consumed = defaultdict(set)
    owned = [set(), set()]
    # Both members are polled in turn from this thread (each client keeps its group membership alive
    # in the background), until everything is consumed and the two own disjoint halves of the topic.
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for index, member in enumerate(members):
            records = kit.poll(member)
            for partition, offset, key, value in records:
                consumed[partition].add((offset, key, value))  # a partition handed over may repeat
            if records:
                kit.commit(member)
            owned[index] = kit.assignment(member)
        split = all(owned) and not (owned[0] & owned[1]) and owned[0] | owned[1] == set(range(PARTITIONS))
        if split and sum(len(v) for v in consumed.values()) >= len(first):
            break
    assert all(owned), f"{kit.name}: a member got no partitions: {owned}"
    _check_in_order(first, {p: sorted(records) for p, records in consumed.items()})
    for member in members:
        kit.commit(member)
        kit.close(member)

    committed = broker.broker.groups.committed(group)
    assert sum(offset for (topic, _), (offset, *_rest) in committed.items() if topic == "events") == len(first)

    # a restarted consumer resumes at the committed offsets: it sees only what came after
    later = _values(kit.name + "-later", 400, start=10_000)
    kit.produce(broker.bootstrap, "events", later)
    resumed = kit.consumer(broker.bootstrap, "events", group)
    try:
        again = _consume(kit, resumed, len(later))
    finally:
        kit.close(resumed)
    assert sorted(v for records in again.values() for _, _, v in records) == sorted(v for _, v in later)


def test_committed_offsets_survive_a_broker_restart(tmp_path):
    from kafka import KafkaConsumer, TopicPartition
    kit = KafkaPythonKit()
    with BrokerThread(data_dir=tmp_path / "data", num_partitions=2) as broker:
        kit.produce(broker.bootstrap, "keep", _values("keep", 100))
        consumer = kit.consumer(broker.bootstrap, "keep", "keepers")
        _consume(kit, consumer, 100)
        consumer.commit()
        consumer.close()
        before = broker.broker.groups.committed("keepers")
    with BrokerThread(data_dir=tmp_path / "data", num_partitions=2) as broker:
        assert broker.broker.groups.committed("keepers") == before
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="keepers", enable_auto_commit=False)
        committed = {p: consumer.committed(TopicPartition("keep", p)) for p in range(2)}
        consumer.close()
        assert sum(committed.values()) == 100
        logs = [log for topic, _, log in broker.broker.topics.all_logs() if topic.name == "keep"]
        assert sum(log.log_end_offset for log in logs) == 100


logging.getLogger("kafka").setLevel(logging.ERROR)
logging.getLogger("aiokafka").setLevel(logging.ERROR)

"""Group membership survives a broker killed with -9 (issue 17): Kafka keeps each generation's members
and assignments with the committed offsets, so a member that keeps heartbeating through the restart
keeps its partitions, its next commit is accepted, and nothing it consumed is delivered again.

A real client (confluent-kafka, librdkafka) consumes from a ``kafkawire broker`` process that is
killed and restarted on the same port and data directory between two of its polls."""
from __future__ import annotations

import socket
import time


from support.broker_process import BrokerProcess

TOPIC = "restart"
PARTITIONS = 4


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _produce(bootstrap: str, start: int, count: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(TOPIC, key=str(i).encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def _poll_until(consumer, count: int, timeout: float = 30) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            got.append(message.value())
    return got


def test_a_member_keeps_its_partitions_and_commits_across_a_kill_and_restart(tmp_path):
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    port = _free_port()
    broker = BrokerProcess(tmp_path, "--port", str(port), "--rebalance-delay-ms", "0")
    bootstrap = f"127.0.0.1:{port}"
    revoked: list = []
    consumer = None
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result(15)
        _produce(bootstrap, 0, 100)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "survivors", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "session.timeout.ms": 10_000,
                             "heartbeat.interval.ms": 300, "reconnect.backoff.max.ms": 200})
        consumer.subscribe([TOPIC], on_revoke=lambda c, partitions: revoked.append(list(partitions)))
        first = _poll_until(consumer, 100)
        assert sorted(first) == sorted(f"v{i}".encode() for i in range(100))
        assignment = sorted(p.partition for p in consumer.assignment())
        assert assignment == list(range(PARTITIONS))

        broker.kill()  # kill -9 with the consumed records not yet committed
        broker = BrokerProcess(tmp_path, "--port", str(port), "--rebalance-delay-ms", "0")

        for attempt in range(50):  # the commit goes to the restarted coordinator once it is found
            try:
                consumer.commit(asynchronous=False)
                break
            except KafkaException as error:
                assert error.args[0].retriable() or "COORDINATOR" in error.args[0].name(), error
                time.sleep(0.2)
        _produce(bootstrap, 100, 40)
        second = _poll_until(consumer, 40)
        assert sorted(second) == sorted(f"v{i}".encode() for i in range(100, 140))  # nothing delivered again
        assert _poll_until(consumer, 1, timeout=1) == []
        assert sorted(p.partition for p in consumer.assignment()) == assignment
        assert revoked == [], "the group rebalanced: the member was forgotten"
    finally:
        if consumer is not None:
            consumer.close()
        broker.kill()

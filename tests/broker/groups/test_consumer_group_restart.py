"""KIP-848 groups survive a broker killed with -9: confluent-kafka consumers with
``group.protocol=consumer`` keep heartbeating through the restart with their member ids and epochs,
keep their partitions (no rebalance: ConsumerGroupDescribe shows the same group epoch and member
epochs), and read every record once beyond what they committed."""
from __future__ import annotations

import time

import pytest

from support.broker_harness import RawClient
from kafkawire import messages as m

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "kip848-restart"
PARTITIONS = 4
GROUP = "kip848-survivors"


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def _poll_all(consumers, count: int, timeout: float = 30) -> dict[int, list[bytes]]:
    """Poll every consumer in turn until ``count`` records came in all together."""
    got: dict[int, list[bytes]] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout
    while sum(map(len, got.values())) < count and time.monotonic() < deadline:
        for i, consumer in enumerate(consumers):
            message = consumer.poll(0.05)
            if message is not None:
                assert message.error() is None, message.error()
                got[i].append(message.value())
    return got


def _described(port: int):
    with RawClient(port) as client:
        response = client.request(m.ConsumerGroupDescribeRequest(group_ids=[GROUP]), 0)
    (group,) = response.groups
    assert group.error_code == 0, group
    return group.group_state, group.group_epoch, {member.member_id: member.member_epoch for member in group.members}


def test_consumers_keep_their_epochs_and_partitions_across_a_kill_and_restart(tmp_path, processes):
    broker = processes(tmp_path, "--override", "group.consumer.heartbeat.interval.ms=300")
    bootstrap = f"127.0.0.1:{broker.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result(15)
    _produce(bootstrap, 0, 100)
    revoked: list = []
    consumers = [confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer", "log_level": 0,
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "reconnect.backoff.max.ms": 200})
        for _ in range(2)]
    try:
        for consumer in consumers:
            consumer.subscribe([TOPIC], on_revoke=lambda c, partitions: revoked.append(list(partitions)))
        first = _poll_all(consumers, 100)
        assert sorted(v for got in first.values() for v in got) == sorted(f"v{i}".encode() for i in range(100))
        deadline = time.monotonic() + 20
        while (not all(c.assignment() for c in consumers) or sum(len(c.assignment()) for c in consumers) != 4
               or _described(broker.port)[0] != "Stable"):  # every member at the group's epoch
            assert time.monotonic() < deadline, "the group did not settle"
            _poll_all(consumers, 0, timeout=0.1)
        assignments = [sorted(p.partition for p in c.assignment()) for c in consumers]
        before = _described(broker.port)
        revoked.clear()

        port = broker.port
        broker.kill()  # nothing committed yet: the offsets to come are the consumers' positions
        broker = processes(tmp_path, "--port", str(port), "--override", "group.consumer.heartbeat.interval.ms=300")

        for consumer in consumers:
            for attempt in range(50):  # the commit goes to the restarted coordinator once it is found
                try:
                    consumer.commit(asynchronous=False)
                    break
                except confluent_kafka.KafkaException as error:
                    assert error.args[0].retriable() or "COORDINATOR" in error.args[0].name(), error
                    time.sleep(0.2)
            else:
                pytest.fail("the commit never went through")
        _produce(bootstrap, 100, 40)
        second = _poll_all(consumers, 40)
        assert sorted(v for got in second.values() for v in got) == sorted(f"v{i}".encode() for i in range(100, 140))
        assert _poll_all(consumers, 1, timeout=1) == {0: [], 1: []}  # nothing delivered again
        assert [sorted(p.partition for p in c.assignment()) for c in consumers] == assignments
        assert revoked == []
        assert _described(broker.port) == before  # the same group epoch, members and member epochs
    finally:
        for consumer in consumers:
            consumer.close()

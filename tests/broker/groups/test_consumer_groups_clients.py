"""KIP-848 consumer groups with a real client: confluent-kafka (librdkafka 2.12+) consumers with
``group.protocol=consumer`` join and leave while consuming, every record is read once; a static member
that restarts gets its partitions back without a new group epoch; a classic consumer cannot join a
consumer group, and offsets committed under the new protocol are the group's offsets."""
from __future__ import annotations

import itertools
import threading
import time

import pytest

from support.broker_harness import own_broker

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

_names = itertools.count()
PARTITIONS = 6


broker = own_broker(group_consumer_heartbeat_interval_ms=300, group_consumer_session_timeout_ms=6000)


@pytest.fixture
def topic(broker):
    name = f"kip848-{next(_names)}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(10)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(600):
        producer.produce(name, value=str(i), partition=i % PARTITIONS)
    producer.flush(10)
    return name


def consumer(broker, group, **extra):
    return confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                     "log_level": 0, **extra})


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_members_joining_and_leaving_read_every_record_once(broker, topic):
    group = f"{topic}-g"
    seen: dict[str, list[str]] = {}
    lock = threading.Lock()

    # Each member leaves, and the next joins, after the group has read a share of the records (not after
    # fixed times), so the group changes while records remain however loaded the machine is.
    def run(name, leave_after):
        c = consumer(broker, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 200})
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(seen) < leave_after and time.monotonic() < deadline:
            message = c.poll(0.1)
            if message is not None and not message.error():
                with lock:
                    seen.setdefault(message.value().decode(), []).append(name)
                time.sleep(0.005)
        c.close()  # commits and leaves

    threads = [threading.Thread(target=run, args=(f"c{i}", leave_after))
               for i, leave_after in enumerate((150, 350, 600))]
    for thread, join_after in zip(threads, (0, 50, 200)):
        wait_for(lambda: len(seen) >= join_after, timeout=60)
        thread.start()
    for thread in threads:
        thread.join()
    duplicates = {value: readers for value, readers in seen.items() if len(readers) > 1}
    assert len(seen) == 600 and not duplicates
    assert len({reader for readers in seen.values() for reader in readers}) == 3  # all took part
    described = broker.broker.groups.consumer.groups[group]
    assert described.state == "Empty"


def test_a_static_member_restarting_keeps_its_partitions(broker, topic):
    group = f"{topic}-static"
    first = consumer(broker, group, **{"group.instance.id": "host-a"})
    other = consumer(broker, group, **{"group.instance.id": "host-b"})
    for c in (first, other):
        c.subscribe([topic])
    coordinator_group = lambda: broker.broker.groups.consumer.groups[group]  # noqa: E731

    def settled():
        for c in (first, other):
            c.poll(0.05)
        return coordinator_group().state == "Stable" and len(coordinator_group().members) == 2

    wait_for(settled)
    before = {tp.partition for tp in first.assignment()}
    epoch = coordinator_group().group_epoch
    first.close()  # a static member leaves with epoch -2: its partitions wait for it
    restarted = consumer(broker, group, **{"group.instance.id": "host-a"})
    restarted.subscribe([topic])
    wait_for(lambda: (restarted.poll(0.05), {tp.partition for tp in restarted.assignment()})[1] == before)
    assert coordinator_group().group_epoch == epoch  # no rebalance
    restarted.close()
    other.close()


def test_a_classic_consumer_cannot_join_a_consumer_group(broker, topic):
    group = f"{topic}-mixed"
    modern = consumer(broker, group)
    modern.subscribe([topic])
    wait_for(lambda: modern.poll(0.05) is not None)
    classic = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                        "auto.offset.reset": "earliest", "log_level": 0})
    classic.subscribe([topic])
    errors = []
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        message = classic.poll(0.1)
        if message is not None and message.error():
            errors.append(message.error())
        modern.poll(0)
    assert errors and errors[0].code() == confluent_kafka.KafkaError.INCONSISTENT_GROUP_PROTOCOL
    classic.close()
    modern.close()


def test_offsets_committed_under_the_consumer_protocol(broker, topic):
    group = f"{topic}-offsets"
    c = consumer(broker, group, **{"enable.auto.commit": False})
    c.subscribe([topic])
    read = 0
    deadline = time.monotonic() + 20
    while read < 600 and time.monotonic() < deadline:
        message = c.poll(0.1)
        if message is not None and not message.error():
            read += 1
    c.commit(asynchronous=False)
    committed = c.committed([confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    assert [tp.offset for tp in committed] == [100] * PARTITIONS
    c.close()
    assert broker.broker.groups.committed(group)[(topic, 0)][0] == 100

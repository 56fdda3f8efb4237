"""Share groups against confluent-kafka's ``ShareConsumer`` (librdkafka's KIP-932 consumer): records
shared between the members of one group, explicit acknowledgements (RELEASE redelivers, REJECT
archives), the delivery-count limit and the acquisition lock expiring on a consumer that went quiet
or was killed (kill -9 of its process).

One broker for the module, with a delivery limit of 3 and share partitions starting at the log start
(each test its own topic and group), and one with a short acquisition lock
(``group.share.record.lock.duration.ms``) for the lock's own test.
"""
from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time

import pytest

from support.broker_harness import BrokerThread

LOCK_MS = 2000
DELIVERY_LIMIT = 3
_names = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("share") / "data", share_auto_offset_reset="earliest",
                      group_share_delivery_count_limit=DELIVERY_LIMIT) as running:
        yield running


@pytest.fixture
def short_lock_broker(tmp_path):
    with BrokerThread(data_dir=tmp_path / "data", share_auto_offset_reset="earliest",
                      group_share_record_lock_duration_ms=LOCK_MS) as running:
        yield running


def _topic(broker, count: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"share-{next(_names)}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1)])[name].result(15)
    _produce(broker, name, 0, count)
    return name


def _produce(broker, topic: str, start: int, end: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(start, end):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(15) == 0


def _consumer(broker, group: str, topic: str, **settings):
    from confluent_kafka import ShareConsumer
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **settings})
    consumer.subscribe([topic])
    return consumer


def _poll(consumer, timeout: float = 1.0) -> list:
    messages = list(consumer.poll(timeout))
    for message in messages:
        assert message.error() is None, message.error()
    return messages


def _poll_until(consumer, wanted: int, deadline_s: float = 30) -> list:
    got: list = []
    deadline = time.monotonic() + deadline_s
    while len(got) < wanted and time.monotonic() < deadline:
        got += _poll(consumer)
    return got


def test_two_members_of_one_group_together_get_every_record_once(broker):
    topic = _topic(broker, 100)
    first = _consumer(broker, "pair", topic)
    second = _consumer(broker, "pair", topic)
    try:
        mine = _poll_until(first, 100)  # acquired by the first member (its last poll's not yet accepted)
        _produce(broker, topic, 100, 200)
        theirs = _poll_until(second, 100)  # the same partition: what the first does not hold
        assert sorted(m.offset() for m in mine) == list(range(100))
        assert sorted(m.offset() for m in theirs) == list(range(100, 200))
        assert {m.delivery_count() for m in mine + theirs} == {1}
        for consumer in (first, second):  # implicit mode: the last poll's records are accepted now
            assert all(error is None for error in consumer.commit_sync(15).values())
    finally:
        first.close()
        second.close()
    late = _consumer(broker, "pair", topic)
    try:
        assert _poll_until(late, 1, deadline_s=2) == []  # every record accepted once
    finally:
        late.close()


def test_release_redelivers_and_reject_archives(broker):
    from confluent_kafka import AcknowledgeType
    topic = _topic(broker, 3)
    consumer = _consumer(broker, "explicit", topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        messages = _poll_until(consumer, 3)
        assert [(m.offset(), m.delivery_count()) for m in messages] == [(0, 1), (1, 1), (2, 1)]
        consumer.acknowledge(messages[0], AcknowledgeType.ACCEPT)
        consumer.acknowledge(messages[1], AcknowledgeType.RELEASE)
        consumer.acknowledge(messages[2], AcknowledgeType.REJECT)
        assert all(error is None for error in consumer.commit_sync(15).values())
        again = _poll_until(consumer, 1)
        assert [(m.offset(), m.value(), m.delivery_count()) for m in again] == [(1, b"v1", 2)]
        consumer.acknowledge(again[0], AcknowledgeType.ACCEPT)
        consumer.commit_sync(15)
        assert _poll_until(consumer, 1, deadline_s=2) == []  # accepted and rejected records stay done
    finally:
        consumer.close()


def test_a_poison_record_is_archived_at_the_delivery_limit(broker):
    from confluent_kafka import AcknowledgeType
    topic = _topic(broker, 1)
    consumer = _consumer(broker, "poison", topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        deliveries = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            messages = _poll(consumer)
            for message in messages:
                deliveries.append(message.delivery_count())
                consumer.acknowledge(message, AcknowledgeType.RELEASE)  # it fails every time
            if messages:
                consumer.commit_sync(15)
            elif len(deliveries) >= DELIVERY_LIMIT:
                break
        assert deliveries == list(range(1, DELIVERY_LIMIT + 1))  # then archived: never offered again
    finally:
        consumer.close()


def test_records_of_a_member_gone_quiet_go_to_another_when_the_lock_expires(short_lock_broker):
    broker = short_lock_broker
    topic = _topic(broker, 5)
    quiet = _consumer(broker, "quiet", topic, **{"share.acknowledgement.mode": "explicit"})
    other = None
    try:
        held = _poll_until(quiet, 5)
        assert [m.offset() for m in held] == list(range(5))
        acquired_at = time.monotonic()
        # the quiet member neither acknowledges nor polls again; another member of the group gets the
        # records once their lock (LOCK_MS) expires, and not before
        other = _consumer(broker, "quiet", topic)
        redelivered = _poll_until(other, 5)
        assert time.monotonic() - acquired_at >= LOCK_MS / 1000 * 0.9
        assert [(m.offset(), m.delivery_count()) for m in redelivered] == [(i, 2) for i in range(5)]
    finally:
        quiet.close()
        if other is not None:
            other.close()


_HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[3]])
held = []
while len(held) < int(sys.argv[4]):
    held += [m.offset() for m in consumer.poll(1.0) if m.error() is None]
print(" ".join(map(str, held)), flush=True)
time.sleep(600)  # holding them, never acknowledging, until killed
"""


def test_records_of_a_killed_member_go_to_another_when_the_lock_expires(short_lock_broker):
    broker = short_lock_broker
    topic = _topic(broker, 5)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, broker.bootstrap, "killed", topic, "5"],
                              stdout=subprocess.PIPE, text=True)
    other = None
    try:
        line = holder.stdout.readline()  # once it holds all five
        acquired_at = time.monotonic()
        assert sorted(int(offset) for offset in line.split()) == list(range(5)), line
        holder.send_signal(signal.SIGKILL)
        holder.wait(15)
        other = _consumer(broker, "killed", topic)
        redelivered = _poll_until(other, 5)
        assert time.monotonic() - acquired_at >= LOCK_MS / 1000 * 0.9  # by the lock, not the kill
        assert [(m.offset(), m.delivery_count()) for m in redelivered] == [(i, 2) for i in range(5)]
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(15)
        holder.stdout.close()
        if other is not None:
            other.close()


def test_records_a_member_held_when_it_closed_go_to_another_at_once(broker):
    topic = _topic(broker, 4)
    leaving = _consumer(broker, "leaving", topic, **{"share.acknowledgement.mode": "explicit"})
    held = _poll_until(leaving, 4)
    assert [m.offset() for m in held] == list(range(4))
    leaving.close()  # without acknowledging: its share session ends, and what it held is released
    other = _consumer(broker, "leaving", topic)
    try:
        again = _poll_until(other, 4, deadline_s=20)  # the module's lock is 30 s: not by expiry
        assert [(m.offset(), m.delivery_count()) for m in again] == [(i, 2) for i in range(4)]
    finally:
        other.close()

"""kafkawire's consumer with ``partition.assignment.strategy=cooperative-sticky`` (KIP-429) in classic
groups shared with other clients' cooperative-sticky consumers (confluent-kafka, kafka-python), against
the reference broker: members join and leave while a producer keeps writing; every record is read
exactly once, and kafkawire's listener hears only of the partitions that move (never a revocation of a
partition it keeps, never a loss)."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kafkawire.client import AsyncConsumer
from kafkawire.client.core.topic_partition import TopicPartition as TP

from support.broker_harness import BrokerThread

# kafka-python loads its schemas through a deprecated importlib API
pytestmark = pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")

PARTITIONS = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("cooperative"), num_partitions=PARTITIONS) as running:
        running.broker.groups.min_session_timeout_ms = 1_000
        yield running


class Producer(threading.Thread):
    """Writes numbered records to every partition until stopped."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        import confluent_kafka
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
        self.topic = topic
        self.sent = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for _ in range(PARTITIONS):
                self.producer.produce(self.topic, value=str(self.sent).encode(), partition=self.sent % PARTITIONS)
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.02)
        assert self.producer.flush(10) == 0


class Listener:
    """kafkawire's rebalance listener: every call, in order."""

    def __init__(self):
        self.calls: list[tuple[str, frozenset]] = []

    def on_partitions_assigned(self, partitions):
        self.calls.append(("assigned", frozenset(partitions)))

    def on_partitions_revoked(self, partitions):
        self.calls.append(("revoked", frozenset(partitions)))

    def on_partitions_lost(self, partitions):
        self.calls.append(("lost", frozenset(partitions)))


class Foreign(threading.Thread):
    """A confluent-kafka or kafka-python cooperative-sticky consumer polled on a thread of its own."""

    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, seen: dict):
        super().__init__(daemon=True)
        self.kind, self.seen = kind, seen
        self.assignment: frozenset = frozenset()
        self.errors: list[Exception] = []  # what its polls raised
        self.stop = threading.Event()
        if kind == "confluent-kafka":
            import confluent_kafka
            self.consumer = confluent_kafka.Consumer({
                "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 200, "log_level": 0})
            self.consumer.subscribe([topic])
        else:
            from kafka import KafkaConsumer
            from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
            self.consumer = KafkaConsumer(
                bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                session_timeout_ms=10_000, heartbeat_interval_ms=200, max_poll_records=10,
                auto_commit_interval_ms=200, partition_assignment_strategy=[CooperativeStickyAssignor])
            # kafka-python joins without waiting for metadata: wait until it knows the new topic's partitions
            deadline = time.monotonic() + 30
            while not self.consumer.partitions_for_topic(topic):
                assert time.monotonic() < deadline, f"kafka-python never saw the partitions of {topic}"
                time.sleep(0.05)
            self.consumer.subscribe([topic])

    def run(self):
        name = self.kind
        while not self.stop.is_set():
            if self.kind == "confluent-kafka":
                message = self.consumer.poll(0.05)
                records = [message.value()] if message is not None and not message.error() else []
            else:
                try:
                    batches = self.consumer.poll(timeout_ms=50)
                except Exception as error:  # (a commit refused mid-rebalance on a loaded machine): an application
                    self.errors.append(error)  # polls on, and the consumer rejoins; a dead thread would leave the group
                    continue
                records = [record.value for batch in batches.values() for record in batch]
            for value in records:
                self.seen.setdefault(value.decode(), []).append(name)
                time.sleep(0.002)
            self.assignment = frozenset(TP(tp.topic, tp.partition) for tp in self.consumer.assignment())
        self.consumer.close()


@pytest.mark.parametrize("other", ["confluent-kafka", "kafka-python"])
@pytest.mark.parametrize("leader", ["kafkawire", "other"])
def test_kafkawire_and_another_client_rebalance_cooperatively(broker, other, leader):
    """The first member leads: kafkawire's, or the other client's (then it assigns to kafkawire's)."""
    pytest.importorskip("confluent_kafka")
    topic = group = f"coop-{other}-{leader}"
    seen: dict[str, list[str]] = {}
    whole = frozenset(TP(topic, p) for p in range(PARTITIONS))
    producer = Producer(broker.bootstrap, topic)
    foreigners: list[Foreign] = []  # the other client's consumer, once started, for the failure message

    def kafkawire_consumer(listener):
        consumer = AsyncConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "max.poll.records": 10,
                                  "partition.assignment.strategy": "cooperative-sticky",
                                  "session.timeout.ms": 10_000, "heartbeat.interval.ms": 200,
                                  "auto.commit.interval.ms": 200})
        consumer.subscribe([topic], listener)
        return consumer

    async def poll_until(condition, consumers, names, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, (
                f"the group did not get there in time: {[c.assignment() for c in consumers]}, "
                f"{[(f.kind, f.is_alive(), f.assignment, f.errors[-3:]) for f in foreigners]}")
            batches = await asyncio.gather(*(c.poll(timeout_ms=50) for c in consumers))
            for name, records in zip(names, batches):
                for record in records:
                    seen.setdefault(record.value.decode(), []).append(name)

    def split(*owners):
        sets = [set(owner) for owner in owners]
        return all(sets) and sum(map(len, sets)) == PARTITIONS and set().union(*sets) == whole

    async def scenario():
        producer.start()
        first_listener = Listener()
        if leader == "other":
            foreign = Foreign(other, broker.bootstrap, group, topic, seen)  # (librdkafka joins at subscribe)
            foreign.start()
            foreigners.append(foreign)
            deadline = time.monotonic() + 30
            while foreign.assignment != whole:
                assert time.monotonic() < deadline, f"{other} never got the partitions"
                await asyncio.sleep(0.05)
        first = kafkawire_consumer(first_listener)
        assert first.rebalance_protocol() == "NONE"
        if leader == "kafkawire":
            await poll_until(lambda: first.assignment() == whole, [first], ["kw-1"])
            foreign = Foreign(other, broker.bootstrap, group, topic, seen)
            foreign.start()
            foreigners.append(foreign)

        await poll_until(lambda: split(first.assignment(), foreign.assignment), [first], ["kw-1"])
        assert first.rebalance_protocol() == "COOPERATIVE"
        second_listener = Listener()
        second = kafkawire_consumer(second_listener)
        consumers, names = [first, second], ["kw-1", "kw-2"]
        await poll_until(lambda: split(first.assignment(), second.assignment(), foreign.assignment),
                         consumers, names)
        assert sorted(map(len, (first.assignment(), second.assignment(), foreign.assignment))) == [2, 2, 2]
        kept_by_first = first.assignment()
        settled = time.monotonic() + 0.5  # a moment of all three consuming
        await poll_until(lambda: time.monotonic() > settled, consumers, names)
        await second.close()  # leaves: its two partitions go to the others, from its committed offsets
        await poll_until(lambda: split(first.assignment(), foreign.assignment), [first], ["kw-1"])
        assert kept_by_first <= first.assignment()
        producer.stop.set()
        producer.join(20)
        await poll_until(lambda: len(seen) >= producer.sent, [first], ["kw-1"])
        calls, owned_at_close = list(first_listener.calls), frozenset(first.assignment())
        await first.close()
        assert first_listener.calls[len(calls):] == [("revoked", owned_at_close)]  # closing gives up the rest
        foreign.stop.set()
        foreign.join(20)
        return calls, second_listener

    try:
        first_calls, second_listener = asyncio.run(scenario())
    finally:  # (a failure must not leave threads polling a broker that goes away)
        producer.stop.set()
        for thread in threading.enumerate():
            if isinstance(thread, Foreign):
                thread.stop.set()
                thread.join(20)
    assert len(seen) == producer.sent and all(len(readers) == 1 for readers in seen.values()), \
        {value: readers for value, readers in seen.items() if len(readers) != 1}
    assert {reader for readers in seen.values() for reader in readers} >= {"kw-1", "kw-2", other}
    # kw-1 was told only of partitions that moved: never a loss, never a revocation of one it kept
    owned: set = set()
    for kind, partitions in first_calls:
        assert kind != "lost"
        if kind == "assigned":
            assert not owned & partitions  # incremental: only the added ones
            owned |= partitions
        else:
            assert partitions <= owned and partitions != whole
            owned -= partitions
    revoked = [partitions for kind, partitions in first_calls if kind == "revoked"]
    # (as leader) 6 -> 3 when the other client joined; 3 -> 2 when kw-2 joined; nothing when kw-2 left
    assert [len(partitions) for partitions in revoked] == ([3, 1] if leader == "kafkawire" else [1])
    assert not any(kind == "lost" for kind, _ in second_listener.calls)

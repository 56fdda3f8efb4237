"""Group membership against the reference broker, through a small blocking driver over raw sockets
(kafkawire.framing): two kafkawire members with range, then round-robin; heartbeats keeping them; one
leaving; commits and offset fetches; and one group shared with kafka-python's KafkaConsumer or
confluent-kafka's Consumer (each side the leader once).
"""
from __future__ import annotations

import selectors
import socket
import threading
import time

import pytest

from kafkawire import messages as m
from kafkawire.client.core.consumer.config import ConsumerConfig
from kafkawire.client.core.group.member import GroupMember
from kafkawire.client.core.group.protocol import (
    CommitCompleted, CommittedOffsets, MemberState, PartitionsLost, PartitionsRevoked,
)
from kafkawire.client.core.topic_partition import TopicPartition as TP
from kafkawire.framing import Correlator, FrameBuffer

from support.broker_harness import BrokerThread, RawClient
from support.group_helpers import reference_assign

# kafka-python loads its schemas through a deprecated importlib API
pytestmark = pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")


class _Connection:
    def __init__(self, port: int, client_id: str):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setblocking(False)
        self.correlator = Correlator(client_id=client_id)
        self.frames = FrameBuffer()

    def send(self, request) -> None:
        data = self.correlator.request(request.body, request.version, context=request)
        self.sock.setblocking(True)
        self.sock.sendall(data)
        self.sock.setblocking(False)

    def close(self):
        self.sock.close()


class Driver:
    """Runs GroupMembers against one broker: per member one connection for FindCoordinator and one to
    the coordinator, responses fed back as they arrive, events collected, metadata looked up on demand."""

    def __init__(self, broker: BrokerThread):
        self.broker = broker
        self.members: dict[str, GroupMember] = {}
        self.events: dict[str, list] = {}
        self.positions: dict[str, dict] = {}
        self.polling: dict[str, bool] = {}
        self.connections: dict[tuple[str, object], _Connection] = {}
        self.selector = selectors.DefaultSelector()
        self.admin = RawClient(broker.port)

    @staticmethod
    def now() -> float:
        return time.monotonic() * 1000

    def add(self, name: str, **config) -> GroupMember:
        settings_ = dict(session_timeout_ms=3_000, heartbeat_interval_ms=150, max_poll_interval_ms=3_000,
                         retry_backoff_ms=50, request_timeout_ms=10_000, enable_auto_commit=False, client_id=name)
        settings_.update(config)
        self.positions[name] = {}
        member = GroupMember(ConsumerConfig(**settings_), positions=lambda: self.positions[name])
        self.members[name], self.events[name], self.polling[name] = member, [], True
        return member

    def _connection(self, name: str, destination) -> _Connection:
        key = (name, destination)
        if key not in self.connections:
            connection = self.connections[key] = _Connection(self.broker.port, name)
            self.selector.register(connection.sock, selectors.EVENT_READ, (name, connection))
        return self.connections[key]

    def _refresh_metadata(self, member: GroupMember) -> None:
        wanted = sorted(member.metadata_topics - set(member._metadata))
        if wanted:
            response = self.admin.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=t)
                                                                    for t in wanted],
                                                            allow_auto_topic_creation=False), 9)
            member.update_metadata({t.name: len(t.partitions) for t in response.topics if t.error_code == 0},
                                   self.now())

    def step(self, wait_ms: float = 20) -> None:
        now = self.now()
        for name, member in self.members.items():
            if member.closed:
                continue
            if self.polling[name]:
                member.record_poll(now)
            self._refresh_metadata(member)
            while True:
                requests = member.poll(now)
                self.events[name].extend(member.drain_events())
                for request in requests:
                    self._connection(name, request.destination).send(request)
                if not requests:
                    break
        for key, _ in self.selector.select(wait_ms / 1000):
            name, connection = key.data
            data = connection.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the broker closed a connection")
            connection.frames.feed(data)
            while (frame := connection.frames.next_frame()) is not None:
                pending, _header, body = connection.correlator.response(frame)
                self.members[name].handle_response(pending.context, body, self.now())

    def run_until(self, condition, timeout_s: float = 15, what: str = "condition"):
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; states: "
                                     f"{ {n: m_.state for n, m_ in self.members.items()} }")
            self.step()

    def run_for(self, seconds: float):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.step()

    def close(self):
        for connection in self.connections.values():
            connection.close()
        self.admin.close()


@pytest.fixture
def broker(tmp_path):
    with BrokerThread(data_dir=tmp_path / "data", num_partitions=1) as running:
        running.broker.groups.min_session_timeout_ms = 1_000  # short sessions keep the test fast
        with RawClient(running.port) as client:
            request = m.CreateTopicsRequest(timeout_ms=5000, topics=[
                m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=count, replication_factor=1)
                for name, count in (("alpha", 4), ("beta", 3))])
            assert all(t.error_code == 0 for t in client.request(request, 7).topics)
        yield running


@pytest.fixture
def driver(broker):
    running = Driver(broker)
    yield running
    running.close()


def stable_with(driver: Driver, names) -> bool:
    members = [driver.members[n] for n in names]
    generations = {member.generation.generation_id for member in members}
    return all(member.state is MemberState.STABLE for member in members) and len(generations) == 1


def expected_split(kind, driver: Driver, names, counts={"alpha": 4, "beta": 3}):
    subscriptions = {driver.members[n].generation.member_id: list(driver.members[n].subscription) for n in names}
    by_member = reference_assign(kind, counts, subscriptions, {})
    return {n: tuple(by_member[driver.members[n].generation.member_id]) for n in names}


@pytest.mark.parametrize("kind", ["range", "roundrobin"])
def test_two_kafkawire_members_share_heartbeat_commit_and_hand_over(driver, broker, kind):
    group = f"wire-{kind}"
    a = driver.add("a", group_id=group, partition_assignment_strategy=(kind,))
    b = driver.add("b", group_id=group, partition_assignment_strategy=(kind,))
    a.subscribe(["alpha", "beta"], driver.now())
    b.subscribe(["alpha", "beta"], driver.now())
    driver.run_until(lambda: stable_with(driver, "ab") and a.assignment and b.assignment, what="both stable")
    assert {a.assignment, b.assignment} == set(expected_split(kind, driver, "ab").values())
    assert a.leader != b.leader and broker.broker.groups.group_state(group) == "Stable"

    # heartbeats keep both in (the session is 3 s: the broker would have dropped silent members)
    generation = a.generation.generation_id
    driver.events["a"].clear()
    driver.events["b"].clear()
    driver.run_for(3.3)
    assert a.generation.generation_id == b.generation.generation_id == generation
    assert not any(isinstance(e, (PartitionsRevoked, PartitionsLost)) for e in driver.events["a"] + driver.events["b"])

    # a commits its partitions; b reads them back; the broker has them
    offsets = {tp: 100 + i for i, tp in enumerate(a.assignment)}
    rid = a.commit(offsets, driver.now(), timeout_ms=5_000)
    driver.run_until(lambda: any(isinstance(e, CommitCompleted) and e.request_id == rid for e in driver.events["a"]),
                     what="commit")
    (done,) = [e for e in driver.events["a"] if isinstance(e, CommitCompleted)]
    assert done.error is None
    assert broker.broker.groups.committed(group) == {(tp.topic, tp.partition): (o, "") for tp, o in offsets.items()}
    every = [TP("alpha", p) for p in range(4)] + [TP("beta", p) for p in range(3)]
    rid = b.fetch_committed(every, driver.now())
    driver.run_until(lambda: any(isinstance(e, CommittedOffsets) and e.request_id == rid for e in driver.events["b"]),
                     what="offset fetch")
    (fetched,) = [e for e in driver.events["b"] if isinstance(e, CommittedOffsets) and e.request_id == rid]
    assert fetched.error is None
    assert {tp: (o.offset if o else None) for tp, o in fetched.offsets.items()} == {tp: offsets.get(tp) for tp in every}

    # a leaves: b rebalances, gets everything, and the committed offsets of a's partitions with it
    driver.events["b"].clear()
    a.close(driver.now())
    driver.run_until(lambda: a.closed and b.state is MemberState.STABLE and len(b.assignment) == 7,
                     what="b owning everything")
    assert b.generation.generation_id > generation
    assert any(isinstance(e, PartitionsRevoked) for e in driver.events["b"])
    driver.run_until(lambda: any(isinstance(e, CommittedOffsets) and e.request_id is None for e in driver.events["b"]),
                     what="b's committed offsets")
    (startup,) = [e for e in driver.events["b"] if isinstance(e, CommittedOffsets) and e.request_id is None]
    assert {tp: o.offset for tp, o in startup.offsets.items() if o} == offsets


def test_a_member_that_stops_polling_is_replaced(driver, broker):
    a = driver.add("a", group_id="pollers")
    b = driver.add("b", group_id="pollers")
    a.subscribe(["alpha"], driver.now())
    b.subscribe(["alpha"], driver.now())
    driver.run_until(lambda: stable_with(driver, "ab") and a.assignment and b.assignment, what="both stable")
    driver.polling["b"] = False  # the application behind b hangs
    driver.run_until(lambda: len(a.assignment) == 4, timeout_s=10, what="a owning everything")
    assert b.state is MemberState.UNJOINED
    assert any(isinstance(e, PartitionsLost) for e in driver.events["b"])
    driver.polling["b"] = True  # and comes back
    driver.run_until(lambda: stable_with(driver, "ab") and a.assignment and b.assignment, what="b back")


# ---- interop with kafka-python's KafkaConsumer and confluent-kafka's Consumer ----------------------------------

class ForeignMember:
    """Another client's consumer in the group (subscribed to alpha and beta with range), polled from its
    own thread."""

    def __init__(self, kind: str, bootstrap: str, group: str):
        self.kind = kind
        if kind == "kafka-python":
            from kafka import KafkaConsumer
            from kafka.coordinator.assignors.range import RangePartitionAssignor
            self.consumer = KafkaConsumer(
                bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, session_timeout_ms=3_000,
                heartbeat_interval_ms=150, max_poll_interval_ms=3_000, request_timeout_ms=5_000,
                retry_backoff_ms=50, partition_assignment_strategy=[RangePartitionAssignor])
            # kafka-python 3.0.12 joins without waiting for metadata (then assigns nothing and is slow to
            # notice); load it first, as librdkafka does by itself
            for topic in ("alpha", "beta"):
                assert self.consumer.partitions_for_topic(topic)
            self.consumer.subscribe(["alpha", "beta"])
        else:
            from confluent_kafka import Consumer
            self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                      "enable.auto.commit": False, "session.timeout.ms": 3_000,
                                      "heartbeat.interval.ms": 150, "max.poll.interval.ms": 3_000,
                                      "partition.assignment.strategy": "range"})
            self.consumer.subscribe(["alpha", "beta"])
        self.assignment: set = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            if self.kind == "kafka-python":
                self.consumer.poll(timeout_ms=50)
            else:
                self.consumer.poll(0.05)
            self.assignment = {TP(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def close(self):
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


@pytest.mark.parametrize("other", ["kafka-python", "confluent-kafka"])
@pytest.mark.parametrize("leader", ["kafkawire", "other"])
def test_kafkawire_and_another_client_split_a_group(driver, broker, other, leader):
    """Whoever leads, the other side decodes its subscription or assignment bytes: the split is range's."""
    group = f"mixed-{other}-{leader}"
    ours = driver.add("ours", group_id=group)
    theirs = None
    try:
        if leader == "kafkawire":
            ours.subscribe(["alpha", "beta"], driver.now())
            driver.run_until(lambda: ours.state is MemberState.STABLE and len(ours.assignment) == 7,
                             what="kafkawire alone")
            theirs = ForeignMember(other, broker.bootstrap, group)
        else:
            theirs = ForeignMember(other, broker.bootstrap, group)
            deadline = time.monotonic() + 15
            while len(theirs.assignment) != 7:
                assert time.monotonic() < deadline, f"{other} never joined"
                time.sleep(0.05)
            ours.subscribe(["alpha", "beta"], driver.now())
        whole = {TP("alpha", p) for p in range(4)} | {TP("beta", p) for p in range(3)}

        def split():
            mine = set(ours.assignment)
            return (ours.state is MemberState.STABLE and mine and theirs.assignment
                    and not mine & theirs.assignment and mine | theirs.assignment == whole)
        driver.run_until(split, timeout_s=20, what=f"a split between kafkawire and {other}")
        assert ours.leader == (leader == "kafkawire")
        (described,) = driver.admin.request(m.DescribeGroupsRequest(groups=[group]), 4).groups
        member_ids = {member.member_id for member in described.members}
        (their_id,) = member_ids - {ours.generation.member_id}
        by_member = reference_assign("range", {"alpha": 4, "beta": 3},
                                     {ours.generation.member_id: ["alpha", "beta"], their_id: ["alpha", "beta"]}, {})
        assert list(ours.assignment) == by_member[ours.generation.member_id]
        assert sorted(theirs.assignment) == by_member[their_id]
    finally:
        if theirs is not None:
            theirs.close()

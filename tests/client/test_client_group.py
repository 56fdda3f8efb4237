"""The consumer's group membership (kafkawire.client.group) and assignors (kafkawire.client.assignors).

* Assignors against kafka-python's RangePartitionAssignor / RoundRobinPartitionAssignor for random groups
  (Hypothesis), Java's documented examples, Java's string order; the subscription and assignment bytes
  against kafka-python's codec in both directions.
* The sans-IO GroupMember driven by hand-built responses, every request encoded and every response
  decoded at the request's version: each transition and each error.
* Against the reference broker, through a small blocking driver over raw sockets (kafkawire.framing):
  two kafkawire members with range, then round-robin; heartbeats keeping them; one leaving; commits and
  offset fetches; and one group shared with kafka-python's KafkaConsumer (each side the leader once).
"""
from __future__ import annotations

import selectors
import socket
import threading
import time
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire import messages as m
from kafkawire.client.core.assignors import (
    ASSIGNORS, Assignment, RangeAssignor, RoundRobinAssignor, Subscription, decode_assignment,
    decode_subscription, encode_assignment, encode_subscription, get_assignor,
)
from kafkawire.client.core.consumer_config import ConsumerConfig
from kafkawire.client.core.group_member import GroupMember
from kafkawire.client.core.group_protocol import (
    CommitCompleted, CommittedOffsets, Coordinator, GroupFailure, MemberState, OffsetAndMetadata,
    PartitionsAssigned, PartitionsLost, PartitionsRevoked,
)
from kafkawire.client.core.topic_partition import TopicPartition as TP
from kafkawire.client.errors import CommitFailedError, RebalanceInProgressError
from kafkawire.error_codes import ErrorCode as E
from kafkawire.errors import DecodeError
from kafkawire.framing import Correlator, FrameBuffer

from broker_harness import BrokerThread, RawClient

# kafka-python loads its schemas through a deprecated importlib API
pytestmark = pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")


# =========================================================================================================
# Assignors and payloads
# =========================================================================================================

def kafka_python_assign(kind: str, counts: dict[str, int], subscriptions: dict[str, list[str]],
                        instance_ids: dict[str, str | None]) -> dict[str, list[TP]]:
    """kafka-python's assignor over the same group. Members go in static-first order: its grouping of
    static and dynamic members (itertools.groupby) only works on consecutive runs. (Its round-robin
    also crashes when it has to skip a member not subscribed to a topic; see aiokafka_roundrobin.)"""
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[kind]
    cluster = SimpleNamespace(partitions_for_topic=lambda t: set(range(counts[t])) if counts.get(t) else None)
    ordered = sorted(subscriptions, key=lambda member: instance_ids.get(member) is None)
    members = [SimpleNamespace(member_id=member, group_instance_id=instance_ids.get(member),
                               metadata=SimpleNamespace(topics=subscriptions[member])) for member in ordered]
    result = assignor.assign(cluster, members)
    return {member: [TP(t, p) for t, p in assignment.partitions()] for member, assignment in result.items()}


def aiokafka_roundrobin(counts: dict[str, int], subscriptions: dict[str, list[str]],
                        instance_ids: dict[str, str | None]) -> dict[str, list[TP]]:
    """aiokafka's round-robin, which orders members by id alone: the members are renamed so that id order
    is Java's (static members by instance id first, then dynamic members by member id)."""
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    renamed = {member: (f"0{instance_ids[member]}\x00{member}" if instance_ids.get(member) is not None
                        else f"1{member}") for member in subscriptions}
    cluster = SimpleNamespace(partitions_for_topic=lambda t: set(range(counts[t])) if counts.get(t) else None)
    members = {renamed[member]: SimpleNamespace(subscription=topics) for member, topics in subscriptions.items()}
    result = RoundRobinPartitionAssignor.assign(cluster, members)
    return {member: [TP(t, p) for t, p in result[renamed[member]].partitions()] for member in subscriptions}


def reference_assign(kind, counts, subscriptions, instance_ids):
    if kind == "range":
        return kafka_python_assign(kind, counts, subscriptions, instance_ids)
    reference = aiokafka_roundrobin(counts, subscriptions, instance_ids)
    if len({frozenset(topics) for topics in subscriptions.values()}) == 1:  # no skipping: kafka-python works
        assert kafka_python_assign(kind, counts, subscriptions, instance_ids) == reference
    return reference


TOPIC_NAMES = st.sampled_from(["a", "b", "c", "orders", "t0", "t1", "zz"])
MEMBER_NAMES = st.text(alphabet="abcxyz-0123456789", min_size=1, max_size=6)


@st.composite
def groups(draw):
    topics = draw(st.lists(TOPIC_NAMES, min_size=1, max_size=5, unique=True))
    counts = {t: draw(st.integers(0, 9)) for t in topics}
    if draw(st.booleans()):  # a topic the leader has no metadata for
        counts.pop(topics[0])
    members = draw(st.lists(MEMBER_NAMES, min_size=1, max_size=6, unique=True))
    subscriptions = {member: draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)) for member in members}
    instance_ids = {member: (f"instance-{draw(st.integers(0, 99))}-{member}" if draw(st.booleans()) else None)
                    for member in members}
    return counts, subscriptions, instance_ids


@pytest.mark.parametrize("kind", ["range", "roundrobin"])
@settings(max_examples=200, deadline=None)
@given(group=groups())
def test_assignors_agree_with_kafka_python(kind, group):
    counts, subscriptions, instance_ids = group
    ours = get_assignor(kind).assign(counts, subscriptions, instance_ids)
    assert ours == reference_assign(kind, counts, subscriptions, instance_ids)
    # every partition of every subscribed topic with metadata goes to exactly one subscriber
    handed_out = [tp for partitions in ours.values() for tp in partitions]
    assert len(handed_out) == len(set(handed_out))
    wanted = {TP(t, p) for topics in subscriptions.values() for t in topics for p in range(counts.get(t, 0))}
    assert set(handed_out) == wanted
    for member, partitions in ours.items():
        assert {tp.topic for tp in partitions} <= set(subscriptions[member])
        # our bytes are kafka-python's bytes (v0, empty user data), and each side reads the other's
        from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
        grouped = {}
        for tp in partitions:
            grouped.setdefault(tp.topic, []).append(tp.partition)
        their_bytes = KpAssignment(0, sorted(grouped.items()), b"").encode()
        assert encode_assignment(partitions, user_data=b"", version=0) == their_bytes
        assert decode_assignment(their_bytes).partitions == tuple(partitions)


def test_range_and_roundrobin_match_javas_documented_examples():
    two_by_three = {"t0": 3, "t1": 3}
    both = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    assert RangeAssignor().assign(two_by_three, both) == {
        "C0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)], "C1": [TP("t0", 2), TP("t1", 2)]}
    assert RoundRobinAssignor().assign(two_by_three, both) == {
        "C0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)], "C1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)]}
    # RoundRobinAssignor's javadoc: unequal subscriptions skip members not subscribed to a topic
    uneven = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3},
                                         {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]})
    assert uneven == {"C0": [TP("t0", 0)], "C1": [TP("t1", 0)],
                      "C2": [TP("t1", 1), TP("t2", 0), TP("t2", 1), TP("t2", 2)]}


def test_member_order_is_javas_static_first_then_utf16_code_units():
    # Java's String.compareTo puts U+10000 (surrogates D800 DC00) before U+FFFF; code points say otherwise.
    assert RangeAssignor().assign({"t": 1}, {"\uffff": ["t"], "\U00010000": ["t"]}) == {
        "\uffff": [], "\U00010000": [TP("t", 0)]}
    # static members (by instance id) come before dynamic ones, whatever their member ids
    result = RangeAssignor().assign({"t": 3}, {"a": ["t"], "b": ["t"], "z": ["t"]}, {"z": "i1", "b": "i2"})
    assert result == {"z": [TP("t", 0)], "b": [TP("t", 1)], "a": [TP("t", 2)]}
    # a member listing a topic twice counts once (Java keys members by id)
    assert RangeAssignor().assign({"t": 2}, {"a": ["t", "t"], "b": ["t"]}) == {"a": [TP("t", 0)], "b": [TP("t", 1)]}
    assert set(ASSIGNORS) == {"range", "roundrobin"}
    with pytest.raises(ValueError, match="unknown partition assignor 'sticky'"):
        get_assignor("sticky")
    with pytest.raises(ValueError, match="non-negative"):
        RangeAssignor().assign({"t": -1}, {"a": ["t"]})


def test_subscription_bytes_are_read_by_kafka_python_and_theirs_by_us():
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription
    ours = Subscription(("orders", "audit"), user_data=b"\x01\x02", owned_partitions=(TP("orders", 3), TP("audit", 0)),
                        generation_id=7, rack_id="rack-a")
    for version in range(4):
        data = encode_subscription(ours, version)
        theirs = KpSubscription.decode(data)
        assert theirs.version == version and list(theirs.topics) == ["orders", "audit"]
        assert bytes(theirs.user_data) == b"\x01\x02"
        back = decode_subscription(data)
        assert back.topics == ours.topics and back.version == version
        if version >= 1:
            assert sorted((tp.topic, tp.partitions) for tp in theirs.owned_partitions) == [("audit", [0]), ("orders", [3])]
            assert set(back.owned_partitions) == set(ours.owned_partitions)
        if version >= 2:
            assert theirs.generation_id == back.generation_id == 7
        if version == 3:
            assert theirs.rack_id == back.rack_id == "rack-a"
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
    for version in range(4):
        data = encode_assignment([TP("b", 1), TP("a", 2), TP("a", 0)], user_data=b"u", version=version)
        theirs = KpAssignment.decode(data)
        assert theirs.version == version and bytes(theirs.user_data) == b"u"
        assert [(t.topic, list(t.partitions)) for t in theirs.assigned_partitions] == [("a", [0, 2]), ("b", [1])]
        assert decode_assignment(KpAssignment(version, [("a", [0, 2]), ("b", [1])], b"u").encode()) == Assignment(
            (TP("a", 0), TP("a", 2), TP("b", 1)), b"u", version)
    # what kafka-python's assignors send in JoinGroup
    assert decode_subscription(KpSubscription(0, ["x", "y"], b"").encode()).topics == ("x", "y")
    assert encode_subscription(["x", "y"], 0) == KpSubscription(0, ["x", "y"], None).encode()


def test_payloads_of_newer_versions_and_bad_bytes():
    # a future version appends fields: read as v3, the rest ignored (Java's rule)
    future = b"\x00\x07" + encode_subscription(Subscription(("t",), generation_id=3, rack_id="r"))[2:] + b"\xde\xad"
    sub = decode_subscription(future)
    assert (sub.topics, sub.generation_id, sub.rack_id, sub.version) == (("t",), 3, "r", 7)
    future_assignment = b"\x00\x09" + encode_assignment([TP("t", 1)])[2:] + b"more"
    assert decode_assignment(future_assignment) == Assignment((TP("t", 1),), None, 9)
    assert decode_assignment(b"") == Assignment(())  # the coordinator's answer to a member the leader skipped
    for bad in (b"\x00", b"\xff\xff\x00\x00\x00\x00", encode_subscription(["topic"])[:-3]):
        with pytest.raises(DecodeError):
            decode_subscription(bad)
    with pytest.raises(DecodeError):
        decode_assignment(b"\x00\x00\x7f\xff\xff\xff")  # a count far beyond the bytes: refused, not allocated
    with pytest.raises(ValueError):
        encode_subscription(["t"], version=4)


# =========================================================================================================
# The state machine, driven by hand
# =========================================================================================================

GROUP = "g"
TOPICS = ("alpha", "beta")


def make_config(**overrides) -> ConsumerConfig:
    settings_ = dict(group_id=GROUP, session_timeout_ms=10_000, heartbeat_interval_ms=1_000,
                     max_poll_interval_ms=60_000, request_timeout_ms=5_000, retry_backoff_ms=100,
                     enable_auto_commit=False, auto_commit_interval_ms=5_000, client_id="me")
    settings_.update(overrides)
    return ConsumerConfig(**settings_)


def wire(message, version):
    """The message as the other side reads it: encoded at ``version`` and decoded back."""
    return type(message).decode(message.encode(version), version, exact=True)


class Sim:
    """A GroupMember with a clock; requests go through the codec, responses too."""

    def __init__(self, member: GroupMember | None = None, now: float = 1_000.0, **config):
        self.positions: dict = {}
        self.m = member or GroupMember(make_config(**config), positions=lambda: self.positions)
        self.now = now
        self.events: list = []

    def poll(self) -> list:
        requests = self.m.poll(self.now)
        for request in requests:
            wire(request.body, request.version)  # every request is writable at its version
        self.events.extend(self.m.drain_events())
        return requests

    def poll_no_drain(self) -> list:
        return self.m.poll(self.now)

    def expect(self, *classes):
        requests = self.poll()
        assert [type(r.body) for r in requests] == list(classes), requests
        return requests[0] if len(requests) == 1 else requests

    def reply(self, request, response):
        if callable(response):
            response = response(request)
        self.m.handle_response(request, wire(response, request.version), self.now)
        self.events.extend(self.m.drain_events())

    def take(self, cls=None) -> list:
        events, self.events = self.events + self.m.drain_events(), []
        return [e for e in events if cls is None or isinstance(e, cls)]

    def advance(self, ms: float):
        self.now += ms


def find_answer(code, node, host, port):
    """A FindCoordinator answer shaped for the request's version (a callable Sim.reply resolves)."""
    def build(request):
        if request.version >= 4:
            return m.FindCoordinatorResponse(coordinators=[m.FindCoordinatorResponse.Coordinator(
                key=GROUP, node_id=node, host=host, port=port, error_code=code)])
        return m.FindCoordinatorResponse(error_code=code, node_id=node, host=host, port=port)
    return build


def find_ok(node=1):
    return find_answer(0, node, "coord", 9092)


def find_error(code):
    return find_answer(code, -1, "", -1)


def join_ok(member_id="me-1", generation=1, leader="leader-0", protocol="range", members=()):
    return m.JoinGroupResponse(error_code=0, generation_id=generation, protocol_type="consumer",
                               protocol_name=protocol, leader=leader, member_id=member_id, members=[
                                   m.JoinGroupResponse.JoinGroupResponseMember(member_id=mid, group_instance_id=iid,
                                                                               metadata=meta)
                                   for mid, iid, meta in members])


def join_error(code, member_id=""):
    return m.JoinGroupResponse(error_code=code, generation_id=-1, protocol_name="", leader="", member_id=member_id)


def sync_ok(partitions, protocol="range"):
    return m.SyncGroupResponse(error_code=0, protocol_type="consumer", protocol_name=protocol,
                               assignment=encode_assignment(partitions))


def commit_response(request, code=0):
    return m.OffsetCommitResponse(topics=[m.OffsetCommitResponse.OffsetCommitResponseTopic(name=t.name, partitions=[
        m.OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
        for p in t.partitions]) for t in request.body.topics])


def fetch_response(request, offsets: dict, code=0, top_code=0):
    """An OffsetFetch answer for the request's partitions from ``offsets`` ({TP: offset}; absent: -1)."""
    if request.version >= 8:
        (group,) = request.body.groups
        topics = [(t.name, t.partition_indexes) for t in group.topics]
        return m.OffsetFetchResponse(groups=[m.OffsetFetchResponse.OffsetFetchResponseGroup(
            group_id=GROUP, error_code=top_code, topics=[m.OffsetFetchResponse.OffsetFetchResponseTopics(
                name=name, partitions=[m.OffsetFetchResponse.OffsetFetchResponsePartitions(
                    partition_index=p, committed_offset=offsets.get(TP(name, p), -1), committed_leader_epoch=4,
                    metadata="md", error_code=code) for p in parts]) for name, parts in topics])])
    topics = [(t.name, t.partition_indexes) for t in request.body.topics]
    return m.OffsetFetchResponse(error_code=top_code, topics=[m.OffsetFetchResponse.OffsetFetchResponseTopic(
        name=name, partitions=[m.OffsetFetchResponse.OffsetFetchResponsePartition(
            partition_index=p, committed_offset=offsets.get(TP(name, p), -1), committed_leader_epoch=4,
            metadata="md", error_code=code) for p in parts]) for name, parts in topics])


ASSIGNED = (TP("alpha", 0), TP("alpha", 1), TP("beta", 0))


def joined(sim: Sim, partitions=ASSIGNED, member_id="me-1", generation=1, topics=TOPICS) -> Sim:
    """Subscribe and go through FindCoordinator, JoinGroup (KIP-394 round) and SyncGroup as a follower."""
    sim.m.subscribe(topics, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    sim.reply(sim.expect(m.JoinGroupRequest), join_error(E.MEMBER_ID_REQUIRED, member_id))
    sim.reply(sim.expect(m.JoinGroupRequest), join_ok(member_id, generation))
    sim.reply(sim.expect(m.SyncGroupRequest), sync_ok(partitions))
    assert sim.m.state is MemberState.STABLE
    if partitions:
        fetch = sim.expect(m.OffsetFetchRequest)
        sim.reply(fetch, fetch_response(fetch, {}))
    sim.take()
    return sim


def test_a_follower_joins_syncs_and_fetches_its_committed_offsets():
    sim = Sim()
    assert sim.m.state is MemberState.UNJOINED and sim.poll() == []
    sim.m.subscribe(["beta", "alpha", "alpha"], sim.now)
    assert sim.m.state is MemberState.FINDING_COORDINATOR
    find = sim.expect(m.FindCoordinatorRequest)
    assert find.destination is None and find.version == 6 and list(find.body.coordinator_keys) == [GROUP]
    assert sim.poll() == []  # one lookup at a time
    sim.reply(find, find_ok(node=3))
    assert sim.m.coordinator == Coordinator(3, "coord", 9092)

    join = sim.expect(m.JoinGroupRequest)
    body = join.body
    assert join.destination == Coordinator(3, "coord", 9092) and join.version == 9
    assert (body.group_id, body.member_id, body.protocol_type) == (GROUP, "", "consumer")
    assert (body.session_timeout_ms, body.rebalance_timeout_ms) == (10_000, 60_000)
    assert join.timeout_ms == 65_000  # parked for up to the rebalance timeout, plus Java's 5 s lapse
    (protocol,) = body.protocols
    assert protocol.name == "range"
    assert decode_subscription(protocol.metadata) == Subscription(("alpha", "beta"), version=3)
    assert sim.m.state is MemberState.JOINING

    sim.reply(join, join_error(E.MEMBER_ID_REQUIRED, "me-42"))  # KIP-394: again at once, with the id
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == "me-42"
    sim.reply(join, join_ok("me-42", generation=5))
    assert sim.m.state is MemberState.SYNCING and not sim.m.leader
    sync = sim.expect(m.SyncGroupRequest)
    assert (sync.body.generation_id, sync.body.member_id, list(sync.body.assignments)) == (5, "me-42", [])
    assert (sync.body.protocol_type, sync.body.protocol_name) == ("consumer", "range")
    assert sim.poll() == []  # no heartbeats while SyncGroup is parked

    sim.reply(sync, sync_ok([TP("beta", 2), TP("alpha", 0)]))
    assert sim.m.state is MemberState.STABLE
    assert sim.m.assignment == (TP("alpha", 0), TP("beta", 2))
    assert sim.take() == [PartitionsAssigned((TP("alpha", 0), TP("beta", 2)), 5, "me-42", False)]
    fetch = sim.expect(m.OffsetFetchRequest)
    (group,) = fetch.body.groups
    assert sorted((t.name, list(t.partition_indexes)) for t in group.topics) == [("alpha", [0]), ("beta", [2])]
    sim.reply(fetch, fetch_response(fetch, {TP("alpha", 0): 17}))
    assert sim.take() == [CommittedOffsets(None, {TP("alpha", 0): OffsetAndMetadata(17, "md", 4),
                                                  TP("beta", 2): None})]


@pytest.mark.parametrize("protocol", ["range", "roundrobin"])
def test_the_leader_assigns_everyone_with_the_chosen_assignor(protocol):
    sim = Sim(partition_assignment_strategy=("range", "roundrobin"))
    sim.m.subscribe(["alpha"], sim.now)
    sim.m.update_metadata({"alpha": 5, "beta": 3, "gamma": 2}, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    assert [p.name for p in join.body.protocols] == ["range", "roundrobin"]
    subscriptions = {"me-1": ["alpha"], "other-1": ["alpha", "beta"], "old-1": ["beta", "gamma"]}
    members = [("me-1", None, join.body.protocols[0].metadata),
               ("other-1", "static-a", encode_subscription(subscriptions["other-1"])),
               ("old-1", None, encode_subscription(subscriptions["old-1"], version=0))]
    sim.reply(join, join_ok("me-1", 3, leader="me-1", protocol=protocol, members=members))
    assert sim.m.leader and sim.m.metadata_topics == {"alpha", "beta", "gamma"}
    sync = sim.expect(m.SyncGroupRequest)
    sent = {a.member_id: a.assignment for a in sync.body.assignments}
    expected = reference_assign(protocol, {"alpha": 5, "beta": 3, "gamma": 2}, subscriptions,
                                {"other-1": "static-a"})
    assert {member: list(decode_assignment(data).partitions) for member, data in sent.items()} == expected
    assert bytes(sent["old-1"][:2]) == b"\x00\x00"  # answered in the version it subscribed with
    sim.reply(sync, sync_ok(expected["me-1"], protocol))
    assert sim.m.assignment == tuple(expected["me-1"])
    assert sim.take(PartitionsAssigned)[0].leader


def test_a_leader_gives_nothing_to_a_member_whose_subscription_does_not_decode():
    sim = Sim()
    sim.m.subscribe(["alpha"], sim.now)
    sim.m.update_metadata({"alpha": 2}, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    members = [("me-1", None, join.body.protocols[0].metadata), ("bad-1", None, b"\x00")]
    sim.reply(join, join_ok("me-1", 1, leader="me-1", members=members))
    sync = sim.expect(m.SyncGroupRequest)
    sent = {a.member_id: decode_assignment(a.assignment).partitions for a in sync.body.assignments}
    assert sent == {"me-1": (TP("alpha", 0), TP("alpha", 1)), "bad-1": ()}
    (failure,) = sim.take(GroupFailure)
    assert not failure.fatal and "bad-1" in str(failure.error)


def test_a_static_leader_told_to_skip_the_assignment_sends_none():
    sim = Sim(GroupMember(make_config(), group_instance_id="host-1"))
    sim.m.subscribe(["alpha"], sim.now)
    sim.m.update_metadata({"alpha": 2}, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.group_instance_id == "host-1"
    response = join_ok("me-1", 3, leader="me-1", members=[("me-1", "host-1", join.body.protocols[0].metadata)])
    response.skip_assignment = True  # KIP-814: a static leader rejoining keeps the current assignment
    sim.reply(join, response)
    sync = sim.expect(m.SyncGroupRequest)
    assert list(sync.body.assignments) == [] and sync.body.group_instance_id == "host-1"
    sim.reply(sync, sync_ok([TP("alpha", 0), TP("alpha", 1)]))
    assert sim.m.state is MemberState.STABLE and sim.m.leader


def test_a_leader_rejoins_when_the_group_topics_change():
    sim = Sim()
    sim.m.subscribe(["alpha"], sim.now)
    sim.m.update_metadata({"alpha": 2}, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    members = [("me-1", None, join.body.protocols[0].metadata), ("o-1", None, encode_subscription(["beta"]))]
    sim.reply(join, join_ok("me-1", 1, leader="me-1", members=members))
    sync = sim.expect(m.SyncGroupRequest)
    assert {a.member_id: decode_assignment(a.assignment).partitions for a in sync.body.assignments}["o-1"] == ()
    sim.reply(sync, sync_ok([TP("alpha", 0), TP("alpha", 1)]))
    sim.reply(sim.expect(m.OffsetFetchRequest), m.OffsetFetchResponse(groups=[
        m.OffsetFetchResponse.OffsetFetchResponseGroup(group_id=GROUP, topics=[])]))
    assert sim.m.metadata_topics == {"alpha", "beta"}  # the driver must look beta up
    sim.m.update_metadata({"alpha": 2}, sim.now)
    assert sim.m.state is MemberState.STABLE  # nothing changed
    sim.m.update_metadata({"alpha": None}, sim.now)
    assert sim.m.state is MemberState.STABLE  # a topic missing from one metadata answer is no reason
    sim.m.update_metadata({"beta": 4}, sim.now)  # now beta can be assigned: rebalance
    assert sim.m.state is MemberState.REBALANCING
    assert sim.take(PartitionsRevoked) == [PartitionsRevoked((TP("alpha", 0), TP("alpha", 1)))]
    assert type(sim.poll()[0].body) is m.JoinGroupRequest


def test_request_versions_follow_the_brokers_ranges():
    sim = Sim()
    sim.m.set_api_versions({10: (0, 2), 11: (0, 4), 14: (0, 2), 12: (0, 2), 13: (0, 1), 8: (2, 6), 9: (1, 5)})
    sim.m.subscribe(["alpha"], sim.now)
    find = sim.expect(m.FindCoordinatorRequest)
    assert (find.version, find.body.key, find.body.key_type) == (2, GROUP, 0)
    sim.reply(find, find_ok())
    join = sim.expect(m.JoinGroupRequest)
    assert join.version == 4
    sim.reply(join, join_ok("me-1", 1))
    sync = sim.expect(m.SyncGroupRequest)
    assert sync.version == 2
    sim.reply(sync, m.SyncGroupResponse(error_code=0, assignment=encode_assignment([TP("alpha", 0)])))
    fetch = sim.expect(m.OffsetFetchRequest)
    assert fetch.version == 5 and fetch.body.group_id == GROUP
    sim.reply(fetch, fetch_response(fetch, {TP("alpha", 0): 3}))
    assert sim.take(CommittedOffsets)[0].offsets == {TP("alpha", 0): OffsetAndMetadata(3, "md", 4)}
    sim.m.commit({TP("alpha", 0): OffsetAndMetadata(9, "x", 2)}, sim.now)
    commit = sim.expect(m.OffsetCommitRequest)
    assert commit.version == 6 and commit.body.retention_time_ms == -1
    assert commit.body.topics[0].partitions[0].committed_leader_epoch == 2
    sim.advance(1_000)
    assert type(sim.poll()[0].body) is m.HeartbeatRequest
    sim.m.close(sim.now)
    sim.reply(commit, commit_response(commit))
    (leave,) = [r for r in sim.poll() if isinstance(r.body, m.LeaveGroupRequest)]
    assert (leave.version, leave.body.member_id) == (1, "me-1")


def test_no_usable_version_is_a_fatal_group_failure():
    sim = Sim()
    sim.m.set_api_versions({10: (0, 6), 14: (0, 5), 12: (0, 4), 13: (0, 5), 8: (2, 9), 9: (1, 9)})  # no JoinGroup
    sim.m.subscribe(["alpha"], sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    assert sim.poll() == []
    (failure,) = sim.take(GroupFailure)
    assert failure.fatal and failure.error.error_code == E.UNSUPPORTED_VERSION
    assert sim.m.state is MemberState.UNJOINED and sim.poll() == []
    # static membership needs JoinGroup v5
    static = Sim(GroupMember(make_config(), group_instance_id="host-1", api_versions={10: 6, 11: 4}))
    static.m.subscribe(["alpha"], static.now)
    static.reply(static.expect(m.FindCoordinatorRequest), find_ok())
    assert static.poll() == [] and "static membership" in str(static.take(GroupFailure)[0].error)


def test_heartbeats_follow_the_interval_and_back_off_after_errors():
    sim = joined(Sim())
    assert sim.m.timeout_ms(sim.now) == 1_000
    sim.advance(999)
    assert sim.poll() == []
    sim.advance(1)
    beat = sim.expect(m.HeartbeatRequest)
    assert (beat.body.generation_id, beat.body.member_id, beat.version) == (1, "me-1", 4)
    sim.advance(2_000)
    assert sim.poll() == []  # one heartbeat in flight at a time
    sim.reply(beat, m.HeartbeatResponse(error_code=0))
    assert type(sim.poll()[0].body) is m.HeartbeatRequest  # overdue: at once
    beat = sim.m._heartbeat_request
    sim.reply(beat, m.HeartbeatResponse(error_code=E.COORDINATOR_LOAD_IN_PROGRESS))
    assert sim.m.timeout_ms(sim.now) == 100  # retry.backoff.ms
    sim.advance(100)
    assert type(sim.poll()[0].body) is m.HeartbeatRequest


@pytest.mark.parametrize("auto_commit", [False, True])
def test_rebalance_in_progress_revokes_then_rejoins_with_the_same_member_id(auto_commit):
    sim = joined(Sim(enable_auto_commit=auto_commit))
    sim.positions = {TP("alpha", 0): 11, TP("alpha", 1): 12, TP("beta", 0): 13, TP("gamma", 0): 99}
    sim.advance(1_000)
    beat = sim.expect(m.HeartbeatRequest)
    sim.m.handle_response(beat, m.HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS), sim.now)
    assert sim.m.state is MemberState.REBALANCING and sim.m.assignment == ()
    if auto_commit:  # the positions of the owned partitions are committed before giving them up
        commit = sim.poll_no_drain()[0]
        assert isinstance(commit.body, m.OffsetCommitRequest)
        assert {(t.name, p.partition_index, p.committed_offset) for t in commit.body.topics for p in t.partitions} \
            == {("alpha", 0, 11), ("alpha", 1, 12), ("beta", 0, 13)}
        assert (commit.body.generation_id_or_member_epoch, commit.body.member_id) == (1, "me-1")
    else:
        assert sim.poll_no_drain() == []  # JoinGroup waits for the revocation to be taken
    events = sim.m.drain_events()
    assert events == [PartitionsRevoked(ASSIGNED)]
    # the application commits in its revocation handler: JoinGroup waits for that too
    mine = sim.m.commit({TP("alpha", 0): 11}, sim.now, timeout_ms=1_000)
    requests = sim.poll()
    assert [type(r.body) for r in requests] == [m.OffsetCommitRequest]
    if auto_commit:
        sim.reply(commit, commit_response(commit))
        assert sim.poll() == []
    sim.reply(requests[0], commit_response(requests[0]))
    assert [e.request_id for e in sim.take(CommitCompleted) if e.error is None][-1] == mine
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == "me-1"
    assert decode_subscription(join.body.protocols[0].metadata).generation_id == 1
    assert join.body.reason == "the group is rebalancing"


@pytest.mark.parametrize("code, member_id_after", [(E.UNKNOWN_MEMBER_ID, ""), (E.ILLEGAL_GENERATION, "me-1")])
def test_heartbeat_fencing_errors_lose_the_partitions_and_rejoin(code, member_id_after):
    sim = joined(Sim(enable_auto_commit=True))
    sim.positions = {TP("alpha", 0): 5}
    sim.advance(1_000)
    sim.reply(sim.expect(m.HeartbeatRequest), m.HeartbeatResponse(error_code=code))
    assert sim.take() == [PartitionsLost(ASSIGNED)]
    join = sim.expect(m.JoinGroupRequest)  # no commit: the generation is gone
    assert join.body.member_id == member_id_after
    assert decode_subscription(join.body.protocols[0].metadata).generation_id == -1


def test_a_heartbeat_error_about_an_older_generation_is_ignored():
    sim = joined(Sim())
    sim.advance(1_000)
    old_beat = sim.expect(m.HeartbeatRequest)  # generation 1, answered only at the end
    sim.m.commit({TP("alpha", 0): 1}, sim.now)
    commit = sim.expect(m.OffsetCommitRequest)
    sim.reply(commit, commit_response(commit, E.REBALANCE_IN_PROGRESS))
    sim.take()
    sim.reply(sim.expect(m.JoinGroupRequest), join_ok("me-1", 2))
    sim.reply(sim.expect(m.SyncGroupRequest), sync_ok(ASSIGNED))
    sim.take()
    sim.reply(old_beat, m.HeartbeatResponse(error_code=E.ILLEGAL_GENERATION))
    assert sim.m.state is MemberState.STABLE and sim.m.generation.generation_id == 2 and not sim.take()
    sim.advance(1_000)
    assert m.HeartbeatRequest in [type(r.body) for r in sim.poll()]  # and heartbeats go on


def test_coordinator_errors_send_the_member_back_to_findcoordinator():
    sim = joined(Sim())
    sim.advance(1_000)
    sim.reply(sim.expect(m.HeartbeatRequest), m.HeartbeatResponse(error_code=E.NOT_COORDINATOR))
    assert sim.m.coordinator is None and sim.m.state is MemberState.STABLE  # keeps its partitions meanwhile
    find = sim.expect(m.FindCoordinatorRequest)
    sim.reply(find, find_error(E.COORDINATOR_NOT_AVAILABLE))
    assert sim.poll() == [] and sim.m.timeout_ms(sim.now) == 100
    sim.advance(100)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok(node=2))
    assert sim.m.coordinator.node_id == 2
    assert type(sim.poll()[0].body) is m.HeartbeatRequest  # overdue after the lookup
    # JoinGroup answered COORDINATOR_NOT_AVAILABLE: find it, then join again
    other = Sim()
    other.m.subscribe(["alpha"], other.now)
    other.reply(other.expect(m.FindCoordinatorRequest), find_ok())
    other.reply(other.expect(m.JoinGroupRequest), join_error(E.COORDINATOR_NOT_AVAILABLE))
    assert other.m.state is MemberState.FINDING_COORDINATOR
    other.reply(other.expect(m.FindCoordinatorRequest), find_ok())
    assert type(other.poll()[0].body) is m.JoinGroupRequest
    # a lost connection does the same, and a late answer to the lost request is ignored
    join = other.m._join_request
    other.m.handle_failure(join, other.now)
    assert other.m.coordinator is None
    other.m.handle_response(join, join_ok("me-1"), other.now)
    assert other.m.state is MemberState.FINDING_COORDINATOR
    # a fatal FindCoordinator error
    denied = Sim()
    denied.m.subscribe(["alpha"], denied.now)
    denied.reply(denied.expect(m.FindCoordinatorRequest), find_error(E.GROUP_AUTHORIZATION_FAILED))
    assert denied.take(GroupFailure)[0].fatal and denied.poll() == []


def test_join_group_errors():
    def fresh():
        sim = Sim()
        sim.m.subscribe(["alpha"], sim.now)
        sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
        sim.reply(sim.expect(m.JoinGroupRequest), join_error(E.MEMBER_ID_REQUIRED, "me-1"))
        return sim, sim.expect(m.JoinGroupRequest)

    sim, join = fresh()
    sim.reply(join, join_error(E.UNKNOWN_MEMBER_ID))
    assert sim.expect(m.JoinGroupRequest).body.member_id == ""
    sim, join = fresh()
    sim.reply(join, join_error(E.ILLEGAL_GENERATION))
    assert sim.expect(m.JoinGroupRequest).body.member_id == "me-1"
    sim, join = fresh()
    sim.reply(join, join_error(E.REBALANCE_IN_PROGRESS))
    assert sim.expect(m.JoinGroupRequest).body.member_id == "me-1"
    sim, join = fresh()
    sim.reply(join, join_error(E.COORDINATOR_LOAD_IN_PROGRESS))
    assert sim.poll() == []
    sim.advance(100)
    assert sim.expect(m.JoinGroupRequest).body.member_id == "me-1"
    for fatal in (E.INCONSISTENT_GROUP_PROTOCOL, E.GROUP_AUTHORIZATION_FAILED, E.FENCED_INSTANCE_ID,
                  E.INVALID_SESSION_TIMEOUT, E.GROUP_MAX_SIZE_REACHED):
        sim, join = fresh()
        sim.reply(join, join_error(fatal))
        (failure,) = sim.take(GroupFailure)
        assert failure.fatal and failure.error.error_code == fatal and fatal.name in str(failure.error)
        assert sim.m.state is MemberState.UNJOINED and sim.poll() == []
        sim.m.record_poll(sim.now)  # the next application poll tries again
        assert type(sim.poll()[0].body) is m.JoinGroupRequest
    # the coordinator picked a protocol we never offered
    sim, join = fresh()
    sim.reply(join, join_ok("me-1", protocol="roundrobin"))
    assert sim.take(GroupFailure)[0].error.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_sync_group_errors():
    def syncing():
        sim = Sim()
        sim.m.subscribe(["alpha"], sim.now)
        sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
        sim.reply(sim.expect(m.JoinGroupRequest), join_ok("me-1", 4))
        return sim, sim.expect(m.SyncGroupRequest)

    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=E.REBALANCE_IN_PROGRESS))
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == "me-1" and decode_subscription(join.body.protocols[0].metadata).generation_id == 4
    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=E.UNKNOWN_MEMBER_ID))
    assert sim.expect(m.JoinGroupRequest).body.member_id == ""
    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=E.ILLEGAL_GENERATION))
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == "me-1" and decode_subscription(join.body.protocols[0].metadata).generation_id == -1
    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=E.NOT_COORDINATOR))
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    assert sim.expect(m.JoinGroupRequest).body.member_id == "me-1"
    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=E.GROUP_AUTHORIZATION_FAILED))
    assert sim.take(GroupFailure)[0].fatal and sim.poll() == []
    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=0, protocol_type="consumer", protocol_name="range",
                                        assignment=b"\x00\x00\x00"))
    assert "does not decode" in str(sim.take(GroupFailure)[0].error)
    # an assignment of topics the member does not subscribe to: refused, and the member rejoins
    sim, sync = syncing()
    sim.reply(sync, sync_ok([TP("beta", 0)]))
    assert sim.m.assignment == () and not sim.take(PartitionsAssigned)
    sim.advance(100)
    assert type(sim.poll()[0].body) is m.JoinGroupRequest


def test_the_session_timeout_without_heartbeat_answers_means_finding_the_coordinator_again():
    sim = joined(Sim())
    while sim.now < 13_000:  # the coordinator keeps answering "retry later"
        sim.advance(sim.m.timeout_ms(sim.now))
        requests = sim.poll()
        for request in requests:
            if isinstance(request.body, m.HeartbeatRequest):
                sim.reply(request, m.HeartbeatResponse(error_code=E.COORDINATOR_LOAD_IN_PROGRESS))
        if sim.m.coordinator is None:
            break
    assert sim.m.coordinator is None and sim.now - 1_000 == 10_000  # session.timeout.ms after the sync
    assert sim.m.assignment == ASSIGNED and [type(r.body) for r in requests] == [m.FindCoordinatorRequest]


def test_requests_that_get_no_answer_expire():
    sim = Sim()
    sim.m.subscribe(["alpha"], sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    assert sim.m.timeout_ms(sim.now) == 65_000
    sim.advance(65_000)
    assert type(sim.poll()[0].body) is m.FindCoordinatorRequest  # expired: coordinator presumed gone
    sim.m.handle_response(join, join_ok("me-1"), sim.now)  # a late answer changes nothing
    assert sim.m.state is MemberState.FINDING_COORDINATOR


@pytest.mark.parametrize("static", [False, True])
def test_missing_max_poll_interval_leaves_the_group_and_the_next_poll_rejoins(static):
    member = GroupMember(make_config(max_poll_interval_ms=5_000), group_instance_id="host-1" if static else None)
    sim = joined(Sim(member))
    for _ in range(4):
        sim.advance(1_000)
        beat = sim.expect(m.HeartbeatRequest)
        sim.reply(beat, m.HeartbeatResponse(error_code=0))
    sim.advance(1_001)
    requests = sim.poll()
    if static:  # a static member keeps its place until its session times out
        assert requests == []
    else:
        (leave,) = requests
        assert [(x.member_id, x.reason) for x in leave.body.members] == [("me-1", "consumer poll timeout has expired")]
        sim.reply(leave, m.LeaveGroupResponse(error_code=0, members=[]))
    events = sim.take()
    assert events[0] == PartitionsLost(ASSIGNED) and isinstance(events[1], GroupFailure) and not events[1].fatal
    assert sim.m.state is MemberState.UNJOINED
    sim.advance(10_000)
    assert sim.poll() == []
    sim.m.record_poll(sim.now)
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == "" and (join.body.group_instance_id == ("host-1" if static else None))


def test_commits_carry_the_generation_and_report_their_outcome():
    sim = joined(Sim())
    rid = sim.m.commit({TP("alpha", 0): OffsetAndMetadata(10, "meta", 3), TP("beta", 0): 4}, sim.now)
    commit = sim.expect(m.OffsetCommitRequest)
    body = commit.body
    assert (body.group_id, body.generation_id_or_member_epoch, body.member_id, commit.version) == (GROUP, 1, "me-1", 9)
    assert {(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
            for t in body.topics for p in t.partitions} == {("alpha", 0, 10, 3, "meta"), ("beta", 0, 4, -1, "")}
    sim.reply(commit, commit_response(commit))
    (done,) = sim.take(CommitCompleted)
    assert done.request_id == rid and done.error is None and not done.auto
    assert done.offsets[TP("beta", 0)] == OffsetAndMetadata(4)
    # commitAsync: one attempt, a coordinator error fails it
    rid = sim.m.commit({TP("alpha", 0): 11}, sim.now)
    commit = sim.expect(m.OffsetCommitRequest)
    sim.reply(commit, commit_response(commit, E.NOT_COORDINATOR))
    (done,) = sim.take(CommitCompleted)
    assert done.error.error_code == E.NOT_COORDINATOR and done.error.retriable
    # commitSync: retried once the coordinator is found again
    rid = sim.m.commit({TP("alpha", 0): 12}, sim.now, timeout_ms=2_000)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    commit = sim.expect(m.OffsetCommitRequest)
    sim.reply(commit, commit_response(commit, E.COORDINATOR_LOAD_IN_PROGRESS))
    assert sim.poll() == []
    sim.advance(100)
    commit = sim.expect(m.OffsetCommitRequest)
    sim.reply(commit, commit_response(commit))
    assert [(e.request_id, e.error) for e in sim.take(CommitCompleted)] == [(rid, None)]
    # ... until its timeout
    rid = sim.m.commit({TP("alpha", 0): 13}, sim.now, timeout_ms=150)
    sim.expect(m.OffsetCommitRequest)
    sim.advance(150)
    sim.poll()
    (done,) = sim.take(CommitCompleted)
    assert done.request_id == rid and done.error.error_code == E.REQUEST_TIMED_OUT
    # an empty commit completes at once
    rid = sim.m.commit({}, sim.now)
    assert sim.take(CommitCompleted) == [CommitCompleted(rid, {})]
    with pytest.raises(ValueError):
        sim.m.commit({TP("alpha", 0): -1}, sim.now)
    with pytest.raises(TypeError):
        sim.m.commit({TP("alpha", 0): "7"}, sim.now)


@pytest.mark.parametrize("code", [E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.REBALANCE_IN_PROGRESS])
def test_a_commit_refused_for_the_generation_fails_and_the_member_rejoins(code):
    sim = joined(Sim())
    sim.m.commit({TP("alpha", 0): 1}, sim.now)
    commit = sim.expect(m.OffsetCommitRequest)
    sim.reply(commit, commit_response(commit, code))
    events = sim.take()
    expected_error = RebalanceInProgressError if code == E.REBALANCE_IN_PROGRESS else CommitFailedError
    assert isinstance(events[0], CommitCompleted) and isinstance(events[0].error, expected_error)
    lost_or_revoked = PartitionsRevoked if code == E.REBALANCE_IN_PROGRESS else PartitionsLost
    assert events[1:] == [lost_or_revoked(ASSIGNED)]
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == ("" if code == E.UNKNOWN_MEMBER_ID else "me-1")


def test_commits_during_a_rebalance_and_outside_any_group():
    sim = Sim()
    sim.m.subscribe(["alpha"], sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    sim.expect(m.JoinGroupRequest)
    sim.m.commit({TP("alpha", 0): 1}, sim.now)
    assert sim.poll() == []
    assert isinstance(sim.take(CommitCompleted)[0].error, RebalanceInProgressError)
    # no subscription (manual assignment): a plain commit for the group id
    solo = Sim()
    rid = solo.m.commit({TP("alpha", 0): 8}, solo.now)
    solo.reply(solo.expect(m.FindCoordinatorRequest), find_ok())
    commit = solo.expect(m.OffsetCommitRequest)
    assert (commit.body.generation_id_or_member_epoch, commit.body.member_id) == (-1, "")
    solo.reply(commit, commit_response(commit))
    assert solo.take(CommitCompleted) == [CommitCompleted(rid, {TP("alpha", 0): OffsetAndMetadata(8)})]
    rid = solo.m.fetch_committed([TP("alpha", 0), TP("alpha", 1)], solo.now)
    fetch = solo.expect(m.OffsetFetchRequest)
    solo.reply(fetch, fetch_response(fetch, {}, code=E.UNSTABLE_OFFSET_COMMIT))
    assert solo.poll() == []  # retried after the backoff
    solo.advance(100)
    fetch = solo.expect(m.OffsetFetchRequest)
    solo.reply(fetch, fetch_response(fetch, {TP("alpha", 0): 8}))
    assert solo.take(CommittedOffsets) == [CommittedOffsets(rid, {TP("alpha", 0): OffsetAndMetadata(8, "md", 4),
                                                                  TP("alpha", 1): None})]
    rid = solo.m.fetch_committed([TP("alpha", 0)], solo.now)
    fetch = solo.expect(m.OffsetFetchRequest)
    solo.reply(fetch, fetch_response(fetch, {}, code=E.TOPIC_AUTHORIZATION_FAILED))
    assert solo.take(CommittedOffsets)[0].error.error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_auto_commit_every_interval_while_stable():
    sim = joined(Sim(enable_auto_commit=True, auto_commit_interval_ms=2_500))
    sim.positions = {TP("alpha", 0): 100, TP("beta", 0): 7, TP("zeta", 9): 1}
    commits = []
    for _ in range(6):
        sim.advance(1_000)
        for request in sim.poll():
            if isinstance(request.body, m.OffsetCommitRequest):
                commits.append((sim.now, {(t.name, p.partition_index): p.committed_offset
                                          for t in request.body.topics for p in t.partitions}))
                sim.reply(request, commit_response(request))
            else:
                sim.reply(request, m.HeartbeatResponse(error_code=0))
    first = commits[0][0]
    assert [t - first for t, _ in commits] == [0, 3_000]  # due at 2.5 s, seen on the 1 s ticks
    assert commits[0][1] == {("alpha", 0): 100, ("beta", 0): 7}  # only what the member owns
    assert all(e.auto and e.error is None for e in sim.take(CommitCompleted))


def test_close_commits_revokes_and_leaves():
    sim = joined(Sim(enable_auto_commit=True))
    sim.positions = {TP("alpha", 1): 40}
    sim.m.close(sim.now)
    assert sim.m.state is MemberState.LEAVING
    commit = sim.poll_no_drain()[0]
    assert isinstance(commit.body, m.OffsetCommitRequest)
    assert sim.m.drain_events() == [PartitionsRevoked(ASSIGNED)]
    assert sim.poll() == []  # LeaveGroup after the final commit
    sim.reply(commit, commit_response(commit))
    leave = sim.expect(m.LeaveGroupRequest)
    assert [(x.member_id, x.group_instance_id, x.reason) for x in leave.body.members] == [
        ("me-1", None, "the consumer is being closed")]
    sim.reply(leave, m.LeaveGroupResponse(error_code=0, members=[
        m.LeaveGroupResponse.MemberResponse(member_id="me-1", error_code=0)]))
    assert sim.m.closed and sim.poll() == []
    with pytest.raises(Exception, match="closed"):
        sim.m.commit({TP("alpha", 0): 1}, sim.now)
    # a static member does not leave; a close that cannot finish ends at its timeout
    static = joined(Sim(GroupMember(make_config(), group_instance_id="host-1")))
    static.m.close(static.now)
    assert static.poll() == [] and static.poll() == []  # revocation taken, then done
    assert static.m.closed
    stuck = joined(Sim())
    stuck.m.commit({TP("alpha", 0): 1}, stuck.now, timeout_ms=60_000)
    stuck.m.close(stuck.now, timeout_ms=2_000)
    assert [type(r.body) for r in stuck.poll()] == [m.OffsetCommitRequest]
    stuck.advance(2_000)
    stuck.poll()
    assert stuck.m.closed and stuck.take(CommitCompleted)[0].error is not None


def test_changing_the_subscription_rejoins_with_the_new_topics():
    sim = joined(Sim())
    sim.m.subscribe(["alpha", "gamma"], sim.now)
    assert sim.m.state is MemberState.REBALANCING
    sim.take()
    join = sim.expect(m.JoinGroupRequest)
    assert decode_subscription(join.body.protocols[0].metadata).topics == ("alpha", "gamma")
    assert join.body.reason == "subscription changed"
    with pytest.raises(TypeError):
        sim.m.subscribe("alpha", sim.now)
    sim.m.unsubscribe(sim.now)
    assert sim.m.state is MemberState.UNJOINED and sim.m.subscription is None


def test_an_offset_fetch_for_an_assignment_already_gone_is_dropped():
    sim = Sim()
    sim.m.subscribe(TOPICS, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    sim.reply(sim.expect(m.JoinGroupRequest), join_ok("me-1"))
    sim.reply(sim.expect(m.SyncGroupRequest), sync_ok(ASSIGNED))
    fetch = sim.expect(m.OffsetFetchRequest)
    sim.reply(fetch, fetch_response(fetch, {}, top_code=E.NOT_COORDINATOR))
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    sim.advance(100)
    fetch = sim.expect(m.OffsetFetchRequest)  # retried after finding the coordinator
    sim.advance(1_000)
    beat = [r for r in sim.poll() if isinstance(r.body, m.HeartbeatRequest)][0]
    sim.reply(beat, m.HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS))
    sim.reply(fetch, fetch_response(fetch, {TP("alpha", 0): 3}))
    assert not sim.take(CommittedOffsets)
    with pytest.raises(TypeError):
        sim.m.handle_response(fetch, m.HeartbeatResponse(error_code=0), sim.now)


def test_group_member_needs_a_group_id_and_positions_for_auto_commit():
    with pytest.raises(ValueError, match="group.id"):
        GroupMember(ConsumerConfig())
    with pytest.raises(ValueError, match="positions"):
        GroupMember(ConsumerConfig(group_id="g"))
    with pytest.raises(ValueError, match="group.instance.id"):
        GroupMember(make_config(), group_instance_id="")


# =========================================================================================================
# Against the reference broker: a blocking driver over raw sockets
# =========================================================================================================

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

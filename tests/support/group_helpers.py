"""Shared by the group tests (tests/client/group/): the peers'
assignors to compare ours with (kafka-python's range and round-robin, aiokafka's round-robin), and ``Sim``,
a GroupMember on a clock whose requests and hand-built answers all go through the codec."""
from __future__ import annotations

from types import SimpleNamespace

from kafkawire import messages as m
from kafkawire.client.core.group.assignors import encode_assignment
from kafkawire.client.core.consumer.config import ConsumerConfig
from kafkawire.client.core.group.member import GroupMember
from kafkawire.client.core.group.protocol import MemberState
from kafkawire.client.core.topic_partition import TopicPartition as TP
from kafkawire.error_codes import ErrorCode as E


# ---- the peers' assignors ---------------------------------------------------------------------------------

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


# ---- a GroupMember driven by hand -------------------------------------------------------------------------

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

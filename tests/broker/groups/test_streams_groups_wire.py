"""Streams groups (KIP-1071) over the wire, against a model of a Kafka Streams client
(support.streams_member): missing source topics in the status, internal topics created with the
partition counts the coordinator decides, tasks moving between members with revocation first,
standby tasks on another process, endpoint information, StreamsGroupDescribe, ListGroups,
DeleteGroups and offset commits by members."""
from __future__ import annotations

import itertools

import pytest

from support.broker_harness import RawClient, own_broker
from support.broker_wire import create_topic
from support.streams_member import StreamsMember, topology
from kafkawire import messages as m
from kafkawire.error_codes import ErrorCode

broker = own_broker(group_streams_num_standby_replicas=1)
MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED, MISSING_INTERNAL_TOPICS = 1, 2, 3
_names = itertools.count()


@pytest.fixture
def client(broker):
    with RawClient(broker.port) as raw:
        yield raw


def _beat(client, member, leave=False):
    response = client.request(member.heartbeat(leave), 0)
    member.received(response)
    return response


def _settle(client, members, rounds=10):
    """Heartbeat every member in turn until a whole round changes nothing; at every step no task is
    active on two members, nor active and standby on one process."""
    for _ in range(rounds):
        before = [(x.epoch, x.active, x.standby) for x in members]
        for member in members:
            _beat(client, member)
            actives = [t for x in members for t in x.active]
            assert len(actives) == len(set(actives)), "a task is active on two members"
            for x in members:
                for y in members:
                    if x.process_id == y.process_id:
                        assert not x.active & y.standby
        if before == [(x.epoch, x.active, x.standby) for x in members]:
            return
    raise AssertionError("the group did not settle")


def test_missing_source_topics_are_reported_until_created(broker, client):
    source = f"in-{next(_names)}"
    member = StreamsMember(f"app-{next(_names)}", "m1", topology({"id": "0", "sources": [source]}))
    _beat(client, member)
    assert member.status == [(MISSING_SOURCE_TOPICS, f"Source topics {source} are missing.")]
    assert member.active == set()
    first_epoch = member.epoch
    create_topic(client, source, 3)
    _beat(client, member)
    assert member.status == [] and member.epoch > first_epoch
    assert member.active == {("0", p) for p in range(3)}


def test_internal_topics_are_created_with_the_decided_partition_counts(broker, client):
    app, source = f"app-{next(_names)}", f"in-{next(_names)}"
    create_topic(client, source, 4)
    shape = topology({"id": "0", "sources": [source], "sinks": [f"{app}-rep"], "changelogs": [f"{app}-0-log"]},
                     {"id": "1", "repartition": {f"{app}-rep": 0}, "changelogs": [f"{app}-1-log"]})
    member = StreamsMember(app, "m1", shape)
    _beat(client, member)
    assert member.status[0][0] == MISSING_INTERNAL_TOPICS
    for name in (f"{app}-rep", f"{app}-0-log", f"{app}-1-log"):
        assert len(broker.broker.topics.get(name).partitions) == 4
    _beat(client, member)
    assert member.status == []
    assert member.active == {(s, p) for s in "01" for p in range(4)}


def test_copartitioned_sources_must_agree(broker, client):
    left, right = f"left-{next(_names)}", f"right-{next(_names)}"
    create_topic(client, left, 2)
    create_topic(client, right, 3)
    member = StreamsMember(f"app-{next(_names)}", "m1",
                           topology({"id": "0", "sources": [left, right], "copartition": [[0, 1]]}))
    _beat(client, member)
    assert member.status[0][0] == INCORRECTLY_PARTITIONED and member.active == set()


def test_tasks_move_with_revocation_first_and_come_back_when_a_member_leaves(broker, client):
    source = f"in-{next(_names)}"
    create_topic(client, source, 6)
    shape = topology({"id": "0", "sources": [source]})  # stateless: no standbys
    group = f"app-{next(_names)}"
    a, b = StreamsMember(group, "a", shape), StreamsMember(group, "b", shape)
    _settle(client, [a])
    assert len(a.active) == 6
    _beat(client, b)
    assert b.active == set()  # a still owns them all: nothing is handed over before a revokes
    _settle(client, [a, b])
    assert len(a.active) == len(b.active) == 3
    assert len(a.revoked[-2] | a.revoked[-1]) == 3  # a gave three up
    response = _beat(client, b, leave=True)
    assert response.member_epoch == -1
    _settle(client, [a])
    assert len(a.active) == 6


def test_standby_tasks_go_to_another_process(broker, client):
    source, group = f"in-{next(_names)}", f"app-{next(_names)}"
    create_topic(client, source, 4)
    shape = topology({"id": "0", "sources": [source], "changelogs": [f"{group}-store-changelog"]})
    members = [StreamsMember(group, name, shape, endpoint=("host-" + name, 7000)) for name in "ab"]
    for member in members:
        _beat(client, member)  # the first creates the changelog topic
    _settle(client, members)
    a, b = members
    assert len(a.active) == len(b.active) == 2
    assert a.standby == b.active and b.standby == a.active  # a standby of every task, on the other process
    hosts = {e.user_endpoint.host: {(tp.topic, p) for tp in e.active_partitions for p in tp.partitions}
             for e in b.endpoints}
    assert hosts == {"host-a": {(source, p) for _, p in a.active}, "host-b": {(source, p) for _, p in b.active}}
    # two members of one process never hold the active and a standby of one task
    c = StreamsMember(group, "c", shape, process_id="a")
    _beat(client, c)
    _settle(client, [a, b, c])
    assert not (a.active | c.active) & (a.standby | c.standby)


def test_describe_list_offsets_and_delete(broker, client):
    source, group = f"in-{next(_names)}", f"app-{next(_names)}"
    create_topic(client, source, 2)
    member = StreamsMember(group, "m1", topology({"id": "0", "sources": [source]}))
    _settle(client, [member])
    (described,) = client.request(m.StreamsGroupDescribeRequest(group_ids=[group]), 0).groups
    assert (described.error_code, described.group_state, list(described.topology.subtopologies[0].source_topics)) == \
        (0, "Stable", [source])
    (desc_member,) = described.members
    assert desc_member.member_epoch == member.epoch and desc_member.process_id == "m1"
    assert {(t.subtopology_id, tuple(t.partitions)) for t in desc_member.assignment.active_tasks} == {("0", (0, 1))}
    listed = client.request(m.ListGroupsRequest(states_filter=[], types_filter=["streams"]), 5).groups
    assert (group, "streams", "Stable") in {(g.group_id, g.group_type, g.group_state) for g in listed}
    (other,) = client.request(m.StreamsGroupDescribeRequest(group_ids=["no-such-group"]), 0).groups
    assert other.error_code == ErrorCode.GROUP_ID_NOT_FOUND

    def commit(epoch):
        request = m.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=epoch, member_id="m1",
                                        topics=[m.OffsetCommitRequest.OffsetCommitRequestTopic(name=source, partitions=[
                                            m.OffsetCommitRequest.OffsetCommitRequestPartition(
                                                partition_index=0, committed_offset=5)])])
        return client.request(request, 9).topics[0].partitions[0].error_code
    assert commit(member.epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(member.epoch) == 0
    # a consumer group heartbeat and a classic join are refused for the id
    consumer = client.request(m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id="x", member_epoch=0, rebalance_timeout_ms=1000, subscribed_topic_names=[source],
        topic_partitions=[]), 1)
    assert consumer.error_code == ErrorCode.GROUP_ID_NOT_FOUND

    def delete():
        return client.request(m.DeleteGroupsRequest(groups_names=[group]), 2).results[0].error_code
    assert delete() == ErrorCode.NON_EMPTY_GROUP
    _beat(client, member, leave=True)
    assert delete() == 0
    assert broker.broker.groups.committed(group) == {}


@pytest.mark.parametrize("change, error", [
    (lambda r: setattr(r, "group_id", ""), ErrorCode.INVALID_REQUEST),
    (lambda r: setattr(r, "rebalance_timeout_ms", -1), ErrorCode.INVALID_REQUEST),
    (lambda r: setattr(r.topology.subtopologies[0].state_changelog_topics[0], "partitions", 3),
     ErrorCode.STREAMS_INVALID_TOPOLOGY),
    (lambda r: setattr(r, "member_epoch", 5), ErrorCode.GROUP_ID_NOT_FOUND),  # as Kafka: no such group
])
def test_bad_heartbeats_get_kafkas_errors(broker, client, change, error):
    member = StreamsMember(f"app-{next(_names)}", "m1", topology({"id": "0", "sources": ["x"], "changelogs": ["c"]}))
    request = member.heartbeat()
    change(request)
    if request.member_epoch != 0:
        request.topology = None
    assert client.request(request, 0).error_code == error


def test_members_carry_on_after_a_kill_and_restart(tmp_path, processes):
    server = processes(tmp_path, "--override", "group.streams.num.standby.replicas=1")
    shape = topology({"id": "0", "sources": ["in"], "changelogs": ["wc-store-changelog"]})
    members = [StreamsMember("wc", name, shape) for name in "ab"]
    with RawClient(server.port) as raw:
        create_topic(raw, "in", 4)
        for member in members:
            _beat(raw, member)
        _settle(raw, members)
    before = [(x.epoch, x.active, x.standby) for x in members]
    port = server.port
    server.kill()
    server = processes(tmp_path, "--port", str(port), "--override", "group.streams.num.standby.replicas=1")
    with RawClient(server.port) as raw:
        for member in members:
            _beat(raw, member)  # its epoch is still known: no FENCED_MEMBER_EPOCH, no rebalance
        assert [(x.epoch, x.active, x.standby) for x in members] == before
        (described,) = raw.request(m.StreamsGroupDescribeRequest(group_ids=["wc"]), 0).groups
        assert described.group_state == "Stable" and len(described.members) == 2

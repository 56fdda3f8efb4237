"""Share groups in the group admin APIs, as Kafka answers them: DescribeGroups (a share group is not a
classic group), ListGroups by type, DeleteGroups (NON_EMPTY_GROUP while members are in; then the share
state goes with the group), and a group id belonging to one group type only (JoinGroup and
ConsumerGroupHeartbeat refuse a share group's id, ShareGroupHeartbeat a consumer group's)."""
from __future__ import annotations

import itertools
import time

import pytest

from support.broker_harness import BrokerThread, RawClient
from support.broker_wire import create_topic
from kafkawire import messages as m
from kafkawire.error_codes import ErrorCode

_names = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("share-admin") / "data",
                      share_auto_offset_reset="earliest") as running:
        yield running


@pytest.fixture
def client(broker):
    with RawClient(broker.port) as raw:
        yield raw


def _topic_with_records(broker, count: int) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"share-admin-{next(_names)}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1)])[name].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(count):
        producer.produce(name, value=f"v{i}".encode())
    assert producer.flush(15) == 0
    return name


def _delete(broker, group: str) -> int:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.error import KafkaException
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.delete_consumer_groups([group], request_timeout=15).values()
    try:
        future.result(15)
        return ErrorCode.NONE
    except KafkaException as refused:
        return refused.args[0].code()


def _join_share(client, group: str, topic: str, member: str = "m1") -> None:
    joined = client.request(m.ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                                         subscribed_topic_names=[topic]), 1)
    assert joined.error_code == ErrorCode.NONE


def test_describe_groups_says_a_share_group_is_not_a_classic_group(client):
    name = f"share-admin-{next(_names)}"
    create_topic(client, name, 1)
    _join_share(client, "not-classic", name)
    (described,) = client.request(m.DescribeGroupsRequest(groups=["not-classic"]), 6).groups
    assert (described.error_code, described.group_state) == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead")
    assert described.error_message == "Group not-classic is not a classic group."
    (older,) = client.request(m.DescribeGroupsRequest(groups=["not-classic"]), 5).groups
    assert (older.error_code, older.group_state) == (ErrorCode.NONE, "Dead")
    listed = client.request(m.ListGroupsRequest(types_filter=["consumer", "classic"]), 5)
    assert "not-classic" not in [g.group_id for g in listed.groups]
    listed = client.request(m.ListGroupsRequest(), 5)
    assert [(g.group_type, g.protocol_type) for g in listed.groups if g.group_id == "not-classic"] == [
        ("share", "share")]


def test_one_group_id_one_group_type(broker, client):
    name = f"share-admin-{next(_names)}"
    create_topic(client, name, 1)
    _join_share(client, "taken-by-share", name)
    join = client.request(m.JoinGroupRequest(group_id="taken-by-share", session_timeout_ms=10_000,
                                             rebalance_timeout_ms=10_000, member_id="", protocol_type="consumer",
                                             protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(
                                                 name="range", metadata=b"")]), 9)
    assert (join.error_code, join.member_id) == (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
    heartbeat = client.request(m.ConsumerGroupHeartbeatRequest(
        group_id="taken-by-share", member_id="c1", member_epoch=0, rebalance_timeout_ms=10_000,
        subscribed_topic_names=[name], topic_partitions=[]), 1)
    assert heartbeat.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert heartbeat.error_message == "Group taken-by-share is not a consumer group."
    heartbeat = client.request(m.ConsumerGroupHeartbeatRequest(
        group_id="taken-by-consumer", member_id="c1", member_epoch=0, rebalance_timeout_ms=10_000,
        subscribed_topic_names=[name], topic_partitions=[]), 1)
    assert heartbeat.error_code == ErrorCode.NONE
    share = client.request(m.ShareGroupHeartbeatRequest(group_id="taken-by-consumer", member_id="s1", member_epoch=0,
                                                        subscribed_topic_names=[name]), 1)
    assert share.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_delete_groups_refuses_a_share_group_with_members_then_deletes_its_state(broker, client):
    from confluent_kafka import ShareConsumer
    topic = _topic_with_records(broker, 5)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "deleted-share"})
    consumer.subscribe([topic])
    try:
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            got += consumer.poll(1.0)
        assert len(got) == 5
        consumer.commit_sync(15)
        assert _delete(broker, "deleted-share") == ErrorCode.NON_EMPTY_GROUP
    finally:
        consumer.close()  # leaves the group
    assert _delete(broker, "deleted-share") == ErrorCode.NONE
    offsets = client.request(m.DescribeShareGroupOffsetsRequest(groups=[
        m.DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id="deleted-share",
                                                                                  topics=None)]), 1)
    assert offsets.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    (described,) = client.request(m.ShareGroupDescribeRequest(group_ids=["deleted-share"]), 1).groups
    assert described.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert _delete(broker, "deleted-share") == ErrorCode.GROUP_ID_NOT_FOUND
    # a new group of that id starts afresh: every record again
    again = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "deleted-share"})
    again.subscribe([topic])
    try:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            got += again.poll(1.0)
        assert sorted((msg.offset(), msg.delivery_count()) for msg in got) == [(i, 1) for i in range(5)]
    finally:
        again.close()


def test_a_share_group_with_state_is_listed_after_a_restart(tmp_path):
    from confluent_kafka import ShareConsumer
    with BrokerThread(data_dir=tmp_path / "data", share_auto_offset_reset="earliest") as first:
        topic = _topic_with_records(first, 3)
        consumer = ShareConsumer({"bootstrap.servers": first.bootstrap, "group.id": "kept-share"})
        consumer.subscribe([topic])
        try:
            got: list = []
            deadline = time.monotonic() + 30
            while len(got) < 3 and time.monotonic() < deadline:
                got += consumer.poll(1.0)
            consumer.commit_sync(15)
        finally:
            consumer.close()
    with BrokerThread(data_dir=tmp_path / "data") as second, RawClient(second.port) as raw:
        listed = raw.request(m.ListGroupsRequest(types_filter=["share"]), 5)
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("kept-share", "Empty")]
        assert _delete(second, "kept-share") == ErrorCode.NONE
    with BrokerThread(data_dir=tmp_path / "data") as third, RawClient(third.port) as raw:
        assert not raw.request(m.ListGroupsRequest(types_filter=["share"]), 5).groups

"""The admin client's share group calls (KIP-932) against kafkawire's broker, blocking and asyncio: a share
group made by setting its offsets, listed, described, its share partitions' start offsets and lag listed,
altered and deleted, the group deleted; and Kafka's errors: GROUP_ID_NOT_FOUND for a group that does not
exist (or is not a share group), NON_EMPTY_GROUP for offsets or a group while a member is in it."""
from __future__ import annotations

import asyncio
import itertools

import pytest

from kafkawire import messages as m
from kafkawire.client import KafkaError
from kafkawire.client.admin import (
    AdminClient, AsyncAdminClient, ConsumerGroupState, ShareGroupDescription, SharePartitionOffsetInfo,
    TopicPartition,
)
from kafkawire.error_codes import ErrorCode
from support.broker_harness import RawClient

confluent_kafka = pytest.importorskip("confluent_kafka")

TIMEOUT = 30
_names = itertools.count()


def _name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def _topic_with_records(shared_broker, records: int) -> str:
    topic = shared_broker.topic(2)
    producer = confluent_kafka.Producer({"bootstrap.servers": shared_broker.bootstrap})
    for i in range(records):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0
    return topic




def _join(client: RawClient, group: str, topic: str) -> None:
    joined = client.request(m.ShareGroupHeartbeatRequest(group_id=group, member_id=f"{group}-member", member_epoch=0,
                                                         subscribed_topic_names=[topic]), 1)
    assert joined.error_code == ErrorCode.NONE


def _error(outcome) -> str:
    assert isinstance(outcome, KafkaError), outcome
    return outcome.name


def test_a_share_group_is_listed_described_and_its_offsets_altered_listed_and_deleted(shared_broker):
    topic = _topic_with_records(shared_broker, 5)
    group = _name("admin-share")
    first, second = TopicPartition(topic, 0), TopicPartition(topic, 1)
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    try:
        # an id not in use becomes a share group, its partition starting at 3
        assert admin.alter_share_group_offsets(group, {first: 3})[first].result(TIMEOUT) is None
        listed = admin.list_share_groups().result(TIMEOUT)
        assert (group, ConsumerGroupState.EMPTY) in {(g.group_id, g.state) for g in listed.valid}
        assert listed.errors == ()
        described = admin.describe_share_groups([group, "no-such-share-group"])
        description = described[group].result(TIMEOUT)
        assert isinstance(description, ShareGroupDescription)
        assert (description.group_id, description.state, description.members) == (group, ConsumerGroupState.EMPTY, ())
        assert description.coordinator is not None and description.coordinator.id == int(shared_broker.node)
        with pytest.raises(KafkaError) as unknown:
            described["no-such-share-group"].result(TIMEOUT)
        assert unknown.value.name == "GROUP_ID_NOT_FOUND"

        every = admin.list_share_group_offsets({group: None})[group].result(TIMEOUT)
        assert every == {first: SharePartitionOffsetInfo(3, every[first].leader_epoch, lag=2)}
        asked = admin.list_share_group_offsets({group: [first, second]})[group].result(TIMEOUT)
        assert asked == {first: every[first], second: None}  # no state for the second partition

        assert admin.delete_share_group_offsets(group, [topic])[topic].result(TIMEOUT) is None
        assert admin.list_share_group_offsets({group: [first]})[group].result(TIMEOUT) == {first: None}
    finally:
        admin.close()


def test_share_groups_are_deleted_when_empty(shared_broker):
    topic = _topic_with_records(shared_broker, 1)
    empty, busy = _name("admin-share-empty"), _name("admin-share-member")
    first = TopicPartition(topic, 0)
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    try:
        assert admin.alter_share_group_offsets(empty, {first: 0})[first].result(TIMEOUT) is None
        with RawClient(shared_broker.port) as member:
            _join(member, busy, topic)
            deleted = admin.delete_share_groups([empty, busy, "never-a-group"])
            assert deleted[empty].result(TIMEOUT) is None
            for group, error in ((busy, "NON_EMPTY_GROUP"), ("never-a-group", "GROUP_ID_NOT_FOUND")):
                with pytest.raises(KafkaError) as refused:
                    deleted[group].result(TIMEOUT)
                assert refused.value.name == error
        assert empty not in {g.group_id for g in admin.list_share_groups().result(TIMEOUT).valid}
    finally:
        admin.close()


def test_a_share_group_with_a_member_refuses_changes(shared_broker):
    topic = _topic_with_records(shared_broker, 2)
    group = _name("admin-share-busy")
    first = TopicPartition(topic, 0)
    with RawClient(shared_broker.port, client_id="share-member") as member:
        _join(member, group, topic)

        async def calls():
            async with AsyncAdminClient(bootstrap_servers=shared_broker.bootstrap) as admin:
                stable = await admin.list_share_groups(states=[ConsumerGroupState.STABLE])
                described = await admin.describe_share_groups([group])
                altered = await admin.alter_share_group_offsets(group, {first: 0})
                deleted_offsets = await admin.delete_share_group_offsets(group, [topic])
                return stable, described, altered, deleted_offsets
        stable, described, altered, deleted_offsets = asyncio.run(asyncio.wait_for(calls(), TIMEOUT))
    assert group in {g.group_id for g in stable.valid}
    (only,) = described[group].members
    assert (only.member_id, only.client_id) == (f"{group}-member", "share-member")
    assert only.assignment.topic_partitions == (first, TopicPartition(topic, 1))  # every member gets every partition
    assert _error(altered[first]) == "NON_EMPTY_GROUP"
    assert _error(deleted_offsets[topic]) == "NON_EMPTY_GROUP"


def test_a_consumer_group_is_not_a_share_group(shared_broker):
    topic = _topic_with_records(shared_broker, 1)
    group = _name("admin-classic")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()

    async def describe():
        async with AsyncAdminClient(bootstrap_servers=shared_broker.bootstrap) as admin:
            return (await admin.describe_share_groups([group]))[group], await admin.list_share_groups()
    outcome, listed = asyncio.run(asyncio.wait_for(describe(), TIMEOUT))
    assert _error(outcome) == "GROUP_ID_NOT_FOUND" and "not a share group" in str(outcome)
    assert group not in {g.group_id for g in listed.valid}

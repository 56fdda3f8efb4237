"""Share groups on the in-process cluster: the group's coordinator serves its membership (NOT_COORDINATOR
elsewhere), partition leaders serve ShareFetch and ShareAcknowledge (NOT_LEADER_OR_FOLLOWER elsewhere,
with the current leader and its endpoint), and confluent-kafka's ShareConsumer reads every record once
from a 3-broker cluster, also after the partition leaders move."""
from __future__ import annotations

import time

import pytest

from support.broker_harness import RawClient
from kafkawire import messages as m
from kafkawire.broker import ClusterThread
from kafkawire.error_codes import ErrorCode

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster():
    with ClusterThread(brokers=3, share_auto_offset_reset="earliest", group_initial_rebalance_delay_ms=0) as running:
        yield running


def _produce(cluster, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    assert producer.flush(15) == 0


def _poll_until(consumer, wanted: int, deadline_s: float = 40) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < wanted and time.monotonic() < deadline:
        for message in consumer.poll(1.0):
            assert message.error() is None, message.error()
            got.append(message.value())
    return got


def _port(cluster, node: int) -> int:
    return cluster.cluster.broker(node).port


def test_share_consumer_reads_every_record_once_across_leader_moves(cluster):
    from confluent_kafka import ShareConsumer
    topic = "cluster-share"
    cluster.create_topic(topic, PARTITIONS)
    first = [f"a{i}".encode() for i in range(60)]
    _produce(cluster, topic, first)
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": "cluster-share",
                              "topic.metadata.refresh.interval.ms": 500})
    consumer.subscribe([topic])
    try:
        got = _poll_until(consumer, len(first))
        assert sorted(got) == sorted(first)
        consumer.commit_sync(15)
        for partition in range(PARTITIONS):
            cluster.move_leader(topic, partition)
        second = [f"b{i}".encode() for i in range(30)]
        _produce(cluster, topic, second)
        assert sorted(_poll_until(consumer, len(second))) == sorted(second)
        consumer.commit_sync(15)
    finally:
        consumer.close()


def test_share_fetch_at_a_follower_names_the_leader(cluster):
    topic = "cluster-share-follower"
    cluster.create_topic(topic, 1)
    _produce(cluster, topic, [b"x"])
    leader = cluster.leader(topic, 0)
    follower = next(node for node in cluster.node_ids if node != leader)
    topic_id = cluster.cluster.broker(leader).topics.get(topic).topic_id
    Request = m.ShareFetchRequest
    with RawClient(_port(cluster, follower)) as client:
        response = client.request(Request(
            group_id="follower-share", member_id="m1", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
            max_bytes=1 << 20, max_records=10, batch_size=10,
            topics=[Request.FetchTopic(topic_id=topic_id, partitions=[Request.FetchPartition(partition_index=0)])]),
            1)
        (partition,) = response.responses[0].partitions
        assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert partition.current_leader.leader_id == leader and not partition.acquired_records
        assert [(e.node_id, e.port) for e in response.node_endpoints] == [(leader, _port(cluster, leader))]
        acknowledge = client.request(m.ShareAcknowledgeRequest(
            group_id="follower-share", member_id="m1", share_session_epoch=1, topics=[
                m.ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=topic_id, partitions=[
                    m.ShareAcknowledgeRequest.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                        m.ShareAcknowledgeRequest.AcknowledgementBatch(first_offset=0, last_offset=0,
                                                                       acknowledge_types=[1])])])]), 1)
        (acked,) = acknowledge.responses[0].partitions
        assert acked.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert acked.current_leader.leader_id == leader


def test_share_group_membership_at_its_coordinator_only(cluster):
    topic = "cluster-share-coordinator"
    cluster.create_topic(topic, 1)
    coordinator = cluster.coordinator("coordinated-share")
    other = next(node for node in cluster.node_ids if node != coordinator)
    heartbeat = m.ShareGroupHeartbeatRequest(group_id="coordinated-share", member_id="m1", member_epoch=0,
                                             subscribed_topic_names=[topic])
    with RawClient(_port(cluster, other)) as client:
        assert client.request(heartbeat, 1).error_code == ErrorCode.NOT_COORDINATOR
        (described,) = client.request(m.ShareGroupDescribeRequest(group_ids=["coordinated-share"]), 1).groups
        assert described.error_code == ErrorCode.NOT_COORDINATOR
    with RawClient(_port(cluster, coordinator)) as client:
        assert client.request(heartbeat, 1).error_code == ErrorCode.NONE

"""DescribeQuorum (issue 35): a single broker answers as a KRaft combined-mode node, the leader and only
voter of ``__cluster_metadata``; an in-process cluster's nodes are every voter, the controller leading.
Through kafka-python's KafkaAdminClient.describe_metadata_quorum and at the wire level."""
from __future__ import annotations

import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from kafkawire import messages as m
from kafkawire.broker.cluster import ClusterThread
from support.broker_harness import RawClient, own_broker

TIMEOUT_S = 15
broker = own_broker()


def _admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)


def _request(topic: str = "__cluster_metadata", partitions: tuple[int, ...] = (0,)) -> m.DescribeQuorumRequest:
    return m.DescribeQuorumRequest(topics=[m.DescribeQuorumRequest.TopicData(
        topic_name=topic, partitions=[m.DescribeQuorumRequest.PartitionData(partition_index=p) for p in partitions])])


def test_a_single_broker_is_the_leader_and_only_voter(broker):
    admin = _admin(f"127.0.0.1:{broker.port}")
    try:
        before_ms = int(time.time() * 1000)
        first = admin.describe_metadata_quorum()
        admin.create_topics([NewTopic("quorum-grows", 1, 1)])
        second = admin.describe_metadata_quorum()
    finally:
        admin.close()
    partition = first["topics"][0]["partitions"][0]
    assert first["topics"][0]["topic_name"] == "__cluster_metadata"
    assert (partition["partition_index"], partition["error"], partition["leader_id"], partition["leader_epoch"]) == (
        0, None, 0, 1)
    [voter] = partition["current_voters"]
    assert partition["observers"] == []
    assert voter["replica_id"] == 0 and voter["log_end_offset"] == partition["high_watermark"]
    assert voter["last_fetch_timestamp"] >= before_ms and voter["last_caught_up_timestamp"] >= before_ms
    # v2: the voter's endpoint, on the listener asked
    assert first["nodes"] == [{"node_id": 0, "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1",
                                                             "port": broker.port}]}]
    # a topic created is a metadata change: the high watermark moves on
    assert second["topics"][0]["partitions"][0]["high_watermark"] > partition["high_watermark"]


def test_other_partitions_are_unknown_and_old_versions_answer(broker):
    with RawClient(broker.port) as client:
        for asked in (_request("orders"), _request(partitions=(0, 1)), _request(partitions=(3,))):
            answer = client.request(asked, 2)
            codes = [(t.topic_name, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions]
            assert codes == [(t.topic_name, p.partition_index, 3) for t in asked.topics for p in t.partitions]
        for version in (0, 1):
            answer = client.request(_request(), version)
            partition = answer.topics[0].partitions[0]
            assert (answer.error_code, partition.error_code, partition.leader_id) == (0, 0, 0)
            assert [v.replica_id for v in partition.current_voters] == [0]


@pytest.fixture(scope="module")
def cluster():
    with ClusterThread(brokers=3) as running:
        yield running


def test_a_cluster_has_every_node_as_a_voter_and_a_new_controller_bumps_the_epoch(cluster):
    quorum = _describe(cluster.bootstrap)
    partition = quorum["topics"][0]["partitions"][0]
    assert (partition["leader_id"], partition["leader_epoch"]) == (1, 1)
    assert [v["replica_id"] for v in partition["current_voters"]] == [1, 2, 3]
    assert {node["node_id"] for node in quorum["nodes"]} == {1, 2, 3}
    cluster.stop_broker(1)  # the controller: node 2 takes over, in a new epoch
    try:
        after = _describe(cluster.bootstrap)  # (a new client: kafka-python does not retry elsewhere)
    finally:
        cluster.start_broker(1)
    partition = after["topics"][0]["partitions"][0]
    assert (partition["leader_id"], partition["leader_epoch"]) == (2, 2)
    stopped = next(v for v in partition["current_voters"] if v["replica_id"] == 1)
    live = next(v for v in partition["current_voters"] if v["replica_id"] == 3)
    assert stopped["last_caught_up_timestamp"] <= live["last_caught_up_timestamp"]
    assert live["log_end_offset"] == partition["high_watermark"]
    assert next(node for node in after["nodes"] if node["node_id"] == 1)["listeners"] == []  # not reachable
    assert _describe(cluster.bootstrap)["topics"][0]["partitions"][0]["leader_epoch"] == 3  # node 1 is back


def _describe(bootstrap: str) -> dict:
    admin = _admin(bootstrap)
    try:
        return admin.describe_metadata_quorum()
    finally:
        admin.close()


def test_on_controller_listeners_only_the_leader_answers(tmp_path):
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "controller_listener_names": "CONTROLLER"}
    with ClusterThread(brokers=2, data_dir=tmp_path, **settings) as running:
        ports = {node: int(running.cluster.broker(node).bootstrap_for("CONTROLLER").rsplit(":", 1)[1])
                 for node in (1, 2)}
        with RawClient(ports[1]) as leader, RawClient(ports[2]) as follower:
            answer = leader.request(_request(), 2)
            assert answer.topics[0].partitions[0].leader_id == 1
            assert [(n.node_id, [(lsn.name, lsn.port) for lsn in n.listeners]) for n in answer.nodes] == [
                (1, [("CONTROLLER", ports[1])]), (2, [("CONTROLLER", ports[2])])]
            refused = follower.request(_request(), 2).topics[0].partitions[0]
            assert (refused.partition_index, refused.error_code) == (0, 6)  # NOT_LEADER_OR_FOLLOWER

"""The in-process cluster (kafkawire.broker.Cluster) on the wire: what each node answers for, as a
multi-broker Kafka cluster does (Metadata, leadership, leader epochs, coordinators), and the faults
injected on command (request errors, dropped requests, latency, ISR shrinks, stopped brokers)."""
from __future__ import annotations

import socket
import time

import pytest

from support.broker_harness import RawClient
from support.broker_wire import batch_of, by_partition, fetch
from kafkawire import messages as m
from kafkawire.broker import ClusterThread
from kafkawire.error_codes import ErrorCode
from kafkawire.records import iter_batches


@pytest.fixture(scope="module")
def cluster():
    with ClusterThread(brokers=3, group_initial_rebalance_delay_ms=0) as running:
        running.create_topic("wire", partitions=3)
        yield running


def port_of(cluster, node: int) -> int:
    return cluster.cluster.broker(node).port


def produce(client, topic, partition, acks=-1, version=9):
    request = m.ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(index=partition, records=batch_of(100))])])
    response = client.request(request, version)
    return response, response.responses[0].partition_responses[0]


def test_metadata_lists_every_broker_and_spreads_leaders(cluster):
    with RawClient(port_of(cluster, 2)) as client:
        response = client.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="wire")]), 12)
    assert sorted(b.node_id for b in response.brokers) == [1, 2, 3]
    assert {b.node_id: b.port for b in response.brokers} == {n: port_of(cluster, n) for n in (1, 2, 3)}
    assert response.controller_id == 1
    with RawClient(port_of(cluster, 3)) as client:
        described = client.request(m.DescribeClusterRequest(include_cluster_authorized_operations=False), 0)
    assert sorted((b.broker_id, b.port) for b in described.brokers) == [(n, port_of(cluster, n)) for n in (1, 2, 3)]
    assert described.controller_id == 1
    partitions = response.topics[0].partitions
    assert sorted(p.leader_id for p in partitions) == [1, 2, 3]
    for p in partitions:
        assert sorted(p.replica_nodes) == [1, 2, 3] and sorted(p.isr_nodes) == [1, 2, 3]
        assert p.leader_id == cluster.leader("wire", p.partition_index)


def test_produce_to_a_follower_names_the_leader(cluster):
    leader = cluster.leader("wire", 0)
    follower = next(n for n in (1, 2, 3) if n != leader)
    with RawClient(port_of(cluster, follower)) as client:
        response, partition = produce(client, "wire", 0, version=11)
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition.current_leader.leader_id == leader
    assert [(e.node_id, e.port) for e in response.node_endpoints] == [(leader, port_of(cluster, leader))]
    with RawClient(port_of(cluster, leader)) as client:
        assert produce(client, "wire", 0)[1].error_code == 0


def test_leader_move_fences_the_old_epoch(cluster):
    old_leader = cluster.leader("wire", 1)
    old_epoch = cluster.partition("wire", 1).leader_epoch
    new_leader = cluster.move_leader("wire", 1)
    assert new_leader != old_leader and cluster.partition("wire", 1).leader_epoch == old_epoch + 1

    def fetch_at(node, epoch, version=16):
        request_partition = m.FetchRequest.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=1 << 20,
                                                          current_leader_epoch=epoch, log_start_offset=-1)
        request = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                 session_id=0, session_epoch=-1, topics=[m.FetchRequest.FetchTopic(
                                     topic="wire", topic_id=cluster.cluster.broker(1).topics.get("wire").topic_id,
                                     partitions=[request_partition])], forgotten_topics_data=[], rack_id="")
        with RawClient(port_of(cluster, node)) as client:
            return client.request(request, version)

    assert fetch_at(new_leader, old_epoch).responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert fetch_at(new_leader, old_epoch + 5).responses[0].partitions[0].error_code == \
        ErrorCode.UNKNOWN_LEADER_EPOCH
    moved = fetch_at(old_leader, -1)  # v16: the current leader and its address come with the error
    partition = moved.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (new_leader, old_epoch + 1)
    assert [(e.node_id, e.port) for e in moved.node_endpoints] == [(new_leader, port_of(cluster, new_leader))]
    assert fetch_at(new_leader, old_epoch + 1).responses[0].partitions[0].error_code == 0
    with RawClient(port_of(cluster, new_leader)) as client:  # new batches carry the new epoch
        produce(client, "wire", 1)
        read = by_partition(fetch(client, [("wire", 1, 0, 1 << 20)]))[("wire", 1)]
    assert [batch.partition_leader_epoch for batch in iter_batches(read.records)][-1] == old_epoch + 1


def test_list_offsets_checks_leadership(cluster):
    leader = cluster.leader("wire", 2)
    follower = next(n for n in (1, 2, 3) if n != leader)
    request = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
        name="wire", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=2, timestamp=-1,
                                                                          current_leader_epoch=-1)])])
    with RawClient(port_of(cluster, follower)) as client:
        assert client.request(request, 7).topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with RawClient(port_of(cluster, leader)) as client:
        assert client.request(request, 7).topics[0].partitions[0].error_code == 0


def test_coordinators_live_on_one_broker(cluster):
    coordinator = cluster.coordinator("wire-group")
    others = [n for n in (1, 2, 3) if n != coordinator]
    with RawClient(port_of(cluster, others[0])) as client:
        found = client.request(m.FindCoordinatorRequest(key_type=0, coordinator_keys=["wire-group"]), 4)
        assert (found.coordinators[0].node_id, found.coordinators[0].port) == \
            (coordinator, port_of(cluster, coordinator))
        heartbeat = client.request(m.HeartbeatRequest(group_id="wire-group", generation_id=1, member_id="m"), 4)
        assert heartbeat.error_code == ErrorCode.NOT_COORDINATOR
    with RawClient(port_of(cluster, coordinator)) as client:
        heartbeat = client.request(m.HeartbeatRequest(group_id="wire-group", generation_id=1, member_id="m"), 4)
        assert heartbeat.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_injected_errors_then_normal_answers(cluster):
    cluster.push_request_errors(3, "Metadata", "NOT_CONTROLLER", ErrorCode.REQUEST_TIMED_OUT)
    request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="wire")])
    with RawClient(port_of(cluster, 3)) as client:
        assert client.request(request, 12).topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert client.request(request, 12).topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        assert client.request(request, 12).topics[0].error_code == 0


def test_dropped_request_gets_no_answer(cluster):
    cluster.drop_next(2, "ApiVersions")
    with RawClient(port_of(cluster, 2)) as client:
        client.sock.settimeout(0.3)
        client.send(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        with pytest.raises(socket.timeout):
            client.receive()
    with RawClient(port_of(cluster, 2)) as client:  # the next one is answered
        assert client.request(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                              3).error_code == 0


def test_latency_delays_answers(cluster):
    cluster.set_latency(1, 150)
    try:
        with RawClient(port_of(cluster, 1)) as client:
            started = time.monotonic()
            client.request(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
            assert time.monotonic() - started >= 0.15
    finally:
        cluster.set_latency(1, 0)


def test_shrunk_isr_refuses_acks_all_below_min_insync(cluster):
    cluster.create_topic("isr", partitions=1, configs={"min.insync.replicas": "2"})
    leader = cluster.leader("isr", 0)
    assert cluster.set_isr("isr", 0, [leader]) == [leader]
    with RawClient(port_of(cluster, leader)) as client:
        assert produce(client, "isr", 0, acks=-1)[1].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert produce(client, "isr", 0, acks=1)[1].error_code == 0
        cluster.set_isr("isr", 0)
        assert produce(client, "isr", 0, acks=-1)[1].error_code == 0


def test_stopped_broker_refuses_connections_and_hands_over(cluster):
    cluster.create_topic("stop", partitions=3)
    victim = cluster.leader("stop", 0)
    port = port_of(cluster, victim)
    with RawClient(port) as client:
        cluster.stop_broker(victim)
        with pytest.raises(ConnectionError):
            client.request(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)
    survivor = next(n for n in (1, 2, 3) if n != victim)
    with RawClient(port_of(cluster, survivor)) as client:
        response = client.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="stop")]), 12)
    assert victim not in [b.node_id for b in response.brokers]
    for p in response.topics[0].partitions:
        assert p.leader_id != victim and victim not in p.isr_nodes and list(p.offline_replicas) == [victim]
    cluster.start_broker(victim)
    assert cluster.leader("stop", 0) == victim  # its preferred leadership back
    with RawClient(port) as client:
        assert produce(client, "stop", 0)[1].error_code == 0


def test_throttle_slows_answers_by_their_size(cluster):
    cluster.set_throttle(2, 20_000)  # bytes per second
    try:
        with RawClient(port_of(cluster, 2)) as client:
            started = time.monotonic()
            response = client.request(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
            elapsed = time.monotonic() - started
    finally:
        cluster.set_throttle(2, 0)
    size = len(response.encode(3))
    assert elapsed >= size / 20_000 * 0.9

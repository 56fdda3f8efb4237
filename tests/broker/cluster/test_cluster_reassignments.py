"""Partition reassignments and leader elections in the in-process cluster, as Kafka's controller makes
them: kafka-python's KafkaAdminClient and kafkawire's AdminClient move replicas (growing to the union,
the adding replicas catching up into the ISR, shrinking to the target), list the moves in progress and
cancel them; confluent-kafka's elect_leaders brings the preferred leader back; clients keep producing
and consuming through moves; a single broker answers as Kafka's one-node cluster does."""
from __future__ import annotations

import itertools
import threading

import pytest

from kafkawire.broker import ClusterThread
from kafkawire.client.admin import AdminClient, ElectionType, PartitionReassignment, TopicPartition
from kafkawire.client.errors import KafkaError

_names = itertools.count()


@pytest.fixture(scope="module")
def cluster():
    with ClusterThread(brokers=3, group_initial_rebalance_delay_ms=0) as running:
        yield running


@pytest.fixture(scope="module")
def admin(cluster):
    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    yield client
    client.close()


def new_topic(cluster, replication_factor=2, partitions=1) -> str:
    name = f"moves-{next(_names)}"
    cluster.create_topic(name, partitions, replication_factor)
    return name


def code_of(outcome) -> str | None:
    return None if outcome is None else outcome.name


def test_a_move_grows_catches_up_and_shrinks(cluster, admin):
    topic = new_topic(cluster)
    before = cluster.partition(topic, 0)
    (outsider,) = set(cluster.node_ids) - set(before.replicas)
    leader = before.leader
    target = [outsider, next(node for node in before.replicas if node != leader)]  # the leader leaves
    tp = TopicPartition(topic, 0)
    cluster.stop_broker(outsider)  # a stopped replica cannot catch up: the move stays in progress
    try:
        assert code_of(admin.alter_partition_reassignments({tp: target})[tp].result(15)) is None
        ongoing = admin.list_partition_reassignments([tp]).result(15)
        assert ongoing == {tp: PartitionReassignment(target + [leader], [outsider], [leader])}
        during = cluster.partition(topic, 0)
        assert (during.replicas, during.isr, during.leader) == (target + [leader], before.isr, leader)
    finally:
        cluster.start_broker(outsider)  # it catches up: the move completes, the leaving leader hands over
    after = cluster.partition(topic, 0)
    assert (after.replicas, sorted(after.isr)) == (target, sorted(target))
    assert after.leader in target and after.leader_epoch > before.leader_epoch
    assert admin.list_partition_reassignments().result(15) == {}


def test_a_move_with_live_replicas_completes_by_itself(cluster, admin):
    topic = new_topic(cluster, replication_factor=1)
    (only,) = cluster.partition(topic, 0).replicas
    elsewhere = [node for node in cluster.node_ids if node != only]
    tp = TopicPartition(topic, 0)
    assert code_of(admin.alter_partition_reassignments({tp: elsewhere})[tp].result(15)) is None
    deadline_checks = 0
    while cluster.partition(topic, 0).replicas != elsewhere:
        deadline_checks += 1
        assert deadline_checks < 500, cluster.partition(topic, 0)
        threading.Event().wait(0.01)
    assert cluster.partition(topic, 0).leader in elsewhere  # replication factor 1 -> 2, the leader moved


def test_removing_replicas_completes_at_once(cluster, admin):
    topic = new_topic(cluster, replication_factor=3)
    replicas = cluster.partition(topic, 0).replicas
    tp = TopicPartition(topic, 0)
    assert code_of(admin.alter_partition_reassignments({tp: replicas[:1]})[tp].result(15)) is None
    after = cluster.partition(topic, 0)
    assert (after.replicas, after.isr, after.leader) == (replicas[:1], replicas[:1], replicas[0])


def test_a_cancelled_move_reverts_and_bad_targets_are_refused(cluster, admin):
    topic = new_topic(cluster)
    before = cluster.partition(topic, 0)
    (outsider,) = set(cluster.node_ids) - set(before.replicas)
    tp, unknown = TopicPartition(topic, 0), TopicPartition(topic, 7)
    cluster.stop_broker(outsider)
    try:
        assert code_of(admin.alter_partition_reassignments({tp: [outsider]})[tp].result(15)) is None
        assert tp in admin.list_partition_reassignments().result(15)
        assert code_of(admin.alter_partition_reassignments({tp: None})[tp].result(15)) is None  # cancel
    finally:
        cluster.start_broker(outsider)
    after = cluster.partition(topic, 0)
    assert (after.replicas, after.leader) == (before.replicas, before.leader)
    assert admin.list_partition_reassignments().result(15) == {}
    refused = admin.alter_partition_reassignments({tp: None, unknown: [1]})
    assert code_of(refused[tp].exception(15)) == "NO_REASSIGNMENT_IN_PROGRESS"
    assert code_of(refused[unknown].exception(15)) == "UNKNOWN_TOPIC_OR_PARTITION"
    for target, message in (([], "empty replica list"), ([1, 1], "more than once"), ([1, 9], "no such broker")):
        failure = admin.alter_partition_reassignments({tp: target})[tp].exception(15)
        assert isinstance(failure, KafkaError) and failure.name == "INVALID_REPLICA_ASSIGNMENT", target
        assert message in str(failure)
    assert cluster.partition(topic, 0).replicas == before.replicas


def test_kafka_python_moves_and_lists_reassignments(cluster):
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KafkaTopicPartition
    topic = new_topic(cluster)
    before = cluster.partition(topic, 0)
    (outsider,) = set(cluster.node_ids) - set(before.replicas)
    tp = KafkaTopicPartition(topic, 0)
    cluster.stop_broker(outsider)  # (before the client starts: it asks the controller it finds first)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        try:
            assert admin.alter_partition_reassignments({tp: [outsider, before.leader]}) == {tp: None}
            listed = admin.list_partition_reassignments()
            assert listed[tp]["adding_replicas"] == [outsider]
            assert listed[tp]["replicas"][:2] == [outsider, before.leader]
        finally:
            cluster.start_broker(outsider)
        assert admin.list_partition_reassignments() == {}
        assert cluster.partition(topic, 0).replicas == [outsider, before.leader]
    finally:
        admin.close()


def test_preferred_and_unclean_elections(cluster, admin):
    confluent_admin = pytest.importorskip("confluent_kafka.admin")
    from confluent_kafka import ElectionType as CkElectionType, TopicPartition as CkTopicPartition
    topic = new_topic(cluster, replication_factor=3)
    preferred = cluster.partition(topic, 0).replicas[0]
    cluster.move_leader(topic, 0)
    assert cluster.leader(topic, 0) != preferred
    ck = confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    tp = CkTopicPartition(topic, 0)
    elected = ck.elect_leaders(CkElectionType.PREFERRED, [tp]).result(15)
    assert [(k.topic, k.partition, v) for k, v in elected.items()] == [(topic, 0, None)]
    assert cluster.leader(topic, 0) == preferred
    again = ck.elect_leaders(CkElectionType.PREFERRED, [tp]).result(15)
    assert [v.name() for v in again.values()] == ["ELECTION_NOT_NEEDED"]
    ours = TopicPartition(topic, 0)
    assert code_of(admin.elect_leaders(ElectionType.UNCLEAN, [ours]).result(15)[ours]) == "ELECTION_NOT_NEEDED"
    # every partition (None): only those where an election was needed are reported
    cluster.move_leader(topic, 0)
    everywhere = admin.elect_leaders(ElectionType.PREFERRED).result(15)
    assert everywhere[ours] is None and cluster.leader(topic, 0) == preferred
    assert all(code_of(outcome) != "ELECTION_NOT_NEEDED" for outcome in everywhere.values())


def test_an_unclean_election_needs_a_leaderless_partition_with_a_live_replica(cluster, admin):
    topic = new_topic(cluster)
    leader, follower = cluster.partition(topic, 0).replicas
    cluster.set_isr(topic, 0, [leader])  # the follower falls behind, then the leader stops
    cluster.stop_broker(leader)
    tp = TopicPartition(topic, 0)
    try:
        assert cluster.leader(topic, 0) == -1
        assert code_of(admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(15)[tp]) == \
            "PREFERRED_LEADER_NOT_AVAILABLE"
        assert admin.elect_leaders(ElectionType.UNCLEAN, [tp]).result(15)[tp] is None
        assert (cluster.leader(topic, 0), cluster.partition(topic, 0).isr) == (follower, [follower])
    finally:
        cluster.start_broker(leader, restore_leaders=False)


def test_clients_keep_producing_and_consuming_through_moves(cluster, admin):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = new_topic(cluster, replication_factor=2, partitions=2)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                         "linger.ms": 5, "retry.backoff.ms": 20,
                                         "topic.metadata.refresh.interval.ms": 500, "log_level": 0})
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": topic,
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 50,
                                         "topic.metadata.refresh.interval.ms": 500, "log_level": 0})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in (0, 1)])
    acked: list[bytes] = []
    consumed: list[bytes] = []

    def delivered(error, message):
        assert error is None, error
        acked.append(message.value())

    nodes = cluster.node_ids
    moves = [[nodes[1], nodes[2]], [nodes[0]], [nodes[2], nodes[0], nodes[1]], [nodes[1]]]
    for round_index, target in enumerate([None, *moves]):
        if target is not None:
            requested = {TopicPartition(topic, p): target for p in (0, 1)}
            assert all(f.result(15) is None for f in admin.alter_partition_reassignments(requested).values())
        for i in range(40):
            producer.produce(topic, value=f"{round_index}-{i}".encode(), partition=i % 2, on_delivery=delivered)
        assert producer.flush(30) == 0
        while len(consumed) < len(acked):
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                consumed.append(message.value())
    consumer.close()
    assert len(acked) == 200 and sorted(consumed) == sorted(acked)
    assert cluster.partition(topic, 0).replicas == [nodes[1]]


def test_a_single_broker_answers_as_a_one_node_cluster(shared_broker):
    from kafkawire.client.admin import NewTopic
    client = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    try:
        topic = f"single-moves-{next(_names)}"
        client.create_topics([NewTopic(topic, 1)])[topic].result(15)
        tp = TopicPartition(topic, 0)
        node = client.describe_cluster().result(15).nodes[0].id
        assert client.alter_partition_reassignments({tp: [node]})[tp].result(15) is None
        assert code_of(client.alter_partition_reassignments({tp: [node + 1]})[tp].exception(15)) == \
            "INVALID_REPLICA_ASSIGNMENT"
        assert code_of(client.alter_partition_reassignments({tp: None})[tp].exception(15)) == \
            "NO_REASSIGNMENT_IN_PROGRESS"
        assert client.list_partition_reassignments().result(15) == {}
        assert code_of(client.elect_leaders(ElectionType.PREFERRED, [tp]).result(15)[tp]) == "ELECTION_NOT_NEEDED"
        assert client.elect_leaders(ElectionType.PREFERRED).result(15) == {}
    finally:
        client.close()


def test_a_move_may_be_refused_to_change_the_replication_factor(cluster):
    from kafkawire import messages as m
    from support.broker_harness import RawClient
    topic = new_topic(cluster)
    replicas = cluster.partition(topic, 0).replicas
    Request = m.AlterPartitionReassignmentsRequest
    client = RawClient(int(cluster.bootstrap.split(",")[0].rsplit(":", 1)[1]))
    try:
        answer = client.request(Request(allow_replication_factor_change=False, topics=[Request.ReassignableTopic(
            name=topic, partitions=[Request.ReassignablePartition(partition_index=0, replicas=cluster.node_ids)])]), 1)
    finally:
        client.close()
    (partition,) = answer.responses[0].partitions
    assert (answer.allow_replication_factor_change, partition.error_code, partition.error_message) == (
        False, 38, f"The replication factor is changed from {len(replicas)} to {len(cluster.node_ids)}")
    assert cluster.partition(topic, 0).replicas == replicas

"""kafka-python 3.0's KafkaAdminClient against the broker, call by call: the group, offset, producer,
transaction, SCRAM and config calls that the other admin tests do not reach (issue 35: every admin call
of kafka-python works). Reassignments and elections are tested on a cluster
(tests/broker/cluster/test_cluster_reassignments.py), quorum and features in test_broker_quorum.py and
test_broker_features.py."""
from __future__ import annotations

import itertools
import time

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import (  # noqa: E402
    AbortTransactionSpec, ConfigResource, ConfigResourceType, KafkaAdminClient, MemberToRemove, NewTopic, OffsetSpec,
    ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion,
)
from kafka.errors import NoError  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")

_names = itertools.count()


@pytest.fixture(scope="module")
def admin(shared_broker):
    client = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    yield client
    client.close()


@pytest.fixture
def topic(shared_broker, admin):
    name = f"kp-admin-{next(_names)}-{int(time.time() * 1000) % 100000}"
    admin.create_topics([NewTopic(name, 2, 1)])
    producer = KafkaProducer(bootstrap_servers=shared_broker.bootstrap)
    for i in range(10):
        producer.send(name, f"r{i}".encode(), partition=i % 2)
    producer.flush(10)
    producer.close()
    return name


def test_broker_versions_and_topic_waits(admin, topic):
    versions = admin.api_versions()
    assert versions and all(low <= high for low, high in versions.values())
    node = admin.describe_cluster()["brokers"][0]["broker_id"]
    assert admin.get_broker_version_data(node) is not None
    admin.wait_for_topics([topic], timeout_ms=10_000)


def test_offsets_by_spec(admin, topic):
    found = admin.list_partition_offsets({TopicPartition(topic, 0): OffsetSpec.EARLIEST,
                                          TopicPartition(topic, 1): OffsetSpec.LATEST})
    assert (found[TopicPartition(topic, 0)].offset, found[TopicPartition(topic, 1)].offset) == (0, 5)


def test_groups_offsets_and_members(shared_broker, admin, topic):
    group = f"{topic}-g"
    consumer = KafkaConsumer(topic, bootstrap_servers=shared_broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", group_instance_id="static-a", consumer_timeout_ms=5000)
    read = sum(1 for _ in itertools.islice(consumer, 10))
    consumer.commit()
    assert read == 10
    listed = {g["group_id"]: g for g in admin.list_groups()}
    assert (listed[group]["group_state"], listed[group]["group_type"]) == ("Stable", "classic")
    described = admin.describe_groups([group])[group]
    assert described["group_state"] == "Stable" and [m["group_instance_id"] for m in described["members"]] == [
        "static-a"]
    # the static member is removed by its instance id (LeaveGroup v3+), as an operator does
    removed = admin.remove_group_members(group, [MemberToRemove(group_instance_id="static-a")])
    assert list(removed.values()) == [NoError]
    consumer.close(autocommit=False)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert admin.list_group_offsets(group)[group][tp0].offset == 5
    assert admin.alter_group_offsets(group, {tp0: OffsetAndMetadata(2, "", -1)}) == {tp0: NoError}
    assert admin.list_group_offsets(group)[group][tp0].offset == 2
    reset = admin.reset_group_offsets(group, {tp0: OffsetSpec.EARLIEST, tp1: 99})
    assert set(reset) == {tp0, tp1}
    offsets = admin.list_group_offsets(group)[group]
    assert (offsets[tp0].offset, offsets[tp1].offset) == (0, 5)  # 99 is clamped to the latest
    assert admin.delete_groups([group]) == {group: "OK"}  # empty since its static member was removed
    assert admin.list_group_offsets(group) == {group: {}}


def test_producers_and_transactions(shared_broker, admin, topic):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    transactional_id = f"{topic}-tx"
    producer = confluent_kafka.Producer({"bootstrap.servers": shared_broker.bootstrap,
                                         "transactional.id": transactional_id, "log_level": 0})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    producer.flush(15)  # the transaction stays open: a hanging one, to the tools
    tp0 = TopicPartition(topic, 0)
    described = admin.describe_transactions([transactional_id])[transactional_id]
    assert (described.state.value, described.topic_partitions) == ("Ongoing", {tp0})
    producers = admin.describe_producers([tp0])[tp0].active_producers
    open_one = next(p for p in producers if p.producer_id == described.producer_id)
    assert open_one.current_transaction_start_offset == 5
    listed = [t for listings in admin.list_transactions().values() for t in listings]
    assert transactional_id in [t.transactional_id for t in listed]
    assert admin.find_hanging_transactions(max_transaction_timeout_ms=900_000) == []  # not old enough
    admin.abort_transaction(AbortTransactionSpec(topic_partition=tp0, producer_id=described.producer_id,
                                                 producer_epoch=described.producer_epoch,
                                                 coordinator_epoch=-1))
    after = admin.list_partition_offsets({tp0: OffsetSpec.LATEST})[tp0].offset
    assert after == 7  # five records, the open one, and the abort marker: the partition is stable again


def test_scram_users(admin):
    user = f"kp-user-{next(_names)}"
    upsert = UserScramCredentialUpsertion(user, ScramMechanism.SCRAM_SHA_256, "secret", iterations=4096)
    assert admin.alter_user_scram_credentials([upsert]) == {user: None}
    described = admin.describe_user_scram_credentials([user])
    assert user in described
    assert admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)]) \
        == {user: None}


def test_reset_configs(admin, topic):
    resource = ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "60000"})
    admin.alter_configs([resource])
    before = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert "60000" in repr(before)
    admin.reset_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": None})])
    after = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert "60000" not in repr(after)

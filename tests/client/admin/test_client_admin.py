"""kafkawire's AdminClient against the reference broker, each result cross-checked with confluent-kafka's
AdminClient (and its producers and consumers) on the same broker: topics and their configs, the cluster,
offsets by spec, consumer groups of both protocols and their offsets, producers, transactions; the
blocking client's futures; ACLs and SCRAM users on a broker with an authorizer (a SCRAM user made by the
admin client then authenticates)."""
from __future__ import annotations

import asyncio
import base64
import itertools
import socket
import time

import pytest

from support.broker_harness import BrokerThread, own_broker
from kafkawire.client import (
    ClusterAuthorizationException, GroupAuthorizationException, TopicAuthorizationException,
    KafkaConnectionError, KafkaError, Producer, KafkaTimeoutError, SaslAuthenticationException, UnknownTopicError,
)
from kafkawire.client.admin import (
    AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient, AlterConfigOpType,
    AsyncAdminClient, ConfigEntry, ConfigResource, ConfigSource, ConsumerGroupState, ConsumerGroupTopicPartitions,
    ConsumerGroupType, IsolationLevel, NewPartitions, NewTopic, OffsetAndMetadata, OffsetSpec, ResourcePatternType,
    ResourceType, ScramCredentialInfo, ScramMechanism, TopicPartition, UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafkawire.broker.dispatch.versions import SERVED_APIS
from kafkawire.error_codes import ErrorCode
from support.security_harness import PLAIN_USERS, make_certificates, secured_config

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import admin as ck_admin  # noqa: E402

TP = TopicPartition
_names = itertools.count()


broker = own_broker(group_consumer_heartbeat_interval_ms=300, group_consumer_session_timeout_ms=6000)


@pytest.fixture(scope="module")
def confluent(broker):
    return ck_admin.AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})


def run(broker, call):
    """``call(admin)`` with a fresh AsyncAdminClient on its own event loop."""
    async def main():
        async with AsyncAdminClient(bootstrap_servers=broker.bootstrap, default_api_timeout_ms=30000) as admin:
            return await call(admin)
    return asyncio.run(main())


def needs_api(key: int, name: str):
    """Skip while the broker does not serve the API (added with the broker's admin APIs, issue 23)."""
    return pytest.mark.skipif(key not in SERVED_APIS, reason=f"the broker does not serve {name} yet")


def name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# ---- topics, configs, cluster ------------------------------------------------------------------------------

def test_topics_created_described_and_deleted_as_confluent_sees_them(broker, confluent):
    topic, other = name("admin-topic"), name("admin-other")
    created = run(broker, lambda a: a.create_topics([NewTopic(topic, 3, config={"retention.ms": "3600000"}),
                                                     NewTopic(other, 1)]))
    assert created == {topic: None, other: None}
    again = run(broker, lambda a: a.create_topics([NewTopic(topic, 3)]))
    assert isinstance(again[topic], KafkaError) and again[topic].code == ErrorCode.TOPIC_ALREADY_EXISTS

    described = run(broker, lambda a: a.describe_topics([topic, "no-such-topic"]))
    assert isinstance(described["no-such-topic"], UnknownTopicError)
    ours = described[topic]
    theirs = confluent.describe_topics(confluent_kafka.TopicCollection([topic]))[topic].result(10)
    assert [p.id for p in ours.partitions] == [p.id for p in theirs.partitions] == [0, 1, 2]
    assert [p.leader.id for p in ours.partitions] == [p.leader.id for p in theirs.partitions]
    assert base64.b64encode(ours.topic_id.bytes).rstrip(b"=").decode() == str(theirs.topic_id)

    resource = ConfigResource("topic", topic)
    configs = run(broker, lambda a: a.describe_configs([resource]))[resource]
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    theirs = confluent.describe_configs([ck_admin.ConfigResource("topic", topic)])
    their_configs = next(iter(theirs.values())).result(10)
    assert {k: v.value for k, v in configs.items()} == {k: v.value for k, v in their_configs.items()}

    deleted = run(broker, lambda a: a.delete_topics([other, "no-such-topic"]))
    assert deleted[other] is None and isinstance(deleted["no-such-topic"], UnknownTopicError)
    assert other not in confluent.list_topics(timeout=10).topics
    assert topic in run(broker, lambda a: a.list_topics())


def test_describe_cluster_matches_confluent(broker, confluent):
    ours = run(broker, lambda a: a.describe_cluster())
    theirs = confluent.describe_cluster().result(10)
    assert ours.cluster_id == theirs.cluster_id
    assert ours.controller.id == theirs.controller.id
    assert [(n.id, n.host, n.port) for n in ours.nodes] == [(n.id, n.host, n.port) for n in theirs.nodes]


def test_broker_configs_come_from_that_broker(broker):
    broker_id = broker.broker.config.node_id
    resource = ConfigResource("broker", str(broker_id))
    configs = run(broker, lambda a: a.describe_configs([resource, ConfigResource("broker", "999")]))
    assert "log.retention.ms" in configs[resource] or "log.retention.hours" in configs[resource]
    assert isinstance(configs[ConfigResource("broker", "999")], Exception)


# ---- offsets -----------------------------------------------------------------------------------------------

def test_list_offsets_by_every_spec_matches_confluent(broker, confluent):
    topic = name("admin-offsets")
    run(broker, lambda a: a.create_topics([NewTopic(topic, 1)]))
    stamps = [1_000_000, 3_000_000, 2_000_000]  # the largest timestamp is not the last record's
    with Producer(bootstrap_servers=broker.bootstrap) as producer:
        for stamp in stamps:
            producer.send(topic, b"v", partition=0, timestamp_ms=stamp).result()
    tp = TP(topic, 0)
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "max": OffsetSpec.max_timestamp(), "at 1.5M": OffsetSpec.for_timestamp(1_500_000),
             "after all": OffsetSpec.for_timestamp(9_000_000)}
    ours = {label: run(broker, lambda a, s=spec: a.list_offsets({tp: s}))[tp] for label, spec in specs.items()}
    assert [ours[k].offset for k in specs] == [0, 3, 1, 1, -1]
    assert ours["max"].timestamp == 3_000_000
    ck_specs = {"earliest": ck_admin.OffsetSpec.earliest(), "latest": ck_admin.OffsetSpec.latest(),
                "max": ck_admin.OffsetSpec.max_timestamp(), "at 1.5M": ck_admin.OffsetSpec.for_timestamp(1_500_000),
                "after all": ck_admin.OffsetSpec.for_timestamp(9_000_000)}
    ck_tp = confluent_kafka.TopicPartition(topic, 0)
    for label, spec in ck_specs.items():
        theirs = confluent.list_offsets({ck_tp: spec})[ck_tp].result(10)
        assert (ours[label].offset, ours[label].timestamp) == (theirs.offset, theirs.timestamp), label
    committed = run(broker, lambda a: a.list_offsets({tp: OffsetSpec.latest()},
                                                     isolation_level=IsolationLevel.READ_COMMITTED))[tp]
    assert committed.offset == 3
    missing = run(broker, lambda a: a.list_offsets({TP(topic, 7): OffsetSpec.latest()}))
    assert isinstance(missing[TP(topic, 7)], UnknownTopicError)


def test_describe_producers_names_the_idempotent_producer(broker):
    topic = name("admin-producers")
    run(broker, lambda a: a.create_topics([NewTopic(topic, 1)]))
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    producer.produce(topic, b"v", partition=0)
    producer.flush(10)
    states = run(broker, lambda a: a.describe_producers([TP(topic, 0)]))[TP(topic, 0)]
    assert len(states) == 1 and states[0].producer_id >= 0 and states[0].last_sequence == 0


# ---- groups --------------------------------------------------------------------------------------------------

def _filled_topic(broker, partitions=2, records=20):
    topic = name("admin-groups")
    run(broker, lambda a: a.create_topics([NewTopic(topic, partitions)]))
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(records):
        producer.produce(topic, str(i).encode(), partition=i % partitions)
    producer.flush(10)
    return topic


def _member(broker, group, topic, protocol):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                         "group.protocol": protocol, "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False, "log_level": 0})
    consumer.subscribe([topic])
    wait_for(lambda: (consumer.poll(0.05), len(consumer.assignment()))[1] == 2)
    return consumer


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_groups_of_both_protocols_listed_and_described_as_confluent(broker, confluent, protocol):
    topic = _filled_topic(broker)
    group = name(f"admin-{protocol}")
    consumer = _member(broker, group, topic, protocol)
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 4)], asynchronous=False)
        listed = run(broker, lambda a: a.list_consumer_groups())
        ours = next(g for g in listed.valid if g.group_id == group)
        kind = ConsumerGroupType.CLASSIC if protocol == "classic" else ConsumerGroupType.CONSUMER
        assert ours.type == kind and ours.state == ConsumerGroupState.STABLE and not listed.errors
        theirs = next(g for g in confluent.list_consumer_groups().result(10).valid if g.group_id == group)
        assert ours.state.name == theirs.state.name and ours.type.name == theirs.type.name

        described = run(broker, lambda a: a.describe_consumer_groups([group, name("nobody")]))
        description = described[group]
        their = confluent.describe_consumer_groups([group])[group].result(10)
        assert description.type == kind and description.state.name == their.state.name
        assert description.partition_assignor == their.partition_assignor
        assert [(m.member_id, m.client_id, set(m.assignment.topic_partitions)) for m in description.members] == \
            [(m.member_id, m.client_id, {TP(tp.topic, tp.partition) for tp in m.assignment.topic_partitions})
             for m in their.members]
        assert description.coordinator.id == their.coordinator.id
        assert all(isinstance(v, KafkaError) for k, v in described.items() if k != group)

        offsets = run(broker, lambda a: a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]))
        assert offsets[group].topic_partitions == {TP(topic, 0): OffsetAndMetadata(4, "", offsets[group]
                                                                                   .topic_partitions[TP(topic, 0)]
                                                                                   .leader_epoch)}
    finally:
        consumer.close()


def test_group_offsets_altered_and_read_back_by_confluent(broker, confluent):
    topic = _filled_topic(broker)
    group = name("admin-offsets-group")
    wanted = {TP(topic, 0): 3, TP(topic, 1): OffsetAndMetadata(5, "from admin")}
    altered = run(broker, lambda a: a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)]))
    assert altered[group].topic_partitions == {TP(topic, 0): OffsetAndMetadata(3),
                                               TP(topic, 1): OffsetAndMetadata(5, "from admin")}
    request = confluent_kafka.ConsumerGroupTopicPartitions(group, [confluent_kafka.TopicPartition(topic, 0),
                                                            confluent_kafka.TopicPartition(topic, 1)])
    theirs = confluent.list_consumer_group_offsets([request])[group].result(10)
    assert {(tp.partition, tp.offset, tp.metadata or "") for tp in theirs.topic_partitions} == \
        {(0, 3, ""), (1, 5, "from admin")}
    ours = run(broker, lambda a: a.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TP(topic, 0), TP(topic, 1), TP(topic, 9)])]))[group]
    assert ours.topic_partitions[TP(topic, 1)].offset == 5 and ours.topic_partitions[TP(topic, 9)] is None


# ---- transactions ------------------------------------------------------------------------------------------

def test_an_open_transaction_described_and_listed(broker):
    topic = name("admin-txn")
    run(broker, lambda a: a.create_topics([NewTopic(topic, 1)]))
    transactional_id = name("admin-tx")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                         "transactional.id": transactional_id})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"v", partition=0)
    producer.flush(10)
    try:
        described = run(broker, lambda a: a.describe_transactions([transactional_id, "no-such-txn"]))
        ours = described[transactional_id]
        assert ours.state == "Ongoing" and TP(topic, 0) in ours.topic_partitions
        assert described["no-such-txn"].code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        listed = run(broker, lambda a: a.list_transactions(states=["Ongoing"]))
        assert any(t.transactional_id == transactional_id and t.producer_id == ours.producer_id for t in listed)
        producers = run(broker, lambda a: a.describe_producers([TP(topic, 0)]))[TP(topic, 0)]
        assert producers[0].producer_id == ours.producer_id and producers[0].current_transaction_start_offset == 0
        stable = run(broker, lambda a: a.list_offsets({TP(topic, 0): OffsetSpec.latest()},
                                                      isolation_level=IsolationLevel.READ_COMMITTED))
        assert stable[TP(topic, 0)].offset == 0  # the last stable offset: the open transaction's first
    finally:
        producer.commit_transaction(10)


# ---- the blocking client ----------------------------------------------------------------------------------

def test_the_blocking_client_returns_futures_per_resource(broker):
    topic = name("admin-blocking")
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        futures = admin.create_topics([NewTopic(topic, 2)])
        assert futures[topic].result(10) is None
        with pytest.raises(KafkaError) as refused:
            admin.create_topics([NewTopic(topic, 2)])[topic].result(10)
        assert refused.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        offsets = admin.list_offsets({TP(topic, 0): OffsetSpec.latest(), (topic, 1): OffsetSpec.earliest()})
        assert [f.result(10).offset for f in offsets.values()] == [0, 0]
        assert admin.describe_cluster().result(10).nodes
        resource = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
        assert set(admin.describe_configs([resource])) == {resource}


# ---- ACLs and SCRAM users on a secured broker ------------------------------------------------------------

@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    certs = make_certificates(tmp_path_factory.mktemp("admin-certs"))
    with BrokerThread(config=secured_config(tmp_path_factory.mktemp("admin-secured"), certs,
                                            authorizer=True)) as running:
        yield running


def _secured_run(secured, call, user="admin", password=None, mechanism="PLAIN"):
    settings = {"bootstrap.servers": secured.broker.bootstrap_for("SASL_PLAINTEXT"),
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": user,
                "sasl.password": password if password is not None else PLAIN_USERS[user],
                "default.api.timeout.ms": 30000}

    async def main():
        async with AsyncAdminClient(settings) as admin:
            return await call(admin)
    return asyncio.run(main())


def test_acls_created_described_and_deleted(secured):
    binding = AclBinding(ResourceType.TOPIC, "admin-acl-", ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    assert _secured_run(secured, lambda a: a.create_acls([binding])) == {binding: None}
    match = AclBindingFilter(ResourceType.TOPIC, "admin-acl-orders", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert _secured_run(secured, lambda a: a.describe_acls(match)) == [binding]
    confluent = ck_admin.AdminClient({"bootstrap.servers": secured.broker.bootstrap_for("SASL_PLAINTEXT"),
                                      "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                      "sasl.username": "admin", "sasl.password": PLAIN_USERS["admin"]})
    theirs = confluent.describe_acls(ck_admin.AclBindingFilter(
        ck_admin.ResourceType.TOPIC, "admin-acl-orders", ck_admin.ResourcePatternType.MATCH, None, None,
        ck_admin.AclOperation.ANY, ck_admin.AclPermissionType.ANY)).result(10)
    assert [(b.name, b.principal, b.operation.name) for b in theirs] == [("admin-acl-", "User:alice", "READ")]
    deleted = _secured_run(secured, lambda a: a.delete_acls([match]))
    assert deleted == {match: [binding]}
    assert _secured_run(secured, lambda a: a.describe_acls(match)) == []
    refused = _secured_run(secured, lambda a: a.create_acls([binding]), user="eve")
    assert refused[binding].code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert isinstance(refused[binding], ClusterAuthorizationException)


def test_a_principal_without_acls_gets_authorization_errors_not_unknown_topic(secured):
    """Kafka's exception classes: a denied topic is TopicAuthorizationException for the producer and the
    admin client (not UnknownTopicError: the topic exists), a denied group GroupAuthorizationException."""
    topic = name("admin-denied")
    assert _secured_run(secured, lambda a: a.create_topics([NewTopic(topic, 1)])) == {topic: None}
    described = _secured_run(secured, lambda a: a.describe_topics([topic]), user="eve")
    assert isinstance(described[topic], TopicAuthorizationException), described
    groups = _secured_run(secured, lambda a: a.describe_consumer_groups(["admin-denied-group"]), user="eve")
    assert isinstance(groups["admin-denied-group"], GroupAuthorizationException), groups
    producer = Producer({"bootstrap.servers": secured.broker.bootstrap_for("SASL_PLAINTEXT"),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "eve",
                         "sasl.password": PLAIN_USERS["eve"], "max.block.ms": 10000,
                         "enable.idempotence": False})  # else InitProducerId may be denied first (cluster)
    try:
        with pytest.raises(TopicAuthorizationException) as denied:
            producer.send(topic, b"denied").get(10)
        assert denied.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and isinstance(denied.value, KafkaError)
    finally:
        producer.close()


def test_a_scram_user_made_by_the_admin_client_authenticates(secured):
    user = name("admin-scram-user")
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    made = _secured_run(secured, lambda a: a.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, b"s3cret")]))
    assert made == {user: None}
    described = _secured_run(secured, lambda a: a.describe_user_scram_credentials([user, "nobody-here"]))
    assert described[user].scram_credential_infos == (info,)
    assert described["nobody-here"].code == ErrorCode.RESOURCE_NOT_FOUND
    topics = _secured_run(secured, lambda a: a.list_topics(), user=user, password="s3cret",
                          mechanism="SCRAM-SHA-512")  # authenticated: the user may see no topic
    assert topics == {}
    removed = _secured_run(secured, lambda a: a.alter_user_scram_credentials(
        [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)]))
    assert removed == {user: None}
    assert user not in _secured_run(secured, lambda a: a.describe_user_scram_credentials())


# ---- the broker's admin APIs of issue 23 (skipped while the broker does not serve them) ---------------------

@needs_api(37, "CreatePartitions")
def test_partitions_added_as_confluent_sees_them(broker, confluent):
    topic = name("admin-grow")
    run(broker, lambda a: a.create_topics([NewTopic(topic, 1)]))
    grown = run(broker, lambda a: a.create_partitions([NewPartitions(topic, 4), NewPartitions("no-such-topic", 2)]))
    assert grown[topic] is None and isinstance(grown["no-such-topic"], UnknownTopicError)
    shrink = run(broker, lambda a: a.create_partitions([NewPartitions(topic, 2)]))
    assert shrink[topic].code == ErrorCode.INVALID_PARTITIONS
    assert len(confluent.list_topics(topic, timeout=10).topics[topic].partitions) == 4


@needs_api(21, "DeleteRecords")
def test_records_deleted_below_an_offset(broker, confluent):
    topic = _filled_topic(broker, partitions=1, records=10)
    deleted = run(broker, lambda a: a.delete_records({TP(topic, 0): 6}))
    assert deleted[TP(topic, 0)].low_watermark == 6
    earliest = run(broker, lambda a: a.list_offsets({TP(topic, 0): OffsetSpec.earliest()}))[TP(topic, 0)]
    ck_tp = confluent_kafka.TopicPartition(topic, 0)
    assert earliest.offset == confluent.list_offsets({ck_tp: ck_admin.OffsetSpec.earliest()})[ck_tp].result(10).offset
    assert earliest.offset == 6
    everything = run(broker, lambda a: a.delete_records({TP(topic, 0): -1}))  # -1: up to the high watermark
    assert everything[TP(topic, 0)].low_watermark == 10
    beyond = run(broker, lambda a: a.delete_records({TP(topic, 0): 99}))
    assert beyond[TP(topic, 0)].code == ErrorCode.OFFSET_OUT_OF_RANGE


@needs_api(44, "IncrementalAlterConfigs")
def test_configs_altered_incrementally_and_whole(broker, confluent):
    topic = name("admin-alter")
    run(broker, lambda a: a.create_topics([NewTopic(topic, 1, config={"retention.ms": "3600000"})]))
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    assert run(broker, lambda a: a.incremental_alter_configs([resource])) == {resource: None}
    configs = run(broker, lambda a: a.describe_configs([resource]))[resource]
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG
    theirs = next(iter(confluent.describe_configs([ck_admin.ConfigResource("topic", topic)]).values())).result(10)
    assert theirs["cleanup.policy"].value == "compact"

    bad = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    assert run(broker, lambda a: a.incremental_alter_configs([bad]))[bad].code == ErrorCode.INVALID_CONFIG

    whole = ConfigResource("topic", topic, set_config={"max.message.bytes": "2048"})
    assert run(broker, lambda a: a.alter_configs([whole])) == {whole: None}
    configs = run(broker, lambda a: a.describe_configs([whole]))[whole]
    assert configs["max.message.bytes"].value == "2048"
    assert configs["cleanup.policy"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG  # AlterConfigs replaces all


@needs_api(42, "DeleteGroups")
def test_groups_deleted_once_empty(broker, confluent):
    topic = _filled_topic(broker)
    group = name("admin-delete-group")
    consumer = _member(broker, group, topic, "classic")
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 2)], asynchronous=False)
    refused = run(broker, lambda a: a.delete_consumer_groups([group]))
    assert refused[group].code == ErrorCode.NON_EMPTY_GROUP
    consumer.close()
    deleted = run(broker, lambda a: a.delete_consumer_groups([group, name("never-was")]))
    assert deleted[group] is None and isinstance(next(v for k, v in deleted.items() if k != group), KafkaError)
    assert group not in {g.group_id for g in confluent.list_consumer_groups().result(10).valid}


@needs_api(47, "OffsetDelete")
def test_group_offsets_deleted_when_no_member_reads_the_topic(broker):
    topic = _filled_topic(broker)
    group = name("admin-offset-delete")
    consumer = _member(broker, group, topic, "classic")
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 2), confluent_kafka.TopicPartition(topic, 1, 3)],
                    asynchronous=False)
    request = ConsumerGroupTopicPartitions(group, [TP(topic, 0)])
    refused = run(broker, lambda a: a.delete_consumer_group_offsets([request]))
    assert refused[group].code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    consumer.close()
    assert run(broker, lambda a: a.delete_consumer_group_offsets([request]))[group].topic_partitions == [TP(topic, 0)]
    left = run(broker, lambda a: a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]))[group]
    assert set(left.topic_partitions) == {TP(topic, 1)}


@needs_api(75, "DescribeTopicPartitions")
def test_describe_topics_pages_through_describe_topic_partitions(broker):
    topic = name("admin-pages")
    run(broker, lambda a: a.create_topics([NewTopic(topic, 5)]))

    async def both(admin):
        admin._topics.partitions_per_page = 2  # five partitions: three pages
        connection = await admin._router.any_connection()
        paged = await admin._topics._describe_topic_partitions(connection, [topic, "no-such-topic"])
        return paged, await admin.describe_topics([topic])
    paged, described = run(broker, both)
    assert paged[topic] == described[topic] and len(paged[topic].partitions) == 5
    assert isinstance(paged["no-such-topic"], UnknownTopicError)


# ---- calls that fail as a whole ----------------------------------------------------------------------------

def test_a_call_no_broker_answers_fails_every_future_after_its_timeout():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        with AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "retry.backoff.ms": 10}) as admin:
            futures = admin.create_topics([NewTopic("a", 1), NewTopic("b", 1)], request_timeout=0.5)
            for future in futures.values():
                expected = rf"create_topics '.' timed out after 0.5 s: could not connect to 127.0.0.1:{port} \("
                with pytest.raises(KafkaTimeoutError, match=expected):
                    future.result(10)


def test_close_ends_the_calls_in_flight():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{closed.getsockname()[1]}", "retry.backoff.ms": 10})
        futures = admin.delete_topics(["a", "b"], request_timeout=60)  # retrying: no broker answers
        admin.close()
        for future in futures.values():
            with pytest.raises(KafkaConnectionError, match="closed"):
                future.result(10)
        with pytest.raises(KafkaConnectionError, match="closed"):
            admin.describe_cluster()


def test_refused_credentials_fail_every_resource_without_retrying(secured):
    settings = {"bootstrap.servers": secured.broker.bootstrap_for("SASL_PLAINTEXT"),
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                "sasl.password": "wrong"}
    with AdminClient(settings) as admin:
        futures = admin.describe_topics(["a", "b"])
        for future in futures.values():
            with pytest.raises(SaslAuthenticationException):
                future.result(10)
    with pytest.raises(SaslAuthenticationException):
        asyncio.run(AsyncAdminClient(settings).__aenter__())

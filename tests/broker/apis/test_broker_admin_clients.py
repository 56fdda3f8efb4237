"""The admin APIs (issue 23) through real clients: confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient, against one broker shared by the module. Each test uses its own topics and groups."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions, NewTopic,
    OffsetSpec, ResourceType,
)


TIMEOUT = 15


@pytest.fixture(scope="module")
def admin(shared_broker):
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{shared_broker.port}"})


def _create(admin, name, partitions=1, config=None):
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        future.result(TIMEOUT)


def _produce(shared_broker, topic, count, partition=0, timestamps=None):
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{shared_broker.port}", "linger.ms": 0})
    for index in range(count):
        producer.produce(topic, value=b"v%d" % index, key=b"k%d" % index, partition=partition,
                         timestamp=timestamps[index] if timestamps else 0)
    assert producer.flush(TIMEOUT) == 0


def _described(admin, resource):
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


# ---- confluent-kafka ---------------------------------------------------------------------------

def test_create_partitions_grows_a_topic(shared_broker, admin):
    _create(admin, "ck-grow", 2)
    for future in admin.create_partitions([NewPartitions("ck-grow", 5)]).values():
        assert future.result(TIMEOUT) is None
    assert len(admin.list_topics("ck-grow", timeout=TIMEOUT).topics["ck-grow"].partitions) == 5
    _produce(shared_broker, "ck-grow", 3, partition=4)  # the new partition takes records
    with pytest.raises(Exception, match="INVALID_PARTITIONS"):
        admin.create_partitions([NewPartitions("ck-grow", 3)])["ck-grow"].result(TIMEOUT)


def test_delete_records_moves_the_low_watermark(shared_broker, admin):
    _create(admin, "ck-trim")
    _produce(shared_broker, "ck-trim", 10)
    deleted = admin.delete_records([TopicPartition("ck-trim", 0, 4)])
    assert deleted[TopicPartition("ck-trim", 0, 4)].result(TIMEOUT).low_watermark == 4
    earliest = admin.list_offsets({TopicPartition("ck-trim", 0): OffsetSpec.earliest()})
    assert earliest[TopicPartition("ck-trim", 0)].result(TIMEOUT).offset == 4
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{shared_broker.port}", "group.id": "ck-trim-reader",
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("ck-trim", 0, 0)])  # below the log start: reset to earliest
    first = None
    deadline = time.monotonic() + TIMEOUT
    while first is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            first = message
    consumer.close()
    assert first is not None and first.offset() == 4 and first.value() == b"v4"
    beyond = admin.delete_records([TopicPartition("ck-trim", 0, 99)])
    with pytest.raises(Exception, match="OFFSET_OUT_OF_RANGE"):
        beyond[TopicPartition("ck-trim", 0, 99)].result(TIMEOUT)


def test_incremental_alter_configs_applies_and_describe_reports_sources(shared_broker, admin):
    _create(admin, "ck-conf", config={"retention.ms": "3600000"})
    resource = ConfigResource(ResourceType.TOPIC, "ck-conf", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("max.message.bytes", "2048", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    assert admin.incremental_alter_configs([resource])[resource].result(TIMEOUT) is None
    configs = _described(admin, ConfigResource(ResourceType.TOPIC, "ck-conf"))
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == "2048"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.bytes"].synonyms["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    log = shared_broker.broker.topics.log("ck-conf", 0)  # applied to the running log
    assert log.config.max_message_bytes == 2048 and log.config.cleanup_policy == "delete,compact"
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{shared_broker.port}", "linger.ms": 0})
    errors = []
    producer.produce("ck-conf", value=b"x" * 4000, on_delivery=lambda error, _msg: errors.append(error))
    producer.flush(TIMEOUT)
    assert errors[0] is not None and errors[0].name() == "MSG_SIZE_TOO_LARGE"


def test_unknown_configs_and_validate_only(shared_broker, admin):
    _create(admin, "ck-check")
    bad = ConfigResource(ResourceType.TOPIC, "ck-check", incremental_configs=[
        ConfigEntry("retention.mss", "1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="INVALID_CONFIG"):
        admin.incremental_alter_configs([bad])[bad].result(TIMEOUT)
    dry = ConfigResource(ResourceType.TOPIC, "ck-check", incremental_configs=[
        ConfigEntry("segment.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    assert admin.incremental_alter_configs([dry], validate_only=True)[dry].result(TIMEOUT) is None
    assert _described(admin, ConfigResource(ResourceType.TOPIC, "ck-check"))["segment.ms"].value == "604800000"


def test_alter_configs_sets_a_dynamic_broker_default(shared_broker, admin):
    _create(admin, "ck-broker-default")
    resource = ConfigResource(ResourceType.BROKER, shared_broker.node, set_config={"log.retention.ms": "7200000"})
    assert admin.alter_configs([resource])[resource].result(TIMEOUT) is None
    try:
        topic = _described(admin, ConfigResource(ResourceType.TOPIC, "ck-broker-default"))
        assert topic["retention.ms"].value == "7200000"
        assert topic["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        brokers = _described(admin, ConfigResource(ResourceType.BROKER, shared_broker.node))
        assert brokers["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert brokers["num.partitions"].is_read_only
        assert shared_broker.broker.topics.log("ck-broker-default", 0).config.retention_ms == 7_200_000
    finally:
        cleared = ConfigResource(ResourceType.BROKER, shared_broker.node, set_config={})
        admin.alter_configs([cleared])[cleared].result(TIMEOUT)


def test_list_offsets_by_timestamp_and_max_timestamp(shared_broker, admin):
    _create(admin, "ck-times")
    _produce(shared_broker, "ck-times", 4, timestamps=[1_000, 5_000, 3_000, 4_000])
    tp = TopicPartition("ck-times", 0)
    by_time = admin.list_offsets({tp: OffsetSpec.for_timestamp(2_000)})[tp].result(TIMEOUT)
    assert (by_time.offset, by_time.timestamp) == (1, 5_000)
    newest = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(TIMEOUT)
    assert (newest.offset, newest.timestamp) == (1, 5_000)


def test_describe_topics_and_cluster(shared_broker, admin):
    from confluent_kafka import TopicCollection
    _create(admin, "ck-described", 3)
    described = admin.describe_topics(TopicCollection(["ck-described"]))["ck-described"].result(TIMEOUT)
    assert [p.id for p in described.partitions] == [0, 1, 2]
    node = int(shared_broker.node)
    assert all(p.leader.id == node and [r.id for r in p.isr] == [node] for p in described.partitions)
    cluster = admin.describe_cluster().result(TIMEOUT)
    assert cluster.controller.id == node and [n.id for n in cluster.nodes] == [node]


def test_delete_consumer_groups(shared_broker, admin):
    _create(admin, "ck-groups")
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{shared_broker.port}", "group.id": "ck-doomed"})
    consumer.commit(offsets=[TopicPartition("ck-groups", 0, 1)], asynchronous=False)
    consumer.close()
    deleted = admin.delete_consumer_groups(["ck-doomed"])
    assert deleted["ck-doomed"].result(TIMEOUT) is None
    with pytest.raises(Exception, match="GROUP_ID_NOT_FOUND"):
        admin.delete_consumer_groups(["ck-doomed"])["ck-doomed"].result(TIMEOUT)
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "ck-doomed", [TopicPartition("ck-groups", 0)])])["ck-doomed"].result(TIMEOUT)
    assert offsets.topic_partitions[0].offset < 0  # gone with the group


def test_elect_leaders_is_not_needed(shared_broker, admin):
    from confluent_kafka import ElectionType
    _create(admin, "ck-elect")
    results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("ck-elect", 0)]).result(TIMEOUT)
    error = results[TopicPartition("ck-elect", 0)]
    assert error is not None and error.name() == "ELECTION_NOT_NEEDED"


# ---- kafka-python ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kp_admin(shared_broker):
    from kafka.admin import KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{shared_broker.port}", request_timeout_ms=TIMEOUT * 1000)
    yield client
    client.close()


def test_kafka_python_partitions_records_and_log_dirs(shared_broker, admin, kp_admin):
    from kafka.admin import NewPartitions as KpNewPartitions
    from kafka.structs import TopicPartition as KpTopicPartition
    _create(admin, "kp-admin")
    kp_admin.create_partitions({"kp-admin": KpNewPartitions(total_count=2)})
    assert len(admin.list_topics("kp-admin", timeout=TIMEOUT).topics["kp-admin"].partitions) == 2
    _produce(shared_broker, "kp-admin", 5)
    low = kp_admin.delete_records({KpTopicPartition("kp-admin", 0): 3})
    assert low[KpTopicPartition("kp-admin", 0)]["low_watermark"] == 3
    [described] = kp_admin.describe_log_dirs({"kp-admin": [0, 1]})
    [log_dir] = described["log_dirs"]
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes[("kp-admin", 0)] > 0 and sizes[("kp-admin", 1)] == 0
    partitions = kp_admin.describe_topic_partitions(["kp-admin"])["topics"][0]["partitions"]
    node = int(shared_broker.node)
    assert [(p["partition_index"], p["leader_id"], p["isr_nodes"]) for p in partitions] == [(0, node, [node]),
                                                                                             (1, node, [node])]


def test_kafka_python_configs_and_group_offsets(shared_broker, admin, kp_admin):
    from kafka.admin import ConfigResource as KpConfigResource, ConfigResourceType
    from kafka.structs import TopicPartition as KpTopicPartition
    _create(admin, "kp-conf")
    kp_admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp-conf", configs={"segment.ms": "120000"})])
    assert _described(admin, ConfigResource(ResourceType.TOPIC, "kp-conf"))["segment.ms"].value == "120000"
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{shared_broker.port}", "group.id": "kp-offsets"})
    consumer.commit(offsets=[TopicPartition("kp-conf", 0, 7)], asynchronous=False)
    consumer.close()
    errors = kp_admin.delete_group_offsets("kp-offsets", [KpTopicPartition("kp-conf", 0)])
    assert [error.errno for error in errors.values()] == [0]
    assert kp_admin.list_group_offsets("kp-offsets") == {"kp-offsets": {}}


# ---- ACL calls on a broker without an authorizer ----------------------------------------------------

def test_acl_calls_without_an_authorizer_answer_security_disabled(shared_broker):
    # Kafka's AclApis: SECURITY_DISABLED (54), with its own wording for DescribeAcls and for the changes
    from support.broker_harness import RawClient
    from kafkawire import messages as m
    every = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    with RawClient(shared_broker.port) as raw:
        described = raw.request(m.DescribeAclsRequest(**every), 3)
        created = raw.request(m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*", operation=3,
            permission_type=3)]), 3)
        deleted = raw.request(m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(**every)]), 3)
    assert (described.error_code, described.error_message) == (54, "No Authorizer is configured on the broker")
    assert [(r.error_code, r.error_message) for r in created.results] == [(54, "No Authorizer is configured.")]
    assert [(r.error_code, r.error_message) for r in deleted.filter_results] == [(54, "No Authorizer is configured.")]


def test_real_admin_clients_see_security_disabled(shared_broker, admin, kp_admin):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
        ResourceType as AclResourceType,
    )
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import SecurityDisabledError
    from kafkawire.client import AdminClient as KafkawireAdmin
    from kafkawire.client import admin as kafkawire_acls
    binding = AclBinding(AclResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    every = AclBindingFilter(AclResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    for futures in (admin.create_acls([binding]), admin.delete_acls([every])):
        with pytest.raises(KafkaException, match="SECURITY_DISABLED"):
            [future.result(TIMEOUT) for future in futures.values()]
    # (librdkafka reads DescribeAcls' top-level error code and drops it, so confluent-kafka's describe_acls
    # lists nothing from Kafka as from kafkawire; kafka-python and kafkawire's client report it)
    with pytest.raises(SecurityDisabledError, match="No Authorizer is configured on the broker"):
        kp_admin.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                         permission_type=ACLPermissionType.ANY,
                                         resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                                                ACLResourcePatternType.ANY)))
    ours = KafkawireAdmin({"bootstrap.servers": f"127.0.0.1:{shared_broker.port}"})
    try:
        with pytest.raises(Exception, match="SECURITY_DISABLED"):
            ours.describe_acls(kafkawire_acls.AclBindingFilter(
                kafkawire_acls.ResourceType.ANY, None, kafkawire_acls.ResourcePatternType.ANY, None, None,
                kafkawire_acls.AclOperation.ANY, kafkawire_acls.AclPermissionType.ANY)).result(TIMEOUT)
    finally:
        ours.close()

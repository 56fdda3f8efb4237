"""The admin APIs' details over the wire (issue 23): DescribeConfigs' sources and synonyms, what
AlterConfigs / IncrementalAlterConfigs refuse and validate_only, DeleteRecords, OffsetForLeaderEpoch,
ElectLeaders, DescribeTopicPartitions' paging, OffsetDelete and DeleteGroups against a live group, the
KIP-714 telemetry APIs, and what a restart keeps."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from support.broker_harness import BrokerThread, RawClient, own_broker
from support.broker_wire import batch_of, create_topic, produce
from kafkawire import messages as m
from kafkawire.codec.primitives import ZERO_UUID
from kafkawire.error_codes import ErrorCode
from kafkawire.records.compression import compress

TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC_BROKER, DEFAULT = 1, 2, 3, 4, 5
INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC, OUT_OF_RANGE, POLICY_VIOLATION = 40, 42, 3, 1, 44
SEGMENT_BYTES = 8 << 20  # a static broker config (log.segment.bytes), not Kafka's default


broker = own_broker(segment_bytes=SEGMENT_BYTES, telemetry_max_bytes=4096)


@pytest.fixture
def client(broker):
    with RawClient(broker.port) as raw:
        yield raw


def _describe(client, kind, name, keys=None, synonyms=True, version=4):
    request = m.DescribeConfigsRequest(resources=[m.DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=kind, resource_name=name, configuration_keys=keys)], include_synonyms=synonyms)
    (result,) = client.request(request, version).results
    return result


def _entries(result):
    return {entry.name: entry for entry in result.configs}


def _incremental(client, kind, name, ops, validate_only=False):
    Config = m.IncrementalAlterConfigsRequest.AlterableConfig
    request = m.IncrementalAlterConfigsRequest(resources=[m.IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=kind, resource_name=name, configs=[Config(name=k, config_operation=op, value=v)
                                                         for k, op, v in ops])], validate_only=validate_only)
    return client.request(request, 1).responses[0]


def _alter(client, kind, name, configs, validate_only=False, version=2):
    Config = m.AlterConfigsRequest.AlterableConfig
    request = m.AlterConfigsRequest(resources=[m.AlterConfigsRequest.AlterConfigsResource(
        resource_type=kind, resource_name=name, configs=[Config(name=k, value=v) for k, v in configs.items()])],
        validate_only=validate_only)
    return client.request(request, version).responses[0]


# ---- DescribeConfigs ---------------------------------------------------------------------------

def test_sources_and_synonyms_as_kafka_reports_them(client):
    create_topic(client, "w-sources", 1, {"retention.ms": "60000"})
    entries = _entries(_describe(client, 2, "w-sources"))
    retention = entries["retention.ms"]  # the topic's own, then no broker synonym is set: only the override
    assert (retention.value, retention.config_source, retention.config_type) == ("60000", TOPIC_CONFIG, 5)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [("retention.ms", "60000", TOPIC_CONFIG)]
    segment = entries["segment.bytes"]  # from the broker's properties, above Kafka's default
    assert (segment.value, segment.config_source, segment.config_type) == (str(SEGMENT_BYTES), STATIC_BROKER, 3)
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("log.segment.bytes", str(SEGMENT_BYTES), STATIC_BROKER), ("log.segment.bytes", "1073741824", DEFAULT)]
    policy = entries["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.config_type) == ("delete", DEFAULT, 7)
    assert [(s.name, s.source) for s in policy.synonyms] == [("log.cleanup.policy", DEFAULT)]
    assert entries["segment.ms"].synonyms == ()  # log.roll.ms has no default; log.roll.hours is dropped, as Kafka
    assert entries["min.cleanable.dirty.ratio"].config_type == 6  # DOUBLE
    plain = _describe(client, 2, "w-sources", keys=["retention.ms"], synonyms=False)
    assert [(e.name, e.synonyms) for e in plain.configs] == [("retention.ms", ())]


def test_create_topics_answers_every_config_with_its_source(client):
    request = m.CreateTopicsRequest(timeout_ms=5000, topics=[m.CreateTopicsRequest.CreatableTopic(
        name="w-created", num_partitions=1, replication_factor=1,
        configs=[m.CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="60000")])])
    (created,) = client.request(request, 7).topics
    sources = {c.name: (c.value, c.config_source) for c in created.configs}
    assert sources["retention.ms"] == ("60000", TOPIC_CONFIG)
    assert sources["segment.bytes"] == (str(SEGMENT_BYTES), STATIC_BROKER)
    assert sources["cleanup.policy"] == ("delete", DEFAULT)


def test_create_topics_refuses_a_null_config_value(client):
    # Kafka's controller answers INVALID_CONFIG naming the null configs; the topic is not created
    Config = m.CreateTopicsRequest.CreatableTopicConfig
    request = m.CreateTopicsRequest(timeout_ms=5000, topics=[m.CreateTopicsRequest.CreatableTopic(
        name="w-null-config", num_partitions=1, replication_factor=1,
        configs=[Config(name="retention.ms", value=None), Config(name="segment.ms", value="60000"),
                 Config(name="cleanup.policy", value=None)])])
    (refused,) = client.request(request, 7).topics
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: retention.ms,cleanup.policy")
    metadata = client.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(
        name="w-null-config")], allow_auto_topic_creation=False), 12)
    assert metadata.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_broker_configs_and_their_errors(client):
    entries = _entries(_describe(client, 4, "0"))
    assert entries["log.segment.bytes"].config_source == STATIC_BROKER and not entries["log.segment.bytes"].read_only
    assert entries["log.retention.hours"].value == "168" and entries["log.retention.hours"].config_source == DEFAULT
    assert entries["log.retention.ms"].value is None  # no default of its own, as Kafka shows it
    assert entries["num.partitions"].read_only
    assert _describe(client, 4, "").configs == ()  # no cluster-wide dynamic defaults set
    wrong = _describe(client, 4, "7")
    assert wrong.error_code == INVALID_REQUEST and "Unexpected broker id" in wrong.error_message
    assert _describe(client, 2, "w-missing").error_code == UNKNOWN_TOPIC


# ---- AlterConfigs / IncrementalAlterConfigs ----------------------------------------------------

def test_what_alter_configs_refuses(client):
    create_topic(client, "w-refused", 1)
    cases = [
        (2, "w-refused", {"retention.mss": "1"}, INVALID_CONFIG, "Unknown topic config name: retention.mss"),
        (2, "w-refused", {"retention.ms": "soon"}, INVALID_CONFIG, "Not a number of type long"),
        (2, "w-refused", {"cleanup.policy": "shred"}, INVALID_CONFIG, "String must be one of: compact, delete"),
        (2, "w-refused", {"min.cleanable.dirty.ratio": "1.5"}, INVALID_CONFIG, "Value must be no more than 1"),
        (2, "w-refused", {"message.timestamp.type": "Now"}, INVALID_CONFIG, "String must be one of"),
        (2, "w-missing", {"retention.ms": "1"}, UNKNOWN_TOPIC, None),
        (4, "0", {"num.partitions": "3"}, INVALID_CONFIG, "Cannot update these configs dynamically"),
        (4, "0", {"log.retention.bytes": "lots"}, INVALID_CONFIG, "log.retention.bytes"),
        (4, "3", {"log.retention.bytes": "1"}, INVALID_REQUEST, "Unexpected broker id"),
        (1, "x", {"a": "b"}, INVALID_REQUEST, "Unsupported resource type"),
    ]
    for kind, name, configs, code, message in cases:
        answer = _alter(client, kind, name, configs)
        assert answer.error_code == code, (configs, answer)
        assert message is None or message in answer.error_message, (message, answer.error_message)
    assert _entries(_describe(client, 2, "w-refused"))["retention.ms"].config_source == DEFAULT  # nothing changed


def test_incremental_operations_and_validate_only(broker, client):
    create_topic(client, "w-incr", 1, {"cleanup.policy": "delete"})
    SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
    dry = _incremental(client, 2, "w-incr", [("segment.ms", SET, "1000")], validate_only=True)
    assert dry.error_code == 0
    assert _entries(_describe(client, 2, "w-incr"))["segment.ms"].value == "604800000"
    assert _incremental(client, 2, "w-incr", [("cleanup.policy", APPEND, "compact"), ("segment.ms", SET, "1000")]
                        ).error_code == 0
    log = broker.broker.topics.log("w-incr", 0)
    assert (log.config.cleanup_policy, log.config.segment_ms) == ("delete,compact", 1000)
    assert _incremental(client, 2, "w-incr", [("cleanup.policy", SUBTRACT, "delete")]).error_code == 0
    assert log.config.cleanup_policy == "compact" and log.config.compact and not log.config.delete
    refused = _incremental(client, 2, "w-incr", [("segment.ms", APPEND, "5")])
    assert refused.error_code == INVALID_CONFIG and "append is not allowed" in refused.error_message
    duplicate = _incremental(client, 2, "w-incr", [("segment.ms", SET, "5"), ("segment.ms", DELETE, None)])
    assert duplicate.error_code == INVALID_REQUEST
    assert _incremental(client, 2, "w-incr", [("segment.ms", DELETE, None)]).error_code == 0
    assert log.config.segment_ms == 604_800_000


def test_dynamic_broker_configs_in_order_of_precedence(broker, client):
    create_topic(client, "w-dynamic", 1)
    try:
        assert _alter(client, 4, "", {"log.retention.minutes": "30"}).error_code == 0
        retention = _entries(_describe(client, 2, "w-dynamic"))["retention.ms"]
        # ConfigHelper lists synonyms from log.retention.ms on: without it, none (and the source DEFAULT_CONFIG)
        assert (retention.value, retention.config_source, retention.synonyms) == ("1800000", DEFAULT, ())
        assert broker.broker.topics.log("w-dynamic", 0).config.retention_ms == 1_800_000
        assert _alter(client, 4, "0", {"log.retention.ms": "900000"}).error_code == 0
        retention = _entries(_describe(client, 2, "w-dynamic"))["retention.ms"]
        assert (retention.value, retention.config_source) == ("900000", DYNAMIC_BROKER)
        assert [(s.name, s.source) for s in retention.synonyms] == [
            ("log.retention.ms", DYNAMIC_BROKER), ("log.retention.minutes", DYNAMIC_DEFAULT),
            ("log.retention.hours", DEFAULT)]
        assert broker.broker.topics.log("w-dynamic", 0).config.retention_ms == 900_000
        defaults = _describe(client, 4, "")
        assert [(e.name, e.value, e.config_source) for e in defaults.configs] == [
            ("log.retention.minutes", "30", DYNAMIC_DEFAULT)]
    finally:
        assert _alter(client, 4, "0", {}).error_code == 0
        assert _alter(client, 4, "", {}).error_code == 0
    assert broker.broker.topics.log("w-dynamic", 0).config.retention_ms == 604_800_000


# ---- DeleteRecords, OffsetForLeaderEpoch, ElectLeaders, DescribeTopicPartitions ------------------

def _delete_records(client, topic, offset, partition=0):
    request = m.DeleteRecordsRequest(timeout_ms=5000, topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
        name=topic, partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=partition,
                                                                               offset=offset)])])
    return client.request(request, 2).topics[0].partitions[0]


def test_delete_records_to_the_high_watermark_and_beyond(client):
    create_topic(client, "w-records", 1)
    for _ in range(3):
        produce(client, "w-records", 0, batch_of(120))
    assert (_delete_records(client, "w-records", 1).low_watermark, _delete_records(client, "w-records", 0).low_watermark) \
        == (1, 1)  # never backwards
    beyond = _delete_records(client, "w-records", 4)
    assert (beyond.error_code, beyond.low_watermark) == (OUT_OF_RANGE, -1)
    assert _delete_records(client, "w-records", -1).low_watermark == 3  # -1: the high watermark
    assert _delete_records(client, "w-records", 0, partition=5).error_code == UNKNOWN_TOPIC
    create_topic(client, "w-compacted", 1, {"cleanup.policy": "compact"})
    assert _delete_records(client, "w-compacted", -1).error_code == POLICY_VIOLATION


def _end_offset(client, topic, epoch, current=-1, version=4):
    request = m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
        topic=topic, partitions=[m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=current, leader_epoch=epoch)])])
    answer = client.request(request, version).topics[0].partitions[0]
    return answer.error_code, answer.leader_epoch, answer.end_offset


def test_offset_for_leader_epoch_from_the_checkpoint(broker, client):
    create_topic(client, "w-epochs", 1)
    produce(client, "w-epochs", 0, batch_of(150, records=3))
    assert _end_offset(client, "w-epochs", 0) == (0, 0, 3)  # the latest epoch ends at the log end
    assert _end_offset(client, "w-epochs", 0, current=0, version=2) == (0, 0, 3)
    assert _end_offset(client, "w-epochs", 4) == (0, -1, -1)  # newer than any known
    assert _end_offset(client, "w-epochs", 0, current=2) == (75, -1, -1)  # UNKNOWN_LEADER_EPOCH
    assert _end_offset(client, "w-missing", 0) == (UNKNOWN_TOPIC, -1, -1)
    for current, code, epoch in ((-1, 0, 0), (0, 0, 0), (3, 75, -1)):  # ListOffsets checks the leader epoch too
        listed = client.request(m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
            name="w-epochs", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=current, timestamp=-2)])]), 9).topics[0].partitions[0]
        assert (listed.error_code, listed.leader_epoch) == (code, epoch)
    checkpoint = broker.config.data_dir / "w-epochs-0" / "leader-epoch-checkpoint"
    assert checkpoint.read_text() == "0\n1\n0 0\n"  # Kafka's format: version, count, epoch start-offset


def test_elect_leaders_is_never_needed(client):
    create_topic(client, "w-elect", 2)
    request = m.ElectLeadersRequest(election_type=0, timeout_ms=5000, topic_partitions=[
        m.ElectLeadersRequest.TopicPartitions(topic="w-elect", partitions=[0, 1, 9])])
    answer = client.request(request, 2)
    assert answer.error_code == 0
    assert [(p.partition_id, p.error_code) for p in answer.replica_election_results[0].partition_result] == [
        (0, 84), (1, 84), (9, UNKNOWN_TOPIC)]  # ELECTION_NOT_NEEDED
    every = client.request(m.ElectLeadersRequest(election_type=1, timeout_ms=5000, topic_partitions=None), 2)
    assert (every.error_code, every.replica_election_results) == (0, ())


def test_describe_topic_partitions_pages_with_a_cursor(client):
    create_topic(client, "w-pages-a", 3)
    create_topic(client, "w-pages-b", 2)
    Topic = m.DescribeTopicPartitionsRequest.TopicRequest
    wanted = [Topic(name="w-pages-b"), Topic(name="w-pages-a"), Topic(name="w-pages-none")]
    first = client.request(m.DescribeTopicPartitionsRequest(topics=wanted, response_partition_limit=2), 0)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in first.topics] == [("w-pages-a", [0, 1])]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("w-pages-a", 2)
    second = client.request(m.DescribeTopicPartitionsRequest(topics=wanted, response_partition_limit=2,
                                                              cursor=first.next_cursor), 0)
    assert [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in second.topics] == [
        ("w-pages-a", 0, [2]), ("w-pages-b", 0, [0])]
    third = client.request(m.DescribeTopicPartitionsRequest(topics=wanted, response_partition_limit=2,
                                                             cursor=second.next_cursor), 0)
    assert [(t.name, t.error_code) for t in third.topics] == [("w-pages-b", 0), ("w-pages-none", UNKNOWN_TOPIC)]
    assert third.next_cursor is None and third.topics[0].topic_id != ZERO_UUID


# ---- OffsetDelete and DeleteGroups against a group with a member ------------------------------

def test_offset_delete_refuses_the_topics_a_live_group_consumes(broker, client):
    create_topic(client, "w-consumed", 1)
    create_topic(client, "w-idle", 1)
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "group.id": "w-live",
                         "session.timeout.ms": 6000})
    try:
        consumer.subscribe(["w-consumed"])
        deadline = time.monotonic() + 15
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition("w-consumed", 0, 1), TopicPartition("w-idle", 0, 1)],
                        asynchronous=False)
        Topic, Partition = m.OffsetDeleteRequest.OffsetDeleteRequestTopic, m.OffsetDeleteRequest.OffsetDeleteRequestPartition
        answer = client.request(m.OffsetDeleteRequest(group_id="w-live", topics=[
            Topic(name=name, partitions=[Partition(partition_index=0)]) for name in ("w-consumed", "w-idle", "w-gone")]), 0)
        assert answer.error_code == 0
        assert [(t.name, t.partitions[0].error_code) for t in answer.topics] == [
            ("w-consumed", 86), ("w-idle", 0), ("w-gone", UNKNOWN_TOPIC)]  # 86: GROUP_SUBSCRIBED_TO_TOPIC
        assert broker.broker.groups.committed("w-live") == {("w-consumed", 0): (1, "")}
        busy = client.request(m.DeleteGroupsRequest(groups_names=["w-live", "w-nobody"]), 2)
        assert [(r.group_id, r.error_code) for r in busy.results] == [("w-live", 68), ("w-nobody", 69)]
    finally:
        consumer.close()
    gone = client.request(m.DeleteGroupsRequest(groups_names=["w-live"]), 2)
    assert [(r.group_id, r.error_code) for r in gone.results] == [("w-live", 0)]
    missing = client.request(m.OffsetDeleteRequest(group_id="w-live", topics=[]), 0)
    assert missing.error_code == 69  # GROUP_ID_NOT_FOUND


def test_a_kip848_group_is_deleted_only_when_empty(broker, client):
    create_topic(client, "w-848", 1)
    create_topic(client, "w-848-idle", 1)
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "group.id": "w-848-group",
                         "group.protocol": "consumer"})
    try:
        consumer.subscribe(["w-848"])
        deadline = time.monotonic() + 15
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition("w-848", 0, 1), TopicPartition("w-848-idle", 0, 1)],
                        asynchronous=False)
        Topic, Partition = m.OffsetDeleteRequest.OffsetDeleteRequestTopic, m.OffsetDeleteRequest.OffsetDeleteRequestPartition
        answer = client.request(m.OffsetDeleteRequest(group_id="w-848-group", topics=[
            Topic(name=name, partitions=[Partition(partition_index=0)]) for name in ("w-848", "w-848-idle")]), 0)
        assert [(t.name, t.partitions[0].error_code) for t in answer.topics] == [("w-848", 86), ("w-848-idle", 0)]
        busy = client.request(m.DeleteGroupsRequest(groups_names=["w-848-group"]), 2)
        assert busy.results[0].error_code == 68  # NON_EMPTY_GROUP
    finally:
        consumer.close()
    gone = client.request(m.DeleteGroupsRequest(groups_names=["w-848-group"]), 2)
    assert gone.results[0].error_code == 0 and broker.broker.groups.committed("w-848-group") == {}


# ---- telemetry (KIP-714) -----------------------------------------------------------------------

def _subscribe(client, name, configs):
    SET, DELETE = 0, 1
    return _incremental(client, 16, name, [(k, SET if v is not None else DELETE, v) for k, v in configs.items()])


def test_telemetry_subscriptions_and_pushes_on_the_wire(broker, client):
    assert _subscribe(client, "w-sub", {"metrics": "org.apache.kafka.producer.", "interval.ms": "100",
                                        "match": "client_id=w-telemetry.*"}).error_code == 0
    assert _subscribe(client, "w-bad", {"interval.ms": "5"}).error_code == INVALID_CONFIG
    described = _describe(client, 16, "w-sub")
    assert [(e.name, e.value, e.config_source) for e in described.configs] == [
        ("interval.ms", "100", 7), ("match", "client_id=w-telemetry.*", 7), ("metrics", "org.apache.kafka.producer.", 7)]
    with RawClient(broker.port, client_id="w-telemetry-1") as telemetry:
        got = telemetry.request(m.GetTelemetrySubscriptionsRequest(client_instance_id=ZERO_UUID), 0)
        assert got.error_code == 0 and got.client_instance_id != ZERO_UUID
        assert (list(got.accepted_compression_types), got.push_interval_ms, got.telemetry_max_bytes,
                got.delta_temporality, list(got.requested_metrics)) == ([4, 3, 1, 2], 100, 4096, True,
                                                                        ["org.apache.kafka.producer."])
        again = telemetry.request(m.GetTelemetrySubscriptionsRequest(client_instance_id=got.client_instance_id), 0)
        assert again.error_code == 89  # THROTTLING_QUOTA_EXCEEDED: before the push interval

        def push(subscription=got.subscription_id, compression=0, metrics=b"\x0a\x00", terminating=False):
            return telemetry.request(m.PushTelemetryRequest(
                client_instance_id=got.client_instance_id, subscription_id=subscription, terminating=terminating,
                compression_type=compression, metrics=metrics), 0).error_code
        assert push(subscription=got.subscription_id + 1) == 117  # UNKNOWN_SUBSCRIPTION_ID
        time.sleep(0.12)
        assert push(compression=9) == 76  # UNSUPPORTED_COMPRESSION_TYPE
        time.sleep(0.12)
        assert push(metrics=b"x" * 5000) == 118  # TELEMETRY_TOO_LARGE
        time.sleep(0.12)
        assert push(compression=4, metrics=compress(4, b"metrics-payload")) == 0
        assert push(terminating=True, metrics=b"last") == 0  # a terminating push is accepted at once
        assert push() == INVALID_REQUEST  # nothing after it
    instance = broker.broker.handlers.client_metrics.instances[got.client_instance_id]
    assert instance.latest_metrics() == b"last" and instance.attributes["client_id"] == "w-telemetry-1"
    with RawClient(broker.port, client_id="other") as other:  # matches no subscription: asked for nothing
        unmatched = other.request(m.GetTelemetrySubscriptionsRequest(client_instance_id=ZERO_UUID), 0)
        assert (list(unmatched.requested_metrics), unmatched.push_interval_ms) == ([], 300_000)
    assert _subscribe(client, "w-sub", {"metrics": None, "interval.ms": None, "match": None}).error_code == 0
    assert _describe(client, 16, "w-sub").configs == ()


def test_confluent_kafka_pushes_its_metrics(broker, client):
    assert _subscribe(client, "w-all", {"metrics": "*", "interval.ms": "200", "match": "client_id=w-ck-.*"}
                      ).error_code == 0
    try:
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "client.id": "w-ck-producer",
                             "linger.ms": 0})
        producer.produce("w-ck-metrics", b"x")
        producer.flush(10)
        metrics = broker.broker.handlers.client_metrics
        deadline = time.monotonic() + 15
        pushed = []
        while not pushed and time.monotonic() < deadline:
            producer.poll(0.1)
            pushed = [i for i in list(metrics.instances.values())
                      if i.attributes.get("client_id") == "w-ck-producer" and i.payload]
        assert pushed, "confluent-kafka pushed no metrics"
        assert pushed[0].attributes["client_software_name"] == "confluent-kafka-python"
        assert b"org.apache.kafka.producer" in pushed[0].latest_metrics()  # OTLP: metric names as strings
    finally:
        _subscribe(client, "w-all", {"metrics": None, "interval.ms": None, "match": None})


# ---- a restart keeps it all --------------------------------------------------------------------

def test_a_restart_keeps_configs_log_start_and_epochs(tmp_path):
    with BrokerThread(data_dir=tmp_path) as running, RawClient(running.port) as raw:
        create_topic(raw, "w-kept", 1)
        for _ in range(4):
            produce(raw, "w-kept", 0, batch_of(100))
        assert _alter(raw, 2, "w-kept", {"retention.bytes": "123456", "cleanup.policy": "compact,delete"}).error_code == 0
        assert _alter(raw, 4, "", {"log.cleaner.delete.retention.ms": "5000"}).error_code == 0
        assert _delete_records(raw, "w-kept", 2).low_watermark == 2
    with BrokerThread(data_dir=tmp_path) as running, RawClient(running.port) as raw:
        log = running.broker.topics.log("w-kept", 0)
        assert (log.config.retention_bytes, log.config.cleanup_policy, log.config.delete_retention_ms) == (
            123456, "compact,delete", 5000)
        assert log.log_start_offset == 2
        earliest = raw.request(m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
            name="w-kept", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-2)])]), 7)
        assert earliest.topics[0].partitions[0].offset == 2
        assert _end_offset(raw, "w-kept", 0) == (0, 0, 4)
        assert _entries(_describe(raw, 2, "w-kept"))["delete.retention.ms"].config_source == DYNAMIC_DEFAULT

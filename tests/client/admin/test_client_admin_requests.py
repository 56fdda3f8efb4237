"""The admin client's requests at every version of Kafka 4.3's specs (each one it can build encodes and
decodes back to itself; one it cannot is refused with a message, never sent wrong), and its reading of
answers, including those of the APIs the broker may not serve (CreatePartitions, DeleteRecords,
AlterConfigs, IncrementalAlterConfigs, DeleteGroups, OffsetDelete, DescribeTopicPartitions): each
response is encoded at every version and decoded before it is read."""
from __future__ import annotations

import uuid

import pytest

from kafkawire import messages as m
from kafkawire.client.admin import (
    AclBinding, AdminConfig, AclBindingFilter, AlterConfigOpType, ConfigEntry, ConfigResource, ConsumerGroupState,
    ConsumerGroupType, IsolationLevel, NewPartitions, NewTopic, OffsetSpec, ScramCredentialInfo, ScramMechanism,
    TopicPartition, UserScramCredentialDeletion, UserScramCredentialUpsertion,
)
from kafkawire.client.core.admin import acls as admin_acls
from kafkawire.client.core.admin import groups as admin_groups
from kafkawire.client.core.admin import partitions as admin_partitions
from kafkawire.client.core.admin import resource_configs as admin_configs
from kafkawire.client.core.admin import scram as admin_scram
from kafkawire.client.core.admin import topics as admin_topics
from kafkawire.client.core.admin import transactions as admin_transactions
from kafkawire.client.core.admin.errors import Retry
from kafkawire.client.core.admin.topics import Node
from kafkawire.client.errors import ConfigError, KafkaError, UnknownTopicError
from kafkawire.error_codes import ErrorCode as E
from kafkawire.sasl.scram import MECHANISMS

TP = TopicPartition


def versions(message_class, low=None, high=None):
    """The versions of an API in Kafka 4.3's specs, within what the admin client sends of it."""
    info = m.api(message_class.API_KEY)
    return range(max(info.min_version, low or 0), min(info.max_version, info.max_version if high is None else high) + 1)


# The versions the admin client keeps to (AsyncAdminClient asks the connection for one in these ranges).
SENT_VERSIONS = {"metadata": (1, None), "offset_fetch": (2, admin_groups.OFFSET_FETCH_MAX_VERSION),
                 "offset_fetch_all": (2, admin_groups.OFFSET_FETCH_MAX_VERSION)}


def round_trips(request, version):
    assert type(request).decode(request.encode(version), version, exact=True) == request


def answered(response, version):
    """``response`` as a client reads it off the wire at ``version``."""
    return type(response).decode(response.encode(version), version, exact=True)


ACL = AclBinding("topic", "orders", "literal", "User:alice", "*", "read", "allow")
ACL_FILTER = AclBindingFilter("any", None, "any", None, None, "any", "any")

# (request class, a function of the version that builds it)
BUILDERS = {
    "create_topics": (m.CreateTopicsRequest, lambda v: admin_topics.create_topics_request(
        [NewTopic("a", 3, 1, config={"retention.ms": "1000"}), NewTopic("b", replica_assignment=[[0], [0]])],
        5000, False)),
    "delete_topics": (m.DeleteTopicsRequest, lambda v: admin_topics.delete_topics_request(v, ["a", "b"], 5000)),
    "create_partitions": (m.CreatePartitionsRequest, lambda v: admin_topics.create_partitions_request(
        [NewPartitions("a", 4), NewPartitions("b", 3, [[0], [1]])], 5000, True)),
    "metadata": (m.MetadataRequest, lambda v: admin_topics.metadata_request(v, ["a"], True)),
    "describe_topic_partitions": (m.DescribeTopicPartitionsRequest,
                                  lambda v: admin_topics.describe_topic_partitions_request(["a", "b"], ("a", 3), 10)),
    "describe_cluster": (m.DescribeClusterRequest, lambda v: admin_topics.describe_cluster_request(True)),
    "describe_configs": (m.DescribeConfigsRequest, lambda v: admin_configs.describe_configs_request(
        v, [ConfigResource("topic", "a"), ConfigResource("broker", "0")], True, True)),
    "alter_configs": (m.AlterConfigsRequest, lambda v: admin_configs.alter_configs_request(
        [ConfigResource("topic", "a", set_config={"retention.ms": "10"})], False)),
    "incremental_alter_configs": (m.IncrementalAlterConfigsRequest, lambda v: admin_configs
                                  .incremental_alter_configs_request([ConfigResource("topic", "a", incremental_configs=[
                                      ConfigEntry("retention.ms", "10", incremental_operation=AlterConfigOpType.SET),
                                      ConfigEntry("cleanup.policy", None,
                                                  incremental_operation=AlterConfigOpType.DELETE),
                                  ])], True)),
    "list_offsets": (m.ListOffsetsRequest, lambda v: admin_partitions.list_offsets_request(
        v, {TP("a", 0): OffsetSpec.latest(), TP("a", 1): OffsetSpec.for_timestamp(5)}, IsolationLevel.READ_COMMITTED,
        {TP("a", 0): 3})),
    "delete_records": (m.DeleteRecordsRequest, lambda v: admin_partitions.delete_records_request(
        {TP("a", 0): 5, TP("b", 1): -1}, 1000)),
    "describe_producers": (m.DescribeProducersRequest, lambda v: admin_partitions.describe_producers_request(
        [TP("a", 0), TP("a", 2)])),
    "list_groups": (m.ListGroupsRequest, lambda v: admin_groups.list_groups_request(v, [], [])),
    "describe_groups": (m.DescribeGroupsRequest, lambda v: admin_groups.describe_groups_request(v, ["g", "h"], True)),
    "consumer_group_describe": (m.ConsumerGroupDescribeRequest,
                                lambda v: admin_groups.consumer_group_describe_request(["g"], True)),
    "delete_groups": (m.DeleteGroupsRequest, lambda v: admin_groups.delete_groups_request(["g", "h"])),
    "offset_delete": (m.OffsetDeleteRequest,
                      lambda v: admin_groups.offset_delete_request("g", [TP("a", 0), TP("b", 1)])),
    "offset_fetch": (m.OffsetFetchRequest, lambda v: admin_groups.offset_fetch_request(v, "g", [TP("a", 0)], True)),
    "offset_fetch_all": (m.OffsetFetchRequest, lambda v: admin_groups.offset_fetch_request(v, "g", None, False)),
    "describe_transactions": (m.DescribeTransactionsRequest,
                              lambda v: admin_transactions.describe_transactions_request(["t1", "t2"])),
    "list_transactions": (m.ListTransactionsRequest, lambda v: admin_transactions.list_transactions_request(
        v, ["Ongoing"], [7], None, None)),
    "create_acls": (m.CreateAclsRequest, lambda v: admin_acls.create_acls_request([ACL])),
    "describe_acls": (m.DescribeAclsRequest, lambda v: admin_acls.describe_acls_request(ACL_FILTER)),
    "delete_acls": (m.DeleteAclsRequest, lambda v: admin_acls.delete_acls_request([ACL_FILTER])),
    "describe_scram": (m.DescribeUserScramCredentialsRequest,
                       lambda v: admin_scram.describe_user_scram_credentials_request(["alice"])),
    "alter_scram": (m.AlterUserScramCredentialsRequest, lambda v: admin_scram.alter_user_scram_credentials_request([
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw", b"salt"),
        UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)])),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_request_round_trips_at_every_version(name):
    request_class, build = BUILDERS[name]
    for version in versions(request_class, *SENT_VERSIONS.get(name, (None, None))):
        request = build(version)
        assert isinstance(request, request_class)
        round_trips(request, version)


def test_requests_a_version_cannot_carry_are_refused():
    with pytest.raises(ValueError, match="ListGroups v4"):
        admin_groups.list_groups_request(3, [ConsumerGroupState.STABLE], [])
    with pytest.raises(ValueError, match="ListGroups v5"):
        admin_groups.list_groups_request(4, [], [ConsumerGroupType.CONSUMER])
    with pytest.raises(ValueError, match="v1"):
        admin_transactions.list_transactions_request(0, [], [], 1000, None)
    assert admin_partitions.list_offsets_min_version([OffsetSpec.max_timestamp()], IsolationLevel.READ_UNCOMMITTED) == 7
    assert admin_partitions.list_offsets_min_version([OffsetSpec.earliest()], IsolationLevel.READ_COMMITTED) == 2
    with pytest.raises(ValueError, match="incremental_operation"):
        admin_configs.incremental_alter_configs_request([ConfigResource("topic", "a", incremental_configs=[
            ConfigEntry("retention.ms", "1")])], False)


def test_a_scram_upsertion_carries_the_salted_password_not_the_password():
    request = BUILDERS["alter_scram"][1](0)
    upsertion = request.upsertions[0]
    assert upsertion.salt == b"salt" and upsertion.iterations == 4096
    assert upsertion.salted_password == MECHANISMS["SCRAM-SHA-256"].salted_password("pw", b"salt", 4096)
    assert b"pw" not in upsertion.salted_password


# ---- answers ---------------------------------------------------------------------------------------------

def test_create_partitions_answers():
    R = m.CreatePartitionsResponse
    for version in versions(R):
        response = answered(R(results=[R.CreatePartitionsTopicResult(name="a"), R.CreatePartitionsTopicResult(
            name="b", error_code=E.INVALID_PARTITIONS, error_message="fewer"), R.CreatePartitionsTopicResult(
            name="c", error_code=E.NOT_CONTROLLER)]), version)
        found = admin_topics.read_create_partitions(response)
        assert found["a"] is None and found["b"].code == E.INVALID_PARTITIONS and "fewer" in str(found["b"])
        assert isinstance(found["c"], Retry)


def test_delete_records_answers():
    R = m.DeleteRecordsResponse
    for version in versions(R):
        response = answered(R(topics=[R.DeleteRecordsTopicResult(name="a", partitions=[
            R.DeleteRecordsPartitionResult(partition_index=0, low_watermark=12),
            R.DeleteRecordsPartitionResult(partition_index=1, low_watermark=-1, error_code=E.OFFSET_OUT_OF_RANGE),
            R.DeleteRecordsPartitionResult(partition_index=2, low_watermark=-1, error_code=E.NOT_LEADER_OR_FOLLOWER),
        ])]), version)
        found = admin_partitions.read_delete_records(response)
        assert found[TP("a", 0)].low_watermark == 12
        assert found[TP("a", 1)].code == E.OFFSET_OUT_OF_RANGE
        assert isinstance(found[TP("a", 2)], Retry) and found[TP("a", 2)].refresh == "metadata"


@pytest.mark.parametrize("response_class", [m.AlterConfigsResponse, m.IncrementalAlterConfigsResponse])
def test_alter_configs_answers(response_class):
    R = response_class
    for version in versions(R):
        response = answered(R(responses=[
            R.AlterConfigsResourceResponse(resource_type=2, resource_name="a"),
            R.AlterConfigsResourceResponse(resource_type=4, resource_name="0", error_code=E.INVALID_CONFIG,
                                           error_message="no such config")]), version)
        found = admin_configs.read_alter_configs(response)
        assert found[(2, "a")] is None and found[(4, "0")].code == E.INVALID_CONFIG


def test_delete_groups_and_offset_delete_answers():
    R = m.DeleteGroupsResponse
    for version in versions(R):
        found = admin_groups.read_delete_groups(answered(R(results=[
            R.DeletableGroupResult(group_id="g"), R.DeletableGroupResult(group_id="h", error_code=E.NON_EMPTY_GROUP),
            R.DeletableGroupResult(group_id="i", error_code=E.NOT_COORDINATOR)]), version))
        assert found["g"] is None and found["h"].code == E.NON_EMPTY_GROUP
        assert isinstance(found["i"], Retry) and found["i"].refresh == "coordinator"
    R = m.OffsetDeleteResponse
    tps = [TP("a", 0), TP("a", 1)]
    for version in versions(R):
        ok = answered(R(topics=[R.OffsetDeleteResponseTopic(name="a", partitions=[
            R.OffsetDeleteResponsePartition(partition_index=p) for p in (0, 1)])]), version)
        assert admin_groups.read_offset_delete(ok, "g", tps) is None
        busy = answered(R(topics=[R.OffsetDeleteResponseTopic(name="a", partitions=[
            R.OffsetDeleteResponsePartition(partition_index=0),
            R.OffsetDeleteResponsePartition(partition_index=1, error_code=E.GROUP_SUBSCRIBED_TO_TOPIC)])]), version)
        assert admin_groups.read_offset_delete(busy, "g", tps).code == E.GROUP_SUBSCRIBED_TO_TOPIC
        moved = answered(R(error_code=E.NOT_COORDINATOR), version)
        assert isinstance(admin_groups.read_offset_delete(moved, "g", tps), Retry)


def test_describe_topic_partitions_pages_are_joined():
    R = m.DescribeTopicPartitionsResponse
    topic_id = uuid.uuid4()

    def page(partitions, cursor):
        return answered(R(topics=[R.DescribeTopicPartitionsResponseTopic(
            name="a", topic_id=topic_id, partitions=[R.DescribeTopicPartitionsResponsePartition(
                partition_index=p, leader_id=0, replica_nodes=[0], isr_nodes=[0]) for p in partitions]),
            R.DescribeTopicPartitionsResponseTopic(name="gone", error_code=E.UNKNOWN_TOPIC_OR_PARTITION)],
            next_cursor=R.Cursor(topic_name="a", partition_index=cursor) if cursor is not None else None), 0)
    collected: dict = {}
    assert admin_topics.read_describe_topic_partitions(page([0, 1], 2), collected) == ("a", 2)
    assert admin_topics.read_describe_topic_partitions(page([2], None), collected) is None
    nodes = {0: Node(0, "h", 1)}
    found = admin_topics.topic_descriptions_from_pages(collected, nodes, ["a", "gone", "never"])
    assert [p.id for p in found["a"].partitions] == [0, 1, 2] and found["a"].topic_id == topic_id
    assert found["a"].partitions[2].leader == nodes[0]
    assert isinstance(found["gone"], UnknownTopicError) and isinstance(found["never"], UnknownTopicError)


def test_describe_configs_answers_with_sources_and_synonyms():
    R = m.DescribeConfigsResponse
    for version in versions(R):
        response = answered(R(results=[R.DescribeConfigsResult(resource_type=2, resource_name="a", configs=[
            R.DescribeConfigsResourceResult(name="retention.ms", value="10", config_source=1,
                                            synonyms=[R.DescribeConfigsSynonym(name="retention.ms", value="10",
                                                                               source=1)] if version >= 1 else [])]),
            R.DescribeConfigsResult(resource_type=2, resource_name="b",
                                    error_code=E.UNKNOWN_TOPIC_OR_PARTITION)]), version)
        found = admin_configs.read_describe_configs(response)
        entry = found[(2, "a")]["retention.ms"]
        assert entry.value == "10" and entry.source.name == "DYNAMIC_TOPIC_CONFIG" and not entry.is_default
        assert isinstance(found[(2, "b")], UnknownTopicError)


def test_list_groups_answers_keep_consumer_groups_of_both_protocols():
    R = m.ListGroupsResponse
    response = answered(R(groups=[
        R.ListedGroup(group_id="classic", protocol_type="consumer", group_state="Stable", group_type="classic"),
        R.ListedGroup(group_id="modern", protocol_type="consumer", group_state="Reconciling", group_type="consumer"),
        R.ListedGroup(group_id="simple", protocol_type="", group_state="Empty", group_type="classic"),
        R.ListedGroup(group_id="connect", protocol_type="connect", group_state="Stable", group_type="classic"),
    ]), 5)
    found = {g.group_id: g for g in admin_groups.read_list_groups(response)}
    assert set(found) == {"classic", "modern", "simple"}
    assert found["modern"].type == ConsumerGroupType.CONSUMER and found["modern"].state.name == "RECONCILING"
    assert found["simple"].is_simple_consumer_group and not found["classic"].is_simple_consumer_group
    failed = admin_groups.read_list_groups(answered(R(error_code=E.COORDINATOR_LOAD_IN_PROGRESS), 5))
    assert isinstance(failed, KafkaError) and failed.retriable


def test_consumer_group_describe_answers_and_the_classic_fallback():
    R = m.ConsumerGroupDescribeResponse

    def assignment(*partitions):
        return R.Assignment(topic_partitions=[R.TopicPartitions(topic_id=uuid.uuid4(), topic_name="a",
                                                                partitions=list(partitions))])
    response = answered(R(groups=[
        R.DescribedGroup(group_id="g", group_state="Stable", assignor_name="uniform", members=[
            R.Member(member_id="m1", client_id="c", client_host="/h", assignment=assignment(0, 1),
                     target_assignment=assignment(0))]),
        R.DescribedGroup(group_id="old", error_code=E.GROUP_ID_NOT_FOUND)]), 0)
    found = admin_groups.read_consumer_group_describe(response, Node(0, "h", 1))
    member = found["g"].members[0]
    assert member.assignment.topic_partitions == (TP("a", 0), TP("a", 1))
    assert member.target_assignment.topic_partitions == (TP("a", 0),)
    assert found["g"].partition_assignor == "uniform" and found["old"] == "classic"


def test_acl_answers_come_back_in_request_order():
    R = m.CreateAclsResponse
    other = AclBinding("group", "g", "prefixed", "User:bob", "*", "describe", "deny")
    response = answered(R(results=[R.AclCreationResult(), R.AclCreationResult(error_code=E.INVALID_REQUEST,
                                                                                error_message="bad")]), 3)
    found = admin_acls.read_create_acls(response, [ACL, other])
    assert found[ACL] is None and found[other].code == E.INVALID_REQUEST
    D = m.DeleteAclsResponse
    response = answered(D(filter_results=[D.DeleteAclsFilterResult(matching_acls=[D.DeleteAclsMatchingAcl(
        resource_type=2, resource_name="orders", pattern_type=3, principal="User:alice", host="*", operation=3,
        permission_type=3)])]), 3)
    assert admin_acls.read_delete_acls(response, [ACL_FILTER]) == {ACL_FILTER: [ACL]}


def test_admin_settings_take_kafkas_names_and_refuse_what_kafka_refuses():
    config = AdminConfig.from_properties({"bootstrap.servers": "h:9092", "default.api.timeout.ms": "90000",
                                          "security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN",
                                          "sasl.username": "u", "sasl.password": "p"})
    assert config.default_api_timeout_ms == 90000 and config.bootstrap_servers == ("h:9092",)
    with pytest.raises(ConfigError, match="unknown admin config 'linger.ms'"):
        AdminConfig.from_properties({"linger.ms": 5})
    with pytest.raises(ConfigError, match="default.api.timeout.ms"):
        AdminConfig(bootstrap_servers="h:9092", default_api_timeout_ms=1000)

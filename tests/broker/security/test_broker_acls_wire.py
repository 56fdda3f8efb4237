"""ACLs over the wire (issue 21): a broker with StandardAuthorizer and super.users=User:admin; alice holds
the ACLs each API needs, eve holds none. For every served API, alice's request succeeds and eve's gets
Kafka's error code and no data. The ACLs themselves are made with CreateAcls by the super user, listed
with DescribeAcls and removed with DeleteAcls; SCRAM users are managed the same way; and
confluent-kafka's AdminClient manages both."""
from __future__ import annotations

import pytest

from support.broker_harness import BrokerThread
from support.broker_wire import batch_of
from kafkawire import messages as m
from kafkawire.error_codes import ErrorCode
from kafkawire.broker.security.acls import Operation as Op, PatternType as PT, Permission as P, ResourceType as RT
from support.security_harness import PLAIN_USERS, make_certificates, plain_client, secured_config

TOPIC, GROUP = "orders", "readers"
TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH = 29, 30, 31, 53
TXN_PREFIX = "alice-tx"
ADMIN_TOPIC, ADMIN_GROUP = "alice-admin", "alice-group"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    certs = make_certificates(tmp_path_factory.mktemp("acl-certs"))
    config = secured_config(tmp_path_factory.mktemp("acl-broker"), certs, authorizer=True,
                            **{"delegation.token.secret.key": "acl-matrix-secret"})
    with BrokerThread(config=config) as running:
        port = int(running.broker.bootstrap_for("SASL_PLAINTEXT").rsplit(":", 1)[1])
        running.sasl_port = port
        with plain_client(port, "admin") as admin:
            created = admin.request(m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=1, replication_factor=1) for name in (TOPIC, ADMIN_TOPIC)],
                timeout_ms=5000), 7)
            assert [t.error_code for t in created.topics] == [0, 0]
            grants = [(RT.TOPIC, TOPIC, PT.LITERAL, op) for op in (Op.READ, Op.WRITE, Op.DELETE, Op.DESCRIBE_CONFIGS)]
            # the admin APIs (issue 23): a topic of her own to alter, a group of her own to delete
            grants += [(RT.TOPIC, ADMIN_TOPIC, PT.LITERAL, op) for op in (Op.ALTER, Op.ALTER_CONFIGS, Op.DELETE)]
            grants += [(RT.GROUP, ADMIN_GROUP, PT.LITERAL, Op.DELETE), (RT.CLUSTER, "kafka-cluster", PT.LITERAL, Op.ALTER),
                       (RT.CLUSTER, "kafka-cluster", PT.LITERAL, Op.ALTER_CONFIGS),
                       (RT.CLUSTER, "kafka-cluster", PT.LITERAL, Op.DESCRIBE_CONFIGS)]
            grants += [(RT.TOPIC, "alice-", PT.PREFIXED, Op.CREATE), (RT.GROUP, GROUP, PT.LITERAL, Op.READ),
                       (RT.GROUP, "modern-readers", PT.LITERAL, Op.READ),
                       (RT.GROUP, "streams-readers", PT.LITERAL, Op.READ),
                       (RT.CLUSTER, "kafka-cluster", PT.LITERAL, Op.DESCRIBE),
                       (RT.CLUSTER, "kafka-cluster", PT.LITERAL, Op.IDEMPOTENT_WRITE),
                       (RT.TRANSACTIONAL_ID, TXN_PREFIX, PT.PREFIXED, Op.WRITE),
                       (RT.USER, "User:bob", PT.LITERAL, Op.CREATE_TOKENS)]  # KIP-373: bob's tokens
            answer = admin.request(m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
                resource_type=kind, resource_name=name, resource_pattern_type=pattern, principal="User:alice",
                host="*", operation=op, permission_type=P.ALLOW) for kind, name, pattern, op in grants]), 3)
            assert [r.error_code for r in answer.results] == [0] * len(grants)
        yield running


def _as(broker, user):
    return plain_client(broker.sasl_port, user)


def _produce(topic=TOPIC):
    return m.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=batch_of(100))])])


def _fetch():
    return m.FetchRequest(max_wait_ms=0, max_bytes=1 << 20, topics=[m.FetchRequest.FetchTopic(
        topic=TOPIC, partitions=[m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])


def _list_offsets():
    return m.ListOffsetsRequest(topics=[m.ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
        m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])


def _commit():
    return m.OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[
        m.OffsetCommitRequest.OffsetCommitRequestTopic(name=TOPIC, partitions=[
            m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])


# (API, version, request, how alice's answer reads as success, how eve's reads as refused)
CASES = [
    ("Produce", 9, _produce, lambda r: r.responses[0].partition_responses[0].error_code == 0,
     lambda r: r.responses[0].partition_responses[0].error_code == TOPIC_AUTH),
    ("Fetch", 12, _fetch, lambda r: r.responses[0].partitions[0].error_code == 0,
     lambda r: r.responses[0].partitions[0].error_code == TOPIC_AUTH and not r.responses[0].partitions[0].records),
    ("ListOffsets", 7, _list_offsets, lambda r: r.topics[0].partitions[0].offset >= 0,
     lambda r: r.topics[0].partitions[0].error_code == TOPIC_AUTH and r.topics[0].partitions[0].offset == -1),
    ("Metadata by name", 12, lambda: m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)]),
     lambda r: r.topics[0].error_code == 0 and r.topics[0].partitions,
     lambda r: r.topics[0].error_code == TOPIC_AUTH and not r.topics[0].partitions),
    ("Metadata all topics", 12, lambda: m.MetadataRequest(topics=None),
     lambda r: {t.name for t in r.topics} == {TOPIC, ADMIN_TOPIC}, lambda r: r.topics == ()),
    ("OffsetCommit", 8, _commit, lambda r: r.topics[0].partitions[0].error_code == 0,
     lambda r: r.topics[0].partitions[0].error_code == GROUP_AUTH),
    ("OffsetFetch", 7, lambda: m.OffsetFetchRequest(group_id=GROUP, topics=None),
     lambda r: r.error_code == 0, lambda r: r.error_code == GROUP_AUTH and not r.topics),
    ("FindCoordinator", 3, lambda: m.FindCoordinatorRequest(key=GROUP, key_type=0),
     lambda r: r.error_code == 0, lambda r: r.error_code == GROUP_AUTH and r.node_id == -1),
    ("JoinGroup", 5, lambda: m.JoinGroupRequest(group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=1000,
                                               member_id="", protocol_type="consumer", protocols=[
                                                   m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]),
     lambda r: r.error_code in (0, 79), lambda r: r.error_code == GROUP_AUTH),  # 79: MEMBER_ID_REQUIRED
    ("Heartbeat", 3, lambda: m.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="x"),
     lambda r: r.error_code != GROUP_AUTH, lambda r: r.error_code == GROUP_AUTH),
    ("DescribeGroups", 5, lambda: m.DescribeGroupsRequest(groups=[GROUP]),
     lambda r: r.groups[0].error_code == 0, lambda r: r.groups[0].error_code == GROUP_AUTH),
    ("ListGroups", 4, lambda: m.ListGroupsRequest(), lambda r: r.error_code == 0,
     lambda r: r.error_code == 0 and r.groups == ()),
    ("CreateTopics", 7, lambda: m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name="alice-new", num_partitions=1, replication_factor=1)], timeout_ms=5000),
     lambda r: r.topics[0].error_code in (0, 36), lambda r: r.topics[0].error_code == TOPIC_AUTH),
    ("DescribeConfigs", 4, lambda: m.DescribeConfigsRequest(resources=[m.DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name=TOPIC, configuration_keys=None)]),
     lambda r: r.results[0].error_code == 0 and r.results[0].configs,
     lambda r: r.results[0].error_code == TOPIC_AUTH and not r.results[0].configs),
    ("InitProducerId", 4, lambda: m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1,
                                                          producer_id=-1, producer_epoch=-1),
     lambda r: r.error_code == 0 and r.producer_id >= 0, lambda r: r.error_code == CLUSTER_AUTH),
    ("DescribeAcls", 3, lambda: m.DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                                      pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                      operation=1, permission_type=1),
     lambda r: r.error_code == 0 and r.resources, lambda r: r.error_code == CLUSTER_AUTH and not r.resources),
    ("DescribeUserScramCredentials", 0, lambda: m.DescribeUserScramCredentialsRequest(users=None),
     lambda r: r.error_code == 0, lambda r: r.error_code == CLUSTER_AUTH and not r.results),
    # transactions: WRITE on the transactional id (issue 22)
    ("InitProducerId transactional", 4, lambda: m.InitProducerIdRequest(
        transactional_id=f"{TXN_PREFIX}-1", transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1),
     lambda r: r.error_code == 0 and r.producer_id >= 0, lambda r: r.error_code == TXN_AUTH),
    ("FindCoordinator transactional", 3, lambda: m.FindCoordinatorRequest(key=f"{TXN_PREFIX}-1", key_type=1),
     lambda r: r.error_code == 0 and r.port > 0, lambda r: r.error_code == TXN_AUTH),
    ("DescribeTransactions", 0, lambda: m.DescribeTransactionsRequest(transactional_ids=[f"{TXN_PREFIX}-1"]),
     lambda r: r.transaction_states[0].error_code == 0 and r.transaction_states[0].producer_id >= 0,
     lambda r: r.transaction_states[0].error_code == TXN_AUTH and r.transaction_states[0].producer_id == -1),
    ("ListTransactions", 1, lambda: m.ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                                              duration_filter=-1),
     lambda r: [t.transactional_id for t in r.transaction_states] == [f"{TXN_PREFIX}-1"],
     lambda r: r.error_code == 0 and r.transaction_states == ()),
    ("AddPartitionsToTxn", 3, lambda: m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=f"{TXN_PREFIX}-2", v3_and_below_producer_id=0, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]),
     lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 49,
     lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == TXN_AUTH),
    ("EndTxn", 3, lambda: m.EndTxnRequest(transactional_id=f"{TXN_PREFIX}-2", producer_id=0, producer_epoch=0,
                                          committed=True),
     lambda r: r.error_code == 49, lambda r: r.error_code == TXN_AUTH),
    # KIP-848 consumer groups: READ on the group (and DESCRIBE on the topics) to heartbeat
    ("ConsumerGroupHeartbeat", 1, lambda: m.ConsumerGroupHeartbeatRequest(
        group_id="modern-readers", member_id="alice-member", member_epoch=0, rebalance_timeout_ms=1000,
        subscribed_topic_names=[TOPIC], topic_partitions=[]),
     lambda r: r.error_code == 0 and r.member_epoch > 0, lambda r: r.error_code == GROUP_AUTH),
    ("ConsumerGroupDescribe", 0, lambda: m.ConsumerGroupDescribeRequest(group_ids=["modern-readers"]),
     lambda r: r.groups[0].error_code == 0 and r.groups[0].members,
     lambda r: r.groups[0].error_code == GROUP_AUTH and not r.groups[0].members),
    # KIP-1071 streams groups: READ on the group and DESCRIBE on the topology's topics to heartbeat
    ("StreamsGroupHeartbeat", 0, lambda: m.StreamsGroupHeartbeatRequest(
        group_id="streams-readers", member_id="alice-member", member_epoch=0, endpoint_information_epoch=-1,
        rebalance_timeout_ms=1000, process_id="p", active_tasks=[], standby_tasks=[], warmup_tasks=[],
        topology=m.StreamsGroupHeartbeatRequest.Topology(epoch=1, subtopologies=[
            m.StreamsGroupHeartbeatRequest.Subtopology(subtopology_id="0", source_topics=[TOPIC])])),
     lambda r: r.error_code == 0 and r.member_epoch > 0, lambda r: r.error_code == GROUP_AUTH),
    ("StreamsGroupDescribe", 0, lambda: m.StreamsGroupDescribeRequest(group_ids=["streams-readers"]),
     lambda r: r.groups[0].error_code == 0 and r.groups[0].members,
     lambda r: r.groups[0].error_code == GROUP_AUTH and not r.groups[0].members),
    ("DescribeProducers", 0, lambda: m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(
        name=TOPIC, partition_indexes=[0])]),
     lambda r: r.topics[0].partitions[0].error_code == 0,
     lambda r: r.topics[0].partitions[0].error_code == TOPIC_AUTH and not r.topics[0].partitions[0].active_producers),
    # the admin APIs (issue 23), as Kafka's "operations and resources on protocols" table
    ("CreatePartitions", 3, lambda: m.CreatePartitionsRequest(topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(
        name=ADMIN_TOPIC, count=2, assignments=None)], timeout_ms=5000, validate_only=True),  # ALTER on the topic
     lambda r: r.results[0].error_code == 0, lambda r: r.results[0].error_code == TOPIC_AUTH),
    ("DeleteRecords", 2, lambda: m.DeleteRecordsRequest(timeout_ms=5000, topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
        name=ADMIN_TOPIC, partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=-1)])]),
     lambda r: r.topics[0].partitions[0].error_code == 0,  # DELETE on the topic
     lambda r: r.topics[0].partitions[0].error_code == TOPIC_AUTH and r.topics[0].partitions[0].low_watermark == -1),
    ("IncrementalAlterConfigs topic", 1, lambda: _incremental(2, ADMIN_TOPIC, "retention.ms"),  # ALTER_CONFIGS
     lambda r: r.responses[0].error_code == 0, lambda r: r.responses[0].error_code == TOPIC_AUTH),
    ("AlterConfigs broker", 2, lambda: m.AlterConfigsRequest(validate_only=True, resources=[
        m.AlterConfigsRequest.AlterConfigsResource(resource_type=4, resource_name="0", configs=[])]),
     lambda r: r.responses[0].error_code == 0, lambda r: r.responses[0].error_code == CLUSTER_AUTH),
    ("IncrementalAlterConfigs broker", 1, lambda: _incremental(4, "", "log.retention.ms"),  # on the cluster
     lambda r: r.responses[0].error_code == 0, lambda r: r.responses[0].error_code == CLUSTER_AUTH),
    ("DescribeConfigs broker", 4, lambda: m.DescribeConfigsRequest(resources=[
        m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None)]),
     lambda r: r.results[0].error_code == 0 and r.results[0].configs,
     lambda r: r.results[0].error_code == CLUSTER_AUTH and not r.results[0].configs),
    ("DescribeLogDirs", 4, lambda: m.DescribeLogDirsRequest(topics=None),  # DESCRIBE on the cluster
     lambda r: r.error_code == 0 and r.results, lambda r: r.error_code == CLUSTER_AUTH and not r.results),
    ("AlterReplicaLogDirs", 2, lambda: m.AlterReplicaLogDirsRequest(dirs=[  # ALTER on the cluster
        m.AlterReplicaLogDirsRequest.AlterReplicaLogDir(path="/no/such/log/dir", topics=[
            m.AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0])])]),
     lambda r: r.results[0].partitions[0].error_code == ErrorCode.LOG_DIR_NOT_FOUND,  # authorized, then checked
     lambda r: r.results[0].partitions[0].error_code == CLUSTER_AUTH),
    ("DescribeTopicPartitions", 0, lambda: m.DescribeTopicPartitionsRequest(topics=[
        m.DescribeTopicPartitionsRequest.TopicRequest(name=TOPIC)], response_partition_limit=10),  # DESCRIBE
     lambda r: r.topics[0].error_code == 0 and r.topics[0].partitions,
     lambda r: r.topics[0].error_code == TOPIC_AUTH and not r.topics[0].partitions),
    ("OffsetForLeaderEpoch", 4, lambda: m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=TOPIC, partitions=[
            m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, leader_epoch=0)])]),  # DESCRIBE
     lambda r: r.topics[0].partitions[0].error_code == 0 and r.topics[0].partitions[0].end_offset >= 0,
     lambda r: r.topics[0].partitions[0].error_code == TOPIC_AUTH and r.topics[0].partitions[0].end_offset == -1),
    ("ElectLeaders", 2, lambda: m.ElectLeadersRequest(election_type=0, timeout_ms=5000, topic_partitions=[
        m.ElectLeadersRequest.TopicPartitions(topic=TOPIC, partitions=[0])]),  # ALTER on the cluster
     lambda r: r.replica_election_results[0].partition_result[0].error_code == 84,
     lambda r: r.error_code == CLUSTER_AUTH and r.replica_election_results[0].partition_result[0].error_code
     == CLUSTER_AUTH),
    ("AlterPartitionReassignments", 1, lambda: m.AlterPartitionReassignmentsRequest(topics=[  # ALTER, cluster
        m.AlterPartitionReassignmentsRequest.ReassignableTopic(name=TOPIC, partitions=[
            m.AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0,
                                                                                         replicas=[0])])]),
     lambda r: r.error_code == 0 and r.responses[0].partitions[0].error_code == 0,
     lambda r: r.error_code == CLUSTER_AUTH and r.responses[0].partitions[0].error_code == CLUSTER_AUTH),
    ("ListPartitionReassignments", 0, lambda: m.ListPartitionReassignmentsRequest(topics=None),  # DESCRIBE, cluster
     lambda r: r.error_code == 0 and r.topics == (),
     lambda r: r.error_code == CLUSTER_AUTH and r.topics == ()),
    ("DeleteGroups", 2, lambda: m.DeleteGroupsRequest(groups_names=[ADMIN_GROUP]),  # DELETE on the group
     lambda r: r.results[0].error_code == 69, lambda r: r.results[0].error_code == GROUP_AUTH),
    ("OffsetDelete", 0, lambda: m.OffsetDeleteRequest(group_id=ADMIN_GROUP, topics=[]),  # DELETE on the group
     lambda r: r.error_code == 69, lambda r: r.error_code == GROUP_AUTH),
    ("DescribeQuorum", 2, lambda: m.DescribeQuorumRequest(topics=[m.DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[m.DescribeQuorumRequest.PartitionData(partition_index=0)])]),
     lambda r: r.error_code == 0 and r.topics[0].partitions[0].current_voters,  # DESCRIBE on the cluster
     lambda r: r.error_code == CLUSTER_AUTH and r.error_message == "Cluster authorization failed." and not r.topics),
    ("ListConfigResources", 1, lambda: m.ListConfigResourcesRequest(resource_types=[2]),  # DESCRIBE_CONFIGS, cluster
     lambda r: r.error_code == 0 and TOPIC in [c.resource_name for c in r.config_resources],
     lambda r: r.error_code == CLUSTER_AUTH and not r.config_resources),
    ("UpdateFeatures", 1, lambda: m.UpdateFeaturesRequest(validate_only=True, feature_updates=[  # ALTER, cluster
        m.UpdateFeaturesRequest.FeatureUpdateKey(feature="transaction.version", max_version_level=1, upgrade_type=2)]),
     lambda r: r.error_code == 0 and [f.feature for f in r.results] == ["transaction.version"],
     lambda r: r.error_code == CLUSTER_AUTH and r.error_message == "Cluster authorization failed." and not r.results),
    ("CreateDelegationToken for another owner", 3, lambda: m.CreateDelegationTokenRequest(  # CREATE_TOKENS, USER
        owner_principal_type="User", owner_principal_name="bob", renewers=[]),
     lambda r: r.error_code == 0 and (r.principal_name, r.token_requester_principal_name) == ("bob", "alice"),
     lambda r: r.error_code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED and not r.hmac),
    ("DescribeClientQuotas", 1, lambda: m.DescribeClientQuotasRequest(components=[], strict=False),
     lambda r: r.error_code == 0 and r.entries is not None,  # DESCRIBE_CONFIGS on the cluster
     lambda r: r.error_code == CLUSTER_AUTH and r.entries is None),
    ("AlterClientQuotas", 1, lambda: m.AlterClientQuotasRequest(validate_only=True, entries=[  # ALTER_CONFIGS, cluster
        m.AlterClientQuotasRequest.EntryData(entity=[m.AlterClientQuotasRequest.EntityData(
            entity_type="user", entity_name="alice")], ops=[m.AlterClientQuotasRequest.OpData(
                key="producer_byte_rate", value=1024.0, remove=False)])]),
     lambda r: r.entries[0].error_code == 0, lambda r: r.entries[0].error_code == CLUSTER_AUTH),
]


def _incremental(kind, name, config):
    return m.IncrementalAlterConfigsRequest(validate_only=True, resources=[
        m.IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=kind, resource_name=name, configs=[
            m.IncrementalAlterConfigsRequest.AlterableConfig(name=config, config_operation=0, value="60000")])])


@pytest.mark.parametrize("name,version,build,allowed,refused", CASES, ids=[c[0] for c in CASES])
def test_each_api_checks_its_acls(broker, name, version, build, allowed, refused):
    with _as(broker, "alice") as alice:
        assert allowed(alice.request(build(), version)), f"{name}: alice was refused"
    with _as(broker, "eve") as eve:
        assert refused(eve.request(build(), version)), f"{name}: eve was not refused"


def test_describe_cluster_answers_everyone_and_only_operations_need_describe(broker):
    # Kafka's computeDescribeClusterResponse authorizes nothing but the cluster's authorized operations:
    # 0 without CLUSTER DESCRIBE, the allowed ones with it, the schema's default when not asked for
    request = m.DescribeClusterRequest(include_cluster_authorized_operations=True)
    alice_grants = {Op.ALTER, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.DESCRIBE, Op.IDEMPOTENT_WRITE}
    cluster_operations = alice_grants | {Op.CREATE, Op.CLUSTER_ACTION}
    for user, expected in (("admin", cluster_operations), ("alice", alice_grants), ("eve", set())):
        with _as(broker, user) as client:
            answer = client.request(request, 1)
            assert (answer.error_code, [b.broker_id for b in answer.brokers]) == (0, [0]), user
            assert answer.cluster_authorized_operations == sum(1 << op for op in expected), user
            assert client.request(m.DescribeClusterRequest(), 1).cluster_authorized_operations == -(1 << 31)


def test_describe_cluster_endpoint_types_as_kafka(broker):
    with _as(broker, "eve") as eve:
        controller = eve.request(m.DescribeClusterRequest(endpoint_type=2), 1)
        assert (controller.error_code, controller.error_message) == (
            114, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
        unknown = eve.request(m.DescribeClusterRequest(endpoint_type=7), 1)
        assert (unknown.error_code, unknown.error_message, unknown.brokers) == (
            115, "Unsupported endpoint type 7", ())


def test_real_admin_clients_describe_the_cluster_without_acls(broker):
    from confluent_kafka.admin import AdminClient
    from kafkawire.client import AdminClient as KafkawireAdmin
    settings = {"bootstrap.servers": broker.broker.bootstrap_for("SASL_PLAINTEXT"),
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": "eve", "sasl.password": PLAIN_USERS["eve"]}
    confluent = AdminClient(settings)
    described = confluent.describe_cluster(include_authorized_operations=True).result(15)
    assert [n.id for n in described.nodes] == [0] and not described.authorized_operations
    ours = KafkawireAdmin(settings)
    try:
        mine = ours.describe_cluster(include_authorized_operations=True).result(15)
    finally:
        ours.close()
    assert [n.id for n in mine.nodes] == [0] and not mine.authorized_operations


def test_broker_to_broker_transaction_apis_need_cluster_action(broker):
    markers = m.WriteTxnMarkersRequest(markers=[m.WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0, topics=[
            m.WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])])])
    verify = m.AddPartitionsToTxnRequest(transactions=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=f"{TXN_PREFIX}-1", producer_id=0, producer_epoch=0, verify_only=True, topics=[])])
    with _as(broker, "alice") as alice:
        assert alice.request(markers, 1).markers[0].topics[0].partitions[0].error_code == CLUSTER_AUTH
        assert alice.request(verify, 4).error_code == CLUSTER_AUTH


def test_delete_topics_needs_delete(broker):
    with _as(broker, "admin") as admin:
        admin.request(m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name="doomed", num_partitions=1, replication_factor=1)], timeout_ms=5000), 7)
    with _as(broker, "eve") as eve:
        assert eve.request(m.DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=5000), 4).responses[0].error_code \
            == TOPIC_AUTH
    with _as(broker, "admin") as admin:  # the super user may
        assert admin.request(m.DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=5000), 4).responses[0].error_code \
            == 0


def test_acls_and_scram_users_are_managed_over_the_wire(broker):
    with _as(broker, "admin") as admin:
        listed = admin.request(m.DescribeAclsRequest(resource_type_filter=2, resource_name_filter=TOPIC,
                                                     pattern_type_filter=2, principal_filter="User:alice",
                                                     host_filter=None, operation=1, permission_type=1), 3)
        assert listed.error_code == 0
        assert {a.operation for r in listed.resources for a in r.acls} == {Op.READ, Op.WRITE, Op.DELETE,
                                                                            Op.DESCRIBE_CONFIGS}
        answer = admin.request(m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
            resource_type=RT.TOPIC, resource_name=TOPIC, resource_pattern_type=PT.LITERAL, principal="User:eve",
            host="*", operation=Op.READ, permission_type=P.DENY)]), 3)
        assert answer.results[0].error_code == 0
        removed = admin.request(m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter="User:eve",
            host_filter=None, operation=1, permission_type=1)]), 3)
        assert [(a.principal, a.operation, a.permission_type) for a in removed.filter_results[0].matching_acls] == [
            ("User:eve", Op.READ, P.DENY)]
        # SCRAM users: added, described, deleted
        from kafkawire.sasl.scram import MECHANISMS
        salted = MECHANISMS["SCRAM-SHA-256"].salted_password("frank-secret", b"salt" * 4, 4096)
        changed = admin.request(m.AlterUserScramCredentialsRequest(deletions=[], upsertions=[
            m.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(name="frank", mechanism=1, iterations=4096,
                                                                        salt=b"salt" * 4, salted_password=salted)]), 0)
        assert [(r.user, r.error_code) for r in changed.results] == [("frank", 0)]
        described = admin.request(m.DescribeUserScramCredentialsRequest(users=[
            m.DescribeUserScramCredentialsRequest.UserName(name="frank"),
            m.DescribeUserScramCredentialsRequest.UserName(name="nobody")]), 0)
        assert [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
                for r in described.results] == [("frank", 0, [(1, 4096)]), ("nobody", 91, [])]
        weak = admin.request(m.AlterUserScramCredentialsRequest(deletions=[], upsertions=[
            m.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(name="weak", mechanism=1, iterations=10,
                                                                        salt=b"s", salted_password=b"p")]), 0)
        assert weak.results[0].error_code == 93  # UNACCEPTABLE_CREDENTIAL


def test_confluent_admin_client_manages_acls_and_scram_users(broker):
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient, ResourcePatternType, ResourceType,
        ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion,
    )
    admin = AdminClient({"bootstrap.servers": broker.broker.bootstrap_for("SASL_PLAINTEXT"),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": "admin", "sasl.password": PLAIN_USERS["admin"]})
    binding = AclBinding(ResourceType.TOPIC, "ck-topic", ResourcePatternType.LITERAL, "User:bob", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        assert future.result(10) is None
    found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "ck-topic", ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(10)
    assert [(b.principal, b.operation) for b in found] == [("User:bob", AclOperation.READ)]
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "ck-topic", ResourcePatternType.ANY, None, None,
                                                  AclOperation.ANY, AclPermissionType.ANY)])
    assert [len(f.result(10)) for f in deleted.values()] == [1]
    upsert = UserScramCredentialUpsertion("grace", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"grace-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        assert future.result(10) is None
    described = admin.describe_user_scram_credentials(["grace"]).result(10) \
        if hasattr(admin.describe_user_scram_credentials(["grace"]), "result") else \
        {user: f.result(10) for user, f in admin.describe_user_scram_credentials(["grace"]).items()}
    info = described["grace"].scram_credential_infos[0]
    assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, 8192)

"""A response that carries one error for everything a request asked about: Kafka's
``AbstractRequest.getErrorResponse``, which the broker sends when a handler fails.

APIs with a top-level error code get it there; the others (Produce, ListOffsets, Metadata, the topic
and group APIs) repeat the request's topics, partitions or groups, each with the error. An API not
listed here has no error response, and the server closes the connection instead (as Kafka does for a
request it cannot answer).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import messages as m
from ...codec.primitives import ZERO_UUID
from ...messages import ApiKey

__all__ = ["error_response"]

# APIs whose response has a top-level ErrorCode at every version this broker serves (their classes load
# on first use: most never answer with an error).
_TOP_LEVEL = frozenset({ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.SYNC_GROUP,
                        ApiKey.LIST_GROUPS, ApiKey.SASL_HANDSHAKE, ApiKey.API_VERSIONS, ApiKey.INIT_PRODUCER_ID,
                        ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.DESCRIBE_ACLS, ApiKey.LIST_TRANSACTIONS,
                        ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.STREAMS_GROUP_HEARTBEAT, ApiKey.SASL_AUTHENTICATE,
                        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.DESCRIBE_CLUSTER, ApiKey.OFFSET_DELETE,
                        ApiKey.DESCRIBE_QUORUM, ApiKey.UPDATE_FEATURES, ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY,
                        ApiKey.LIST_CONFIG_RESOURCES, ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_FETCH,
                        ApiKey.SHARE_ACKNOWLEDGE, ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS,
                        ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.CREATE_DELEGATION_TOKEN,
                        ApiKey.RENEW_DELEGATION_TOKEN, ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN})
# ... of which these also name a producer (none: -1) and these carry the error's message.
_WITH_PRODUCER = frozenset({ApiKey.INIT_PRODUCER_ID, ApiKey.END_TXN})
_WITH_MESSAGE = frozenset({ApiKey.DESCRIBE_ACLS, ApiKey.SASL_AUTHENTICATE, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                           ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_QUORUM, ApiKey.UPDATE_FEATURES,
                           ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.STREAMS_GROUP_HEARTBEAT,
                           ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE, ApiKey.ALTER_SHARE_GROUP_OFFSETS,
                           ApiKey.DELETE_SHARE_GROUP_OFFSETS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
                           ApiKey.DESCRIBE_CLIENT_QUOTAS})


def error_response(api_key: int, request, version: int, code: int, message: str | None = None):
    """The response to ``request`` with ``code`` everywhere, or None when the API has none here."""
    if api_key in _TOP_LEVEL:
        response_class: Any = m.api(api_key).response_class  # (each of these has an error_code)
        response = response_class(error_code=code)
        if api_key in _WITH_PRODUCER:
            response.producer_id, response.producer_epoch = -1, -1
        if api_key in _WITH_MESSAGE:
            response.error_message = message
        return response
    builder = _BUILDERS.get(api_key)
    return builder(request, version, code, message) if builder is not None else None


def _produce(request, version, code, message):
    return m.ProduceResponse(responses=[m.ProduceResponse.TopicProduceResponse(
        name=t.name, topic_id=t.topic_id, partition_responses=[  # by id from v13
        m.ProduceResponse.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1,
                                                   log_append_time_ms=-1, log_start_offset=-1)
        for p in t.partition_data]) for t in request.topic_data])


def _fetch(request, version, code, message):
    if version >= 7:
        return m.FetchResponse(error_code=code, session_id=0, responses=[])
    return m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(topic=t.topic, partitions=[
        m.FetchResponse.PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1)
        for p in t.partitions]) for t in request.topics])


def _list_offsets(request, version, code, message):
    return m.ListOffsetsResponse(topics=[m.ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=[
        m.ListOffsetsResponse.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code,
                                                           timestamp=-1, offset=-1)
        for p in t.partitions]) for t in request.topics])


def _metadata(request, version, code, message):
    topics = [m.MetadataResponse.MetadataResponseTopic(
        error_code=code, name=t.name if t.name is not None or version >= 12 else "",  # nullable from v12
        topic_id=t.topic_id or ZERO_UUID, partitions=[]) for t in request.topics or ()]
    return m.MetadataResponse(brokers=[], topics=topics)


def _offset_commit(request, version, code, message):
    return m.OffsetCommitResponse(topics=[m.OffsetCommitResponse.OffsetCommitResponseTopic(name=t.name, partitions=[
        m.OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
        for p in t.partitions]) for t in request.topics])


def _offset_fetch(request, version, code, message):
    if version >= 8:
        return m.OffsetFetchResponse(groups=[m.OffsetFetchResponse.OffsetFetchResponseGroup(
            group_id=g.group_id, error_code=code, topics=[]) for g in request.groups])
    if version >= 2:
        return m.OffsetFetchResponse(error_code=code, topics=[])
    return m.OffsetFetchResponse(topics=[m.OffsetFetchResponse.OffsetFetchResponseTopic(name=t.name, partitions=[
        m.OffsetFetchResponse.OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, metadata="",
                                                           error_code=code)
        for p in t.partition_indexes]) for t in request.topics or ()])


def _find_coordinator(request, version, code, message):
    if version >= 4:
        return m.FindCoordinatorResponse(coordinators=[m.FindCoordinatorResponse.Coordinator(
            key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)
            for key in request.coordinator_keys])
    return m.FindCoordinatorResponse(error_code=code, error_message=message, node_id=-1, host="", port=-1)


def _describe_groups(request, version, code, message):
    return m.DescribeGroupsResponse(groups=[m.DescribeGroupsResponse.DescribedGroup(
        error_code=code, group_id=group, group_state="", protocol_type="", protocol_data="", members=[])
        for group in request.groups])


def _create_topics(request, version, code, message):
    return m.CreateTopicsResponse(topics=[m.CreateTopicsResponse.CreatableTopicResult(
        name=t.name, error_code=code, error_message=message, num_partitions=-1, replication_factor=-1)
        for t in request.topics])


def _delete_topics(request, version, code, message):
    if version >= 6:
        return m.DeleteTopicsResponse(responses=[m.DeleteTopicsResponse.DeletableTopicResult(
            name=t.name, topic_id=t.topic_id, error_code=code, error_message=message) for t in request.topics])
    return m.DeleteTopicsResponse(responses=[m.DeleteTopicsResponse.DeletableTopicResult(
        name=name, error_code=code, error_message=message) for name in request.topic_names])


def _describe_configs(request, version, code, message):
    return m.DescribeConfigsResponse(results=[m.DescribeConfigsResponse.DescribeConfigsResult(
        error_code=code, error_message=message, resource_type=r.resource_type, resource_name=r.resource_name,
        configs=[]) for r in request.resources])


def _create_acls(request, version, code, message):
    return m.CreateAclsResponse(results=[m.CreateAclsResponse.AclCreationResult(error_code=code, error_message=message)
                                         for _ in request.creations])


def _delete_acls(request, version, code, message):
    return m.DeleteAclsResponse(filter_results=[m.DeleteAclsResponse.DeleteAclsFilterResult(
        error_code=code, error_message=message, matching_acls=[]) for _ in request.filters])


def _alter_scram(request, version, code, message):
    users = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    return m.AlterUserScramCredentialsResponse(results=[
        m.AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(user=user, error_code=code,
                                                                             error_message=message)
        for user in dict.fromkeys(users)])


def _add_partitions_to_txn(request, version, code, message):
    Response = m.AddPartitionsToTxnResponse
    if version >= 4:
        return Response(error_code=code, results_by_transaction=[])
    return Response(results_by_topic_v3_and_below=[Response.AddPartitionsToTxnTopicResult(
        name=t.name, results_by_partition=[Response.AddPartitionsToTxnPartitionResult(
            partition_index=p, partition_error_code=code) for p in t.partitions])
        for t in request.v3_and_below_topics])


def _write_txn_markers(request, version, code, message):
    Response = m.WriteTxnMarkersResponse
    return Response(markers=[Response.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
        Response.WritableTxnMarkerTopicResult(name=t.name, partitions=[
            Response.WritableTxnMarkerPartitionResult(partition_index=p, error_code=code) for p in t.partition_indexes])
        for t in marker.topics]) for marker in request.markers])


def _txn_offset_commit(request, version, code, message):
    Response = m.TxnOffsetCommitResponse
    return Response(topics=[Response.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        Response.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
        for p in t.partitions]) for t in request.topics])


def _describe_producers(request, version, code, message):
    Response = m.DescribeProducersResponse
    return Response(topics=[Response.TopicResponse(name=t.name, partitions=[
        Response.PartitionResponse(partition_index=p, error_code=code, error_message=message, active_producers=[])
        for p in t.partition_indexes]) for t in request.topics])


def _describe_transactions(request, version, code, message):
    Response = m.DescribeTransactionsResponse
    return Response(transaction_states=[Response.TransactionState(
        error_code=code, transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
        transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])
        for tid in request.transactional_ids])


def _delete_records(request, version, code, message):
    Response = m.DeleteRecordsResponse
    return Response(topics=[Response.DeleteRecordsTopicResult(name=t.name, partitions=[
        Response.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=code)
        for p in t.partitions]) for t in request.topics])


def _offset_for_leader_epoch(request, version, code, message):
    Response = m.OffsetForLeaderEpochResponse
    return Response(topics=[Response.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
        Response.EpochEndOffset(partition=p.partition, error_code=code, leader_epoch=-1, end_offset=-1)
        for p in t.partitions]) for t in request.topics])


def _alter_configs(response_name: str):
    def build(request, version, code, message):
        response_class = m.message_class(response_name)
        return response_class(responses=[response_class.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in request.resources])
    return build


def _describe_log_dirs(request, version, code, message):
    if version >= 3:
        return m.DescribeLogDirsResponse(error_code=code, results=[])
    return m.DescribeLogDirsResponse(results=[m.DescribeLogDirsResponse.DescribeLogDirsResult(
        error_code=code, log_dir="", topics=[])])


def _alter_replica_log_dirs(request, version, code, message):
    Response = m.AlterReplicaLogDirsResponse
    partitions: dict[str, list] = {}
    for wanted in request.dirs:
        for topic in wanted.topics:
            partitions.setdefault(topic.name, []).extend(
                Response.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code) for p in topic.partitions)
    return Response(results=[Response.AlterReplicaLogDirTopicResult(topic_name=name, partitions=found)
                             for name, found in partitions.items()])


def _create_partitions(request, version, code, message):
    return m.CreatePartitionsResponse(results=[m.CreatePartitionsResponse.CreatePartitionsTopicResult(
        name=t.name, error_code=code, error_message=message) for t in request.topics])


def _delete_groups(request, version, code, message):
    return m.DeleteGroupsResponse(results=[m.DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=code)
                                           for g in request.groups_names])


def _elect_leaders(request, version, code, message):
    Response = m.ElectLeadersResponse
    return Response(error_code=code if version >= 1 else 0, replica_election_results=[Response.ReplicaElectionResult(
        topic=t.topic, partition_result=[Response.PartitionResult(partition_id=p, error_code=code, error_message=message)
                                         for p in t.partitions]) for t in request.topic_partitions or ()])


def _alter_partition_reassignments(request, version, code, message):
    Response = m.AlterPartitionReassignmentsResponse
    return Response(error_code=code, error_message=message, responses=[Response.ReassignableTopicResponse(
        name=t.name, partitions=[Response.ReassignablePartitionResponse(
            partition_index=p.partition_index, error_code=code, error_message=message) for p in t.partitions])
        for t in request.topics])


def _alter_client_quotas(request, version, code, message):
    Response = m.AlterClientQuotasResponse
    return Response(entries=[Response.EntryData(error_code=code, error_message=message, entity=[
        Response.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in request.entries])


def _describe_topic_partitions(request, version, code, message):
    Response = m.DescribeTopicPartitionsResponse
    return Response(topics=[Response.DescribeTopicPartitionsResponseTopic(
        error_code=code, name=t.name, topic_id=ZERO_UUID, partitions=[]) for t in request.topics])
def _consumer_group_describe(request, version, code, message):
    Response = m.ConsumerGroupDescribeResponse
    return Response(groups=[Response.DescribedGroup(
        error_code=code, error_message=message, group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0,
        assignor_name="", members=[]) for group_id in request.group_ids])


def _streams_group_describe(request, version, code, message):
    Response = m.StreamsGroupDescribeResponse
    return Response(groups=[Response.DescribedGroup(
        error_code=code, error_message=message, group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0,
        members=[]) for group_id in request.group_ids])


def _share_group_describe(request, version, code, message):
    Response = m.ShareGroupDescribeResponse
    return Response(groups=[Response.DescribedGroup(
        error_code=code, error_message=message, group_id=group_id, group_state="", members=[])
        for group_id in request.group_ids])


def _describe_share_group_offsets(request, version, code, message):
    Response = m.DescribeShareGroupOffsetsResponse
    return Response(groups=[Response.DescribeShareGroupOffsetsResponseGroup(
        group_id=group.group_id, error_code=code, error_message=message) for group in request.groups])


_BUILDERS: dict[int, Callable[..., Any]] = {
    ApiKey.SHARE_GROUP_DESCRIBE: _share_group_describe,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_group_offsets,
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.CREATE_ACLS: _create_acls,
    ApiKey.DELETE_ACLS: _delete_acls,
    ApiKey.DESCRIBE_CONFIGS: _describe_configs,
    ApiKey.ALTER_CONFIGS: _alter_configs("AlterConfigsResponse"),
    ApiKey.DESCRIBE_LOG_DIRS: _describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: _alter_replica_log_dirs,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.ELECT_LEADERS: _elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _alter_partition_reassignments,
    ApiKey.ALTER_CLIENT_QUOTAS: _alter_client_quotas,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _alter_configs("IncrementalAlterConfigsResponse"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_scram,
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.STREAMS_GROUP_DESCRIBE: _streams_group_describe,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
}

"""DescribeQuorum: the KRaft metadata quorum, as its leader (Kafka's ``KafkaRaftClient``) describes it.

A single broker is a combined-mode node, the leader and only voter of ``__cluster_metadata``; an
in-process cluster's nodes are all voters, the controller leading. A broker listener answers as the
active controller would (Kafka's brokers forward the request to it); on a controller listener, a node
that is not the leader answers NOT_LEADER_OR_FOLLOWER, as a follower controller does. kafkawire keeps
no metadata log: the high watermark counts the topic, partition and config changes since the start.
"""
from __future__ import annotations

import time

from ... import messages as m
from ...error_codes import ErrorCode
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["QuorumApis", "METADATA_TOPIC"]

METADATA_TOPIC, METADATA_PARTITION = "__cluster_metadata", 0
_UNKNOWN_PARTITION = "This server does not host this topic-partition."
_NOT_LEADER = "For requests intended only for the leader, this error indicates that the broker is not the " \
              "current leader. For requests intended for any replica, this error indicates that the broker " \
              "is not a replica of the topic partition."

Response = m.DescribeQuorumResponse


class QuorumApis:
    def __init__(self, state: BrokerState):
        self.state = state

    async def describe_quorum(self, request: m.DescribeQuorumRequest, version: int,
                              context: RequestContext) -> m.DescribeQuorumResponse:
        # DESCRIBE on the cluster, checked before the quorum is looked at (Kafka's ControllerApis)
        if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
            return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message="Cluster authorization failed.", topics=[])
        if not _asks_for_metadata_partition(request):
            return Response(topics=[Response.TopicData(topic_name=topic.topic_name, partitions=[
                Response.PartitionData(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                       error_message=_UNKNOWN_PARTITION) for p in topic.partitions])
                for topic in request.topics])
        view = self.state.view
        leader = view.controller_id
        if context.listener.controller and leader != view.node_id:  # a follower controller
            return _metadata_partition(Response.PartitionData(
                partition_index=METADATA_PARTITION, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                error_message=_NOT_LEADER))
        now_ms = int(time.time() * 1000)
        epoch, voters = view.quorum(self.state.topics.metadata_changes, now_ms)
        response = _metadata_partition(Response.PartitionData(
            partition_index=METADATA_PARTITION, error_code=0, leader_id=leader, leader_epoch=epoch,
            high_watermark=self.state.topics.metadata_changes, observers=[],
            current_voters=[Response.ReplicaState(
                replica_id=voter.node_id, log_end_offset=voter.log_end_offset,
                last_fetch_timestamp=voter.last_fetch_ms, last_caught_up_timestamp=voter.last_caught_up_ms)
                for voter in voters]))
        if version >= 2:  # the voters' endpoints, on the listener this request came in on
            listener = context.listener.name
            addresses = view.brokers(listener, context.advertised)
            response.nodes = [Response.Node(node_id=voter.node_id, listeners=[
                Response.Listener(name=listener, host=address.host, port=address.port)
                for address in addresses if address.node_id == voter.node_id])  # none for a stopped node
                for voter in voters]
        return response


def _asks_for_metadata_partition(request: m.DescribeQuorumRequest) -> bool:
    """Exactly one partition, the metadata log's (Kafka's hasValidTopicPartition)."""
    if len(request.topics) != 1:
        return False
    topic = request.topics[0]
    return (topic.topic_name == METADATA_TOPIC and len(topic.partitions) == 1
            and topic.partitions[0].partition_index == METADATA_PARTITION)


def _metadata_partition(partition: m.DescribeQuorumResponse.PartitionData) -> m.DescribeQuorumResponse:
    return Response(topics=[Response.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])])

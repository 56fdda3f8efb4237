"""AlterPartitionReassignments and ListPartitionReassignments, and ElectLeaders: what the node's view of
the cluster (``node_view``) does with them. A single broker holds every replica itself; an in-process
cluster's controller moves replicas and leaders (``broker.cluster.reassignments``)."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["ReassignmentApis"]

_CLUSTER = "kafka-cluster"
_PREFERRED, _UNCLEAN = 0, 1
_CLUSTER_DENIED = "Cluster authorization failed."


class ReassignmentApis:
    def __init__(self, state: BrokerState):
        self.state = state
        self.topics = state.topics

    # ---- AlterPartitionReassignments ------------------------------------------------------------
    async def alter_partition_reassignments(self, request: m.AlterPartitionReassignmentsRequest, version: int,
                                            context: RequestContext) -> m.AlterPartitionReassignmentsResponse:
        Topic = m.AlterPartitionReassignmentsResponse.ReassignableTopicResponse
        Partition = m.AlterPartitionReassignmentsResponse.ReassignablePartitionResponse
        allow_change = request.allow_replication_factor_change if version >= 1 else True
        if not self.state.allowed(context, Operation.ALTER, ResourceType.CLUSTER, _CLUSTER):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return m.AlterPartitionReassignmentsResponse(
                error_code=denied, error_message=_CLUSTER_DENIED, allow_replication_factor_change=allow_change,
                responses=[Topic(name=t.name, partitions=[
                    Partition(partition_index=p.partition_index, error_code=denied, error_message=_CLUSTER_DENIED)
                    for p in t.partitions]) for t in request.topics])
        responses = []
        code: int
        message: str | None
        for wanted in request.topics:
            partitions = []
            for p in wanted.partitions:
                if not self.topics.log(wanted.name, p.partition_index) is not None:
                    code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"Unable to find partition {wanted.name}-{p.partition_index}.")
                else:
                    replicas = None if p.replicas is None else list(p.replicas)
                    code, message = self.state.view.reassign(wanted.name, p.partition_index, replicas, allow_change)
                partitions.append(Partition(partition_index=p.partition_index, error_code=code,
                                            error_message=message))
            responses.append(Topic(name=wanted.name, partitions=partitions))
        return m.AlterPartitionReassignmentsResponse(error_code=0, allow_replication_factor_change=allow_change,
                                                     responses=responses)

    # ---- ListPartitionReassignments -------------------------------------------------------------
    async def list_partition_reassignments(self, request: m.ListPartitionReassignmentsRequest, version: int,
                                           context: RequestContext) -> m.ListPartitionReassignmentsResponse:
        if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.CLUSTER, _CLUSTER):
            return m.ListPartitionReassignmentsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                        error_message=_CLUSTER_DENIED, topics=[])
        asked = None if request.topics is None else {
            (t.name, index) for t in request.topics for index in t.partition_indexes}
        Topic = m.ListPartitionReassignmentsResponse.OngoingTopicReassignment
        Partition = m.ListPartitionReassignmentsResponse.OngoingPartitionReassignment
        by_topic: dict[str, list] = {}
        for ongoing in self.state.view.reassignments():
            if asked is None or (ongoing.topic, ongoing.partition) in asked:
                by_topic.setdefault(ongoing.topic, []).append(Partition(
                    partition_index=ongoing.partition, replicas=ongoing.replicas,
                    adding_replicas=ongoing.adding, removing_replicas=ongoing.removing))
        return m.ListPartitionReassignmentsResponse(error_code=0, topics=[
            Topic(name=name, partitions=partitions) for name, partitions in by_topic.items()])

    # ---- ElectLeaders ---------------------------------------------------------------------------
    async def elect_leaders(self, request: m.ElectLeadersRequest, version: int,
                            context: RequestContext) -> m.ElectLeadersResponse:
        """Each named partition's election; with none named (null), every partition's, reporting only
        those where an election was needed, as Kafka's controller does."""
        Topic = m.ElectLeadersResponse.ReplicaElectionResult
        Partition = m.ElectLeadersResponse.PartitionResult
        named = request.topic_partitions
        if not self.state.allowed(context, Operation.ALTER, ResourceType.CLUSTER, _CLUSTER):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return m.ElectLeadersResponse(error_code=denied if version >= 1 else 0, replica_election_results=[Topic(
                topic=t.topic, partition_result=[Partition(partition_id=p, error_code=denied,
                                                           error_message=_CLUSTER_DENIED)
                                                 for p in t.partitions]) for t in named or []])
        election = request.election_type if version >= 1 else _PREFERRED
        if election not in (_PREFERRED, _UNCLEAN):
            return m.ElectLeadersResponse(error_code=ErrorCode.INVALID_REQUEST, replica_election_results=[])
        if named is None:
            wanted = [(topic.name, list(range(len(topic.partitions)))) for topic in self.topics.topics.values()]
        else:
            wanted = [(t.topic, list(t.partitions)) for t in named]
        results = []
        code: int
        message: str | None
        for topic, indexes in wanted:
            partitions = []
            for index in indexes:
                if not self.topics.log(topic, index) is not None:
                    code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     "The topic or partition does not exist.")
                else:
                    code, message = self.state.view.elect_leader(topic, index, election)
                if named is not None or code != ErrorCode.ELECTION_NOT_NEEDED:
                    partitions.append(Partition(partition_id=index, error_code=code, error_message=message))
            if partitions or named is not None:
                results.append(Topic(topic=topic, partition_result=partitions))
        return m.ElectLeadersResponse(error_code=0, replica_election_results=results)

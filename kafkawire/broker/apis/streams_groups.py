"""StreamsGroupHeartbeat and StreamsGroupDescribe (KIP-1071) over the streams group coordinator, with
Kafka's authorization: READ on the group to heartbeat and DESCRIBE on every topic of a topology it
brings, CREATE (on the cluster, else on each topic) for the internal topics the coordinator asks for;
DESCRIBE on the group, and on the topics of its topology, to describe it.

Internal topics are created as Kafka's ``AutoTopicCreationManager`` does for streams groups: when a
heartbeat's answer says MISSING_INTERNAL_TOPICS, with the partition counts the coordinator decided;
a creation that is refused or fails is reported in that status's detail, and a later heartbeat sees
the topics and assigns the tasks."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ..groups.streams.coordinator import ACCEPTABLE_RECOVERY_LAG, TASK_OFFSET_INTERVAL_MS
from ..groups.streams.state import StreamsGroup, Tasks
from ..groups.streams.topology import Status, TopicInfo, Topology
from ...acl_types import AclOperation as Operation, ResourceType
from ..topics import TopicError
from .group_describe import describe_groups
from .state import BrokerState, RequestContext

__all__ = ["StreamsGroupApis"]


class StreamsGroupApis:
    def __init__(self, state: BrokerState):
        self.state = state
        self.coordinator = state.groups.streams

    async def heartbeat(self, request: m.StreamsGroupHeartbeatRequest, version: int,
                        context: RequestContext) -> m.StreamsGroupHeartbeatResponse:
        Response = m.StreamsGroupHeartbeatResponse
        if not self.state.allowed(context, Operation.READ, ResourceType.GROUP, request.group_id):
            return Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if request.topology is not None:
            named = {t for sub in request.topology.subtopologies for t in (
                *sub.source_topics, *sub.repartition_sink_topics, *(i.name for i in sub.state_changelog_topics),
                *(i.name for i in sub.repartition_source_topics))}
            denied = sorted(t for t in named if not self._may(context, Operation.DESCRIBE, t))
            if denied:
                return Response(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                error_message=f"The client is not authorized to describe topics: {', '.join(denied)}.")
        result = self.coordinator.heartbeat(request, context.client_id, context.client_host)
        if result.error:
            return Response(error_code=result.error, error_message=result.message)
        status = list(result.status)
        if result.to_create:
            problems = await self._create(result.to_create, context)
            if problems:
                status = [(code, f"{detail} {problems}" if code == Status.MISSING_INTERNAL_TOPICS else detail)
                          for code, detail in status]
        response = Response(
            member_id=result.member_id, member_epoch=result.member_epoch,
            heartbeat_interval_ms=result.heartbeat_interval_ms, acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG,
            task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
            status=[Response.Status(status_code=code, status_detail=detail) for code, detail in status],
            endpoint_information_epoch=result.endpoint_epoch)
        if result.assignment is not None:
            response.active_tasks = _task_ids(Response.TaskIds, result.assignment.active)
            response.standby_tasks = _task_ids(Response.TaskIds, result.assignment.standby)
            response.warmup_tasks = _task_ids(Response.TaskIds, result.assignment.warmup)
        if result.endpoints is not None:
            response.partitions_by_user_endpoint = [Response.EndpointToPartitions(
                user_endpoint=Response.Endpoint(host=host, port=port),
                active_partitions=[Response.TopicPartition(topic=t, partitions=list(ps)) for t, ps in active],
                standby_partitions=[Response.TopicPartition(topic=t, partitions=list(ps)) for t, ps in standby])
                for host, port, active, standby in result.endpoints]
        return response

    def _may(self, context: RequestContext, operation: Operation, topic: str) -> bool:
        return self.state.allowed(context, operation, ResourceType.TOPIC, topic)

    async def _create(self, wanted: tuple[TopicInfo, ...], context: RequestContext) -> str:
        """Create the internal topics; what went wrong, for the status detail ("" if nothing)."""
        if not self.state.allowed(context, Operation.CREATE, ResourceType.CLUSTER, "kafka-cluster"):
            denied = [t.name for t in wanted if not self._may(context, Operation.CREATE, t.name)]
            if denied:  # as Kafka, one refusal holds the whole set back
                return f"Unauthorized to CREATE on topics {', '.join(denied)}."
        topics = self.state.topics
        planned, failures = [], []
        for info in wanted:
            if topics.get(info.name) is not None:
                continue  # created since (another member's heartbeat)
            try:
                planned.append(topics.plan(info.name, info.partitions, info.replication_factor or -1,
                                           dict(info.configs)))
            except TopicError as error:
                failures.append(f"{info.name}: {error}")
        for outcome in await topics.create(planned) if planned else []:
            if isinstance(outcome, TopicError) and outcome.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                failures.append(str(outcome))
        return ("Creating internal topics failed: " + "; ".join(failures) + ".") if failures else ""

    async def describe(self, request: m.StreamsGroupDescribeRequest, version: int,
                       context: RequestContext) -> m.StreamsGroupDescribeResponse:
        Response = m.StreamsGroupDescribeResponse

        def failed(group_id: str, error: int, message: str | None, operations: int):
            return Response.DescribedGroup(error_code=error, error_message=message, group_id=group_id,
                                           group_state="", group_epoch=0, assignment_epoch=0, topology=None,
                                           members=[], authorized_operations=operations)

        def described(group: StreamsGroup, operations: int):
            if group.topology is not None and not all(
                    self._may(context, Operation.DESCRIBE, t) for t in group.topology.all_topics()):
                return failed(group.group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              "The described group uses topics that the client is not authorized to describe.",
                              operations)
            return self._described(group, operations)
        return Response(groups=describe_groups(self.state, context, request.group_ids,
                                               request.include_authorized_operations, "streams",
                                               self.coordinator.groups, described, failed))

    def _described(self, group: StreamsGroup, operations: int) -> m.StreamsGroupDescribeResponse.DescribedGroup:
        Response = m.StreamsGroupDescribeResponse

        def assignment(tasks: Tasks):
            return Response.Assignment(active_tasks=_task_ids(Response.TaskIds, tasks.active),
                                       standby_tasks=_task_ids(Response.TaskIds, tasks.standby),
                                       warmup_tasks=_task_ids(Response.TaskIds, tasks.warmup))

        def offsets(rows):
            return [Response.TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in rows]
        members = [Response.Member(
            member_id=member.member_id, member_epoch=member.member_epoch, instance_id=member.instance_id,
            rack_id=member.rack_id, client_id=member.client_id, client_host=member.client_host,
            topology_epoch=member.topology_epoch, process_id=member.process_id,
            user_endpoint=(None if member.user_endpoint is None else
                           Response.Endpoint(host=member.user_endpoint[0], port=member.user_endpoint[1])),
            client_tags=[Response.KeyValue(key=k, value=v) for k, v in member.client_tags],
            task_offsets=offsets(member.task_offsets), task_end_offsets=offsets(member.task_end_offsets),
            assignment=assignment(member.assigned),
            target_assignment=assignment(group.target.get(member.member_id, Tasks())), is_classic=False)
            for member in group.members.values()]
        return Response.DescribedGroup(
            error_code=0, group_id=group.group_id, group_state=group.state, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            topology=None if group.topology is None else self._topology(group.topology, group.partition_counts),
            members=members, authorized_operations=operations)

    @staticmethod
    def _topology(topology: Topology, counts: dict[str, int]) -> m.StreamsGroupDescribeResponse.Topology:
        Response = m.StreamsGroupDescribeResponse

        def info(topic: TopicInfo):  # the partitions the internal topic has, once it exists
            return Response.TopicInfo(name=topic.name, partitions=counts.get(topic.name, topic.partitions),
                                      replication_factor=topic.replication_factor,
                                      topic_configs=[Response.KeyValue(key=k, value=v) for k, v in topic.configs])
        return Response.Topology(epoch=topology.epoch, subtopologies=[Response.Subtopology(
            subtopology_id=sub.subtopology_id, source_topics=list(sub.source_topics),
            repartition_sink_topics=list(sub.repartition_sink_topics),
            state_changelog_topics=[info(t) for t in sub.state_changelog_topics],
            repartition_source_topics=[info(t) for t in sub.repartition_source_topics])
            for sub in topology.subtopologies])


def _task_ids(TaskIds, tasks) -> list:
    by_subtopology: dict[str, list[int]] = {}
    for subtopology, partition in tasks:
        by_subtopology.setdefault(subtopology, []).append(partition)
    return [TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(by_subtopology.items())]

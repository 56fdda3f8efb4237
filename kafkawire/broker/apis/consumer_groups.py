"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) over the consumer group coordinator, with
Kafka's authorization: READ on the group to heartbeat (and DESCRIBE on the topics it subscribes to),
DESCRIBE on the group to describe it. Assignments travel by topic id."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ..groups.consumer_state import Assignment, ConsumerGroup
from ...acl_types import AclOperation as Operation, ResourceType
from .group_describe import assigned_by_id, describe_groups
from .state import BrokerState, RequestContext

__all__ = ["ConsumerGroupApis"]


class ConsumerGroupApis:
    def __init__(self, state: BrokerState):
        self.state = state
        self.coordinator = state.groups.consumer

    async def heartbeat(self, request: m.ConsumerGroupHeartbeatRequest, version: int,
                        context: RequestContext) -> m.ConsumerGroupHeartbeatResponse:
        Response = m.ConsumerGroupHeartbeatResponse
        if not self.state.allowed(context, Operation.READ, ResourceType.GROUP, request.group_id):
            return Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, member_epoch=0)
        result = self.coordinator.heartbeat(
            request, version, context.client_id, context.client_host,
            lambda topic: self.state.allowed(context, Operation.DESCRIBE, ResourceType.TOPIC, topic))
        assignment = None
        if result.assignment is not None:
            assignment = Response.Assignment(topic_partitions=[
                Response.TopicPartitions(topic_id=topic_id, partitions=partitions)
                for topic_id, _, partitions in assigned_by_id(self.state, result.assignment)])
        return Response(error_code=result.error, error_message=result.message, member_id=result.member_id,
                        member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
                        assignment=assignment)

    async def describe(self, request: m.ConsumerGroupDescribeRequest, version: int,
                       context: RequestContext) -> m.ConsumerGroupDescribeResponse:
        Response = m.ConsumerGroupDescribeResponse

        def failed(group_id: str, error: int, message: str | None,
                   operations: int) -> m.ConsumerGroupDescribeResponse.DescribedGroup:
            return Response.DescribedGroup(error_code=error, error_message=message, group_id=group_id,
                                           group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                                           members=[], authorized_operations=operations)
        return Response(groups=describe_groups(
            self.state, context, request.group_ids, request.include_authorized_operations, "consumer",
            self.coordinator.groups, lambda group, operations: self._described(group, version, operations), failed))

    def _described(self, group: ConsumerGroup, version: int,
                   operations: int) -> m.ConsumerGroupDescribeResponse.DescribedGroup:
        Response = m.ConsumerGroupDescribeResponse
        members = [Response.Member(
            member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
            member_epoch=member.member_epoch, client_id=member.client_id, client_host=member.client_host,
            subscribed_topic_names=list(member.subscribed_names), subscribed_topic_regex=member.subscribed_regex,
            assignment=self._assignment(member.assigned),
            target_assignment=self._assignment(group.target.get(member.member_id, {})),
            member_type=1) for member in group.members.values()]  # 1: the consumer protocol (v1)
        return Response.DescribedGroup(error_code=0, group_id=group.group_id, group_state=group.state,
                                       group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                                       assignor_name=group.assignor or self.coordinator.assignors[0],
                                       members=members, authorized_operations=operations)

    def _assignment(self, assignment: Assignment) -> m.ConsumerGroupDescribeResponse.Assignment:
        Response = m.ConsumerGroupDescribeResponse
        return Response.Assignment(topic_partitions=[
            Response.TopicPartitions(topic_id=topic_id, topic_name=name, partitions=partitions)
            for topic_id, name, partitions in assigned_by_id(self.state, assignment)])

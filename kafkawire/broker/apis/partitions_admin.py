"""The partition admin APIs: CreatePartitions, DeleteRecords, DescribeLogDirs (every log directory, a
moving partition's future log included), DescribeTopicPartitions, and OffsetForLeaderEpoch, for a single broker that leads every partition."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from ... import messages as m
from ...codec.primitives import ZERO_UUID
from ...error_codes import ErrorCode
from ...messages import ApiKey
from ..quotas.throttling import THROTTLED
from ...acl_types import AclOperation as Operation, ResourceType
from ..storage.errors import OffsetOutOfRange
from ..topics import TopicError
from .state import BrokerState, RequestContext

__all__ = ["PartitionAdminApis"]

_NO_OPERATIONS = -(1 << 31)
_PARTITION_LIMIT = 2000  # max.request.partition.size.limit: DescribeTopicPartitions' cap per response


class PartitionAdminApis:
    def __init__(self, state: BrokerState):
        self.state = state
        self.config = state.config
        self.topics = state.topics

    def _allowed(self, context: RequestContext, operation: Operation, topic: str) -> bool:
        return self.state.allowed(context, operation, ResourceType.TOPIC, topic)

    # ---- CreatePartitions -----------------------------------------------------------------------
    async def create_partitions(self, request: m.CreatePartitionsRequest, version: int,
                                context: RequestContext) -> m.CreatePartitionsResponse:
        names = [t.name for t in request.topics]
        results = []
        quota = self.state.quotas.mutations(ApiKey.CREATE_PARTITIONS, version, context.user, context.client_id)
        for wanted in request.topics:
            result = m.CreatePartitionsResponse.CreatePartitionsTopicResult(name=wanted.name, error_code=0)
            try:
                if names.count(wanted.name) > 1:
                    raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                if not self._allowed(context, Operation.ALTER, wanted.name):
                    raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                topic = self.topics.get(wanted.name)
                if topic is None:
                    raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{wanted.name}' does not exist.")
                self._check_assignments(wanted, len(topic.partitions))
                if wanted.count > len(topic.partitions) and not quota.admit(wanted.count - len(topic.partitions)):
                    raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
                await self.topics.create_partitions(topic, wanted.count, request.validate_only)
            except TopicError as failure:
                result.error_code, result.error_message = failure.code, failure.message
            results.append(result)
        context.throttle_ms = max(context.throttle_ms, self.state.quotas.settle(quota))
        return m.CreatePartitionsResponse(results=results)

    def _check_assignments(self, wanted, current: int) -> None:
        """Manual assignments: one per new partition, each naming this broker alone."""
        if wanted.assignments is None:
            return
        if len(wanted.assignments) != wanted.count - current:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Increasing the number of partitions by {wanted.count - current} but "
                             f"{len(wanted.assignments)} assignments provided.")
        for assignment in wanted.assignments:
            if list(assignment.broker_ids) != [self.config.node_id]:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes broker(s) {list(assignment.broker_ids)} "
                                 f"but only broker {self.config.node_id} exists (replication factor 1).")

    # ---- DeleteRecords --------------------------------------------------------------------------
    async def delete_records(self, request: m.DeleteRecordsRequest, version: int,
                             context: RequestContext) -> m.DeleteRecordsResponse:
        Result = m.DeleteRecordsResponse.DeleteRecordsPartitionResult
        topics = []
        for wanted in request.topics:
            allowed = self._allowed(context, Operation.DELETE, wanted.name)
            partitions = []
            for p in wanted.partitions:
                result = Result(partition_index=p.partition_index, low_watermark=-1, error_code=0)
                partition_log = self.topics.log(wanted.name, p.partition_index)
                if not allowed:
                    result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif partition_log is None:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif not partition_log.config.delete:  # Partition.deleteRecordsOnLeader
                    result.error_code = ErrorCode.POLICY_VIOLATION
                else:
                    try:
                        result.low_watermark = partition_log.delete_records_before(p.offset)
                    except OffsetOutOfRange:
                        result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    except OSError:
                        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                partitions.append(result)
            topics.append(m.DeleteRecordsResponse.DeleteRecordsTopicResult(name=wanted.name, partitions=partitions))
        return m.DeleteRecordsResponse(topics=topics)

    # ---- DescribeLogDirs ------------------------------------------------------------------------
    async def describe_log_dirs(self, request: m.DescribeLogDirsRequest, version: int,
                                context: RequestContext) -> m.DescribeLogDirsResponse:
        if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
            return m.DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
        self.topics.check_log_dirs()
        wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
        Partition = m.DescribeLogDirsResponse.DescribeLogDirsPartition
        dirs = self.topics.dirs
        by_dir: dict[str, dict[str, list]] = {directory: {} for directory in dirs.paths}
        for topic, index, partition_log in self.topics.all_logs():
            if wanted is None or (topic.name, index) in wanted:
                shown = by_dir.get(partition_log.log_dir)
                if shown is not None:
                    shown.setdefault(topic.name, []).append(Partition(
                        partition_index=index, partition_size=0 if partition_log.offline else partition_log.size_in_bytes,
                        offset_lag=0, is_future_key=False))
                move = dirs.moves.get(partition_log.name)
                if move is not None and not move.cancelled:  # the future log, in the directory it goes to
                    by_dir[move.destination].setdefault(topic.name, []).append(Partition(
                        partition_index=index, partition_size=move.future_size, offset_lag=move.offset_lag(),
                        is_future_key=True))
        return m.DescribeLogDirsResponse(error_code=0, results=[
            self._log_dir_result(directory, topics, directory in dirs.offline) for directory, topics in by_dir.items()])

    @staticmethod
    def _log_dir_result(directory: str, topics: dict[str, list], offline: bool):
        """One directory's entry: offline, KAFKA_STORAGE_ERROR and nothing else (as Kafka's)."""
        shown = str(Path(directory).resolve())
        if offline:
            return m.DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=shown, total_bytes=-1, usable_bytes=-1, topics=[])
        try:
            usage = shutil.disk_usage(directory)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        return m.DescribeLogDirsResponse.DescribeLogDirsResult(
            error_code=0, log_dir=shown, total_bytes=total, usable_bytes=usable, topics=[
                m.DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=partitions)
                for name, partitions in topics.items()])

    # ---- DescribeTopicPartitions ----------------------------------------------------------------
    async def describe_topic_partitions(self, request: m.DescribeTopicPartitionsRequest, version: int,
                                        context: RequestContext) -> m.DescribeTopicPartitionsResponse:
        Topic = m.DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
        cursor = request.cursor
        start_topic = cursor.topic_name if cursor is not None else ""
        if request.topics:
            names = sorted({t.name for t in request.topics if t.name >= start_topic})
        else:  # every topic the principal may describe
            names = sorted(name for name in self.topics.topics if name >= start_topic
                           and self._allowed(context, Operation.DESCRIBE, name))
        budget = max(0, min(request.response_partition_limit, _PARTITION_LIMIT))
        results, next_cursor = [], None
        for name in names:
            topic = self.topics.get(name)
            if not self._allowed(context, Operation.DESCRIBE, name):
                results.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                                     partitions=[]))
                continue
            if topic is None:
                results.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID,
                                     partitions=[]))
                continue
            first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            count = len(topic.partitions)
            shown = range(first, min(count, first + budget))
            budget -= len(shown)
            results.append(Topic(error_code=0, name=name, topic_id=topic.topic_id, is_internal=topic.is_internal,
                                 partitions=[self._partition(index) for index in shown],
                                 topic_authorized_operations=self.state.topic_operations(context, name)))
            if shown.stop < count:
                next_cursor = m.DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=shown.stop)
                break
        return m.DescribeTopicPartitionsResponse(topics=results, next_cursor=next_cursor)

    def _partition(self, index: int) -> m.DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition:
        node = self.config.node_id
        return m.DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition(
            error_code=0, partition_index=index, leader_id=node, leader_epoch=0, replica_nodes=[node],
            isr_nodes=[node], eligible_leader_replicas=[], last_known_elr=[], offline_replicas=[])

    # ---- OffsetForLeaderEpoch -------------------------------------------------------------------
    async def offset_for_leader_epoch(self, request: m.OffsetForLeaderEpochRequest, version: int,
                                      context: RequestContext) -> m.OffsetForLeaderEpochResponse:
        Result = m.OffsetForLeaderEpochResponse.EpochEndOffset
        follower = version >= 3 and request.replica_id >= 0
        cluster_action = follower and self.state.allowed(context, Operation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                                         "kafka-cluster")
        topics = []
        for wanted in request.topics:
            allowed = cluster_action if follower else self._allowed(context, Operation.DESCRIBE, wanted.topic)
            partitions = []
            for p in wanted.partitions:
                result = Result(partition=p.partition, error_code=0, leader_epoch=-1, end_offset=-1)
                partition_log = self.topics.log(wanted.topic, p.partition)
                if not allowed:
                    result.error_code = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED if follower
                                         else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                elif partition_log is None:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.current_leader_epoch != -1 and p.current_leader_epoch < partition_log.leader_epoch:
                    result.error_code = ErrorCode.FENCED_LEADER_EPOCH
                elif p.current_leader_epoch > partition_log.leader_epoch:
                    result.error_code = ErrorCode.UNKNOWN_LEADER_EPOCH
                else:
                    result.leader_epoch, result.end_offset = partition_log.end_offset_for_epoch(p.leader_epoch)
                partitions.append(result)
            topics.append(m.OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=wanted.topic,
                                                                                     partitions=partitions))
        return m.OffsetForLeaderEpochResponse(topics=topics)

"""AlterReplicaLogDirs: move a partition's log to another of the broker's log.dirs (KIP-113), as
Kafka's ReplicaManager.alterReplicaLogDirs answers; the move itself is broker.log_dirs.ReplicaMove."""
from __future__ import annotations

import os

from ... import messages as m
from ...error_codes import ErrorCode
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["LogDirApis"]


class LogDirApis:
    def __init__(self, state: BrokerState):
        self.state = state
        self.topics = state.topics

    async def alter_replica_log_dirs(self, request: m.AlterReplicaLogDirsRequest, version: int,
                                     context: RequestContext) -> m.AlterReplicaLogDirsResponse:
        allowed = self.state.allowed(context, Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
        dirs = self.topics.dirs
        # a client names a directory as DescribeLogDirs showed it (resolved) or as log.dirs gave it
        known = {os.path.realpath(d): d for d in dirs.paths} | {d: d for d in dirs.paths}
        results: dict[str, list] = {}
        Result = m.AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult
        for wanted in request.dirs:
            destination = known.get(os.path.abspath(wanted.path)) if wanted.path else None
            for topic_entry in wanted.topics:
                partitions = results.setdefault(topic_entry.name, [])
                for index in topic_entry.partitions:
                    code = (self._move(topic_entry.name, index, wanted.path, destination) if allowed
                            else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    partitions.append(Result(partition_index=index, error_code=code))
        return m.AlterReplicaLogDirsResponse(results=[
            m.AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=name, partitions=partitions)
            for name, partitions in results.items()])

    def _move(self, topic_name: str, index: int, path: str, destination: str | None) -> ErrorCode:
        if destination is None:
            return ErrorCode.LOG_DIR_NOT_FOUND  # LogManager.isLogDirOnline: not one of log.dirs
        if destination in self.topics.dirs.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partition_log = topic.partitions[index]
        if partition_log.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if partition_log.closed:  # being moved or deleted this instant
            return ErrorCode.REPLICA_NOT_AVAILABLE
        self.topics.move(topic, index, destination)
        return ErrorCode.NONE

"""ListOffsets: offsets by the special timestamps (latest, earliest, max timestamp, earliest local,
latest tiered, earliest pending upload) and by time."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ..encoded_response import EncodedResponse, array_items
from ..loop_slices import Slices
from ...acl_types import AclOperation as Operation, ResourceType
from ..storage.log import PartitionLog
from .state import BrokerState, RequestContext

__all__ = ["ListOffsetsApi"]

_LATEST, _EARLIEST, _MAX_TIMESTAMP, _EARLIEST_LOCAL, _LATEST_TIERED, _EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6


class ListOffsetsApi:
    def __init__(self, state: BrokerState):
        self.state = state
        self.topics = state.topics

    async def list_offsets(self, request: m.ListOffsetsRequest, version: int,
                           context: RequestContext) -> EncodedResponse:
        items = array_items(m.ListOffsetsResponse, "topics", version,
                            m.ListOffsetsResponse.ListOffsetsTopicResponse(name="p", partitions=[]))
        topics = []  # each written at once: no objects of every partition held across the slices
        slices = Slices(first_in_line=True)  # thousands of partitions: others are served in between
        for topic in request.topics:
            partitions = []
            described = self.state.allowed(context, Operation.DESCRIBE, ResourceType.TOPIC, topic.name)
            for p in topic.partitions:
                if slices.due():
                    await slices.pause()
                result = m.ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, timestamp=-1, offset=-1,
                    leader_epoch=0 if version >= 4 else -1)
                partition_log = self.topics.log(topic.name, p.partition_index)
                if not described:
                    result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif partition_log is None:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif partition_log.offline:  # its log directory failed
                    result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                elif refused := self.state.view.leader_error(
                        topic.name, p.partition_index, p.current_leader_epoch if version >= 4 else -1):
                    result.error_code = refused
                elif version >= 4 and p.current_leader_epoch not in (-1, partition_log.leader_epoch):
                    # Partition.fetchOffsetForTimestamp checks the client's view of the leader
                    result.error_code = (ErrorCode.FENCED_LEADER_EPOCH if p.current_leader_epoch <
                                         partition_log.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH)
                    result.leader_epoch = -1
                else:
                    committed = version >= 2 and request.isolation_level == 1
                    empty_at = partition_log.idle_empty_offset()  # (an idle, empty log is not opened)
                    found = (_offset_in_empty(empty_at, p.timestamp) if empty_at is not None
                             else self._offset_for(partition_log, p.timestamp, committed))
                    if found is not None:
                        result.offset, result.timestamp = found
                        if version >= 4 and result.offset >= 0 and empty_at is not None:
                            result.leader_epoch = partition_log.leader_epoch  # (the epoch it would open at)
                        elif version >= 4 and result.offset >= 0:  # the epoch the offset was written in
                            epoch = partition_log.leader_epochs.epoch_for_offset(result.offset)
                            result.leader_epoch = epoch if epoch >= 0 else partition_log.leader_epoch
                partitions.append(result)
            topics.append(items.encode(m.ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name,
                                                                                      partitions=partitions)))
        return items.response(m.ListOffsetsResponse(topics=[]), topics)

    @classmethod
    def _offset_for(cls, partition_log: PartitionLog, timestamp: int, read_committed: bool) -> tuple[int, int] | None:
        """Partition.fetchOffsetForTimestamp: LATEST is the last fetchable offset (the last stable offset
        for READ_COMMITTED, the high watermark otherwise); a lookup by time or MAX_TIMESTAMP finds only an
        offset below it."""
        fetchable = partition_log.last_stable_offset if read_committed else partition_log.high_watermark
        if timestamp == _LATEST:
            return fetchable, -1
        found = cls._lookup(partition_log, timestamp)
        if found is not None and timestamp not in (_EARLIEST, _EARLIEST_LOCAL, _LATEST_TIERED,
                                                    _EARLIEST_PENDING_UPLOAD) and found[0] >= fetchable:
            return (-1, -1) if timestamp == _MAX_TIMESTAMP else None
        return found

    @staticmethod
    def _lookup(partition_log: PartitionLog, timestamp: int) -> tuple[int, int] | None:
        if timestamp == _LATEST_TIERED:
            return partition_log.highest_offset_in_remote_storage, -1
        if timestamp == _EARLIEST:
            return partition_log.log_start_offset, -1
        if timestamp == _EARLIEST_LOCAL:
            return partition_log.local_log_start_offset, -1
        if timestamp == _EARLIEST_PENDING_UPLOAD:
            return _earliest_pending_upload(partition_log), -1
        if timestamp == _MAX_TIMESTAMP:
            found = partition_log.max_timestamp_offset()
            return (found[0], found[1]) if found is not None else (-1, -1)
        found = partition_log.offset_for_timestamp(timestamp)
        return (found[0], found[1]) if found is not None else None


def _offset_in_empty(offset: int, timestamp: int) -> tuple[int, int] | None:
    """What ``_offset_for`` finds in a log without a remote tier that holds nothing, from ``offset`` (its
    start and end) on: so thousands of idle partitions are answered without opening their files."""
    if timestamp in (_LATEST, _EARLIEST, _EARLIEST_LOCAL):
        return offset, -1
    if timestamp in (_MAX_TIMESTAMP, _LATEST_TIERED, _EARLIEST_PENDING_UPLOAD):
        return -1, -1
    return None  # (by time: no record)


def _earliest_pending_upload(partition_log: PartitionLog) -> int:
    """ListOffsets v11's EARLIEST_PENDING_UPLOAD (KIP-1023), as Kafka's UnifiedLog answers it: the first
    offset not yet copied to the remote tier; -1 without a remote tier, or when segments were uploaded
    but the broker does not know how far."""
    if not partition_log.tiered:
        return -1
    highest = partition_log.highest_offset_in_remote_storage
    if highest >= 0:
        return max(highest + 1, partition_log.log_start_offset)
    if partition_log.local_log_start_offset == partition_log.log_start_offset:
        return partition_log.log_start_offset  # nothing uploaded yet: everything is pending
    return -1

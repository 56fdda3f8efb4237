"""The share-group APIs (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and
ShareAcknowledge, over ``groups.share``, with Kafka's authorization: READ on the group for the
heartbeat, fetch and acknowledgement (READ on each topic fetched or acknowledged, DESCRIBE on each topic
subscribed), DESCRIBE on the group to describe it.

ShareFetch runs as Kafka's ``SharePartitionManager`` and ``DelayedShareFetch`` run it: the piggybacked
acknowledgements first, then, unless the session ends or the request only renews locks, acquisition
from the session's partitions in order. A fetch waits up to MaxWaitMs until the bytes its partitions
could hand out reach MinBytes (an append, a release or an expired lock wakes it); then each partition
is read from its fetch offset under what is left of MaxBytes (the first partition with data may exceed
it by one batch, as KIP-74 has it) and acquires up to what is left of MaxRecords, in ranges of at most
BatchSize records. The response carries the log batches holding the acquired records; the client
delivers only the acquired offsets.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from dataclasses import dataclass, field

from ... import messages as m
from ...error_codes import ErrorCode
from ..fetch.reads import DelayedFetch, PartitionRead
from ..fetch.sessions import SessionPartition
from ..groups.share import ShareGroups, SharePartitions, ShareSessions, ShareSettings, ShareStateStore
from ..groups.share.membership import ASSIGNOR_NAME, ShareGroup
from ..groups.share.partition import AcquiredRange, SharePartition
from ..groups.share.sessions import FINAL_EPOCH, SessionError
from ..groups.share.store import ShareKey
from ..security.acls import Operation, ResourceType
from ..storage import OffsetInRemoteTier, OffsetOutOfRange, PartitionLog
from .group_describe import assigned_by_id, describe_groups
from .state import BrokerState, RequestContext

__all__ = ["ShareApis"]

log = logging.getLogger(__name__)

_SWEEP_INTERVAL_S = 0.1  # how often session timeouts and acquisition locks are checked
_BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length (the bytes after this field)
_LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23 of a v2 batch
_LOG_OVERHEAD = 12


@dataclass
class _PartitionResult:
    error: int = ErrorCode.NONE
    acknowledge_error: int | None = None
    records: bytes = b""
    acquired: list[AcquiredRange] = field(default_factory=list)


@dataclass
class _Candidate:
    key: ShareKey
    topic: str
    partition: int
    log: PartitionLog
    share: SharePartition


class ShareApis:
    """``shared``: another node's share APIs, whose state this node serves too (an in-process cluster)."""

    def __init__(self, state: BrokerState, shared: ShareApis | None = None):
        self.state = state
        config = state.config
        self.settings = ShareSettings(config.group_share_record_lock_duration_ms,
                                      config.group_share_delivery_count_limit,
                                      config.group_share_partition_max_record_locks,
                                      config.share_auto_offset_reset)
        self._sweeper: asyncio.Task | None = None
        self.groups: ShareGroups
        self.sessions: ShareSessions
        self.partitions: SharePartitions
        if shared is not None:
            self.groups, self.sessions, self.partitions = shared.groups, shared.sessions, shared.partitions
            return
        self.partitions = SharePartitions(ShareStateStore(config.data_dir), self.settings, time.monotonic)
        self.partitions.load()
        self.sessions = ShareSessions(config.group_share_max_share_sessions)
        self.groups = ShareGroups(self._topic_metadata, session_timeout_ms=config.group_share_session_timeout_ms,
                                  heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
                                  clock=time.monotonic, other_group=self.is_other_group)
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self.partitions.close()

    # ---- housekeeping -------------------------------------------------------------------------------
    def _topic_metadata(self) -> dict[str, tuple[object, int]]:
        return {name: (topic.topic_id, len(topic.partitions)) for name, topic in self.state.topics.topics.items()
                if topic.partitions}

    def is_other_group(self, group_id: str) -> bool:
        """Whether the id is a classic or consumer group's."""
        return self.state.groups.group_state(group_id) != "Dead"

    def _member_left(self, group_id: str, member_id: str) -> None:
        """A member's share session ended (its final request, its session timeout, or idle after it left
        the group): what it holds goes to the others."""
        self.sessions.close(group_id, member_id)
        self._wake(self.partitions.release_member(group_id, member_id))

    def _wake(self, keys: list[ShareKey]) -> None:
        """Records became available in these share partitions: wake the fetches waiting on them."""
        for _, topic_id, partition in keys:
            name = self.state.topic_name(topic_id)
            if name is not None:
                self.state.purgatory.notify(name, partition)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(_SWEEP_INTERVAL_S)
            try:
                for group_id, member_id in self.groups.expire():
                    self._member_left(group_id, member_id)
                # a member that left without closing its session (a leave heartbeat is answered before
                # the final acknowledgement, which may come on another connection) keeps it a while
                idle = time.monotonic() - self.groups.session_timeout_ms / 1000
                for group_id, member_id in self.sessions.idle_since(idle):
                    if not self.groups.is_member(group_id, member_id):
                        self._member_left(group_id, member_id)
                self._wake(self.partitions.expire())
            except Exception:  # never let the sweep die
                log.exception("share group housekeeping failed")

    # ---- ShareGroupHeartbeat / ShareGroupDescribe -----------------------------------------------------
    async def heartbeat(self, request, version: int, context: RequestContext):
        Response = m.ShareGroupHeartbeatResponse
        if not self.state.allowed(context, Operation.READ, ResourceType.GROUP, request.group_id):
            return Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        result = self.groups.heartbeat(
            request, context.client_id, context.client_host,
            lambda topic: self.state.allowed(context, Operation.DESCRIBE, ResourceType.TOPIC, topic))
        assignment = None
        if result.assignment is not None:
            assignment = Response.Assignment(topic_partitions=[
                Response.TopicPartitions(topic_id=topic_id, partitions=partitions)
                for topic_id, _, partitions in assigned_by_id(self.state, result.assignment)])
        return Response(error_code=result.error, error_message=result.message, member_id=result.member_id,
                        member_epoch=result.member_epoch, heartbeat_interval_ms=self.groups.heartbeat_interval_ms,
                        assignment=assignment)

    async def describe(self, request, version: int, context: RequestContext):
        Response = m.ShareGroupDescribeResponse

        def failed(group_id: str, error: int, message: str | None, operations: int):
            return Response.DescribedGroup(error_code=error, error_message=message, group_id=group_id,
                                           group_state="Dead", authorized_operations=operations)
        return Response(groups=describe_groups(self.state, context, request.group_ids,
                                               request.include_authorized_operations, "share", self.groups.groups,
                                               self._described, failed))

    def _described(self, group: ShareGroup, operations: int):
        Response = m.ShareGroupDescribeResponse
        members = [Response.Member(
            member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.member_epoch,
            client_id=member.client_id, client_host=member.client_host,
            subscribed_topic_names=list(member.subscribed),
            assignment=Response.Assignment(topic_partitions=[
                Response.TopicPartitions(topic_id=topic_id, topic_name=name, partitions=partitions)
                for topic_id, name, partitions in assigned_by_id(self.state, member.assigned)]))
            for member in group.members.values()]
        return Response.DescribedGroup(error_code=ErrorCode.NONE, group_id=group.group_id, group_state=group.state,
                                       group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                                       assignor_name=ASSIGNOR_NAME, members=members,
                                       authorized_operations=operations)

    def listed(self, request, version: int) -> list:
        """ListGroups' entries for the share groups (type and protocol type "share"), as filtered."""
        states = {state.lower() for state in request.states_filter} if version >= 4 else set()
        types = {kind.lower() for kind in request.types_filter} if version >= 5 else set()
        if types and "share" not in types:
            return []
        return [m.ListGroupsResponse.ListedGroup(group_id=group.group_id, protocol_type="share",
                                                 group_state=group.state, group_type="share")
                for group in self.groups.groups.values() if not states or group.state.lower() in states]

    # ---- ShareAcknowledge ---------------------------------------------------------------------------
    async def share_acknowledge(self, request, version: int, context: RequestContext):
        Response = m.ShareAcknowledgeResponse
        lock_ms = self.settings.record_lock_duration_ms
        error = self._request_error(request, context)
        if error is None:
            try:
                self.sessions.acknowledge_context(request.group_id, request.member_id, request.share_session_epoch)
            except SessionError as refused:
                error = refused.code
        if error is not None:
            return Response(error_code=error, acquisition_lock_timeout_ms=lock_ms)
        results: dict[tuple[uuid.UUID, int], _PartitionResult] = {}
        renew = version >= 2 and request.is_renew_ack
        for topic in request.topics:
            for partition in topic.partitions:
                key = (topic.topic_id, partition.partition_index)
                code = self._acknowledge(context, request.group_id, request.member_id, key,
                                         partition.acknowledgement_batches, renew)
                results[key] = _PartitionResult(error=code)
        if request.share_session_epoch == FINAL_EPOCH:
            self._member_left(request.group_id, request.member_id)
        return Response(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms, responses=[
            Response.ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=[
                Response.PartitionData(partition_index=p, error_code=result.error) for p, result in partitions])
            for topic_id, partitions in _by_topic(results)])

    def _request_error(self, request, context: RequestContext) -> int | None:
        if not request.group_id:
            return ErrorCode.INVALID_GROUP_ID
        if not self.state.allowed(context, Operation.READ, ResourceType.GROUP, request.group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        if not request.member_id:
            return ErrorCode.INVALID_REQUEST
        return None

    def _acknowledge(self, context: RequestContext, group_id: str, member_id: str, key: tuple[uuid.UUID, int],
                     batches, renew: bool) -> int:
        topic_id, partition = key
        name = self.state.topic_name(topic_id)
        if name is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        if not self.state.allowed(context, Operation.READ, ResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if self.state.topics.log(name, partition) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        share_key = (group_id, topic_id, partition)
        code = self.partitions.acknowledge(share_key, member_id, [
            (b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches], renew)
        if code == ErrorCode.NONE:
            self._wake([share_key])  # released records may be fetched by others now
        return code

    # ---- ShareFetch ---------------------------------------------------------------------------------
    async def share_fetch(self, request, version: int, context: RequestContext):
        Response = m.ShareFetchResponse
        lock_ms = self.settings.record_lock_duration_ms
        error = self._request_error(request, context)
        if error is not None:
            return Response(error_code=error, acquisition_lock_timeout_ms=lock_ms)
        group_id, member_id = request.group_id, request.member_id
        requested: list[tuple[uuid.UUID, int]] = []
        acknowledgements = {}
        for topic in request.topics:
            for partition in topic.partitions:
                key = (topic.topic_id, partition.partition_index)
                requested.append(key)
                if partition.acknowledgement_batches:
                    acknowledgements[key] = partition.acknowledgement_batches
        forgotten = [(topic.topic_id, p) for topic in request.forgotten_topics_data for p in topic.partitions]
        try:
            session = self.sessions.fetch_context(group_id, member_id, request.share_session_epoch, requested,
                                                  forgotten, bool(acknowledgements))
        except SessionError as refused:
            return Response(error_code=refused.code, acquisition_lock_timeout_ms=lock_ms)
        renew = version >= 2 and request.is_renew_ack
        results: dict[tuple[uuid.UUID, int], _PartitionResult] = {}
        for key, batches in acknowledgements.items():
            results[key] = _PartitionResult(acknowledge_error=self._acknowledge(
                context, group_id, member_id, key, batches, renew))
        if session is None:
            self._member_left(group_id, member_id)  # the final fetch: acknowledgements only
        elif not renew:
            full = request.share_session_epoch == 0
            candidates = self._candidates(context, group_id, list(session.partitions), results, full)
            await self._fetch(request, member_id, candidates, results)
        return Response(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms, responses=[
            Response.ShareFetchableTopicResponse(topic_id=topic_id, partitions=[
                Response.PartitionData(
                    partition_index=p, error_code=result.error,
                    acknowledge_error_code=result.acknowledge_error or ErrorCode.NONE,
                    current_leader=Response.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                    records=result.records,
                    acquired_records=[Response.AcquiredRecords(first_offset=r.first_offset, last_offset=r.last_offset,
                                                               delivery_count=r.delivery_count) for r in result.acquired])
                for p, result in partitions])
            for topic_id, partitions in _by_topic(results)])

    def _candidates(self, context: RequestContext, group_id: str, partitions: list[tuple[uuid.UUID, int]],
                    results: dict, full: bool) -> list[_Candidate]:
        """The session's partitions that can be fetched; the others get their error (all of them are
        answered in a full fetch, as Kafka answers every partition of a new session)."""
        candidates = []
        for topic_id, partition in partitions:
            name = self.state.topic_name(topic_id)
            partition_log = self.state.topics.log(name, partition) if name is not None else None
            error = ErrorCode.NONE
            if name is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
            elif not self.state.allowed(context, Operation.READ, ResourceType.TOPIC, name):
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition_log is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if error or full:
                results.setdefault((topic_id, partition), _PartitionResult()).error = error
            if error:
                continue
            assert name is not None and partition_log is not None
            key = (group_id, topic_id, partition)
            share = self.partitions.get(key, partition_log.log_start_offset, partition_log.high_watermark)
            candidates.append(_Candidate(key, name, partition, partition_log, share))
        return candidates

    async def _fetch(self, request, member_id: str, candidates: list[_Candidate], results: dict) -> None:
        max_bytes = min(max(request.max_bytes, 0), self.state.config.fetch_max_bytes)
        min_bytes = max(request.min_bytes, 1)  # waiting is for something to acquire
        if request.max_wait_ms > 0 and candidates and _acquirable_bytes(candidates, max_bytes) < min_bytes:
            await self.state.purgatory.park(_DelayedShareFetch(candidates, min_bytes, max_bytes),
                                            request.max_wait_ms / 1000)
        records_left = request.max_records if request.max_records > 0 else 1
        batch_size = request.batch_size if request.batch_size > 0 else records_left
        mode = request.share_acquire_mode  # 0 (batch optimized) before v2
        bytes_left, min_one_message = max_bytes, True
        for candidate in candidates:
            if records_left <= 0:
                break
            share, partition_log = candidate.share, candidate.log
            offset = share.fetch_offset()
            if offset >= partition_log.high_watermark or (offset == share.end_offset and not share.can_acquire_new()):
                continue
            try:
                read = partition_log.read(offset, bytes_left, min_one_message)
            except OffsetInRemoteTier:
                continue  # share fetches are served from the local log only
            except OffsetOutOfRange:
                self.partitions.move_start(candidate.key, share, partition_log.log_start_offset)
                continue
            assert isinstance(read.records, bytes)  # read without as_file
            data = b"" if read.first_entry_incomplete else read.records
            batches = _batches(data)
            error, acquired = self.partitions.acquire(candidate.key, share, member_id,
                                                      [(base, last) for base, last, _, _ in batches],
                                                      records_left, batch_size, mode)
            if not acquired and not error:
                continue
            result = results.setdefault((candidate.key[1], candidate.partition), _PartitionResult())
            result.error = error or result.error
            if not acquired:
                continue
            result.records = _covering(data, batches, acquired)
            result.acquired = acquired
            records_left -= sum(r.last_offset - r.first_offset + 1 for r in acquired)
            bytes_left = max(0, bytes_left - len(result.records))
            min_one_message = False


class _DelayedShareFetch(DelayedFetch):
    """A share fetch waiting until the records its partitions could hand out reach MinBytes."""

    def __init__(self, candidates: list[_Candidate], min_bytes: int, max_bytes: int):
        reads = [PartitionRead(SessionPartition((c.topic, c.partition), c.share.fetch_offset(), max_bytes),
                               c.topic, c.partition, c.log) for c in candidates]
        super().__init__(reads, min_bytes)
        self.candidates = candidates
        self.max_bytes = max_bytes

    def try_complete(self) -> bool:
        if not self.done.done() and _acquirable_bytes(self.candidates, self.max_bytes) >= self.min_bytes:
            self.done.set_result(True)
        return self.done.done()


def _acquirable_bytes(candidates: list[_Candidate], max_bytes: int) -> int:
    """The log bytes from each partition's fetch offset, for partitions that could acquire now."""
    total = 0
    for c in candidates:
        offset = c.share.fetch_offset()
        if offset == c.share.end_offset and not c.share.can_acquire_new():
            continue
        try:
            total += c.log.bytes_available(offset, max_bytes)
        except OffsetOutOfRange:
            total += 1  # the share partition must move: answer now
    return total


def _batches(data: bytes) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, start, end) of each whole batch in ``data`` (a partial last one dropped)."""
    batches = []
    position = 0
    while position + _LOG_OVERHEAD + 15 <= len(data):
        base, length = _BATCH_HEADER.unpack_from(data, position)
        end = position + _LOG_OVERHEAD + length
        if end > len(data):
            break
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(data, position + 23)
        batches.append((base, base + delta, position, end))
        position = end
    return batches


def _covering(data: bytes, batches: list[tuple[int, int, int, int]], acquired: list[AcquiredRange]) -> bytes:
    """The run of batches from the one holding the first acquired offset to the one holding the last."""
    first, last = acquired[0].first_offset, acquired[-1].last_offset
    spans = [(start, end) for base, last_offset, start, end in batches if last_offset >= first and base <= last]
    return data[spans[0][0]:spans[-1][1]] if spans else b""


def _by_topic(results: dict[tuple[uuid.UUID, int], _PartitionResult]):
    topics: dict[uuid.UUID, list[tuple[int, _PartitionResult]]] = {}
    for (topic_id, partition), result in results.items():
        topics.setdefault(topic_id, []).append((partition, result))
    return topics.items()

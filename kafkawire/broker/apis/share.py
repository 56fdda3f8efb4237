"""The share-group APIs (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and
ShareAcknowledge, over ``groups.share``, with Kafka's authorization: READ on the group for the
heartbeat, fetch and acknowledgement (READ on each topic fetched or acknowledged, DESCRIBE on each topic
subscribed), DESCRIBE on the group to describe it.

ShareFetch runs as Kafka's ``SharePartitionManager`` and ``DelayedShareFetch`` run it: the piggybacked
acknowledgements first, then, unless the session ends or the request only renews locks, acquisition
from the session's partitions in order. A fetch waits up to MaxWaitMs until the bytes its partitions
could hand out reach MinBytes (an append, a release or an expired lock wakes it); then each partition
is read from its fetch offset under what is left of MaxBytes (the first partition with data may exceed
it by one batch, as KIP-74 has it), no further than the batch holding the last record it could acquire,
and acquires up to what is left of MaxRecords, in ranges of at most
BatchSize records. The response carries the log batches holding the acquired records; the client
delivers only the acquired offsets.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from ... import messages as m
from ...codec.base import Bytes
from ...error_codes import ErrorCode
from ...records.layouts import BATCH_HEADER_FORMAT, BATCH_HEADER_SIZE, LOG_OVERHEAD
from ..fetch.reads import DelayedFetch, PartitionRead
from ..metrics import BrokerMetrics
from ..fetch.sessions import SessionPartition
from ..groups.group_configs import GroupConfigs
from ..groups.share import ShareGroups, SharePartitions, ShareSessions, ShareSettings, ShareStateStore
from ..groups.share.membership import ASSIGNOR_NAME, ShareGroup
from ..groups.share.partition import AcknowledgeType, AcquiredRange, SharePartition
from ..groups.share.sessions import FINAL_EPOCH, SessionError
from ..groups.share.store import ShareKey
from ...acl_types import AclOperation as Operation, ResourceType
from ..storage.errors import OffsetInRemoteTier, OffsetOutOfRange
from ..storage.file_records import FileRecords
from ..storage.log import PartitionLog
from ..storage.log_reads import LogRead
from ..storage.segment import iter_batch_headers
from .group_describe import assigned_by_id, describe_groups
from .state import BrokerState, RequestContext

__all__ = ["ShareApis"]

log = logging.getLogger(__name__)

_SWEEP_INTERVAL_S = 0.1  # how often session timeouts and acquisition locks are checked
_NO_LEADER = (-1, -1)
_SETTINGS_KEPT = 10_000  # groups whose share settings are kept at once
_TRANSACTIONAL, _CONTROL = 0x10, 0x20
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # the Length field of an empty batch
_HEADER_CHUNK = 4096  # bytes read at a time for the batch headers of a file slice (big batches: one read each)


class _Batch(NamedTuple):
    """A whole log batch of a read: its offsets, where it lies in the read, and what read_committed needs."""
    base: int
    last: int
    start: int
    end: int
    attributes: int
    producer_id: int


@dataclass
class _PartitionResult:
    error: int = ErrorCode.NONE
    acknowledge_error: int | None = None
    records: bytes | FileRecords = b""  # a slice of the log (sent with sendfile), or remote bytes
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

    def __init__(self, state: BrokerState, shared: ShareApis | None = None, metrics: BrokerMetrics | None = None):
        self.state = state
        self.metrics = metrics
        config = state.config
        # the groups' own configs (GROUP resources), else the broker's settings
        self.configs = state.groups.configs if state.groups.configs is not None else GroupConfigs(config)
        self._sweeper: asyncio.Task | None = None
        self._settings: dict[str, tuple[dict[str, str] | None, ShareSettings]] = {}
        self.groups: ShareGroups
        self.sessions: ShareSessions
        self.partitions: SharePartitions
        if shared is not None:
            self.groups, self.sessions, self.partitions = shared.groups, shared.sessions, shared.partitions
            return
        self.partitions = SharePartitions(ShareStateStore(config.data_dir), self.settings, time.monotonic)
        self.partitions.load()
        self.sessions = ShareSessions(config.group_share_max_share_sessions)
        value = self.configs.value
        self.groups = ShareGroups(self._topic_metadata,
                                  session_timeout_ms=lambda group_id: value(group_id, "share.session.timeout.ms"),
                                  heartbeat_interval_ms=lambda group_id: value(group_id, "share.heartbeat.interval.ms"),
                                  clock=time.monotonic, other_group=self.is_other_group)
        for group_id in self.partitions.group_ids():  # a share group with durable state exists, empty
            self.groups.create(group_id)
        state.groups.share_group = lambda group_id: group_id in self.groups.groups
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self.partitions.close()

    def settings(self, group_id: str) -> ShareSettings:
        """The group's share settings: its group configs, else the broker's. Read several times a fetch,
        they are kept while the group's overrides are the same object (``GroupConfigs`` replaces a
        group's entry when it changes, and the broker's settings are fixed at start)."""
        overrides = self.configs.overrides.get(group_id)
        known = self._settings.get(group_id)
        if known is not None and known[0] is overrides:
            return known[1]
        value = self.configs.value
        settings = ShareSettings(value(group_id, "share.record.lock.duration.ms"),
                             value(group_id, "share.delivery.count.limit"),
                             value(group_id, "share.partition.max.record.locks"),
                             value(group_id, "share.auto.offset.reset"),
                             value(group_id, "share.isolation.level"),
                             value(group_id, "share.renew.acknowledge.enable"))
        if len(self._settings) >= _SETTINGS_KEPT:
            self._settings.clear()  # ids of groups long gone must not pile up
        self._settings[group_id] = (overrides, settings)
        return settings

    # ---- housekeeping -------------------------------------------------------------------------------
    def _topic_metadata(self) -> dict[str, tuple[object, int]]:
        return {name: (topic.topic_id, len(topic.partitions)) for name, topic in self.state.topics.topics.items()
                if topic.partitions}

    def is_other_group(self, group_id: str) -> bool:
        """Whether the id is a classic or consumer group's."""
        return self.state.groups.group_state(group_id) != "Dead"

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members; else its share state goes
        (written first), then the group."""
        group = self.groups.groups.get(group_id)
        if group is not None and group.members:
            return ErrorCode.NON_EMPTY_GROUP
        if not all([self.partitions.delete(key) for key in self.partitions.initialized(group_id)]):
            return ErrorCode.KAFKA_STORAGE_ERROR
        self.groups.groups.pop(group_id, None)
        for key in [key for key in self.sessions.sessions if key[0] == group_id]:
            self.sessions.close(*key)
        return ErrorCode.NONE

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
                now = time.monotonic()
                for group_id, member_id in self.sessions.idle_since(
                        lambda group_id: now - self.groups.session_timeout_ms(group_id) / 1000):
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
                        member_epoch=result.member_epoch,
                        heartbeat_interval_ms=self.groups.heartbeat_interval_ms(request.group_id),
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
        settings = self.settings(request.group_id)
        lock_ms = settings.record_lock_duration_ms
        error = self._request_error(request, context)
        if error is None:
            try:
                self.sessions.acknowledge_context(request.group_id, request.member_id, request.share_session_epoch)
            except SessionError as refused:
                error = refused.code
        if error is not None:
            return Response(error_code=error, acquisition_lock_timeout_ms=lock_ms)
        results: dict[tuple[uuid.UUID, int], _PartitionResult] = {}
        renew = version >= 2 and request.is_renew_ack and settings.renew_enabled  # RENEW accepted
        for topic in request.topics:
            for partition in topic.partitions:
                key = (topic.topic_id, partition.partition_index)
                code = self._acknowledge(context, request.group_id, request.member_id, key,
                                         partition.acknowledgement_batches, renew)
                results[key] = _PartitionResult(error=code)
        if request.share_session_epoch == FINAL_EPOCH:
            self._member_left(request.group_id, request.member_id)
        leaders = self._leaders(results)
        return Response(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms, responses=[
            Response.ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=[
                Response.PartitionData(partition_index=p, error_code=result.error,
                                       current_leader=_leader(Response, leaders, topic_id, p))
                for p, result in partitions])
            for topic_id, partitions in _by_topic(results)],
            node_endpoints=self._endpoints(Response.NodeEndpoint, leaders, context) if version >= 1 else [])

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
        if not self.state.view.leads_everything:  # acknowledged at the partition's leader
            code = self.state.view.leader_error(name, partition)
            if code:
                return code
        share_key = (group_id, topic_id, partition)
        code = self.partitions.acknowledge(share_key, member_id, [
            (b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches], renew)
        if code == ErrorCode.NONE:
            self._wake([share_key])  # released records may be fetched by others now
            if self.metrics is not None:
                _count_acknowledgements(self.metrics, batches)
        return code

    # ---- ShareFetch ---------------------------------------------------------------------------------
    async def share_fetch(self, request, version: int, context: RequestContext):
        Response = m.ShareFetchResponse
        settings = self.settings(request.group_id)
        lock_ms = settings.record_lock_duration_ms
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
        renew_only = version >= 2 and request.is_renew_ack
        results: dict[tuple[uuid.UUID, int], _PartitionResult] = {}
        for key, batches in acknowledgements.items():
            results[key] = _PartitionResult(acknowledge_error=self._acknowledge(
                context, group_id, member_id, key, batches, renew_only and settings.renew_enabled))
        if session is None:
            self._member_left(group_id, member_id)  # the final fetch: acknowledgements only
        elif not renew_only:
            full = request.share_session_epoch == 0
            candidates = self._candidates(context, group_id, list(session.partitions), results, full)
            await self._fetch(request, member_id, candidates, results, settings.isolation_level == "read_committed")
        leaders = self._leaders(results)
        return Response(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms, responses=[
            Response.ShareFetchableTopicResponse(topic_id=topic_id, partitions=[
                Response.PartitionData(
                    partition_index=p, error_code=result.error,
                    acknowledge_error_code=result.acknowledge_error or ErrorCode.NONE,
                    current_leader=_leader(Response, leaders, topic_id, p),
                    records=cast(Bytes, result.records),  # a FileRecords slice: encode_parts takes its len()
                    acquired_records=[Response.AcquiredRecords(first_offset=r.first_offset, last_offset=r.last_offset,
                                                               delivery_count=r.delivery_count) for r in result.acquired])
                for p, result in partitions])
            for topic_id, partitions in _by_topic(results)],
            node_endpoints=self._endpoints(Response.NodeEndpoint, leaders, context) if version >= 1 else [])

    def _leaders(self, results: dict[tuple[uuid.UUID, int], _PartitionResult]) -> dict:
        """(topic id, partition) -> (leader, leader epoch) of the partitions answered NOT_LEADER_OR_FOLLOWER
        (KIP-951's leader discovery, as Kafka's share fetch gives it)."""
        leaders = {}
        for (topic_id, partition), result in results.items():
            if ErrorCode.NOT_LEADER_OR_FOLLOWER in (result.error, result.acknowledge_error):
                name = self.state.topic_name(topic_id)
                if name is not None:
                    info = self.state.view.partition(name, partition)
                    leaders[(topic_id, partition)] = (info.leader, info.leader_epoch)
        return leaders

    def _endpoints(self, Endpoint, leaders: dict, context: RequestContext) -> list:
        """The listener's addresses of the leaders named in ``leaders``."""
        if not leaders:
            return []
        wanted = {leader for leader, _ in leaders.values()}
        return [Endpoint(node_id=node.node_id, host=node.host, port=node.port)
                for node in self.state.view.brokers(context.listener.name, context.advertised)
                if node.node_id in wanted]

    def _candidates(self, context: RequestContext, group_id: str, partitions: list[tuple[uuid.UUID, int]],
                    results: dict, full: bool) -> list[_Candidate]:
        """The session's partitions that can be fetched; the others get their error (all of them are
        answered in a full fetch, as Kafka answers every partition of a new session)."""
        candidates = []
        for topic_id, partition in partitions:
            name = self.state.topic_name(topic_id)
            partition_log = self.state.topics.log(name, partition) if name is not None else None
            error: int = ErrorCode.NONE
            if name is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
            elif not self.state.allowed(context, Operation.READ, ResourceType.TOPIC, name):
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition_log is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not self.state.view.leads_everything:  # fetched from the partition's leader
                error = self.state.view.leader_error(name, partition)
            if error or full:
                results.setdefault((topic_id, partition), _PartitionResult()).error = error
            if error:
                continue
            assert name is not None and partition_log is not None
            key = (group_id, topic_id, partition)
            share = self.partitions.get(key, _bounds(partition_log))
            candidates.append(_Candidate(key, name, partition, partition_log, share))
        return candidates

    async def _fetch(self, request, member_id: str, candidates: list[_Candidate], results: dict,
                     read_committed: bool) -> None:
        max_bytes = min(max(request.max_bytes, 0), self.state.config.fetch_max_bytes)
        min_bytes = max(request.min_bytes, 1)  # waiting is for something to acquire
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.max_wait_ms / 1000
        while True:
            woken = False
            if (request.max_wait_ms > 0 and candidates
                    and _acquirable_bytes(candidates, max_bytes, read_committed, min_bytes) < min_bytes):
                woken = await self.state.purgatory.park(
                    _DelayedShareFetch(candidates, min_bytes, max_bytes, read_committed), deadline - loop.time())
            answered = await self._acquire(request, member_id, candidates, results, read_committed, max_bytes)
            # Woken with others, this fetch may find what woke it taken by one of them: as Kafka's
            # DelayedShareFetch, which acquires before it completes, it waits on until MaxWaitMs
            if answered or not woken or loop.time() >= deadline:
                return

    async def _acquire(self, request, member_id: str, candidates: list[_Candidate], results: dict,
                       read_committed: bool, max_bytes: int) -> bool:
        """Acquire from the candidates into ``results``; whether any records or an error came of it."""
        answered = False
        records_left = request.max_records if request.max_records > 0 else 1
        batch_size = request.batch_size if request.batch_size > 0 else records_left
        mode = request.share_acquire_mode  # 0 (batch optimized) before v2
        bytes_left, min_one_message = max_bytes, True
        for candidate in candidates:
            if records_left <= 0:
                break
            share, partition_log = candidate.share, candidate.log
            offset = share.fetch_offset()
            if offset >= _end(partition_log, read_committed) or (
                    offset == share.end_offset and not share.can_acquire_new()):
                continue
            try:
                read = await self._read(partition_log, offset, bytes_left, min_one_message, read_committed,
                                        share.acquirable_through(records_left))
            except OffsetOutOfRange:
                self.partitions.move_start(candidate.key, share, partition_log.log_start_offset)
                continue
            if read is None:
                continue
            data = read.records
            try:
                batches = [] if read.first_entry_incomplete else _batches(data)
                # read_committed: the records of aborted transactions are archived, never handed out
                aborted = _aborted_ranges(batches, read.aborted or []) if read_committed else []
                error, acquired = self.partitions.acquire(candidate.key, share, member_id,
                                                          [(batch.base, batch.last) for batch in batches],
                                                          records_left, batch_size, mode, aborted)
                if not acquired and not error:
                    continue
                result = results.setdefault((candidate.key[1], candidate.partition), _PartitionResult())
                result.error = error or result.error
                answered = True
                if not acquired:
                    continue
                result.records = _covering(data, batches, acquired)
                result.acquired = acquired
            finally:
                if isinstance(data, FileRecords):
                    data.close()  # the response holds its own slice of it
            records_left -= sum(r.last_offset - r.first_offset + 1 for r in acquired)
            bytes_left = max(0, bytes_left - len(result.records))
            min_one_message = False
        return answered


    async def _read(self, partition_log: PartitionLog, offset: int, max_bytes: int, min_one_message: bool,
                    read_committed: bool, through_offset: int) -> LogRead | None:
        """The log from ``offset`` through the batch holding ``through_offset`` (no further than what can
        be acquired, as Kafka's share fetch slices its read): a slice of the local log (sent as the
        classic fetch sends it, with sendfile), or bytes from the remote tier as a consumer
        fetch reads it (on a worker thread, at most remote.fetch.max.wait.ms; None past it). Raises
        OffsetOutOfRange."""
        bound = partition_log.last_stable_offset if read_committed else None
        try:
            read = partition_log.read(offset, max_bytes, min_one_message, bound, as_file=True,
                                      through_offset=through_offset)
        except OffsetInRemoteTier:
            pass
        else:
            start = read.fetch_offset_metadata
            if read_committed and read.records and start is not None:
                read.aborted = partition_log.aborted_transactions(offset, start.relative_position, len(read.records),
                                                                  start.segment_base_offset)
            return read

        def remote_read() -> LogRead:
            result = partition_log.read_remote(offset, max_bytes, min_one_message)
            if read_committed and result.records:  # the remote tier lies below the last stable offset
                upper = partition_log.offset_after_remote_segment(offset)
                result.aborted = partition_log.aborted_transactions_from_remote(offset, upper)
            return result

        task = asyncio.ensure_future(asyncio.to_thread(remote_read))
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.state.config.remote_fetch_max_wait_ms / 1000)
        except TimeoutError:
            log.info("remote read of %s at %d took longer than remote.fetch.max.wait.ms", partition_log.name, offset)
            return None


class _DelayedShareFetch(DelayedFetch):
    """A share fetch waiting until the records its partitions could hand out reach MinBytes."""

    def __init__(self, candidates: list[_Candidate], min_bytes: int, max_bytes: int, read_committed: bool):
        reads = [PartitionRead(SessionPartition((c.topic, c.partition), c.share.fetch_offset(), max_bytes),
                               c.topic, c.partition, c.log) for c in candidates]
        super().__init__(reads, min_bytes, read_committed)
        self.candidates = candidates
        self.max_bytes = max_bytes

    def try_complete(self) -> bool:
        if not self.done.done() and _acquirable_bytes(self.candidates, self.max_bytes, self.read_committed,
                                                      self.min_bytes) >= self.min_bytes:
            self.done.set_result(True)
        return self.done.done()


def _end(partition_log: PartitionLog, read_committed: bool) -> int:
    """Where share fetches stop: the high watermark, or the last stable offset for read_committed."""
    return partition_log.last_stable_offset if read_committed else partition_log.high_watermark


def _acquirable_bytes(candidates: list[_Candidate], max_bytes: int, read_committed: bool, enough: int) -> int:
    """The log bytes from each partition's fetch offset, for partitions that could acquire now (counted
    until they reach ``enough``)."""
    total = 0
    for c in candidates:
        if total >= enough:
            break
        offset = c.share.fetch_offset()
        if offset == c.share.end_offset and not c.share.can_acquire_new():
            continue
        if enough - total == 1 and max_bytes > 0 and offset < _end(c.log, read_committed):
            total += 1  # a record to read (a batch, more than one byte): no need to find where it lies
            continue
        try:
            total += c.log.bytes_available(offset, max_bytes, c.log.last_stable_offset if read_committed else None)
        except OffsetInRemoteTier:
            total += 1 if offset < _end(c.log, read_committed) else 0  # read from the remote tier: answer now
        except OffsetOutOfRange:
            total += 1  # the share partition must move: answer now
    return total


def _aborted_ranges(batches: list[_Batch], aborted: list) -> list[tuple[int, int]]:
    """The offsets of the batches of aborted transactions in ``data``, as a read_committed consumer finds
    them: a producer's transactional batches from its aborted transaction's first offset up to its abort
    marker (``aborted``: the AbortedTxn entries overlapping the read)."""
    pending = sorted(aborted, key=lambda txn: txn.first_offset)
    aborting: set[int] = set()
    ranges = []
    for base, last, _, _, attributes, producer_id in batches:
        while pending and pending[0].first_offset <= last:
            aborting.add(pending.pop(0).producer_id)
        if attributes & _CONTROL:
            aborting.discard(producer_id)  # the abort marker closes the transaction
        elif attributes & _TRANSACTIONAL and producer_id in aborting:
            ranges.append((base, last))
    return ranges


def _bounds(partition_log: PartitionLog):
    """Where a new share partition of this log may start: its start, its end, or at a time."""
    def offset_at(timestamp_ms: int) -> int | None:
        found = partition_log.offset_for_timestamp(timestamp_ms)
        return None if found is None else found.offset
    return partition_log.log_start_offset, partition_log.high_watermark, offset_at


def _batches(data: bytes | FileRecords) -> list[_Batch]:
    """The whole batches of a read (a partial last one dropped): of a file slice, from their headers alone."""
    if isinstance(data, FileRecords):
        origin = data.position
        return [_Batch(info.base_offset, info.last_offset, info.position - origin, info.position - origin + info.size,
                       info.attributes, info.producer_id)
                for info in iter_batch_headers(data.fileno(), origin, origin + len(data), _HEADER_CHUNK)]
    batches = []
    position = 0
    while position + BATCH_HEADER_SIZE <= len(data):
        fields = BATCH_HEADER_FORMAT.unpack_from(data, position)
        length = fields[1]
        end = position + LOG_OVERHEAD + length
        if length < _MIN_BATCH_LENGTH or end > len(data):
            break
        base = fields[0]
        batches.append(_Batch(base, base + fields[6], position, end, fields[5], fields[9]))
        position = end
    return batches


def _covering(data: bytes | FileRecords, batches: list[_Batch],
              acquired: list[AcquiredRange]) -> bytes | FileRecords:
    """The run of batches from the one holding the first acquired offset to the one holding the last."""
    first, last = acquired[0].first_offset, acquired[-1].last_offset
    spans = [(batch.start, batch.end) for batch in batches if batch.last >= first and batch.base <= last]
    if not spans:
        return b""
    if isinstance(data, FileRecords):
        return data.slice(spans[0][0], spans[-1][1])
    return data[spans[0][0]:spans[-1][1]]


_ACK_TYPE_NAMES = {AcknowledgeType.ACCEPT: "Accept", AcknowledgeType.RELEASE: "Release",
                   AcknowledgeType.REJECT: "Reject", AcknowledgeType.RENEW: "Renew"}  # Kafka's ackType tags


def _count_acknowledgements(metrics: BrokerMetrics, batches) -> None:
    """Records acknowledged, by type (gaps are not acknowledgements of records)."""
    for batch in batches:
        types = list(batch.acknowledge_types)
        counts = ([(types[0], batch.last_offset - batch.first_offset + 1)] if len(types) == 1
                  else [(kind, 1) for kind in types])
        for kind, count in counts:
            name = _ACK_TYPE_NAMES.get(kind)
            if name is not None:
                metrics.share_acknowledgements.labels(name).inc(count)


def _leader(Response, leaders: dict, topic_id: uuid.UUID, partition: int):
    leader, epoch = leaders.get((topic_id, partition), _NO_LEADER)
    return Response.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)


def _by_topic(results: dict[tuple[uuid.UUID, int], _PartitionResult]):
    topics: dict[uuid.UUID, list[tuple[int, _PartitionResult]]] = {}
    for (topic_id, partition), result in results.items():
        topics.setdefault(topic_id, []).append((partition, result))
    return topics.items()

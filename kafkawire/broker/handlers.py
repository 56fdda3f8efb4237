"""Request handlers: one coroutine per API, each taking the decoded request and its version and
returning the response message (or None when the request expects no response: Produce with acks=0).

Group APIs go to the GroupCoordinator; fetch limits live in ``fetch``; storage in ``storage``.
"""
from __future__ import annotations

import json
import logging
import os
import time
import uuid
from pathlib import Path

from .. import messages as m
from ..codec.primitives import ZERO_UUID
from ..error_codes import ErrorCode
from .config import BrokerConfig
from .fetch import DelayedFetch, FetchPurgatory, PartitionRead, read_partitions
from .error_responses import error_response
from .fetch_encoder import encode_fetch_response
from .groups import GroupCoordinator
from .fetch_sessions import FetchSessionCache, SessionPartition
from .produce import ProduceHandler
from .topics import Topic, TopicError, TopicManager
from .versions import served_versions

__all__ = ["Handlers"]

log = logging.getLogger(__name__)

_NO_OPERATIONS = -(1 << 31)  # authorized operations not computed
_LATEST, _EARLIEST, _MAX_TIMESTAMP, _EARLIEST_LOCAL, _LATEST_TIERED, _EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
_NO_KEY = object()  # matches no topic key
_KIP_1178 = 19  # the Fetch version with RemotePartitionMaxBytes (schemas/kip-1178; v18 is upstream's KIP-1166)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Handlers:
    """The broker's request handlers over its shared state."""

    def __init__(self, config: BrokerConfig, topics: TopicManager, groups: GroupCoordinator, port: int):
        self.config = config
        self.topics = topics
        self.groups = groups
        self.port = port
        self.purgatory = FetchPurgatory()
        self.sessions = FetchSessionCache(config.fetch_session_cache_slots, config.fetch_session_eviction_ms)
        self.producer_ids = _ProducerIdBlock(config.data_dir / "producer_ids.json")
        self.versions = served_versions(upstream=config.upstream_versions)  # API key -> (oldest, newest)
        self.producer = ProduceHandler(topics, self.purgatory.notify, config.produce_max_decompressed_bytes)
        self.table = {
            18: self.api_versions, 3: self.metadata, 0: self.producer.produce, 1: self.fetch, 2: self.list_offsets,
            19: self.create_topics, 20: self.delete_topics, 32: self.describe_configs, 22: self.init_producer_id,
            10: self.find_coordinator, 14: self.groups.sync_group, 12: self.groups.heartbeat,
            13: self.groups.leave_group, 8: self.offset_commit, 9: self.offset_fetch,
            16: self.groups.list_groups, 15: self.groups.describe_groups, 60: self.describe_cluster,
        }

    def close(self) -> None:
        self.producer.close()

    async def handle(self, api_key: int, request, version: int, client_id: str | None, client_host: str):
        """The response to one request (None: no response is sent)."""
        if api_key == 11:  # JoinGroup records who the member is
            return await self.groups.join_group(request, version, client_id or "", client_host)
        return await self.table[api_key](request, version)

    # ---- ApiVersions ----------------------------------------------------------------------------
    async def api_versions(self, request, version: int):
        keys = [m.ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
                for key, (low, high) in sorted(self.versions.items())]
        return m.ApiVersionsResponse(error_code=0, api_keys=keys)

    # ---- Metadata -------------------------------------------------------------------------------
    async def metadata(self, request, version: int):
        broker = m.MetadataResponse.MetadataResponseBroker(node_id=self.config.node_id, host=self.config.advertised,
                                                           port=self.port, rack=None)
        refused = _metadata_topics_refused(request, version)
        if refused is not None:
            return refused
        if request.topics is None or (version == 0 and not request.topics):
            wanted = [(topic.name, None) for topic in self.topics.topics.values()]
        else:
            wanted = [(t.name, t.topic_id if version >= 10 else None) for t in request.topics]
        auto_create = self.config.auto_create_topics and (version < 4 or request.allow_auto_topic_creation)
        created = await self._auto_create([name for name, _ in wanted if name is not None]) if auto_create else {}
        results = []
        for name, topic_id in wanted:
            topic = self.topics.get(name) if name is not None else self.topics.by_id.get(topic_id)
            error = ErrorCode.NONE
            failure = created.get(name) if name is not None else None
            if topic is None and isinstance(failure, TopicError):
                error = failure.code
            if topic is None:
                error = error or (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else ErrorCode.UNKNOWN_TOPIC_ID)
                results.append(m.MetadataResponse.MetadataResponseTopic(
                    error_code=error, name=name, topic_id=topic_id or ZERO_UUID, is_internal=False, partitions=[],
                    topic_authorized_operations=_NO_OPERATIONS))
                continue
            node = self.config.node_id
            partitions = [m.MetadataResponse.MetadataResponsePartition(
                error_code=0, partition_index=index, leader_id=node, leader_epoch=0, replica_nodes=[node],
                isr_nodes=[node], offline_replicas=[]) for index in range(len(topic.partitions))]
            results.append(m.MetadataResponse.MetadataResponseTopic(
                error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal,
                partitions=partitions, topic_authorized_operations=_NO_OPERATIONS))
        return m.MetadataResponse(brokers=[broker], cluster_id=self.config.cluster_id,
                                  controller_id=self.config.node_id, topics=results)

    async def _auto_create(self, names: list[str]) -> dict[str, Topic | TopicError]:
        """Create the named topics that do not exist (auto.create.topics.enable), as one creation."""
        outcomes: dict[str, Topic | TopicError] = {}
        planned = []
        for name in dict.fromkeys(names):
            if self.topics.get(name) is not None:
                continue
            if await self.topics.wait_for_creation(name) is not None:  # another request is creating it
                continue
            try:
                planned.append(self.topics.plan(name))
            except TopicError as failure:
                outcomes[name] = failure
        try:
            self.topics.check_request_size(planned)
        except TopicError as failure:
            return {**outcomes, **{topic.name: failure for topic in planned}}
        for topic, result in zip(planned, await self.topics.create(planned)):
            outcomes[topic.name] = result
        return outcomes

    # ---- Fetch ----------------------------------------------------------------------------------
    async def fetch(self, request, version: int):
        if version >= 3 and request.max_bytes < 0:
            return error_response(1, request, version, ErrorCode.INVALID_REQUEST, "negative MaxBytes")
        max_bytes = min(request.max_bytes if version >= 3 else 0x7FFFFFFF, self.config.fetch_max_bytes)
        min_bytes = min(request.min_bytes, max_bytes)
        use_ids = version >= 13
        requested = []
        for topic in request.topics:
            name = topic.topic if not use_ids else self._topic_name(topic.topic_id)
            for p in topic.partitions:
                key = (name if name is not None else topic.topic_id, p.partition)
                requested.append(SessionPartition(key, p.fetch_offset, p.partition_max_bytes,
                                                  p.remote_partition_max_bytes if version >= _KIP_1178 else None))
        forgotten = []
        if version >= 7:
            for topic in request.forgotten_topics_data:
                name = topic.topic if not use_ids else self._topic_name(topic.topic_id)
                forgotten += [(name if name is not None else topic.topic_id, p) for p in topic.partitions]
        epoch = request.session_epoch if version >= 7 else -1
        context = self.sessions.context(request.session_id if version >= 7 else 0, epoch, requested, forgotten)
        if context.error:
            return m.FetchResponse(error_code=context.error, session_id=0, responses=[])
        known: list[PartitionRead] = []
        unknown: list[PartitionRead] = []
        for partition in context.partitions:
            name = partition.key[0] if isinstance(partition.key[0], str) else None
            read = PartitionRead(partition, name, partition.key[1],
                                 self.topics.log(name, partition.key[1]) if name is not None else None)
            (known if read.log is not None else unknown).append(read)
        reads = known + unknown if unknown else known  # unknown partitions are not read, and go at the end
        use_remote_max_bytes = version >= _KIP_1178
        remote_wait_s = self.config.remote_fetch_max_wait_ms / 1000
        total = await read_partitions(reads, max_bytes, use_remote_max_bytes=use_remote_max_bytes,
                                      remote_wait_s=remote_wait_s)
        # unknown partitions carry an error, so they too answer at once
        must_answer = (request.max_wait_ms <= 0 or not known or total >= min_bytes
                       or any(r.error or r.remote for r in reads))
        if not must_answer:
            await self.purgatory.park(DelayedFetch(known, min_bytes), request.max_wait_ms / 1000)
            # re-read everything, as Kafka does
            await read_partitions(reads, max_bytes, use_remote_max_bytes=use_remote_max_bytes,
                                  remote_wait_s=remote_wait_s)
        return self._fetch_response(context, reads, version, request.isolation_level if version >= 4 else 0)

    def _fetch_response(self, context, reads: list[PartitionRead], version: int, isolation_level: int):
        # Partitions are grouped into topics as they come, consecutively (as FetchResponse.toMessage
        # does), so a topic can appear twice: once for its read partitions, once for unknown ones.
        topics: list[tuple[str, uuid.UUID, list[PartitionRead]]] = []
        key = _NO_KEY
        include = context.include
        for read in reads:
            if not include(read.request, len(read.records), read.high_watermark, read.log_start_offset, read.error):
                continue
            if read.request.key[0] != key:
                key = read.request.key[0]
                topic = self.topics.get(read.topic) if read.topic is not None else None
                if topic is not None:
                    topic_id = topic.topic_id
                else:
                    topic_id = key if isinstance(key, uuid.UUID) else ZERO_UUID
                topics.append((read.topic or "", topic_id, []))
            topics[-1][2].append(read)
        if context.session is not None:
            context.finish([read.request for read in reads if read.records])
        return encode_fetch_response(version, context.response_session_id, topics, isolation_level == 1)

    def _topic_name(self, topic_id) -> str | None:
        topic = self.topics.by_id.get(topic_id)
        return topic.name if topic is not None else None

    # ---- OffsetCommit and OffsetFetch v10: topics by id (KIP-848) ------------------------------
    async def offset_commit(self, request, version: int):
        if version < 10:
            return await self.groups.offset_commit(request, version)
        known, unknown = self._topics_by_id(request.topics)
        request.topics = known
        response = await self.groups.offset_commit(request, version)
        Topic, Partition = (m.OffsetCommitResponse.OffsetCommitResponseTopic,
                            m.OffsetCommitResponse.OffsetCommitResponsePartition)
        response.topics = list(response.topics) + [Topic(topic_id=t.topic_id, partitions=[
            Partition(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partitions])
            for t in unknown]
        return response

    async def offset_fetch(self, request, version: int):
        if version < 10:
            return await self.groups.offset_fetch(request, version)
        unknown_by_group = []
        for group in request.groups:
            known, unknown = self._topics_by_id(group.topics) if group.topics is not None else (None, [])
            group.topics = known
            unknown_by_group.append(unknown)
        response = await self.groups.offset_fetch(request, version)
        Topic, Partition = (m.OffsetFetchResponse.OffsetFetchResponseTopics,
                            m.OffsetFetchResponse.OffsetFetchResponsePartitions)
        for group, unknown in zip(response.groups, unknown_by_group):
            # every topic (a null request list) is answered only for topics that still exist
            topics = []
            for topic in group.topics:
                existing = self.topics.get(topic.name)
                if existing is not None:
                    topic.topic_id = existing.topic_id
                    topics.append(topic)
            group.topics = topics + [Topic(topic_id=t.topic_id, partitions=[Partition(
                partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partition_indexes]) for t in unknown]
        return response

    def _topics_by_id(self, topics) -> tuple[list, list]:
        """The request topics whose id this broker knows, each given its name (for the group coordinator,
        which keeps offsets by name), and those it does not (answered UNKNOWN_TOPIC_ID)."""
        known, unknown = [], []
        for topic in topics:
            name = self._topic_name(topic.topic_id)
            if name is None:
                unknown.append(topic)
            else:
                topic.name = name
                known.append(topic)
        return known, unknown

    # ---- ListOffsets ----------------------------------------------------------------------------
    async def list_offsets(self, request, version: int):
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                result = m.ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, timestamp=-1, offset=-1,
                    leader_epoch=0 if version >= 4 else -1)
                partition_log = self.topics.log(topic.name, p.partition_index)
                if partition_log is None:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    found = self._offset_for(partition_log, p.timestamp)
                    if found is not None:
                        result.offset, result.timestamp = found
                partitions.append(result)
            topics.append(m.ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
        return m.ListOffsetsResponse(topics=topics)

    @staticmethod
    def _offset_for(partition_log, timestamp: int) -> tuple[int, int] | None:
        if timestamp == _LATEST:
            return partition_log.log_end_offset, -1
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

    # ---- topics ---------------------------------------------------------------------------------
    async def create_topics(self, request, version: int):
        validate_only = request.validate_only if version >= 1 else False
        results = [m.CreateTopicsResponse.CreatableTopicResult(name=creatable.name, error_code=0, num_partitions=-1,
                                                               replication_factor=-1)
                   for creatable in request.topics]
        names = [creatable.name for creatable in request.topics]
        duplicates = {name for name in names if names.count(name) > 1} if len(set(names)) < len(names) else set()
        planned: list[tuple[int, Topic]] = []
        for index, creatable in enumerate(request.topics):
            try:
                if creatable.name in duplicates:
                    raise TopicError(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {creatable.name!r} in the request.")
                if creatable.assignments:
                    raise TopicError(ErrorCode.INVALID_REQUEST, "manual replica assignments are not supported")
                configs = {c.name: c.value for c in creatable.configs}
                planned.append((index, self.topics.plan(creatable.name, creatable.num_partitions,
                                                        creatable.replication_factor, configs)))
            except TopicError as failure:
                _fail(results[index], failure)
        try:
            self.topics.check_request_size([topic for _, topic in planned],
                                           sum(len(c.configs) for c in request.topics))
        except TopicError as failure:
            for result in results:
                _fail(result, failure)
            return m.CreateTopicsResponse(topics=results)
        created = [topic for _, topic in planned] if validate_only else await self.topics.create(
            [topic for _, topic in planned])
        for (index, _), outcome in zip(planned, created):
            result = results[index]
            if isinstance(outcome, TopicError):
                _fail(result, outcome)
                continue
            result.topic_id = outcome.topic_id
            result.num_partitions = outcome.planned_partitions
            result.replication_factor = 1
            result.configs = [m.CreateTopicsResponse.CreatableTopicConfigs(
                name=name, value=value, read_only=False, config_source=1, is_sensitive=False)
                for name, value in sorted(outcome.configs.items())]
        return m.CreateTopicsResponse(topics=results)

    async def delete_topics(self, request, version: int):
        if version >= 6:
            wanted = [(t.name if t.name is not None else self._topic_name(t.topic_id), t.topic_id)
                      for t in request.topics]
        else:
            wanted = [(name, ZERO_UUID) for name in request.topic_names]
        results = []
        for name, topic_id in wanted:
            result = m.DeleteTopicsResponse.DeletableTopicResult(name=name, topic_id=topic_id, error_code=0)
            if name is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                try:
                    deleted = await self.topics.delete(name)
                    result.topic_id = deleted.topic_id
                except TopicError as failure:
                    result.error_code = failure.code
                    result.error_message = failure.message
            results.append(result)
        return m.DeleteTopicsResponse(responses=results)

    async def describe_configs(self, request, version: int):
        results = []
        for resource in request.resources:
            result = m.DescribeConfigsResponse.DescribeConfigsResult(
                error_code=0, resource_type=resource.resource_type, resource_name=resource.resource_name, configs=[])
            if resource.resource_type == 2:  # TOPIC
                topic = self.topics.get(resource.resource_name)
                if topic is None:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    result.configs = self._config_entries(self.topics.effective_configs(topic), topic.configs,
                                                          resource.configuration_keys)
            elif resource.resource_type == 4:  # BROKER
                if not resource.resource_name:  # the cluster-wide dynamic defaults: none are set here
                    pass
                elif resource.resource_name == str(self.config.node_id):
                    result.configs = self._config_entries(self._broker_configs(), {}, resource.configuration_keys)
                else:
                    result.error_code = ErrorCode.INVALID_REQUEST
                    result.error_message = (f"Unexpected broker id, expected {self.config.node_id} or empty string, "
                                            f"but received {resource.resource_name}")
            else:
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"resource type {resource.resource_type} is not supported"
            results.append(result)
        return m.DescribeConfigsResponse(results=results)

    def _broker_configs(self) -> dict[str, str]:
        c = self.config
        return {"num.partitions": str(c.num_partitions), "auto.create.topics.enable": str(c.auto_create_topics).lower(),
                "log.segment.bytes": str(c.segment_bytes), "log.retention.ms": str(c.retention_ms),
                "message.max.bytes": str(c.message_max_bytes), "fetch.max.bytes": str(c.fetch_max_bytes)}

    @staticmethod
    def _config_entries(values: dict[str, str], explicit: dict[str, str], keys):
        entries = []
        for name, value in sorted(values.items()):
            if keys and name not in keys:  # null or empty: every config (ConfigHelper.describeConfigs)
                continue
            is_default = name not in explicit
            entries.append(m.DescribeConfigsResponse.DescribeConfigsResourceResult(
                name=name, value=value, read_only=False,  # is_default is v0 only, which is not served
                config_source=5 if is_default else 1, is_sensitive=False, synonyms=[],
                config_type=_CONFIG_TYPES.get(name, 2)))
        return entries

    async def describe_cluster(self, request, version: int):
        if version >= 1 and request.endpoint_type != 1:  # a broker describes brokers, not controllers
            return m.DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                             error_message="The broker only handles the BROKER endpoint type",
                                             endpoint_type=request.endpoint_type, cluster_id=self.config.cluster_id,
                                             brokers=[])
        broker = m.DescribeClusterResponse.DescribeClusterBroker(
            broker_id=self.config.node_id, host=self.config.advertised, port=self.port, rack=None)
        return m.DescribeClusterResponse(error_code=0, endpoint_type=1, cluster_id=self.config.cluster_id,
                                         controller_id=self.config.node_id, brokers=[broker])

    # ---- producers and coordinators --------------------------------------------------------------
    async def init_producer_id(self, request, version: int):
        if request.transactional_id is not None:
            return m.InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                            producer_id=-1, producer_epoch=-1)
        if version >= 3 and request.producer_id >= 0:
            # an idempotent producer bumping its epoch keeps its id (KIP-360)
            epoch = request.producer_epoch + 1
            if epoch <= 0x7FFF:
                return m.InitProducerIdResponse(error_code=0, producer_id=request.producer_id, producer_epoch=epoch)
        return m.InitProducerIdResponse(error_code=0, producer_id=self.producer_ids.next(), producer_epoch=0)

    async def find_coordinator(self, request, version: int):
        host, port, node = self.config.advertised, self.port, self.config.node_id
        if version >= 4:
            return m.FindCoordinatorResponse(coordinators=[
                m.FindCoordinatorResponse.Coordinator(key=key, node_id=node, host=host, port=port, error_code=0)
                for key in request.coordinator_keys])
        if version >= 1 and request.key_type != 0:
            return m.FindCoordinatorResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                             error_message="transactions are not supported", node_id=-1, host="",
                                             port=-1)
        return m.FindCoordinatorResponse(error_code=0, node_id=node, host=host, port=port)


def _metadata_topics_refused(request, version: int):
    """Metadata v10 and v11 carry topic ids and nullable names that only v12 may use: Kafka refuses such
    a request with INVALID_REQUEST on every topic (a null name answered as "", which the response allows)."""
    if version not in (10, 11) or not request.topics:
        return None
    if all(t.name is not None and t.topic_id == ZERO_UUID for t in request.topics):
        return None
    return m.MetadataResponse(topics=[m.MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.INVALID_REQUEST, name=t.name or "", topic_id=t.topic_id, is_internal=False,
        partitions=[]) for t in request.topics])


def _earliest_pending_upload(partition_log) -> int:
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


def _fail(result, failure: TopicError) -> None:
    result.error_code = failure.code
    result.error_message = failure.message


_CONFIG_TYPES = {"retention.ms": 5, "retention.bytes": 5, "segment.bytes": 3, "max.message.bytes": 3,
                 "local.retention.ms": 5, "local.retention.bytes": 5, "remote.storage.enable": 1,
                 "cleanup.policy": 7, "num.partitions": 3, "auto.create.topics.enable": 1, "log.segment.bytes": 3,
                 "log.retention.ms": 5, "message.max.bytes": 3, "fetch.max.bytes": 3}


class _ProducerIdBlock:
    """Producer ids, unique across restarts: the next free id is persisted before ids are handed out,
    a block at a time, as Kafka's controller allocates them."""

    BLOCK = 1000

    def __init__(self, path: Path):
        self.path = path
        self._next = 0
        self._end = 0

    def next(self) -> int:
        if self._next >= self._end:
            start = json.loads(self.path.read_text())["next"] if self.path.exists() else 0
            self._next, self._end = start, start + self.BLOCK
            temporary = self.path.with_suffix(".tmp")
            temporary.write_text(json.dumps({"next": self._end}))
            os.replace(temporary, self.path)
        self._next += 1
        return self._next - 1

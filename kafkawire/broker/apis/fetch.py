"""Fetch: the fetch session (KIP-227), the KIP-74 reads (``broker.fetch.reads``), parking short of MinBytes,
and the response built by ``broker.fetch.response``."""
from __future__ import annotations

import uuid

from ... import messages as m
from ...codec.primitives import ZERO_UUID
from ...error_codes import ErrorCode
from ...messages import ApiKey
from ..dispatch.error_responses import error_response
from ..fetch.reads import DelayedFetch, PartitionRead, read_partitions
from ..fetch.response import fetch_response
from ..fetch.sessions import FetchContext, SessionPartition
from ..metrics import BrokerMetrics
from ..network.listeners import Listener
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["FetchApi"]

_NO_KEY = object()  # matches no topic key
_KIP_1178 = 19  # the Fetch version with RemotePartitionMaxBytes (schemas/kip-1178; v18 is upstream's KIP-1166)


class FetchApi:
    def __init__(self, state: BrokerState, metrics: BrokerMetrics | None = None):
        self.state = state
        self.metrics = metrics  # BrokerMetrics, or None
        self.config = state.config
        self.topics = state.topics
        self.purgatory = state.purgatory
        self.sessions = state.sessions
        self._topic_name = state.topic_name

    async def fetch(self, request: m.FetchRequest, version: int,
                    context: RequestContext) -> m.FetchResponse:
        if version >= 3 and request.max_bytes < 0:
            return error_response(ApiKey.FETCH, request, version, ErrorCode.INVALID_REQUEST, "negative MaxBytes")
        max_bytes = min(request.max_bytes if version >= 3 else 0x7FFFFFFF, self.config.fetch_max_bytes)
        min_bytes = min(request.min_bytes, max_bytes)
        use_ids = version >= 13
        requested = []
        view = self.state.view
        with_epochs = not view.leads_everything and version >= 9
        epochs: dict = {}  # key -> the current leader epoch the client asked with (v9+)
        for topic in request.topics:
            name = topic.topic if not use_ids else self._topic_name(topic.topic_id)
            for p in topic.partitions:
                key = (name if name is not None else topic.topic_id, p.partition)
                requested.append(SessionPartition(key, p.fetch_offset, p.partition_max_bytes,
                                                  p.remote_partition_max_bytes if version >= _KIP_1178 else None))
                if with_epochs:
                    epochs[key] = p.current_leader_epoch
        forgotten = []
        if version >= 7:
            for gone in request.forgotten_topics_data:
                name = gone.topic if not use_ids else self._topic_name(gone.topic_id)
                forgotten += [(name if name is not None else gone.topic_id, p) for p in gone.partitions]
        epoch = request.session_epoch if version >= 7 else -1
        session = self.sessions.context(request.session_id if version >= 7 else 0, epoch, requested, forgotten)
        if session.error:
            return m.FetchResponse(error_code=session.error, session_id=0, responses=[])
        known: list[PartitionRead] = []
        unknown: list[PartitionRead] = []
        readable: dict[str, bool] = {}  # topic -> READ allowed for this principal
        for partition in session.partitions:
            name = partition.key[0] if isinstance(partition.key[0], str) else None
            read = PartitionRead(partition, name, partition.key[1],
                                 self.topics.log(name, partition.key[1]) if name is not None else None)
            if name is not None and self.state.authorizer is not None:
                if name not in readable:
                    readable[name] = self.state.allowed(context, Operation.READ, ResourceType.TOPIC, name)
                if not readable[name]:
                    read.log, read.denied = None, True
            if name is not None and read.log is not None and not view.leads_everything:
                self._check_leader(read, name, epochs.get(partition.key, -1), version)
            (known if read.log is not None else unknown).append(read)
        reads = known + unknown if unknown else known  # unknown partitions are not read, and go at the end
        use_remote_max_bytes = version >= _KIP_1178
        remote_wait_s = self.config.remote_fetch_max_wait_ms / 1000
        read_committed = version >= 4 and request.isolation_level == 1  # up to the last stable offset
        total = await read_partitions(reads, max_bytes, use_remote_max_bytes=use_remote_max_bytes,
                                      remote_wait_s=remote_wait_s, read_committed=read_committed)
        # unknown partitions carry an error, so they too answer at once
        must_answer = (request.max_wait_ms <= 0 or not known or total >= min_bytes
                       or any(r.error or r.remote for r in reads))
        if not must_answer:
            await self.purgatory.park(DelayedFetch(known, min_bytes, read_committed), request.max_wait_ms / 1000)
            # re-read everything, as Kafka does
            await read_partitions(reads, max_bytes, use_remote_max_bytes=use_remote_max_bytes,
                                  remote_wait_s=remote_wait_s, read_committed=read_committed)
        for read in reads:  # an I/O error reading: with several log directories, its directory goes offline
            if read.error == ErrorCode.KAFKA_STORAGE_ERROR and read.log is not None and not read.log.offline:
                self.topics.dir_failed(read.log, "a read failed")
        if self.metrics is not None:
            self._count(self.metrics, reads, max_bytes, read_committed)
        return self._fetch_response(session, reads, version, read_committed, context.listener, context.advertised)

    def _check_leader(self, read: PartitionRead, topic: str, current_leader_epoch: int, version: int) -> None:
        """A partition this node does not lead (or asked at another leader epoch) is not read: it answers
        the node view's error, with the current leader from v12 (KIP-951's leader discovery)."""
        code = self.state.view.leader_error(topic, read.partition, current_leader_epoch)
        if code:
            read.log, read.refused = None, ErrorCode(code)
            if version >= 12 and code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                info = self.state.view.partition(topic, read.partition)
                read.current_leader = (info.leader, info.leader_epoch)

    def _count(self, metrics: BrokerMetrics, reads: list[PartitionRead], max_bytes: int, read_committed: bool) -> None:
        """Bytes out per topic, and the partitions a limit stopped short of the data they have (KIP-74:
        PartitionMaxBytes when the partition's own limit was the smaller, else the request's MaxBytes)."""
        left = max_bytes
        for read in reads:
            size = len(read.records)
            if size:
                metrics.bytes_out.labels(read.topic).inc(size)
            if read.log is None or read.error:
                continue
            bound = read.log.last_stable_offset if read_committed else None
            try:
                more = read.log.bytes_available(read.request.fetch_offset, 0x7FFFFFFF, bound) > size
            except Exception:  # the log moved under the fetch: nothing to say about limits
                more = False
            if more:
                cut_by_partition = read.request.partition_max_bytes <= left
                metrics.fetch_cut.labels("partition_max_bytes" if cut_by_partition else "max_bytes").inc()
            left = max(0, left - size)

    def _fetch_response(self, context: FetchContext, reads: list[PartitionRead], version: int,
                        read_committed: bool, listener: Listener,
                        listener_address: tuple[str, int]) -> m.FetchResponse:
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
        endpoints = None
        if version >= 16 and any(read.current_leader is not None for read in reads):
            leaders = {read.current_leader[0] for read in reads if read.current_leader is not None}
            endpoints = [node for node in self.state.view.brokers(listener.name, listener_address)
                         if node.node_id in leaders]
        return fetch_response(version, context.response_session_id, topics, read_committed, endpoints)

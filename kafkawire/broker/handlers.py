"""The broker's request handlers: each API family's handlers (``broker.apis``) built over the shared
state, and the table from API key to the coroutine that answers it."""
from __future__ import annotations

import logging

from .apis.cluster import ClusterApis
from .apis.fetch import FetchApi
from .apis.list_offsets import ListOffsetsApi
from .apis.metadata import MetadataApi
from .apis.offsets import OffsetApis
from .apis.produce import ProduceHandler
from .apis.producer_ids import ProducerIdApi
from .apis.state import BrokerState
from .apis.topics import TopicApis
from .config import BrokerConfig
from .fetch import FetchPurgatory
from .fetch_sessions import FetchSessionCache
from .groups import GroupCoordinator
from .topics import TopicManager
from .versions import served_versions

__all__ = ["Handlers"]

log = logging.getLogger(__name__)


class Handlers:
    """The broker's request handlers over its shared state: ``handle(api_key, ...)`` answers a request."""

    def __init__(self, config: BrokerConfig, topics: TopicManager, groups: GroupCoordinator, port: int):
        self.state = BrokerState(
            config, topics, groups, port, served_versions(upstream=config.upstream_versions), FetchPurgatory(),
            FetchSessionCache(config.fetch_session_cache_slots, config.fetch_session_eviction_ms))
        self.groups = groups
        self.purgatory = self.state.purgatory
        self.versions = self.state.versions  # API key -> (oldest, newest)
        cluster, metadata, fetch = ClusterApis(self.state), MetadataApi(self.state), FetchApi(self.state)
        offsets, topic_apis = OffsetApis(self.state), TopicApis(self.state)
        self.producer = ProduceHandler(topics, self.purgatory.notify, config.produce_max_decompressed_bytes)
        self.table = {
            0: self.producer.produce, 1: fetch.fetch, 2: ListOffsetsApi(self.state).list_offsets, 3: metadata.metadata,
            8: offsets.offset_commit, 9: offsets.offset_fetch, 10: cluster.find_coordinator,
            12: groups.heartbeat, 13: groups.leave_group, 14: groups.sync_group, 15: groups.describe_groups,
            16: groups.list_groups, 18: cluster.api_versions, 19: topic_apis.create_topics,
            20: topic_apis.delete_topics, 22: ProducerIdApi(self.state).init_producer_id,
            32: topic_apis.describe_configs, 60: cluster.describe_cluster,
        }

    def close(self) -> None:
        self.producer.close()

    async def handle(self, api_key: int, request, version: int, client_id: str | None, client_host: str):
        """The response to one request (None: no response is sent)."""
        if api_key == 11:  # JoinGroup records who the member is
            return await self.groups.join_group(request, version, client_id or "", client_host)
        return await self.table[api_key](request, version)

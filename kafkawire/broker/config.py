"""The broker's settings, named after Kafka's own where one exists."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["BrokerConfig"]


@dataclass
class BrokerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 9092  # 0 picks a free port (the Broker exposes the one bound)
    advertised_host: str | None = None  # what Metadata tells clients; defaults to host
    node_id: int = 0
    cluster_id: str = "kafkawire-cluster-0000"
    num_partitions: int = 1  # num.partitions: for auto-created topics and CreateTopics with -1
    auto_create_topics: bool = True  # auto.create.topics.enable
    segment_bytes: int = 1 << 30  # log.segment.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000  # log.retention.ms
    retention_bytes: int = -1  # log.retention.bytes
    retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    message_max_bytes: int = 1048588  # message.max.bytes
    fetch_max_bytes: int = 57_671_680  # fetch.max.bytes (55 MiB), the broker's cap on a response
    max_request_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    fetch_session_cache_slots: int = 1000  # max.incremental.fetch.session.cache.slots
    fetch_session_eviction_ms: int = 120_000
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    remote_dir: Path | None = None  # a directory standing in for tiered storage
    remote_read_latency_ms: float = 0.0
    remote_fetch_max_wait_ms: int = 500  # remote.fetch.max.wait.ms
    topic_defaults: dict[str, str] = field(default_factory=dict)  # default topic configs by Kafka name
    tap_path: Path | None = None  # write the broker's own traffic here as pcapng (kafkawire.broker.tap)
    upstream_versions: bool = False  # advertise exactly Kafka 4.3's ranges (Fetch up to v18, not v19)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if self.remote_dir is not None:
            self.remote_dir = Path(self.remote_dir)
        if self.tap_path is not None:
            self.tap_path = Path(self.tap_path)

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host

"""The consumer's configuration: Kafka's property names and defaults, validated up front
(``ConsumerConfig.from_properties({"fetch.max.bytes": "1048576"})``, or ``fetch_max_bytes=...``).

Besides Kafka's own settings this carries two proposals upstream never merged:

* ``buffer.memory`` (KIP-81): the bytes of fetch responses the consumer may hold before it stops
  reading from brokers; it must be at least ``fetch.max.bytes``.
* ``remote.max.partition.fetch.bytes`` (KIP-1178): PartitionMaxBytes for reads from remote (tiered)
  storage, sent as RemotePartitionMaxBytes on Fetch v18; None means ``max.partition.fetch.bytes``.

Defaults that depend on other settings, as in Kafka:

* ``enable_auto_commit``: true when a ``group.id`` is set, else false (true without a group is an error).

``isolation.level`` defaults to ``read_uncommitted``, as in Java's client (confluent-kafka's default is
``read_committed``); ``read_committed`` reads up to the last stable offset and skips aborted transactions.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError
from ..network_config import NetworkConfig
from ..properties import INT32_MAX, INT64_MAX, boolean, choice, dotted, integer, servers

__all__ = ["ConsumerConfig", "OFFSET_RESET_STRATEGIES", "ASSIGNORS"]

OFFSET_RESET_STRATEGIES = ("latest", "earliest", "none")
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
# Java class names of the assignors, so properties written for the Java client work unchanged.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
    "org.apache.kafka.clients.consumer.stickyassignor": "sticky",
    "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
}
# Java's rule: the rebalance protocol is the most advanced one every configured assignor supports, so
# cooperative (KIP-429) only when every entry is cooperative-sticky ("range,cooperative-sticky" is the
# first step of Kafka's documented upgrade path: still eager).
_COOPERATIVE_ASSIGNORS = frozenset({"cooperative-sticky"})


@dataclass(frozen=True)
class ConsumerConfig(NetworkConfig):
    bootstrap_servers: tuple[str, ...] = ()
    client_id: str = ""
    client_rack: str = ""
    group_id: str | None = None
    group_instance_id: str | None = None  # static membership (KIP-345; KIP-848 keeps it)
    group_protocol: str = "classic"  # or "consumer": KIP-848, the broker assigns
    group_remote_assignor: str | None = None  # consumer protocol: the broker's assignor to use (uniform, range)
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    remote_max_partition_fetch_bytes: int | None = None
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    max_poll_records: int = 500
    buffer_memory: int = 104857600
    auto_offset_reset: str = "latest"
    enable_auto_commit: bool | None = None
    auto_commit_interval_ms: int = 5000
    isolation_level: str = "read_uncommitted"
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    partition_assignment_strategy: tuple[str, ...] = ("range",)
    default_api_timeout_ms: int = 60000  # the calls that take a timeout, when given none
    retry_backoff_ms: int = 100
    check_crcs: bool = True

    _KIND = "consumer"

    def __post_init__(self) -> None:
        set_ = self._set
        set_("bootstrap_servers", servers(self.bootstrap_servers))
        self._resolve_security()
        self._resolve_network()
        self._resolve_network()
        for name in ("client_id", "client_rack"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"{dotted(name)} must be a string, not {getattr(self, name)!r}")
        if self.group_id is not None and not isinstance(self.group_id, str):
            raise ConfigError(f"group.id must be a string, not {self.group_id!r}")
        for name in ("group_instance_id", "group_remote_assignor"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{dotted(name)} must be a non-empty string, not {value!r}")
        set_("group_protocol", choice("group_protocol", str(self.group_protocol).lower(), ("classic", "consumer")))
        # Request fields are int32 on the wire, hence the upper bounds.
        for name, low, high in (("fetch_max_bytes", 0, INT32_MAX), ("max_partition_fetch_bytes", 0, INT32_MAX),
                                ("fetch_min_bytes", 0, INT32_MAX), ("fetch_max_wait_ms", 0, INT32_MAX),
                                ("max_poll_records", 1, INT32_MAX), ("buffer_memory", 1, INT64_MAX),
                                ("auto_commit_interval_ms", 0, INT32_MAX), ("session_timeout_ms", 1, INT32_MAX),
                                ("heartbeat_interval_ms", 1, INT32_MAX), ("max_poll_interval_ms", 1, INT32_MAX),
                                ("request_timeout_ms", 0, INT32_MAX), ("default_api_timeout_ms", 0, INT32_MAX),
                                ("retry_backoff_ms", 0, INT64_MAX)):
            set_(name, integer(name, getattr(self, name), low, high))
        if self.remote_max_partition_fetch_bytes is not None:
            set_("remote_max_partition_fetch_bytes",
                 integer("remote_max_partition_fetch_bytes", self.remote_max_partition_fetch_bytes, 0, INT32_MAX))
        set_("check_crcs", boolean("check_crcs", self.check_crcs))
        if self.buffer_memory < self.fetch_max_bytes:
            raise ConfigError(f"buffer.memory ({self.buffer_memory}) must be at least fetch.max.bytes "
                              f"({self.fetch_max_bytes}): one whole fetch response has to fit (KIP-81)")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(f"heartbeat.interval.ms ({self.heartbeat_interval_ms}) must be lower than "
                              f"session.timeout.ms ({self.session_timeout_ms})")
        set_("auto_offset_reset", choice("auto_offset_reset", self.auto_offset_reset, OFFSET_RESET_STRATEGIES))
        set_("isolation_level", choice("isolation_level", self.isolation_level, ("read_uncommitted", "read_committed")))
        set_("partition_assignment_strategy", _assignors(self.partition_assignment_strategy))
        if self.enable_auto_commit is None:
            set_("enable_auto_commit", self.group_id is not None)
        else:
            enabled = boolean("enable_auto_commit", self.enable_auto_commit)
            if enabled and self.group_id is None:
                raise ConfigError("enable.auto.commit cannot be true without a group.id")
            set_("enable_auto_commit", enabled)

    # ---- derived values ---------------------------------------------------------------------------
    @property
    def rebalance_protocol(self) -> str:
        """The classic group's rebalance protocol, "COOPERATIVE" (KIP-429) or "EAGER" (see above)."""
        return "COOPERATIVE" if set(self.partition_assignment_strategy) <= _COOPERATIVE_ASSIGNORS else "EAGER"

    @property
    def remote_partition_max_bytes(self) -> int:
        """RemotePartitionMaxBytes as sent on Fetch v18: the remote setting, else max.partition.fetch.bytes."""
        if self.remote_max_partition_fetch_bytes is None:
            return self.max_partition_fetch_bytes
        return self.remote_max_partition_fetch_bytes

    @property
    def isolation_level_code(self) -> int:
        """The FetchRequest IsolationLevel byte (0 read_uncommitted, 1 read_committed)."""
        return 0 if self.isolation_level == "read_uncommitted" else 1

    @property
    def read_committed(self) -> bool:
        """Only committed transactional records are returned, and fetches stop at the last stable offset."""
        return self.isolation_level == "read_committed"


def _assignors(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [piece.strip() for piece in value.split(",") if piece.strip()]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"partition.assignment.strategy must be a non-empty list of {', '.join(ASSIGNORS)}, "
                          f"not {value!r}")
    names = []
    for entry in value:
        text = str(entry).strip().lower()
        name = _ASSIGNOR_CLASSES.get(text, text)
        if name not in ASSIGNORS:
            raise ConfigError(f"partition.assignment.strategy entry {entry!r} is not one of {', '.join(ASSIGNORS)}")
        if name not in names:
            names.append(name)
    return tuple(names)

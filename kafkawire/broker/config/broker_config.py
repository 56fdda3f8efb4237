"""The broker's settings, named after Kafka's own where one exists.

Each field's comment gives its Kafka property; ``BrokerConfig.from_properties`` takes those names
(``{"queued.max.request.bytes": "104857600", ...}``) and refuses a bad value with the key named, and the
keys Kafka 4.3 does not define, all named in one error; the Kafka keys with no effect in one process
are accepted and kept in ``ignored_properties``. Limits have finite defaults where Kafka's are unbounded, so that one client cannot exhaust
the broker's memory or descriptors (``queued.max.request.bytes``, ``max.broker.partitions``).
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..groups.consumer_assignors import ASSIGNORS
from .kafka_properties import known_kafka_property
from ..network.listeners import DEFAULT_PROTOCOL_MAP, Listener, parse_listeners
from typing import Any

__all__ = ["BrokerConfig", "PROPERTIES", "SECURITY_SETTINGS", "MAX_RECORDS_PER_USER_OP", "is_security_setting"]

_INT32_MAX = 2147483647
# Kafka's controller refuses an operation that would write more than this many metadata records (a
# topic, each of its partitions, each config) with POLICY_VIOLATION ("excessively large batch").
MAX_RECORDS_PER_USER_OP = 10000


@dataclass
class BrokerConfig:
    data_dir: Path  # log.dirs' first directory (or "a,b,c": all of log.dirs): topics.json, groups, ACLs...
    host: str = "127.0.0.1"
    port: int = 9092  # 0 picks a free port (the Broker exposes the one bound)
    advertised_host: str | None = None  # what Metadata tells clients; defaults to host
    node_id: int = 0  # node.id
    cluster_id: str = "kafkawire-cluster-0000"
    num_partitions: int = 1  # num.partitions: for auto-created topics and CreateTopics with -1
    auto_create_topics: bool = True  # auto.create.topics.enable
    # min.insync.replicas: acks=all produce needs this many in-sync replicas (an in-process cluster checks it)
    min_insync_replicas: int = 1
    # default.replication.factor: of auto-created topics and CreateTopics with -1 (an in-process cluster's;
    # a single broker has one replica whatever it says)
    default_replication_factor: int = 1
    segment_bytes: int = 1 << 30  # log.segment.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000  # log.retention.ms
    retention_bytes: int = -1  # log.retention.bytes
    retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    message_max_bytes: int = 1048588  # message.max.bytes
    fetch_max_bytes: int = 57_671_680  # fetch.max.bytes (55 MiB), the broker's cap on a response
    max_request_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    # queued.max.request.bytes (KIP-72): the request bytes all connections may hold, read but not yet
    # answered; past it, connections sending large requests wait (Kafka's default is unbounded)
    queued_max_request_bytes: int = 128 * 1024 * 1024
    max_connections: int = _INT32_MAX  # max.connections (also kept under the process's descriptor limit)
    max_connections_per_ip: int = _INT32_MAX  # max.connections.per.ip
    max_connections_per_ip_overrides: dict[str, int] = field(default_factory=dict)  # max.connections.per.ip.overrides
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms
    # max.broker.partitions (KIP-578's name): partitions this broker hosts at most, so that topic
    # creation cannot exhaust its descriptors and disk (Kafka's default is unbounded)
    max_broker_partitions: int = 10_000
    # produce.max.decompressed.bytes (kafkawire's own): what one Produce request's compressed batches
    # may expand to in all, so that a request of compression bombs is refused after bounded work
    produce_max_decompressed_bytes: int = 256 * 1024 * 1024
    fetch_session_cache_slots: int = 1000  # max.incremental.fetch.session.cache.slots
    fetch_session_eviction_ms: int = 120_000
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    # KIP-848 consumer groups: group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms,
    # group.consumer.assignors (the first is the default)
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_assignors: str = "uniform,range"
    # KIP-1071 streams groups: group.streams.session.timeout.ms, group.streams.heartbeat.interval.ms,
    # group.streams.num.standby.replicas; group.streams.num.warmup.replicas (kafkawire's, after Kafka's later
    # warm-up tasks: 0, none, as Kafka 4.3)
    group_streams_session_timeout_ms: int = 45_000
    group_streams_heartbeat_interval_ms: int = 5_000
    group_streams_num_standby_replicas: int = 0
    group_streams_num_warmup_replicas: int = 0
    # KIP-932 share groups (broker.groups.share): group.share.session.timeout.ms,
    # group.share.heartbeat.interval.ms, group.share.record.lock.duration.ms (how long a consumer holds
    # the records it acquired), group.share.delivery.count.limit (deliveries before a record is
    # archived), group.share.partition.max.record.locks (the in-flight window of a share partition),
    # group.share.max.share.sessions; share.auto.offset.reset and share.isolation.level are group
    # configs in Kafka (broker.groups.group_configs), given here for every share group without its own:
    # where a share partition starts (latest or earliest), whether it reads committed records only
    group_share_session_timeout_ms: int = 45_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_record_lock_duration_ms: int = 30_000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2000
    group_share_max_share_sessions: int = 2000
    share_auto_offset_reset: str = "latest"
    share_isolation_level: str = "read_uncommitted"
    # Prometheus metrics on this port (kafkawire's; Kafka exposes JMX), None: off; 0: any free port
    metrics_port: int | None = None
    request_log: bool = False  # one INFO line per request on the kafkawire.broker.requests logger
    # gc.freeze() once started and after large creations (kafkawire's: the ``kafkawire broker`` and ``cluster``
    # processes set it; an application that embeds a broker decides for its own heap)
    freeze_heap: bool = False
    remote_dir: Path | None = None  # a directory standing in for tiered storage
    remote_read_latency_ms: float = 0.0
    remote_fetch_max_wait_ms: int = 500  # remote.fetch.max.wait.ms
    topic_defaults: dict[str, str] = field(default_factory=dict)  # default topic configs by Kafka name
    tap_path: Path | None = None  # write the broker's own traffic here as pcapng (kafkawire.broker.network.tap)
    # listeners: NAME://host:port,...; unset, one PLAINTEXT listener on host and port
    listeners: str | None = None
    advertised_listeners: str | None = None  # advertised.listeners, by listener name
    listener_security_protocol_map: str = DEFAULT_PROTOCOL_MAP  # listener.security.protocol.map
    # controller.listener.names: listeners that answer as a KRaft controller answers clients (ApiVersions,
    # DescribeCluster of the controllers, the admin APIs Kafka's controller serves); PLAINTEXT unless
    # listener.security.protocol.map names their protocol
    controller_listener_names: str = ""
    # socket.send.buffer.bytes, socket.receive.buffer.bytes: SO_SNDBUF of accepted connections and
    # SO_RCVBUF of the listening sockets (which connections inherit); -1 leaves the OS's (the default
    # here, so that the OS tunes them; Kafka's is 102400, as its stock server.properties sets them)
    socket_send_buffer_bytes: int = -1
    socket_receive_buffer_bytes: int = -1
    # the Kafka properties given that have no effect in one process (num.io.threads, ...), as
    # from_properties found them: the broker names them in one line at start
    ignored_properties: tuple[str, ...] = ()
    # the ssl.*, sasl.* and listener.name.<listener>.* settings, the authorizer's (authorizer.class.name,
    # super.users, allow.everyone.if.no.acl.found) and connections.max.reauth.ms, by Kafka name; read by
    # broker.security
    security: dict[str, str] = field(default_factory=dict)
    # SCRAM credentials to add at start, as kafka-storage format --add-scram takes them:
    # "SCRAM-SHA-256=[name=alice,password=alice-secret]"
    scram_credentials: list[str] = field(default_factory=list)
    upstream_versions: bool = False  # advertise exactly Kafka 4.3's ranges (Fetch up to v18, not v19)
    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    # transaction.abort.timed.out.transaction.cleanup.interval.ms: how often open transactions past
    # their transaction.timeout.ms are looked for (and aborted)
    transaction_abort_interval_ms: int = 10_000
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    # transaction.remove.expired.transaction.cleanup.interval.ms
    transaction_expiration_interval_ms: int = 3_600_000
    # the finalized transaction.version feature (kafka-features.sh): 2 is KIP-890 part 2, the default
    # of a Kafka 4 cluster (clients bump the epoch on every transaction); 0 or 1 keeps Produce at v11,
    # EndTxn and TxnOffsetCommit at v4, as Kafka advertises them then
    transaction_version: int = 2
    # transaction.partition.verification.enable (KIP-890 part 1): transactional writes to a partition
    # the coordinator does not know in the transaction are refused
    transaction_partition_verification: bool = True
    log_cleaner_enable: bool = True  # log.cleaner.enable: compact the logs whose cleanup.policy says so
    log_cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
    log_cleaner_io_buffer_size: int = 512 * 1024  # log.cleaner.io.buffer.size
    log_cleaner_io_buffer_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor
    log_cleaner_backoff_ms: int = 15_000  # log.cleaner.backoff.ms: the wait when no log needs cleaning
    log_cleaner_threads: int = 1  # log.cleaner.threads: accepted; one cleaner runs whatever it says
    # log.cleaner.io.max.bytes.per.second: the cleaner's read and write rate limit (Kafka's: unbounded)
    log_cleaner_io_max_bytes_per_second: float = 1.7976931348623157e308
    # the broker-wide defaults of topic configs by their broker names, as a property file gives them
    # (log.cleaner.min.cleanable.ratio, log.cleaner.delete.retention.ms, log.roll.hours, ...): checked
    # and applied as STATIC_BROKER_CONFIG by topic_configs
    log_configs: dict[str, str] = field(default_factory=dict)
    telemetry_max_bytes: int = 1024 * 1024  # telemetry.max.bytes (KIP-714): the largest PushTelemetry payload
    # delegation.token.secret.key: the key of the tokens' HMACs (KIP-48); without it tokens are disabled
    delegation_token_secret_key: str | None = field(default=None, repr=False)
    delegation_token_max_lifetime_ms: int = 604_800_000  # delegation.token.max.lifetime.ms
    delegation_token_expiry_time_ms: int = 86_400_000  # delegation.token.expiry.time.ms: a renewal's reach
    delegation_token_expiry_check_interval_ms: int = 3_600_000  # delegation.token.expiry.check.interval.ms
    # client quotas' rate windows (broker.quotas): the samples kept and each one's length
    quota_window_num: int = 11  # quota.window.num
    quota_window_size_seconds: int = 1  # quota.window.size.seconds
    controller_quota_window_num: int = 11  # controller.quota.window.num
    controller_quota_window_size_seconds: int = 1  # controller.quota.window.size.seconds
    # log.dirs (JBOD): every directory partition logs may live in, data_dir first; a data_dir of
    # comma-separated folders gives them all
    log_dirs: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        named = [Path(part.strip()) for part in os.fspath(self.data_dir).split(",") if part.strip()]
        if not named:
            raise ValueError("log.dirs: no directory given")
        dirs = list(dict.fromkeys(named + [Path(d) for d in self.log_dirs]))
        if len({os.path.abspath(d) for d in dirs}) != len(dirs):
            raise ValueError(f"log.dirs: a directory is named twice in {', '.join(map(str, dirs))}")
        self.data_dir, self.log_dirs = dirs[0], tuple(dirs)
        if self.remote_dir is not None:
            self.remote_dir = Path(self.remote_dir)
        if self.tap_path is not None:
            self.tap_path = Path(self.tap_path)
        for name in _POSITIVE:
            if getattr(self, name) <= 0:
                raise ValueError(f"{_KAFKA_NAME.get(name, name)} must be positive, not {getattr(self, name)}")
        if self.share_auto_offset_reset not in ("latest", "earliest"):
            raise ValueError(f"share.auto.offset.reset: {self.share_auto_offset_reset!r} is not latest or earliest")
        if self.share_isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"share.isolation.level: {self.share_isolation_level!r} is not read_uncommitted or "
                             f"read_committed")
        unknown = [name for name in self.consumer_assignors if name not in ASSIGNORS]
        if unknown or not self.consumer_assignors:
            raise ValueError(f"group.consumer.assignors: unknown assignor(s) {', '.join(unknown) or '(none given)'}; "
                             f"known: {', '.join(ASSIGNORS)}")
        if self.log_cleaner_threads < 0:
            raise ValueError(f"log.cleaner.threads must be at least 0, not {self.log_cleaner_threads}")
        if self.transaction_version not in (0, 1, 2):
            raise ValueError(f"transaction.version must be 0, 1 or 2, not {self.transaction_version}")
        for address, limit in self.max_connections_per_ip_overrides.items():
            if limit < 0:
                raise ValueError(f"max.connections.per.ip.overrides: {address}:{limit} is negative")
        for name in ("socket_send_buffer_bytes", "socket_receive_buffer_bytes"):
            if getattr(self, name) < -1 or getattr(self, name) == 0:
                raise ValueError(f"{_KAFKA_NAME[name]} must be positive or -1 (the OS's), not {getattr(self, name)}")

    @property
    def consumer_assignors(self) -> tuple[str, ...]:
        return tuple(name.strip() for name in self.group_consumer_assignors.split(",") if name.strip())

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host

    def connection_limit_for(self, host: str) -> int:
        return self.max_connections_per_ip_overrides.get(host, self.max_connections_per_ip)

    @classmethod
    def from_properties(cls, properties: dict[str, str], **settings: Any) -> "BrokerConfig":
        """A config from Kafka property names (values as text), plus keyword settings by field name.

        Every key Kafka 4.3 defines is accepted: those with no effect here are kept in
        ``ignored_properties``; the keys Kafka does not know are refused, all named in one ValueError."""
        from .topic_configs import BROKER_LOG_CONFIGS  # it builds on this module
        values = dict(settings)
        security = dict(values.pop("security", {}))
        log_configs = dict(values.pop("log_configs", {}))
        ignored, unknown = [], []
        for key, text in properties.items():
            name = PROPERTIES.get(key)
            if name is not None:
                values[name] = _parse(key, name, str(text))
            elif is_security_setting(key):
                security[key] = str(text)
            elif key in BROKER_LOG_CONFIGS:
                log_configs[key] = str(text).strip()
            elif key in _CHECKED_ONLY:
                _CHECKED_ONLY[key](str(text).strip())
            elif known_kafka_property(key):
                ignored.append(key)
            else:
                unknown.append(key)
        if unknown:
            raise ValueError(f"unknown broker setting{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, sorted(unknown)))}: not a Kafka 4.3 broker property")
        if "broker.id" in properties:  # Kafka's older name of node.id: both given, they must agree
            broker_id = _parse("broker.id", "node_id", str(properties["broker.id"]))
            if "node.id" in properties and broker_id != values["node_id"]:
                raise ValueError(f"broker.id {broker_id} and node.id {values['node_id']} must be the same")
            values["node_id"] = broker_id
        return cls(security=security, log_configs=log_configs, ignored_properties=tuple(sorted(ignored)), **values)

    def listener_list(self) -> list[Listener]:
        """The listeners (``listeners``, or one PLAINTEXT listener on ``host`` and ``port``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        listeners = self.listeners or f"PLAINTEXT://{host}:{self.port}"
        return parse_listeners(listeners, self.advertised_listeners, self.listener_security_protocol_map,
                               self.advertised, self.controller_listener_names)


# Kafka property -> BrokerConfig field, for the settings that have a Kafka name.
PROPERTIES = {
    "log.dirs": "data_dir", "log.dir": "data_dir", "node.id": "node_id", "num.partitions": "num_partitions",
    "min.insync.replicas": "min_insync_replicas", "default.replication.factor": "default_replication_factor",
    "auto.create.topics.enable": "auto_create_topics", "log.segment.bytes": "segment_bytes",
    "log.retention.ms": "retention_ms", "log.retention.bytes": "retention_bytes",
    "log.retention.check.interval.ms": "retention_check_interval_ms", "message.max.bytes": "message_max_bytes",
    "fetch.max.bytes": "fetch_max_bytes", "socket.request.max.bytes": "max_request_bytes",
    "queued.max.request.bytes": "queued_max_request_bytes", "max.connections": "max_connections",
    "max.connections.per.ip": "max_connections_per_ip",
    "max.connections.per.ip.overrides": "max_connections_per_ip_overrides",
    "connections.max.idle.ms": "connections_max_idle_ms", "max.broker.partitions": "max_broker_partitions",
    "produce.max.decompressed.bytes": "produce_max_decompressed_bytes",
    "max.incremental.fetch.session.cache.slots": "fetch_session_cache_slots",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.consumer.session.timeout.ms": "group_consumer_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "group_consumer_heartbeat_interval_ms",
    "group.consumer.assignors": "group_consumer_assignors",
    "group.streams.session.timeout.ms": "group_streams_session_timeout_ms",
    "group.streams.heartbeat.interval.ms": "group_streams_heartbeat_interval_ms",
    "group.streams.num.standby.replicas": "group_streams_num_standby_replicas",
    "group.streams.num.warmup.replicas": "group_streams_num_warmup_replicas",
    "group.share.session.timeout.ms": "group_share_session_timeout_ms",
    "group.share.heartbeat.interval.ms": "group_share_heartbeat_interval_ms",
    "group.share.record.lock.duration.ms": "group_share_record_lock_duration_ms",
    "group.share.delivery.count.limit": "group_share_delivery_count_limit",
    "group.share.partition.max.record.locks": "group_share_partition_max_record_locks",
    "group.share.max.share.sessions": "group_share_max_share_sessions",
    "share.auto.offset.reset": "share_auto_offset_reset",
    "share.isolation.level": "share_isolation_level",
    "remote.fetch.max.wait.ms": "remote_fetch_max_wait_ms", "listeners": "listeners",
    "advertised.listeners": "advertised_listeners", "listener.security.protocol.map": "listener_security_protocol_map",
    "transaction.max.timeout.ms": "transaction_max_timeout_ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "transaction_abort_interval_ms",
    "transactional.id.expiration.ms": "transactional_id_expiration_ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "transaction_expiration_interval_ms",
    "transaction.version": "transaction_version",
    "transaction.partition.verification.enable": "transaction_partition_verification",
    "log.cleaner.enable": "log_cleaner_enable", "log.cleaner.dedupe.buffer.size": "log_cleaner_dedupe_buffer_size",
    "log.cleaner.io.buffer.size": "log_cleaner_io_buffer_size",
    "log.cleaner.io.buffer.load.factor": "log_cleaner_io_buffer_load_factor",
    "log.cleaner.backoff.ms": "log_cleaner_backoff_ms", "log.cleaner.threads": "log_cleaner_threads",
    "log.cleaner.io.max.bytes.per.second": "log_cleaner_io_max_bytes_per_second",
    "telemetry.max.bytes": "telemetry_max_bytes", "quota.window.num": "quota_window_num",
    "quota.window.size.seconds": "quota_window_size_seconds", "controller.quota.window.num": "controller_quota_window_num",
    "controller.quota.window.size.seconds": "controller_quota_window_size_seconds", "controller.listener.names": "controller_listener_names",
    "socket.send.buffer.bytes": "socket_send_buffer_bytes", "socket.receive.buffer.bytes": "socket_receive_buffer_bytes",
    "delegation.token.secret.key": "delegation_token_secret_key",
    "delegation.token.max.lifetime.ms": "delegation_token_max_lifetime_ms",
    "delegation.token.expiry.time.ms": "delegation_token_expiry_time_ms",
    "delegation.token.expiry.check.interval.ms": "delegation_token_expiry_check_interval_ms",
}


def _process_roles(text: str) -> None:
    roles = [role.strip() for role in text.split(",") if role.strip()]
    if not set(roles) <= {"broker", "controller"} or len(set(roles)) != len(roles):
        raise ValueError(f"process.roles: {text!r} is not broker, controller or broker,controller")
    if "broker" not in roles:  # a controller alone would serve no client data
        raise ValueError(f"process.roles: kafkawire runs a broker (and its controller), not {text!r}")


# Kafka properties that describe how kafkawire already runs (a combined broker and controller):
# checked, then nothing more to do.
_CHECKED_ONLY = {"process.roles": _process_roles}

# The security settings kept by name in BrokerConfig.security (and, prefixed with listener.name.<listener>.,
# per listener; JAAS also per mechanism: listener.name.<listener>.<mechanism>.sasl.jaas.config).
SECURITY_SETTINGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.protocol", "ssl.cipher.suites", "ssl.principal.mapping.rules", "ssl.endpoint.identification.algorithm",
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.mechanism.inter.broker.protocol",
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found", "connections.max.reauth.ms",
})
# (OAUTHBEARER's validator settings may also carry the mechanism: listener.name.<l>.oauthbearer.sasl.oauthbearer.*)
_LISTENER_SETTING = re.compile(r"listener\.name\.[a-z0-9_-]+\.(?:(?:plain|scram-sha-256|scram-sha-512|oauthbearer)\."
                               r"(sasl\.jaas\.config)|oauthbearer\.(sasl\.oauthbearer\..+)|(.+))")


def is_security_setting(key: str) -> bool:
    match = _LISTENER_SETTING.fullmatch(key)
    if match is not None:
        return bool(match[1]) or (match[2] or match[3]) in SECURITY_SETTINGS
    return key in SECURITY_SETTINGS
_KAFKA_NAME = {name: key for key, name in PROPERTIES.items()}
_POSITIVE = ("quota_window_num", "quota_window_size_seconds", "controller_quota_window_num",
             "controller_quota_window_size_seconds", "num_partitions", "min_insync_replicas", "default_replication_factor", "segment_bytes", "message_max_bytes", "fetch_max_bytes", "max_request_bytes",
             "queued_max_request_bytes", "max_connections", "connections_max_idle_ms", "max_broker_partitions",
             "produce_max_decompressed_bytes", "retention_check_interval_ms", "transaction_max_timeout_ms",
             "transaction_abort_interval_ms", "transactional_id_expiration_ms", "transaction_expiration_interval_ms",
             "telemetry_max_bytes", "group_consumer_session_timeout_ms", "group_consumer_heartbeat_interval_ms",
             "group_streams_session_timeout_ms", "group_streams_heartbeat_interval_ms",
             "group_share_session_timeout_ms", "group_share_heartbeat_interval_ms",
             "group_share_record_lock_duration_ms", "group_share_delivery_count_limit",
             "group_share_partition_max_record_locks", "group_share_max_share_sessions",
             "log_cleaner_dedupe_buffer_size", "log_cleaner_io_buffer_size", "log_cleaner_io_buffer_load_factor",
             "log_cleaner_backoff_ms", "log_cleaner_io_max_bytes_per_second", "delegation_token_max_lifetime_ms",
             "delegation_token_expiry_time_ms", "delegation_token_expiry_check_interval_ms")
_TYPES = {f.name: f.type for f in dataclasses.fields(BrokerConfig)}


def _parse(key: str, name: str, text: str) -> object:
    kind = _TYPES[name]
    try:
        if "bool" in kind:
            if text.strip().lower() not in ("true", "false"):
                raise ValueError(text)
            return text.strip().lower() == "true"
        if kind.startswith("dict"):  # "host:limit,host:limit"
            pairs = [item.rsplit(":", 1) for item in text.split(",") if item.strip()]
            return {host.strip(): int(limit) for host, limit in pairs}
        if "int" in kind:
            return int(text.strip())
        if "float" in kind:
            return float(text.strip())
        return text.strip()
    except ValueError:
        raise ValueError(f"invalid value {text!r} for {key}") from None

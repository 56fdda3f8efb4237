"""Client metrics (KIP-714): the subscriptions clients are told about (GetTelemetrySubscriptions) and the
latest metrics each client instance pushed (PushTelemetry), as Kafka's ``ClientMetricsManager``.

Subscriptions are Kafka's CLIENT_METRICS config resources (``metrics``, ``interval.ms``, ``match``), set
with IncrementalAlterConfigs / AlterConfigs and kept in ``DATA/client-metrics.json``. A client matches a
subscription when every ``match`` selector's regular expression matches it whole; it is asked for the
union of the metrics of the subscriptions it matches, at their shortest interval (none: no metrics, every
5 minutes). Pushed payloads (OTLP protobuf, compressed as the client chose) are kept as sent, the latest
per client instance id, in a bounded cache from which idle instances expire.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from ..error_codes import ErrorCode
from .persistence.atomic_file import write_json_atomically

__all__ = ["ClientMetrics", "ClientInstance", "ACCEPTED_COMPRESSION_TYPES", "SubscriptionError"]

# ClientTelemetryUtils.SUPPORTED_COMPRESSION_TYPES, in Kafka's order of preference: zstd, lz4, gzip, snappy.
ACCEPTED_COMPRESSION_TYPES = [4, 3, 1, 2]
DEFAULT_INTERVAL_MS = 300_000  # ClientMetricsConfigs.DEFAULT_INTERVAL_MS
_MIN_INTERVAL_MS, _MAX_INTERVAL_MS = 100, 3_600_000
_CACHE_MAX_SIZE = 16384  # ClientMetricsManager's cache of client instances
_CACHE_EXPIRY_MS = 60_000  # at least; three push intervals when longer
_MATCH_KEYS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
               "client_source_address", "client_source_port")
_FILE = "client-metrics.json"


class SubscriptionError(Exception):
    """A CLIENT_METRICS config refused (INVALID_CONFIG, INVALID_REQUEST)."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_CONFIG):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str]
    subscription_id: int
    version: int  # the subscriptions' version it was computed at
    metrics: list[str]
    push_interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_request_ms: int = 0
    terminating: bool = False
    payload: bytes | None = None  # the latest metrics, as pushed
    compression_type: int = 0
    pushed_ms: int = 0
    pushes: int = 0

    def latest_metrics(self, limit: int = 64 << 20) -> bytes | None:
        """The latest pushed metrics, decompressed (OTLP ``MetricsData`` protobuf bytes)."""
        if self.payload is None:
            return None
        from ..records.compression import decompress  # (the records package: only telemetry pushed needs it)
        return decompress(self.compression_type, self.payload, limit)


class ClientMetrics:
    """Subscriptions and client instances. Not thread-safe: the event loop owns it."""

    def __init__(self, data_dir: Path, telemetry_max_bytes: int = 1024 * 1024, clock=None):
        self.path = Path(data_dir) / _FILE
        self.telemetry_max_bytes = telemetry_max_bytes  # telemetry.max.bytes
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.subscriptions: dict[str, dict[str, str]] = {}
        self._version = 0
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()

    # ---- subscriptions (CLIENT_METRICS config resources) ---------------------------------------
    def load(self) -> None:
        try:
            self.subscriptions = {str(k): dict(v) for k, v in json.loads(self.path.read_text()).items()}
        except FileNotFoundError:
            pass

    def set_subscription(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None:
        """Replace a subscription's configs (none: delete it), checked as ``ClientMetricsConfigs.validate``."""
        if not name:
            raise SubscriptionError("Subscription name can't be empty", ErrorCode.INVALID_REQUEST)
        _check(configs)
        if validate_only:
            return
        if configs:
            self.subscriptions[name] = dict(configs)
        else:
            self.subscriptions.pop(name, None)
        write_json_atomically(self.path, self.subscriptions, indent=1)
        self._version += 1  # client instances re-evaluate their subscription at their next request

    # ---- GetTelemetrySubscriptions / PushTelemetry ---------------------------------------------
    def get_subscription(self, instance_id: uuid.UUID, attributes: dict[str, str]) -> tuple[int, ClientInstance]:
        """(error, instance): a new instance id for the zero one; THROTTLING_QUOTA_EXCEEDED for a
        request before the push interval has passed since the client's last request."""
        now = self._clock()
        if instance_id.int == 0:
            instance_id = uuid.uuid4()
        instance = self._instance(instance_id, attributes, now)
        if now - max(instance.last_get_ms, instance.last_push_ms) < instance.push_interval_ms \
                and (instance.last_get_ms or instance.last_push_ms):
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, instance
        instance.last_get_ms = now
        return ErrorCode.NONE, instance

    def push(self, instance_id: uuid.UUID, attributes: dict[str, str], subscription_id: int, terminating: bool,
             compression_type: int, metrics: bytes) -> int:
        """Keep the pushed metrics; the error code Kafka answers a push it refuses with."""
        if instance_id.int in (0, 1, 2):  # Uuid.RESERVED: ZERO_UUID, METADATA_TOPIC_ID, ONE_UUID
            return ErrorCode.INVALID_REQUEST
        now = self._clock()
        instance = self._instance(instance_id, attributes, now)
        try:
            if instance.terminating:
                return ErrorCode.INVALID_REQUEST  # nothing is accepted after a terminating push
            # a push right after GetTelemetrySubscriptions is accepted: clients jitter the interval
            if instance.last_get_ms <= instance.last_push_ms and instance.last_push_ms \
                    and now - instance.last_push_ms < instance.push_interval_ms and not terminating:
                return ErrorCode.THROTTLING_QUOTA_EXCEEDED
            instance.last_push_ms = now
            if subscription_id != instance.subscription_id:
                return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
            if compression_type != 0 and compression_type not in ACCEPTED_COMPRESSION_TYPES:
                return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            if len(metrics) > self.telemetry_max_bytes:
                return ErrorCode.TELEMETRY_TOO_LARGE
        finally:
            instance.terminating = terminating
        if metrics:
            instance.payload, instance.compression_type = bytes(metrics), compression_type
            instance.pushed_ms = now
            instance.pushes += 1
        return ErrorCode.NONE

    def _instance(self, instance_id: uuid.UUID, attributes: dict[str, str], now: int) -> ClientInstance:
        self._expire(now)
        instance = self.instances.get(instance_id)
        if instance is None or instance.version < self._version:
            metrics, interval = self._subscribed(dict(attributes, client_instance_id=str(instance_id)))
            fresh = ClientInstance(instance_id, dict(attributes), _subscription_id(metrics, interval, instance_id),
                                   self._version, metrics, interval)
            if instance is not None:  # a subscription changed: answered at once, the payload kept
                fresh.payload, fresh.compression_type = instance.payload, instance.compression_type
                fresh.pushed_ms, fresh.pushes, fresh.last_push_ms = instance.pushed_ms, instance.pushes, 0
            instance = fresh
            self.instances[instance_id] = instance
        self.instances.move_to_end(instance_id)
        instance.last_request_ms = now
        while len(self.instances) > _CACHE_MAX_SIZE:
            self.instances.popitem(last=False)
        return instance

    def _expire(self, now: int) -> None:
        while self.instances:
            oldest = next(iter(self.instances.values()))
            if now - oldest.last_request_ms < max(_CACHE_EXPIRY_MS, 3 * oldest.push_interval_ms):
                break
            self.instances.popitem(last=False)

    def _subscribed(self, attributes: dict[str, str]) -> tuple[list[str], int]:
        metrics: set[str] = set()
        interval = DEFAULT_INTERVAL_MS
        for configs in self.subscriptions.values():
            if all(_matches(selector, attributes) for selector in _items(configs.get("match", ""))):
                metrics.update(_items(configs.get("metrics", "")))
                interval = min(interval, int(configs.get("interval.ms", DEFAULT_INTERVAL_MS)))
        if "*" in metrics:
            return ["*"], interval
        return sorted(metrics), interval


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _matches(selector: str, attributes: dict[str, str]) -> bool:
    key, _, pattern = selector.partition("=")
    return re.fullmatch(pattern, attributes.get(key.strip(), "")) is not None


def _check(configs: dict[str, str]) -> None:
    for name, value in configs.items():
        if name == "interval.ms":
            try:
                interval = int(value)
            except (TypeError, ValueError):
                raise SubscriptionError(f"Invalid value {value} for configuration interval.ms: "
                                        f"Not a number of type INT") from None
            if not _MIN_INTERVAL_MS <= interval <= _MAX_INTERVAL_MS:
                raise SubscriptionError(f"Invalid value {interval} for interval.ms, interval must be between "
                                        f"{_MIN_INTERVAL_MS} and {_MAX_INTERVAL_MS} ({_MAX_INTERVAL_MS // 3_600_000} hour)")
        elif name == "match":
            for selector in _items(value):
                key, equals, pattern = selector.partition("=")
                if not equals or key.strip() not in _MATCH_KEYS:
                    raise SubscriptionError(f"Illegal client matching pattern: {selector}")
                try:
                    re.compile(pattern)
                except re.error:
                    raise SubscriptionError(f"Illegal regex pattern: {pattern}") from None
        elif name != "metrics":
            raise SubscriptionError(f"Unknown client metrics configuration: {name}")


def _subscription_id(metrics: list[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """``computeSubscriptionId``: CRC32C of the metrics and interval, XORed with the instance id's hash."""
    from ..records.checksums import crc32c  # (the records package: only a telemetry client needs it)
    crc = crc32c(f"[{', '.join(metrics)}]{interval_ms}".encode())
    hilo = (instance_id.int >> 64) ^ (instance_id.int & (1 << 64) - 1)
    value = (crc ^ (hilo >> 32) ^ hilo) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value

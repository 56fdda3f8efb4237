"""The producer's configuration: Kafka's property names and defaults, validated up front
(``ProducerConfig.from_properties({"batch.size": "32768"})``, or ``batch_size=...``).

Besides Kafka's own settings this carries KIP-782's expandable batches (never merged upstream):
``batch.initial.size`` (first allocation of a new batch), ``batch.reallocation.factor`` (growth step)
and ``batch.max.size`` (a batch ready at ``batch.size`` keeps accepting records up to this size).

A few defaults depend on other settings, as in Kafka; those fields default to None and are resolved
when the config is built (after that they hold plain values):

* ``enable_idempotence``: true, unless ``acks``, ``retries`` or ``max.in.flight.requests.per.connection``
  conflict with it, in which case it is quietly off (set it to true explicitly to get an error instead).
  A ``transactional.id`` needs idempotence: with it, a conflict or an explicit false is an error.
* ``delivery_timeout_ms``: 120000, raised to ``linger.ms + request.timeout.ms`` if that is larger
  (an explicit value below that sum is an error).
* ``batch_initial_size``: 4096, or ``batch.size`` if smaller; an explicit 0 means ``batch.size``
  (expansion off).
* ``batch_max_size``: 262144 (lowered to ``max.request.size`` if that is smaller), or ``batch.size``
  if larger.
"""
from __future__ import annotations

from dataclasses import dataclass

from kafkawire.records import Codec

from ...errors import ConfigError
from ..network_config import NetworkConfig
from ..properties import INT32_MAX, INT64_MAX, boolean, integer, servers

__all__ = ["ProducerConfig", "ACKS_ALL"]

ACKS_ALL = -1
_DEFAULT_BATCH_INITIAL_SIZE = 4096
_DEFAULT_BATCH_MAX_SIZE = 262144
_DEFAULT_DELIVERY_TIMEOUT_MS = 120000
_CODECS = {"none": Codec.NONE, "gzip": Codec.GZIP, "snappy": Codec.SNAPPY, "lz4": Codec.LZ4, "zstd": Codec.ZSTD}
# (lowest, highest) of each level property, as Kafka's CompressionType declares them (KIP-390);
# gzip also takes -1, the Deflater's default.
_LEVELS = {"compression_gzip_level": (1, 9), "compression_lz4_level": (1, 17),
           "compression_zstd_level": (-131072, 22)}


@dataclass(frozen=True)
class ProducerConfig(NetworkConfig):
    bootstrap_servers: tuple[str, ...] = ()
    client_id: str = ""
    acks: int = ACKS_ALL
    batch_size: int = 16384
    batch_initial_size: int | None = None
    batch_max_size: int | None = None
    batch_reallocation_factor: float = 2.0
    linger_ms: int = 5
    buffer_memory: int = 33554432
    max_block_ms: int = 60000
    compression_type: str = "none"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    enable_idempotence: bool | None = None
    max_in_flight_requests_per_connection: int = 5
    retries: int = INT32_MAX
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    delivery_timeout_ms: int | None = None
    partitioner_ignore_keys: bool = False
    max_request_size: int = 1048576
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000

    _KIND = "producer"

    def __post_init__(self) -> None:
        set_ = self._set
        set_("bootstrap_servers", servers(self.bootstrap_servers))
        self._resolve_security()
        self._resolve_network()
        if not isinstance(self.client_id, str):
            raise ConfigError(f"client.id must be a string, not {self.client_id!r}")
        set_("acks", _acks(self.acks))
        for name, low, high in (("batch_size", 0, INT32_MAX), ("linger_ms", 0, INT32_MAX),
                                ("buffer_memory", 1, INT64_MAX), ("max_block_ms", 0, INT64_MAX),
                                ("max_in_flight_requests_per_connection", 1, INT32_MAX),
                                ("retries", 0, INT32_MAX), ("retry_backoff_ms", 0, INT64_MAX),
                                ("retry_backoff_max_ms", 0, INT64_MAX), ("request_timeout_ms", 0, INT32_MAX),
                                ("max_request_size", 1, INT32_MAX), ("transaction_timeout_ms", 0, INT32_MAX)):
            set_(name, integer(name, getattr(self, name), low, high))
        set_("partitioner_ignore_keys", boolean("partitioner_ignore_keys", self.partitioner_ignore_keys))
        if self.transactional_id is not None and (not isinstance(self.transactional_id, str)
                                                  or not self.transactional_id.strip()):
            raise ConfigError(f"transactional.id must be a non-empty string, not {self.transactional_id!r}")
        self._resolve_compression()
        self._resolve_batch_sizes()
        self._resolve_delivery_timeout()
        self._resolve_idempotence()

    # ---- derived values ---------------------------------------------------------------------------
    @property
    def codec(self) -> Codec:
        return _CODECS[self.compression_type]

    @property
    def compression_level(self) -> int | None:
        """The level property of the configured codec (None for none and snappy, which have none)."""
        name = f"compression_{self.compression_type}_level"
        return getattr(self, name) if name in _LEVELS else None

    def retry_backoff(self, attempts: int) -> int:
        """Milliseconds to wait before retry number ``attempts``: exponential from ``retry.backoff.ms``,
        capped at ``retry.backoff.max.ms`` (Kafka's KIP-580 backoff without its random jitter, which
        would make the sans-IO core non-deterministic)."""
        if attempts <= 0:
            return 0
        if self.retry_backoff_max_ms <= self.retry_backoff_ms:
            return self.retry_backoff_ms
        return min(self.retry_backoff_ms << min(attempts - 1, 62), self.retry_backoff_max_ms)

    # ---- resolution of interdependent settings ---------------------------------------------------
    def _resolve_compression(self) -> None:
        kind = self.compression_type
        if not isinstance(kind, str) or kind.lower() not in _CODECS:
            raise ConfigError(f"compression.type must be one of {', '.join(_CODECS)}, not {kind!r}")
        self._set("compression_type", kind.lower())
        for name, (low, high) in _LEVELS.items():
            gzip = name == "compression_gzip_level"
            level = integer(name, getattr(self, name), -1 if gzip else low, high)
            if gzip and level == 0:
                raise ConfigError(f"compression.gzip.level must be -1 or between {low} and {high}, not 0")
            self._set(name, level)

    def _resolve_batch_sizes(self) -> None:
        batch_size = self.batch_size
        initial = self.batch_initial_size
        if initial is None:
            initial = min(_DEFAULT_BATCH_INITIAL_SIZE, batch_size)
        else:
            initial = integer("batch_initial_size", initial, 0, INT32_MAX)
            if initial > batch_size:
                raise ConfigError(f"batch.initial.size ({initial}) must not exceed batch.size ({batch_size})")
            if initial == 0:
                initial = batch_size  # expansion off: new batches start at batch.size, as upstream
        maximum = self.batch_max_size
        if maximum is None:
            maximum = max(min(_DEFAULT_BATCH_MAX_SIZE, self.max_request_size), batch_size)
        else:
            maximum = integer("batch_max_size", maximum, 0, INT32_MAX)
            if maximum < batch_size:
                raise ConfigError(f"batch.max.size ({maximum}) must be at least batch.size ({batch_size})")
            if maximum > self.max_request_size and maximum != batch_size:
                raise ConfigError(f"batch.max.size ({maximum}) must not exceed max.request.size "
                                  f"({self.max_request_size})")
        factor = self.batch_reallocation_factor
        if isinstance(factor, str):
            try:
                factor = float(factor)
            except ValueError:
                raise ConfigError(f"batch.reallocation.factor must be a number, not {factor!r}") from None
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 < factor <= 1024:
            raise ConfigError(f"batch.reallocation.factor must be a number above 1 (at most 1024), not {factor!r}")
        self._set("batch_initial_size", initial)
        self._set("batch_max_size", maximum)
        self._set("batch_reallocation_factor", float(factor))

    def _resolve_delivery_timeout(self) -> None:
        floor = self.linger_ms + self.request_timeout_ms
        if self.delivery_timeout_ms is None:
            self._set("delivery_timeout_ms", max(_DEFAULT_DELIVERY_TIMEOUT_MS, floor))
            return
        timeout = integer("delivery_timeout_ms", self.delivery_timeout_ms, 0, INT32_MAX)
        if timeout < floor:
            raise ConfigError(f"delivery.timeout.ms ({timeout}) must be at least linger.ms + request.timeout.ms "
                              f"({floor})")
        self._set("delivery_timeout_ms", timeout)

    def _resolve_idempotence(self) -> None:
        conflicts = []
        if self.acks != ACKS_ALL:
            conflicts.append(f"acks must be all (is {self.acks})")
        if self.retries == 0:
            conflicts.append("retries must be above 0")
        if self.max_in_flight_requests_per_connection > 5:
            conflicts.append("max.in.flight.requests.per.connection must be at most 5 "
                             f"(is {self.max_in_flight_requests_per_connection})")
        transactional = self.transactional_id is not None
        if self.enable_idempotence is None:
            if transactional and conflicts:
                raise ConfigError("transactional.id needs idempotence, but " + "; ".join(conflicts))
            self._set("enable_idempotence", not conflicts)
            return
        enabled = boolean("enable_idempotence", self.enable_idempotence)
        if enabled and conflicts:
            raise ConfigError("enable.idempotence is true but " + "; ".join(conflicts))
        if transactional and not enabled:
            raise ConfigError("cannot set a transactional.id without also enabling idempotence "
                              "(enable.idempotence is false)")
        self._set("enable_idempotence", enabled)


def _acks(value: object) -> int:
    text = str(value).strip().lower() if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    acks = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(text) if text is not None else None
    if acks is None:
        raise ConfigError(f"acks must be all, -1, 0 or 1, not {value!r}")
    return acks



"""A partition log's configuration: the subset of Kafka's topic configs the storage layer obeys."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LogConfig", "CREATE_TIME", "LOG_APPEND_TIME", "COMPACT", "DELETE", "COMPRESSION_CODECS",
           "PRODUCER_COMPRESSION"]

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
COMPACT = "compact"
DELETE = "delete"

_INT64_MAX = (1 << 63) - 1
PRODUCER_COMPRESSION = "producer"
# compression.type's values (BrokerCompressionType) and the codec id each stores batches in (None: as sent)
COMPRESSION_CODECS = {"uncompressed": 0, "zstd": 4, "lz4": 3, "snappy": 2, "gzip": 1, PRODUCER_COMPRESSION: None}


@dataclass
class LogConfig:
    """Kafka's topic configs by their Python names; defaults are Kafka 4.0's (``ServerLogConfigs``,
    ``LogConfig.java``). ``-2`` in the ``local_retention_*`` fields means "same as ``retention_*``"."""

    segment_bytes: int = 1 << 30                  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000        # segment.ms
    index_interval_bytes: int = 4096              # index.interval.bytes
    retention_bytes: int = -1                     # retention.bytes (-1: no limit)
    retention_ms: int = 7 * 24 * 3600 * 1000      # retention.ms (-1: no limit)
    message_timestamp_type: str = CREATE_TIME     # message.timestamp.type
    message_timestamp_before_max_ms: int = _INT64_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = _INT64_MAX   # message.timestamp.after.max.ms
    max_message_bytes: int = 1048588              # max.message.bytes
    remote_storage_enable: bool = False           # remote.storage.enable
    local_retention_bytes: int = -2               # local.retention.bytes
    local_retention_ms: int = -2                  # local.retention.ms
    producer_id_expiration_ms: int = 86400000     # producer.id.expiration.ms (a broker config in Kafka)
    cleanup_policy: str = DELETE                  # cleanup.policy: "delete", "compact" or "compact,delete"
    delete_retention_ms: int = 86400000           # delete.retention.ms: how long cleaned tombstones stay
    min_cleanable_dirty_ratio: float = 0.5        # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0                # min.compaction.lag.ms
    max_compaction_lag_ms: int = _INT64_MAX       # max.compaction.lag.ms
    # compression.type: "producer" keeps each batch as its producer compressed it; a codec name
    # ("uncompressed", "gzip", "snappy", "lz4", "zstd") recompresses batches in another codec on append
    compression_type: str = PRODUCER_COMPRESSION
    compression_gzip_level: int = -1              # compression.gzip.level (-1: the Deflater's default)
    compression_lz4_level: int = 9                # compression.lz4.level
    compression_zstd_level: int = 3               # compression.zstd.level
    # Decode every produced batch's records, as Kafka's LogValidator does: record structure, the count,
    # timestamps against the before/after limits, and the batch's MaxTimestamp. Off: header checks only.
    validate_records: bool = True

    def __post_init__(self) -> None:
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"message.timestamp.type must be CreateTime or LogAppendTime, "
                             f"not {self.message_timestamp_type!r}")
        if self.compression_type not in COMPRESSION_CODECS:
            raise ValueError(f"compression.type must be one of {', '.join(COMPRESSION_CODECS)}, "
                             f"not {self.compression_type!r}")
        if self.segment_bytes < 14:  # LegacyRecord.RECORD_OVERHEAD_V0 is Kafka's lower bound
            raise ValueError(f"segment.bytes must be at least 14, not {self.segment_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index.interval.bytes must be at least 0, not {self.index_interval_bytes}")
        if self.max_message_bytes < 0:
            raise ValueError(f"max.message.bytes must be at least 0, not {self.max_message_bytes}")
        for name in ("local_retention_bytes", "local_retention_ms"):
            if getattr(self, name) < -2:
                raise ValueError(f"{name.replace('_', '.')} must be -2, -1 or more")
        policies = [part.strip() for part in self.cleanup_policy.split(",") if part.strip()]
        if not policies or any(part not in (COMPACT, DELETE) for part in policies):
            raise ValueError(f"cleanup.policy must be a list of compact and delete, not {self.cleanup_policy!r}")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError(f"min.cleanable.dirty.ratio must be in [0, 1], not {self.min_cleanable_dirty_ratio}")
        for name in ("delete_retention_ms", "min_compaction_lag_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name.replace('_', '.')} must be at least 0, not {getattr(self, name)}")
        if self.max_compaction_lag_ms < 1:
            raise ValueError(f"max.compaction.lag.ms must be at least 1, not {self.max_compaction_lag_ms}")
        if self.remote_storage_enable and self.compact:  # LogConfig.validateRemoteStorageOnlyIfSystemEnabled
            raise ValueError("Remote log storage is unsupported for the compacted topics")

    @property
    def compact(self) -> bool:
        """cleanup.policy includes compact: the log cleaner keeps the newest record of each key."""
        return COMPACT in (part.strip() for part in self.cleanup_policy.split(","))

    @property
    def delete(self) -> bool:
        """cleanup.policy includes delete: retention.ms and retention.bytes delete old segments."""
        return DELETE in (part.strip() for part in self.cleanup_policy.split(","))

    @property
    def max_segment_ms(self) -> int:
        """segment.ms, capped by max.compaction.lag.ms on a compacted log so that its records can become
        cleanable in time (``LogConfig.maxSegmentMs``)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def target_codec(self) -> int | None:
        """The codec id batches are stored in (None: the producer's)."""
        return COMPRESSION_CODECS[self.compression_type]

    @property
    def compression_level(self) -> int | None:
        """The level to recompress at in the target codec (None: a codec without levels)."""
        return {1: self.compression_gzip_level, 3: self.compression_lz4_level,
                4: self.compression_zstd_level}.get(self.target_codec or 0)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def effective_local_retention_bytes(self) -> int:
        """local.retention.bytes with -2 resolved to retention.bytes (``LogConfig.localRetentionBytes``)."""
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def effective_local_retention_ms(self) -> int:
        """local.retention.ms with -2 resolved to retention.ms (``LogConfig.localRetentionMs``)."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

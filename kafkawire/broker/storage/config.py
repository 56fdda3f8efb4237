"""A partition log's configuration: the subset of Kafka's topic configs the storage layer obeys."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LogConfig", "CREATE_TIME", "LOG_APPEND_TIME"]

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

_INT64_MAX = (1 << 63) - 1


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
    # the log cleaner's: "delete", "compact" or both ("compact,delete"); retention deletes only with "delete"
    cleanup_policy: tuple[str, ...] = ("delete",)  # cleanup.policy
    delete_retention_ms: int = 86400000           # delete.retention.ms (how long tombstones are kept)
    min_compaction_lag_ms: int = 0                # min.compaction.lag.ms
    max_compaction_lag_ms: int = _INT64_MAX       # max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5        # min.cleanable.dirty.ratio
    # Decode every produced batch's records, as Kafka's LogValidator does: record structure, the count,
    # timestamps against the before/after limits, and the batch's MaxTimestamp. Off: header checks only.
    validate_records: bool = True

    def __post_init__(self) -> None:
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"message.timestamp.type must be CreateTime or LogAppendTime, "
                             f"not {self.message_timestamp_type!r}")
        if self.segment_bytes < 14:  # LegacyRecord.RECORD_OVERHEAD_V0 is Kafka's lower bound
            raise ValueError(f"segment.bytes must be at least 14, not {self.segment_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index.interval.bytes must be at least 0, not {self.index_interval_bytes}")
        if self.max_message_bytes < 0:
            raise ValueError(f"max.message.bytes must be at least 0, not {self.max_message_bytes}")
        for name in ("local_retention_bytes", "local_retention_ms"):
            if getattr(self, name) < -2:
                raise ValueError(f"{name.replace('_', '.')} must be -2, -1 or more")

    @property
    def compact(self) -> bool:
        """cleanup.policy includes compact: the log cleaner keeps the newest record of each key."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """cleanup.policy includes delete: retention.ms / retention.bytes delete old segments."""
        return "delete" in self.cleanup_policy

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

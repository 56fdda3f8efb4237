"""The broker's storage: partition logs on disk in Kafka's layout, and a directory standing in for tiered storage.

``DATA/<topic>-<partition>/`` holds ``<20-digit base offset>.log`` segments of record batches with their
assigned offsets, ``.index`` sparse offset indexes (Kafka's format) and ``.snapshot`` producer-state
snapshots (Kafka's format). ``PartitionLog`` appends (validating as Kafka 4.0 does), reads with KIP-74's
per-partition semantics, rolls, recovers a torn tail, applies retention and moves closed segments to a
``RemoteStore``. Pure Python, synchronous; no asyncio here, but for the log cleaner (``cleaner*``:
compaction, whose heavy work runs on a worker thread and whose swap runs on the event loop).
"""
from .config import CREATE_TIME, LOG_APPEND_TIME, LogConfig
from .errors import LogAppendError, OffsetInRemoteTier, OffsetOutOfRange
from .file_records import FileRecords
from .log import AppendResult, LogOffsetMetadata, LogRead, OffsetAndTimestamp, PartitionLog
from .remote import RemoteSegment, RemoteStore
from .validation import DecompressionBudget

__all__ = [
    "LogConfig", "CREATE_TIME", "LOG_APPEND_TIME",
    "LogAppendError", "OffsetOutOfRange", "OffsetInRemoteTier",
    "PartitionLog", "AppendResult", "LogRead", "FileRecords", "LogOffsetMetadata", "OffsetAndTimestamp",
    "RemoteStore", "RemoteSegment", "DecompressionBudget",
]

"""The fixed binary layouts of Kafka's record formats, declared once with construct.

The declarations are the reference: tests and tools parse with them, and the hot paths use
``struct`` formats derived from them (``packed``), so the two cannot drift apart. Offsets and
names follow ``DefaultRecordBatch.java`` and ``LegacyRecord.java``.
"""
from __future__ import annotations

from construct import Int8sb, Int16sb, Int32sb, Int32ub, Int64sb, Struct as Layout

from ..layout_formats import offset_of, packed

__all__ = [
    "BATCH_HEADER", "BATCH_HEADER_SIZE", "LOG_OVERHEAD", "MAGIC_OFFSET", "CRC_OFFSET", "ATTRIBUTES_OFFSET",
    "LEGACY_HEADER_V0", "LEGACY_HEADER_V1", "CONTROL_KEY", "END_TXN_MARKER", "ENTRY_PREFIX", "packed",
]

# Every entry in a records blob, batch or legacy message, starts with these 12 bytes.
ENTRY_PREFIX = Layout(
    "base_offset" / Int64sb,
    "length" / Int32sb,  # bytes after this field
)

# RecordBatch (magic 2), 61 bytes before the records.
BATCH_HEADER = Layout(
    "base_offset" / Int64sb,
    "length" / Int32sb,
    "partition_leader_epoch" / Int32sb,
    "magic" / Int8sb,
    "crc" / Int32ub,  # CRC-32C of everything from attributes to the end of the batch
    "attributes" / Int16sb,
    "last_offset_delta" / Int32sb,
    "base_timestamp" / Int64sb,
    "max_timestamp" / Int64sb,
    "producer_id" / Int64sb,
    "producer_epoch" / Int16sb,
    "base_sequence" / Int32sb,
    "records_count" / Int32sb,
)

# Legacy messages: the log prefix, then a header that differs only in v1's timestamp.
LEGACY_HEADER_V0 = Layout(
    "offset" / Int64sb,
    "size" / Int32sb,
    "crc" / Int32ub,  # CRC-32 (zlib) of everything from magic to the end of the message
    "magic" / Int8sb,
    "attributes" / Int8sb,
)
LEGACY_HEADER_V1 = Layout(
    "offset" / Int64sb,
    "size" / Int32sb,
    "crc" / Int32ub,
    "magic" / Int8sb,
    "attributes" / Int8sb,
    "timestamp" / Int64sb,
)

# The key of a control record, and the value of a commit or abort marker.
CONTROL_KEY = Layout(
    "version" / Int16sb,
    "type" / Int16sb,
)
END_TXN_MARKER = Layout(
    "version" / Int16sb,
    "coordinator_epoch" / Int32sb,
)

LOG_OVERHEAD = ENTRY_PREFIX.sizeof()  # 12
BATCH_HEADER_SIZE = BATCH_HEADER.sizeof()  # 61
MAGIC_OFFSET = offset_of(BATCH_HEADER, "magic")  # 16, the same byte in every format
CRC_OFFSET = offset_of(BATCH_HEADER, "crc")  # 17
ATTRIBUTES_OFFSET = offset_of(BATCH_HEADER, "attributes")  # 21, where the CRC-32C coverage starts

"""Where Kafka keeps a group's offsets: a partition of ``__consumer_offsets`` chosen by the group id.
This broker keeps offsets in its own store, but transactions name that partition (AddOffsetsToTxn adds
it, its marker makes the transaction's offsets visible), so the choice is Kafka's."""
from __future__ import annotations

import struct

__all__ = ["OFFSETS_TOPIC", "OFFSETS_TOPIC_PARTITIONS", "offsets_partition_for"]

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50  # offsets.topic.num.partitions


def offsets_partition_for(group_id: str) -> int:
    """The partition of ``__consumer_offsets`` holding a group (Java's ``abs(groupId.hashCode()) % 50``,
    where Kafka's ``Utils.abs`` masks the sign bit)."""
    units = group_id.encode("utf-16-be")  # Java hashes a string's UTF-16 code units
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % OFFSETS_TOPIC_PARTITIONS

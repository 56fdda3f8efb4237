"""ConsumerGroupMetadata: what a transactional producer needs of a consumer's group to commit the
consumer's offsets inside its transaction (KIP-447): TxnOffsetCommit carries the generation and member
id, so the group coordinator refuses offsets from a member that has lost its partitions."""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["ConsumerGroupMetadata"]


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's place in its group, as Kafka's ConsumerGroupMetadata: outside group management
    (``assign``) the generation is -1 and the member id empty."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

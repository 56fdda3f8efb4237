"""The cleaner's key -> latest offset map, bounded in memory: Kafka's ``SkimpyOffsetMap``.

Kafka keeps 24 bytes a key (an MD5 hash and an offset) in ``log.cleaner.dedupe.buffer.size`` bytes and
stops adding keys at ``log.cleaner.io.buffer.load.factor`` of its slots; a cleaning round then covers the
dirty records up to the last one mapped, and the next round goes on from there. Here the keys
themselves are the map's keys (no hash, so no two keys can ever be taken for one), and each costs what a
Python dict entry does (the entry, the key's bytes object, the offset's int) plus the key's length: the
map counts that estimate against the buffer size, conservatively (a key seen twice is counted twice).
"""
from __future__ import annotations

__all__ = ["ENTRY_OVERHEAD", "OffsetMap"]

# What one entry costs beyond its key's bytes: a bytes object's header (33), an int (32), the dict's
# slot and index (about 40), rounded up.
ENTRY_OVERHEAD = 112


class OffsetMap:
    """Keys (bytes) -> the latest offset seen for each, within ``buffer_size`` bytes at ``load_factor``."""

    def __init__(self, buffer_size: int, load_factor: float = 0.9):
        if buffer_size * load_factor < 2 * ENTRY_OVERHEAD:
            raise ValueError(f"an offset map of {buffer_size} bytes cannot hold a key: raise "
                             f"log.cleaner.dedupe.buffer.size")
        self.limit = int(buffer_size * load_factor)
        self.offsets: dict[bytes, int] = {}
        self.used = 0  # bytes counted so far
        self.latest_offset = -1  # the last offset the map covers (Kafka's latestOffset)

    def __len__(self) -> int:
        return len(self.offsets)

    def clear(self) -> None:
        self.offsets.clear()
        self.used = 0
        self.latest_offset = -1

    def room_for(self, count: int, key_bytes: int) -> bool:
        """Whether ``count`` more keys of ``key_bytes`` bytes in all fit."""
        return self.used + count * ENTRY_OVERHEAD + key_bytes <= self.limit

    def put_all(self, keys, offsets, key_bytes: int) -> None:
        """Map each key to its offset (ascending offsets: the last one of a key wins); ``room_for`` said yes."""
        self.offsets.update(zip(keys, offsets))
        self.used += len(keys) * ENTRY_OVERHEAD + key_bytes

    def put(self, key: bytes, offset: int) -> bool:
        """Map one key; False (and nothing mapped) when the map is full."""
        cost = ENTRY_OVERHEAD + len(key)
        if self.used + cost > self.limit:
            return False
        self.offsets[key] = offset
        self.used += cost
        self.latest_offset = offset
        return True

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, -1 when it is not mapped."""
        return self.offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = max(self.latest_offset, offset)

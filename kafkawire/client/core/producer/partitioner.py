"""Choosing a record's partition as Kafka's built-in partitioner does.

* Keyed records: ``to_positive(murmur2(key)) % num_partitions`` with murmur2 as Java's
  ``Utils.murmur2`` computes it (signed 32-bit result), so keys land where the Java client puts them.
* Unkeyed records (or all records with ``partitioner.ignore.keys``): the uniform sticky partitioner
  (KIP-480, refined by KIP-794). Records stick to one partition until ``batch.size`` bytes have been
  produced to it, then a new partition is picked at random among the available ones (those with a
  leader; all of them if none has). The switch waits until the partition's batches are full, so a
  half-built batch is not abandoned, but happens regardless once twice ``batch.size`` has gone there.

KIP-794's adaptive weighting by queue sizes is not implemented: the choice is uniform.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

from kafkawire.accelerators import load

__all__ = ["murmur2", "to_positive", "partition_for_key", "StickyPartitioner", "StickyState", "Partitioner",
           "py_murmur2", "py_partition_for_key"]

_MASK32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995


def py_murmur2(data: bytes) -> int:
    """MurmurHash2 of ``data`` as Java's ``Utils.murmur2`` returns it: a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length - whole
    if tail:
        # Java switches on the remainder and falls through: byte 2, then 1, then 0 and the multiply
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not abs(), which overflows at MIN_VALUE)."""
    return number & 0x7FFFFFFF


def py_partition_for_key(key: bytes, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError(f"a topic needs at least one partition, got {num_partitions}")
    return to_positive(py_murmur2(key)) % num_partitions


# the C twins (_murmur2.c beside this file) when built: a keyed send hashes its key once per record
_native = load("kafkawire.client.core.producer._murmur2")
murmur2 = _native.murmur2 if _native is not None else py_murmur2
partition_for_key = _native.partition_for_key if _native is not None else py_partition_for_key


class StickyState:
    """One topic's sticky partition and the bytes produced to it since it was picked. Changed in
    place, so the producer can keep a reference per topic for its per-record path."""

    __slots__ = ("partition", "produced_bytes", "num_partitions", "available")

    def __init__(self, partition: int, num_partitions: int, available: tuple[int, ...]):
        self.partition = partition
        self.produced_bytes = 0
        self.num_partitions = num_partitions  # the topic as last seen, for the next switch
        self.available = available


class StickyPartitioner:
    """Per topic, the partition unkeyed records currently stick to and the bytes produced to it."""

    def __init__(self, batch_size: int, rng: random.Random | None = None):
        if batch_size < 0:
            raise ValueError(f"batch_size must not be negative, got {batch_size}")
        # batch.size 0 (batching off) still has to move on eventually: switch after every record
        self.batch_size = max(batch_size, 1)
        self._rng = rng if rng is not None else random.Random()
        self._current: dict[str, StickyState] = {}

    def state(self, topic: str, num_partitions: int, available: Sequence[int] = ()) -> StickyState:
        """``topic``'s sticky state, checked against the topic as now known (``available``: the
        partitions that have a leader); a partition no longer usable is replaced at once."""
        if num_partitions <= 0:
            raise ValueError(f"topic {topic!r} needs at least one partition, got {num_partitions}")
        available = tuple(available)
        sticky = self._current.get(topic)
        if sticky is None:
            sticky = self._current[topic] = StickyState(self._pick(num_partitions, available, None),
                                                        num_partitions, available)
            return sticky
        sticky.num_partitions, sticky.available = num_partitions, available
        if not _usable(sticky.partition, num_partitions, available):
            sticky.partition, sticky.produced_bytes = self._pick(num_partitions, available, None), 0
        return sticky

    def partition(self, topic: str, num_partitions: int, available: Sequence[int] = ()) -> int:
        """The sticky partition of ``topic``; ``available`` lists partitions that have a leader."""
        return self.state(topic, num_partitions, available).partition

    def on_append(self, topic: str, partition: int, appended_bytes: int, batches_full: bool = True) -> None:
        """Count ``appended_bytes`` produced to the sticky ``partition`` and switch when due.

        ``batches_full`` says whether the partition's last batch is full (ready at batch.size):
        switching before that would leave a partial batch behind. Appends to other partitions (keyed
        records, explicit partitions) do not count.
        """
        sticky = self._current.get(topic)
        if sticky is None or sticky.partition != partition:
            return
        sticky.produced_bytes += appended_bytes
        self.switch_if_due(sticky, batches_full)

    def switch_if_due(self, sticky: StickyState, batches_full: bool) -> None:
        """Move ``sticky`` on once ``batch.size`` bytes went to a full batch, or twice that regardless."""
        produced = sticky.produced_bytes
        if produced >= 2 * self.batch_size or (produced >= self.batch_size and batches_full):
            sticky.partition = self._pick(sticky.num_partitions, sticky.available, sticky.partition)
            sticky.produced_bytes = 0

    def _pick(self, num_partitions: int, available: tuple[int, ...], previous: int | None) -> int:
        choices = [p for p in available if 0 <= p < num_partitions] or list(range(num_partitions))
        if previous is not None and len(choices) > 1:
            # KIP-480: moving on means a different partition, or a due switch could be a no-op
            choices = [p for p in choices if p != previous]
        return choices[self._rng.randrange(len(choices))]


def _usable(partition: int, num_partitions: int, available: tuple[int, ...]) -> bool:
    return partition < num_partitions and (not available or partition in available)


class Partitioner:
    """Kafka's built-in partitioner: murmur2 for keyed records, sticky for the rest."""

    def __init__(self, batch_size: int, ignore_keys: bool = False, rng: random.Random | None = None):
        self.ignore_keys = ignore_keys
        self.sticky = StickyPartitioner(batch_size, rng)

    @classmethod
    def from_config(cls, config, rng: random.Random | None = None) -> Partitioner:
        return cls(config.batch_size, config.partitioner_ignore_keys, rng)

    def partition(self, topic: str, key: bytes | None, num_partitions: int, available: Sequence[int] = ()) -> int:
        if key is not None and not self.ignore_keys:
            return partition_for_key(key, num_partitions)
        return self.sticky.partition(topic, num_partitions, available)

    def on_append(self, topic: str, partition: int, appended_bytes: int, batches_full: bool = True) -> None:
        """Tell the sticky partitioner what an append produced (see StickyPartitioner.on_append)."""
        self.sticky.on_append(topic, partition, appended_bytes, batches_full)

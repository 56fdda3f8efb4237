"""Stage 1 of the capture job: splits -> chunk rows, a connection's packets packed together (``chunks``).

Each task takes a run of consecutive splits and opens their files by path; the rows carry where each
payload is in its file, not the payload (gzip files aside). Spark accumulators gather what the tasks
saw: each connection's payload bytes (``ConnectionBytes``) and the reader's counts and skipped runs of
bytes (``ReadStats``).
"""
from __future__ import annotations

from ..capture.model import connection_key
from ..capture.files.packets import iter_split
from ..capture.files.remote_files import is_remote
from ..capture.files.reading import SkippedBytes
from ..capture.files.splits import Split
from .chunks import ChunkPacker

__all__ = ["read_splits", "ConnectionBytes", "ReadStats"]

_CONNECTION_CACHE_LIMIT = 1 << 16


def read_splits(splits: list[Split], sizes=None, reads=None, carry_remote: bool = False):
    """Stage 1's task body (a closure over the run's splits): for each split number of the task, yields
    chunk rows ``((connection, first order), chunk)``, a connection's consecutive packets packed
    together (``chunks.ChunkPacker``). With ``sizes`` (a Spark accumulator of ``ConnectionBytes``),
    adds each connection's payload bytes to it; with ``reads`` (one of ``ReadStats``), the reader's
    counts and the runs of bytes it skipped. With ``carry_remote``, a remote capture's payloads go in the
    chunks (as a gzip capture's do) instead of being read from the store again in stage 2: cheaper when
    the shuffle is this machine's own disk (a local master), dearer on a cluster, where it crosses the
    network (docs/performance.md, "Captures read from an object store")."""
    def run(numbers):
        known: dict[tuple, str] = {}  # connection key per 4-tuple, computed once (a capture has few)
        packer = ChunkPacker()
        stats: dict[str, int] = {}
        skipped: list[SkippedBytes] = []
        for number in numbers:
            split = splits[number]
            carry = carry_remote and is_remote(split.path)
            for packet in iter_split(split, stats, payloads=carry, skipped=skipped):
                four = packet[2:6]  # src, sport, dst, dport: the same place in Packet and PacketRef
                key = known.get(four)
                if key is None:
                    if len(known) >= _CONNECTION_CACHE_LIMIT:
                        known.clear()
                    key = known[four] = connection_key(*four)
                yield from packer.add(key, packet)
        yield from packer.finish()
        if sizes is not None:
            sizes.add(packer.connection_bytes)
        if reads is not None:
            reads.add((stats, {_skip_key(skip): skip for skip in skipped}))
    return run


def _skip_key(skip: SkippedBytes) -> tuple:
    return skip.path, skip.offset, skip.kind


class ConnectionBytes:
    """Spark accumulator parameter: payload bytes per connection, summed over stage 1's tasks."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, total: dict, more: dict) -> dict:
        for key, count in more.items():
            total[key] = total.get(key, 0) + count
        return total


class ReadStats:
    """Spark accumulator parameter: ``(counts, skipped)``, the reader's counts summed over stage 1's tasks
    and its ``SkippedBytes`` by (file, offset, kind), so that a retried task lists each run once."""

    def zero(self, value) -> tuple:
        return {}, {}

    def addInPlace(self, total: tuple, more: tuple) -> tuple:
        for key, count in more[0].items():
            total[0][key] = total[0].get(key, 0) + count
        total[1].update(more[1])
        return total


"""The driver's plan of a run: its capture files cut into splits, and the connections' sampled shares
of their payload, from which the stage-2 partitions are chosen so they come out even.

``plan_captures`` needs no Spark, so the command line runs it in another process while the JVM starts
(``background_plan``).
"""
from __future__ import annotations

import zlib
from typing import NamedTuple

from ..capture.files.inputs import expand_inputs
from ..capture.model import connection_key
from ..capture.files.packets import iter_split
from ..capture.files.remote_files import file_size, is_remote
from ..capture.files.remote_reading import remote_pieces
from ..capture.files.splits import SPLIT_BYTES, Split, plan_splits

__all__ = ["CapturePlan", "plan_captures", "balanced_partitions", "ConnectionPartitioner"]

# The planning walk's sample windows: one per 2 MB of capture, 128 KB long (a sixteenth of the
# packets), which estimated the connections' shares closely enough for even partitions where a
# sixty-fourth did not (docs/performance.md, "Capture decoding: design measurements").
SAMPLE_SPACING = 2 << 20
SAMPLE_WINDOW = 128 << 10
BALANCED_CONNECTIONS = 4096  # connections given a partition by size; the rest are hashed


class CapturePlan(NamedTuple):
    """A run's capture files, the splits they are cut into, and each connection's share of their TCP
    payload as sampled while cutting them (``plan_captures``)."""
    files: list[str]
    splits: list[Split]
    input_bytes: int
    sampled_bytes: dict[str, int]  # connection key -> payload bytes of its packets in the sample windows


def plan_captures(inputs, split_bytes: int = SPLIT_BYTES, *, sample_spacing: int = SAMPLE_SPACING,
                  sample_window: int = SAMPLE_WINDOW) -> CapturePlan:
    """Expands ``inputs`` (files, folders, globs) and cuts every file into splits: the driver's one
    serial walk of the captures.

    The walk cuts at record offsets every ``sample_spacing`` bytes; the splits are runs of those
    pieces, and the packets that start in the first ``sample_window`` bytes of each piece are parsed
    (headers only, about 1/16 of the packets) to estimate how the payload divides among connections,
    which ``balanced_partitions`` uses to spread them over the stage-2 tasks. Each connection's
    sampled bytes are in expectation proportional to its share; gzip files are not sampled."""
    files = expand_inputs(inputs if isinstance(inputs, (list, tuple)) else [inputs])
    if not files:
        raise FileNotFoundError(f"no capture files in {inputs}")
    splits: list[Split] = []
    sampled: dict[str, int] = {}
    for index, path in enumerate(files):
        if is_remote(path):  # one walk by ranged reads cuts and samples it
            splits += _joined(remote_pieces(path, index, min(sample_spacing, split_bytes), sample_window, sampled),
                              split_bytes)
            continue
        pieces = plan_splits(path, index, min(sample_spacing, split_bytes))
        splits += _joined(pieces, split_bytes)
        if pieces[-1].end is not None:  # not gzip (nor empty): its pieces end at offsets
            for piece in pieces:
                _sample(piece, sample_window, sampled)
    return CapturePlan(files, splits, sum(file_size(path) for path in files), sampled)


def _joined(pieces: list[Split], split_bytes: int) -> list[Split]:
    """Consecutive pieces joined into splits of at least ``split_bytes`` (the last may be shorter):
    a split starts where its first piece starts, with that piece's context."""
    splits, first = [], None
    for piece in pieces:
        if first is None:
            first = piece
        if piece.end is None or piece.end - first.start >= split_bytes:
            splits.append(first._replace(end=piece.end))
            first = None
    if first is not None:
        splits.append(first._replace(end=pieces[-1].end))
    return splits


def _sample(piece: Split, window_bytes: int, sampled: dict[str, int]) -> None:
    end = piece.start + window_bytes if piece.end is None else min(piece.end, piece.start + window_bytes)
    for packet in iter_split(piece._replace(end=end), payloads=False):
        key = connection_key(*packet[2:6])
        sampled[key] = sampled.get(key, 0) + packet.payload_length  # type: ignore[union-attr]  # PacketRefs only


def balanced_partitions(sampled_bytes: dict[str, int], partitions: int,
                        limit: int = BALANCED_CONNECTIONS) -> dict[str, int]:
    """A stage-2 partition for each of the ``limit`` largest sampled connections, chosen so the
    partitions' sampled bytes come out even (largest first, each to the least loaded partition):
    hashing alone leaves some partitions with several times the bytes of others, and cores idle
    (docs/performance.md). Connections beyond ``limit`` (and any the sample missed) keep their hash
    partition, and their sampled bytes count there first."""
    ranked = sorted(sampled_bytes.items(), key=lambda item: (-item[1], item[0]))
    loads = [0] * partitions
    for key, count in ranked[limit:]:
        loads[zlib.crc32(key.encode()) % partitions] += count
    chosen = {}
    for key, count in ranked[:limit]:
        partition = min(range(partitions), key=lambda p: (loads[p], p))
        chosen[key] = partition
        loads[partition] += count
    return chosen


class ConnectionPartitioner:
    """The shuffle's partitioner: a connection's chosen partition, else a CRC32 of its key. The same
    for both directions of a connection and in every process (``hash()`` of a str is not, without a
    fixed PYTHONHASHSEED)."""

    def __init__(self, chosen: dict[str, int] | None = None):
        self.chosen = chosen or {}

    def __call__(self, key: tuple[str, int]) -> int:
        partition = self.chosen.get(key[0])
        return zlib.crc32(key[0].encode()) if partition is None else partition


"""A partition's leader epochs: Kafka's ``LeaderEpochFileCache`` and its ``leader-epoch-checkpoint`` file.

Each entry is an epoch and the first offset written in it. The file, in the partition's directory, is
Kafka's checkpoint format: a version line (0), a count line, then one ``epoch start-offset`` line per
entry. OffsetForLeaderEpoch answers from it (``end_offset_for``): where a follower or a consumer that
last saw epoch E must truncate to.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LeaderEpochCache", "CHECKPOINT_FILE", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0


class LeaderEpochCache:
    """(epoch, start offset) entries, ascending in both, kept in ``directory/leader-epoch-checkpoint``."""

    def __init__(self, directory: Path, entries: list[tuple[int, int]]):
        self.path = Path(directory) / CHECKPOINT_FILE
        self.entries = entries

    @classmethod
    def load(cls, directory: Path, rebuild: Iterable[tuple[int, int]]) -> "LeaderEpochCache":
        """The cache from the checkpoint; without one (or a corrupt one), rebuilt from ``rebuild``, the
        log's (partition leader epoch, base offset) of each batch, as Kafka's recovery reassigns them."""
        cache = cls(directory, [])
        try:
            cache.entries = _parse(cache.path.read_text())
        except (OSError, ValueError):
            for epoch, offset in rebuild:
                if epoch >= 0 and (not cache.entries or epoch > cache.entries[-1][0]):
                    cache.entries.append((epoch, offset))
            if cache.entries:
                cache._write()
        return cache

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (``LeaderEpochFileCache.assign``): nothing
        for an epoch not newer than the latest; entries at or past the offset give way to it."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        self.entries = [entry for entry in self.entries if entry[1] < start_offset]
        self.entries.append((epoch, start_offset))
        self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget the epochs that start at or past ``end_offset`` (a log truncated to it)."""
        kept = [entry for entry in self.entries if entry[1] < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: epochs that ended before it go, and the one it falls
        in starts there (``truncateFromStart``)."""
        entries = self.entries
        index = 0
        while index + 1 < len(entries) and entries[index + 1][1] <= start_offset:
            index += 1
        kept = entries[index:]
        if kept and kept[0][1] < start_offset:
            kept[0] = (kept[0][0], start_offset)
        if kept != entries:
            self.entries = kept
            self._write()

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch ``offset`` was written in (UNDEFINED_EPOCH when before every entry)."""
        epoch = UNDEFINED_EPOCH
        for entry_epoch, start in self.entries:
            if start > offset:
                break
            epoch = entry_epoch
        return epoch

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``LeaderEpochFileCache.endOffsetFor``: (the largest epoch <= the requested one, the start
        offset of the first epoch after it), the log end offset for the latest epoch, and
        (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) for an undefined epoch or one newer than any known."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        higher = next((entry for entry in self.entries if entry[0] > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = [entry for entry in self.entries if entry[0] <= requested_epoch]
        return (floor[-1][0] if floor else requested_epoch), higher[1]

    def _write(self) -> None:
        lines = [str(_VERSION), str(len(self.entries))] + [f"{epoch} {offset}" for epoch, offset in self.entries]
        tmp = self.path.with_name(self.path.name + ".tmp")
        # replaced whole, not fsynced: a checkpoint lost in a crash is rebuilt from the batches' epochs
        tmp.write_text("\n".join(lines) + "\n", encoding="ascii")
        os.replace(tmp, self.path)


def _parse(text: str) -> list[tuple[int, int]]:
    lines = text.split("\n")
    if int(lines[0]) != _VERSION:
        raise ValueError(f"unknown leader-epoch-checkpoint version {lines[0]}")
    count = int(lines[1])
    entries = []
    for line in lines[2:2 + count]:
        epoch, offset = line.split()
        entries.append((int(epoch), int(offset)))
    if len(entries) != count:
        raise ValueError("leader-epoch-checkpoint is shorter than its count")
    return entries

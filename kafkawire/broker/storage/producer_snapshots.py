"""The producer-state snapshot files of one partition (``<offset>.snapshot``): Kafka's
``ProducerStateManager`` snapshots, taken at each roll and at a clean close, so that opening a log
replays only the batches after the latest one."""
from __future__ import annotations

from pathlib import Path

from .producer_state import CorruptSnapshot, ProducerStateManager, read_snapshot, write_snapshot
from .segment import segment_name

__all__ = ["ProducerSnapshots"]

_SUFFIX = ".snapshot"


class ProducerSnapshots:
    """The snapshot files in ``directory``, by offset."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.offsets: list[int] = []  # ascending

    def path(self, offset: int) -> Path:
        return self.directory / f"{segment_name(offset)}{_SUFFIX}"

    def load_latest(self, producers: ProducerStateManager, log_end_offset: int, now_ms: int) -> int | None:
        """Load the newest readable snapshot at or below the log end into ``producers`` and return its
        offset (None when there is none); snapshots past the end (a truncated tail) and unreadable
        ones are deleted."""
        offsets = sorted(int(path.stem) for path in self.directory.glob(f"*{_SUFFIX}") if path.stem.isdigit())
        for offset in [offset for offset in offsets if offset > log_end_offset]:
            self.path(offset).unlink(missing_ok=True)
            offsets.remove(offset)
        loaded = None
        while offsets:
            offset = offsets[-1]
            try:
                producers.load(read_snapshot(self.path(offset)), offset, now_ms)
                loaded = offset
                break
            except (OSError, CorruptSnapshot):
                self.path(offset).unlink(missing_ok=True)
                offsets.pop()
        self.offsets = offsets
        return loaded

    def take(self, offset: int, producers: ProducerStateManager) -> None:
        """Write the producer state as of ``offset`` (the log end), unless a snapshot is there already."""
        if self.offsets and self.offsets[-1] >= offset:
            return
        write_snapshot(self.path(offset), producers.producers)
        self.offsets.append(offset)

    def delete_below(self, offset: int) -> None:
        """Snapshots below ``offset`` (the local log start) go, as Kafka deletes those of deleted
        segments; the latest stays."""
        keep = [kept for kept in self.offsets[:-1] if kept >= offset] + self.offsets[-1:]
        for old in self.offsets:
            if old not in keep:
                self.path(old).unlink(missing_ok=True)
        self.offsets = keep

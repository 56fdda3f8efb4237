"""Which log to clean next, and where each log's cleaning stopped: Kafka's ``LogCleanerManager``.

Every ``log.cleaner.backoff.ms`` without work, the manager looks at the logs whose cleanup.policy
includes compact (read from each log's config every time: AlterConfigs may change it), works out
each one's dirty ratio (the bytes written since its last round over its whole size below the first
uncleanable offset) and cleans the filthiest one past its min.cleanable.dirty.ratio, or one whose
max.compaction.lag.ms has passed. Where each log's cleaning stopped, its first dirty offset, is kept in
``cleaner-offset-checkpoint`` (Kafka's file and format) in the data directory.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from .cleaner import (
    CleanableOffsets,
    CleanerAborted,
    CleanerStats,
    LogCleaner,
    cleanable_offsets,
)

if TYPE_CHECKING:
    from ..log import PartitionLog

__all__ = ["CHECKPOINT_FILE", "LogCleanerManager"]

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
_CHECKPOINT_VERSION = 0


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogCleanerManager:
    """Picks logs to clean and runs the cleaner on them, on the event loop (the rounds' heavy work on
    a worker thread)."""

    def __init__(self, data_dir: Path, cleaner: LogCleaner, backoff_ms: int = 15_000,
                 now_ms: Callable[[], int] | None = None):
        self.path = Path(data_dir) / CHECKPOINT_FILE
        self.cleaner = cleaner
        self.backoff_ms = backoff_ms
        self._clock = now_ms if now_ms is not None else _wall_clock_ms
        self.checkpoints: dict[str, int] = {}  # log name (topic-partition) -> first dirty offset
        self.uncleanable: set[str] = set()  # logs a round failed on (until the broker restarts)
        self.rounds = 0

    # ---- the checkpoint file ----------------------------------------------------------------------
    def load(self) -> None:
        """Read ``cleaner-offset-checkpoint`` (a missing or unreadable file: every log is all dirty)."""
        try:
            lines = self.path.read_text().splitlines()
            if int(lines[0]) != _CHECKPOINT_VERSION or int(lines[1]) != len(lines) - 2:
                raise ValueError("bad header")
            for line in lines[2:]:
                topic, partition, offset = line.split()
                self.checkpoints[f"{topic}-{int(partition)}"] = int(offset)
        except FileNotFoundError:
            return
        except (ValueError, IndexError):
            log.warning("ignoring %s: it is not a checkpoint file", self.path)
            self.checkpoints.clear()

    def _save(self) -> None:
        lines = [str(_CHECKPOINT_VERSION), str(len(self.checkpoints))]
        for name, offset in sorted(self.checkpoints.items()):
            topic, _, partition = name.rpartition("-")
            lines.append(f"{topic} {partition} {offset}")
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as out:
            out.write("\n".join(lines) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)

    # ---- choosing -----------------------------------------------------------------------------------
    def filthiest(self, logs: Iterable[PartitionLog], now_ms: int) -> tuple[PartitionLog, CleanableOffsets] | None:
        """The compacted log to clean now (``grabFilthiestCompactedLog``), with what to clean; None when
        no log is dirty enough."""
        best: tuple[PartitionLog, CleanableOffsets] | None = None
        changed = False
        for partition_log in logs:
            name = partition_log.name
            if not partition_log.config.compact or name in self.uncleanable:
                continue
            offsets = cleanable_offsets(partition_log, self.checkpoints.get(name), now_ms)
            if offsets.force_checkpoint:
                self.checkpoints[name] = offsets.first_dirty_offset
                changed = True
            if offsets.clean_bytes + offsets.cleanable_bytes <= 0:
                continue
            due = offsets.max_compaction_delay_ms > 0 and offsets.cleanable_bytes > 0
            if not (due or offsets.cleanable_ratio > partition_log.config.min_cleanable_dirty_ratio):
                continue
            if best is None or offsets.cleanable_ratio > best[1].cleanable_ratio:
                best = (partition_log, offsets)
        if changed:
            self._save()
        return best

    # ---- cleaning -----------------------------------------------------------------------------------
    async def clean_filthiest(self, logs: Iterable[PartitionLog]) -> CleanerStats | None:
        """One round on the filthiest log, if any is dirty enough; its checkpoint moves to where the
        round stopped."""
        now = self._clock()
        logs = list(logs)
        names = {partition_log.name for partition_log in logs}
        for gone in [name for name in self.checkpoints if name not in names]:  # deleted topics
            del self.checkpoints[gone]
        chosen = self.filthiest(logs, now)
        if chosen is None:
            return None
        partition_log, offsets = chosen
        try:
            stats = await self.cleaner.clean(partition_log, offsets, now)
        except CleanerAborted:
            raise
        except (OSError, ValueError) as error:  # Kafka marks the partition uncleanable and goes on
            if partition_log.closed:  # its topic was deleted (or the broker is closing) meanwhile
                return None
            log.error("cleaning %s failed; it will not be cleaned again until restart: %s",
                      partition_log.name, error)
            self.uncleanable.add(partition_log.name)
            return None
        self.rounds += 1
        if stats.swapped:
            self.checkpoints[partition_log.name] = stats.end_offset
            self._save()
        return stats

    async def run(self, logs: Callable[[], Iterable[PartitionLog]]) -> None:
        """Clean forever: the filthiest log, or a wait of ``backoff_ms`` when none is dirty enough."""
        while True:
            try:
                stats = await self.clean_filthiest(logs())
            except CleanerAborted:
                return
            except Exception:  # never let the cleaner die: the next pass tries again
                log.exception("the log cleaner failed")
                stats = None
            if stats is None:
                await asyncio.sleep(self.backoff_ms / 1000)
            else:
                await asyncio.sleep(0)

    def stop(self) -> None:
        self.cleaner.stop()

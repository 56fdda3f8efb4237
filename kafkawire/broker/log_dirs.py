"""Several log directories (log.dirs, JBOD), as Kafka's LogManager keeps them.

New partitions go to the online directory holding the fewest partitions (``LogManager.nextLogDirs``).
A directory that fails (an I/O error on append, or found gone or unwritable by ``check``) is taken
offline: its partitions answer KAFKA_STORAGE_ERROR while the other directories keep serving
(``LogDirFailureChannel``). With a single directory nothing is ever taken offline, as before.

AlterReplicaLogDirs moves a partition with a ``.future`` log (``ReplicaMove``): the files are copied
to ``<dest>/<topic>-<partition>.<id>-future`` on a worker thread while the partition keeps taking
writes, rounds catch up on what was appended meanwhile, and the last small tail is copied on the
event loop (no write between) before the future directory is renamed into place, the log reopened
there and the old directory deleted.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .storage.log import PartitionLog

__all__ = ["LogDirs", "ReplicaMove", "FUTURE_SUFFIX"]

log = logging.getLogger(__name__)

FUTURE_SUFFIX = "-future"  # Kafka's UnifiedLog.FutureDirSuffix
_CATCH_UP_ROUNDS = 20
_NOT_COPIED = (".tmp", ".cleaned", ".swap")  # a log cleaner's round in progress: not part of the log
_SMALL_TAIL = 1 << 20  # what is left to copy once the copy is this close, copied on the loop in one go


class LogDirs:
    """The broker's log directories (absolute paths, log.dirs' order) and which are offline."""

    def __init__(self, dirs: Iterable[Path]):
        self.paths = [os.path.abspath(d) for d in dirs]
        self.offline: set[str] = set()
        self.moves: dict[str, ReplicaMove] = {}  # partition folder name -> the move in progress

    @property
    def several(self) -> bool:
        return len(self.paths) > 1

    def online(self) -> list[str]:
        return [d for d in self.paths if d not in self.offline]

    def prepare(self) -> None:
        """Create every directory; one that cannot be created starts offline (unless it is the only one)."""
        for directory in self.paths:
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as error:
                if not self.several:
                    raise
                log.error("log directory %s is offline: %s", directory, error)
                self.offline.add(directory)

    def locate(self) -> dict[str, str]:
        """Partition folder name -> the online directory holding it (the first one if several do)."""
        found: dict[str, str] = {}
        for directory in reversed(self.online()):
            try:
                with os.scandir(directory) as entries:
                    found.update((entry.name, directory) for entry in entries if entry.is_dir())
            except OSError as error:
                self.fail(directory, error)
        return found

    def place(self, count: int, logs: Iterable[PartitionLog]) -> list[str]:
        """Directories for ``count`` new partitions: each to the online one with the fewest partitions."""
        online = self.online()
        if not online:
            raise OSError("every log directory is offline")
        counts = dict.fromkeys(online, 0)
        for partition_log in logs:
            parent = partition_log.log_dir
            if parent in counts:
                counts[parent] += 1
        chosen = []
        for _ in range(count):
            directory = min(online, key=counts.__getitem__)  # (ties: log.dirs' order)
            counts[directory] += 1
            chosen.append(directory)
        return chosen

    def fail(self, directory: str, error: BaseException | str, logs: Iterable[PartitionLog] = ()) -> bool:
        """Take ``directory`` offline (with several directories): its logs stop serving. True if it was."""
        if not self.several or directory not in self.paths:
            return False
        if directory not in self.offline:
            log.error("log directory %s is offline: %s", directory, error)
            self.offline.add(directory)
        for partition_log in logs:
            if partition_log.log_dir == directory and not partition_log.offline:
                partition_log.offline = True
                try:
                    partition_log.detach()
                except OSError:
                    pass
        for move in list(self.moves.values()):
            if directory in (move.destination, move.log.log_dir):
                move.cancel()
        return True

    def check(self) -> list[str]:
        """The online directories found gone or unwritable (to be taken offline)."""
        return [d for d in self.online() if not (os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK))]


class ReplicaMove:
    """One partition's move to another log directory with a future log (see the module's docstring)."""

    def __init__(self, partition_log: PartitionLog, destination: str):
        self.log = partition_log
        self.destination = destination
        self.future = os.path.join(destination, f"{partition_log.name}.{uuid.uuid4().hex}{FUTURE_SUFFIX}")
        self.copied: dict[str, tuple[int, int]] = {}  # file name -> (size, mtime_ns) copied
        self.cancelled = False
        self.task: asyncio.Task | None = None

    @property
    def future_size(self) -> int:
        return sum(size for name, (size, _) in self.copied.items() if name.endswith(".log"))

    def offset_lag(self) -> int:
        """Offsets of the current log not yet in the future log (whole segments still to copy)."""
        current = self.log
        if current.offline or current.closed or not current.opened:
            return 0
        for segment in current.segments:
            name = f"{segment.base_offset:020d}.log"
            if self.copied.get(name, (-1, 0))[0] != segment.size:
                return max(0, current.log_end_offset - segment.base_offset)
        return 0

    def cancel(self) -> None:
        self.cancelled = True

    def _pending(self, segments_only: bool) -> tuple[list[str], int]:
        """Files changed since copied (only the segments' .log files, or every file), and the bytes
        of those segments still to copy."""
        names, total = [], 0
        with os.scandir(str(self.log.directory)) as entries:
            for entry in entries:
                is_segment = entry.name.endswith(".log")
                if not entry.is_file() or (segments_only and not is_segment) or entry.name.endswith(_NOT_COPIED):
                    continue
                stat = entry.stat()
                if self.copied.get(entry.name) != (stat.st_size, stat.st_mtime_ns):
                    names.append(entry.name)
                    if is_segment:
                        total += max(0, stat.st_size - self.copied.get(entry.name, (0, 0))[0])
        return names, total

    def _copy(self, names: list[str]) -> None:
        """Copy these files; a segment's .log, appended to only, from where the last copy ended."""
        source = str(self.log.directory)
        os.makedirs(self.future, exist_ok=True)
        for name in names:
            path, target = os.path.join(source, name), os.path.join(self.future, name)
            try:
                stat = os.stat(path)
                done = self.copied.get(name, (0, 0))[0]
                if name.endswith(".log") and 0 < done <= stat.st_size and os.path.exists(target):
                    with open(path, "rb") as reader, open(target, "r+b") as writer:
                        reader.seek(done)
                        writer.truncate(done)
                        writer.seek(done)
                        shutil.copyfileobj(reader, writer)
                else:
                    shutil.copyfile(path, target)
            except FileNotFoundError:  # removed meanwhile (retention, the cleaner): dropped below
                self.copied.pop(name, None)
                continue
            self.copied[name] = (stat.st_size, stat.st_mtime_ns)
        present = set(os.listdir(source))
        for name in [n for n in self.copied if n not in present]:
            del self.copied[name]
            Path(self.future, name).unlink(missing_ok=True)

    async def run(self, swap: Callable[[PartitionLog, str], None]) -> None:
        """Copy and catch up off the loop, then finish on it: ``swap(the log, its new directory)``
        relocates the (closed) log there. Cancelled or failed: the future directory is removed and the log stays."""
        closed = False
        try:
            for _ in range(_CATCH_UP_ROUNDS):
                if self.cancelled or self.log.closed:
                    return
                if self.log.opened:
                    self.log.flush()
                names, size = await asyncio.to_thread(self._pending, True)
                if size <= _SMALL_TAIL:
                    break
                await asyncio.to_thread(self._copy, names)
            if self.cancelled or self.log.closed:
                return
            # on the loop from here: no write comes between the last copy and the swap
            self.log.close()  # flushed, producer snapshot and clean-shutdown marker: the final files
            closed = True
            self._copy(self._pending(False)[0])
            target = os.path.join(self.destination, self.log.name)
            os.replace(self.future, target)
            swap(self.log, target)
        except OSError as error:
            log.error("moving %s to %s failed: %s", self.log.name, self.destination, error)
            self.cancelled = True
            if closed:  # the current log serves again where it was
                swap(self.log, str(self.log.directory))
        finally:
            if self.cancelled or os.path.isdir(self.future):
                await asyncio.to_thread(shutil.rmtree, self.future, True)

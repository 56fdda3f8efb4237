"""An append-only file of JSON lines, the broker's stand-in for a compacted internal topic
(``__consumer_offsets``, ``__transaction_state``).

Each record is one line, written with one unbuffered ``write`` before the change it records is
acknowledged (so it survives the process being killed; with ``fsync`` also a power loss). Reading back
drops a torn last line (no newline, or not JSON) and skips unreadable ones. The owner keeps the state
the lines describe; when the file has grown well past its last compacted size the journal asks the
owner for the lines that say the same thing now (``snapshot``) and rewrites the file with them:
temporary file, fsync, rename, fsync of the directory.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["Journal"]

log = logging.getLogger(__name__)


class Journal:
    """``path``'s lines; ``snapshot()`` gives the lines that replace them all on compaction."""

    def __init__(self, path: Path, snapshot: Callable[[], Iterable[dict]], *, fsync: bool = False,
                 compact_min_bytes: int = 16 << 20):
        self.path = Path(path)
        self.snapshot = snapshot
        self.fsync = fsync
        self._compact_min_bytes = compact_min_bytes
        self._file: BinaryIO | None = None
        self._size = 0  # bytes in the file
        self._compacted_size = 0  # its size right after the last compaction

    def read(self) -> Iterator[dict]:
        """The records in the file, in order (a torn last line and unreadable lines skipped)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        lines = raw.split(b"\n")
        if lines and lines[-1] != b"":
            log.warning("%s: dropping a torn last line of %d bytes", self.path, len(lines[-1]))
        for number, line in enumerate(lines[:-1], 1):  # the last element follows the final newline
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                log.warning("%s:%d: skipping an unreadable line (%s)", self.path, number, exc)
                continue
            if isinstance(record, dict):
                yield record

    def open(self) -> None:
        """Start appending: the file is compacted first (the owner has applied what ``read`` gave)."""
        self.compact()

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            finally:
                self._file = None

    def append(self, record: dict) -> None:
        """Write one record durably (raises OSError; the owner applies the change only after)."""
        if self._file is None:
            raise OSError(f"{self.path} is not open")
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            written = self._file.write(view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._file.fileno())
        self._size += len(data)

    def maybe_compact(self) -> None:
        """Compact once the file has grown well past its compacted size; call after applying a change."""
        if self._size <= max(self._compact_min_bytes, 4 * self._compacted_size):
            return
        try:
            self.compact()
        except OSError as exc:  # the records are written: carry on appending to the old file
            log.warning("%s: compaction failed: %s", self.path, exc)
            if self._file is None:
                self._file = open(self.path, "ab", buffering=0)
            self._compacted_size = self._size

    def compact(self) -> None:
        """Rewrite the file as ``snapshot()``'s lines."""
        self.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in self.snapshot()).encode("utf-8")
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        self._file = open(self.path, "ab", buffering=0)
        self._size = self._compacted_size = len(data)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # not possible on some platforms; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

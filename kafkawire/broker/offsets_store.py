"""The group coordinator's durable state: committed offsets and each group's last generation.

Kafka keeps these as records in the compacted ``__consumer_offsets`` topic. This broker keeps them in one
append-only file of JSON lines under the coordinator's data directory::

    {"g": "<group>", "o": [["<topic>", <partition>, <offset>, <leader epoch>, "<metadata>", <commit ms>], ...]}
    {"g": "<group>", "gen": <generation>, "pt": "<protocol type>" | null}

One OffsetCommit request is one line, so a commit is applied whole or not at all: a line torn by a crash
(no trailing newline, or not valid JSON) is dropped when the file is read back. Later lines override
earlier ones. ``load()`` compacts the file (one line per group and kind, written to a temporary file,
flushed, fsynced and atomically renamed over the old one) and so does an append once the file has grown
well past its compacted size. Every append is written with one unbuffered ``write`` before the commit is
acknowledged (it survives the process being killed); with ``fsync=True`` it is also fsynced (it survives
a power loss).
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = ["CommittedOffset", "OffsetStore", "OFFSETS_FILE_NAME"]

log = logging.getLogger(__name__)

OFFSETS_FILE_NAME = "consumer-offsets.jsonl"


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One committed position of a group in a partition."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


class OffsetStore:
    """Committed offsets (group -> (topic, partition) -> CommittedOffset) and group generations, on disk."""

    def __init__(self, data_dir: Path, *, fsync: bool = False, compact_min_bytes: int = 16 << 20) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / OFFSETS_FILE_NAME
        self.fsync = fsync
        self._compact_min_bytes = compact_min_bytes
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self.groups: dict[str, tuple[int, str | None]] = {}  # group -> (generation, protocol type)
        self._file: BinaryIO | None = None
        self._size = 0  # bytes in the file
        self._compacted_size = 0  # its size right after the last compaction

    # -- lifecycle ---------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the file back (dropping a torn tail), compact it and open it for appending."""
        self.close()
        self.offsets.clear()
        self.groups.clear()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
        lines = raw.split(b"\n")
        if lines and lines[-1] != b"":
            log.warning("%s: dropping a torn last line of %d bytes", self.path, len(lines[-1]))
        for number, line in enumerate(lines[:-1], 1):  # the last element follows the final newline
            if not line.strip():
                continue
            try:
                self._apply(json.loads(line))
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                log.warning("%s:%d: skipping an unreadable line (%s)", self.path, number, exc)
        # Groups with no committed offsets are dropped here, as Kafka's offset cleanup drops empty
        # groups without offsets.
        for group_id in [g for g in self.groups if not self.offsets.get(g)]:
            del self.groups[group_id]
        self._compact()

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            finally:
                self._file = None

    # -- updates -----------------------------------------------------------------------------------

    def commit(self, group_id: str, entries: list[tuple[tuple[str, int], CommittedOffset]]) -> None:
        """Durably record ``entries`` for ``group_id``, then apply them in memory (raises OSError)."""
        if not entries:
            return
        record = {"g": group_id, "o": [[topic, partition, c.offset, c.leader_epoch, c.metadata,
                                        c.commit_timestamp_ms] for (topic, partition), c in entries]}
        self._append(record)
        committed = self.offsets.setdefault(group_id, {})
        for key, value in entries:
            committed[key] = value

    def record_group(self, group_id: str, generation: int, protocol_type: str | None) -> None:
        """Record a group's new generation (so that generations keep increasing across restarts)."""
        if self.groups.get(group_id) == (generation, protocol_type):
            return
        self._append({"g": group_id, "gen": generation, "pt": protocol_type})
        self.groups[group_id] = (generation, protocol_type)

    # -- internals ---------------------------------------------------------------------------------

    def _apply(self, record: dict) -> None:
        group_id = record["g"]
        if not isinstance(group_id, str):
            raise TypeError("group id is not a string")
        if "o" in record:
            committed = self.offsets.setdefault(group_id, {})
            for topic, partition, offset, epoch, metadata, timestamp in record["o"]:
                committed[(str(topic), int(partition))] = CommittedOffset(
                    int(offset), int(epoch), "" if metadata is None else str(metadata), int(timestamp))
        if "gen" in record:
            protocol_type = record.get("pt")
            self.groups[group_id] = (int(record["gen"]), None if protocol_type is None else str(protocol_type))

    def _append(self, record: dict) -> None:
        if self._file is None:
            raise OSError(f"{self.path} is not open (OffsetStore.load() was not called, or it was closed)")
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            written = self._file.write(view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._file.fileno())
        self._size += len(data)
        if self._size > max(self._compact_min_bytes, 4 * self._compacted_size):
            try:
                self._compact()
            except OSError as exc:  # the record itself is written: carry on appending to the old file
                log.warning("%s: compaction failed: %s", self.path, exc)
                if self._file is None:
                    self._file = open(self.path, "ab", buffering=0)
                self._compacted_size = self._size

    def _snapshot_lines(self):
        for group_id in sorted(set(self.groups) | set(self.offsets)):
            if group_id in self.groups:
                generation, protocol_type = self.groups[group_id]
                yield {"g": group_id, "gen": generation, "pt": protocol_type}
            committed = self.offsets.get(group_id)
            if committed:
                yield {"g": group_id, "o": [[topic, partition, c.offset, c.leader_epoch, c.metadata,
                                             c.commit_timestamp_ms]
                                            for (topic, partition), c in sorted(committed.items())]}

    def _compact(self) -> None:
        """Rewrite the file as one line per group and kind: temporary file, fsync, rename, fsync dir."""
        self.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        data = "".join(json.dumps(line, separators=(",", ":")) + "\n"
                       for line in self._snapshot_lines()).encode("utf-8")
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.data_dir)
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

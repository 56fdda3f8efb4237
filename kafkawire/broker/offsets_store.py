"""The group coordinator's durable state: committed offsets and each group's metadata.

Kafka keeps these as records in the compacted ``__consumer_offsets`` topic: offset commits, and a
group metadata record written when a generation's assignment is known (its members, their
subscriptions and assignments), so that after a restart the members carry on. This broker keeps them
in one append-only file of JSON lines under the coordinator's data directory::

    {"g": "<group>", "o": [["<topic>", <partition>, <offset>, <leader epoch>, "<metadata>", <commit ms>], ...]}
    {"g": "<group>", "gen": <generation>, "pt": "<protocol type>" | null,
     "proto": "<protocol>" | null, "leader": "<member id>" | null,
     "m": [["<member id>", "<instance id>" | null, "<client id>", "<host>", <rebalance ms>, <session ms>,
            "<metadata, base64>", "<assignment, base64>"], ...]}

One OffsetCommit request is one line, so a commit is applied whole or not at all: a line torn by a crash
(no trailing newline, or not valid JSON) is dropped when the file is read back. Later lines override
earlier ones. ``load()`` compacts the file (one line per group and kind, written to a temporary file,
flushed, fsynced and atomically renamed over the old one) and so does an append once the file has grown
well past its compacted size. Every append is written with one unbuffered ``write`` before the commit is
acknowledged (it survives the process being killed); with ``fsync=True`` it is also fsynced (it survives
a power loss).
"""
from __future__ import annotations

import base64
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

__all__ = ["CommittedOffset", "GroupRecord", "MemberRecord", "OffsetStore", "OFFSETS_FILE_NAME"]

log = logging.getLogger(__name__)

OFFSETS_FILE_NAME = "consumer-offsets.jsonl"


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One committed position of a group in a partition."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """A member of a group's stored generation (Kafka's MemberMetadataValue)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    metadata: bytes  # its subscription for the group's protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A group's stored metadata (Kafka's GroupMetadataValue): its generation and, once the
    generation's assignment is known, its protocol, leader and members."""

    generation: int
    protocol_type: str | None
    protocol: str | None = None
    leader: str | None = None
    members: tuple[MemberRecord, ...] = field(default=())


class OffsetStore:
    """Committed offsets (group -> (topic, partition) -> CommittedOffset) and group generations, on disk."""

    def __init__(self, data_dir: Path, *, fsync: bool = False, compact_min_bytes: int = 16 << 20) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / OFFSETS_FILE_NAME
        self.fsync = fsync
        self._compact_min_bytes = compact_min_bytes
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self.groups: dict[str, GroupRecord] = {}
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
        # Empty groups with no committed offsets are dropped here, as Kafka's offset cleanup drops them.
        for group_id in [g for g, record in self.groups.items() if not self.offsets.get(g) and not record.members]:
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

    def record_group(self, group_id: str, record: GroupRecord) -> None:
        """Record a group's metadata: its new generation (so that generations keep increasing across
        restarts), with its members once their assignment is known."""
        if self.groups.get(group_id) == record:
            return
        self._append(_group_line(group_id, record))
        self.groups[group_id] = record

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
            members = tuple(MemberRecord(str(m[0]), None if m[1] is None else str(m[1]), str(m[2]), str(m[3]),
                                         int(m[4]), int(m[5]), base64.b64decode(m[6]), base64.b64decode(m[7]))
                            for m in record.get("m") or ())
            self.groups[group_id] = GroupRecord(int(record["gen"]), None if protocol_type is None else str(protocol_type),
                                                record.get("proto"), record.get("leader"), members)

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
                yield _group_line(group_id, self.groups[group_id])
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


def _group_line(group_id: str, record: GroupRecord) -> dict:
    line = {"g": group_id, "gen": record.generation, "pt": record.protocol_type}
    if record.members:
        line.update(proto=record.protocol, leader=record.leader, m=[
            [m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
             m.session_timeout_ms, base64.b64encode(m.metadata).decode("ascii"),
             base64.b64encode(m.assignment).decode("ascii")] for m in record.members])
    return line


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

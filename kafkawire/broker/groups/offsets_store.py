"""The group coordinator's durable state: committed offsets and each group's metadata.

Kafka keeps these as records in the compacted ``__consumer_offsets`` topic: offset commits, and a
group metadata record written when a generation's assignment is known (its members, their
subscriptions and assignments), so that after a restart the members carry on. This broker keeps them
in one append-only file of JSON lines under the coordinator's data directory::

    {"g": "<group>", "o": [["<topic>", <partition>, <offset>, <leader epoch>, "<metadata>", <commit ms>], ...]}
    {"g": "<group>", "pid": <producer id>, "o": [...]}            offsets committed in an open transaction
    {"g": "<group>", "pid": <producer id>, "end": "commit" | "abort"}   ... and the transaction's end
    {"g": "<group>", "gen": <generation>, "pt": "<protocol type>" | null,
     "proto": "<protocol>" | null, "leader": "<member id>" | null,
     "m": [["<member id>", "<instance id>" | null, "<client id>", "<host>", <rebalance ms>, <session ms>,
            "<metadata, base64>", "<assignment, base64>"], ...]}

One OffsetCommit request is one line, so a commit is applied whole or not at all; later lines override
earlier ones. The file is a ``Journal`` (torn lines dropped, compaction to one line per group and kind,
written before the commit is acknowledged).
"""
from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..persistence.journal import Journal

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
    """Committed offsets (group -> (topic, partition) -> CommittedOffset), offsets pending in open
    transactions (group -> producer id -> ...) and group generations, on disk."""

    def __init__(self, data_dir: Path, *, fsync: bool = False, compact_min_bytes: int = 16 << 20) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / OFFSETS_FILE_NAME
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self.pending: dict[str, dict[int, dict[tuple[str, int], CommittedOffset]]] = {}
        self.groups: dict[str, GroupRecord] = {}
        self._journal = Journal(self.path, self._snapshot_lines, fsync=fsync, compact_min_bytes=compact_min_bytes)

    @property
    def fsync(self) -> bool:
        return self._journal.fsync

    # -- lifecycle ---------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the file back (dropping a torn tail), compact it and open it for appending."""
        self.close()
        self.offsets.clear()
        self.pending.clear()
        self.groups.clear()
        for record in self._journal.read():
            try:
                self._apply(record)
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                log.warning("%s: skipping an unreadable line (%s)", self.path, exc)
        # Empty groups with no committed offsets are dropped here, as Kafka's offset cleanup drops them.
        for group_id in [g for g, record in self.groups.items()
                         if not self.offsets.get(g) and not record.members and not self.pending.get(g)]:
            del self.groups[group_id]
        self._journal.open()

    def close(self) -> None:
        self._journal.close()

    # -- updates -----------------------------------------------------------------------------------

    def commit(self, group_id: str, entries: list[tuple[tuple[str, int], CommittedOffset]]) -> None:
        """Durably record ``entries`` for ``group_id``, then apply them in memory (raises OSError)."""
        if not entries:
            return
        self._write({"g": group_id, "o": _offset_rows(entries)})
        committed = self.offsets.setdefault(group_id, {})
        for key, value in entries:
            committed[key] = value

    def commit_pending(self, group_id: str, producer_id: int,
                       entries: list[tuple[tuple[str, int], CommittedOffset]]) -> None:
        """Record offsets committed in ``producer_id``'s open transaction (TxnOffsetCommit): they take
        effect when the transaction commits, and are dropped if it aborts."""
        if not entries:
            return
        self._write({"g": group_id, "pid": producer_id, "o": _offset_rows(entries)})
        pending = self.pending.setdefault(group_id, {}).setdefault(producer_id, {})
        for key, value in entries:
            pending[key] = value

    def complete_pending(self, group_id: str, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended: its pending offsets for the group become committed (or go)."""
        if producer_id not in self.pending.get(group_id, {}):
            return
        self._write({"g": group_id, "pid": producer_id, "end": "commit" if commit else "abort"})
        self._end_pending(group_id, producer_id, commit)

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset for the partition (OffsetFetch's require_stable)."""
        return any((topic, partition) in offsets for offsets in self.pending.get(group_id, {}).values())

    def record_group(self, group_id: str, record: GroupRecord) -> None:
        """Record a group's metadata: its new generation (so that generations keep increasing across
        restarts), with its members once their assignment is known."""
        if self.groups.get(group_id) == record:
            return
        self._write(_group_line(group_id, record))
        self.groups[group_id] = record

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups: forget the group's metadata and its committed offsets, durably."""
        self._write({"g": group_id, "delete": "group"})
        self._forget_group(group_id)

    def delete_offsets(self, group_id: str, keys: list[tuple[str, int]]) -> None:
        """OffsetDelete: forget the group's committed offsets of these partitions, durably."""
        if keys:
            self._write({"g": group_id, "delete": [[topic, partition] for topic, partition in keys]})
            self._forget_offsets(group_id, keys)

    def _forget_group(self, group_id: str) -> None:
        self.offsets.pop(group_id, None)
        self.pending.pop(group_id, None)
        self.groups.pop(group_id, None)

    def _forget_offsets(self, group_id: str, keys) -> None:
        committed = self.offsets.get(group_id, {})
        for key in keys:
            committed.pop(key, None)
        if not committed:
            self.offsets.pop(group_id, None)

    # -- internals ---------------------------------------------------------------------------------

    def _write(self, record: dict) -> None:
        self._journal.append(record)
        self._journal.maybe_compact()

    def _end_pending(self, group_id: str, producer_id: int, commit: bool) -> None:
        by_producer = self.pending.get(group_id, {})
        offsets = by_producer.pop(producer_id, None)
        if not by_producer:
            self.pending.pop(group_id, None)
        if commit and offsets:
            self.offsets.setdefault(group_id, {}).update(offsets)

    def _apply(self, record: dict) -> None:
        group_id = record["g"]
        if not isinstance(group_id, str):
            raise TypeError("group id is not a string")
        if "delete" in record:  # DeleteGroups ("group") or OffsetDelete (the partitions)
            deleted = record["delete"]
            if deleted == "group":
                self._forget_group(group_id)
            else:
                self._forget_offsets(group_id, [(str(topic), int(partition)) for topic, partition in deleted])
        elif "end" in record:
            self._end_pending(group_id, int(record["pid"]), record["end"] == "commit")
        elif "o" in record:
            if "pid" in record:
                target = self.pending.setdefault(group_id, {}).setdefault(int(record["pid"]), {})
            else:
                target = self.offsets.setdefault(group_id, {})
            for topic, partition, offset, epoch, metadata, timestamp in record["o"]:
                target[(str(topic), int(partition))] = CommittedOffset(
                    int(offset), int(epoch), "" if metadata is None else str(metadata), int(timestamp))
        if "gen" in record:
            protocol_type = record.get("pt")
            members = tuple(MemberRecord(str(m[0]), None if m[1] is None else str(m[1]), str(m[2]), str(m[3]),
                                         int(m[4]), int(m[5]), base64.b64decode(m[6]), base64.b64decode(m[7]))
                            for m in record.get("m") or ())
            self.groups[group_id] = GroupRecord(int(record["gen"]), None if protocol_type is None else str(protocol_type),
                                                record.get("proto"), record.get("leader"), members)

    def _snapshot_lines(self):
        for group_id in sorted(set(self.groups) | set(self.offsets) | set(self.pending)):
            if group_id in self.groups:
                yield _group_line(group_id, self.groups[group_id])
            committed = self.offsets.get(group_id)
            if committed:
                yield {"g": group_id, "o": _offset_rows(sorted(committed.items()))}
            for producer_id, offsets in sorted(self.pending.get(group_id, {}).items()):
                yield {"g": group_id, "pid": producer_id, "o": _offset_rows(sorted(offsets.items()))}


def _offset_rows(entries) -> list:
    return [[topic, partition, c.offset, c.leader_epoch, c.metadata, c.commit_timestamp_ms]
            for (topic, partition), c in entries]


def _group_line(group_id: str, record: GroupRecord) -> dict:
    line = {"g": group_id, "gen": record.generation, "pt": record.protocol_type}
    if record.members:
        line.update(proto=record.protocol, leader=record.leader, m=[
            [m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
             m.session_timeout_ms, base64.b64encode(m.metadata).decode("ascii"),
             base64.b64encode(m.assignment).decode("ascii")] for m in record.members])
    return line

"""The durable state of KIP-848 consumer groups, so that members carry on across a broker restart with
their member ids, epochs and assignments (no rebalance, no FENCED_MEMBER_EPOCH).

Kafka writes a group's state to ``__consumer_offsets`` as records, one kind a concern
(ConsumerGroupMetadata: the group epoch; ConsumerGroupPartitionMetadata: the subscribed topics;
ConsumerGroupMemberMetadata: a member's subscription; ConsumerGroupTargetAssignmentMetadata/Member:
the target assignment; ConsumerGroupCurrentMemberAssignment: a member's epochs and current
assignment), each with a tombstone, and replays them when the coordinator loads. This broker keeps the
same facts in a ``Journal`` of JSON lines next to the offsets, one line a change of one group::

    {"g": "<group>", "grp": {"e": <group epoch>, "ae": <assignment epoch>, "as": "<assignor>",
                             "tm": {"<topic>": ["<topic id>", <partitions>]}},
     "m": {"<member id>": {<the member and its target assignment>} | null}}
    {"g": "<group>", "delete": true}

``grp`` is there when the group's own fields changed, ``m`` holds the members that changed (null: the
member left). One heartbeat's changes are one line, written before the heartbeat is answered, so a
change is replayed whole or not at all. Compaction rewrites one line per group.
"""
from __future__ import annotations

import logging
import uuid
from pathlib import Path

from .consumer_state import Assignment, ConsumerGroup, Member, MemberState
from ..persistence.journal import Journal

__all__ = ["ConsumerGroupStore", "CONSUMER_GROUPS_FILE_NAME"]

log = logging.getLogger(__name__)

CONSUMER_GROUPS_FILE_NAME = "consumer-groups.jsonl"


class ConsumerGroupStore:
    """What was last written of each group: ``save(group)`` writes what changed since, ``load()`` gives the
    groups back (without their session deadlines: the coordinator starts those afresh)."""

    def __init__(self, data_dir: Path, *, fsync: bool = False, compact_min_bytes: int = 16 << 20):
        self.path = Path(data_dir) / CONSUMER_GROUPS_FILE_NAME
        # group id -> (group fields, member id -> member fields), as written
        self._written: dict[str, tuple[dict, dict[str, dict]]] = {}
        # group id -> member id -> (member, target) objects last serialized: unchanged objects are skipped
        self._seen: dict[str, dict[str, tuple[Member, Assignment | None]]] = {}
        self._journal = Journal(self.path, self._snapshot_lines, fsync=fsync, compact_min_bytes=compact_min_bytes)

    def load(self) -> dict[str, ConsumerGroup]:
        """Replay the file (a torn last line dropped), compact it and open it for appending."""
        self.close()
        self._written.clear()
        self._seen.clear()
        for record in self._journal.read():
            try:
                self._apply(record)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.warning("%s: skipping an unreadable line (%s)", self.path, exc)
        groups: dict[str, ConsumerGroup] = {}
        for group_id in list(self._written):
            try:
                restored = self.restore(group_id)
                if restored is not None:
                    groups[group_id] = restored
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.warning("%s: dropping group %s, its state is unreadable (%s)", self.path, group_id, exc)
                del self._written[group_id]
        self._journal.open()
        return groups

    def close(self) -> None:
        self._journal.close()

    def save(self, group: ConsumerGroup) -> None:
        """Write what changed in ``group`` since it was last saved (raises OSError; nothing is recorded
        as written then, so the caller may put the group back as ``restore`` gives it)."""
        fields, members = self._written.get(group.group_id, (None, {}))
        seen = self._seen.get(group.group_id, {})
        new_fields = _group_fields(group)
        changed: dict[str, dict | None] = {}
        new_seen = {}
        for member_id, member in group.members.items():
            target = group.target.get(member_id)
            new_seen[member_id] = (member, target)
            previous = seen.get(member_id)
            if previous is not None and previous[0] is member and previous[1] is target:
                continue
            serialized = _member_fields(member, target)
            if members.get(member_id) != serialized:
                changed[member_id] = serialized
        for member_id in members:
            if member_id not in group.members:
                changed[member_id] = None
        if new_fields == fields and not changed:
            self._seen[group.group_id] = new_seen
            return
        line: dict = {"g": group.group_id}
        if new_fields != fields:
            line["grp"] = new_fields
        if changed:
            line["m"] = changed
        self._journal.append(line)
        self._apply(line)
        self._seen[group.group_id] = new_seen
        self._journal.maybe_compact()

    def delete(self, group_id: str) -> None:
        """Forget the group for good (DeleteGroups, or the id becoming a classic group); raises OSError."""
        if group_id not in self._written:
            return
        self._journal.append({"g": group_id, "delete": True})
        self._apply({"g": group_id, "delete": True})
        self._journal.maybe_compact()

    def restore(self, group_id: str) -> ConsumerGroup | None:
        """The group as last written (None: not written, or deleted)."""
        written = self._written.get(group_id)
        if written is None:
            return None
        fields, members = written
        group = ConsumerGroup(group_id, group_epoch=int(fields["e"]), assignment_epoch=int(fields["ae"]),
                              assignor=str(fields["as"]),
                              subscription_metadata={str(topic): (uuid.UUID(topic_id), int(count))
                                                     for topic, (topic_id, count) in fields["tm"].items()})
        for member_id, data in members.items():
            member, target = _member_from(member_id, data)
            group.put(member)
            if target is not None:
                group.target[member_id] = target
        self._seen.pop(group_id, None)  # the objects are new: the next save compares by value
        return group

    def _apply(self, record: dict) -> None:
        group_id = record["g"]
        if not isinstance(group_id, str):
            raise TypeError("group id is not a string")
        if record.get("delete"):
            self._written.pop(group_id, None)
            self._seen.pop(group_id, None)
            return
        fields, members = self._written.get(group_id, (None, {}))
        if "grp" in record:
            fields = record["grp"]
        if fields is None:
            raise KeyError(f"group {group_id} has members but no group record")
        members = dict(members)
        for member_id, data in (record.get("m") or {}).items():
            if data is None:
                members.pop(member_id, None)
            else:
                members[str(member_id)] = data
        self._written[group_id] = (fields, members)

    def _snapshot_lines(self):
        for group_id, (fields, members) in sorted(self._written.items()):
            yield {"g": group_id, "grp": fields, "m": members}


def _group_fields(group: ConsumerGroup) -> dict:
    return {"e": group.group_epoch, "ae": group.assignment_epoch, "as": group.assignor,
            "tm": {topic: [str(topic_id), count] for topic, (topic_id, count)
                   in sorted(group.subscription_metadata.items())}}


def _member_fields(member: Member, target: Assignment | None) -> dict:
    return {"i": member.instance_id, "r": member.rack_id, "rt": member.rebalance_timeout_ms,
            "c": member.client_id, "h": member.client_host, "s": list(member.subscribed_names),
            "re": member.subscribed_regex, "sa": member.server_assignor, "e": member.member_epoch,
            "pe": member.previous_member_epoch, "st": member.state.value, "a": _rows(member.assigned),
            "p": _rows(member.pending_revocation), "t": None if target is None else _rows(target)}


def _member_from(member_id: str, data: dict) -> tuple[Member, Assignment | None]:
    member = Member(member_id, instance_id=_optional(data["i"]), rack_id=_optional(data["r"]),
                    rebalance_timeout_ms=int(data["rt"]), client_id=str(data["c"]), client_host=str(data["h"]),
                    subscribed_names=tuple(str(name) for name in data["s"]), subscribed_regex=_optional(data["re"]),
                    server_assignor=_optional(data["sa"]), member_epoch=int(data["e"]),
                    previous_member_epoch=int(data["pe"]), state=MemberState(data["st"]),
                    assigned=_assignment(data["a"]), pending_revocation=_assignment(data["p"]))
    return member, None if data["t"] is None else _assignment(data["t"])


def _rows(assignment: Assignment) -> dict[str, list[int]]:
    return {topic: sorted(partitions) for topic, partitions in sorted(assignment.items())}


def _assignment(rows: dict) -> Assignment:
    return {str(topic): frozenset(int(p) for p in partitions) for topic, partitions in rows.items()}


def _optional(value) -> str | None:
    return None if value is None else str(value)

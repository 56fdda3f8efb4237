"""The durable state of streams groups, so that members carry on across a broker restart with their
member ids, epochs and tasks, and the group with its topology.

Kafka writes a streams group to ``__consumer_offsets`` as records (StreamsGroupMetadata,
StreamsGroupTopology, StreamsGroupMemberMetadata, StreamsGroupTargetAssignmentMember,
StreamsGroupCurrentMemberAssignment...). This broker keeps the same facts in a ``Journal`` of JSON
lines next to the offsets: a line holds a group whole whenever it changed (written before the heartbeat
that changed it is answered), or deletes it::

    {"g": "<group>", "e": <group epoch>, "ae": <assignment epoch>, "t": <topology> | null,
     "m": {"<member id>": {<the member, its tasks and its target>}}}
    {"g": "<group>", "delete": true}
"""
from __future__ import annotations

import logging
from pathlib import Path

from ...persistence.journal import Journal
from ..state_files import STREAMS_GROUPS_FILE_NAME
from .state import Member, MemberState, StreamsGroup, Tasks
from .topology import Subtopology, TopicInfo, Topology

__all__ = ["StreamsGroupStore", "STREAMS_GROUPS_FILE_NAME"]

log = logging.getLogger(__name__)



class StreamsGroupStore:
    def __init__(self, data_dir: Path, *, fsync: bool = False, compact_min_bytes: int = 16 << 20):
        self.path = Path(data_dir) / STREAMS_GROUPS_FILE_NAME
        self._written: dict[str, dict] = {}  # group id -> the group's line as last written
        self._journal = Journal(self.path, lambda: (self._written[g] for g in sorted(self._written)),
                                fsync=fsync, compact_min_bytes=compact_min_bytes)

    def load(self) -> dict[str, StreamsGroup]:
        self.close()
        self._written.clear()
        for record in self._journal.read():
            group_id = record.get("g")
            if not isinstance(group_id, str):
                continue
            if record.get("delete"):
                self._written.pop(group_id, None)
            else:
                self._written[group_id] = record
        groups = {}
        for group_id in list(self._written):
            try:
                groups[group_id] = _group_from(self._written[group_id])
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.warning("%s: dropping streams group %s, its state is unreadable (%s)", self.path, group_id, exc)
                del self._written[group_id]
        self._journal.open()
        return groups

    def close(self) -> None:
        self._journal.close()

    def save(self, group: StreamsGroup) -> None:
        """Write the group if it changed since last written (raises OSError, nothing recorded then)."""
        line = _group_line(group)
        if self._written.get(group.group_id) == line:
            return
        self._journal.append(line)
        self._written[group.group_id] = line
        self._journal.maybe_compact()

    def delete(self, group_id: str) -> None:
        if group_id not in self._written:
            return
        self._journal.append({"g": group_id, "delete": True})
        del self._written[group_id]
        self._journal.maybe_compact()

    def restore(self, group_id: str) -> StreamsGroup | None:
        line = self._written.get(group_id)
        return None if line is None else _group_from(line)


def _group_line(group: StreamsGroup) -> dict:
    return {"g": group.group_id, "e": group.group_epoch, "ae": group.assignment_epoch,
            "t": None if group.topology is None else _topology_fields(group.topology),
            "pc": dict(sorted(group.partition_counts.items())),
            "m": {member_id: _member_fields(member, group.target.get(member_id))
                  for member_id, member in sorted(group.members.items())}}


def _group_from(line: dict) -> StreamsGroup:
    group = StreamsGroup(line["g"], group_epoch=int(line["e"]), assignment_epoch=int(line["ae"]),
                         topology=None if line["t"] is None else _topology_from(line["t"]),
                         partition_counts={str(t): int(c) for t, c in line["pc"].items()})
    for member_id, data in line["m"].items():
        member, target = _member_from(str(member_id), data)
        group.put(member)
        if target is not None:
            group.target[member.member_id] = target
    return group


def _topic_fields(info: TopicInfo) -> list:
    return [info.name, info.partitions, info.replication_factor, [list(kv) for kv in info.configs]]


def _topic_from(fields: list) -> TopicInfo:
    name, partitions, replication, configs = fields
    return TopicInfo(str(name), int(partitions), int(replication), tuple((str(k), str(v)) for k, v in configs))


def _topology_fields(topology: Topology) -> dict:
    return {"epoch": topology.epoch, "subs": [
        {"id": s.subtopology_id, "src": list(s.source_topics), "sink": list(s.repartition_sink_topics),
         "cl": [_topic_fields(t) for t in s.state_changelog_topics],
         "rp": [_topic_fields(t) for t in s.repartition_source_topics],
         "co": [list(group) for group in s.copartition_groups]} for s in topology.subtopologies]}


def _topology_from(fields: dict) -> Topology:
    return Topology(int(fields["epoch"]), tuple(
        Subtopology(str(s["id"]), tuple(map(str, s["src"])), tuple(map(str, s["sink"])),
                    tuple(_topic_from(t) for t in s["cl"]), tuple(_topic_from(t) for t in s["rp"]),
                    tuple(tuple(map(str, group)) for group in s["co"])) for s in fields["subs"]))


def _tasks_fields(tasks: Tasks) -> list:
    return [sorted([list(t) for t in kind]) for kind in (tasks.active, tasks.standby, tasks.warmup)]


def _tasks_from(fields: list) -> Tasks:
    active, standby, warmup = (frozenset((str(s), int(p)) for s, p in kind) for kind in fields)
    return Tasks(active, standby, warmup)


def _member_fields(member: Member, target: Tasks | None) -> dict:
    return {"i": member.instance_id, "r": member.rack_id, "rt": member.rebalance_timeout_ms,
            "c": member.client_id, "h": member.client_host, "te": member.topology_epoch, "p": member.process_id,
            "u": None if member.user_endpoint is None else list(member.user_endpoint),
            "tags": [list(kv) for kv in member.client_tags], "e": member.member_epoch,
            "pe": member.previous_member_epoch, "st": member.state.value, "a": _tasks_fields(member.assigned),
            "pr": _tasks_fields(member.pending_revocation), "t": None if target is None else _tasks_fields(target)}


def _member_from(member_id: str, data: dict) -> tuple[Member, Tasks | None]:
    endpoint = data["u"]
    member = Member(member_id, instance_id=_optional(data["i"]), rack_id=_optional(data["r"]),
                    rebalance_timeout_ms=int(data["rt"]), client_id=str(data["c"]), client_host=str(data["h"]),
                    topology_epoch=int(data["te"]), process_id=str(data["p"]),
                    user_endpoint=None if endpoint is None else (str(endpoint[0]), int(endpoint[1])),
                    client_tags=tuple((str(k), str(v)) for k, v in data["tags"]), member_epoch=int(data["e"]),
                    previous_member_epoch=int(data["pe"]), state=MemberState(data["st"]),
                    assigned=_tasks_from(data["a"]), pending_revocation=_tasks_from(data["pr"]))
    return member, None if data["t"] is None else _tasks_from(data["t"])


def _optional(value) -> str | None:
    return None if value is None else str(value)

"""The durable state of share partitions, Kafka's ``__share_group_state`` (written by its share
coordinator as ShareSnapshot/ShareUpdate records) kept as a ``Journal`` of JSON lines beside the
consumer groups', one line a change of one share partition::

    {"g": "<group>", "t": "<topic id>", "p": <partition>, "s": <SPSO>, "r": [[first, last, state, deliveries], ...]}
    {"g": "<group>", "t": "<topic id>", "p": <partition>, "s": <SPSO>, "u": [first, last], "r": [...]}
    {"g": "<group>", "t": "<topic id>", "p": <partition>, "delete": true}

The first is a snapshot (Kafka's ShareSnapshot): the partition's whole in-flight window. The second an
update (ShareUpdate): the new SPSO and the runs of the offsets ``first``..``last`` that changed (those
within the window), the rest as before; an acquisition or acknowledgement writes only what it touched.
Acquired records are written as available with their delivery counts: after a restart they are offered
again. Lines are written before the request that made the change is answered; compaction rewrites the
file as one snapshot per partition.
"""
from __future__ import annotations

import logging
import uuid
from pathlib import Path

from ...persistence.journal import Journal
from ..state_files import SHARE_GROUPS_FILE_NAME

__all__ = ["ShareStateStore", "SHARE_GROUPS_FILE_NAME", "ShareKey", "StoredState"]

log = logging.getLogger(__name__)


ShareKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
StoredState = tuple[int, list[list[int]]]  # (SPSO, runs)


class ShareStateStore:
    def __init__(self, data_dir: Path, *, fsync: bool = False, compact_min_bytes: int = 16 << 20):
        self.path = Path(data_dir) / SHARE_GROUPS_FILE_NAME
        self._written: dict[ShareKey, StoredState] = {}
        self._journal = Journal(self.path, self._snapshot_lines, fsync=fsync, compact_min_bytes=compact_min_bytes)

    def load(self) -> dict[ShareKey, StoredState]:
        """Replay the file (a torn last line dropped), compact it and open it for appending."""
        self.close()
        self._written.clear()
        for record in self._journal.read():
            try:
                self._apply(record)
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("%s: skipping an unreadable line (%s)", self.path, exc)
        self._journal.open()
        return dict(self._written)

    def close(self) -> None:
        self._journal.close()

    def save(self, key: ShareKey, state: StoredState) -> None:
        """Write the partition's state if it changed (raises OSError)."""
        if self._written.get(key) == state:
            return
        group_id, topic_id, partition = key
        line = {"g": group_id, "t": str(topic_id), "p": partition, "s": state[0], "r": state[1]}
        self._journal.append(line)
        self._written[key] = (state[0], [list(run) for run in state[1]])
        self._journal.maybe_compact()

    def update(self, key: ShareKey, start: int, first: int, last: int, runs: list[list[int]]) -> None:
        """Write a change of the offsets ``first``..``last`` (``runs``: those still in the window) and the
        new SPSO (raises OSError)."""
        group_id, topic_id, partition = key
        line = {"g": group_id, "t": str(topic_id), "p": partition, "s": start, "u": [first, last], "r": runs}
        self._journal.append(line)
        # as ``_apply`` would read the line back, without parsing what is at hand
        self._written[key] = (start, _updated(self._written.get(key, (start, []))[1], start, first, last, runs))
        self._journal.maybe_compact()

    def delete(self, key: ShareKey) -> None:
        """Forget one share partition's state (DeleteShareGroupOffsets); raises OSError."""
        if key not in self._written:
            return
        line = {"g": key[0], "t": str(key[1]), "p": key[2], "delete": True}
        self._journal.append(line)
        self._apply(line)
        self._journal.maybe_compact()

    def _apply(self, record: dict) -> None:
        group_id = record["g"]
        if not isinstance(group_id, str):
            raise TypeError("group id is not a string")
        key = (group_id, uuid.UUID(record["t"]), int(record["p"]))
        if record.get("delete"):
            self._written.pop(key, None)
            return
        runs = [[int(first), int(last), int(state), int(count)] for first, last, state, count in record["r"]]
        start = int(record["s"])
        if "u" in record:
            changed_first, changed_last = (int(offset) for offset in record["u"])
            runs = _updated(self._written.get(key, (start, []))[1], start, changed_first, changed_last, runs)
        self._written[key] = (start, runs)

    def _snapshot_lines(self):
        for (group_id, topic_id, partition), (start, runs) in sorted(self._written.items(), key=lambda i: (
                i[0][0], str(i[0][1]), i[0][2])):
            yield {"g": group_id, "t": str(topic_id), "p": partition, "s": start, "r": runs}


def _updated(runs: list[list[int]], start: int, first: int, last: int, changed: list[list[int]]) -> list[list[int]]:
    """``runs`` with the offsets below ``start`` dropped and ``first``..``last`` replaced by ``changed``."""
    kept: list[list[int]] = []
    for run_first, run_last, state, count in runs:
        for low, high in ((max(run_first, start), min(run_last, first - 1)),
                          (max(run_first, start, last + 1), run_last)):
            if low <= high:
                kept.append([low, high, state, count])
    return sorted(kept + [list(run) for run in changed])

"""Producer ids, unique across restarts, as Kafka's controller hands them out in blocks."""
from __future__ import annotations

import json
from pathlib import Path

from ..persistence.atomic_file import write_json_atomically

__all__ = ["ProducerIdBlock"]


class ProducerIdBlock:
    """The next free id is persisted before any id of a block is handed out, so a restart (even after
    kill -9) never reuses one."""

    BLOCK = 1000

    def __init__(self, path: Path):
        self.path = path
        self._next = 0
        self._end = 0

    def next(self) -> int:
        if self._next >= self._end:
            start = json.loads(self.path.read_text())["next"] if self.path.exists() else 0
            self._next, self._end = start, start + self.BLOCK
            write_json_atomically(self.path, {"next": self._end})  # before any id of the block is used
        self._next += 1
        return self._next - 1

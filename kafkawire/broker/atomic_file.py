"""Small state files written whole and atomically: the new contents go to a temporary file beside the
old one, are flushed and fsynced, then renamed over it, so a crash leaves the old file or the new one,
never half of one."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["write_atomically", "write_json_atomically"]


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def write_json_atomically(path: Path, value: Any, indent: int | None = None) -> None:
    write_atomically(path, json.dumps(value, indent=indent).encode("utf-8"))

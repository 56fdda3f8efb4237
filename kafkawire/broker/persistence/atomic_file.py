"""Small state files written whole and atomically: the new contents go to a temporary file beside the
old one, are flushed and fsynced, then renamed over it, so a crash leaves the old file or the new one,
never half of one."""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["write_atomically", "write_json_atomically", "PRIVATE"]

PRIVATE = 0o600  # owner only: the files that hold credentials or the ACLs
_DEFAULT_MODE = 0o666  # open()'s own, less the umask


def write_atomically(path: Path, data: bytes, mode: int = _DEFAULT_MODE) -> None:
    """Replace ``path`` with ``data``; the file is created with ``mode`` (less the umask), never wider."""
    tmp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):  # a crash's leftover keeps its own mode: start afresh
        os.unlink(tmp)
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with open(descriptor, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def write_json_atomically(path: Path, value: Any, indent: int | None = None, mode: int = _DEFAULT_MODE) -> None:
    write_atomically(path, json.dumps(value, indent=indent).encode("utf-8"), mode)

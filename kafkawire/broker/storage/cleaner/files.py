"""The log cleaner's files and how a crash in the middle of a swap is undone or completed.

A cleaned segment is written beside the log as ``<base>.log.cleaned`` (with ``.index.cleaned`` and, when
it has entries, ``.txnindex.cleaned``), ``<base>`` being the first replaced segment's base offset. The
swap, on the event loop, then

1. renames the indexes' ``.cleaned`` to ``.swap``, then the log's (``<base>.log.swap`` is the commit
   point: from here on the replacement is completed, never undone),
2. deletes the replaced segments' files,
3. renames ``<base>.log.swap`` to ``<base>.log``, then the indexes' ``.swap`` to their final names.

Kafka's ``.cleaned`` and ``.swap`` suffixes, and the same rule on opening (``LogLoader``): leftover
``.cleaned`` files are deleted; a ``<base>.log.swap`` replaces every segment whose base offset lies in
``[base, the swap's next offset)``. When the cleaner dropped a group's last batches, that range misses
the group's later segments: they stay as they were, above every offset of the swap, and the log is
whole (less compacted until the next round). An index ``.swap`` without its log's ``.swap`` belongs to a
swap that did not commit when the log's ``.cleaned`` is still there, and to one that finished step 3's
first rename otherwise.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..segment import iter_batch_headers, segment_name

__all__ = [
    "CLEANED_SUFFIX",
    "SEGMENT_FILE_SUFFIXES",
    "SWAP_SUFFIX",
    "commit_swap",
    "finish_swap",
    "recover_interrupted_swaps",
    "segment_files",
    "sync_directory",
]

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# a segment's files: the records, the offset index, the aborted-transaction index (the log last, so
# that its rename is the commit point)
SEGMENT_FILE_SUFFIXES = (".index", ".txnindex", ".log")


def segment_files(directory: Path, base_offset: int, suffix: str = "") -> list[Path]:
    """A segment's files (index, txnindex, log), each with ``suffix`` added."""
    stem = segment_name(base_offset)
    return [directory / f"{stem}{kind}{suffix}" for kind in SEGMENT_FILE_SUFFIXES]


def commit_swap(directory: Path, base_offset: int) -> None:
    """Step 1: ``.cleaned`` -> ``.swap``, the log last (the commit point)."""
    for cleaned, swap in zip(segment_files(directory, base_offset, CLEANED_SUFFIX),
                             segment_files(directory, base_offset, SWAP_SUFFIX)):
        if cleaned.exists():
            os.replace(cleaned, swap)
    sync_directory(directory)


def finish_swap(directory: Path, base_offset: int) -> None:
    """Step 3: ``.swap`` -> the final names, the log first (see the module docstring)."""
    swaps = segment_files(directory, base_offset, SWAP_SUFFIX)
    finals = segment_files(directory, base_offset)
    for swap, final in zip(swaps[::-1], finals[::-1]):
        if swap.exists():
            os.replace(swap, final)
    sync_directory(directory)


def sync_directory(directory: Path) -> None:
    """fsync the directory so that renames and deletions in it are durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stem_offset(path: Path) -> int | None:
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def _swap_next_offset(path: Path) -> int:
    """The offset after the last whole batch of a ``.log.swap`` file (its base offset when empty)."""
    next_offset = _stem_offset(path) or 0
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        for info in iter_batch_headers(fd, 0, os.fstat(fd).st_size):
            next_offset = info.next_offset
    finally:
        os.close(fd)
    return next_offset


def recover_interrupted_swaps(directory: Path) -> None:
    """Undo or complete a swap a crash interrupted (before the log's segments are listed)."""
    log_swaps = {}
    for path in directory.glob(f"*.log{SWAP_SUFFIX}"):
        base = _stem_offset(path)
        if base is not None:
            log_swaps[base] = path
    for path in directory.glob(f"*{SWAP_SUFFIX}"):  # index swaps: see the module docstring
        base = _stem_offset(path)
        if base is None or base in log_swaps:
            continue
        if segment_files(directory, base, CLEANED_SUFFIX)[-1].exists():
            path.unlink(missing_ok=True)
        else:
            os.replace(path, path.with_name(path.name[:-len(SWAP_SUFFIX)]))
    for path in directory.glob(f"*{CLEANED_SUFFIX}"):
        path.unlink(missing_ok=True)
    for base, swap in sorted(log_swaps.items()):
        end = _swap_next_offset(swap)
        for log_path in directory.glob("*.log"):
            old = _stem_offset(log_path)
            if old is not None and base <= old < max(end, base + 1):
                for path in segment_files(directory, old):
                    path.unlink(missing_ok=True)
        finish_swap(directory, base)

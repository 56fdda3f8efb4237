"""Stage-2 workers keep the memory they free for their next buffers, instead of returning it to the kernel.

A decode task builds the same large buffers again and again: table batches of up to 32 MB of values,
the Arrow arrays made from them, the row groups held for Parquet. glibc's malloc gives an allocation
over its mmap threshold (128 KB, rising with use to at most 32 MB) its own mapping and unmaps it when
it is freed, and returns the free top of its heap past the trim threshold; either way, the next buffer
is fresh memory that the kernel must fault in and zero again, page by page. Raising both thresholds
keeps that memory in the heap for reuse: the worker's resident memory stays at its peak between
buffers (it does not grow past it).

First touches are dear on virtual machines whose host reclaims the guest's free pages, much less so on
bare metal; the page faults and system CPU this saves are in docs/performance.md, "Capture decoding:
design measurements".
"""
from __future__ import annotations

import ctypes
import ctypes.util
import platform

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20   # the largest glibc accepts: bigger allocations are mapped whatever is asked
TRIM_THRESHOLD = 512 << 20  # free heap top kept for reuse

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds in this process (once; a worker process runs many tasks).
    True when they are set, False where the C library is not glibc or refuses."""
    global _applied
    if _applied is None:
        _applied = _set_thresholds()
    return _applied


def _set_thresholds() -> bool:
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return False
    # mallopt returns 1 on success. Setting either threshold also stops glibc adjusting them itself.
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))

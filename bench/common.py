"""Pieces every benchmark here shares: block calibration and the git state printed with results."""
from __future__ import annotations

import gc
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


def calibrate(fn, block: float, clock) -> int:
    """How many calls of ``fn`` take about ``block`` seconds of ``clock``."""
    fn()  # warm-up (kafka-python compiles its functions here)
    n, elapsed = 1, 0.0
    while True:
        gc.collect(1)
        t = clock()
        for _ in range(n):
            fn()
        elapsed = clock() - t
        if elapsed >= min(0.02, block / 4) or n >= 1 << 22:
            break
        n *= 4
    return max(1, round(n * block / max(elapsed, 1e-9)))


def git_state() -> str:
    """The commit measured, and whether kafkawire/ had uncommitted changes."""
    try:
        head = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(HERE.parent), "status", "--porcelain", "--", "kafkawire"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + (" + uncommitted changes in kafkawire/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"

"""A live progress line for a long decode, from Spark's status tracker, on a terminal only.

    decode: read 12/16 tasks, decode 3/8 tasks (connections): 2,310 of 5,368 MB, 118 MB/s, about 26 s left

The job's two stages are found through its job group; each is taken as half of the work, and the bytes
done are the capture's bytes times the share of tasks done (the tasks of a stage are about even: the
planner cuts them so). The line is redrawn in place (a carriage return) every ``interval`` seconds and
ended with a newline when the job is over; nothing at all is written when the stream is not a terminal.
"""
from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["Progress"]


class Progress:
    """Use as a context manager around the job's action, after ``begin(context)``."""

    def __init__(self, stream, input_bytes: int, interval: float = 0.5):
        self.stream = stream
        self.input_bytes = input_bytes
        self.interval = interval
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self.group = f"kafkawire-decode-{uuid.uuid4().hex}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._context: SparkContext | None = None  # once begun
        self._started = 0.0
        self._width = 0

    def begin(self, context: SparkContext) -> "Progress":
        """Tags the jobs this thread starts next with a group of our own, to find their stages."""
        self._context = context
        context.setJobGroup(self.group, "kafkawire decode")
        return self

    def __enter__(self) -> "Progress":
        self._started = time.monotonic()
        if self.enabled and self._context is not None:
            self._draw(0.0, "read 0 tasks, decode 0 tasks")
            self._thread = threading.Thread(target=self._run, name="kafkawire-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            try:
                fraction, stages = self._fraction()
            except Exception:
                fraction, stages = 0.0, "stopped"
            self._draw(1.0 if kind is None else fraction, stages)
            self.stream.write("\n")
            self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                fraction, stages = self._fraction()
            except Exception:  # the tracker is gone (the context stopping): no more lines
                return
            self._draw(fraction, stages)

    def _fraction(self) -> tuple[float, str]:
        assert self._context is not None  # begun (_run's caller stops at any error)
        tracker = self._context.statusTracker()
        stage_ids: list[int] = []
        for job_id in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job_id)
            if info is not None:
                stage_ids.extend(info.stageIds)
        found = [tracker.getStageInfo(stage) for stage in sorted(set(stage_ids))]
        stages = [stage for stage in found if stage is not None]
        names = ("read", "decode")
        done, parts = 0.0, []
        for name, stage in zip(names, stages):
            total = max(stage.numTasks, 1)
            done += min(stage.numCompletedTasks, total) / total / len(names)
            parts.append(f"{name} {stage.numCompletedTasks}/{stage.numTasks} tasks")
        return done, ", ".join(parts) or "starting"

    def _draw(self, fraction: float, stages: str) -> None:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        done = self.input_bytes * fraction
        rate = done / elapsed
        line = f"decode: {stages}: {_mb(done)} of {_mb(self.input_bytes)} MB"
        if fraction > 0:
            line += f", {_mb(rate)} MB/s"
            if fraction < 1:
                line += f", about {(self.input_bytes - done) / rate:,.0f} s left"
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)


def _mb(count: float) -> str:
    return f"{count / 1e6:,.0f}" if count >= 100e6 else f"{count / 1e6:,.1f}"

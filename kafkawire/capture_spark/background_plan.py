"""``plan_captures`` in a child Python while the caller does something else (starts Spark's JVM).

The driver's walk of the captures is serial, and starting the JVM takes a few seconds with a core to
spare, so ``kafkawire decode`` runs both at once. The child is a Python started
for the purpose (``python -m kafkawire.capture_spark.background_plan``), not a multiprocessing worker:
multiprocessing's spawn re-runs the caller's main script (a script that calls the command line without
a ``__main__`` guard would start again), and its fork would copy a process that may have threads.
The arguments go on the command line as JSON; the plan, or the error, comes back pickled on stdout.
"""
from __future__ import annotations

import json
import pickle
import subprocess
import sys

from .plan import CapturePlan, plan_captures


class BackgroundPlan:
    """Starts ``plan_captures(inputs, split_bytes)`` in a child process; ``result()`` waits for it and
    returns the CapturePlan or raises the child's error (CaptureError, FileNotFoundError...)."""

    def __init__(self, inputs, split_bytes: int):
        paths = [str(item) for item in (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
        self._child = subprocess.Popen(
            [sys.executable, "-m", __name__, json.dumps({"inputs": paths, "split_bytes": split_bytes})],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)

    def result(self) -> CapturePlan:
        out, _ = self._child.communicate()
        if self._child.returncode != 0 or not out:
            raise RuntimeError(f"planning the splits failed: the child process exited with {self._child.returncode}")
        planned, value = pickle.loads(out)
        if not planned:
            raise value
        return value

    def cancel(self) -> None:
        """Stops the child if it is still running (the caller gave up)."""
        if self._child.poll() is None:
            self._child.kill()
        self._child.communicate()


def _main(argument: str) -> int:
    request = json.loads(argument)
    try:
        reply: tuple[bool, CapturePlan | Exception] = (True, plan_captures(request["inputs"], request["split_bytes"]))
    except Exception as error:  # noqa: BLE001 - any error goes back to the caller, which raises it
        reply = (False, error)
    try:
        data = pickle.dumps(reply)
    except Exception as error:  # noqa: BLE001 - an error that does not pickle goes back as its text
        data = pickle.dumps((False, RuntimeError(f"{type(reply[1]).__name__}: {reply[1]} ({error})")))
    sys.stdout.buffer.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))

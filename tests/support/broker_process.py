"""``kafkawire broker`` as a real process for the tests (crash, restart and abuse tests need one they
can kill and read /proc of)."""
from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SEGMENT_BYTES = 64 * 1024  # small, so that loads roll segments
KAFKAWIRE = Path(sys.executable).with_name("kafkawire")
READY = re.compile(r"kafkawire broker on (\S+):(\d+)")


class BrokerProcess:
    """``kafkawire broker`` in a subprocess on ``--port 0``; the port is parsed from its ready line, and
    ``lines`` keeps what it printed before it (stdout and stderr)."""

    def __init__(self, data_dir: Path, *extra: str, start_timeout_s: float = 15):
        self.proc = subprocess.Popen(
            [str(KAFKAWIRE), "broker", "--data-dir", str(data_dir), "--port", "0", "--no-auto-create",
             "--segment-bytes", str(SEGMENT_BYTES), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)  # unbuffered: select sees every line
        deadline, line = time.monotonic() + start_timeout_s, b""
        self.lines: list[str] = []
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                self.lines.append(line.decode(errors="replace"))
                found = READY.search(line.decode(errors="replace"))
                if found:
                    self.port = int(found.group(2))
                    return
                if not line and self.proc.poll() is not None:
                    break
        self.kill()
        raise RuntimeError(f"the broker did not start (last line {line!r}, exit {self.proc.poll()})")

    def kill(self) -> None:
        """kill -9, then reap."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.proc.stdout.close()


@pytest.fixture
def processes():
    """``start(data_dir, *extra)`` starts a BrokerProcess; every one started is killed after the test."""
    started: list[BrokerProcess] = []

    def start(data_dir, *extra):
        started.append(BrokerProcess(data_dir, *extra))
        return started[-1]

    yield start
    for broker in started:
        broker.kill()

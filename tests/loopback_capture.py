"""tcpdump on the loopback interface, for the tests that capture real clients talking to the broker:
started once its filter is in place, stopped with SIGINT; and waits on events instead of sleeps."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

TCPDUMP = shutil.which("tcpdump")


def wait_until(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def start_tcpdump(path: Path, ports) -> subprocess.Popen:
    """tcpdump writing the TCP traffic of ``ports`` on lo to ``path``; skips the test where it cannot."""
    if TCPDUMP is None:
        pytest.skip("tcpdump is not installed (apt-get install tcpdump)")
    # as root, stay root (-Z): tcpdump otherwise writes the file as its own user, into pytest's private folder
    user = ["-Z", "root"] if os.geteuid() == 0 else []
    expression = " or ".join(f"tcp port {port}" for port in ports)
    dump = subprocess.Popen([TCPDUMP, "-i", "lo", "-n", "-U", *user, "-w", str(path), expression],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    said = []
    while line := dump.stderr.readline():  # "listening on lo, ..." once the filter is in place
        said.append(line.strip())
        if "listening on" in line:
            return dump
    dump.wait()
    pytest.skip(f"tcpdump cannot capture on lo here: {' '.join(said)}")


def stop_tcpdump(dump: subprocess.Popen) -> str:
    """Stops tcpdump; returns what it said (its packet counts)."""
    dump.send_signal(signal.SIGINT)
    _, err = dump.communicate(timeout=30)
    assert dump.returncode == 0, err
    return err

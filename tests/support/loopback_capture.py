"""tcpdump on the loopback interface, for the tests that capture real clients talking to the broker:
started once its filter is in place, stopped with SIGINT; and waits on events instead of sleeps."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

TCPDUMP = shutil.which("tcpdump")


def wait_until(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


@contextmanager
def served_ports():
    """The client ports of the connections the broker served while inside (a list that fills as each ends)."""
    from kafkawire.broker.network.connection import Connection
    ports: list[int] = []
    run = Connection.run

    async def recording(self):
        try:
            await run(self)
        finally:
            ports.append(self.peer[1])

    Connection.run = recording
    try:
        yield ports
    finally:
        Connection.run = run


def closed_in(capture: Path, broker_ports: set[int]) -> set[int]:
    """The client ports of the connections whose end the capture has so far: a RST, or a FIN from each side."""
    from kafkawire.capture.model import FIN, RST
    from kafkawire.capture.files.packets import iter_packets
    fins, resets = set(), set()
    try:
        for packet in iter_packets(str(capture)):
            client, broker = (packet.sport, packet.dport) if packet.dport in broker_ports else (packet.dport, packet.sport)
            if packet.flags & RST:
                resets.add(client)
            elif packet.flags & FIN:
                fins.add((client, packet.sport == client))
    except Exception:  # a record half written
        return set()
    return resets | {client for client, by_client in fins if by_client and (client, False) in fins}


def wait_for_ends(capture: Path, broker_ports, client_ports) -> None:
    """Waits until the capture holds the end of each client port's connection: tcpdump on a busy machine
    (and under gVisor) writes packets seconds after they were sent, and stopping it loses the rest."""
    wait_until(lambda: set(client_ports) <= closed_in(capture, set(broker_ports)),
               "the end of every connection in the capture", timeout=60)


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

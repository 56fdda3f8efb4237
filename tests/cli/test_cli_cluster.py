"""`kafkawire cluster`: brokers on consecutive ports, the control interface driving faults that a real
client sees, and a clean exit on SIGTERM."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO

kafka = pytest.importorskip("kafka")


def control(port: int, *commands: str) -> list[str]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall("".join(f"{command}\n" for command in commands).encode())
        sock.shutdown(socket.SHUT_WR)
        return sock.makefile().read().splitlines()


def test_cluster_command_with_its_control_interface(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    process = subprocess.Popen([sys.executable, "-m", "kafkawire", "cluster", "--brokers", "2", "--port", "0",
                                "--control-port", "0", "--data-dir", str(tmp_path / "data")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        control_line = process.stdout.readline()
        ready = process.stdout.readline()
        assert control_line.startswith("control on 127.0.0.1:"), control_line + process.stderr.read()
        assert ready.startswith("kafkawire cluster on "), ready
        port = int(control_line.split(":")[1])
        bootstrap = ready.split()[3].split(",")
        assert len(bootstrap) == 2
        answers = control(port, "create-topic events 1 2", "leader events 0", "isr events 0", "nonsense")
        assert answers[0] == "ok" and answers[2] == "ok 1,2" and answers[3].startswith("error ")
        leader = int(answers[1].split()[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # quit: the server hangs up
            sock.sendall(b"leader events 0\nquit\nleader events 0\n")  # no shutdown: as Debian's nc
            assert sock.makefile().read().splitlines() == [answers[1], "ok"]
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, retries=0)
        try:
            producer.send("events", b"first").get(20)
            assert control(port, f"fail {leader} Produce TOPIC_AUTHORIZATION_FAILED") == ["ok"]
            with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
                producer.send("events", b"refused").get(20)
            moved = control(port, "move-leader events 0")[0].split()
            assert moved[0] == "ok" and int(moved[1]) != leader and moved[2] == "1"
        finally:
            producer.close(5)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

"""Import only what is used (issue 33): ``kafkawire broker`` answering its first request, and ``import
kafkawire.client``, load none of what only other commands need (construct, the capture packages and
Spark, the pcap writer, ``importlib.metadata``, code generation); the generated messages load on first
use. Checked on the modules a fresh process holds, not on times."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from support.paths import REPO

# Module names (or their packages) that neither the broker nor the client may load.
NOT_LOADED = ("construct", "pyspark", "pyarrow", "pandas", "py4j", "jinja2", "codegen", "importlib.metadata",
              "kafkawire.capture", "kafkawire.capture_spark", "kafkawire.pcap", "kafkawire.layout_formats")

# The broker command in this process; once it has answered one ApiVersions request, the modules loaded.
BROKER_RUN = r"""
import json, os, socket, struct, sys, threading, time
from kafkawire.cli import main

def report():
    deadline = time.monotonic() + 60
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
            break
        except OSError:
            if time.monotonic() > deadline:
                os._exit(3)
            time.sleep(0.01)
    request = struct.pack(">hhih", 18, 0, 1, -1)  # ApiVersions v0, correlation id 1, no client id
    sock.sendall(struct.pack(">i", len(request)) + request)
    answer = b""
    while len(answer) < 8:
        answer += sock.recv(65536)
    assert struct.unpack(">i", answer[4:8])[0] == 1
    sys.stdout.write("MODULES " + json.dumps(sorted(sys.modules)) + "\n")
    sys.stdout.flush()
    os._exit(0)

threading.Thread(target=report, daemon=True).start()
main(["broker", "--port", sys.argv[1], "--data-dir", sys.argv[2]])
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def loaded_by(code: str, *argv: str) -> list[str]:
    """``sys.modules`` of a fresh interpreter that ran ``code`` (which prints it after ``MODULES``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True,
                          timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("MODULES ")]
    assert done.returncode == 0 and lines, done.stdout + done.stderr
    return json.loads(lines[-1].removeprefix("MODULES "))


def forbidden(modules: list[str]) -> list[str]:
    return [name for name in modules if any(name == prefix or name.startswith(prefix + ".") for prefix in NOT_LOADED)]


def test_the_broker_command_answers_without_loading_other_commands_modules(tmp_path):
    modules = loaded_by(BROKER_RUN, str(free_port()), str(tmp_path / "data"))
    assert "kafkawire.broker.server" in modules  # (the run did get that far)
    assert forbidden(modules) == []


def test_the_client_loads_none_of_them():
    modules = loaded_by("import sys, json, kafkawire.client; print('MODULES', json.dumps(sorted(sys.modules)))")
    assert "kafkawire.client" in modules
    assert forbidden(modules) == []


def test_messages_load_on_first_use():
    before, after = loaded_by("import sys, json, kafkawire.messages as m; before = sorted(sys.modules); "
                              "m.FetchRequest; print('MODULES', json.dumps([before, sorted(sys.modules)]))")
    assert [name for name in before if name.startswith("kafkawire.messages.")] == []
    assert [name for name in after if name.startswith("kafkawire.messages.")] == ["kafkawire.messages.fetch_request"]

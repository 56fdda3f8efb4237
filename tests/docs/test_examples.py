"""Every ```python and ```sh example of README.md and of the docs site's pages (docs/), run as written.

The examples that talk to a broker expect one on 127.0.0.1:9092: the module starts the docs' own
``kafkawire broker`` command there (with a fresh ``--data-dir``), and skips those examples, saying why,
when the port is taken. Each Python example runs in a fresh interpreter (one whose tests take the pytest plugin's fixtures
is run by pytest, with the plugin), and one that prints must print
something (the README's consumer once printed nothing: its first poll came back empty). The ``sh``
examples run in bash with the venv's scripts first on PATH, in a folder holding the frames they name
(``request.bin``, ``response.bin``, ``request.hex``, and ``capture.pcapng``: the broker's tap while
confluent-kafka produces to ``orders`` and reads it back). ``NOT_RUN`` lists the examples left out,
each with its reason; an entry that matches no example fails, so the list cannot go stale.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkawire.framing import encode_request, encode_response
from kafkawire.messages import FetchRequest, FetchResponse, MetadataRequest, RequestHeader

from support.paths import REPO as ROOT
from support.plugin_runs import run_pytest
from support.tapped_clients import confluent_round_trip
# docs/performance.md is left out: its blocks are the commands behind its figures (benchmarks of
# minutes, brokers started by hand on fixed ports), not examples.
PAGES = [ROOT / "README.md", *sorted(page for page in (ROOT / "docs").rglob("*.md") if page.name != "performance.md")]
BIN = Path(sys.executable).parent
HOST, PORT = "127.0.0.1", 9092
BROKER_COMMAND = "kafkawire broker --data-dir"
CLUSTER_COMMAND = "kafkawire cluster --brokers"

# Examples not run here: (a piece of the example's text, why).
NOT_RUN = [
    ("pip install -e", "creates a virtualenv and installs the package: the suite runs from an installed one"),
    ("kafkawire demo", "starts Spark and takes one to two minutes "
                       "(tests/capture_spark/test_capture_spark_job.py covers its parts)"),
    ("python -m pytest", "the test suite itself"),
    ("kafkawire decode capture.pcapng", "starts Spark, on capture files that are the reader's own "
                                        "(tests/capture_spark/test_capture_spark_job.py runs decode and report "
                                        "as commands)"),
    ("spark-submit", "needs a Spark cluster (tests/capture_spark/test_capture_spark_cluster.py starts one; "
                     "test_capture_spark_job.py runs it locally, with its settings)"),
    ("python -m codegen --check", "regenerates the committed codecs in place; CI runs `codegen --check` itself"),
    ("bench/codec.py", "benchmarks, minutes each"),
    ("--config config/server.properties", "servers on Kafka's fixed ports: tests/broker/config/test_broker_server_properties.py "
                                          "starts both files with their ports and folders overridden"),
]


def examples() -> list[tuple[str, str, str]]:
    """(language, where, code) of every ```python and ```sh block, page by page; ``where`` is
    ``page:line``."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(r"^```(python|sh)\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
            where = f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
            found.append((match.group(1), where, match.group(2)))
    return found


def not_run_reason(code: str) -> str | None:
    reasons = [why for piece, why in NOT_RUN if piece in code]
    assert len(reasons) <= 1, f"two NOT_RUN entries match one example: {code[:80]!r}"
    return reasons[0] if reasons else None


def test_every_not_run_entry_matches_an_example():
    codes = [code for _, _, code in examples()]
    for piece, _ in NOT_RUN:
        assert any(piece in code for code in codes), f"NOT_RUN entry {piece!r} matches no example"
    assert len({code.strip() for code in codes if BROKER_COMMAND in code}) == 1, "one broker command, run once"
    assert sum(CLUSTER_COMMAND in code for code in codes) == 1, "one cluster example"


def port_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def environment() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """The README's broker command on 127.0.0.1:9092, with a fresh data folder; None (and the reason)
    when the port is taken."""
    if not port_free(HOST, PORT):
        yield f"{HOST}:{PORT} is in use (another broker?): the README's client examples connect there"
        return
    code = next(code for _, _, code in examples() if BROKER_COMMAND in code)
    argv = shlex.split(code.strip())
    argv[argv.index("--data-dir") + 1] = str(tmp_path_factory.mktemp("readme") / "broker-data")
    assert argv[0] == "kafkawire" and argv[argv.index("--port") + 1] == str(PORT)
    process = subprocess.Popen([str(BIN / "kafkawire"), *argv[1:]], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environment())
    try:
        started = process.stdout.readline()
        assert started.startswith(f"kafkawire broker on {HOST}:{PORT}"), started + process.stderr.read()
        yield None
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture(scope="module")
def frames_folder(tmp_path_factory) -> Path:
    """The frames the ``sh`` examples name, made with the codecs."""
    folder = tmp_path_factory.mktemp("readme-frames")
    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=7, client_id="readme")
    request = encode_request(header, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="events")]))
    (folder / "request.bin").write_bytes(request)
    (folder / "request.hex").write_text(request.hex() + "\n")
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="events", partitions=[
        FetchResponse.PartitionData(partition_index=0, high_watermark=1)])])
    (folder / "response.bin").write_bytes(encode_response(FetchRequest.API_KEY, 12, 7, response))
    return folder


@pytest.fixture(scope="module")
def capture_in_frames_folder(frames_folder) -> Path:
    """``capture.pcapng`` of the ``kafkawire show`` examples, in the frames' folder."""
    capture, _ = confluent_round_trip(frames_folder, "orders", capture_name="capture.pcapng")
    return capture


@pytest.fixture(scope="module")
def tables_in_frames_folder(frames_folder, capture_in_frames_folder) -> Path:
    """``tables/`` of the ``kafkawire report`` examples: ``capture.pcapng`` decoded without Spark (as
    `kafkawire decode` would, by the job's own stages in this process)."""
    from support.capture_in_process import decode_in_process

    return decode_in_process(capture_in_frames_folder, frames_folder / "tables")


def uses_plugin_fixtures(code: str) -> bool:
    """Whether the example defines tests that take kafkawire's pytest fixtures (kafka_broker...)."""
    return re.search(r"^def test_\w+\([^)]*\bkafka_(broker|cluster)", code, re.MULTILINE) is not None


def check_broker(code: str, broker) -> None:
    if "9092" in code and broker is not None:
        pytest.skip(broker)


PYTHON = [example for example in examples() if example[0] == "python"]
SH = [example for example in examples() if example[0] == "sh"]


@pytest.mark.parametrize("language,line,code", PYTHON, ids=[where for _, where, _ in PYTHON])
def test_python_example(language, line, code, broker, tmp_path):
    reason = not_run_reason(code)
    if reason:
        pytest.skip(reason)
    check_broker(code, broker)
    if uses_plugin_fixtures(code):  # tests using the pytest plugin's fixtures: run by pytest, as a user would
        (tmp_path / "test_readme_example.py").write_text(code)
        done = run_pytest(tmp_path, "test_readme_example.py")
        assert done.returncode == 0 and " passed" in done.stdout, f"{line}:\n{done.stdout[-3000:]}"
        return
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=environment())
    assert done.returncode == 0, f"{line}:\n{done.stderr[-3000:]}"
    if "print(" in code:
        assert done.stdout.strip(), f"{line} prints nothing (in {time.monotonic() - started:.1f} s)"


def run_cluster_example(line: str, code: str, data_dir: Path) -> None:
    """The cluster example: its first line in the background (with a fresh ``--data-dir``), then each
    control line as written, against the fresh cluster; every command must be answered "ok" and ``nc``
    must exit."""
    start, *control_lines = [text for text in code.splitlines() if text.strip()]
    argv = shlex.split(start)
    argv[argv.index("--data-dir") + 1] = str(data_dir)
    first, count = int(argv[argv.index("--port") + 1]), int(argv[argv.index("--brokers") + 1])
    ports = [*range(first, first + count), int(argv[argv.index("--control-port") + 1])]
    busy = [port for port in ports if not port_free(HOST, port)]
    if busy:
        pytest.skip(f"port {busy[0]} is in use: the cluster example listens on {ports}")
    if shutil.which("nc") is None:
        pytest.skip("the cluster example talks to its control socket with nc, which is not installed")
    process = subprocess.Popen([str(BIN / "kafkawire"), *argv[1:]], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environment())
    try:
        started = ""
        while not started.startswith("kafkawire cluster on"):
            started = process.stdout.readline()
            assert started, f"{line}: the cluster did not start\n{process.stderr.read()}"
        for command in control_lines:
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], capture_output=True, text=True,
                                  timeout=60, cwd=data_dir.parent, env=environment())
            assert done.returncode == 0, f"{line}: {command}\n{done.stderr[-3000:]}"
            answers = done.stdout.splitlines()
            assert len(answers) == command.count("\\n") and all(a.startswith("ok") for a in answers), (
                f"{line}: {command}\n{done.stdout}")
    finally:
        process.terminate()
        process.wait(30)


@pytest.mark.parametrize("language,line,code", SH, ids=[where for _, where, _ in SH])
def test_sh_example(language, line, code, broker, frames_folder, request, tmp_path):
    reason = not_run_reason(code)
    if reason:
        pytest.skip(reason)
    if CLUSTER_COMMAND in code:
        run_cluster_example(line, code, tmp_path / "cluster-data")
        return
    if "capture.pcapng" in code:
        request.getfixturevalue("capture_in_frames_folder")
    if "kafkawire report tables/" in code:
        request.getfixturevalue("tables_in_frames_folder")
    if BROKER_COMMAND in code:
        assert broker is None or "in use" in broker
        if broker is not None:
            pytest.skip(broker)
        return  # the broker fixture runs it
    check_broker(code, broker)
    for command in [line for line in code.splitlines() if line.strip() and not line.startswith("#")]:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], capture_output=True, text=True,
                              timeout=120, cwd=frames_folder, env=environment())
        assert done.returncode == 0, f"{line}: {command}\n{done.stderr[-3000:]}"
        assert done.stdout.strip(), f"{line}: {command} printed nothing"

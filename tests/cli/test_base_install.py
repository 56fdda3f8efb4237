"""The base install, without the capture extra (pyspark, pyarrow, pandas, numpy, cryptography): the
broker, the client, the pytest plugin and the command line run in processes where those packages cannot
be imported, the commands that need them say in one line what to install, and the installed metadata
keeps them in the ``capture`` extra."""
from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
from packaging.requirements import Requirement

from support.broker_process import BrokerProcess
from kafkawire import cli
from support.paths import REPO
from support.plugin_runs import run_pytest

CAPTURE_EXTRA = {"pyspark", "pyarrow", "pandas", "numpy", "cryptography"}
INSTALL_HINT = "pip install 'kafkawire[capture]'"

# In-process broker, kafkawire's client and its tap (a capture for `show`), in the blocked process.
BASE_PATHS = """
import sys, tempfile
for name in {blocked!r}:
    try:
        __import__(name)
    except ImportError:
        pass
    else:
        raise SystemExit(f"{{name}} was importable")
import kafkawire, kafkawire.broker, kafkawire.client, kafkawire.testing.pytest_plugin
from kafkawire.broker import ClusterThread
from kafkawire.client import Consumer, Producer, TopicPartition
with tempfile.TemporaryDirectory() as data, ClusterThread(1, data, tap_path=sys.argv[1]) as cluster:
    cluster.create_topic("orders", 1)
    with Producer({{"bootstrap.servers": cluster.bootstrap}}) as producer:
        offset = producer.send("orders", b"first", key=b"k").result(30).offset
    with Consumer({{"bootstrap.servers": cluster.bootstrap, "auto.offset.reset": "earliest"}}) as consumer:
        consumer.assign([TopicPartition("orders", 0)])
        records = consumer.poll(timeout_ms=30_000)
print(offset, [record.value.decode() for record in records])
"""

PLUGIN_TEST = """
from kafkawire.client import Producer

def test_produce(kafka_broker):
    topic = kafka_broker.topic()
    with Producer({"bootstrap.servers": kafka_broker.bootstrap}) as producer:
        assert producer.send(topic, b"value").result(30).offset == 0
"""


@pytest.fixture
def without_capture_extra(tmp_path, monkeypatch) -> dict[str, str]:
    """The environment of a process where the capture extra's packages cannot be imported (None in
    sys.modules, set by a sitecustomize on PYTHONPATH), as if they were not installed."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        f"import sys\nsys.modules.update(dict.fromkeys({sorted(CAPTURE_EXTRA | {'py4j'})!r}))\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(blocker)]))
    return dict(os.environ)


def kafkawire(env, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkawire", *argv], env=env, capture_output=True, text=True,
                          timeout=120)


def test_broker_client_and_show_run_without_the_capture_extra(without_capture_extra, tmp_path):
    tap = tmp_path / "tap.pcapng"
    run = subprocess.run([sys.executable, "-c", BASE_PATHS.format(blocked=sorted(CAPTURE_EXTRA)), str(tap)],
                         env=without_capture_extra, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[0] == "0 ['first']"
    # show reads local captures with the base install
    shown = kafkawire(without_capture_extra, "show", "--filter", "api=Produce", str(tap))
    assert shown.returncode == 0, shown.stderr
    assert "Produce v" in shown.stdout and shown.stderr == ""
    cut = tmp_path / "cut.pcapng"  # and says what it skipped, as it does with the extra
    cut.write_bytes(tap.read_bytes()[:-10])
    shown = kafkawire(without_capture_extra, "show", str(cut))
    assert shown.returncode == 0, shown.stderr
    assert "truncated_tail: " in shown.stdout.splitlines()[-1]


def test_the_pytest_plugin_runs_without_the_capture_extra(without_capture_extra, tmp_path):
    (tmp_path / "test_user.py").write_text(PLUGIN_TEST)
    result = run_pytest(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_the_command_line_without_the_capture_extra(without_capture_extra, tmp_path):
    apis = kafkawire(without_capture_extra, "apis", "--json")
    assert apis.returncode == 0, apis.stderr
    assert {"key": 0, "name": "Produce"}.items() <= json.loads(apis.stdout)[0].items()
    broker = BrokerProcess(tmp_path / "data")  # `kafkawire broker`, started with the blocked environment
    broker.kill()
    # the commands that need the extra: one line naming what to install, exit status 2, no traceback
    (tmp_path / "empty.pcap").write_bytes(b"")
    (tmp_path / "keys.log").write_text(f"CLIENT_RANDOM {'ab' * 32} {'cd' * 48}\n")
    (tmp_path / "header.pcap").write_bytes(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
    for argv in (["decode", str(tmp_path / "empty.pcap"), "--out", str(tmp_path / "tables")],
                 ["report", str(tmp_path / "tables")], ["demo"],
                 ["show", "s3://bucket/capture.pcap"],  # show reads remote files with pyarrow
                 ["show", "--keylog", str(tmp_path / "keys.log"), str(tmp_path / "header.pcap")]):  # cryptography
        result = kafkawire(without_capture_extra, *argv)
        assert (result.returncode, result.stdout) == (2, ""), (argv, result.stderr)
        assert result.stderr.count("\n") == 1 and INSTALL_HINT in result.stderr, (argv, result.stderr)
        assert result.stderr.startswith(f"kafkawire {argv[0]}: needs "), result.stderr


def test_installed_metadata_keeps_spark_in_the_capture_extra():
    requirements = [Requirement(text) for text in importlib.metadata.requires("kafkawire") or []]
    base = {r.name.lower() for r in requirements if r.marker is None}
    extras = {extra: {r.name.lower() for r in requirements if r.marker and r.marker.evaluate({"extra": extra})}
              for extra in importlib.metadata.metadata("kafkawire").get_all("Provides-Extra")}
    stale = "kafkawire's installed metadata is older than pyproject.toml: pip install -e '.[test]' again"
    assert not base & CAPTURE_EXTRA, stale
    # plotly too, which only `report --html` imports (the command line checks for it then)
    assert extras.get("capture", set()) == CAPTURE_EXTRA | {"plotly"}, stale
    assert "kafkawire" in extras["test"]  # the tests' extra brings the capture extra
    assert set(cli.CAPTURE_EXTRA) == CAPTURE_EXTRA  # what the command line checks before decode
    assert {"construct", "crc32c", "zstandard"} <= base

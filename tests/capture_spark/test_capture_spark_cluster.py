"""The capture job on a real Spark standalone cluster: a master and two workers started from PySpark's own
distribution (``spark-class``) on 127.0.0.1, each worker one core and its own work folder; then
``kafkawire decode --master spark://...`` and spark-submit with the captures guide's cluster settings, and the
tables must equal the local run's (the shared local session, conftest).

The captures guide's cluster section (docs/guide/captures.md) describes what this does. Skipped only without Java.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
import pyarrow.parquet as pq  # noqa: E402

from support.capture_synthetic import build_synthetic  # noqa: E402
from support.loopback_capture import wait_until  # noqa: E402
from support.paths import REPO  # noqa: E402
from kafkawire.capture.tables.table_sets import table_names  # noqa: E402
from kafkawire.capture_spark import job  # noqa: E402

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"
WORKERS = 2
# The daemons' and executors' heaps: small, two workers and their executors share the test machine.
DAEMON_MEMORY = "256m"
EXECUTOR_MEMORY = "512m"
# Every JVM here mostly starts up (JIT-compiling Spark itself): the quick compiler alone and the serial
# collector make that cheaper, as the embedded local session does (session.LOCAL_SETTINGS).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
JOB_OPTIONS = ["--executor-memory", EXECUTOR_MEMORY, "--driver-java-options", JVM_OPTIONS,
               "--conf", f"spark.executor.extraJavaOptions={JVM_OPTIONS}"]


def cluster_environment(work: Path) -> dict:
    """What the master, the workers (and the executors they start) and the driver run with: this Python
    for the workers, kafkawire importable from this checkout, everything on 127.0.0.1."""
    python_path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {key: value for key, value in os.environ.items() if key != "PYSPARK_GATEWAY_PORT"}
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY=DAEMON_MEMORY, SPARK_DAEMON_JAVA_OPTS=JVM_OPTIONS,
               SPARK_LOG_DIR=str(work / "logs"), SPARK_WORKER_DIR=str(work / "workers"),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONPATH=python_path)
    return env


class Cluster:
    def __init__(self, work: Path):
        self.work = work
        self.env = cluster_environment(work)
        self.processes: list[subprocess.Popen] = []
        self.url = ""

    def start(self, name: str, *args: str) -> Path:
        log = self.work / f"{name}.log"
        with open(log, "wb") as out:
            self.processes.append(subprocess.Popen([str(SPARK_CLASS), *args], stdout=out, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, env=self.env))
        return log

    def up(self) -> "Cluster":
        master_log = self.start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                "--port", "0", "--webui-port", "0")
        found = []

        def master_url() -> bool:
            self.check_alive()
            found[:] = re.findall(r"Starting Spark master at (spark://\S+)", master_log.read_text(errors="replace"))
            return bool(found)
        wait_until(master_url, "the Spark master to start", timeout=120)
        self.url = found[0]
        for n in range(WORKERS):
            self.start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                       "--webui-port", "0", "--cores", "1", "--memory", "1g",
                       "--work-dir", str(self.work / f"worker-{n}"), self.url)

        def registered() -> bool:
            self.check_alive()
            return master_log.read_text(errors="replace").count("Registering worker") >= WORKERS
        wait_until(registered, "both workers to register with the master", timeout=120)
        return self

    def check_alive(self) -> None:
        for process in self.processes:
            if process.poll() is not None:
                logs = "\n".join(path.read_text(errors="replace")[-2000:] for path in self.work.glob("*.log"))
                raise RuntimeError(f"a Spark daemon exited with {process.returncode}:\n{logs}")

    def down(self) -> None:
        for process in self.processes:  # only the daemons this fixture started, by their pid
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)")
    running = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield running.up()
    finally:
        running.down()


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    return build_synthetic(tmp_path_factory.mktemp("cluster-capture")).path


@pytest.fixture(scope="module")
def local_tables(spark, capture, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cluster-local") / "tables"
    job.decode(spark, [str(capture)], str(out), records=True)
    return out


def assert_same_tables(expected: Path, actual: Path) -> None:
    assert table_names(str(actual)) == table_names(str(expected))
    for name in table_names(str(expected)):
        want, got = pq.read_table(expected / name), pq.read_table(actual / name)
        assert got.schema == want.schema, name
        keys = [(column, "ascending") for column in want.column_names
                if column not in ("body", "headers", "error_codes")]
        assert got.sort_by(keys).equals(want.sort_by(keys)), name


def readme_cluster_command() -> list[str]:
    """The captures guide's spark-submit example with its --conf settings, as written, but for the packed
    virtualenv (``--archives`` and the Python in it), which only a real cluster's nodes need."""
    readme = (REPO / "docs" / "guide" / "captures.md").read_text()
    (example,) = [block for block in re.findall(r"^```sh\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
                  if "spark-submit" in block]
    words = shlex.split(example.replace("\\\n", " "))
    settings = []
    for i, word in enumerate(words):
        if word == "--conf" and not words[i + 1].startswith("spark.pyspark.python="):
            settings += ["--conf", words[i + 1]]
    return settings


def test_decode_on_a_standalone_cluster(cluster, capture, local_tables, tmp_path):
    """`kafkawire decode --master spark://...`: the job's tasks run in the workers' executors."""
    out = tmp_path / "tables"
    done = subprocess.run([sys.executable, "-m", "kafkawire", "decode", str(capture), "--out", str(out), "--records",
                           "--master", cluster.url],
                          env={**cluster.env, "PYSPARK_SUBMIT_ARGS": shlex.join(JOB_OPTIONS) + " pyspark-shell"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f" on {cluster.url}, into " in done.stdout
    assert_same_tables(local_tables, out)
    # the executors ran in the workers' folders: each worker started one for the application
    executors = list((cluster.work).glob("worker-*/app-*/*/stderr"))
    assert len({path.parts[-4] for path in executors}) == WORKERS, executors


def test_spark_submit_to_a_standalone_cluster(cluster, capture, local_tables, tmp_path):
    """spark-submit as the captures guide's cluster section writes it (its --conf settings and entry script)."""
    out = tmp_path / "tables"
    script = subprocess.run([sys.executable, "-c", "import kafkawire.capture_spark.submit as s; print(s.__file__)"],
                            capture_output=True, text=True, check=True, env=cluster.env).stdout.strip()
    done = subprocess.run([str(SPARK_SUBMIT), "--master", cluster.url, *JOB_OPTIONS, *readme_cluster_command(), script, "decode", str(capture), "--out", str(out), "--records"],
                          env=cluster.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f" on {cluster.url}, into " in done.stdout
    assert_same_tables(local_tables, out)

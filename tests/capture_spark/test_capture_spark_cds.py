"""The local JVM's class-data-sharing archive: asked for only by callers that stop their session, mapped
when present, published only after the JVM that wrote it exited cleanly (a partial archive crashes
the next JVM that maps it), and stale temporaries of killed runs cleaned up."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("pyspark")

from kafkawire.capture_spark import class_archive  # noqa: E402
from kafkawire.capture_spark import session as spark_module  # noqa: E402

OPTIONS = "-XX:TieredStopAtLevel=1"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("KAFKAWIRE_SPARK_CDS", raising=False)
    if class_archive.archive_path(OPTIONS) is None:
        pytest.skip("no java binary to key the archive on")
    return tmp_path / "kafkawire"


def test_no_archive_and_not_asked_to_write_one(cache):
    assert class_archive.archive_options(OPTIONS, write=False) == ("", None)


def test_asked_to_write_gives_a_temporary_path_beside_the_final_one(cache):
    options, pending = class_archive.archive_options(OPTIONS, write=True)
    temporary, final = pending
    assert options == f" -Xlog:cds*=off -XX:ArchiveClassesAtExit={temporary}"
    assert temporary.parent == final.parent == cache and temporary.name.startswith(final.name)
    assert not final.exists()


def test_an_existing_archive_is_mapped(cache):
    final = class_archive.archive_path(OPTIONS)
    final.parent.mkdir(parents=True)
    final.write_bytes(b"archive")
    assert class_archive.archive_options(OPTIONS, write=True) == (f" -Xlog:cds*=off -XX:SharedArchiveFile={final}", None)


def test_the_archive_is_keyed_on_the_jvm_options(cache):
    assert class_archive.archive_path(OPTIONS) != class_archive.archive_path(OPTIONS + " -XX:+UseSerialGC")


def test_another_spark_install_gets_its_own_archive(cache, monkeypatch, tmp_path):
    # the JVM refuses an archive made with another class path (another venv's PySpark)
    import pyspark

    other = tmp_path / "other-spark"
    (other / "jars").mkdir(parents=True)
    for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar"):  # the same jars, elsewhere
        (other / "jars" / jar.name).touch()
    monkeypatch.setenv("SPARK_HOME", str(other))
    moved = class_archive.archive_path(OPTIONS)
    monkeypatch.delenv("SPARK_HOME")
    assert moved != class_archive.archive_path(OPTIONS)


def test_switched_off_by_the_environment(cache, monkeypatch):
    monkeypatch.setenv("KAFKAWIRE_SPARK_CDS", "0")
    assert class_archive.archive_options(OPTIONS, write=True) == ("", None)


def test_stale_temporaries_of_dead_runs_are_removed(cache):
    final = class_archive.archive_path(OPTIONS)
    final.parent.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = final.with_name(f"{final.name}.{dead}.tmp")
    stale.write_bytes(b"half an archive")
    class_archive.archive_options(OPTIONS, write=True)
    assert not stale.exists()


def _fake_session(jvm: subprocess.Popen):
    stopped = []
    return SimpleNamespace(sparkContext=SimpleNamespace(_gateway=SimpleNamespace(proc=jvm)),
                           stop=lambda: stopped.append(True)), stopped


def _stand_in_jvm(temporary: Path, exit_code: int) -> subprocess.Popen:
    """A process that, like PySpark's JVM, runs until its stdin closes, then writes the archive and exits."""
    script = (f"import sys; sys.stdin.read(); open({str(temporary)!r}, 'wb').write(b'classes'); "
              f"sys.exit({exit_code})")
    return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE)


@pytest.mark.parametrize("exit_code", [0, 1])
def test_stop_publishes_only_after_a_clean_exit(cache, monkeypatch, exit_code):
    _, pending = class_archive.archive_options(OPTIONS, write=True)
    temporary, final = pending
    monkeypatch.setattr(spark_module, "_pending_archive", pending)
    jvm = _stand_in_jvm(temporary, exit_code)
    fake, stopped = _fake_session(jvm)
    monkeypatch.setattr(spark_module, "_owned", fake)
    spark_module.stop(fake)
    assert stopped == [True] and jvm.returncode == exit_code
    assert not temporary.exists()
    assert final.exists() == (exit_code == 0)
    if exit_code == 0:
        assert final.read_bytes() == b"classes"
    assert spark_module._pending_archive is None


def test_stop_without_a_pending_archive_only_stops(cache, monkeypatch):
    monkeypatch.setattr(spark_module, "_pending_archive", None)
    fake, stopped = _fake_session(None)
    monkeypatch.setattr(spark_module, "_owned", fake)
    spark_module.stop(fake)
    assert stopped == [True]


def test_a_session_it_did_not_start_is_left_running(cache, monkeypatch):
    # the CLI run in-process (tests, notebooks) finds the caller's session and must not stop it
    _, pending = class_archive.archive_options(OPTIONS, write=True)
    monkeypatch.setattr(spark_module, "_pending_archive", pending)
    monkeypatch.setattr(spark_module, "_owned", None)
    fake, stopped = _fake_session(None)
    spark_module.stop(fake)
    assert stopped == [] and spark_module._pending_archive == pending


def test_publishing_prunes_archives_of_other_keys_by_last_use(cache, monkeypatch):
    """Archives of other keys (another JDK, PySpark or venv) are kept up to three in all, most recently used
    first, and not past 30 days unused; mapping an archive counts as using it."""
    import os
    import time

    cache.mkdir(parents=True)
    now = time.time()
    ages = {"recent": 60, "older": 3600, "oldest": 7200, "stale": 40 * 24 * 3600}
    for name, age in ages.items():
        path = cache / f"spark-classes-{name}.jsa"
        path.write_bytes(b"x")
        os.utime(path, (now - age, now - age))
    unrelated = cache / "notes.txt"
    unrelated.write_text("kept")
    mapped = cache / "spark-classes-oldest.jsa"
    monkeypatch.setattr(class_archive, "archive_path", lambda options: mapped)
    assert class_archive.archive_options(OPTIONS, write=False)[0].endswith(f"SharedArchiveFile={mapped}")
    assert time.time() - mapped.stat().st_mtime < 60  # mapped: now the most recently used

    published = cache / "spark-classes-new.jsa"
    published.write_bytes(b"classes")
    class_archive.prune_archives(published)
    assert sorted(p.name for p in cache.iterdir()) == [
        "notes.txt", "spark-classes-new.jsa", "spark-classes-oldest.jsa", "spark-classes-recent.jsa"]


STOP_SCRIPT = """
import threading, time
from kafkawire.capture_spark import session as spark
context = spark.context(keep_classes=True)
total = context.accumulator(0)
context.parallelize(range(100), 4).foreach(lambda n: total.add(n))
server = context._accumulatorServer
spark.stop(context)
deadline = time.monotonic() + 30
while server.socket.fileno() != -1 and time.monotonic() < deadline:
    time.sleep(0.05)
print(total.value, server.socket.fileno())
"""


def test_stop_leaves_the_accumulator_server_to_a_thread_that_closes_it(tmp_path):
    """stop() does not wait for PySpark's accumulator server (its handler polls once a second) but
    hands its shutdown to a thread: every task's update has arrived by then, and the server's socket
    is closed soon after, not leaked."""
    environment = {**os.environ, "KAFKAWIRE_SPARK_CDS": "0", "SPARK_LOCAL_IP": "127.0.0.1",
                   "PYSPARK_PYTHON": sys.executable, "XDG_CACHE_HOME": str(tmp_path)}
    environment.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run([sys.executable, "-c", STOP_SCRIPT], env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["4950", "-1"]

"""The SparkSession the capture job runs on: local Spark by default, or whatever spark-submit provides.

Under spark-submit the JVM is already running with the master, executors and resources of the command
line, and ``session()`` (or ``context()``) keeps them, adding only the settings the job needs. Run
directly, they start local Spark on every core of this machine.

A local JVM spends most of its start loading and verifying Spark's classes: about 14 CPU-s for a
session and its first job here, nearly all of it before any data moves. The JVM can map those classes
from a class-data-sharing archive instead (CDS, Java 13+), which halves that. The archive lives in
the user's cache, named after everything it depends on (the java binary, PySpark, the jars, the JVM
options). A command that will stop its session with ``stop()`` asks for one when none exists
(``session(keep_classes=True)``): its JVM writes the archive to a temporary file at exit, and ``stop``
publishes it only once that JVM has exited cleanly, because a partial archive crashes the next JVM
that maps it. Publishing one removes the archives of other keys beyond the three most recently used,
or unused for 30 days. ``KAFKAWIRE_SPARK_CDS=0`` turns this off.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

# Settings the job relies on, wherever it runs.
JOB_SETTINGS = {
    # The frames table is wide (the typed bodies) and holds large binaries: Spark's vectorized reader at
    # its default 4,096 rows per batch asked for 125 MB blocks and ran a 2 GB driver out of heap reading
    # such rows back from a 1 GB capture.
    "spark.sql.parquet.columnarReaderBatchSize": "256",
    # Timestamps are written as UTC instants.
    "spark.sql.session.timeZone": "UTC",
}

# Settings for the embedded local session only.
LOCAL_SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "8",
    "spark.python.worker.reuse": "true",
    # The JVM only moves the shuffle's bytes (the Python workers do the decoding): its cost is
    # starting up, mostly JIT-compiling Spark itself. The quick compiler alone and the serial collector
    # halve that (about 17 CPU-s to 8 for a session and its first job, measured here).
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    # The workers' Arrow allocations go to the C library's malloc rather than Arrow's default, mimalloc.
    # A decode task grows large buffers (converted columns, Parquet pages) by doubling: mimalloc moves
    # each to fresh memory that the kernel faults in and zeroes, where glibc remaps the pages in place.
    # Stage 2 in-process, 64 MB of capture, mean of 4-5 interleaved runs: kernel CPU 0.23 -> 0.14 s,
    # and 0.55 -> 0.35 s with --records; user CPU unchanged. (Session 7's MIMALLOC_PURGE_DELAY=-1,
    # which kept mimalloc from returning memory, had recovered less of the same cost.)
    "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": "system",
    # A worker imports numpy (pyarrow converting Python lists imports pandas), whose OpenBLAS starts a
    # thread per core that spins after it starts: about 0.1 CPU-s per worker process, for a library
    # the job never calls.
    "spark.executorEnv.OPENBLAS_NUM_THREADS": "1",
    # PySpark's daemon, importing PySpark from the installed package instead of pyspark.zip, whose
    # modules Python compiles from source at every start (see spark_daemon.py): the first task of a
    # run started about 0.8 s sooner.
    "spark.python.daemon.module": "kafkawire.capture.spark_daemon",
    # The shuffle carries only packets' headers (tens of MB per GB of capture, to local disk), so
    # compressing them is JVM CPU for little: 1 GB bench, four pairs of runs, JVM CPU 6.9, 5.0, 3.7
    # and 3.8 s with compression against 4.1, 3.3, 3.0 and 3.5 s without.
    "spark.shuffle.compress": "false",
}


# The JVM's CDS messages go to the command's stdout: an archive it cannot use (another JDK build, a class
# path that moved) is only a slower start, not something to print in the middle of a command's output.
_QUIET = "-Xlog:cds*=off"
ARCHIVES_KEPT = 3                     # class archives of different keys kept side by side (two venvs...)
ARCHIVE_MAX_AGE_S = 30 * 24 * 3600    # and an archive of another key unused this long is removed
# A local session that will write a class archive when its JVM exits: (temporary file, final name).
_pending_archive: tuple[Path, Path] | None = None
# The session session(keep_classes=True) started, which stop() ends (any other one is left running).
_owned = None


def session(master: str | None = None, app_name: str = "kafkawire-decode", keep_classes: bool = False):
    """The active SparkSession, the one spark-submit configured, or a new one on ``master`` (default
    ``local[*]``). A new local session maps the class archive when there is one; with ``keep_classes`` it
    writes one when there is not (the caller must end with ``stop(spark)``, which publishes it)."""
    global _owned
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        spark = active
    else:
        builder = SparkSession.builder.appName(app_name)
        for key, value in _settings(master, keep_classes, new_jvm=active is None).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        if keep_classes and active is None:  # getOrCreate may still return a session someone else started
            _owned = spark
    for key, value in JOB_SETTINGS.items():
        spark.conf.set(key, value)
    return spark


def context(master: str | None = None, app_name: str = "kafkawire-decode", keep_classes: bool = False):
    """Like ``session()``, for a job that needs only RDDs: the active SparkContext, spark-submit's, or a
    new one. A SparkContext alone starts about a second sooner than a session (no SQL state)."""
    global _owned
    from pyspark import SparkConf, SparkContext

    active = SparkContext._active_spark_context
    if active is not None and master is None:
        return active
    conf = SparkConf().setAppName(app_name)  # spark-submit's settings are loaded here
    for key, value in _settings(master, keep_classes, new_jvm=active is None).items():
        conf.set(key, value)
    spark = SparkContext.getOrCreate(conf)
    spark.setLogLevel("ERROR")
    if keep_classes and active is None:
        _owned = spark
    return spark


def submitted() -> bool:
    """Whether spark-submit started this Python (its JVM is up, with the master and resources the user
    chose): PySpark then connects to that JVM through the port it was given."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _settings(master: str | None, keep_classes: bool, new_jvm: bool) -> dict[str, str]:
    """Settings for a new session or context: none under spark-submit without a master (its command line
    decides), else the master, and for a local one the embedded settings and class archive."""
    global _pending_archive
    if master is None and submitted():
        return {}
    # Workers must run this interpreter (it has kafkawire and its dependencies installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {"spark.master": master or "local[*]"}
    if new_jvm:
        _import_pandas_in_background()
    if master is None or master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.update(LOCAL_SETTINGS)
        if new_jvm:  # it can map (or write) the class archive
            archive_options, _pending_archive = _class_archive(settings["spark.driver.extraJavaOptions"],
                                                               keep_classes)
            settings["spark.driver.extraJavaOptions"] += archive_options
    return settings


def _import_pandas_in_background() -> None:
    """Import pandas on a thread while the JVM starts. PySpark's first call into a new JVM (creating
    its SparkConf) runs a py4j argument converter that imports ``pyspark.testing.utils``, which imports
    pandas: half a second of the driver's CPU while the JVM waits for the call. Imported here while the
    driver only waits for the JVM to come up, a context was ready in 1.64-1.90 s instead of 1.98-2.30 s
    (five starts each). pandas imports nothing of PySpark, so this import cannot deadlock with the
    ones the main thread makes meanwhile."""
    def run() -> None:
        try:
            import pandas  # noqa: F401
        except ImportError:
            pass

    threading.Thread(target=run, name="kafkawire-import-pandas", daemon=True).start()


def stop(spark) -> None:
    """End a session (or context) ``session(keep_classes=True)`` started: stop it and, for a local one,
    end its JVM and publish the class archive it wrote on exit (only after a clean exit: a partial
    archive crashes the JVM that maps it); the process cannot start another session afterwards. One
    that was already running when ``session()`` was called (a test's, a notebook's) is left running."""
    global _pending_archive, _owned
    if spark is not _owned:
        return
    _owned = None
    context = getattr(spark, "sparkContext", spark)
    gateway = getattr(context, "_gateway", None)
    _stop_accumulator_server_in_background(context)
    spark.stop()
    pending, _pending_archive = _pending_archive, None
    if pending is None:
        return
    temporary, final = pending
    jvm = getattr(gateway, "proc", None)  # the JVM PySpark launched; it exits when its stdin closes
    try:
        if jvm is not None and jvm.stdin is not None:
            jvm.stdin.close()
            if jvm.wait(timeout=120) == 0 and temporary.stat().st_size > 0:
                os.replace(temporary, final)
                _prune_archives(final)
    except (OSError, subprocess.TimeoutExpired):
        pass  # no archive this time
    finally:
        temporary.unlink(missing_ok=True)  # gone already when published


def _stop_accumulator_server_in_background(context) -> None:
    """PySpark's stop() first waits for its accumulator server, whose handler polls the JVM's connection
    once a second: about a second at the end of every run (0.84-0.98 s measured), after the job's
    updates have all arrived (each task's are acknowledged before the job ends). The server is shut
    down on a daemon thread instead, and stop() goes on without it."""
    server = getattr(context, "_accumulatorServer", None)
    if server is None:
        return
    context._accumulatorServer = None
    threading.Thread(target=server.shutdown, name="accumulator server shutdown", daemon=True).start()


def _class_archive(java_options: str, write: bool) -> tuple[str, tuple[Path, Path] | None]:
    """(JVM options that map the class archive or write a new one, (temporary, final) when writing)."""
    if os.environ.get("KAFKAWIRE_SPARK_CDS", "1") == "0":
        return "", None
    try:
        final = _archive_path(java_options)
        if final is None:
            return "", None
        if final.is_file():
            os.utime(final)  # its modification time says when it was last used (see _prune_archives)
            return f" {_QUIET} -XX:SharedArchiveFile={final}", None
        if not write:
            return "", None
        final.parent.mkdir(parents=True, exist_ok=True)
        for stale in final.parent.glob(f"{final.name}.*.tmp"):  # left by a run that was killed
            if not _alive(stale.name.rsplit(".", 2)[-2]):
                stale.unlink(missing_ok=True)
        temporary = final.with_name(f"{final.name}.{os.getpid()}.tmp")
        return f" {_QUIET} -XX:ArchiveClassesAtExit={temporary}", (temporary, final)
    except OSError:
        return "", None  # no cache folder: run without the archive


def _prune_archives(kept: Path, keep: int = ARCHIVES_KEPT, max_age_s: float = ARCHIVE_MAX_AGE_S) -> None:
    """Remove the archives of other keys (another JDK, PySpark or venv) beyond the ``keep`` most
    recently used and any unused for ``max_age_s``: each is about 160 MB, and a key never comes back
    once its JDK or PySpark is upgraded."""
    now = time.time()
    others = []
    for path in kept.parent.glob("spark-classes-*.jsa"):
        if path != kept:
            try:
                others.append((path.stat().st_mtime, path))
            except OSError:
                continue
    others.sort(reverse=True)
    for rank, (used, path) in enumerate(others, start=1):  # the archive just published is the first kept
        if rank >= keep or now - used > max_age_s:
            path.unlink(missing_ok=True)


def _archive_path(java_options: str) -> Path | None:
    """Where the archive for this java, PySpark, jars and options lives; None without a java to key it on."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    java = os.path.realpath(java)
    spark_home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    jars = sorted(p.name for p in (spark_home / "jars").glob("*.jar"))
    # the JVM checks the class path against the archive's: another install of the same PySpark (another
    # venv) needs an archive of its own
    key = hashlib.sha256("\n".join([java, str(os.stat(java).st_mtime_ns), pyspark.__version__, java_options,
                                     str(spark_home.resolve()), *jars]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kafkawire"
    return cache / f"spark-classes-{key}.jsa"


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True

"""The SparkSession the capture job runs on: local Spark by default, or whatever spark-submit provides.

Under spark-submit the JVM is already running with the master, executors and resources of the command
line, and ``session()`` (or ``context()``) keeps them, adding only the settings the job needs. Run
directly, they start local Spark on every core of this machine, mapping Spark's classes from a
class-data-sharing archive (``class_archive``); a command that stops its session with ``stop()`` asks
for one when none exists (``session(keep_classes=True)``), and ``stop`` publishes it. The figures
behind each setting are in docs/performance.md, "Capture decoding: design measurements".
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from .class_archive import archive_options, prune_archives

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

DAEMON_MODULE = "kafkawire.capture_spark.daemon"  # spark.python.daemon.module, on a cluster too

# Settings the job relies on, wherever it runs.
JOB_SETTINGS = {
    # The frames table is wide (the typed bodies) and holds large binaries: Spark's vectorized reader at
    # its default 4,096 rows per batch asks for blocks large enough to run a 2 GB driver out of heap.
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
    # starting up, mostly JIT-compiling Spark itself, which the quick compiler alone and the serial
    # collector halve.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    # The workers' Arrow allocations go to the C library's malloc rather than Arrow's default, mimalloc.
    # A decode task grows large buffers (converted columns, Parquet pages) by doubling: mimalloc moves
    # each to fresh memory that the kernel faults in and zeroes, where glibc remaps the pages in place.
    "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": "system",
    # A worker imports numpy (pyarrow converting Python lists imports pandas), whose OpenBLAS starts a
    # thread per core that spins after it starts, for a library the job never calls.
    "spark.executorEnv.OPENBLAS_NUM_THREADS": "1",
    # PySpark's daemon, importing PySpark from the installed package instead of pyspark.zip, whose
    # modules Python compiles from source at every start (see daemon.py): the first task starts sooner.
    "spark.python.daemon.module": DAEMON_MODULE,
    # The shuffle carries only packets' headers (tens of MB per GB of capture, to local disk), so
    # compressing them is JVM CPU for little.
    "spark.shuffle.compress": "false",
}


# A local session that will write a class archive when its JVM exits: (temporary file, final name).
_pending_archive: tuple[Path, Path] | None = None
# The session session(keep_classes=True) started, which stop() ends (any other one is left running).
_owned: SparkSession | SparkContext | None = None


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
            options, _pending_archive = archive_options(settings["spark.driver.extraJavaOptions"], keep_classes)
            settings["spark.driver.extraJavaOptions"] += options
    return settings


def _import_pandas_in_background() -> None:
    """Import pandas on a thread while the JVM starts. PySpark's first call into a new JVM (creating
    its SparkConf) runs a py4j argument converter that imports ``pyspark.testing.utils``, which imports
    pandas, while the JVM waits for the call; imported while the driver only waits for the JVM to come
    up, that time overlaps the JVM's start instead of adding to it. pandas imports nothing of PySpark,
    so this import cannot deadlock with the ones the main thread makes meanwhile."""
    def run() -> None:
        try:
            import pandas  # noqa: F401
        except ImportError:
            pass

    threading.Thread(target=run, name="kafkawire-import-pandas", daemon=True).start()


def stop(spark: SparkSession | SparkContext) -> None:
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
                prune_archives(final)
    except (OSError, subprocess.TimeoutExpired):
        pass  # no archive this time
    finally:
        temporary.unlink(missing_ok=True)  # gone already when published


def _stop_accumulator_server_in_background(context) -> None:
    """PySpark's stop() first waits for its accumulator server, whose handler polls the JVM's connection
    once a second: up to a second at the end of every run, after the job's
    updates have all arrived (each task's are acknowledged before the job ends). The server is shut
    down on a daemon thread instead, and stop() goes on without it."""
    server = getattr(context, "_accumulatorServer", None)
    if server is None:
        return
    context._accumulatorServer = None
    threading.Thread(target=server.shutdown, name="accumulator server shutdown", daemon=True).start()

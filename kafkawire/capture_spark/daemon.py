"""PySpark's worker daemon (``pyspark.daemon``), importing PySpark from its installed package.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on the workers' PYTHONPATH.
Python cannot keep compiled bytecode for modules it imports from a zip, so the daemon compiled PySpark
from source each time it started, before the first task of a run could start, and every
worker process compiled ``pyspark.worker`` again after its fork. With pip's PySpark, which the
embedded session runs, the zip holds the same PySpark as the installed package, whose bytecode is
cached: the daemon leaves the zips out of ``sys.path`` when that package is there (a Spark
distribution's PySpark, found only in its zip, is left as it is). The embedded session names this
module in ``spark.python.daemon.module`` (on a cluster, pass it with ``--conf``); the workers it forks
inherit the path.

The daemon also imports what the capture job's tasks import (pyarrow, the job's modules, and pandas,
which pyarrow imports at its first conversion of Python lists) before it forks any worker: each worker
then starts with them loaded (shared with the daemon until written), where each had spent CPU importing
them at its first task; the daemon's own start takes longer, by less than two workers spent
(docs/performance.md, "Capture decoding: design measurements"). The only threads these imports start are
the background thread of pyarrow's jemalloc and, unless ``OPENBLAS_NUM_THREADS=1``, OpenBLAS's (checked
in /proc); both libraries register fork handlers (pthread_atfork) for that.
"""
from __future__ import annotations

import importlib
import os
import sys
from importlib.machinery import PathFinder


def _without_spark_zips(path: list[str]) -> list[str]:
    return [entry for entry in path
            if not (entry.endswith(".zip") and os.path.basename(entry).startswith(("pyspark", "py4j")))]


def _prefer_installed_pyspark() -> None:
    path = _without_spark_zips(sys.path)
    if path != sys.path and all(PathFinder.find_spec(name, path) for name in ("pyspark", "py4j")):
        sys.path[:] = path


# What a capture task imports: stage 1 (the packet reader, the chunks), stage 2 (reassembly, decoding,
# the tables and their Parquet writer, pyarrow, numpy), and pandas, which pyarrow's first
# pa.array() of Python lists imports.
PRELOAD = ("kafkawire.capture_spark.read_stage", "kafkawire.capture_spark.decode_stage",
           "kafkawire.capture.kafka.kafka_connection", "kafkawire.capture.tables.rows", "pyarrow.parquet", "pandas")


def _preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a worker that needs it will say so itself


if __name__ == "__main__":
    _prefer_installed_pyspark()
    _preload()
    from pyspark import daemon

    daemon.manager()

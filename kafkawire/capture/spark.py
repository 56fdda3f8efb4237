"""The SparkSession the capture job runs on: local Spark by default, or whatever spark-submit provides.

Under spark-submit a session already exists (master, executors and resources come from the command
line) and ``session()`` returns it unchanged apart from the settings the job needs. Run directly,
``session()`` starts local Spark on every core of this machine.
"""
from __future__ import annotations

import os
import sys

# Settings the job relies on, wherever it runs.
JOB_SETTINGS = {
    # Packet payloads are up to 64 KiB (loopback, TSO): keep Arrow batches to a few MiB.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "512",
    # The frames table is wide (the typed bodies) and holds large binaries: Spark's vectorized reader at
    # its default 4,096 rows per batch asked for 125 MB blocks and ran a 2 GB driver out of heap reading
    # such rows back from a 1 GB capture.
    "spark.sql.parquet.columnarReaderBatchSize": "256",
    # Timestamps are written as UTC instants.
    "spark.sql.session.timeZone": "UTC",
    # The decode stage sets its own partition count from the capture size.
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
}

# Settings for the embedded local session only.
LOCAL_SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "8",
    "spark.python.worker.reuse": "true",
    # The JVM only moves small packet index rows (the Python workers do the decoding): its cost is
    # starting up, mostly JIT-compiling Spark itself. The quick compiler alone and the serial collector
    # halve that (about 17 CPU-s to 8 for a session and its first job, measured here).
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def session(master: str | None = None, app_name: str = "kafkawire-decode"):
    """The active SparkSession, or a new one on ``master`` (default ``local[*]``)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        spark = active
    else:
        # Workers must run this interpreter (it has kafkawire and its dependencies installed).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if master is None or master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.appName(app_name).master(master or "local[*]")
        if master is None or master.startswith("local"):
            for key, value in LOCAL_SETTINGS.items():
                builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    for key, value in JOB_SETTINGS.items():
        spark.conf.set(key, value)
    return spark

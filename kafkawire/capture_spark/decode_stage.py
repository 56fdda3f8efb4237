"""Stage 2 of the capture job: each connection's packets -> Parquet files of the tables.

The task's chunk rows come sorted by (connection, first order), so each connection's packets arrive
together and in capture order: they are rebuilt (payloads read back from the files), streamed through
``capture.kafka.kafka_connection.decode_connection`` and ``capture.tables.rows.TableBatcher``, and written by
``part_files.TableFiles``, one connection's state held at a time.
"""
from __future__ import annotations

from itertools import groupby

from ..capture.kafka.kafka_connection import decode_connection
from ..capture.files.payloads import PayloadReader
from ..capture.tables.rows import TableBatcher
from .chunks import prefetched, unpack_packets
from .part_files import TableFiles
from .worker_memory import keep_freed_memory

__all__ = ["decode_partition", "connections_of"]


def decode_partition(files: list[str], out: str, broker_ports: set[int] | None, records: bool,
                     task: tuple[int, int] | None = None, names=None, keys=None):
    """Stage 2's task body (a closure so the options travel to the workers): decodes the partition's
    connections from its chunk rows, sorted by (connection, first order), writes the table rows under
    ``out`` and yields (table, file relative to ``out``, rows) for each Parquet file written.

    ``files`` are the run's captures by file index; ``out`` an absolute path or a URI. ``task`` is
    (partition id, attempt id), by default the running Spark task's (given when run without Spark).
    ``names`` (an accumulator of ``topic_join.TopicIdNames``, or anything with ``add(dict)``) gets the
    topic names by id that the task's responses paired, for ``topic_join.name_topics``. ``keys`` (a
    ``capture.tls.key_log.KeyLog``, which travels to the workers in the closure) decrypts TLS connections.
    """
    def run(rows):
        if task is None:  # a Spark worker, which runs task after task: see worker_memory
            keep_freed_memory()
            partition, attempt = _spark_task()
        else:
            partition, attempt = task
        batcher = TableBatcher(records=records)
        with PayloadReader(files) as payloads, TableFiles(out, partition, attempt) as written:
            for connection, connection_packets in connections_of(prefetched(rows, payloads), payloads):
                for item in decode_connection(connection_packets, broker_ports, keys=keys):
                    for table, batch in batcher.add(item):
                        written.write(table, batch)
                for table, batch in batcher.end_connection(connection):
                    written.write(table, batch)
            for table, batch in batcher.finish():
                written.write(table, batch)
        if names is not None and batcher.topic_names.names:
            names.add(dict(batcher.topic_names.names))
        yield from written.files
    return run


def _spark_task() -> tuple[int, int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("decode_partition runs inside a Spark task, or is given task=(partition, attempt)")
    return context.partitionId(), context.taskAttemptId()


def _connection_of(row) -> str:
    return row[0][0]


def connections_of(rows, payloads: PayloadReader):
    """Chunk rows sorted by (connection, first order) -> (connection, iterator of its Packets) in turn."""
    for connection, connection_rows in groupby(rows, key=_connection_of):
        yield connection, unpack_packets(connection_rows, payloads)

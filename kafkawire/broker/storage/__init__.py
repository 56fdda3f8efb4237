"""The broker's storage: partition logs on disk in Kafka's layout, and a directory standing in for tiered storage.

``DATA/<topic>-<partition>/`` holds ``<20-digit base offset>.log`` segments of record batches with their
assigned offsets, ``.index`` sparse offset indexes (Kafka's format) and ``.snapshot`` producer-state
snapshots (Kafka's format). ``PartitionLog`` appends (validating as Kafka 4.0 does), reads with KIP-74's
per-partition semantics, rolls, recovers a torn tail, applies retention and moves closed segments to a
``RemoteStore``. Pure Python, synchronous; no asyncio here, but for the log cleaner (``cleaner*``:
compaction, whose heavy work runs on a worker thread and whose swap runs on the event loop).

The modules: ``log`` (``PartitionLog``, over ``local_log``, ``log_reads``, ``log_retention``...), ``config``
(``LogConfig``), ``errors``, ``file_records`` (``FileRecords``, the sendfile pieces), ``remote``
(``RemoteStore``), ``validation``. Nothing is imported here: a broker with no topic loads none of them.
"""

"""Kafka's record formats: RecordBatch v2 and legacy message sets v0/v1, read and written.

Reading::

    for batch in iter_batches(blob):         # lazy, zero-copy views; CRCs checked
        for record in batch:                  # decompressed on demand, bounded
            ...
        columns = batch.columns()             # or: arrays, no object per record

Writing: RecordBatchBuilder (magic 2) and LegacyMessageSetBuilder (magic 0 and 1).
"""
from .batch import RecordBatch
from .builder import LegacyMessageSetBuilder, RecordBatchBuilder, transaction_marker_batch
from .columns import RecordColumns
from .compression import DEFAULT_DECOMPRESSED_LIMIT, Codec, compress, decompress
from .control import ControlRecord, ControlType, control_key, control_record, end_txn_marker_value
from .legacy import LegacyBatch
from .reader import iter_batches, iter_records, read_batches
from .record import Header, Record, TimestampType

__all__ = [
    "RecordBatch", "LegacyBatch", "RecordColumns", "Record", "Header", "TimestampType", "Codec",
    "iter_batches", "read_batches", "iter_records", "RecordBatchBuilder", "LegacyMessageSetBuilder",
    "transaction_marker_batch",
    "ControlRecord", "ControlType", "control_record", "control_key", "end_txn_marker_value",
    "compress", "decompress", "DEFAULT_DECOMPRESSED_LIMIT",
]

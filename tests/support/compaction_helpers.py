"""Shared by the compaction tests: a partition log with producers of every kind writing to it, and a
reader that sees the log as a read_committed consumer from the start does."""
from __future__ import annotations

import asyncio
import struct

from kafkawire.broker.storage.config import LogConfig
from kafkawire.broker.storage.log import PartitionLog
from kafkawire.broker.storage.cleaner.cleaner import LogCleaner, cleanable_offsets
from kafkawire.records.batch import RecordBatch
from kafkawire.records.builder import RecordBatchBuilder

_LENGTH = struct.Struct(">i")


class Writer:
    """Appends to ``log`` as plain, idempotent and transactional producers do (offsets as the log
    assigns them), at the time ``clock[0]``."""

    def __init__(self, log: PartitionLog, clock: list[int]):
        self.log = log
        self.clock = clock
        self.sequences: dict[int, int] = {}
        self.open: set[int] = set()  # transactional producers with a transaction open

    def append(self, records, producer_id: int = -1, transactional: bool = False, compression: int = 0) -> int:
        """Records (key, value) in one batch; returns the first offset."""
        sequence = self.sequences.get(producer_id, 0) if producer_id >= 0 else -1
        builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                     base_sequence=sequence, transactional=transactional, compression=compression)
        for key, value in records:
            builder.append(value, key=key, timestamp=self.clock[0])
        now = self.clock[0]
        result = self.log.append_batch(self.log.validate(builder.build(), now), now_ms=now,
                                       transaction_verified=transactional)
        if producer_id >= 0:
            self.sequences[producer_id] = sequence + len(records)
        if transactional:
            self.open.add(producer_id)
        return result.base_offset

    def end(self, producer_id: int, commit: bool) -> int:
        self.open.discard(producer_id)
        return self.log.append_marker(producer_id, 0, commit, 0, now_ms=self.clock[0])


def read_committed(log: PartitionLog, committed: bool = True) -> tuple[list[tuple[int, bytes | None, bytes | None]],
                                                                       list]:
    """(offset, key, value) of every record a read_committed consumer from the log start gets (with
    ``committed=False``, a read_uncommitted one), and the batches' headers ((base offset, last offset,
    producer id, control, record count))."""
    records, batches = [], []
    offset = log.log_start_offset
    bound = log.last_stable_offset if committed else log.high_watermark
    while offset < bound:
        read = log.read(offset, 1 << 20, True, bound)
        data = read.records if isinstance(read.records, bytes) else read.records.read()
        if not data:
            break
        aborted = log.aborted_transactions(offset, read.fetch_offset_metadata.relative_position, len(data),
                                           read.fetch_offset_metadata.segment_base_offset)
        position = 0
        while position + 61 <= len(data):
            size = _LENGTH.unpack_from(data, position + 8)[0] + 12
            if position + size > len(data):
                break
            batch = RecordBatch(memoryview(data)[position:position + size])
            batch.verify()
            batches.append((batch.base_offset, batch.last_offset, batch.producer_id, batch.is_control, batch.count))
            dropped = committed and batch.is_transactional and any(
                txn.producer_id == batch.producer_id and txn.first_offset <= batch.base_offset <= txn.last_offset
                for txn in aborted)
            if not batch.is_control and not dropped:
                records += [(r.offset, r.key, r.value) for r in batch.records() if r.offset >= offset]
            offset = batch.next_offset
            position += size
    return records, batches


def clean_fully(log: PartitionLog, cleaner: LogCleaner, now: int, checkpoint: int | None = None) -> int:
    """Rounds until the log is clean up to its first uncleanable offset (a small offset map needs
    several, each going on from the last); returns the final checkpoint."""
    while True:
        offsets = cleanable_offsets(log, checkpoint, now)
        if offsets.first_dirty_offset >= offsets.first_uncleanable_offset:
            return offsets.first_dirty_offset
        stats = asyncio.run(cleaner.clean(log, offsets, now))
        assert stats.swapped
        assert stats.end_offset > offsets.first_dirty_offset
        checkpoint = stats.end_offset


def compacted_log(directory, clock: list[int], **config) -> PartitionLog:
    settings = {"cleanup_policy": "compact", "segment_bytes": 1024, "delete_retention_ms": 1000,
                "index_interval_bytes": 128}
    settings.update(config)
    return PartitionLog(directory, LogConfig(**settings), now_ms=lambda: clock[0])


def segment_batches(log: PartitionLog) -> list[list]:
    """Each segment's batch headers (``BatchInfo``: offsets, producer, sequence, record count)."""
    return [list(segment.batches()) if segment.size else [] for segment in log.segments]

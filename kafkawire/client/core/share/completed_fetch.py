"""ShareCompletedFetch: one partition's part of a ShareFetch response, held for ``poll``.

The response carries whole log batches and, apart, the offset ranges this member acquired with their
delivery counts (AcquiredRecords). Only acquired records are handed out, each with the delivery count
of its range; the batches are decoded one at a time as ``take`` reaches them. Acquired offsets with no
record (a control batch's, or gaps left by compaction) become GAP acknowledgements, as Kafka's
``ShareCompletedFetch`` makes them, so that the broker does not wait for their locks to expire. A batch
that cannot be read stops the partition's records with a CorruptRecordException (after the records
before it); what it and the rest held is RELEASEd, to be archived at the delivery limit. The bytes stay
charged to the consumer's memory pool until the records are handed out.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from kafkawire.errors import KafkaWireError
from kafkawire.records import LegacyBatch, RecordBatch, iter_batches

from ...errors import CorruptRecordException
from ..consumer.memory import Lease
from ..consumer.record import record_offset
from ..topic_partition import TopicPartition
from .acknowledgements import Acknowledgements
from .record import GAP, AcknowledgeType, ShareConsumerRecord

__all__ = ["ShareCompletedFetch", "AcquiredRange"]

new = tuple.__new__  # one ShareConsumerRecord per record, without a Python-level constructor call

AcquiredRange = tuple[int, int, int]  # first offset, last offset, delivery count


class ShareCompletedFetch:
    """``automatic`` collects the acknowledgements made for the application (GAPs, and RELEASEs after a
    corrupt batch); ``failure`` is raised by poll once the records before it are out; ``remaining``
    bounds the records still to hand out."""

    def __init__(self, topic_partition: TopicPartition, records: bytes | bytearray | memoryview, acquired: Sequence[AcquiredRange],
                 lease: Lease, check_crcs: bool = True):
        self.topic_partition = topic_partition
        self.lease = lease
        self.check_crcs = check_crcs
        self.acquired = _merged(sorted(acquired))
        self.automatic = Acknowledgements()
        self.failure: CorruptRecordException | None = None
        self._batches: list[RecordBatch | LegacyBatch] = []
        self._ready: list[ShareConsumerRecord] = []
        self._index = 0
        self._next_offset = self.acquired[0][0] if self.acquired else 0  # past what was handed out
        self.remaining = sum(last - first + 1 for first, last, _ in self.acquired)  # at most this many to go
        try:  # headers only; CRCs and records are checked as take reaches each batch
            for batch in iter_batches(records, verify_crc=False):
                if any(first <= batch.last_offset and batch.base_offset <= last for first, last, _ in self.acquired):
                    self._batches.append(batch)
        except KafkaWireError as error:
            self._fail(error, self._batches[-1].next_offset if self._batches else None)
            return
        self._mark_uncovered()

    @property
    def drained(self) -> bool:
        return not self._ready and self._index >= len(self._batches)

    def take(self, limit: int) -> list[ShareConsumerRecord]:
        """Up to ``limit`` acquired records, in offset order."""
        out: list[ShareConsumerRecord] = []
        while len(out) < limit:
            if not self._ready and not self._decode_next():
                break
            wanted = limit - len(out)
            if len(self._ready) <= wanted:
                out += self._ready
                self._ready = []
            else:
                out += self._ready[:wanted]
                del self._ready[:wanted]
        if out:
            self._next_offset = out[-1].offset + 1
        self.remaining = 0 if self.drained else max(0, self.remaining - len(out))
        return out

    def undelivered(self) -> list[tuple[int, int]]:
        """The acquired ranges (first, last) not handed out yet."""
        return [(max(first, self._next_offset), last) for first, last, _ in self.acquired if last >= self._next_offset]

    def _decode_next(self) -> bool:
        """Decode the next batch holding acquired records into ``_ready``; False when none is left."""
        while self._index < len(self._batches):
            batch = self._batches[self._index]
            self._index += 1
            overlaps = [(max(first, batch.base_offset), min(last, batch.last_offset), count)
                        for first, last, count in self.acquired
                        if first <= batch.last_offset and batch.base_offset <= last]
            if batch.is_control:
                for first, last, _ in overlaps:
                    self.automatic.add_range(first, last, GAP)
                continue
            ready: list[ShareConsumerRecord] = []
            try:
                if self.check_crcs:
                    batch.verify()
                for first, last, count in overlaps:  # only the acquired records become records, with their count
                    rows = self._rows(batch, first, last, count)
                    ready += rows
                    if len(rows) != last - first + 1:  # offsets without a record (compaction): gaps
                        present = set(map(record_offset, rows))
                        for offset in range(first, last + 1):
                            if offset not in present:
                                self.automatic.add(offset, GAP)
            except KafkaWireError as error:
                self._fail(error, batch.base_offset)
                return False
            if ready:
                self._ready = ready
                return True
        return False

    def _rows(self, batch: RecordBatch | LegacyBatch, first: int, last: int, count: int) -> list[ShareConsumerRecord]:
        """The records of ``batch`` with offsets ``first``..``last``, delivered for the ``count``th time."""
        topic, partition = self.topic_partition
        if isinstance(batch, RecordBatch):
            epoch = batch.partition_leader_epoch if batch.partition_leader_epoch >= 0 else None
            return cast("list[ShareConsumerRecord]", batch.rows(
                (topic, partition, batch.timestamp_type, epoch), ShareConsumerRecord, (count,), first, last))
        return [new(ShareConsumerRecord, (topic, partition, batch.timestamp_type, None, r.offset, r.timestamp, r.key,
                                          r.value, (), -1 if r.key is None else len(r.key),
                                          -1 if r.value is None else len(r.value), count))
                for r in batch.records(self.check_crcs) if first <= r.offset <= last]

    def _mark_uncovered(self) -> None:
        """Acquired offsets that no batch of the response holds are gaps."""
        for first, last, _ in self.acquired:
            cursor = first
            for batch in self._batches:
                if batch.last_offset < cursor or batch.base_offset > last:
                    continue
                if batch.base_offset > cursor:
                    self.automatic.add_range(cursor, batch.base_offset - 1, GAP)
                cursor = batch.last_offset + 1
            if cursor <= last:
                self.automatic.add_range(cursor, last, GAP)

    def _fail(self, error: KafkaWireError, offset: int | None) -> None:
        """Stop at a batch that cannot be read: release what this and the later batches hold."""
        start = offset if offset is not None else (self.acquired[0][0] if self.acquired else 0)
        for first, last, _ in self.acquired:
            self.automatic.add_range(max(first, start), last, AcknowledgeType.RELEASE)
        self.failure = CorruptRecordException(
            f"corrupt record data in partition {self.topic_partition} at offset {start}: {error}; its acquired "
            f"records were released", self.topic_partition, start, None)
        self._batches = [batch for batch in self._batches if batch.last_offset < start]  # (read before it)
        self.remaining = len(self._ready)
        self._index = min(self._index, len(self._batches))

    def release(self) -> None:
        """Give the response's bytes back to the memory pool."""
        self.lease.release()


def _merged(acquired: list[AcquiredRange]) -> list[AcquiredRange]:
    """Consecutive ranges of one delivery count as one (the broker splits them at BatchSize): each range
    is read from its batch's start, so a batch is read once rather than once a range."""
    out: list[AcquiredRange] = []
    for first, last, count in acquired:
        if out and out[-1][1] + 1 == first and out[-1][2] == count:
            out[-1] = (out[-1][0], last, count)
        else:
            out.append((first, last, count))
    return out

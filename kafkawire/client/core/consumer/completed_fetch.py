"""CompletedFetch: one partition's records from one fetch response, held for ``poll`` and decoded a
batch at a time as it reaches them.

Control batches and records below the position are skipped (a batch may start before the fetch
offset), and so, for read_committed, are the batches of aborted transactions (``aborted_transactions``);
the position moves past all of them. CRCs are checked when check.crcs is set. The first batch that cannot be read stops the
partition with a CorruptRecordException, after the records before it have been handed out. The
records' bytes are charged to the consumer's memory pool until the partition is drained.
"""
from __future__ import annotations

from bisect import bisect_left
from typing import cast

from kafkawire.errors import KafkaWireError, RecordsError
from kafkawire.records import LegacyBatch, RecordBatch, iter_batches

from ...errors import CorruptRecordException
from ..topic_partition import TopicPartition
from .aborted_transactions import AbortedTransactions
from .memory import Lease
from .record import ConsumerRecord, record_offset

__all__ = ["CompletedFetch"]


class _DecodedBatch:
    """One batch's records as ConsumerRecords, with a cursor at the first one at or above the position."""

    __slots__ = ("records", "leader_epoch", "next_offset", "pos", "end")

    def __init__(self, batch: RecordBatch | LegacyBatch, check_crcs: bool, position: int, topic: str,
                 partition: int):
        self.next_offset = batch.next_offset
        if check_crcs:
            batch.verify()
        if isinstance(batch, RecordBatch):
            epoch = batch.partition_leader_epoch if batch.partition_leader_epoch >= 0 else None
            # rows of type ConsumerRecord, which the signature of rows() cannot say
            records = cast("list[ConsumerRecord]",
                           batch.rows((topic, partition, batch.timestamp_type, epoch), ConsumerRecord))
        else:
            epoch = None
            timestamp_type = batch.timestamp_type
            records = [ConsumerRecord(topic, partition, r.offset, r.timestamp, timestamp_type, r.key, r.value, (),
                                      None, -1 if r.key is None else len(r.key),
                                      -1 if r.value is None else len(r.value))
                       for r in batch.records(check_crcs)]
        self.records = records
        self.leader_epoch = epoch
        self.end = len(records)
        self.pos = (bisect_left(records, position, key=record_offset)
                    if self.end and records[0][4] < position else 0)

    @property
    def left(self) -> int:
        return self.end - self.pos


def _estimate(batch: RecordBatch | LegacyBatch, fetch_offset: int) -> int:
    """Records of ``batch`` that poll will hand out, from the header alone (exact for uncompacted
    batches; a compressed legacy wrapper counts as one until decoded)."""
    if batch.is_control or batch.next_offset <= fetch_offset:
        return 0
    if isinstance(batch, LegacyBatch):
        return 1
    if batch.base_offset >= fetch_offset:
        return batch.count
    return min(batch.count, batch.last_offset - fetch_offset + 1)


class CompletedFetch:
    """One partition's records from one fetch response, decoded batch by batch as ``take`` needs them.

    ``next_fetch_offset`` is the partition's position once what was taken is consumed; ``remaining``
    counts the records still to hand out (exact for batches decoded, from headers for the rest).
    ``failure`` is set, and ``take`` stops, at the first batch that cannot be read.
    """

    def __init__(self, topic_partition: TopicPartition, fetch_offset: int, records: bytes, lease: Lease,
                 check_crcs: bool = True, aborted: AbortedTransactions | None = None):
        self.topic_partition = topic_partition
        self.fetch_offset = fetch_offset
        self.next_fetch_offset = fetch_offset
        self.last_epoch: int | None = None
        self.size = len(records)
        self.lease = lease
        self.check_crcs = check_crcs
        self.aborted = aborted  # read_committed: the fetch's aborted transactions
        self.failure: CorruptRecordException | None = None
        self.drained = False
        self._batches: list[RecordBatch | LegacyBatch | None] = []
        self._scan_error: KafkaWireError | None = None
        try:  # headers only; CRCs and records are checked when poll reaches each batch
            for batch in iter_batches(records, verify_crc=False):
                self._batches.append(batch)
        except KafkaWireError as error:
            self._scan_error = error
        if not self._batches and self._scan_error is None and records:
            self._scan_error = RecordsError(
                f"{len(records)} bytes of records hold no complete batch (a truncated response, or a "
                f"batch larger than the response limit)", 0)
        self._estimates = [_estimate(batch, fetch_offset) for batch in self._batches if batch is not None]
        self.remaining = sum(self._estimates)
        self._index = 0
        self._current: _DecodedBatch | None = None

    def take(self, limit: int) -> list[ConsumerRecord]:
        """Up to ``limit`` records, in offset order, advancing ``next_fetch_offset``."""
        out: list[ConsumerRecord] = []
        while len(out) < limit:
            current = self._current or self._next_batch()
            if current is None:
                break
            pos = current.pos
            stop = min(current.end, pos + limit - len(out))
            records = current.records
            if pos == 0 and stop == current.end:
                if out:
                    out += records
                else:
                    out = records  # the whole batch: hand out its list as it is
            else:
                out += records[pos:stop]
            current.pos = stop
            self.remaining -= stop - pos
            self.next_fetch_offset = records[stop - 1][4] + 1
            if current.leader_epoch is not None:
                self.last_epoch = current.leader_epoch
            if stop == current.end:
                self._finish_batch(current)
        if self._current is None and self.failure is None:
            self._skip_without_decoding()
        return out

    def _finish_batch(self, current: _DecodedBatch) -> None:
        # past the batch's last offset, even when compaction left gaps at its end
        self.next_fetch_offset = max(self.next_fetch_offset, current.next_offset)
        self._current = None

    def _next_batch(self) -> _DecodedBatch | None:
        while self._index < len(self._batches):
            index = self._index
            batch = self._batches[index]
            assert batch is not None  # (batches before _index are the consumed ones)
            self._batches[index] = None  # let its view go once consumed
            self._index += 1
            estimate = self._estimates[index]
            if self._skipped(batch):
                self.remaining -= estimate
                self.next_fetch_offset = max(self.next_fetch_offset, batch.next_offset)
                continue
            try:
                decoded = _DecodedBatch(batch, self.check_crcs, self.next_fetch_offset, *self.topic_partition)
            except KafkaWireError as error:
                self.remaining -= estimate
                self._fail(error, batch)
                return None
            self.remaining += decoded.left - estimate
            if decoded.left == 0:
                self._finish_batch(decoded)
                continue
            self._current = decoded
            return decoded
        self._end()
        return None

    def _skip_without_decoding(self) -> None:
        """Step over what follows without decoding (control batches, batches below the position), so
        that a fetch whose records are all out is seen as drained at once."""
        while self._index < len(self._batches):
            batch = self._batches[self._index]
            assert batch is not None  # (batches before _index are the consumed ones)
            if not self._skipped(batch):
                return
            self._batches[self._index] = None
            self.remaining -= self._estimates[self._index]
            self.next_fetch_offset = max(self.next_fetch_offset, batch.next_offset)
            self._index += 1
        self._end()

    def _skipped(self, batch: RecordBatch | LegacyBatch) -> bool:
        """Whether ``batch`` hands out nothing: a control batch, one below the position, or (read_committed)
        one of an aborted transaction. Batches come here in offset order."""
        if self.aborted is not None and self.aborted.is_aborted(batch):
            return True
        return batch.is_control or batch.next_offset <= self.next_fetch_offset

    def _end(self) -> None:
        if self._scan_error is not None:
            error, self._scan_error = self._scan_error, None
            self._fail(error, None)
        else:
            self.drained = True

    def _fail(self, error: KafkaWireError, batch: RecordBatch | LegacyBatch | None) -> None:
        offset = self.next_fetch_offset
        next_offset = None
        if isinstance(batch, RecordBatch):
            offset = max(offset, batch.base_offset)
            next_offset = batch.next_offset
        elif isinstance(batch, LegacyBatch):
            next_offset = batch.next_offset
        elif isinstance(error, RecordsError) and error.base_offset is not None:
            offset = max(offset, error.base_offset)
        skip = f"; seek to {next_offset} to skip the batch" if next_offset is not None else ""
        self.failure = CorruptRecordException(
            f"corrupt record data in partition {self.topic_partition} at offset {offset}: {error}. "
            f"Fetching from this partition stopped{skip}", self.topic_partition, offset, next_offset)
        self.remaining = 0
        self._current = None

    def release(self) -> None:
        """Give the records' bytes back to the memory pool."""
        self.lease.release()

    def __repr__(self) -> str:
        return (f"CompletedFetch({self.topic_partition}, fetch_offset={self.fetch_offset}, "
                f"next={self.next_fetch_offset}, size={self.size}, remaining={self.remaining})")

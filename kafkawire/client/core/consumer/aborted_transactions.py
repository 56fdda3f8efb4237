"""AbortedTransactions: what a read_committed consumer skips in one partition's fetched batches, as
Kafka's CompletedFetch decides it.

The broker sends, with each read_committed fetch, the aborted transactions overlapping the fetched
range: (producer id, first offset). Walking the batches in offset order, a batch with a producer id
first moves every aborted transaction whose first offset is at or below the batch's last offset into
the set of aborted producers; a transactional data batch of a producer in that set is aborted (skipped
whole); the ABORT marker (a control batch) that ends the transaction takes its producer out of the set
again, so that the producer's later transactions are read.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable

from kafkawire.errors import KafkaWireError
from kafkawire.records import ControlType, LegacyBatch, RecordBatch, control_record

__all__ = ["AbortedTransactions"]


class AbortedTransactions:
    """The aborted transactions of one fetch response's partition (see the module docstring)."""

    __slots__ = ("_pending", "_producers")

    def __init__(self, aborted: Iterable[tuple[int, int]]):
        self._pending = [(first_offset, producer_id) for producer_id, first_offset in aborted]
        heapq.heapify(self._pending)
        self._producers: set[int] = set()

    def is_aborted(self, batch: RecordBatch | LegacyBatch) -> bool:
        """Whether ``batch`` (the next one in offset order) holds aborted records. Every batch must
        pass through here, control batches included, in order."""
        if not isinstance(batch, RecordBatch) or batch.producer_id < 0:
            return False
        pending = self._pending
        last = batch.last_offset
        while pending and pending[0][0] <= last:
            self._producers.add(heapq.heappop(pending)[1])
        if batch.is_control:
            if batch.producer_id in self._producers and _is_abort_marker(batch):
                self._producers.discard(batch.producer_id)
            return False
        return batch.is_transactional and batch.producer_id in self._producers


def _is_abort_marker(batch: RecordBatch) -> bool:
    try:
        records = batch.records()
        return bool(records) and control_record(records[0]).type is ControlType.ABORT
    except KafkaWireError:  # a control record this client cannot read ends nothing
        return False

"""What the log cleaner knows of transactions as it walks the log: Kafka's ``CleanedTransactionMetadata``.

Batches of an aborted transaction are dropped. An ABORT marker stays while any batch of its transaction
was still there in this round (its transaction goes into the cleaned segment's aborted-transaction
index), and may go once they are all gone; a COMMIT marker may go once no batch of its transaction is
left. A marker that may go is first kept with a delete horizon of delete.retention.ms and dropped by a
later round past it (as tombstones are), so that a consumer part-way through the log still sees it.
"""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

from ..transaction_index import AbortedTxn

__all__ = ["CleanedTransactions"]


class CleanedTransactions:
    """Transactions seen so far in one cleaning round (carried from a group of segments to the next)."""

    def __init__(self, aborted: Iterable[AbortedTxn] = ()):
        self._order = itertools.count()  # ties on first offset: the order they were given in
        self._aborted: list[tuple[int, int, AbortedTxn]] = []
        self.add_aborted(aborted)
        self._ongoing_committed: set[int] = set()
        # producer id -> [the aborted transaction, the last offset of a batch of it seen (-1: none)]
        self._ongoing_aborted: dict[int, list] = {}
        self.cleaned_index: list[AbortedTxn] = []  # entries for the segment being written

    def add_aborted(self, aborted: Iterable[AbortedTxn]) -> None:
        for txn in aborted:
            heapq.heappush(self._aborted, (txn.first_offset, next(self._order), txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        heap = self._aborted
        while heap and heap[0][0] <= offset:
            txn = heapq.heappop(heap)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, -1])

    def on_control_batch(self, producer_id: int, last_offset: int, marker: str | None) -> bool:
        """A control batch: ``marker`` is "abort", "commit", "other" (another control record) or None
        (no record: an empty batch). Returns whether the batch may be discarded."""
        self._consume_aborted_up_to(last_offset)
        if marker is None:
            return True  # an empty control batch was already cleaned
        if marker == "other":
            return False
        if marker == "abort":
            ongoing = self._ongoing_aborted.pop(producer_id, None)
            if ongoing is not None and ongoing[1] >= 0:
                self.cleaned_index.append(ongoing[0])
                return False
            return True
        if producer_id in self._ongoing_committed:  # COMMIT
            self._ongoing_committed.discard(producer_id)
            return False
        return True

    def on_batch(self, producer_id: int, last_offset: int, transactional: bool) -> bool:
        """A data batch: returns whether it belongs to an aborted transaction (and is discarded)."""
        self._consume_aborted_up_to(last_offset)
        if not transactional:
            return False
        ongoing = self._ongoing_aborted.get(producer_id)
        if ongoing is not None:
            ongoing[1] = last_offset
            return True
        self._ongoing_committed.add(producer_id)
        return False

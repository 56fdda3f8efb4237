"""Transactions in a partition log: markers, the last stable offset and the aborted-transaction index.

A transaction coordinator ends a producer's transaction in this partition by appending a COMMIT or
ABORT marker (a control batch). The partition's last stable offset (LSO) is the first offset of its
oldest open transaction, or the high watermark; read_committed fetches stop there. Each abort is
recorded in the active segment's ``.txnindex`` so that a read_committed fetch can list the aborted
transactions overlapping what it returns (``LocalLog.collectAbortedTransactions``), and the consumer
drops their records. ``PartitionLog`` owns one ``LogTransactions`` and answers these calls with it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import RecordsError
from ...error_codes import ErrorCode
from ...records.batch import RecordBatch
from ...records.builder import transaction_marker_batch
from ...records.control import ControlType, control_record
from .errors import LogAppendError
from .producer_state import CompletedTxn
from .segment import BatchInfo, LogSegment
from .transaction_index import AbortedTxn

if TYPE_CHECKING:
    from .log import PartitionLog

__all__ = ["LogTransactions"]

_CONTROL = 0x20


class LogTransactions:
    """Markers, the LSO and aborted transactions of one ``PartitionLog``."""

    def __init__(self, log: PartitionLog):
        self.log = log
        self.local = log.local
        self.producers = log.producer_state

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, or the high watermark when none is open; never
        below the log start offset (retention may delete an open transaction's first batches: Kafka's
        ``maybeIncrementFirstUnstableOffset``)."""
        high_watermark = self.local.end_offset
        first_unstable = self.producers.first_unstable_offset
        if first_unstable is None:
            return high_watermark
        return min(max(first_unstable, self.log.log_start_offset), high_watermark)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether this producer, at this epoch, has a transaction open here (``hasOngoingTransaction``)."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == producer_epoch

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction."""
        return dict(self.producers.ongoing)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, *,
                      now_ms: int | None = None) -> int:
        """Append a COMMIT or ABORT marker for the producer (``UnifiedLog.appendAsLeader`` with origin
        COORDINATOR); returns its offset. Raises LogAppendError with TRANSACTION_COORDINATOR_FENCED or
        INVALID_PRODUCER_EPOCH (stale markers), KAFKA_STORAGE_ERROR (the write failed)."""
        log = self.log
        if log.closed:
            raise LogAppendError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log of {log.name} is closed")
        now = now_ms if now_ms is not None else log.now_ms()
        offset = self.local.end_offset
        self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch, offset)
        data = transaction_marker_batch(commit, producer_id=producer_id, producer_epoch=producer_epoch,
                                        coordinator_epoch=coordinator_epoch, base_offset=offset, timestamp=now,
                                        partition_leader_epoch=log.leader_epoch)
        active = log.active_segment_for(len(data), now, offset, now)
        try:
            active.write(data, offset, now)
        except OSError as error:
            raise LogAppendError(ErrorCode.KAFKA_STORAGE_ERROR,
                                 f"Error while appending a marker to {log.name}: {error}") from None
        completed = self.producers.complete(producer_id, producer_epoch, coordinator_epoch, offset, now, not commit)
        self._index_completed(active, completed)
        self.producers.map_end_offset = offset + 1
        return offset

    def _index_completed(self, segment: LogSegment, completed: CompletedTxn | None) -> None:
        if completed is not None and completed.aborted:
            segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                completed.last_offset,
                                                self.producers.last_stable_offset_after(completed)))

    def aborted_transactions(self, fetch_offset: int, fetch_position: int, fetch_size: int,
                             segment_base_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch of ``fetch_size`` bytes from ``fetch_position``
        in the segment at ``segment_base_offset`` must list (``LocalLog.addAbortedTransactions``)."""
        segments = self.local.segments
        index = self.local.index_of(segment_base_offset)
        if index < 0:
            return []
        segment = segments[index]
        upper = segment.fetch_upper_bound_offset(fetch_position + fetch_size)
        if upper is None:
            upper = segments[index + 1].base_offset if index + 1 < len(segments) else self.local.end_offset
        found: list[AbortedTxn] = []
        for later in segments[index:]:
            txns, complete = later.txn_index.collect(fetch_offset, upper)
            found += txns
            if complete:
                break
        return found

    def aborted_transactions_from_remote(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """For a read_committed fetch from the remote tier: the aborted transactions overlapping
        [fetch_offset, upper_bound_offset), from the remote segments' copies of their indexes, then the
        local ones (``RemoteLogManager.collectAbortedTransactions``). Safe on a worker thread."""
        found: list[AbortedTxn] = []
        for remote in self.log.remote_segments:
            if remote.end_offset < fetch_offset:
                continue
            txns, complete = remote.txn_index.collect(fetch_offset, upper_bound_offset)
            found += txns
            if complete:
                return found
        seen = set(found)
        for segment in list(self.local):
            txns, complete = segment.txn_index.collect(fetch_offset, upper_bound_offset)
            found += [txn for txn in txns if txn not in seen]  # a copied segment may still be local
            if complete:
                break
        return found

    # ---- recovery -------------------------------------------------------------------------------
    def replay_batches(self, start: int) -> None:
        """Rebuild the producer state and the aborted-transaction index from ``start`` to the log end."""
        segments = self.local.segments[max(0, self.local.index_of(start)):]
        for segment in segments:
            segment.txn_index.truncate_to(start)
        for segment in segments:
            position = segment.lookup(start) if segment.base_offset <= start else 0
            for info in segment.batches(position):
                if info.last_offset < start:
                    continue
                marker = _read_marker(segment, info) if info.attributes & _CONTROL else None
                self._index_completed(segment, self.producers.replay(info, marker))


def _read_marker(segment: LogSegment, info: BatchInfo) -> tuple[bool, int] | None:
    """(aborted, coordinator epoch) of a transaction marker batch; None for other control batches."""
    try:
        batch = RecordBatch(memoryview(segment.pread(info.size, info.position)))
        for record in batch.records():
            control = control_record(record)
            if control.is_transaction_marker and control.coordinator_epoch is not None:
                return control.type == ControlType.ABORT, control.coordinator_epoch
            return None
    except RecordsError:
        return None
    return None

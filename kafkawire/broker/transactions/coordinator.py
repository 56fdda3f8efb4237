"""The transaction coordinator: Kafka's ``TransactionCoordinator`` for a single broker.

It owns every transactional id (this broker is the coordinator of all of them). The rules are Kafka's
(``handleInitProducerId``, ``handleAddPartitionsToTransaction``, ``handleVerifyPartitionsInTransaction``,
``endTransaction``) with one simplification a single node allows: markers go straight into the local
partition logs, so EndTxn writes PrepareCommit/PrepareAbort, the markers and CompleteCommit/CompleteAbort
before it answers. A marker that cannot be written (a storage error) leaves the transaction in its
Prepare state, answered CONCURRENT_TRANSACTIONS to the producer until ``retry_incomplete`` finishes it.

Every method runs on the broker's event loop and never awaits, so no two transitions of an id interleave.
Errors are Kafka's error codes (``ErrorCode``); a failed write of the state log is COORDINATOR_NOT_AVAILABLE,
which clients retry.
"""
from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ...error_codes import ErrorCode
from .markers import MarkerWriter
from .metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionMetadata, TxnState, TxnTransit, is_epoch_exhausted
from .producer_ids import ProducerIdBlock
from .state_log import TransactionStateLog

__all__ = ["TransactionCoordinator", "InitResult", "EndResult"]

log = logging.getLogger(__name__)

Partition = tuple[str, int]


@dataclass(frozen=True)
class InitResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


EndResult = InitResult


class TransactionCoordinator:
    def __init__(self, state_log: TransactionStateLog, producer_ids: ProducerIdBlock, markers: MarkerWriter, *,
                 max_timeout_ms: int, id_expiration_ms: int,
                 clock: Callable[[], float] = time.time):
        self.state_log = state_log
        self.producer_ids = producer_ids
        self.markers = markers
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self._clock = clock

    # ---- lifecycle ------------------------------------------------------------------------------
    def load(self) -> None:
        """Read the state log back and finish what a crash interrupted: transactions in PrepareCommit or
        PrepareAbort get their markers and complete."""
        self.state_log.load()
        self.retry_incomplete()

    def close(self) -> None:
        self.state_log.close()

    @property
    def coordinator_epoch(self) -> int:
        return self.state_log.coordinator_epoch

    @property
    def transactions(self) -> dict[str, TransactionMetadata]:
        return self.state_log.transactions

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def _write(self, metadata: TransactionMetadata, transit: TxnTransit) -> int:
        try:
            self.state_log.write(metadata, transit)
        except OSError as error:
            log.error("could not write the state of transactional id %r: %s", metadata.transactional_id, error)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    # ---- InitProducerId -------------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int = NO_PRODUCER_ID,
                         expected_epoch: int = NO_PRODUCER_EPOCH) -> InitResult:
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        expected = expected_producer_id != NO_PRODUCER_ID or expected_epoch != NO_PRODUCER_EPOCH
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            metadata = TransactionMetadata(transactional_id, self.producer_ids.next(), timeout_ms=timeout_ms)
        now = self._now()
        if expected and not _is_valid_producer_id(metadata, expected_producer_id, expected_epoch):
            return InitResult(ErrorCode.PRODUCER_FENCED)
        state = metadata.state
        if state.is_prepare:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is TxnState.ONGOING:
            # fence the open transaction's producer and abort it; the caller retries (as in Kafka)
            error = self._fence_and_abort(metadata, now)
            return InitResult(error or ErrorCode.CONCURRENT_TRANSACTIONS)
        transit: TxnTransit | None
        if metadata.epoch_exhausted and (not expected or expected_epoch == metadata.producer_epoch):
            transit = metadata.prepare_producer_id_rotation(self.producer_ids.next(), timeout_ms, now, expected)
        else:
            transit = metadata.prepare_increment_epoch(timeout_ms, expected_epoch if expected else None, now)
        if transit is None:
            return InitResult(ErrorCode.PRODUCER_FENCED)
        error = self._write(metadata, transit)
        if error:
            return InitResult(error)
        return InitResult(ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch)

    # ---- AddPartitionsToTxn, verification -------------------------------------------------------
    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[Partition], client_version: int = 1) -> int:
        """Add partitions to the producer's transaction (starting one if none is open)."""
        metadata, error = self._producer_metadata(transactional_id, producer_id, producer_epoch)
        if metadata is None:
            return error
        if metadata.state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        partitions = set(partitions)
        if metadata.state is TxnState.ONGOING and partitions <= metadata.partitions:
            return ErrorCode.NONE
        return self._write(metadata, metadata.prepare_add_partitions(partitions, self._now(), client_version))

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[Partition]) -> dict[Partition, int]:
        """AddPartitionsToTxn's verify_only: whether each partition is in the open transaction (KIP-890)."""
        partitions = list(partitions)
        metadata, error = self._producer_metadata(transactional_id, producer_id, producer_epoch)
        if metadata is not None and metadata.state.is_prepare:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        elif metadata is not None:
            return {p: ErrorCode.NONE if p in metadata.partitions else ErrorCode.TRANSACTION_ABORTABLE
                    for p in partitions}
        return {p: error for p in partitions}

    def verify_or_add(self, transactional_id: str, producer_id: int, producer_epoch: int, partition: Partition,
                      add: bool) -> int:
        """Before a transactional write to ``partition``: with transaction version 2 (``add``) the
        partition joins the transaction; otherwise it must already be in it."""
        if add:
            return self.add_partitions(transactional_id, producer_id, producer_epoch, [partition], client_version=2)
        return self.verify_partitions(transactional_id, producer_id, producer_epoch, [partition])[partition]

    def _producer_metadata(self, transactional_id: str, producer_id: int,
                           producer_epoch: int) -> tuple[TransactionMetadata | None, int]:
        if not transactional_id:
            return None, ErrorCode.INVALID_REQUEST
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return None, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return None, ErrorCode.PRODUCER_FENCED
        return metadata, ErrorCode.NONE

    # ---- EndTxn ---------------------------------------------------------------------------------
    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        client_version: int) -> EndResult:
        """Commit or abort (``client_version`` 2, EndTxn v5: the epoch is bumped and returned)."""
        if not transactional_id:
            return EndResult(ErrorCode.INVALID_REQUEST)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            return EndResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        state, v2 = metadata.state, metadata.client_version >= 2
        retry_on_bump = v2 and metadata.producer_epoch == producer_epoch + 1
        retry_on_overflow = (v2 and metadata.previous_producer_id == producer_id and metadata.producer_epoch == 0
                             and is_epoch_exhausted(producer_epoch))
        if metadata.producer_id != producer_id and not retry_on_overflow:
            return EndResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if v2 and state.is_complete:
            valid = retry_on_bump or retry_on_overflow or (client_version >= 2 and
                                                          producer_epoch == metadata.producer_epoch)
        elif v2 and state.is_prepare:
            valid = retry_on_bump
        else:
            valid = producer_epoch == metadata.producer_epoch
        if not valid:
            return EndResult(ErrorCode.PRODUCER_FENCED)
        result = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        retried = retry_on_bump or retry_on_overflow
        if state is TxnState.ONGOING:
            return self._end(metadata, result, client_version)
        if state.is_complete and retried:
            done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            if state is done:
                return EndResult(ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch)
            return EndResult(ErrorCode.INVALID_TXN_STATE)
        if (state.is_complete or state is TxnState.EMPTY) and not commit and client_version >= 2:
            # transaction version 2 lets a producer abort a transaction that wrote nothing: the epoch moves on
            return self._end(metadata, result, client_version)
        if state.is_complete and not v2:
            done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            if state is done:  # a retry of a call that succeeded
                return EndResult(ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch)
        if state is result:
            return EndResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        log.debug("transactional id %r: %s refused in state %s", transactional_id,
                  "commit" if commit else "abort", state.value)
        return EndResult(ErrorCode.INVALID_TXN_STATE)

    def _end(self, metadata: TransactionMetadata, result: TxnState, client_version: int) -> EndResult:
        next_producer_id = NO_PRODUCER_ID
        if client_version >= 2 and metadata.epoch_exhausted:
            next_producer_id = self.producer_ids.next()
        transit = metadata.prepare_abort_or_commit(result, client_version, next_producer_id, self._now())
        error = self._write(metadata, transit)
        if error:
            return EndResult(error)
        self._write_markers(metadata)
        if metadata.state.is_prepare:  # markers left to write: the producer retries, we finish later
            return EndResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        return EndResult(ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch)

    def _fence_and_abort(self, metadata: TransactionMetadata, now: int) -> int:
        # the abort follows the transaction's own version: with 2, one more epoch bump after the fence
        version = metadata.client_version
        next_producer_id = NO_PRODUCER_ID
        if version >= 2 and is_epoch_exhausted(metadata.producer_epoch + 1):
            next_producer_id = self.producer_ids.next()
        error = self._write(metadata, metadata.prepare_fence_abort(version, next_producer_id, now))
        if not error:
            self._write_markers(metadata)
        return error

    def _write_markers(self, metadata: TransactionMetadata) -> None:
        """Markers for a transaction in PrepareCommit/PrepareAbort, then Complete once all are written."""
        commit = metadata.state is TxnState.PREPARE_COMMIT
        remaining = self.markers.write(metadata.producer_id, metadata.producer_epoch, commit,
                                       self.coordinator_epoch, sorted(metadata.partitions))
        if remaining:
            log.warning("transactional id %r: markers for %d partitions not written yet, retrying later",
                        metadata.transactional_id, len(remaining))
            metadata.partitions = set(remaining)  # in memory only: the log still lists them all
            return
        self._write(metadata, metadata.prepare_complete(self._now()))

    # ---- background work ------------------------------------------------------------------------
    def retry_incomplete(self) -> None:
        """Finish transactions left in PrepareCommit/PrepareAbort (after a crash or a storage error)."""
        for metadata in list(self.transactions.values()):
            if metadata.state.is_prepare:
                self._write_markers(metadata)

    def abort_timed_out(self) -> list[str]:
        """Abort transactions open longer than their transaction.timeout.ms, fencing their producer
        (``abortTimedOutTransactions``); returns their ids."""
        now = self._now()
        aborted = []
        for metadata in list(self.transactions.values()):
            if metadata.state is TxnState.ONGOING and metadata.start_ms + metadata.timeout_ms < now:
                log.info("aborting transactional id %r: open for longer than its %d ms timeout",
                         metadata.transactional_id, metadata.timeout_ms)
                if not self._fence_and_abort(metadata, now):
                    aborted.append(metadata.transactional_id)
        return aborted

    def expire_transactional_ids(self) -> list[str]:
        """Forget ids idle past transactional.id.expiration.ms with no transaction open."""
        now = self._now()
        expired = []
        for metadata in list(self.transactions.values()):
            idle = metadata.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
            if idle and metadata.update_ms + self.id_expiration_ms <= now:
                if not self._write(metadata, metadata.prepare_dead()):
                    expired.append(metadata.transactional_id)
        return expired

    # ---- DescribeTransactions, ListTransactions -------------------------------------------------
    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    def list(self, states: set[str], producer_ids: set[int], min_duration_ms: int = -1,
             pattern: str | None = None) -> list[TransactionMetadata]:
        """The ids matching every filter given (an empty filter matches all; ``pattern`` is a regular
        expression matched against the whole id)."""
        now = self._now()
        compiled = re.compile(pattern) if pattern else None
        return [metadata for transactional_id, metadata in sorted(self.transactions.items())
                if (not states or metadata.state.value in states)
                and (not producer_ids or metadata.producer_id in producer_ids)
                and (min_duration_ms < 0 or (metadata.state is TxnState.ONGOING
                                             and now - metadata.start_ms > min_duration_ms))
                and (compiled is None or compiled.fullmatch(transactional_id))]


def _is_valid_producer_id(metadata: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """An InitProducerId naming an id and epoch is fenced unless the id is new, its producer id is the
    current one, or the previous one with an exhausted epoch (a retry after a rotation)."""
    return (metadata.producer_epoch == NO_PRODUCER_EPOCH or producer_id == metadata.producer_id
            or (producer_id == metadata.previous_producer_id and is_epoch_exhausted(epoch)))

"""A transactional id's state, as Kafka's ``TransactionMetadata`` keeps it, and its transitions.

States (``TransactionState``): Empty (no transaction), Ongoing (partitions added), PrepareCommit and
PrepareAbort (the decision is durable, markers being written), CompleteCommit and CompleteAbort (markers
written), Dead (expired), PrepareEpochFence (a new producer instance is fencing an old one's open
transaction). A change is made as in Kafka: ``prepare_*`` computes the next ``TxnTransit`` from the
current state without touching it; the caller writes it to the state log and only then ``apply``\\ s it,
so a failed write leaves the metadata as it was.

Transaction version 2 (KIP-890 part 2): each EndTxn bumps the producer epoch, so a zombie's late writes
carry a stale epoch; an exhausted epoch moves the transactional id to a new producer id.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

__all__ = ["TxnState", "TransactionMetadata", "TxnTransit", "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH",
           "is_epoch_exhausted"]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_SHORT_MAX = 0x7FFF


class TxnState(enum.Enum):
    """The states, with the names DescribeTransactions and ListTransactions report."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps epoch 32767 for fencing: a producer may use at most 32766."""
    return epoch >= _SHORT_MAX - 1


Partition = tuple[str, int]


@dataclass(frozen=True)
class TxnTransit:
    """The metadata a transition leads to (Kafka's ``TxnTransitMetadata``)."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[Partition]
    start_ms: int
    update_ms: int
    client_version: int  # the client's transaction version: 2 bumps the epoch on every EndTxn


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[Partition] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    client_version: int = 0
    pending: TxnState | None = None  # a transition written to the state log but not yet applied

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _transit(self, state: TxnState, **changes) -> TxnTransit:
        base = TxnTransit(self.producer_id, self.previous_producer_id, NO_PRODUCER_ID, self.producer_epoch,
                          self.last_producer_epoch, self.timeout_ms, state, frozenset(self.partitions),
                          self.start_ms, self.update_ms, 0)
        return replace(base, **changes)

    # ---- transitions (prepareX in Kafka) ---------------------------------------------------------
    def prepare_fence_abort(self, client_version: int, next_producer_id: int, now_ms: int) -> TxnTransit:
        """A new instance (or the timeout) fences the open transaction (Kafka's PrepareEpochFence then
        PrepareAbort, written as one): the epoch goes up by one, fencing the old instance, and the
        transaction is aborted with it (with transaction version 2, one more bump for the abort)."""
        epoch, last = self.producer_epoch + 1, NO_PRODUCER_EPOCH
        if client_version >= 2 and epoch < _SHORT_MAX:
            epoch, last = epoch + 1, epoch
        return self._transit(TxnState.PREPARE_ABORT, next_producer_id=next_producer_id, producer_epoch=epoch,
                             last_producer_epoch=last, update_ms=now_ms, client_version=client_version)

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now_ms: int) -> TxnTransit | None:
        """InitProducerId on an idle transactional id: the next epoch (None: the caller is fenced, its
        expected epoch being neither the current nor the last one)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry of a call that succeeded
        else:
            return None
        return self._transit(TxnState.EMPTY, producer_epoch=epoch, last_producer_epoch=last, timeout_ms=timeout_ms,
                             partitions=frozenset(), start_ms=-1, update_ms=now_ms)

    def prepare_producer_id_rotation(self, producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        return self._transit(TxnState.EMPTY, producer_id=producer_id, previous_producer_id=self.producer_id,
                             producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, update_ms=now_ms)

    def prepare_add_partitions(self, partitions, now_ms: int, client_version: int | None = None) -> TxnTransit:
        starting = self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        return self._transit(TxnState.ONGOING, partitions=frozenset(self.partitions | set(partitions)),
                             start_ms=now_ms if starting else self.start_ms, update_ms=now_ms,
                             client_version=self.client_version if client_version is None else client_version)

    def prepare_abort_or_commit(self, state: TxnState, client_version: int, next_producer_id: int,
                                now_ms: int) -> TxnTransit:
        if client_version >= 2:  # transaction version 2: every transaction ends with an epoch bump
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._transit(state, next_producer_id=next_producer_id, producer_epoch=epoch,
                             last_producer_epoch=last, update_ms=now_ms, client_version=client_version)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        producer_id, previous, epoch = self.producer_id, self.previous_producer_id, self.producer_epoch
        if self.client_version >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            # the epoch overflowed: the new id takes over now
            producer_id, previous, epoch = self.next_producer_id, self.producer_id, 0
        return self._transit(state, producer_id=producer_id, previous_producer_id=previous, producer_epoch=epoch,
                             last_producer_epoch=self.producer_epoch, partitions=frozenset(), update_ms=now_ms,
                             client_version=self.client_version)

    def prepare_dead(self) -> TxnTransit:
        return self._transit(TxnState.DEAD, partitions=frozenset())

    # ---- applying a written transition ----------------------------------------------------------
    def apply(self, transit: TxnTransit) -> None:
        """Take on a transition once it is durable (``completeTransitionTo``)."""
        self.previous_producer_id = transit.previous_producer_id
        self.producer_id = transit.producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.update_ms = transit.update_ms
        self.client_version = transit.client_version
        self.pending = None

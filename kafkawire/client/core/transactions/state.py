"""The data a transactional producer's TransactionManager keeps: its states and the moves between them
(as Kafka's TransactionManager.State), the outcome of one application call (``TransactionResult``),
one request for a driver to send (``TxnRequest``), a call that timed out (``PendingCall``) and offsets
on their way (``PendingOffsets``). No I/O, no logic beyond bookkeeping."""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkawire.messages import ApiKey

from ...errors import TransactionError
from ..group.consumer_group_metadata import ConsumerGroupMetadata
from ..group.protocol import Coordinator, OffsetAndMetadata
from ..topic_partition import TopicPartition

__all__ = [
    "ADD",
    "BUMP",
    "END",
    "FIND",
    "INIT",
    "PendingCall",
    "PendingOffsets",
    "TransactionResult",
    "TransactionState",
    "TxnRequest",
    "may_enter",
]


class TransactionState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING_TRANSACTION = "committing transaction"
    ABORTING_TRANSACTION = "aborting transaction"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


S = TransactionState
# Each state and the states it may be entered from (FATAL_ERROR from any), as Kafka's State.isTransitionValid.
_SOURCES = {
    S.UNINITIALIZED: frozenset({S.READY, S.ABORTABLE_ERROR}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}),
    S.FATAL_ERROR: frozenset(S),
}


def may_enter(target: TransactionState, source: TransactionState) -> bool:
    """Whether a producer in ``source`` may move to ``target``."""
    return source in _SOURCES[target]


# Request priorities, lower first (Kafka's TxnRequestHandler priorities).
FIND, INIT, ADD, END, BUMP = range(5)


class TransactionResult:
    """The outcome of one transactional call: ``done``, then ``error`` (None on success). Callbacks
    run once it is done. ``acked`` records that the application has seen the outcome (a call that
    timed out leaves it unacked, and only that same call may be made again)."""

    __slots__ = ("_callbacks", "acked", "done", "error", "operation")

    def __init__(self, operation: str):
        self.operation = operation
        self.done = False
        self.error: TransactionError | None = None
        self.acked = False
        self._callbacks: list[Callable[[TransactionResult], object]] = []

    def succeed(self) -> None:
        self._finish(None)

    def fail(self, error: TransactionError) -> None:
        self._finish(error)

    def _finish(self, error: TransactionError | None) -> None:
        if self.done:
            return
        self.done, self.error = True, error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def add_done_callback(self, callback: Callable[[TransactionResult], object]) -> None:
        if self.done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def __repr__(self) -> str:
        outcome = "pending" if not self.done else "ok" if self.error is None else repr(self.error)
        return f"TransactionResult({self.operation}: {outcome})"


@dataclass(eq=False)
class TxnRequest:
    """A request to send: ``build(version)`` with a version in ``versions`` (lowest, highest), to
    ``destination`` (None: any broker). Hand the same object back with its answer. ``kind`` names the
    request (find, init, add_partitions, add_offsets, offset_commit, end)."""

    kind: str
    api_key: ApiKey
    priority: int
    result: TransactionResult
    build: Callable[[int], Any]
    versions: tuple[int, int]
    coordinator: tuple[int, str] | None = None  # (key type, key) whose coordinator it goes to
    context: Any = None
    destination: Coordinator | None = None
    retry_at: float = 0.0
    order: int = 0

    def __repr__(self) -> str:
        return f"TxnRequest({self.kind} -> {self.destination})"


@dataclass
class PendingCall:
    """A call whose result the application has not seen (it timed out): only it may be made again."""
    result: TransactionResult
    state: TransactionState
    operation: str


@dataclass
class PendingOffsets:
    """Offsets sent to the transaction, until TxnOffsetCommit has committed each of them."""
    group: ConsumerGroupMetadata
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)

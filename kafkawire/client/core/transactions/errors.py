"""What an error code in the answer to a transactional request means to the producer, as Kafka's
TransactionManager handlers (and confluent-kafka's librdkafka) decide it: try again, look the
coordinator up again, or fail the call (fatal, fenced, or abortable: the transaction must abort, the
producer may go on). A table per request kind; codes not listed fall back to retrying if Kafka calls them
retriable, else to the request's default."""
from __future__ import annotations

import enum

from kafkawire.error_codes import ErrorCode

from ...errors import (
    ProducerFencedError, TransactionAbortableError, TransactionalIdAuthorizationError, TransactionError,
    TransactionFatalError,
)

__all__ = ["Action", "action_for", "batch_action", "code_name", "error_for"]

E = ErrorCode


class Action(enum.Enum):
    OK = "ok"
    RETRY = "retry"  # the same request again after retry.backoff.ms
    FIND_COORDINATOR = "find coordinator"  # look its coordinator up again, then retry
    SKIP = "skip"  # a partition not attempted because another failed: says nothing of its own
    FENCED = "fenced"  # fatal: a newer producer has the transactional id
    FATAL = "fatal"
    ABORTABLE = "abortable"
    BUMP_OR_FATAL = "bump or fatal"  # abortable if the epoch can be bumped (KIP-360, KIP-890), else fatal


A = Action
# Meanings shared by every request to the transaction coordinator.
_COORDINATOR: dict[int, Action] = {
    E.NONE: A.OK,
    E.NOT_COORDINATOR: A.FIND_COORDINATOR,
    E.COORDINATOR_NOT_AVAILABLE: A.FIND_COORDINATOR,
    E.COORDINATOR_LOAD_IN_PROGRESS: A.RETRY,
    E.CONCURRENT_TRANSACTIONS: A.RETRY,
    E.PRODUCER_FENCED: A.FENCED,
    E.INVALID_PRODUCER_EPOCH: A.FENCED,
    E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: A.FATAL,
    E.TRANSACTION_ABORTABLE: A.ABORTABLE,
}
_UNKNOWN_PRODUCER: dict[int, Action] = {E.UNKNOWN_PRODUCER_ID: A.BUMP_OR_FATAL, E.INVALID_PRODUCER_ID_MAPPING: A.BUMP_OR_FATAL}

# kind -> (its table, the action for a code not in it and not retriable)
_TABLES: dict[str, tuple[dict[int, Action], Action]] = {
    "find": ({E.NONE: A.OK, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: A.FATAL,
              E.GROUP_AUTHORIZATION_FAILED: A.ABORTABLE, E.TRANSACTION_ABORTABLE: A.ABORTABLE}, A.FATAL),
    "init": (_COORDINATOR, A.FATAL),
    "add_partitions": ({**_COORDINATOR, **_UNKNOWN_PRODUCER, E.UNKNOWN_TOPIC_OR_PARTITION: A.RETRY,
                        E.INVALID_TXN_STATE: A.FATAL, E.TOPIC_AUTHORIZATION_FAILED: A.ABORTABLE,
                        E.OPERATION_NOT_ATTEMPTED: A.SKIP}, A.ABORTABLE),
    "add_offsets": ({**_COORDINATOR, **_UNKNOWN_PRODUCER, E.GROUP_AUTHORIZATION_FAILED: A.ABORTABLE}, A.FATAL),
    "end": ({**_COORDINATOR, **_UNKNOWN_PRODUCER, E.INVALID_TXN_STATE: A.FATAL}, A.FATAL),
    # TxnOffsetCommit goes to the group coordinator; a lost member or generation means the consumer lost
    # its partitions (KIP-447): the transaction must abort
    "offset_commit": ({**_COORDINATOR, E.REQUEST_TIMED_OUT: A.FIND_COORDINATOR, E.UNKNOWN_TOPIC_OR_PARTITION: A.RETRY,
                       E.GROUP_AUTHORIZATION_FAILED: A.ABORTABLE, E.FENCED_INSTANCE_ID: A.ABORTABLE,
                       E.UNKNOWN_MEMBER_ID: A.ABORTABLE, E.ILLEGAL_GENERATION: A.ABORTABLE,
                       E.UNSUPPORTED_FOR_MESSAGE_FORMAT: A.FATAL}, A.FATAL),
}


def action_for(kind: str, code: int) -> Action:
    """What ``code`` in the answer to a ``kind`` request asks the producer to do."""
    table, default = _TABLES[kind]
    action = table.get(code)
    if action is not None:
        return action
    known = ErrorCode.of(code)
    if isinstance(known, ErrorCode) and known.retriable:
        return A.RETRY
    return default


# A batch of the transaction failed for good: fatal for these (Kafka's handleFailedBatch), else the
# transaction must abort. INVALID_PRODUCER_EPOCH on a produce is abortable (KIP-588): the coordinator
# bumped the epoch when it aborted a timed-out transaction; EndTxn then says whether this producer is fenced.
_BATCH_FATAL = frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED,
                          E.UNSUPPORTED_VERSION})


def batch_action(code: int | None) -> Action:
    if code == E.PRODUCER_FENCED:
        return A.FENCED
    if code in _BATCH_FATAL:
        return A.FATAL
    return A.ABORTABLE


def code_name(code: int) -> str:
    known = ErrorCode.of(code)
    return known.name if isinstance(known, ErrorCode) else f"error code {code}"


def error_for(action: Action, code: int, what: str, transactional_id: str) -> TransactionError:
    """The exception a failed call raises, for an action that fails it (FENCED, FATAL, ABORTABLE)."""
    if action is A.FENCED:
        return ProducerFencedError(f"{what}: {code_name(code)}: the producer with transactional.id "
                                   f"{transactional_id!r} has been fenced (a newer producer with the same id "
                                   f"has initialized, or the coordinator aborted a transaction open longer than "
                                   f"transaction.timeout.ms)")
    if code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return TransactionalIdAuthorizationError(f"{what}: not authorized to use transactional.id "
                                                 f"{transactional_id!r}")
    if action is A.ABORTABLE:
        return TransactionAbortableError(f"{what}: {code_name(code)}", code)
    return TransactionFatalError(f"{what}: {code_name(code)}", code)

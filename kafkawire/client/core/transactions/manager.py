"""TransactionManager: a transactional producer's state, sans I/O, after Kafka's TransactionManager
(KIP-98, KIP-360, KIP-447, KIP-890).

The application's calls (``initialize``, ``begin``, ``maybe_add_partition`` on every send,
``send_offsets``, ``begin_commit``, ``begin_abort``) move the state and queue requests; each call that
needs the coordinator returns a ``TransactionResult``. A driver (the producer's sender, or a test) runs
it::

    request = tm.next_request(accumulator.has_incomplete(), now_ms)   # None: nothing to send now
    version = the highest version in request.versions that the broker serves
    send request.build(version) to request.destination (a Coordinator, or None: any broker), then
    tm.handle_response(request, response, version, now_ms)   # or tm.handle_failure(request, now_ms, error)

and keeps the producer's batches in step: only partitions ``tm.may_send_to(tp)``, stamped with
``tm.producer_id`` / ``producer_epoch``; a batch that fails for good goes to ``tm.handle_failed_batch``;
while ``tm.aborting_batches`` is set, batches not yet sent fail with it. ``update_features`` takes the
broker's finalized features (ApiVersions).

Requests go one at a time, in priority order (FindCoordinator, InitProducerId, AddPartitionsToTxn /
AddOffsetsToTxn / TxnOffsetCommit, EndTxn, an epoch bump), EndTxn only once every batch has been
answered. Coordinators are looked up (FindCoordinator, key type 1 for the transactional id, 0 for a
group) when unknown and again after NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a lost connection.

Transaction version 2 (KIP-890 part 2, when the broker's finalized ``transaction.version`` is 2 or
more when a transaction begins): no AddPartitionsToTxn (Produce v12+ adds partitions) nor
AddOffsetsToTxn (TxnOffsetCommit v5 adds the group), EndTxn v5, whose answer carries the new producer
epoch (bumped by every transaction; sequences restart at 0). Under version 1, a transaction aborted
after an error that may have left a gap in a partition's sequence numbers ends with InitProducerId
carrying the current producer id and epoch, which bumps the epoch (KIP-360).

What each error code means is ``errors``' table: fatal (ProducerFencedError,
TransactionalIdAuthorizationError, TransactionFatalError: only closing is left), abortable
(TransactionAbortableError: abort, then go on) or retried inside.
"""
from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import ApiKey

from ...errors import (
    TransactionAbortableError, TransactionAbortedError, TransactionError, TransactionFatalError,
    TransactionStateError,
)
from ..group.consumer_group_metadata import ConsumerGroupMetadata
from ..group.protocol import Coordinator, OffsetAndMetadata
from ..group.requests import find_coordinator_request, read_find_coordinator
from ..topic_partition import TopicPartition
from .errors import Action, action_for, batch_action, code_name, error_for
from .requests import (
    GROUP_COORDINATOR, TRANSACTION_COORDINATOR, TRANSACTION_V2_VERSIONS, VERSIONS, add_offsets_request,
    add_partitions_request, end_txn_request, init_producer_id_request, read_add_partitions, read_txn_offset_commit,
    txn_offset_commit_request,
)
from .state import (
    ADD, BUMP, END, FIND, INIT, PendingCall, PendingOffsets, TransactionResult, TransactionState, TxnRequest,
    may_enter,
)

__all__ = ["TransactionManager", "TransactionResult", "TransactionState", "TxnRequest"]

log = logging.getLogger(__name__)
S = TransactionState
A = Action
# Kafka's ADD_PARTITIONS_RETRY_BACKOFF_MS: the first AddPartitionsToTxn of a transaction that meets
# CONCURRENT_TRANSACTIONS (the previous one is still completing) tries again sooner than retry.backoff.ms.
_ADD_PARTITIONS_RETRY_BACKOFF_MS = 20
# Answers for one partition of AddPartitionsToTxn that decide the whole request.
_WHOLE_REQUEST = frozenset({A.RETRY, A.FIND_COORDINATOR, A.FENCED, A.FATAL, A.BUMP_OR_FATAL})


class TransactionManager:
    """One transactional producer's transaction state (see the module docstring)."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int, retry_backoff_ms: int = 100):
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.state = S.UNINITIALIZED
        self.last_error: TransactionError | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.transaction_version = 0  # the broker's finalized transaction.version
        self.transaction_v2 = False  # the current transaction uses KIP-890 part 2
        self._can_bump_epoch = False  # the coordinator serves InitProducerId v3+
        self._epoch_bump_required = False
        self._transaction_started = False  # something was added: the coordinator has a transaction to end
        self._new_partitions: set[TopicPartition] = set()  # to add with the next AddPartitionsToTxn
        self._pending_partitions: set[TopicPartition] = set()  # in that request
        self._partitions: set[TopicPartition] = set()  # added: batches may go
        self._coordinators: dict[tuple[int, str], Coordinator] = {}
        self._queue: list[TxnRequest] = []
        self._in_flight: TxnRequest | None = None
        self._pending_call: PendingCall | None = None
        self._order = itertools.count()

    # ---- state ------------------------------------------------------------------------------------
    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def is_completing(self) -> bool:
        return self.state in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION)

    @property
    def has_ongoing_transaction(self) -> bool:
        return self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION, S.ABORTABLE_ERROR)

    @property
    def aborting_batches(self) -> TransactionError | None:
        """While the transaction is to be aborted (or the producer has failed for good), the error that
        batches not yet sent fail with."""
        if self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            return self.last_error
        if self.state is S.ABORTING_TRANSACTION:
            return self.last_error or TransactionAbortedError(
                f"the transaction of {self.transactional_id!r} was aborted before the record was sent")
        return None

    @property
    def fatal_error(self) -> TransactionError | None:
        return self.last_error if self.state is S.FATAL_ERROR else None

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        """The partitions added to the current transaction."""
        return frozenset(self._partitions)

    def may_send_to(self, tp: TopicPartition) -> bool:
        """Whether batches of ``tp`` may be sent: it has been added to the transaction."""
        return tp in self._partitions and self.state is not S.FATAL_ERROR

    def update_features(self, finalized: Mapping[str, int]) -> None:
        """The broker's finalized features (ApiVersions); ``transaction.version`` applies from the next
        transaction."""
        self.transaction_version = finalized.get("transaction.version", 0)

    # ---- the application's calls ----------------------------------------------------------------------
    def initialize(self) -> TransactionResult:
        """initTransactions: a producer id and epoch for the transactional id, fencing older producers
        with it and completing (the coordinator aborts) whatever transaction they left open."""
        self._raise_if_failed()

        def start() -> TransactionResult:
            self._transition(S.INITIALIZING, "initialize transactions")
            return self._enqueue_init(bump=False, result=TransactionResult("init_transactions")).result
        return self._cached_call(start, S.INITIALIZING, "init_transactions")

    def begin(self) -> None:
        self._raise_if_pending("begin_transaction")
        self._raise_if_failed()
        self._transition(S.IN_TRANSACTION, "begin a transaction")
        self.transaction_v2 = self.transaction_version >= 2

    def maybe_add_partition(self, tp: TopicPartition) -> bool:
        """A record is being sent to ``tp``: raise if that is not allowed now, else note the partition
        (to add with AddPartitionsToTxn under transaction version 1). True when it is new to the
        transaction (the driver has a request to send)."""
        if self.state is S.IN_TRANSACTION and (tp in self._partitions or tp in self._new_partitions):
            return False  # the usual case, every record after a partition's first
        self._raise_if_failed()
        self._raise_if_pending("send")
        if not self.has_producer_id:
            raise TransactionStateError(f"cannot send to {tp} before init_transactions has completed")
        if self.state is not S.IN_TRANSACTION:
            raise TransactionStateError(f"cannot send to {tp} outside a transaction (the producer is "
                                        f"{self.state.value}): call begin_transaction first")
        if tp in self._pending_partitions:
            return False
        if self.transaction_v2:
            self._partitions.add(tp)  # Produce v12+ adds it to the transaction
            self._transaction_started = True
        else:
            self._new_partitions.add(tp)
        return True

    def send_offsets(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     group: ConsumerGroupMetadata) -> TransactionResult:
        """sendOffsetsToTransaction: the consumer's offsets, committed with the transaction."""
        self._raise_if_pending("send_offsets_to_transaction")
        self._raise_if_failed()
        if self.state is not S.IN_TRANSACTION:
            raise TransactionStateError(f"cannot send offsets outside a transaction (the producer is "
                                        f"{self.state.value})")
        result = TransactionResult("send_offsets_to_transaction")
        pending = PendingOffsets(group, dict(offsets))
        if not pending.offsets:
            result.succeed()
        elif self.transaction_v2:  # TxnOffsetCommit v5 adds the group's partition itself
            self._transaction_started = True
            self._enqueue_offset_commit(pending, result)
        else:
            tid, pid, epoch = self.transactional_id, self.producer_id, self.producer_epoch
            self._enqueue(TxnRequest("add_offsets", ApiKey.ADD_OFFSETS_TO_TXN, ADD, result,
                                     lambda version: add_offsets_request(tid, pid, epoch, group.group_id),
                                     VERSIONS[ApiKey.ADD_OFFSETS_TO_TXN], (TRANSACTION_COORDINATOR, tid), pending))
        return result

    def begin_commit(self) -> TransactionResult:
        def start() -> TransactionResult:
            self._raise_if_failed()
            self._transition(S.COMMITTING_TRANSACTION, "commit")
            return self._begin_completing(commit=True)
        return self._cached_call(start, S.COMMITTING_TRANSACTION, "commit_transaction")

    def begin_abort(self) -> TransactionResult:
        def start() -> TransactionResult:
            if self.state is not S.ABORTABLE_ERROR:
                self._raise_if_failed()
            self._transition(S.ABORTING_TRANSACTION, "abort")
            self._new_partitions.clear()  # nothing more to add to a transaction being aborted
            return self._begin_completing(commit=False)
        return self._cached_call(start, S.ABORTING_TRANSACTION, "abort_transaction")

    def _begin_completing(self, commit: bool) -> TransactionResult:
        if self._new_partitions:
            self._enqueue_add_partitions()
        tid, pid, epoch = self.transactional_id, self.producer_id, self.producer_epoch
        result = TransactionResult("commit_transaction" if commit else "abort_transaction")
        self._enqueue(TxnRequest("end", ApiKey.END_TXN, END, result,
                                 lambda version: end_txn_request(tid, pid, epoch, commit),
                                 self._versions(ApiKey.END_TXN), (TRANSACTION_COORDINATOR, tid), commit))
        return result

    def acknowledge(self, result: TransactionResult) -> None:
        """The application has seen ``result`` (its call returned or raised): the next call is free."""
        result.acked = True
        if self._pending_call is not None and self._pending_call.result is result:
            self._pending_call = None

    # ---- batches ----------------------------------------------------------------------------------------
    def handle_failed_batch(self, error: BaseException, sequenced: bool) -> None:
        """A batch of the transaction failed for good (a produce error, a delivery timeout): fatal for
        fencing and authorization of the transactional id, otherwise the transaction must abort.
        ``sequenced``: it held sequence numbers, which leaves a gap that an epoch bump must close."""
        code = getattr(error, "code", None)
        if sequenced and not self.transaction_v2:
            self._epoch_bump_required = True
        if self.state is S.FATAL_ERROR:
            return
        action = A.FATAL if isinstance(error, TransactionFatalError) else batch_action(code)
        if action is A.ABORTABLE:
            wrapped = error if isinstance(error, TransactionAbortableError) else TransactionAbortableError(
                f"a record of the transaction could not be delivered: {error}", code)
            self._abortable(wrapped)
        elif isinstance(error, TransactionFatalError):
            self._fatal(error)
        else:
            assert code is not None  # (only a broker's code is fatal)
            self._fatal(error_for(action, code, "producing", self.transactional_id))

    def fail(self, error: BaseException) -> None:
        """The producer cannot go on (its sender stopped): every call fails with ``error`` from now on."""
        if self.state is not S.FATAL_ERROR:
            wrapped = error if isinstance(error, TransactionError) else TransactionFatalError(str(error))
            self._fatal(wrapped)

    # ---- the driver's side --------------------------------------------------------------------------------
    def next_request(self, has_incomplete_batches: bool, now_ms: float) -> TxnRequest | None:
        """The request to send now, if any (one at a time; EndTxn once no batch is incomplete)."""
        if self._new_partitions and self.state is S.IN_TRANSACTION and not self._pending_partitions:
            self._enqueue_add_partitions()
        if self._in_flight is not None:
            return None
        while self._queue:
            request = min(self._queue, key=lambda r: (r.priority, r.order))
            if request.kind == "end" and has_incomplete_batches:
                return None
            if request.retry_at > now_ms:
                return None
            self._queue.remove(request)
            if self._refused_by_state(request):
                continue
            if request.kind == "end" and not self._transaction_started:
                log.debug("transaction of %r: nothing was added, so no EndTxn is sent", self.transactional_id)
                self._end_completed(request)
                continue
            if request.coordinator is not None:
                coordinator = self._coordinators.get(request.coordinator)
                if coordinator is None:
                    self._queue.append(request)
                    self._lookup_coordinator(*request.coordinator)
                    continue
                request.destination = coordinator
            else:
                request.destination = None
            self._in_flight = request
            return request
        return None

    def timeout_ms(self, now_ms: float) -> float | None:
        """Milliseconds until a queued request's backoff ends (None: nothing waits on the clock)."""
        if self._in_flight is not None or not self._queue:
            return None
        return max(0.0, min(r.retry_at for r in self._queue) - now_ms)

    def handle_failure(self, request: TxnRequest, now_ms: float, reason: str = "") -> None:
        """The request got no answer (a lost connection, a timeout): find its coordinator again and retry."""
        self._take_in_flight(request)
        log.debug("transactional request %r failed (%s); retrying", request, reason)
        if request.coordinator is not None:
            self._lookup_coordinator(*request.coordinator)
        self._retry(request, now_ms)

    def handle_unsupported(self, request: TxnRequest, reason: str) -> None:
        """The broker serves no version of the request this client can send: fatal, as in Kafka."""
        self._take_in_flight(request)
        error = TransactionFatalError(f"{request.kind}: {reason}", ErrorCode.UNSUPPORTED_VERSION)
        request.result.fail(error)
        self._fatal(error)

    def handle_response(self, request: TxnRequest, response: Any, version: int, now_ms: float) -> None:
        self._take_in_flight(request)
        if request.kind == "find":
            return self._on_find(request, response, version, now_ms)
        if request.kind == "add_partitions":
            return self._on_add_partitions(request, response, now_ms)
        if request.kind == "offset_commit":
            return self._on_offset_commit(request, response, now_ms)
        action = action_for(request.kind, response.error_code)
        if action is A.OK:
            return self._on_success(request, response, version)
        self._act(request, action, response.error_code, now_ms)

    # ---- answers ----------------------------------------------------------------------------------------
    def _act(self, request: TxnRequest, action: Action, code: int, now_ms: float, what: str = "",
             backoff_ms: float | None = None) -> None:
        """Carry out what a failed answer's ``action`` asks for ``request``."""
        what = what or _WHAT[request.kind]
        if action is A.RETRY or action is A.SKIP:
            self._retry(request, now_ms, backoff_ms)
        elif action is A.FIND_COORDINATOR:
            if request.coordinator is not None:
                self._lookup_coordinator(*request.coordinator)
            self._retry(request, now_ms)
        elif action is A.BUMP_OR_FATAL:
            # the coordinator lost the producer's state: an epoch bump restores it, where one is possible
            if self._can_bump_epoch or self.transaction_v2:
                self._epoch_bump_required = True
                self._fail_request(request, TransactionAbortableError(f"{what}: {code_name(code)}", code))
            else:
                self._fail_request(request, TransactionFatalError(f"{what}: {code_name(code)}", code), fatal=True)
        else:
            self._fail_request(request, error_for(action, code, what, self.transactional_id),
                               fatal=action is not A.ABORTABLE)

    def _on_find(self, request: TxnRequest, response: Any, version: int, now_ms: float) -> None:
        key_type, key = request.context
        code, node, host, port, message = read_find_coordinator(response, version, key)
        action = action_for("find", code)
        if action is A.OK:
            self._coordinators[(key_type, key)] = Coordinator(node, host, port)
            request.result.succeed()
        elif action is A.FIND_COORDINATOR:
            self._retry(request, now_ms)
        else:
            detail = f" ({message})" if message else ""
            self._act(request, action, code, now_ms, f"FindCoordinator for {key!r}{detail}")

    def _on_success(self, request: TxnRequest, response: Any, version: int) -> None:
        if request.kind == "init":
            self._can_bump_epoch = version >= 3
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
            self._epoch_bump_required = False
            self._transition(S.READY, "complete initialization")
            request.result.succeed()
        elif request.kind == "add_offsets":
            self._transaction_started = True
            self._enqueue_offset_commit(request.context, request.result)  # the call completes with TxnOffsetCommit
        else:  # end
            if version >= 5 and response.producer_id >= 0:
                # transaction version 2: every transaction ends with a new epoch (a new producer id
                # when the epoch would overflow); sequences restart at 0
                self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
                self._epoch_bump_required = False
            self._end_completed(request)

    def _on_add_partitions(self, request: TxnRequest, response: Any, now_ms: float) -> None:
        partitions: list[TopicPartition] = request.context
        errors = read_add_partitions(response)
        if response.error_code:  # v4+'s top-level error (a v0-3 answer leaves it 0)
            errors = dict.fromkeys(partitions, response.error_code)
        missing = [tp for tp in partitions if tp not in errors]
        failures: list[tuple[TopicPartition, int, Action]] = []
        for tp, code in sorted(errors.items()):
            action = action_for("add_partitions", code)
            if action in _WHOLE_REQUEST or code == ErrorCode.TRANSACTION_ABORTABLE:
                first = code == ErrorCode.CONCURRENT_TRANSACTIONS and not self._partitions
                return self._act(request, action, code, now_ms,
                                 backoff_ms=_ADD_PARTITIONS_RETRY_BACKOFF_MS if first else None)
            if action is A.ABORTABLE:
                failures.append((tp, code, action))
        self._pending_partitions.difference_update(partitions)
        if failures:
            detail = ", ".join(f"{tp} {code_name(code)}" for tp, code, _ in failures)
            self._fail_request(request, TransactionAbortableError(
                f"could not add partitions to the transaction: {detail}", failures[0][1]))
            return
        added = [tp for tp in partitions if tp not in missing]
        self._partitions.update(added)
        self._new_partitions.update(missing)  # (an answer that left some out: they go in the next request)
        if added:
            self._transaction_started = True
        request.result.succeed()

    def _on_offset_commit(self, request: TxnRequest, response: Any, now_ms: float) -> None:
        pending: PendingOffsets = request.context
        group = pending.group.group_id
        retry: Action | None = None
        for tp, code in read_txn_offset_commit(response).items():
            action = action_for("offset_commit", code)
            if action is A.OK:
                pending.offsets.pop(tp, None)
            elif action in (A.RETRY, A.FIND_COORDINATOR):
                retry = A.FIND_COORDINATOR if action is A.FIND_COORDINATOR else retry or A.RETRY
            else:
                return self._act(request, action, code, now_ms, f"TxnOffsetCommit for group {group!r} ({tp})")
        if pending.offsets:
            self._act(request, retry or A.RETRY, 0, now_ms)  # the offsets that met a retriable error
        else:
            request.result.succeed()

    def _end_completed(self, request: TxnRequest) -> None:
        """The coordinator ended the transaction (or there was none to end): ready for the next one,
        after an epoch bump when batches may have left sequence gaps (transaction version 1)."""
        if self.state is S.FATAL_ERROR:
            request.result.succeed()
            return
        bump = self._epoch_bump_required and not self.transaction_v2
        self._clear_transaction()
        if bump:
            if not self._can_bump_epoch:
                self._fatal(TransactionFatalError(
                    "batches of the transaction failed after being sent, and the coordinator cannot bump the "
                    "producer epoch (InitProducerId v3+) to restart their sequence numbers: it is not safe to go on"))
                request.result.fail(self.last_error)  # type: ignore[arg-type]
                return
            self._transition(S.INITIALIZING, "bump the epoch")
            self._enqueue_init(bump=True, result=request.result)  # the call completes with the bump
        else:
            self._transition(S.READY, "complete the transaction")
            request.result.succeed()

    # ---- internals ----------------------------------------------------------------------------------------
    def _clear_transaction(self) -> None:
        self.last_error = None
        self._transaction_started = False
        self._new_partitions.clear()
        self._pending_partitions.clear()
        self._partitions.clear()

    def _versions(self, api_key: ApiKey) -> tuple[int, int]:
        return (TRANSACTION_V2_VERSIONS if self.transaction_v2 else VERSIONS)[api_key]

    def _enqueue(self, request: TxnRequest) -> TxnRequest:
        request.order = next(self._order)
        self._queue.append(request)
        return request

    def _enqueue_init(self, bump: bool, result: TransactionResult) -> TxnRequest:
        tid, timeout = self.transactional_id, self.transaction_timeout_ms
        pid, epoch = (self.producer_id, self.producer_epoch) if bump else (-1, -1)
        return self._enqueue(TxnRequest("init", ApiKey.INIT_PRODUCER_ID, BUMP if bump else INIT, result,
                                        lambda version: init_producer_id_request(version, tid, timeout, pid, epoch),
                                        VERSIONS[ApiKey.INIT_PRODUCER_ID], (TRANSACTION_COORDINATOR, tid), bump))

    def _enqueue_add_partitions(self) -> None:
        self._pending_partitions |= self._new_partitions
        self._new_partitions.clear()
        partitions = sorted(self._pending_partitions)
        tid, pid, epoch = self.transactional_id, self.producer_id, self.producer_epoch
        self._enqueue(TxnRequest("add_partitions", ApiKey.ADD_PARTITIONS_TO_TXN, ADD,
                                 TransactionResult("add partitions"),
                                 lambda version: add_partitions_request(tid, pid, epoch, partitions),
                                 VERSIONS[ApiKey.ADD_PARTITIONS_TO_TXN], (TRANSACTION_COORDINATOR, tid), partitions))

    def _enqueue_offset_commit(self, pending: PendingOffsets, result: TransactionResult) -> None:
        tid, pid, epoch = self.transactional_id, self.producer_id, self.producer_epoch
        self._enqueue(TxnRequest(
            "offset_commit", ApiKey.TXN_OFFSET_COMMIT, ADD, result,
            lambda version: txn_offset_commit_request(version, tid, pid, epoch, pending.group, pending.offsets),
            self._versions(ApiKey.TXN_OFFSET_COMMIT), (GROUP_COORDINATOR, pending.group.group_id), pending))

    def _lookup_coordinator(self, key_type: int, key: str) -> None:
        self._coordinators.pop((key_type, key), None)
        in_flight = self._in_flight
        if any(r.kind == "find" and r.context == (key_type, key) for r in self._queue) or (
                in_flight is not None and in_flight.kind == "find" and in_flight.context == (key_type, key)):
            return
        self._enqueue(TxnRequest("find", ApiKey.FIND_COORDINATOR, FIND, TransactionResult("find coordinator"),
                                 lambda version: find_coordinator_request(version, key, key_type),
                                 VERSIONS[ApiKey.FIND_COORDINATOR], None, (key_type, key)))

    def _take_in_flight(self, request: TxnRequest) -> None:
        if self._in_flight is not request:
            raise ValueError(f"{request!r} is not the transactional request in flight")
        self._in_flight = None

    def _retry(self, request: TxnRequest, now_ms: float, backoff_ms: float | None = None) -> None:
        backoff = self.retry_backoff_ms if backoff_ms is None else min(backoff_ms, self.retry_backoff_ms)
        request.retry_at = now_ms + backoff
        self._queue.append(request)

    def _refused_by_state(self, request: TxnRequest) -> bool:
        """In an error state, fail a queued request instead of sending it (a coordinator lookup still
        goes while an abort is expected)."""
        if self.state is S.FATAL_ERROR or (self.state is S.ABORTABLE_ERROR and request.kind != "find"):
            assert self.last_error is not None  # (error states always carry one)
            request.result.fail(self.last_error)
            return True
        return False

    def _fail_request(self, request: TxnRequest, error: TransactionError, fatal: bool = False) -> None:
        request.result.fail(error)
        if fatal:
            self._fatal(error)
        else:
            self._abortable(error)

    def _abortable(self, error: TransactionError) -> None:
        if self.state is S.ABORTING_TRANSACTION:
            log.debug("already aborting; not entering the abortable state for %s", error)
            return
        if not may_enter(S.ABORTABLE_ERROR, self.state):
            log.debug("transaction state %s ignores %s", self.state.value, error)
            return
        log.info("transactional.id %r: the transaction must abort: %s", self.transactional_id, error)
        self.state, self.last_error = S.ABORTABLE_ERROR, error

    def _fatal(self, error: TransactionError) -> None:
        log.info("transactional.id %r: fatal error: %s", self.transactional_id, error)
        self.state, self.last_error = S.FATAL_ERROR, error
        if self._pending_call is not None:
            self._pending_call.result.fail(error)
        for request in self._queue:
            request.result.fail(error)
        self._queue.clear()

    def _transition(self, target: TransactionState, what: str) -> None:
        if not may_enter(target, self.state):
            raise TransactionStateError(f"cannot {what}: transactional.id {self.transactional_id!r} is "
                                        f"{self.state.value}")
        self.state = target
        if target not in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            self.last_error = None

    def _raise_if_failed(self) -> None:
        """In an error state, raise its error again (a new exception of the same kind)."""
        if self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            error = self.last_error
            assert error is not None  # (error states always carry one)
            raise type(error)(str(error), error.code) from error

    def _raise_if_pending(self, operation: str) -> None:
        pending = self._pending_call
        if pending is None:
            return
        if self.state is S.FATAL_ERROR:
            self._raise_if_failed()  # the producer is done for: that says more than a pending call
        if not pending.result.acked:
            raise TransactionStateError(f"cannot {operation}: the previous {pending.operation} timed out and "
                                        f"must be called again first")
        self._pending_call = None

    def _cached_call(self, start: Callable[[], TransactionResult], state: TransactionState,
                     operation: str) -> TransactionResult:
        """Kafka's rule for calls that wait on the coordinator: after one timed out, the same call
        resumes waiting for the same result and any other call is refused."""
        pending = self._pending_call
        if pending is not None and self.state is S.FATAL_ERROR:
            self._raise_if_failed()
        if pending is not None:
            if pending.result.acked:
                self._pending_call = None
            elif pending.state is not state:
                raise TransactionStateError(f"cannot {operation}: the previous {pending.operation} timed out "
                                            f"and must be called again first")
            else:
                return pending.result
        result = start()
        self._pending_call = PendingCall(result, state, operation)
        return result


_WHAT = {"init": "InitProducerId", "add_partitions": "AddPartitionsToTxn", "add_offsets": "AddOffsetsToTxn",
         "offset_commit": "TxnOffsetCommit", "end": "EndTxn", "find": "FindCoordinator"}

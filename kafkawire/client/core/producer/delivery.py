"""What ``send`` returns: a RecordFuture per record, a view onto its batch's BatchResult.

A batch is acknowledged or failed as a whole, so the outcome lives once per batch (base offset,
log-append time or error) and a record's future holds only its place in the batch and what
RecordMetadata needs of it: no event, lock or loop future per record unless someone waits on it.

A RecordFuture can be asked ``done()``, ``result()``, ``exception()``, and given callbacks.
``result(timeout)`` blocks only for futures of the blocking Producer (their batches are "waitable"
from any thread but the producer's own); elsewhere a pending ``result()`` is a RuntimeError, as an
asyncio future's is. Awaiting one waits on what the driver that runs the producer gave its batches
(``loop_waiter``: the asyncio layer's ``wait_for_delivery``); the core itself never touches a loop.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Generator
from typing import Any, NamedTuple

__all__ = ["RecordMetadata", "RecordFuture", "BatchResult", "LoopWaiter"]

log = logging.getLogger(__name__)

# Guards the hand-over between the thread that finishes a batch and those that wait on it or add
# callbacks; taken once per batch and per wait, never per append.
_LOCK = threading.Lock()


class RecordMetadata(NamedTuple):
    """Where a record landed: offset -1 when unknown (acks=0); timestamp is the log-append time when
    the topic uses it, else the record's create time."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


# What ``await record`` waits on until the record's batch is settled (from any thread).
LoopWaiter = Callable[["RecordFuture"], Awaitable[None]]


class BatchResult:
    """One batch's outcome, shared by its records' futures. ``waitable``: the ident of the thread
    that finishes batches (the blocking Producer's loop thread), which must not wait on them; None
    when futures never block. ``loop_waiter``: how its records' futures are awaited (None: they
    cannot be)."""

    __slots__ = ("topic", "partition", "base_offset", "log_append_time", "error", "done", "waitable",
                 "loop_waiter", "_callbacks", "_event")

    def __init__(self, topic: str, partition: int, waitable: int | None = None,
                 loop_waiter: LoopWaiter | None = None):
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.done = False
        self.waitable = waitable
        self.loop_waiter = loop_waiter
        self._callbacks: list[tuple[Callable[[RecordFuture], Any], RecordFuture]] | None = None
        self._event: threading.Event | None = None

    def finish(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        """Settle the batch once: its records' futures resolve, callbacks run, waiters wake."""
        with _LOCK:
            if self.done:
                raise RuntimeError("a batch's result is settled only once")
            self.base_offset, self.log_append_time, self.error = base_offset, log_append_time, error
            self.done = True
            callbacks, event = self._callbacks, self._event
            self._callbacks = None
        if event is not None:
            event.set()
        if callbacks:
            for callback, future in callbacks:
                _call(callback, future)

    def add_callback(self, callback: Callable[[RecordFuture], Any], future: RecordFuture) -> None:
        with _LOCK:
            if not self.done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append((callback, future))
                return
        _call(callback, future)

    def wait(self, timeout: float | None) -> None:
        """Block until settled (TimeoutError after ``timeout`` seconds)."""
        if self.waitable is None:
            raise RuntimeError("the record has not been acknowledged yet (await the future instead)")
        if threading.get_ident() == self.waitable:
            raise RuntimeError("waiting for a record on the producer's own thread would never end")
        with _LOCK:
            if self.done:
                return
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if not event.wait(timeout):
            raise TimeoutError(f"the record was not acknowledged within {timeout} s")


def _call(callback: Callable[[RecordFuture], Any], future: RecordFuture) -> None:
    try:
        callback(future)
    except Exception:  # one failing callback must not keep the batch's other records unsettled
        log.exception("a record future's callback raised")


class RecordFuture:
    """The outcome of one record's send (see the module docstring)."""

    __slots__ = ("_batch", "_index", "_timestamp", "_key_size", "_value_size")

    def __init__(self, batch: BatchResult, index: int, timestamp: int, key_size: int, value_size: int):
        self._batch = batch
        self._index = index
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def done(self) -> bool:
        return self._batch.done

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        """A record cannot be called back once appended: always False."""
        return False

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's RecordMetadata, or its error raised (see the module docstring for waiting)."""
        batch = self._batch
        if not batch.done:
            batch.wait(timeout)
        if batch.error is not None:
            raise batch.error
        offset = batch.base_offset + self._index if batch.base_offset >= 0 else -1
        timestamp = batch.log_append_time if batch.log_append_time >= 0 else self._timestamp
        return RecordMetadata(batch.topic, batch.partition, offset, timestamp, self._key_size, self._value_size)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        batch = self._batch
        if not batch.done:
            batch.wait(timeout)
        return batch.error

    def add_done_callback(self, callback: Callable[[RecordFuture], Any]) -> None:
        """Call ``callback(future)`` once the record is settled (at once if it is), on the thread that
        settles it."""
        self._batch.add_callback(callback, self)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        batch = self._batch
        if not batch.done:
            if batch.loop_waiter is None:
                raise RuntimeError("this record's producer runs on no event loop: use result()")
            yield from batch.loop_waiter(self).__await__()
        return self.result()

    def __repr__(self) -> str:
        batch = self._batch
        state = "pending" if not batch.done else "failed" if batch.error is not None else "done"
        return f"RecordFuture({batch.topic}-{batch.partition}, {state})"

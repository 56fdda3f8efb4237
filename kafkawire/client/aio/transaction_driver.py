"""TransactionDriver: a transactional producer's TransactionManager (``kafkawire.client.core.
transaction_manager``, sans I/O) run by the producer's sender.

On each of the sender's passes (``pump``, under the sender's lock) it sends the manager's next request
(a task of its own: to any broker, or to a coordinator over a connection of its own), fails the
batches not yet sent while the transaction is to abort, and gives the accumulator the manager's
producer id and epoch once nothing is in flight. ``wait`` turns a call's TransactionResult into what
the application's call returns or raises, within a timeout (then TransactionTimeout: calling the same
method again goes on waiting for the same outcome, as in Kafka).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ..core.transactions.manager import TransactionManager, TransactionResult, TxnRequest
from ..errors import (
    IncompatibleBrokerError, KafkaConnectionError, KafkaError, TransactionError, TransactionTimeout,
)
from .connection import COORDINATOR_ROLE
from .connection_manager import ConnectionManager

if TYPE_CHECKING:
    from .sender import Sender

__all__ = ["TransactionDriver"]

log = logging.getLogger(__name__)

_PRODUCE_V1_MAX_VERSION = 11  # Produce v12+ adds partitions to the transaction itself (KIP-890 part 2)
_PRODUCE_V2_MIN_VERSION = 12


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class TransactionDriver:
    """Runs ``manager`` for ``sender`` (see the module docstring); the manager is used under the
    sender's lock."""

    def __init__(self, manager: TransactionManager, sender: Sender, connections: ConnectionManager):
        self.manager = manager
        self.sender = sender
        self.accumulator = sender.accumulator
        self.connections = connections
        self._task: asyncio.Task | None = None
        self.accumulator.may_send = manager.may_send_to
        sender.transactions = self

    @property
    def task(self) -> asyncio.Task | None:
        """The request being sent, if any (the sender cancels it when it stops)."""
        return self._task

    def _wake(self) -> None:
        self.sender.wake()

    def produce_versions(self, low: int, high: int) -> tuple[int, int]:
        """The Produce versions a transactional batch may go at: v12+ under transaction version 2."""
        if self.manager.transaction_v2:
            return max(low, _PRODUCE_V2_MIN_VERSION), high
        return low, min(high, _PRODUCE_V1_MAX_VERSION)

    def pump(self, now_ms: float) -> float:
        """One sender pass's transactional work; returns ms until the manager waits on the clock
        (inf: nothing to wait for)."""
        manager, accumulator = self.manager, self.accumulator
        aborting = manager.aborting_batches
        if aborting is not None and accumulator.has_undrained() and accumulator.abort_undrained(aborting):
            self.sender.progress.set()  # flush and close wait on settled batches
        if manager.has_producer_id and not any(self.sender.in_flight.values()) and (
                accumulator.producer_id, accumulator.producer_epoch) != (manager.producer_id, manager.producer_epoch):
            accumulator.set_producer_id(manager.producer_id, manager.producer_epoch)  # sequences restart at 0
        if self._task is None or self._task.done():
            request = manager.next_request(accumulator.has_incomplete(), now_ms)
            if request is not None:
                self._task = asyncio.get_running_loop().create_task(self._send(request))
        timeout = manager.timeout_ms(now_ms)
        return float("inf") if timeout is None else timeout

    async def _send(self, request: TxnRequest) -> None:
        manager, lock = self.manager, self.sender.lock
        try:
            answered = await self._exchange(request)
            if answered is not None:
                response, version = answered
                with lock:
                    manager.handle_response(request, response, version, _now_ms())
        except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
            with lock:
                manager.handle_failure(request, _now_ms(), str(error))
        except Exception as error:  # an authentication failure, or a bug: fail the calls rather than hang them
            log.exception("transactional request %r failed", request)
            with lock:
                manager.fail(error)
        finally:
            self._wake()

    async def _exchange(self, request: TxnRequest) -> tuple[object, int] | None:
        """Send ``request`` where it goes, at the highest version both sides speak: its answer and that
        version, or None when it cannot be sent at all (the manager has been told)."""
        manager, lock = self.manager, self.sender.lock
        if request.destination is None:
            connection = await self.sender.least_loaded_connection()
        else:
            coordinator = request.destination
            self.connections.brokers[coordinator.node_id] = (coordinator.host, coordinator.port)
            connection = await self.connections.connection(coordinator.node_id, COORDINATOR_ROLE)
        with lock:
            manager.update_features(connection.finalized_features)
        try:
            version = connection.api_version(request.api_key, *request.versions)
            body = request.build(version)
        except (IncompatibleBrokerError, TransactionError) as error:  # (TxnOffsetCommit below v3: no member id)
            with lock:
                manager.handle_unsupported(request, str(error))
            return None
        return await connection.send(body, version), version

    async def wait(self, result: TransactionResult, timeout_s: float | None) -> None:
        """Wait for ``result``: return on success, raise its error, or TransactionTimeout after
        ``timeout_s`` (None: no limit)."""
        if not result.done:
            done = asyncio.get_running_loop().create_future()

            def settle(_result: TransactionResult) -> None:
                if not done.done():
                    done.set_result(None)
            result.add_done_callback(settle)
            self._wake()
            try:
                await asyncio.wait_for(asyncio.shield(done), timeout_s)
            except TimeoutError:
                raise TransactionTimeout(f"{result.operation} did not complete within {timeout_s} s; call it "
                                         f"again to go on waiting") from None
        with self.sender.lock:
            self.manager.acknowledge(result)
        if result.error is not None:
            raise type(result.error)(str(result.error), result.error.code) from result.error

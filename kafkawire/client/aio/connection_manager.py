"""ConnectionManager: a client's connections to brokers, one per (broker, role), made on demand from the
addresses metadata gave (or the bootstrap servers), shared while one is being made, and retried as
Kafka's ``ClusterConnectionStates`` retries them: after a failed attempt, ``reconnect.backoff.ms``
doubling per consecutive failure up to ``reconnect.backoff.max.ms``; each attempt's socket bounded by
``socket.connection.setup.timeout.ms``, doubling per attempt that timed out up to
``socket.connection.setup.timeout.max.ms`` (both with 20% jitter).

The calls retry until their own timeout and then raise the manager's ``timeout_error``: a
KafkaTimeoutError naming the broker(s) and the last cause (refused, unreachable, or the request that
went unanswered within request.timeout.ms), or what the call was still waiting for.

A connection that fails to authenticate is not retried: the manager keeps its AuthenticationException,
raises it to every later caller, and tells the client (``on_authentication_failure``).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from ..core.consumer.memory import MemoryPool
from ..core.network_config import ExponentialBackoff, NetworkConfig
from ..errors import (
    AuthenticationException, IncompatibleBrokerError, KafkaConnectionError, KafkaError, KafkaTimeoutError,
)
from .authentication import ConnectionSecurity
from .connection import DEFAULT_ROLE, FETCH_ROLE, AuthenticationListener, BrokerConnection

__all__ = ["ConnectionManager"]

log = logging.getLogger(__name__)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class ConnectionManager:
    """Connections by (node id, role), made on demand from the broker addresses metadata gave."""

    def __init__(self, *, client_id: str = "kafkawire", request_timeout_ms: int = 30000,
                 memory_pool: MemoryPool | None = None, reconnect_backoff_ms: float = 50,
                 reconnect_backoff_max_ms: float = 1000, connection_setup_timeout_ms: float = 10000,
                 connection_setup_timeout_max_ms: float = 30000, security: ConnectionSecurity | None = None,
                 on_authentication_failure: AuthenticationListener | None = None):
        self.client_id = client_id
        self.security = security
        self.authentication_error: AuthenticationException | None = None  # once set, no more connecting
        self._on_authentication_failure = on_authentication_failure
        self.request_timeout_ms = request_timeout_ms
        self.memory_pool = memory_pool
        self.reconnect_backoff = ExponentialBackoff(reconnect_backoff_ms, reconnect_backoff_max_ms)
        self.connection_setup_timeout = ExponentialBackoff(connection_setup_timeout_ms,
                                                           max(connection_setup_timeout_ms,
                                                               connection_setup_timeout_max_ms))
        self.brokers: dict[int, tuple[str, int]] = {}
        self._connections: dict[tuple[object, str], BrokerConnection] = {}
        self._connecting: dict[tuple[object, str], asyncio.Task] = {}
        self._in_setup: dict[tuple[object, str], BrokerConnection] = {}  # connecting now (not backing off)
        # per (node, role) still failing: consecutive failed attempts, when the last failed, the backoff it
        # set and why it failed
        self._failures: dict[tuple[object, str], tuple[int, float, float, BaseException | None]] = {}
        self._setup_timeouts: dict[tuple[object, str], int] = {}  # consecutive attempts that timed out
        self._closed = False

    @classmethod
    def of(cls, config: NetworkConfig, client_id: str, *, memory_pool: MemoryPool | None = None,
           on_authentication_failure: AuthenticationListener | None = None) -> ConnectionManager:
        """A manager with a client config's timeouts and backoffs."""
        return cls(client_id=client_id, request_timeout_ms=config.request_timeout_ms,
                   reconnect_backoff_ms=config.reconnect_backoff_ms,
                   reconnect_backoff_max_ms=config.reconnect_backoff_max_ms,
                   connection_setup_timeout_ms=config.socket_connection_setup_timeout_ms,
                   connection_setup_timeout_max_ms=config.socket_connection_setup_timeout_max_ms,
                   security=ConnectionSecurity.of(config), memory_pool=memory_pool,
                   on_authentication_failure=on_authentication_failure)

    def update_brokers(self, brokers: dict[int, tuple[str, int]]) -> None:
        self.brokers = dict(brokers)

    def get_ready(self, node_id: int, role: str = DEFAULT_ROLE) -> BrokerConnection | None:
        """The connection if it is up now (no waiting)."""
        connection = self._connections.get((node_id, role))
        return connection if connection is not None and connection.connected else None

    def backoff_remaining_ms(self, node_id: object, role: str = DEFAULT_ROLE) -> float:
        failure = self._failures.get((node_id, role))
        if failure is None:
            return 0.0
        _, when, backoff, _ = failure
        return max(0.0, when + backoff - _now_ms())

    async def connection(self, node_id: int, role: str = DEFAULT_ROLE) -> BrokerConnection:
        """The (node, role) connection, connecting if needed; waits out the reconnect backoff."""
        if node_id not in self.brokers:
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        host, port = self.brokers[node_id]
        return await self._get((node_id, role), host, port, node_id, role)

    async def bootstrap(self, servers: Iterable[str]) -> BrokerConnection:
        """A connection to the first bootstrap server that answers (one attempt each, after its backoff)."""
        errors = []
        for server in servers:
            host, _, port = server.rpartition(":")
            try:
                return await self._get((("bootstrap", server), DEFAULT_ROLE), host, int(port), None, DEFAULT_ROLE)
            except AuthenticationException:
                raise  # the next server would refuse the same credentials: say so now
            except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
                errors.append(str(error) if server in str(error) else f"{server}: {error}")
        raise KafkaConnectionError("; ".join(errors or ["no bootstrap server given"]))

    def failed_attempts(self) -> int:
        """Consecutive failed attempts, summed over the brokers not connected since."""
        return sum(attempts for attempts, *_ in self._failures.values())

    # ---- why a call is still waiting --------------------------------------------------------------
    def waiting_on(self) -> str | None:
        """What is in progress now: a request not yet answered, else a connection being made."""
        for connection in [*self._connections.values(), *self._in_setup.values()]:
            name = connection.awaited()
            if name is not None:
                return (f"{connection.peer} has not answered {name} yet "
                        f"(request.timeout.ms is {connection.request_timeout_ms} ms)")
        for connection in self._in_setup.values():
            return (f"still connecting to {connection.peer} (socket.connection.setup.timeout.ms is "
                    f"{connection.connection_setup_timeout_ms:.0f} ms)")
        return None

    def last_failure(self) -> BaseException | None:
        """Why the latest failed connection attempt, among the brokers not connected since, failed."""
        failing = [(when, error) for _, when, _, error in self._failures.values() if error is not None]
        return max(failing, key=lambda failure: failure[0])[1] if failing else None

    def timeout_error(self, what: str, timeout_ms: float, cause: BaseException | None = None) -> KafkaTimeoutError:
        """``what`` ran out of its ``timeout_ms``: the error names the broker(s) and the last cause
        (``cause`` if given, else why connecting fails), or what it was still waiting for."""
        cause = cause or self.last_failure()
        reason = self.waiting_on() if cause is None else str(cause)
        error = KafkaTimeoutError(f"{what} timed out after {timeout_ms / 1000:.1f} s: "
                                  f"{reason or 'no request or connection attempt was in progress'}")
        error.__cause__ = cause
        return error

    # ---- connecting -------------------------------------------------------------------------------
    async def _get(self, key, host: str, port: int, node_id, role: str) -> BrokerConnection:
        if self._closed:
            raise KafkaConnectionError("the client is closed")
        if self.authentication_error is not None:
            raise self.authentication_error
        connection = self._connections.get(key)
        if connection is not None and connection.connected:
            return connection
        task = self._connecting.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(key, host, port, node_id, role),
                                                          name=f"connect {host}:{port}")
            task.add_done_callback(_retrieve)  # its callers may all have given up on it
            self._connecting[key] = task
        return await asyncio.shield(task)

    async def _connect(self, key, host: str, port: int, node_id, role: str) -> BrokerConnection:
        try:
            wait = self.backoff_remaining_ms(*key)
            if wait > 0:
                await asyncio.sleep(wait / 1000)
            if self.authentication_error is not None:  # another connection failed while this one waited
                raise self.authentication_error
            setup_ms = self.connection_setup_timeout.backoff_ms(self._setup_timeouts.get(key, 0))
            connection = BrokerConnection(host, port, node_id=node_id, client_id=self.client_id,
                                          request_timeout_ms=self.request_timeout_ms, role=role,
                                          memory_pool=self.memory_pool if role == FETCH_ROLE else None,
                                          security=self.security,
                                          on_authentication_failure=self._authentication_failed,
                                          connection_setup_timeout_ms=setup_ms)
            self._in_setup[key] = connection
            try:
                await connection.connect()
            except BaseException as error:
                self._failed(key, connection, error)
                raise
            finally:
                self._in_setup.pop(key, None)
            self._failures.pop(key, None)
            self._setup_timeouts.pop(key, None)
            if self._closed:
                await connection.close()
                raise KafkaConnectionError("the client is closed")
            self._connections[key] = connection
            return connection
        finally:
            self._connecting.pop(key, None)

    def _failed(self, key, connection: BrokerConnection, error: BaseException) -> None:
        attempts = self._failures.get(key, (0, 0.0, 0.0, None))[0] + 1
        self._failures[key] = (attempts, _now_ms(), self.reconnect_backoff.backoff_ms(attempts - 1),
                               error if isinstance(error, Exception) else None)
        if connection.setup_timed_out:
            self._setup_timeouts[key] = self._setup_timeouts.get(key, 0) + 1
        if isinstance(error, Exception):
            log.debug("connecting to %s failed (attempt %d): %s", connection.peer, attempts, error)

    def _authentication_failed(self, error: AuthenticationException) -> None:
        if self.authentication_error is not None:
            return
        log.error("authentication failed; this client will not connect again: %s", error)
        self.authentication_error = error
        if self._on_authentication_failure is not None:
            self._on_authentication_failure(error)

    def connections(self) -> list[BrokerConnection]:
        return list(self._connections.values())

    def throttle_metrics(self, prefix: str) -> dict[str, float]:
        """The brokers' quota throttling of this client over its open connections (KIP-219), under
        Kafka's ``<prefix>-throttle-time-max`` and the total and count behind an average."""
        connections = self._connections.values()
        return {f"{prefix}-throttle-time-max": max((c.throttle_time_max_ms for c in connections), default=0),
                f"{prefix}-throttle-time-total": sum(c.throttle_time_total_ms for c in connections),
                "throttled-responses-total": sum(c.throttled_responses for c in connections)}

    async def close_bootstrap(self) -> None:
        """Drop the bootstrap connections once the brokers are known by id."""
        for key in [k for k in self._connections if isinstance(k[0], tuple)]:
            await self._connections.pop(key).close()

    async def close(self) -> None:
        self._closed = True
        for task in list(self._connecting.values()):
            task.cancel()
        for connection in list(self._connections.values()):
            await connection.close()
        self._connections.clear()


def _retrieve(task: asyncio.Task) -> None:
    # a connect's failure reaches its callers, and last_error; none may be left to retrieve it
    if not task.cancelled():
        task.exception()

"""Connections to brokers over asyncio streams: framing, version negotiation, pipelining, timeouts,
and KIP-81 read backpressure.

``BrokerConnection`` is one TCP connection. On ``connect()`` it sends ApiVersions (retrying at the
broker's advertised version on UNSUPPORTED_VERSION, KIP-511) and from then on ``api_version(key)``
is the highest version both sides speak. ``request()`` writes a frame at once and returns a future
for its response; requests may be pipelined, and since a broker answers a connection's requests in
order, responses are matched to the oldest pending one (``kafkawire.framing.Correlator``). A request
not answered within its timeout (request.timeout.ms) closes the connection, failing every pending
request; so does a response that does not decode, or the peer going away.

KIP-81: a connection built with a ``MemoryPool`` charges the pool for the responses of requests sent
with ``charge_pool=True`` (fetches). It reads a response's 4-byte size prefix, asks the pool for
that many bytes, and only then reads the body. While the pool refuses, it reads nothing more from the
socket: the stream's buffer fills, asyncio stops reading from the transport, the kernel's receive
buffer fills and TCP's window closes on the broker (backpressure). It reads again when a release
lets the pool grant the size. Responses that are not charged (metadata, offsets, group traffic)
never wait for the pool, which is why the consumer sends fetches on a connection of their own and
coordinator traffic on another (``ConnectionManager`` roles), as Kafka's separate coordinator
connection does.

``ConnectionManager`` keeps one connection per (broker, role), connects on demand, shares a connect
in progress, and backs off after a failed attempt.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from kafkawire import __version__
from kafkawire.error_codes import ErrorCode
from kafkawire.errors import DecodeError
from kafkawire.framing import DEFAULT_MAX_FRAME, Correlator
from kafkawire.messages import ApiVersionsRequest
from kafkawire.messages import api as _api

from ..core.consumer_memory import Lease, MemoryPool
from ..errors import IncompatibleBrokerError, KafkaConnectionError, KafkaError, RequestTimedOut

__all__ = ["BrokerConnection", "ConnectionManager", "Reply", "FETCH_ROLE", "COORDINATOR_ROLE", "DEFAULT_ROLE"]

log = logging.getLogger(__name__)

DEFAULT_ROLE = "default"  # metadata, produce, list offsets
FETCH_ROLE = "fetch"  # fetches only: the connection whose reads the memory pool may pause
COORDINATOR_ROLE = "coordinator"  # group traffic, never paused
_SIZE = struct.Struct(">i")
_API_VERSIONS = 18
_STREAM_LIMIT = 1 << 16  # asyncio pauses the transport once twice this is buffered unread


@dataclass
class Reply:
    """A response whose bytes were charged to the memory pool: the body, the frame's size and the
    lease for it (the receiver releases it, or hands it on)."""

    body: object
    size: int
    lease: Lease | None


class _Pending:
    __slots__ = ("future", "charge", "timer", "api_key")

    def __init__(self, future: asyncio.Future, charge: bool, api_key: int):
        self.future = future
        self.charge = charge
        self.timer: asyncio.TimerHandle | None = None
        self.api_key = api_key


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class BrokerConnection:
    """One connection to one broker. Use from the event loop that connected it."""

    def __init__(self, host: str, port: int, *, node_id: int | None = None, client_id: str = "kafkawire",
                 request_timeout_ms: int = 30000, memory_pool: MemoryPool | None = None,
                 max_frame: int = DEFAULT_MAX_FRAME, role: str = DEFAULT_ROLE):
        self.host = host
        self.port = port
        self.node_id = node_id
        self.role = role
        self.request_timeout_ms = request_timeout_ms
        self.memory_pool = memory_pool
        self.max_frame = max_frame
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.reads_paused_total = 0  # responses whose body waited for the memory pool
        self.bytes_received = 0
        self._correlator = Correlator(client_id=client_id or "kafkawire")
        self._pending: deque[_Pending] = deque()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task | None = None
        self._pool_freed: asyncio.Event | None = None
        self._closed = False
        self._close_error: BaseException | None = None
        self._connected = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "connected" if self._connected else "new"
        return f"BrokerConnection({self.host}:{self.port}, node={self.node_id}, role={self.role}, {state})"

    @property
    def connected(self) -> bool:
        return self._connected and not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # ---- connecting ------------------------------------------------------------------------------
    async def connect(self) -> BrokerConnection:
        """Open the socket and negotiate versions (ApiVersions)."""
        if self._closed:
            raise KafkaConnectionError(f"{self!r} is closed")
        try:
            async with asyncio.timeout(self.request_timeout_ms / 1000):  # not wait_for: see waiting.wait_event
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port,
                                                                           limit=_STREAM_LIMIT)
        except (OSError, TimeoutError) as error:
            self._closed = True
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {error or 'timed out'}") from error
        if self.memory_pool is not None:
            self._pool_freed = asyncio.Event()
            self.memory_pool.add_listener(self._on_pool_release)
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop(), name=f"read {self!r}")
        try:
            await self._negotiate()
        except BaseException:
            await self.close()
            raise
        self._connected = True
        return self

    async def _negotiate(self) -> None:
        info = _api(_API_VERSIONS)
        version = info.max_version
        request = ApiVersionsRequest(client_software_name="kafkawire", client_software_version=__version__)
        for _ in range(3):
            response = await self.request(request, version)
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
                offered = [k.max_version for k in response.api_keys if k.api_key == _API_VERSIONS]
                lower = min(offered[0] if offered else 0, info.max_version)
                if lower >= version:
                    break
                version = lower
                continue
            if response.error_code:
                raise KafkaError(response.error_code, f"ApiVersions v{version} refused by {self.host}:{self.port}")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            return
        raise IncompatibleBrokerError(f"{self.host}:{self.port} accepts no ApiVersions version this client speaks")

    def api_version(self, api_key: int, min_version: int | None = None, max_version: int | None = None) -> int:
        """The highest version of ``api_key`` in [min_version, max_version] (default: every version this
        client speaks) that the broker also serves."""
        info = _api(api_key)
        low = info.min_version if min_version is None else max(min_version, info.min_version)
        high = info.max_version if max_version is None else min(max_version, info.max_version)
        served = self.api_versions.get(api_key)
        if served is not None:
            low, high = max(low, served[0]), min(high, served[1])
        if served is None or low > high:
            offered = f"v{served[0]}-v{served[1]}" if served else "no version"
            wanted_low = info.min_version if min_version is None else max(min_version, info.min_version)
            wanted_high = info.max_version if max_version is None else min(max_version, info.max_version)
            raise IncompatibleBrokerError(f"broker {self.host}:{self.port} serves {info.name} {offered}; this client "
                                          f"needs one of v{wanted_low}-v{wanted_high}")
        return high

    # ---- requests --------------------------------------------------------------------------------
    def request(self, body, version: int | None = None, *, timeout_ms: float | None = None,
                charge_pool: bool = False, expects_response: bool | None = None) -> asyncio.Future:
        """Send ``body`` now; the future resolves to the response body (a ``Reply`` with
        ``charge_pool``), to None when no response is expected (Produce with acks=0), or fails with
        KafkaConnectionError. ``version`` None means the highest negotiated."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if self._closed or self._writer is None:
            future.set_exception(self._closed_error())
            return future
        if version is None:
            version = self.api_version(body.API_KEY)
        if expects_response is None:  # Produce with acks=0 is the one request without a response
            expects_response = not (body.API_KEY == 0 and getattr(body, "acks", 1) == 0)
        data = self._correlator.request(body, version, expects_response)
        try:
            self._writer.write(data)
        except (OSError, RuntimeError) as error:
            failure = KafkaConnectionError(f"writing to {self.host}:{self.port} failed: {error}")
            future.set_exception(failure)
            self._abort(failure)  # the correlator's state no longer matters
            return future
        if not expects_response:
            future.set_result(None)
        else:
            pending = _Pending(future, charge_pool and self.memory_pool is not None, body.API_KEY)
            timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
            pending.timer = loop.call_later(timeout / 1000, self._timed_out, pending, timeout)
            self._pending.append(pending)
        # No drain(): what is written is bounded by the requests in flight (max.in.flight per
        # connection, each at most max.request.size; one fetch per broker), already accounted for.
        return future

    async def send(self, body, version: int | None = None, **options):
        """``request()`` and wait for the response."""
        return await self.request(body, version, **options)

    def _timed_out(self, pending: _Pending, timeout: float) -> None:
        pending.timer = None
        name = _api(pending.api_key).name
        log.warning("%s request to node %s timed out after %.0f ms; closing %r", name, self.node_id, timeout, self)
        self._abort(RequestTimedOut(f"{name} request to {self.host}:{self.port} (node {self.node_id}) got no response "
                                    f"within {timeout:.0f} ms; connection closed"))

    # ---- responses -------------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        reader = self._reader
        assert reader is not None  # (started once connected)
        try:
            while True:
                prefix = await reader.readexactly(4)
                size = _SIZE.unpack(prefix)[0]
                if size < 4 or size > self.max_frame:
                    raise DecodeError(f"response frame size {size} outside 4..{self.max_frame}", 0, ["frame"])
                if not self._pending:
                    raise DecodeError("a response arrived with no request pending", 0, ["ResponseHeader"])
                pending = self._pending[0]
                if pending.timer is not None:  # it has arrived: waiting for memory is not a timeout
                    pending.timer.cancel()
                    pending.timer = None
                lease = await self._reserve(size) if pending.charge else None
                try:
                    frame = await reader.readexactly(size)
                    self.bytes_received += size + 4
                    self._pending.popleft()
                    _, _, body = self._correlator.response(frame)
                except BaseException:
                    if lease is not None:
                        lease.release()
                    raise
                del frame
                if pending.future.done():  # the caller gave up on it
                    if lease is not None:
                        lease.release()
                    continue
                pending.future.set_result(Reply(body, size, lease) if pending.charge else body)
        except asyncio.CancelledError:
            raise
        except asyncio.IncompleteReadError:
            self._abort(KafkaConnectionError(f"{self.host}:{self.port} (node {self.node_id}) closed the connection"))
        except (OSError, ConnectionError) as error:
            self._abort(KafkaConnectionError(f"connection to {self.host}:{self.port} failed: {error}"))
        except DecodeError as error:
            self._abort(KafkaConnectionError(f"bad response from {self.host}:{self.port} (node {self.node_id}): "
                                             f"{error}; connection closed"))

    async def _reserve(self, size: int) -> Lease:
        """Memory for a response body; until the pool grants it, nothing more is read from the socket."""
        pool, freed = self.memory_pool, self._pool_freed
        assert pool is not None and freed is not None  # (charged requests need a pool)
        lease = pool.try_allocate(size, waiter=self)
        if lease is not None:
            return lease
        self.reads_paused_total += 1
        while lease is None:
            freed.clear()
            await freed.wait()
            lease = pool.try_allocate(size, waiter=self)
        return lease

    def _on_pool_release(self, _pool: MemoryPool) -> None:
        if self._pool_freed is not None:
            self._pool_freed.set()

    # ---- closing ---------------------------------------------------------------------------------
    def _closed_error(self) -> KafkaConnectionError:
        if self._close_error is not None:
            return KafkaConnectionError(str(self._close_error))
        return KafkaConnectionError(f"connection to {self.host}:{self.port} (node {self.node_id}) is closed")

    def _abort(self, error: BaseException) -> None:
        """Close at once and fail every pending request with ``error``."""
        if self._closed and not self._pending:
            return
        self._closed = True
        if self._close_error is None:
            self._close_error = error
        while self._pending:
            pending = self._pending.popleft()
            if pending.timer is not None:
                pending.timer.cancel()
            if not pending.future.done():
                pending.future.set_exception(error if isinstance(error, KafkaConnectionError)
                                             else KafkaConnectionError(str(error)))
        if self.memory_pool is not None:
            self.memory_pool.cancel(self)
            with contextlib.suppress(ValueError):
                self.memory_pool.remove_listener(self._on_pool_release)
            if self._pool_freed is not None:
                self._pool_freed.set()
        if self._writer is not None:
            self._writer.transport.abort()
        task = self._read_task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
        log.debug("closed %r: %s", self, error)

    async def close(self) -> None:
        """Close the connection; pending requests fail with KafkaConnectionError."""
        self._abort(KafkaConnectionError(f"connection to {self.host}:{self.port} (node {self.node_id}) was closed"))
        if self._read_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._read_task


class ConnectionManager:
    """Connections by (node id, role), made on demand from the broker addresses metadata gave."""

    def __init__(self, *, client_id: str = "kafkawire", request_timeout_ms: int = 30000,
                 memory_pool: MemoryPool | None = None, reconnect_backoff_ms: float = 50,
                 reconnect_backoff_max_ms: float = 1000):
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.memory_pool = memory_pool
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self.brokers: dict[int, tuple[str, int]] = {}
        self._connections: dict[tuple[object, str], BrokerConnection] = {}
        self._connecting: dict[tuple[object, str], asyncio.Task] = {}
        self._failures: dict[tuple[object, str], tuple[int, float]] = {}  # attempts, when the last one failed
        self._closed = False

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
        attempts, when = failure
        backoff = min(self.reconnect_backoff_ms * (2 ** (attempts - 1)), self.reconnect_backoff_max_ms)
        return max(0.0, when + backoff - _now_ms())

    async def connection(self, node_id: int, role: str = DEFAULT_ROLE) -> BrokerConnection:
        """The (node, role) connection, connecting if needed; waits out the reconnect backoff."""
        if node_id not in self.brokers:
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        host, port = self.brokers[node_id]
        return await self._get((node_id, role), host, port, node_id, role)

    async def bootstrap(self, servers: Iterable[str]) -> BrokerConnection:
        """A connection to the first bootstrap server that answers."""
        errors = []
        for server in servers:
            host, _, port = server.rpartition(":")
            try:
                return await self._get((("bootstrap", server), DEFAULT_ROLE), host, int(port), None, DEFAULT_ROLE)
            except (KafkaConnectionError, IncompatibleBrokerError, KafkaError) as error:
                errors.append(f"{server}: {error}")
        raise KafkaConnectionError("no bootstrap server could be reached: " + "; ".join(errors or ["none given"]))

    async def _get(self, key, host: str, port: int, node_id, role: str) -> BrokerConnection:
        if self._closed:
            raise KafkaConnectionError("the client is closed")
        connection = self._connections.get(key)
        if connection is not None and connection.connected:
            return connection
        task = self._connecting.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(key, host, port, node_id, role))
            self._connecting[key] = task
        return await asyncio.shield(task)

    async def _connect(self, key, host: str, port: int, node_id, role: str) -> BrokerConnection:
        try:
            wait = self.backoff_remaining_ms(*key)
            if wait > 0:
                await asyncio.sleep(wait / 1000)
            connection = BrokerConnection(host, port, node_id=node_id, client_id=self.client_id,
                                          request_timeout_ms=self.request_timeout_ms, role=role,
                                          memory_pool=self.memory_pool if role == FETCH_ROLE else None)
            try:
                await connection.connect()
            except BaseException:
                attempts = self._failures.get(key, (0, 0.0))[0] + 1
                self._failures[key] = (attempts, _now_ms())
                raise
            self._failures.pop(key, None)
            if self._closed:
                await connection.close()
                raise KafkaConnectionError("the client is closed")
            self._connections[key] = connection
            return connection
        finally:
            self._connecting.pop(key, None)

    def connections(self) -> list[BrokerConnection]:
        return list(self._connections.values())

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

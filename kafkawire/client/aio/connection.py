"""Connections to brokers over asyncio transports: framing, version negotiation, pipelining, timeouts,
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
socket: its read-ahead buffer fills, it stops reading from the transport (``frame_stream``), the
kernel's receive buffer fills and TCP's window closes on the broker (backpressure). A body is received
straight into the buffer the response is decoded from. It reads again when a release
lets the pool grant the size. Responses that are not charged (metadata, offsets, group traffic)
never wait for the pool, which is why the consumer sends fetches on a connection of their own and
coordinator traffic on another (``ConnectionManager`` roles), as Kafka's separate coordinator
connection does.

Security (``authentication``): with a ``ConnectionSecurity`` the socket is wrapped in TLS, and on a
SASL protocol the connection authenticates right after ApiVersions, before anyone else may use it. When
the broker grants the session a lifetime, the connection re-authenticates at a random point between
85% and 95% of it (KIP-368) on the same socket: requests made meanwhile are held and written, in
order, once the exchange is done; those already written are answered first, as the broker answers in
order.

Connections are made, shared and retried by ``connection_manager.ConnectionManager``.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kafkawire import __version__
from kafkawire.error_codes import ErrorCode
from kafkawire.errors import DecodeError
from kafkawire.framing import DEFAULT_MAX_FRAME, Correlator
from kafkawire.messages import ApiKey, ApiVersionsRequest
from kafkawire.messages import api as _api

from ..core.consumer.memory import Lease, MemoryPool
from ..core.sasl_client import reauthentication_delay_ms
from ..errors import AuthenticationException, IncompatibleBrokerError, KafkaConnectionError, KafkaError, RequestTimedOut
from .authentication import ConnectionSecurity
from .frame_stream import FrameStream
from .tls import closed_early_hint, handshake_failure, is_refusal

__all__ = ["BrokerConnection", "Reply", "AuthenticationListener", "FETCH_ROLE", "COORDINATOR_ROLE", "DEFAULT_ROLE"]

log = logging.getLogger(__name__)

DEFAULT_ROLE = "default"  # metadata, produce, list offsets
FETCH_ROLE = "fetch"  # fetches only: the connection whose reads the memory pool may pause
COORDINATOR_ROLE = "coordinator"  # group traffic, never paused
_SIZE = struct.Struct(">i")
_READ_AHEAD = 1 << 17  # bytes buffered past the response being read before the socket is left unread

AuthenticationListener = Callable[[AuthenticationException], None]


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


class BrokerConnection:
    """One connection to one broker. Use from the event loop that connected it."""

    def __init__(self, host: str, port: int, *, node_id: int | None = None, client_id: str = "kafkawire",
                 request_timeout_ms: int = 30000, memory_pool: MemoryPool | None = None,
                 max_frame: int = DEFAULT_MAX_FRAME, role: str = DEFAULT_ROLE,
                 security: ConnectionSecurity | None = None,
                 on_authentication_failure: AuthenticationListener | None = None,
                 connection_setup_timeout_ms: float = 10000):
        self.host = host
        self.port = port
        self.node_id = node_id
        self.role = role
        self.request_timeout_ms = request_timeout_ms
        self.connection_setup_timeout_ms = connection_setup_timeout_ms
        self.setup_timed_out = False  # connect() gave up on the socket within the setup timeout
        self.memory_pool = memory_pool
        self.max_frame = max_frame
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.finalized_features: dict[str, int] = {}  # feature name -> finalized level (ApiVersions v3+)
        self.reads_paused_total = 0  # responses whose body waited for the memory pool
        self.bytes_received = 0
        self._correlator = Correlator(client_id=client_id or "kafkawire")
        self._pending: deque[_Pending] = deque()
        self._stream: FrameStream | None = None
        self._transport: asyncio.Transport | None = None
        self._read_task: asyncio.Task | None = None
        self._pool_freed: asyncio.Event | None = None
        self._closed = False
        self._close_error: BaseException | None = None
        self._connected = False
        self.security = security
        self._on_authentication_failure = on_authentication_failure
        self.session_lifetime_ms = 0  # the last SASL session's, as the broker granted it (0: unlimited)
        self.reauthentications = 0
        # while re-authenticating or throttled: requests to write once that is over
        self._held: deque[tuple] | None = None
        # a quota's throttle (KIP-219): the broker's throttle_time_ms; nothing is sent before it passes
        self._throttle_timer: asyncio.TimerHandle | None = None
        self.throttled_responses = 0  # responses that carried a throttle time
        self.throttle_time_total_ms = 0
        self.throttle_time_max_ms = 0
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task | None = None

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
        return len(self._pending) + len(self._held or ())

    @property
    def peer(self) -> str:
        """host:port, and the node id once metadata gave one (a bootstrap server has none)."""
        return f"{self.host}:{self.port}" + (f" (node {self.node_id})" if self.node_id is not None else "")

    def awaited(self) -> str | None:
        """The name of the oldest request still waiting for its answer, if any."""
        return _api(self._pending[0].api_key).name if self._pending else None

    # ---- connecting ------------------------------------------------------------------------------
    async def connect(self) -> BrokerConnection:
        """Open the socket (with TLS, its handshake), negotiate versions (ApiVersions) and authenticate
        (SASL). Raises KafkaConnectionError, or its AuthenticationException when authentication failed."""
        if self._closed:
            raise KafkaConnectionError(f"{self!r} is closed")
        context = self.security.ssl_context if self.security is not None else None
        try:
            # socket.connection.setup.timeout.ms bounds the socket and its TLS handshake; the requests
            # that follow (ApiVersions, SASL) have request.timeout.ms each, as in Kafka
            async with asyncio.timeout(self.connection_setup_timeout_ms / 1000):  # (not wait_for: see waiting)
                _, stream = await asyncio.get_running_loop().create_connection(
                    lambda: FrameStream(_READ_AHEAD), self.host, self.port, ssl=context)
                self._stream, self._transport = stream, stream.transport
        except ssl.SSLError as error:
            self._closed = True
            if not is_refusal(error):
                raise KafkaConnectionError(f"TLS handshake with {self.host}:{self.port} was cut off: {error}"
                                           f"{self._closed_early_hint(during_handshake=True)}") from error
            failure = handshake_failure(self.host, self.port, error)
            self._authentication_failed(failure)
            raise failure from error
        except (OSError, TimeoutError) as error:
            self._closed = True
            if context is not None and isinstance(error, (ConnectionResetError, ConnectionAbortedError)):
                raise KafkaConnectionError(f"TLS handshake with {self.host}:{self.port} was cut off: "
                                           f"{str(error) or type(error).__name__}"
                                           f"{self._closed_early_hint(during_handshake=True)}") from error
            if isinstance(error, TimeoutError):
                self.setup_timed_out = True
                raise KafkaConnectionError(f"could not connect to {self.host}:{self.port} within socket.connection."
                                           f"setup.timeout.ms ({self.connection_setup_timeout_ms:.0f} ms)") from error
            raise KafkaConnectionError(f"could not connect to {self.host}:{self.port} "
                                       f"({type(error).__name__}: {error})") from error
        if self.memory_pool is not None:
            self._pool_freed = asyncio.Event()
            self.memory_pool.add_listener(self._on_pool_release)
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop(), name=f"read {self!r}")
        try:
            await self._negotiate()
            if self.security is not None and self.security.mechanism is not None:
                lifetime = await self.security.authenticate(self)
                self._schedule_reauthentication(lifetime)
        except AuthenticationException as error:
            self._authentication_failed(error)
            await self.close()
            raise
        except BaseException:
            await self.close()
            raise
        self._connected = True
        return self

    async def _negotiate(self) -> None:
        info = _api(ApiKey.API_VERSIONS)
        version = info.max_version
        request = ApiVersionsRequest(client_software_name="kafkawire", client_software_version=__version__)
        for _ in range(3):
            response = await self.request(request, version)
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
                offered = [k.max_version for k in response.api_keys if k.api_key == ApiKey.API_VERSIONS]
                lower = min(offered[0] if offered else 0, info.max_version)
                if lower >= version:
                    break
                version = lower
                continue
            if response.error_code:
                raise KafkaError(response.error_code, f"ApiVersions v{version} refused by {self.host}:{self.port}")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            # the cluster's finalized feature levels (v3+), e.g. transaction.version (KIP-890)
            self.finalized_features = {f.name: f.max_version_level for f in response.finalized_features}
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
                charge_pool: bool = False, expects_response: bool | None = None,
                authentication: bool = False) -> asyncio.Future:
        """Send ``body`` now (while re-authenticating: once that is done, unless it is one of the
        exchange's own, ``authentication``); the future resolves to the response body (a ``Reply`` with
        ``charge_pool``), to None when no response is expected (Produce with acks=0), or fails with
        KafkaConnectionError. ``version`` None means the highest negotiated."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if self._closed or self._transport is None:
            future.set_exception(self._closed_error())
            return future
        if version is None:
            version = self.api_version(body.API_KEY)
        if expects_response is None:  # Produce with acks=0 is the one request without a response
            expects_response = not (body.API_KEY == ApiKey.PRODUCE and getattr(body, "acks", 1) == 0)
        if self._held is not None and not authentication:
            self._held.append((future, body, version, timeout_ms, charge_pool, expects_response))
        else:
            self._write(future, body, version, timeout_ms, charge_pool, expects_response)
        return future

    def _write(self, future: asyncio.Future, body, version: int, timeout_ms: float | None, charge_pool: bool,
               expects_response: bool) -> None:
        assert self._transport is not None  # (not closed)
        data = self._correlator.request(body, version, expects_response)
        try:
            self._transport.write(data)
        except (OSError, RuntimeError) as error:
            failure = KafkaConnectionError(f"writing to {self.host}:{self.port} failed: {error}")
            future.set_exception(failure)
            self._abort(failure)  # the correlator's state no longer matters
            return
        if not expects_response:
            future.set_result(None)
        else:
            pending = _Pending(future, charge_pool and self.memory_pool is not None, body.API_KEY)
            timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
            pending.timer = asyncio.get_running_loop().call_later(timeout / 1000, self._timed_out, pending, timeout)
            self._pending.append(pending)
        # No drain(): what is written is bounded by the requests in flight (max.in.flight per
        # connection, each at most max.request.size; one fetch per broker), already accounted for.

    async def send(self, body, version: int | None = None, **options):
        """``request()`` and wait for the response."""
        return await self.request(body, version, **options)

    def _timed_out(self, pending: _Pending, timeout: float) -> None:
        pending.timer = None
        name = _api(pending.api_key).name
        log.warning("%s request to %s timed out after %.0f ms; closing %r", name, self.peer, timeout, self)
        limit = "request.timeout.ms " if timeout == self.request_timeout_ms else ""
        self._abort(RequestTimedOut(f"{self.peer} did not answer {name} within {limit}({timeout:.0f} ms); "
                                    f"connection closed"))

    # ---- responses -------------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        stream = self._stream
        assert stream is not None  # (started once connected)
        try:
            while True:
                prefix = await stream.read_exactly(4)
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
                    frame = await stream.read_exactly(size)
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
                throttle_ms = getattr(body, "throttle_time_ms", 0)
                if throttle_ms and throttle_ms > 0:
                    self._throttled(throttle_ms)
                pending.future.set_result(Reply(body, size, lease) if pending.charge else body)
        except asyncio.CancelledError:
            # the loop is shutting down (asyncio.run's end, a client dropped without close()): let the
            # socket go now, not as an "unclosed transport" when it is collected
            self._abort(KafkaConnectionError(f"connection to {self.peer} was cancelled"))
            raise
        except asyncio.IncompleteReadError:
            hint = self._closed_early_hint() if self.bytes_received == 0 else ""
            self._abort(KafkaConnectionError(f"{self.host}:{self.port} (node {self.node_id}) closed the connection"
                                             f"{hint}"))
        except ssl.SSLError as error:
            if self._connected or not is_refusal(error):
                self._abort(KafkaConnectionError(f"TLS connection to {self.host}:{self.port} failed: {error}"))
            else:  # TLS 1.3: the broker refuses a client's certificate after the client's handshake is done
                self._abort(handshake_failure(self.host, self.port, error))
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

    # ---- re-authentication (KIP-368) --------------------------------------------------------------
    def _schedule_reauthentication(self, lifetime_ms: int) -> None:
        self.session_lifetime_ms = lifetime_ms
        if lifetime_ms > 0 and not self._closed:
            delay = reauthentication_delay_ms(lifetime_ms)
            self._reauth_timer = asyncio.get_running_loop().call_later(delay / 1000, self._begin_reauthentication)

    def _throttled(self, throttle_ms: int) -> None:
        """A response's throttle time: requests wait (held) until it has passed, as Kafka's NetworkClient
        does not send to a throttled broker (the broker reads nothing from the connection meanwhile)."""
        self.throttled_responses += 1
        self.throttle_time_total_ms += throttle_ms
        self.throttle_time_max_ms = max(self.throttle_time_max_ms, throttle_ms)
        if self._held is None:
            self._held = deque()
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if self._throttle_timer is None or self._throttle_timer.when() < until:
            if self._throttle_timer is not None:
                self._throttle_timer.cancel()
            self._throttle_timer = loop.call_at(until, self._throttle_passed)

    def _throttle_passed(self) -> None:
        self._throttle_timer = None
        if self._reauth_task is None or self._reauth_task.done():  # (else re-authentication's end releases them)
            self._write_held()

    def _write_held(self) -> None:
        held, self._held = self._held or deque(), None
        while held:  # in the order they were made
            future, *request = held.popleft()
            if future.done():  # the caller gave up on it
                continue
            if self._closed:
                future.set_exception(self._closed_error())
            else:
                self._write(future, *request)

    def _begin_reauthentication(self) -> None:
        self._reauth_timer = None
        if self._closed:
            return
        if self._held is None:  # (it may hold requests of a throttle already)
            self._held = deque()
        self._reauth_task = asyncio.get_running_loop().create_task(self._reauthenticate(),
                                                                   name=f"re-authenticate {self!r}")

    async def _reauthenticate(self) -> None:
        assert self.security is not None  # (scheduled after an authentication)
        try:
            lifetime = await self.security.authenticate(self)
        except AuthenticationException as error:
            log.error("re-authentication of %r failed: %s", self, error)
            self._abort(error)
            self._authentication_failed(error)
            return
        except (KafkaConnectionError, IncompatibleBrokerError) as error:
            self._abort(error)
            return
        except Exception as error:  # a bug must not leave the held requests waiting forever
            log.exception("re-authentication of %r failed", self)
            self._abort(KafkaConnectionError(f"re-authentication with {self.host}:{self.port} failed: {error!r}"))
            return
        self.reauthentications += 1
        if self._throttle_timer is None:  # behind the exchange; a throttle's timer releases them otherwise
            self._write_held()
        self._schedule_reauthentication(lifetime)

    def _authentication_failed(self, error: AuthenticationException) -> None:
        if self._on_authentication_failure is not None:
            self._on_authentication_failure(error)

    def _closed_early_hint(self, during_handshake: bool = False) -> str:
        if self.security is None or self.security.ssl_context is None or self._connected:
            return ""
        return closed_early_hint(self.security.client_certificate, during_handshake)

    # ---- closing ---------------------------------------------------------------------------------
    def _closed_error(self) -> KafkaConnectionError:
        error = self._close_error
        if isinstance(error, AuthenticationException):
            return error
        if error is not None:
            return KafkaConnectionError(str(error))
        return KafkaConnectionError(f"connection to {self.host}:{self.port} (node {self.node_id}) is closed")

    def _abort(self, error: BaseException) -> None:
        """Close at once and fail every pending request with ``error``."""
        if self._closed and not self._pending and not self._held:
            return
        self._closed = True
        if self._close_error is None:
            self._close_error = error
        failure = error if isinstance(error, KafkaConnectionError) else KafkaConnectionError(str(error))
        while self._pending:
            pending = self._pending.popleft()
            if pending.timer is not None:
                pending.timer.cancel()
            if not pending.future.done():
                pending.future.set_exception(failure)
        while self._held:
            future = self._held.popleft()[0]
            if not future.done():
                future.set_exception(failure)
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
            self._throttle_timer = None
        if self.memory_pool is not None:
            self.memory_pool.cancel(self)
            with contextlib.suppress(ValueError):
                self.memory_pool.remove_listener(self._on_pool_release)
            if self._pool_freed is not None:
                self._pool_freed.set()
        if self._transport is not None:
            self._transport.abort()
        for task in (self._read_task, self._reauth_task):
            if task is not None and task is not asyncio.current_task() and not task.done():
                task.cancel()
        log.debug("closed %r: %s", self, error)

    async def close(self) -> None:
        """Close the connection; pending requests fail with KafkaConnectionError."""
        self._abort(KafkaConnectionError(f"connection to {self.host}:{self.port} (node {self.node_id}) was closed"))
        if self._read_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._read_task

"""One client connection on one listener: reading frames within the request-memory pool, TLS and SASL
authentication where the listener asks for them, one request at a time (as Kafka mutes a channel until
its response is sent, so responses keep request order), and writing the responses.

A request the broker cannot read (an unknown API, a version it does not serve, a malformed body, an
oversized frame) closes the connection, as Kafka does; the one exception is an ApiVersions request
of a version too new, answered with a v0 UNSUPPORTED_VERSION response naming the versions served
(KIP-511) so the client can retry. A handler that fails answers with UNKNOWN_SERVER_ERROR
(``error_responses``). On a SASL listener only ApiVersions, SaslHandshake and SaslAuthenticate are
served until the client has authenticated (``security.authenticator``).
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from ... import messages as m
from ...error_codes import ErrorCode
from ...errors import DecodeError
from ...messages import ApiKey
from ...framing import FrameTooLarge, encode_response_parts, peek_request, read_request
from ..apis.controller_listener import CONTROLLER_APIS
from ..apis.state import CLOSE_CONNECTION, RequestContext
from ..encoded_response import EncodedResponse
from ..dispatch.error_responses import error_response
from ..loop_slices import LARGE_FRAME, take_turn
from .faults import DROP
from .listeners import Listener
from .receiving import FrameReceiver
from ..metrics import log_request, top_level_error
from ..security.listener_security import ListenerSecurity
from ..security.tls import subject_dn
from .sending import send_parts
from ..storage.file_records import FileRecords

if TYPE_CHECKING:
    from ...codec.base import Bytes
    from ..quotas import ClientQuotas
    from ..security.authenticator import Authenticator
    from ..server import Broker

__all__ = ["Connection"]

log = logging.getLogger("kafkawire.broker.server")

_SIZE = struct.Struct(">i")
Response = Sequence["Bytes | FileRecords"] | None | Literal[False]


class Connection:
    """A connection's state and its loop (``run``)."""

    def __init__(self, broker: Broker, listener: Listener, security: ListenerSecurity,
                 receiver: FrameReceiver, writer: asyncio.StreamWriter, now: float):
        self.broker = broker
        self.listener = listener
        self.security = security
        self.receiver = receiver
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = peer
        self.host = peer[0] if peer else ""
        self.last_active = now
        self.busy = False  # a request of this connection is being handled
        self.closing = False  # closed by the broker (idle, or its close) while it may be waiting for request memory
        self.draining = False  # the broker is shutting down: answer what was received, then close
        self.auth: Authenticator | None = None
        if listener.sasl:  # (the SASL mechanisms load with a SASL listener's first connection)
            from ..security.authenticator import Authenticator
            self.auth = Authenticator(security, broker.scram, broker.tokens)
        self.principal = "User:ANONYMOUS"
        self.software = ("", "")  # ApiVersions v3+'s client software name and version (KIP-511)
        self.muted_until = 0.0  # a client quota's throttle: no request is read before (loop time)
        self._throttle_over: asyncio.Event | None = None  # set to end a throttle early (the broker closes)
        if listener.tls:
            certificate = writer.get_extra_info("peercert")
            self.principal = security.principal_from_certificate(subject_dn(certificate) if certificate else None)
        else:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                receiver.read_directly(sock.fileno())

    async def run(self) -> None:
        broker, receiver, writer = self.broker, self.receiver, self.writer
        loop = asyncio.get_running_loop()
        memory = broker.memory
        taken = 0  # request memory taken for the frame at the head of the buffer (whole or partial)
        tap = broker.tap
        client_closed = aborted = False  # how the connection ended, for the tap
        if tap is not None:
            conn = tap.connection_opened(self.peer, writer.get_extra_info("sockname"), time.time_ns())
        try:
            while True:
                frame = receiver.frame()
                if frame is None:
                    pending = receiver.pending_size
                    if pending is not None and not taken:  # a request started: take its size from the pool
                        while memory.must_wait(pending + 4):
                            await memory.wait()
                            if self.closing:
                                return
                        taken = pending + 4
                        memory.take(taken)
                    if self.draining:
                        return
                    if not await receiver.receive():  # the client closed, unless the broker's shutdown did
                        client_closed = broker.serving
                        return
                    self.last_active = loop.time()
                    continue
                if not taken:  # it came whole in one read
                    taken = len(frame) + 4
                    memory.take(taken)
                if tap is not None:
                    tap.client_sent(conn, self._tapped_request(frame), time.time_ns())
                self.busy = True
                try:
                    response = await self.respond(frame)
                finally:
                    self.busy = False
                    memory.give_back(taken)  # answered: its bytes are free (Kafka frees them then)
                    taken = 0
                if response is False:
                    return  # closing: the request could not be read, or Kafka closes here
                if response is None:
                    if self.muted_until:  # throttled with no answer due (acks=0): silence all the same
                        await self._sit_out_throttle(loop)
                    if receiver.buffered():
                        await asyncio.sleep(0)
                    continue
                if tap is not None:  # the tap needs the bytes themselves: send them as bytes too
                    response = [b"".join(p.read() if isinstance(p, FileRecords) else p for p in response)]
                    tap.broker_sent(conn, self._tapped_response(response[0]), time.time_ns())
                if broker.faults.armed:  # injected latency or throttle
                    await broker.faults.delay(sum(len(part) for part in response))
                await send_parts(writer, response, direct=not self.listener.tls)
                if self.muted_until:  # throttled (KIP-219): the answer is sent, then no request is read
                    await self._sit_out_throttle(loop)
                self.last_active = loop.time()
                if self._close_after_response:
                    return
                if receiver.buffered():  # pipelined requests: let other connections in between them
                    await asyncio.sleep(0)
        except FrameTooLarge as error:
            log.warning("closing connection from %s: %s", self.host, error)
        except (ConnectionError, asyncio.IncompleteReadError):
            client_closed = aborted = True
        finally:
            memory.give_back(taken)
            writer.close()
            if tap is not None:
                tap.connection_closed(conn, time.time_ns(), aborted=aborted, by_client=client_closed)

    async def _sit_out_throttle(self, loop: asyncio.AbstractEventLoop) -> None:
        delay = self.muted_until - loop.time()
        self.muted_until = 0.0
        if delay <= 0 or self.closing or self.draining:
            return
        self._throttle_over = asyncio.Event()
        try:
            await asyncio.wait_for(self._throttle_over.wait(), delay)
        except TimeoutError:
            pass
        finally:
            self._throttle_over = None

    def end_throttle(self) -> None:
        """Stop sitting out a throttle: the broker is closing the connection (as Kafka closes a muted
        channel at once), so a stop does not wait out throttles of up to a quota window."""
        if self._throttle_over is not None:
            self._throttle_over.set()

    def close(self) -> None:
        """Closed by the broker (idle, or its own close): the read ends, and so do a throttle's sit-out
        and a wait for request memory (``closing``)."""
        self.closing = True
        self.end_throttle()
        self.writer.close()

    _close_after_response = False  # a failed authentication: its answer is sent, then the connection closes

    # ---- one request ----------------------------------------------------------------------------
    async def respond(self, frame: bytearray) -> Response:
        """The response frame for one request frame, as pieces; None for no response; False to close."""
        auth = self.auth
        if auth is not None and auth.raw_tokens:  # after a v0 SaslHandshake the token comes bare
            return await self._raw_token(frame)
        try:
            api_key, version, correlation_id = peek_request(frame)
        except DecodeError as error:
            log.warning("closing connection from %s: %s", self.host, error)
            return False
        if auth is not None and not auth.may_serve(api_key):
            log.info("closing connection from %s: API key %d %s", self.host, api_key,
                     "after its session expired" if auth.complete else "before authentication")
            return False
        handlers = self.broker.handlers
        served = handlers.versions.get(api_key) if handlers is not None else None
        if self.listener.controller and api_key not in CONTROLLER_APIS:  # not enabled on a controller listener
            served = None
        if api_key == ApiKey.API_VERSIONS and served is not None and version > served[1]:
            body = m.ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
                m.ApiVersionsResponse.ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=served[0], max_version=served[1])])
            return encode_response_parts(ApiKey.API_VERSIONS, 0, correlation_id, body)
        if served is None or not served[0] <= version <= served[1]:
            log.warning("closing connection from %s: API key %d version %d is not served", self.host, api_key, version)
            return False
        if len(frame) >= LARGE_FRAME:  # its decoding takes its turn: many such frames do not decode in a row
            await take_turn()
        try:
            header, request, trailing = read_request(frame)
        except DecodeError as error:
            log.warning("closing connection from %s: bad request: %s", self.host, error)
            return False
        if trailing:  # served, as Kafka serves them (librdkafka's all-topics Metadata has 3 extra bytes)
            log.debug("%d bytes after the body of API key %d version %d from %s", trailing, api_key, version, self.host)
        if api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            response = await self._sasl(api_key, request, version)
        else:
            if api_key == ApiKey.API_VERSIONS and version >= 3:  # (no class lookup per request)
                versions = cast("m.ApiVersionsRequest", request)
                self.software = (versions.client_software_name, versions.client_software_version)
            context = RequestContext(self.listener, self.broker.bound_port(self.listener), self.principal,
                                     self.host, header.client_id or "", *self.software,
                                     token_authenticated=self.auth is not None and self.auth.token_authenticated)
            started = time.perf_counter()
            faults = self.broker.faults
            fault = faults.take(api_key) if faults.armed else None
            if fault is None:
                quotas = self.broker.handlers.quotas if self.broker.handlers is not None else None
                if quotas is not None and quotas.enabled:  # (what the request costs only counts under a quota)
                    if api_key == ApiKey.FETCH and version >= 3:  # (MaxBytes came with v3)
                        quotas.cap_fetch(cast("m.FetchRequest", request), context.user, context.client_id)
                    cpu = time.thread_time()
                    response = await self._handle(api_key, request, version, context)
                    response = self._throttle(quotas, api_key, request, response, context, len(frame),
                                              time.thread_time() - cpu)
                else:
                    response = await self._handle(api_key, request, version, context)
            elif fault == DROP:
                return None  # read, never answered: the client's request times out
            else:
                response = self._injected(api_key, request, version, int(fault))
            self._observe(api_key, version, context, time.perf_counter() - started, response)
            if response is False:
                return False
        if response is None:
            return None
        if response is CLOSE_CONNECTION:
            return False
        return encode_response_parts(api_key, version, correlation_id, response)

    def _throttle(self, quotas: ClientQuotas, api_key: int, request: Any, response: Any, context: RequestContext,
                  size: int, cpu_seconds: float) -> Any:
        """The response with its throttle time, the largest a quota gives (KIP-219); the connection then
        reads nothing from the client until that time has passed (``run``)."""
        if response is False or response is CLOSE_CONNECTION:
            return response
        response, throttle = quotas.throttle_response(api_key, request, response, context.user, context.client_id,
                                                      size, cpu_seconds)
        throttle = max(throttle, context.throttle_ms)
        if throttle:
            self.muted_until = asyncio.get_running_loop().time() + throttle / 1000
            body = response.head if isinstance(response, EncodedResponse) else response
            if body is not None and hasattr(body, "throttle_time_ms"):
                body.throttle_time_ms = max(body.throttle_time_ms, throttle)
        return response

    def _observe(self, api_key: int, version: int, context: RequestContext, seconds: float, response: Any) -> None:
        """The request's metrics and its request-log line, when the broker has them on."""
        broker = self.broker
        if broker.metrics is None and not broker.config.request_log:
            return
        error = top_level_error(response) if response not in (None, False, CLOSE_CONNECTION) else None
        if broker.metrics is not None:
            broker.metrics.request_done(api_key, version, seconds, error)
        if broker.config.request_log:
            log_request(api_key, version, context.client_id, self.host, seconds, error)

    def _injected(self, api_key: int, request: Any, version: int, code: int) -> Any:
        """The answer to a request failed on command (``network.faults``): the API's error response."""
        response = error_response(api_key, request, version, code)
        if response is None or (isinstance(request, m.ProduceRequest) and request.acks == 0):
            return False  # no error response (or acks=0): Kafka closes the connection
        return response

    async def _handle(self, api_key: int, request: Any, version: int, context: RequestContext) -> Any:
        try:
            if self.broker.handlers is None:  # (set by start, before any connection is served)
                raise RuntimeError("the broker is not started")
            return await self.broker.handlers.handle(api_key, request, version, context)
        except Exception as error:
            log.exception("handling API key %d version %d from %s failed", api_key, version, self.host)
            response = error_response(api_key, request, version, ErrorCode.UNKNOWN_SERVER_ERROR, str(error))
            if response is None or (isinstance(request, m.ProduceRequest) and request.acks == 0):
                return False  # nothing to answer with: Kafka closes the connection
            return response

    # ---- SASL -----------------------------------------------------------------------------------
    async def _sasl(self, api_key: int, request: Any, version: int) -> Any:
        auth = self.auth
        if auth is None:  # SASL on a listener without it: Kafka's KafkaApis answers ILLEGAL_SASL_STATE
            if api_key == ApiKey.SASL_HANDSHAKE:
                return m.SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
            return m.SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                              error_message="SASL is not enabled on this listener", auth_bytes=b"")
        if api_key == ApiKey.SASL_HANDSHAKE:
            error, mechanisms = auth.handshake(request.mechanism, version)
            if error:
                self._close_after_response = True
            return m.SaslHandshakeResponse(error_code=error, mechanisms=list(mechanisms))
        step = await auth.authenticate(request.auth_bytes, version)
        if step.error:
            self._close_after_response = True
            log.info("authentication of %s on %s failed: %s", self.host, self.listener.name, step.message)
        else:
            self.principal = auth.principal or self.principal
        return m.SaslAuthenticateResponse(error_code=step.error, error_message=step.message, auth_bytes=step.token,
                                          session_lifetime_ms=step.session_lifetime_ms)

    async def _raw_token(self, frame: bytearray) -> Response:
        assert self.auth is not None
        step = await self.auth.authenticate(bytes(frame))
        if step.error:  # v0 has no way to say why: Kafka closes the connection
            log.info("authentication of %s on %s failed: %s", self.host, self.listener.name, step.message)
            return False
        if self.auth.complete:
            self.principal = self.auth.principal or self.principal
        return [_SIZE.pack(len(step.token)) + step.token]

    # ---- what the wire tap records --------------------------------------------------------------
    def _tapped_request(self, frame: bytearray) -> bytes:
        """The request frame as the tap may keep it: SASL tokens without their secrets."""
        auth = self.auth
        if auth is None:
            return _SIZE.pack(len(frame)) + frame
        from ...sasl.redact import redact_token  # (only a SASL listener's frames hold tokens)
        if auth.raw_tokens:
            token = redact_token(auth.mechanism, bytes(frame))
            return _SIZE.pack(len(token)) + token
        try:
            api_key, version, _ = peek_request(frame)
            if api_key == ApiKey.SASL_AUTHENTICATE:
                header, request, _ = read_request(frame)
                assert isinstance(request, m.SaslAuthenticateRequest)
                request.auth_bytes = redact_token(auth.mechanism, bytes(request.auth_bytes))
                info = m.api(api_key)
                payload = header.encode(info.request_header_version(version)) + request.encode(version)
                return _SIZE.pack(len(payload)) + payload
        except DecodeError:
            pass
        return _SIZE.pack(len(frame)) + frame

    def _tapped_response(self, data: Any) -> Any:
        return data  # responses carry no client secret (SCRAM's server messages reveal nothing reusable)

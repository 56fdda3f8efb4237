"""Correlation of one connection: each response paired with the request it answers.

Kafka answers a connection's requests in order, so responses are matched against a FIFO of
outstanding requests (Produce with acks=0 expects no response). The next response must answer the
oldest; one that answers a later request means the ones before it went unanswered; one whose id is not
outstanding is held (its request may not be framed yet, the directions being framed independently)
until a later response matches, a bound is hit or the stream ends, then it is unmatched.

SASL: SaslHandshake and SaslAuthenticate frames are followed by ``authentication.SaslExchanges``, which
gives them their mechanism and user. After a SaslHandshake v0 exchange the two sides swap raw SASL
tokens without a Kafka header: they go to ``SaslExchanges`` (which reads the user and the outcome from
them) and to no table, until the client's next Kafka request (a header a strict check accepts, with
the client id of its earlier requests) and the response to it.

A ``Conversation`` (``kafka_connection``) owns one ``RequestCorrelation`` per epoch; each direction's
framing (``kafka_framing.DirectionFraming``) hands it its complete frames (``frame_done``).
"""
from __future__ import annotations

import struct
from collections import deque
from itertools import islice
from typing import NamedTuple, Protocol

from ...framing import peek_request
from ...messages import ApiKey
from .authentication import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslExchanges
from .kafka_framing import REQUEST, RESPONSE, DirectionFraming
from ..model import KafkaFrame, Problem
from .resync import MAX_CLIENT_ID, WAIT, api_name, check_request, header_version, is_request_header, produce_acks

PRODUCE = ApiKey.PRODUCE
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class HeldResponse(NamedTuple):
    """A response framed before any outstanding request matched it."""
    offset: int
    ts_ns: int
    end_ts_ns: int
    size: int
    frame: bytes
    correlation_id: int


class CutRequest(NamedTuple):
    """An outstanding request that a gap cut: its response is expected but cannot be decoded."""
    ts_ns: int
    offset: int
    size: int
    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes = b""


class Roles(Protocol):
    """What the correlation needs of its connection (``Conversation``): its name, and the framing of each
    direction."""
    connection: str

    def look_back(self, corr: int, out: list) -> None: ...

    def requests_done(self) -> bool: ...


class RequestCorrelation:
    """Requests and responses of one epoch of a connection paired up: the FIFO of outstanding requests,
    the responses held until their request is framed, and the SASL exchanges."""

    def __init__(self, owner: Roles, max_held: int, max_held_bytes: int, max_outstanding: int,
                 max_outstanding_bytes: int):
        self.owner = owner
        self.max_held = max_held
        self.max_held_bytes = max_held_bytes
        self.max_outstanding = max_outstanding
        self.max_outstanding_bytes = max_outstanding_bytes
        self.fifo: deque[KafkaFrame | CutRequest] = deque()
        self.fifo_bytes = 0
        self.held: deque[HeldResponse] = deque()
        self.held_bytes = 0
        self.sasl_requests = False   # after a SaslHandshake v0 request: invalid headers are tokens
        self.sasl_responses = False  # after its response: frames not answering the FIFO head are tokens
        self.sasl = SaslExchanges()
        self.requests = self.responses = 0
        self.client = self.broker = ""  # the endpoints, once the connection knows its roles (set_roles)

    def set_roles(self, client: str, broker: str) -> None:
        self.client, self.broker = client, broker

    def waiting(self) -> bool:
        """Whether requests are outstanding or responses held."""
        return bool(self.fifo or self.held)

    def clear(self) -> None:
        self.fifo.clear()
        self.held.clear()

    def end(self, why: str, out: list) -> None:
        """The epoch ended: the held responses are unmatched, the outstanding requests unanswered."""
        self.release_held("no request with this correlation id was captured", out)
        while self.fifo:
            request = self.fifo.popleft()
            out.append(Problem(self.owner.connection, REQUEST, request.ts_ns, "unanswered_request", why,
                               request.offset, request.size, request.api_key, request.api_version,
                               request.correlation_id))

    def outstanding_ids(self, limit: int) -> list[int]:
        """The correlation ids of the oldest ``limit`` outstanding requests."""
        return [request.correlation_id for request in islice(self.fifo, limit)]

    def frame_done(self, side: DirectionFraming, frame: bytes, end_ts: int, out: list) -> None:
        side.frames += 1
        if side.direction is REQUEST:
            self._request(side, frame, end_ts, out)
        else:
            self._response(side, frame, end_ts, out)

    def _request(self, side: DirectionFraming, frame: bytes, end_ts: int, out: list) -> None:
        n = len(frame)
        valid = False
        if n >= 8:
            key, version, corr = peek_request(frame)
            valid = is_request_header(key, version, corr)
        if self.sasl_requests:
            if not valid or not self._request_after_tokens(side, frame):
                self._sasl_token(side, frame)
                return
            self.sasl_requests = False
        if n < 8:
            out.append(Problem(self.owner.connection, REQUEST, side.frame_ts, "undecodable",
                               f"a {n}-byte request frame is too short for a request header", side.frame_offset, n))
            return
        request_header_version = header_version(key, version)
        client_id: str | None = None
        client_id_length = -1
        if request_header_version >= 1 and n >= 10:
            client_id_length = _I16.unpack_from(frame, 8)[0]
            if 0 <= client_id_length <= n - 10:
                raw = frame[10:10 + client_id_length]
                if raw == side.client_id:
                    client_id = side.client_id_text
                else:
                    client_id = raw.decode("utf-8", "replace")
                    if valid:
                        side.client_id, side.client_id_text = raw, client_id
            elif client_id_length == -1 and valid:
                side.client_id = None
        mechanism: str | None = None
        user: str | None = None
        if valid:
            sasl = self.sasl
            if key == SASL_HANDSHAKE:
                sasl.handshake_request(frame, version)
                mechanism = sasl.mechanism
            elif key == SASL_AUTHENTICATE:
                sasl.authenticate_request(frame)
                mechanism, user = sasl.mechanism, sasl.user
            elif sasl.outcome is not None:
                sasl.kafka_request()
        request = KafkaFrame(self.owner.connection, REQUEST, self.client, self.broker, side.frame_ts, end_ts,
                             side.frame_offset, n, key, version, corr, client_id, frame, None, mechanism, user)
        out.append(request)
        self.requests += 1
        side.last_corr = corr
        if key == SASL_HANDSHAKE and version == 0:
            self.sasl_requests = True
        if key == PRODUCE and produce_acks(frame, version, request_header_version, client_id_length) == 0:
            return  # acks=0: no response will come
        self.fifo.append(request)
        self.fifo_bytes += n
        while len(self.fifo) > self.max_outstanding or self.fifo_bytes > self.max_outstanding_bytes:
            old = self.fifo.popleft()
            self.fifo_bytes -= len(old.frame)
            out.append(Problem(self.owner.connection, REQUEST, old.ts_ns, "unanswered_request",
                               "too many requests outstanding without responses (is the response direction missing "
                               "from the capture?)", old.offset, old.size, old.api_key, old.api_version,
                               old.correlation_id))
        if self.held:
            self._retry_held(out)
        self.owner.look_back(corr, out)

    def _response(self, side: DirectionFraming, frame: bytes, end_ts: int, out: list) -> None:
        corr = _I32.unpack_from(frame)[0] if len(frame) >= 4 else None
        if self.sasl_responses:
            if corr is None or not self.fifo or self.fifo[0].correlation_id != corr:
                self._sasl_token(side, frame)
                return
            self.sasl_responses = False
        if corr is None:
            out.append(Problem(self.owner.connection, RESPONSE, side.frame_ts, "unmatched_response",
                               f"a {len(frame)}-byte response frame is too short for a correlation id",
                               side.frame_offset, len(frame)))
            return
        held = HeldResponse(side.frame_offset, side.frame_ts, end_ts, len(frame), frame, corr)
        if self._fifo_index(corr) is None:
            self._hold(held, out)
            return
        if self.held:  # responses come in request order: the held ones will never match
            self.release_held("no request with this correlation id was captured before a later response", out)
        self._match(held, out)

    def truncated_response(self, corr: int, out: list) -> tuple[int | None, int | None]:
        """A response frame cut short, by its correlation id: pops the request it answers (unless it is a raw
        SASL token) and returns that request's API key and version."""
        if self.sasl_responses and not (self.fifo and self.fifo[0].correlation_id == corr):
            return None, None
        if self.held and self._fifo_index(corr) is not None:
            self.release_held("no request with this correlation id was captured before a later response", out)
        request = self._answer(corr, out)
        return (None, None) if request is None else (request.api_key, request.api_version)

    def _fifo_index(self, corr: int) -> int | None:
        fifo = self.fifo
        if fifo and fifo[0].correlation_id == corr:
            return 0
        for index, request in enumerate(fifo):
            if request.correlation_id == corr:
                return index
        return None

    def _answer(self, corr: int, out: list) -> KafkaFrame | CutRequest | None:
        """Pops the request ``corr`` answers; the ones before it went unanswered."""
        index = self._fifo_index(corr)
        if index is None:
            return None
        for _ in range(index):
            skipped = self.fifo.popleft()
            self.fifo_bytes -= len(skipped.frame)
            out.append(Problem(self.owner.connection, REQUEST, skipped.ts_ns, "unanswered_request",
                               f"no response was captured before the response to the later request {corr}",
                               skipped.offset, skipped.size, skipped.api_key, skipped.api_version,
                               skipped.correlation_id))
        request = self.fifo.popleft()
        self.fifo_bytes -= len(request.frame)
        return request

    def _match(self, held: HeldResponse, out: list) -> None:
        request = self._answer(held.correlation_id, out)
        if isinstance(request, CutRequest):
            self._unmatched(held, f"its request ({api_name(request.api_key)} v{request.api_version}) was cut by a "
                            "capture gap", out, request)
            return
        assert request is not None  # matched: the FIFO holds the id
        frame = held.frame
        key, version = request.api_key, request.api_version
        if key == SASL_HANDSHAKE and version is not None:
            self.sasl.handshake_response(frame, version)
            if version == 0 and held.size >= 6 and _I16.unpack_from(frame, 4)[0] == 0:
                self.sasl_responses = True
        elif key == SASL_AUTHENTICATE and version is not None:
            self.sasl.authenticate_response(frame, version)
        out.append(KafkaFrame(self.owner.connection, RESPONSE, self.client, self.broker, held.ts_ns, held.end_ts_ns,
                              held.offset, held.size, key, version, held.correlation_id, None, frame, request,
                              request.sasl_mechanism, request.sasl_user))
        self.responses += 1

    def _hold(self, held: HeldResponse, out: list) -> None:
        self.held.append(held)
        self.held_bytes += held.size
        if self.owner.requests_done():
            self.release_held("no request with this correlation id was captured", out)
        while len(self.held) > self.max_held or self.held_bytes > self.max_held_bytes:
            self._unmatched(self.held.popleft(), "no request with this correlation id was captured", out)

    def release_held(self, why: str, out: list) -> None:
        while self.held:
            self._unmatched(self.held.popleft(), why, out)

    def _retry_held(self, out: list) -> None:
        while self.held:
            index = next((i for i, h in enumerate(self.held) if self._fifo_index(h.correlation_id) is not None),
                         None)
            if index is None:
                return
            for _ in range(index):
                self._unmatched(self.held.popleft(), "no request with this correlation id was captured before a "
                                "later response", out)
            held = self.held.popleft()
            self.held_bytes -= held.size
            self._match(held, out)

    def _unmatched(self, held: HeldResponse, why: str, out: list, request: CutRequest | None = None) -> None:
        if request is None:
            self.held_bytes -= held.size
        out.append(KafkaFrame(self.owner.connection, RESPONSE, self.client, self.broker, held.ts_ns, held.end_ts_ns,
                              held.offset, held.size, None, None, held.correlation_id, None, held.frame, None))
        self.responses += 1
        out.append(Problem(self.owner.connection, RESPONSE, held.ts_ns, "unmatched_response",
                           f"response {held.correlation_id}: {why}", held.offset, held.size,
                           request and request.api_key, request and request.api_version, held.correlation_id))

    def _sasl_token(self, side: DirectionFraming, token: bytes) -> None:
        """A raw SASL token after a v0 SaslHandshake: read for its user and outcome, kept nowhere."""
        if side.direction is REQUEST:
            self.sasl.client_token(token)
        else:
            self.sasl.server_token(token)

    def _request_after_tokens(self, side: DirectionFraming, frame: bytes) -> bool:
        """Whether a frame after raw SASL tokens is the client's next Kafka request: its header passes the
        strict check of a resync (the client id its earlier requests gave, a small tag section), which a
        token that happens to start like a request header does not."""
        head = _I32.pack(len(frame)) + frame[:12 + MAX_CLIENT_ID]
        found = check_request(head, 0, len(head), side.max_frame, True, side.client_id)
        return found is not None and found is not WAIT

    def expect_truncated(self, side: DirectionFraming, api_key: int, api_version: int, corr: int) -> None:
        """Keeps the cut request's place in the FIFO, so its response is recognised (but not decoded)."""
        if not is_request_header(api_key, api_version, corr):
            return  # not a request header (a SASL token, or garbage): nothing to expect
        if api_key == PRODUCE:
            request_header_version = header_version(api_key, api_version)
            prefix = side.partial_prefix(1024)
            client_id_length = _I16.unpack_from(prefix, 8)[0] if len(prefix) >= 10 else -1
            if produce_acks(prefix, api_version, request_header_version, client_id_length) == 0:
                return
        self.fifo.append(CutRequest(side.frame_ts, side.frame_offset, side.size, api_key, api_version, corr))

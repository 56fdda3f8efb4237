"""Size-prefixed Kafka frames and their headers, sans I/O.

Every request and response on the wire is an int32 size, then a header, then a body. This module reads
and writes those frames without touching sockets:

- ``FrameBuffer``: feed it received bytes, take complete frames out; refuses an oversized frame from
  its size prefix alone, before buffering any of it.
- ``encode_request`` / ``decode_request``: a request frame from/to ``(RequestHeader, body)``.
- ``encode_response`` / ``decode_response``: the same for responses (which need the request's API key
  and version to decode).
- ``read_request`` / ``read_response``: the same reads, lenient as Kafka is: bytes after the body are
  counted (``trailing``), not refused; ``read_response`` also says which version the body was read at.
- ``peek_request`` / ``peek_request_head``: a request's API key, version and correlation id without
  decoding it; ``peek_request_head`` also checks that a size prefix and header could start a request
  frame, for readers that lost track of the frame boundaries in a byte stream (a capture's resync).
- ``Correlator``: one connection's client side, pairing each response with its request.

A *frame* here is the bytes after the size prefix; the ``encode_*`` functions return the size prefix
and the frame together, ready to send. With the native encoder they write the size prefix, header and
body in one allocation; otherwise the Python writers write each and the pieces are joined.
"""
from __future__ import annotations

import functools
import struct
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, cast

from .codec.native import encode_frame as _native_frame, encode_frame_parts as _native_frame_parts
from .errors import DecodeError
from .messages import ApiKey
from .messages import api as _api
from .messages import apis as _apis
from .messages import message_class as _message_class

if TYPE_CHECKING:  # the header classes load on first use (request_header_class), not with this module
    from .codec.base import Bytes, Message
    from .messages.request_header import RequestHeader
    from .messages.response_header import ResponseHeader

DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # the broker's socket.request.max.bytes default
_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_CORRELATION = struct.Struct(">i")


class FrameTooLarge(DecodeError):
    """A size prefix above the limit (or negative): the connection should be closed."""


class FrameBuffer:
    """Reassembles frames from a byte stream.

    ``feed(data)`` appends received bytes; ``next_frame()`` returns one complete frame (without its size
    prefix) or None. A size prefix that is negative or above ``max_frame`` raises FrameTooLarge as soon
    as its 4 bytes arrive; nothing of that frame is buffered beyond what was already received.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME):
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._start = 0
        self._consumed = 0  # stream offset of _buffer[0], for error messages

    def feed(self, data: Bytes) -> None:
        self._buffer += data

    def __len__(self) -> int:
        """Bytes buffered and not yet returned as frames."""
        return len(self._buffer) - self._start

    @property
    def pending_size(self) -> int | None:
        """The declared size of the frame being received (its prefix is in, not all of it), else None."""
        start = self._start
        if len(self._buffer) - start < 4:
            return None
        size = _SIZE.unpack_from(self._buffer, start)[0]
        return size if len(self._buffer) - start - 4 < size else None

    def next_frame(self) -> bytes | None:
        start = self._start
        if len(self._buffer) - start < 4:
            self._compact()
            return None
        size = _SIZE.unpack_from(self._buffer, start)[0]
        if size < 0 or size > self.max_frame:
            raise FrameTooLarge(f"frame size {size} outside 0..{self.max_frame}", self._consumed + start,
                                ["frame"])
        end = start + 4 + size
        if len(self._buffer) < end:
            self._compact()
            return None
        frame = bytes(self._buffer[start + 4:end])
        self._start = end
        return frame

    def frames(self) -> Iterator[bytes]:
        """Every complete frame buffered now."""
        while (frame := self.next_frame()) is not None:
            yield frame

    def _compact(self) -> None:
        if self._start:
            del self._buffer[:self._start]
            self._consumed += self._start
            self._start = 0


def frame(payload: bytes) -> bytes:
    """``payload`` with its int32 size prefix."""
    return _SIZE.pack(len(payload)) + payload


def peek_request(frame_bytes: Bytes) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)`` of a request frame without decoding it."""
    if len(frame_bytes) < 8:
        raise DecodeError("request frame shorter than its 8-byte header prefix", 0, ["RequestHeader"])
    key, version = _KEY_VERSION.unpack_from(frame_bytes, 0)
    return key, version, _CORRELATION.unpack_from(frame_bytes, 4)[0]


REQUEST_HEAD_SIZE = 14  # what peek_request_head reads: size, API key and version, correlation id, client id length
_REQUEST_HEAD = struct.Struct(">ihhih")


class RequestHead(NamedTuple):
    """A request's size prefix and the fixed fields of its header, as ``peek_request_head`` read them."""
    size: int
    api_key: int
    api_version: int
    correlation_id: int
    header_version: int
    client_id_length: int  # -1 for a null client id, and in a v0 header (which has none)


def peek_request_head(data: Bytes, pos: int = 0, max_frame: int = DEFAULT_MAX_FRAME) -> RequestHead | None:
    """The size prefix and request header at ``data[pos:]`` if they can start a request frame, else None.

    They can when the size is 8..``max_frame``, the API key and version are ones the specs define, the
    correlation id is not negative (clients count up from 0), and the client id (header v1+) fits in
    the frame, leaving room for a flexible header's tag section. The client id and tags themselves
    are not read. Sans-IO: reads ``REQUEST_HEAD_SIZE`` bytes at ``pos``, which the caller must have
    (``struct.error`` otherwise); it is meant for a reader that lost track of the frame boundaries in a
    byte stream and tries candidate positions (``decode_request`` decodes a frame for real).
    """
    size, key, version, correlation_id, client_id_length = _REQUEST_HEAD.unpack_from(data, pos)
    if size < 8 or size > max_frame or correlation_id < 0:
        return None
    header_version = _request_header_versions().get((key, version))
    if header_version is None:
        return None
    if header_version == 0:
        return RequestHead(size, key, version, correlation_id, 0, -1)
    if size < 10 or client_id_length < -1 or 10 + client_id_length > size:
        return None
    if header_version == 2 and 10 + max(client_id_length, 0) >= size:
        return None  # no room for the tag section
    return RequestHead(size, key, version, correlation_id, header_version, client_id_length)


@functools.cache
def _request_header_versions() -> dict[tuple[int, int], int]:
    """The request header version of every (API key, version) the specs define."""
    return {(info.key, version): info.request_header_version(version) for info in _apis()
            for version in range(info.valid_versions[0], info.valid_versions[1] + 1)}


def request_header_class() -> type[RequestHeader]:
    return cast("type[RequestHeader]", _message_class("RequestHeader"))


def response_header_class() -> type[ResponseHeader]:
    return cast("type[ResponseHeader]", _message_class("ResponseHeader"))


def encode_request(header: RequestHeader, body: Message) -> bytes:
    """A request frame with its size prefix, the header version chosen from the API and version."""
    info = _api(header.request_api_key)
    version = header.request_api_version
    header_version = info.request_header_version(version)
    data = _native_frame(header, header_version, body, version)
    if data is not None:
        return data
    payload = header.encode(header_version) + body.encode(version)
    return frame(payload)


class RequestFrame(NamedTuple):
    """A request frame read by ``read_request``."""
    header: RequestHeader
    body: Message
    trailing: int  # bytes after the body (Kafka ignores them; librdkafka sends some)


class ResponseFrame(NamedTuple):
    """A response frame read by ``read_response``."""
    header: ResponseHeader
    body: Message
    version: int  # the version the body was read at (an ApiVersions fallback reads v0)
    trailing: int


def read_request(frame_bytes: Bytes) -> RequestFrame:
    """The header and body of a request frame (without its size prefix), and the count of bytes after
    the body, which Kafka's ``RequestContext.parseRequest`` does not reject.

    Raises DecodeError for an unknown API key or an unsupported version (``exc.path`` names the
    header) and for malformed bodies.
    """
    key, version, _ = peek_request(frame_bytes)
    try:
        info = _api(key)
    except KeyError:
        raise DecodeError(f"unknown API key {key}", 0, ["RequestHeader", "request_api_key"]) from None
    if not info.supports(version):
        raise DecodeError(info.unsupported(version), 2, ["RequestHeader", "request_api_version"])
    header, pos = request_header_class().decode_from(frame_bytes, info.request_header_version(version))
    body, end = info.request_class.decode_from(frame_bytes, version, pos)
    return RequestFrame(header, body, len(frame_bytes) - end)


def decode_request(frame_bytes: Bytes, exact: bool = True) -> tuple[RequestHeader, Message]:
    """``(header, body)`` of a request frame (without its size prefix); with ``exact``, bytes after the
    body are a DecodeError (``read_request`` counts them instead)."""
    header, body, trailing = read_request(frame_bytes)
    if exact and trailing:
        _refuse_trailing(body, frame_bytes, trailing)
    return header, body


def _refuse_trailing(body: Message, frame_bytes: Bytes, trailing: int) -> None:
    end = len(frame_bytes) - trailing
    raise DecodeError(f"{trailing} trailing bytes after the body", end, [body.NAME])


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Message,
                    header_tags: dict[int, bytes] | None = None) -> bytes:
    """A response frame with its size prefix."""
    header = response_header_class()(correlation_id=correlation_id, unknown_tags=header_tags)
    data = _native_frame(header, _api(api_key).response_header_version(api_version), body, api_version)
    if data is not None:
        return data
    return b"".join(encode_response_parts(api_key, api_version, correlation_id, body, header_tags))


def encode_response_parts(api_key: int, api_version: int, correlation_id: int, body: Message,
                          header_tags: dict[int, bytes] | None = None) -> list[Bytes]:
    """The response frame as a list of pieces (size prefix and header first, then ``body.encode_parts``):
    the body's ``records`` values stay pieces of their own, for writes that do not copy them (sendfile
    of a file slice); the bytes around them are written natively in one allocation where possible."""
    info = _api(api_key)
    header = response_header_class()(correlation_id=correlation_id, unknown_tags=header_tags)
    header_version = info.response_header_version(api_version)
    parts = _native_frame_parts(header, header_version, body, api_version)
    if parts is not None:
        return parts
    head = header.encode(header_version)
    parts = body.encode_parts(api_version)
    size = len(head) + sum(map(len, parts))
    parts[:0] = (_SIZE.pack(size) + head,)
    return parts


def read_response(frame_bytes: Bytes, api_key: int, api_version: int) -> ResponseFrame:
    """The header and body of a response frame (without its size prefix) to a request of this API and
    version, the version the body was read at, and the count of bytes after the body.

    An ApiVersions response that does not decode at the requested version is read again as v0: a
    broker that does not know the requested version answers with a v0 body (KIP-511).
    """
    info = _api(api_key)
    header, pos = response_header_class().decode_from(frame_bytes, info.response_header_version(api_version))
    try:
        body, end = info.response_class.decode_from(frame_bytes, api_version, pos)
    except DecodeError:
        if api_key != ApiKey.API_VERSIONS or api_version == 0:
            raise
        try:
            body, end = info.response_class.decode_from(frame_bytes, 0, pos)  # the v0 error body
        except DecodeError:
            pass
        else:
            return ResponseFrame(header, body, 0, len(frame_bytes) - end)
        raise
    if end != len(frame_bytes) and api_key == ApiKey.API_VERSIONS and api_version > 0:
        try:  # a v0 body that happened to read at the newer version too: prefer the reading that fits
            v0, v0_end = info.response_class.decode_from(frame_bytes, 0, pos)
        except DecodeError:
            pass
        else:
            if v0_end == len(frame_bytes):
                return ResponseFrame(header, v0, 0, 0)
    return ResponseFrame(header, body, api_version, len(frame_bytes) - end)


def decode_response(frame_bytes: Bytes, api_key: int, api_version: int,
                    exact: bool = True) -> tuple[ResponseHeader, Message]:
    """``(header, body)`` of a response frame (without its size prefix) to a request of this API and
    version (see ``read_response``); with ``exact``, bytes after the body are a DecodeError."""
    header, body, _, trailing = read_response(frame_bytes, api_key, api_version)
    if exact and trailing:
        _refuse_trailing(body, frame_bytes, trailing)
    return header, body


@dataclass
class PendingRequest:
    correlation_id: int
    api_key: int
    api_version: int
    expects_response: bool
    context: object = None


class Correlator:
    """The client side of one connection: numbers requests and pairs responses with them.

    Kafka answers requests on a connection in order, so responses are matched to the oldest pending
    request; a correlation id that does not match it is a protocol error. Produce with acks=0 gets no
    response and is not kept pending.
    """

    def __init__(self, client_id: str | None = "kafkawire", first_correlation_id: int = 0):
        self.client_id = client_id
        self._next_id = first_correlation_id
        self._pending: deque[PendingRequest] = deque()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def request(self, body: Message, version: int, expects_response: bool | None = None,
                context: object = None) -> bytes:
        """The frame to send for ``body`` at ``version``; remembers it to match the response."""
        api_key = body.API_KEY
        if api_key is None:  # a header or data message
            raise TypeError(f"{body.NAME} is not a request")
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        header = request_header_class()(request_api_key=api_key, request_api_version=version,
                                        correlation_id=correlation_id, client_id=self.client_id)
        data = encode_request(header, body)
        if expects_response is None:
            expects_response = not (api_key == ApiKey.PRODUCE and getattr(body, "acks", 1) == 0)
        if expects_response:
            self._pending.append(PendingRequest(correlation_id, api_key, version, True, context))
        return data

    def response(self, frame_bytes: Bytes) -> tuple[PendingRequest, ResponseHeader, Message]:
        """Decode a response frame; returns ``(pending request, header, body)``."""
        if len(frame_bytes) < 4:
            raise DecodeError("response frame shorter than its correlation id", 0, ["ResponseHeader"])
        correlation_id = _CORRELATION.unpack_from(frame_bytes, 0)[0]
        if not self._pending:
            raise DecodeError(f"response with correlation id {correlation_id} but no request is pending", 0,
                              ["ResponseHeader", "correlation_id"])
        expected = self._pending[0]
        if correlation_id != expected.correlation_id:
            raise DecodeError(f"response correlation id {correlation_id} does not match the oldest pending "
                              f"request ({expected.correlation_id})", 0, ["ResponseHeader", "correlation_id"])
        self._pending.popleft()
        header, body = decode_response(frame_bytes, expected.api_key, expected.api_version)
        return expected, header, body

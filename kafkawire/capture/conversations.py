"""The Kafka layer of one connection: stream events -> KafkaFrame and Problem.

``Conversation.feed(event)`` takes the events of ``streams.TcpReassembler`` (both directions, in capture
order) and returns the frames and problems they complete; ``finish()`` flushes the rest.
``decode_connection(packets)`` runs both stages over one connection's packets.

What it does, per connection:

- Roles: the endpoint whose port is in ``broker_ports`` is the broker; else the SYN's destination; else
  the direction whose first bytes validate as request headers (decided lazily, buffering at most
  ``role_buffer`` bytes per direction).
- Framing: int32 size + frame, per direction, without quadratic copies (a frame's pieces are joined once).
  A size above the limit means sync was lost: Problem ``oversized_frame``, then resync.
- Correlation: a FIFO of outstanding requests (Produce with acks=0 expects no response). The next response
  must answer the oldest; one that answers a later request means the ones before it went unanswered; one
  whose id is not outstanding is held (its request may not be framed yet, the directions being framed
  independently) until a later response matches, a bound is hit or the stream ends, then it is unmatched.
- Gaps: Problem ``gap``; the frame they cut gets ``truncated_frame``. When the cut frame's size was known
  the next frame starts where it ends; otherwise the direction resyncs: requests by validating header
  candidates (known API key and version, correlation id >= 0, printable client id) chained to the next
  header, responses by finding an outstanding correlation id chained to the next response. Skipped bytes
  give Problem ``resync``. A capture that starts mid-stream resyncs the same way.
- SASL: after a SaslHandshake v0 exchange the client and broker swap raw size-prefixed SASL tokens with no
  Kafka header: they are skipped (one Problem ``sasl``). TLS (a TLS record at the start of a direction) and
  bytes that never validate as Kafka give one Problem ``tls`` / ``not_kafka`` and the connection is skipped.
- Ends: requests still outstanding when the connection closes or the capture ends are reported as
  ``unanswered_request`` with a reason that says which ("capture ended before the response" is the
  normal fate of requests in flight when tcpdump stopped, not evidence of loss). A response that skips
  requests says "no response was captured ...", which is real loss.
- Epochs: when every direction has ended (FIN/RST, or the reassembler's StreamEnd on 4-tuple reuse) or
  data arrives on an ended direction, the conversation starts over (offsets restart at 0).
"""
from __future__ import annotations

import re
import struct
from bisect import bisect_left, bisect_right
from collections import Counter, deque
from functools import lru_cache, partial
from itertools import islice
from typing import Iterable, Iterator, NamedTuple

from ..framing import DEFAULT_MAX_FRAME
from ..messages import apis
from .model import KafkaFrame, Packet, Problem, StreamData, StreamEnd, StreamGap
from .streams import ConnectionOpen, StreamConflict, TcpReassembler

REQUEST, RESPONSE = "request", "response"
DEFAULT_MAX_RESPONSE_FRAME = 128 << 20  # fetch.max.bytes (50 MiB) plus generous overhead
PRODUCE, SASL_HANDSHAKE = 0, 17
MAX_CLIENT_ID = 1024        # longer client ids are implausible when hunting for a frame boundary
MAX_HEADER_TAGS = 8
MAX_SCANNED_IDS = 64        # outstanding ids looked for when resyncing responses
ROLE_EVIDENCE = 64 << 10    # bytes of each direction looked at to tell the client from the broker

_VERSIONS = {info.key: info.valid_versions for info in apis()}
_INFO = {info.key: info for info in apis()}
_REQUEST_HEAD = struct.Struct(">ihhih")   # size, api key, api version, correlation id, client id length
_KEY_VERSION_ID = struct.Struct(">hhi")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PAIR = struct.Struct(">ii")
_PRINTABLE = re.compile(rb"[\x20-\x7e]*")

_SYNC, _SCAN, _SKIP, _DEAD = "sync", "scan", "skip", "dead"
_WAIT = object()  # a check that needs more bytes
_ACCEPT, _PENDING = "accept", "pending"
MAX_PENDING = 16            # candidate boundaries waiting for more bytes, per direction


# ----------------------------------------------------------------------------------------------------
# Request headers and boundary candidates


@lru_cache(maxsize=None)
def _header_version(key: int, version: int) -> int:
    info = _INFO.get(key)
    return 1 if info is None else info.request_header_version(version)


_ANY_CLIENT = object()  # the client id is not known yet: a boundary guess needs a non-empty printable one


def _check_request(buf, p: int, end: int, max_frame: int, strict: bool, client_id=_ANY_CLIENT):
    """Does ``buf[p:]`` start with a size prefix and a plausible request header?

    Returns ``(size, api_key, api_version, correlation_id)``, None (no) or _WAIT (not enough bytes).
    ``strict`` is for guessing a boundary inside binary data, where a header with an empty client id
    turns up by chance far too often: it wants the ``client_id`` this connection is known to use (bytes,
    or None for null) or else a non-empty printable one, and a small tag section.
    """
    if end - p < 14:
        return _WAIT
    size, key, version, corr, cid = _REQUEST_HEAD.unpack_from(buf, p)
    if size < 8 or size > max_frame or corr < 0:
        return None
    versions = _VERSIONS.get(key)
    if versions is None or not versions[0] <= version <= versions[1]:
        return None
    header_version = _header_version(key, version)
    if header_version == 0:
        return None if strict else (size, key, version, corr)
    if size < 10 or cid < -1 or 10 + cid > size:
        return None
    pos = p + 14
    if strict:
        if client_id is _ANY_CLIENT:
            if cid < 1 or cid > MAX_CLIENT_ID:
                return None
            if end < pos + cid:
                return _WAIT
            if _PRINTABLE.fullmatch(buf, pos, pos + cid) is None:
                return None
        elif client_id is None:
            if cid != -1:
                return None
        elif cid != len(client_id):
            return None
        elif cid:
            if end < pos + cid:
                return _WAIT
            if buf[pos:pos + cid] != client_id:
                return None
    pos += max(cid, 0)
    if header_version == 2:
        if 10 + max(cid, 0) >= size:
            return None  # no room for the tag section
        if strict:
            if end <= pos:
                return _WAIT
            if buf[pos] > MAX_HEADER_TAGS:
                return None
    return size, key, version, corr


@lru_cache(maxsize=8)
def _candidate_pattern(max_frame: int) -> re.Pattern:
    """Positions that might start a request: a size below the limit, a small api key and version, a
    non-negative correlation id and a client id length below MAX_CLIENT_ID (or -1 for null)."""
    def byte_range(high: int) -> bytes:
        return b"[" + re.escape(b"\x00") + b"-" + re.escape(bytes([high])) + b"]"
    max_key = max(_VERSIONS)
    max_version = max(high for _, high in _VERSIONS.values())
    return re.compile(b"(?=" + byte_range(max_frame >> 24) + b"[\\s\\S]{3}\\x00" + byte_range(max_key) + b"\\x00"
                      + byte_range(max_version) + byte_range(0x7F) + b"[\\s\\S]{3}(?:"
                      + byte_range((MAX_CLIENT_ID >> 8) - 1) + b"|\\xff\\xff))")


def _request_candidates(buf, start: int, end: int, max_frame: int) -> Iterator[int]:
    """Positions from ``start`` on that pass the cheap byte test for a request header, in order."""
    return (match.start() for match in _candidate_pattern(max_frame).finditer(buf, start, end))


def _request_verdict(buf, p: int, end: int, max_frame: int, window: int, strong, expect_corr, final: bool,
                     client_id=_ANY_CLIENT):
    """Does a request frame start at ``p``? _ACCEPT, _PENDING (more bytes needed) or None.

    It needs a valid header followed by another valid header. A frame that runs to or past the end of the
    data waits for more, up to ``window`` bytes; beyond that (or at the end of the stream) it is taken only
    if ``strong(p, corr)`` (it starts a segment) or its correlation id is the expected one.
    """
    head = _check_request(buf, p, end, max_frame, True, client_id)
    if head is None:
        return None
    if head is _WAIT:
        return None if final else _PENDING
    frame_end = p + 4 + head[0]
    if frame_end < end:
        following = _check_request(buf, frame_end, end, max_frame, True, client_id)
        if following is None:
            return None
        if following is not _WAIT:
            return _ACCEPT
        if not final:
            return _PENDING
    if final or end - p > window:
        return _ACCEPT if strong(p, head[3]) or head[3] == expect_corr else None
    return _PENDING


def _response_candidates(buf, start: int, end: int, ids: list) -> Iterator[int]:
    """Positions from ``start`` on where a size is followed by one of ``ids``, in order."""
    needles = [_I32.pack(cid) for cid in ids]
    found = [buf.find(needle, start + 4, end) for needle in needles]
    while True:
        best = -1
        for index, at in enumerate(found):
            if at != -1 and (best == -1 or at < found[best]):
                best = index
        if best == -1:
            return
        p = found[best] - 4
        yield p
        for index, at in enumerate(found):
            if at == p + 4:
                found[index] = buf.find(needles[index], p + 5, end)


def _response_verdict(buf, p: int, end: int, max_frame: int, window: int, strong, ids: list, final: bool):
    """Does a response to one of ``ids`` start at ``p``? _ACCEPT, _PENDING (more bytes needed) or None.

    A response header is only a size and a correlation id, so the evidence must come from around it: the
    next response answers the next outstanding request. Until that can be checked (the data ends, or the
    next request is not framed yet) the candidate waits, up to ``window`` bytes; beyond that (or at the
    end of the stream) it is taken only if it answers the oldest outstanding request and starts a segment.
    """
    if end - p < 8:
        return None if final else _PENDING
    size, corr = _PAIR.unpack_from(buf, p)
    if size < 4 or size > max_frame or corr not in ids:
        return None
    index = ids.index(corr)
    frame_end = p + 4 + size
    if end - frame_end >= 8:
        next_size, next_id = _PAIR.unpack_from(buf, frame_end)
        if not 4 <= next_size <= max_frame:
            return None
        if index + 1 < len(ids):
            return _ACCEPT if next_id == ids[index + 1] else None
        if next_id <= corr and next_id in ids:
            return None  # a response to an earlier request cannot follow
    elif end > frame_end and final:
        return None  # the stream ends a few bytes after it: too short for the next response
    if final or end - p > window:
        return _ACCEPT if index == 0 and strong(p, corr) else None
    return _PENDING


def _looks_like_tls(data) -> bool:
    """A TLS record header: content type 20-23, version 3.x."""
    return len(data) >= 3 and 20 <= data[0] <= 23 and data[1] == 3 and data[2] <= 4


def _read_uvarint(buf, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ValueError("uvarint too long")


def _produce_acks(frame, version: int, header_version: int, client_id_length: int) -> int | None:
    """Produce's ``acks``, read past the header and the transactional id; None if the frame is too short."""
    try:
        pos = 10 + max(client_id_length, 0) if header_version >= 1 else 8
        if header_version == 2:
            count, pos = _read_uvarint(frame, pos)
            for _ in range(count):
                _, pos = _read_uvarint(frame, pos)
                length, pos = _read_uvarint(frame, pos)
                pos += length
        if version >= 9:
            length, pos = _read_uvarint(frame, pos)  # compact nullable string: length + 1, 0 for null
            pos += max(length - 1, 0)
        elif version >= 3:
            length = _I16.unpack_from(frame, pos)[0]
            pos += 2 + max(length, 0)
        return _I16.unpack_from(frame, pos)[0]
    except (IndexError, ValueError, struct.error):
        return None


def _api_name(key: int) -> str:
    info = _INFO.get(key)
    return info.name if info else f"api key {key}"


def _port(endpoint: str) -> int | None:
    try:
        return int(endpoint.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


# ----------------------------------------------------------------------------------------------------
# One direction


class _Side:
    """Framing state of one direction within the current epoch.

    Modes: SYNC frames by size prefix; SCAN buffers bytes while looking for a frame boundary (from the
    stream start, after a gap or after lost sync); SKIP discards the rest of a frame cut by a gap whose
    end is known; DEAD ignores everything.
    """

    __slots__ = ("direction", "sender", "max_frame", "mode", "pos", "ended", "frames",
                 "head", "parts", "need", "size", "frame_offset", "frame_ts", "skip_to",
                 "buf", "buf_offset", "piece_offsets", "piece_ts", "scan_pos", "scan_start", "hint", "known_start",
                 "pending", "last_corr", "client_id", "client_id_text")

    def __init__(self, direction: str, sender: str, max_frame: int):
        self.direction = direction
        self.sender = sender
        self.max_frame = max_frame
        self.pos = 0              # stream offset of the next byte expected
        self.ended = False
        self.frames = 0
        self.size = 0
        self.frame_offset = 0
        self.frame_ts = 0
        self.skip_to = 0
        self.last_corr = None
        self.client_id = _ANY_CLIENT  # the raw client id this client uses, once a request showed it
        self.client_id_text = None
        self.start_scan(0, hint=0, known_start=True)

    def start_scan(self, offset: int, hint: int | None, known_start: bool = False) -> None:
        self.mode = _SCAN
        self.buf = bytearray()
        self.buf_offset = offset  # stream offset of buf[0]
        self.piece_offsets: list[int] = []  # where each buffered piece starts, and when it was captured
        self.piece_ts: list[int] = []
        self.scan_pos = 0         # buf index: no frame starts before it
        self.scan_start = offset  # where this scan began, for the resync report
        self.hint = hint          # a stream offset known to be a frame boundary
        self.known_start = known_start
        self.pending: list[int] = []  # buf indexes of candidate boundaries waiting for more bytes
        self.head, self.parts, self.need = b"", [], 0

    def partial_prefix(self, count: int) -> bytes:
        """The first ``count`` bytes of the frame being collected (fewer if not yet received)."""
        got = bytearray(self.head)
        for part in self.parts:
            got += part[:count - len(got)]
            if len(got) >= count:
                break
        return bytes(got)

    def is_piece_start(self, p: int, _corr=None) -> bool:
        offset = self.buf_offset + p
        index = bisect_left(self.piece_offsets, offset)
        return index < len(self.piece_offsets) and self.piece_offsets[index] == offset

    def pieces_from(self, p: int) -> list:
        """The buffered bytes from ``p`` on, as (offset, data, ts) pieces in capture order."""
        start = self.buf_offset + p
        data = memoryview(bytes(self.buf[p:]))
        offsets, stamps = self.piece_offsets, self.piece_ts
        first = max(bisect_right(offsets, start) - 1, 0)
        pieces = []
        for index in range(first, len(offsets)):
            lo = max(offsets[index], start)
            hi = offsets[index + 1] if index + 1 < len(offsets) else start + len(data)
            if hi > lo:
                pieces.append((lo, data[lo - start:hi - start], stamps[index]))
        return pieces

    def trim(self, keep_from: int) -> None:
        """Drops the buffered bytes before buf index ``keep_from``."""
        del self.buf[:keep_from]
        self.buf_offset += keep_from
        self.scan_pos -= keep_from
        self.pending = [p - keep_from for p in self.pending]
        first = max(bisect_right(self.piece_offsets, self.buf_offset) - 1, 0)
        del self.piece_offsets[:first], self.piece_ts[:first]


class _Held(NamedTuple):
    """A response framed before any outstanding request matched it."""
    offset: int
    ts_ns: int
    end_ts_ns: int
    size: int
    frame: bytes
    correlation_id: int


class _Truncated(NamedTuple):
    """An outstanding request that a gap cut: its response is expected but cannot be decoded."""
    ts_ns: int
    offset: int
    size: int
    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes = b""


_CLOSE_REASONS = {"FIN": "connection closed before the response", "RST": "connection reset before the response",
                  "end of capture": "capture ended before the response"}


# ----------------------------------------------------------------------------------------------------
# The conversation


class Conversation:
    """Frames, correlates and checks one connection's Kafka traffic (see the module docstring)."""

    def __init__(self, connection: str, broker_ports: set[int] | None = None, max_frame: int = DEFAULT_MAX_FRAME,
                 max_response_frame: int = DEFAULT_MAX_RESPONSE_FRAME, *, role_buffer: int = 1 << 20,
                 scan_window: int = 4 << 20, max_held: int = 256, max_held_bytes: int = 128 << 20,
                 max_outstanding: int = 4096, max_outstanding_bytes: int = 256 << 20):
        self.connection = connection
        self.broker_ports = set(broker_ports or ())
        self.max_frame = max_frame
        self.max_response_frame = max_response_frame
        self.role_buffer = role_buffer
        self.scan_window = scan_window
        self.max_held = max_held
        self.max_held_bytes = max_held_bytes
        self.max_outstanding = max_outstanding
        self.max_outstanding_bytes = max_outstanding_bytes
        self.client: str | None = None
        self.broker: str | None = None
        self.sasl_raw = False                        # raw SASL tokens were skipped on this connection
        self._endpoints = connection.split("-") if connection.count("-") == 1 else []
        self._sides: dict[str, _Side] = {}
        self._early: list = []                       # events before the roles are known
        self._early_bytes: Counter = Counter()
        self._early_ended: set[str] = set()
        self._verdicts: dict[str, tuple] = {}        # sender -> ((bytes judged, final), verdict)
        self._first_sender: str | None = None
        self._dead = False
        self._reported: set[str] = set()             # once-per-connection problem kinds
        self._last_ts = 0
        self._new_epoch_state()
        self._roles_from_ports()

    def _new_epoch_state(self) -> None:
        self._fifo: deque[KafkaFrame] = deque()
        self._fifo_bytes = 0
        self._held: deque[_Held] = deque()
        self._held_bytes = 0
        self._sasl_requests = False   # after a SaslHandshake v0 request: invalid headers are tokens
        self._sasl_responses = False  # after its response: frames not answering the FIFO head are tokens
        self._seen: set[str] = set()
        self._ended: set[str] = set()
        if self.client is not None:
            self._sides = {self.client: _Side(REQUEST, self.client, self.max_frame),
                           self.broker: _Side(RESPONSE, self.broker, self.max_response_frame)}

    # ------------------------------------------------------------------------------------------------
    # Input

    def feed(self, event) -> list:
        out: list = []
        if self._dead:
            return out
        kind = type(event)
        if kind is StreamData:
            self._last_ts = event.ts_ns
            side = self._sides.get(event.sender)
            if side is not None and side.mode is _SYNC and event.offset == side.pos:
                data = event.data
                used = self._sync(side, event.offset, data, event.ts_ns, out)
                if used < len(data):
                    self._feed_side(side, event.offset + used, memoryview(data)[used:], event.ts_ns, out)
                return out
        elif kind is ConnectionOpen:
            self._seen.update((event.client, event.server))
            if self.client is None:
                self._set_roles(event.client, event.server, out)
            return out
        elif kind is StreamConflict:
            side = self._sides.get(event.sender)
            out.append(Problem(self.connection, side.direction if side else None, event.ts_ns,
                               "retransmission_conflict",
                               f"a retransmission carried {event.differing} of {event.length} bytes different from "
                               "the first capture of the same sequence range; kept the first",
                               event.offset, event.length))
            return out
        self._last_ts = event.ts_ns
        if self.client is None:
            self._early_event(event, out)
        else:
            self._dispatch(event, out)
        return out

    def finish(self) -> list:
        """Flushes everything, as if the capture stopped here."""
        out: list = []
        if self._dead:
            return out
        if self.client is None and self._early:
            self._decide_roles(out, final=True)
        if self.client is not None and not self._dead and (
                self._fifo or self._held or any(s.pos or s.frames for s in self._sides.values())):
            self._end_epoch(self._last_ts, _CLOSE_REASONS["end of capture"], out)
        return out

    def _dispatch(self, event, out: list) -> None:
        sender = event.sender
        side = self._sides.get(sender)
        if side is None or self._dead:
            return
        kind = type(event)
        if side.ended:
            if kind is StreamEnd:
                return
            self._end_epoch(event.ts_ns, "connection reused before the response", out)
            side = self._sides[sender]
        self._seen.add(sender)
        if kind is StreamData:
            self._feed_side(side, event.offset, event.data, event.ts_ns, out)
        elif kind is StreamGap:
            self._gap(side, event, out)
        elif kind is StreamEnd:
            self._finish_side(side, event.ts_ns, f"the stream ended ({event.reason})", out)
            side.ended = True
            self._ended.add(sender)
            if self._seen <= self._ended and not self._dead:
                why = _CLOSE_REASONS.get(event.reason, f"connection ended ({event.reason}) before the response")
                self._end_epoch(event.ts_ns, why, out)

    # ------------------------------------------------------------------------------------------------
    # Roles

    def _roles_from_ports(self) -> None:
        if not self.broker_ports or len(self._endpoints) != 2:
            return
        brokers = [e for e in self._endpoints if _port(e) in self.broker_ports]
        if len(brokers) == 1:
            self._set_roles(self._other(brokers[0]), brokers[0], [])

    def _set_roles(self, client: str, broker: str, out: list) -> None:
        self.client, self.broker = client, broker
        self._sides = {client: _Side(REQUEST, client, self.max_frame),
                       broker: _Side(RESPONSE, broker, self.max_response_frame)}
        early, self._early = self._early, []
        for event in early:
            if not self._dead:
                self._dispatch(event, out)

    def _other(self, endpoint: str) -> str:
        candidates = self._endpoints or list(self._early_bytes)
        others = [e for e in candidates if e != endpoint]
        return others[0] if others else "?"

    def _early_event(self, event, out: list) -> None:
        self._early.append(event)
        kind = type(event)
        if kind is StreamData:
            self._first_sender = self._first_sender or event.sender
            self._early_bytes[event.sender] += len(event.data)
            self._decide_roles(out, final=self._early_bytes[event.sender] > self.role_buffer)
        elif kind is StreamEnd:
            self._early_ended.add(event.sender)
            if self._early_bytes and set(self._early_bytes) <= self._early_ended:
                self._decide_roles(out, final=True)

    def _decide_roles(self, out: list, final: bool) -> None:
        verdicts = {sender: self._role_verdict(sender, final) for sender in self._early_bytes}
        requests = [s for s, v in verdicts.items() if v == "request"]
        if any(v == "tls" for v in verdicts.values()):
            self._give_up("tls", None, "TLS records: the connection is encrypted and cannot be decoded", out)
        elif len(requests) == 1:
            self._set_roles(requests[0], self._other(requests[0]), out)
        elif len(requests) == 2:
            self._set_roles(self._first_sender, self._other(self._first_sender), out)
        elif len(verdicts) == 2 and all(v == "not kafka" for v in verdicts.values()):
            self._give_up("not_kafka", None, "neither direction starts with a valid Kafka frame", out)
        elif final and verdicts:
            self._guess_roles_by_port(verdicts, out)

    def _guess_roles_by_port(self, verdicts: dict, out: list) -> None:
        """Last resort: brokers listen on a fixed port, clients use ephemeral ones (the higher)."""
        ports = {e: _port(e) for e in self._endpoints}
        if len(ports) == 2 and None not in ports.values() and len(set(ports.values())) == 2 \
                and not all(v == "not kafka" for v in verdicts.values()):
            broker = min(ports, key=ports.get)
            self._set_roles(self._other(broker), broker, out)
        else:
            self._give_up("not_kafka", None, "no valid Kafka request header in the first "
                          f"{max(self._early_bytes.values())} bytes of either direction", out)

    def _role_verdict(self, sender: str, final: bool) -> str:
        """'request', 'not kafka', 'tls' or 'wait' for the first bytes ``sender`` sent (after its last gap)."""
        buf = bytearray()
        known_start = True
        for event in self._early:
            if event.sender != sender:
                continue
            if type(event) is StreamGap:
                buf.clear()
                known_start = False
            elif type(event) is StreamData and len(buf) < ROLE_EVIDENCE:
                if not buf and event.offset != 0:
                    known_start = False
                buf += event.data
        if not buf:
            return "wait"
        cached = self._verdicts.get(sender)
        if cached is not None and cached[0] == (len(buf), final):
            return cached[1]
        verdict = self._judge_requests(buf, known_start, final)
        self._verdicts[sender] = ((len(buf), final), verdict)
        return verdict

    def _judge_requests(self, buf: bytearray, known_start: bool, final: bool) -> str:
        if known_start and _looks_like_tls(buf):
            return "tls"
        if known_start:
            head = _check_request(buf, 0, len(buf), self.max_frame, False)
            if head is _WAIT:
                return "not kafka" if final else "wait"
            return "request" if head else "not kafka"
        never = lambda p, corr: False  # noqa: E731 - segment starts are not kept here
        for p in _request_candidates(buf, 0, len(buf), self.max_frame):
            if _request_verdict(buf, p, len(buf), self.max_frame, self.scan_window, never, None, final) is _ACCEPT:
                return "request"
        return "wait"

    def _give_up(self, kind: str, direction: str | None, reason: str, out: list) -> None:
        """The connection is not decodable Kafka: report once and skip the rest of it."""
        self._dead = True
        self._early.clear()
        self._early_bytes.clear()
        if kind not in self._reported:
            self._reported.add(kind)
            out.append(Problem(self.connection, direction, self._last_ts, kind, reason))
        for side in self._sides.values():
            side.mode = _DEAD
            side.buf = bytearray()
            side.parts = []
        self._fifo.clear()
        self._held.clear()

    # ------------------------------------------------------------------------------------------------
    # Bytes of one direction

    def _feed_side(self, side: _Side, offset: int, data, ts: int, out: list) -> None:
        work = deque([(offset, data, ts)])
        while work:
            offset, data, ts = work.popleft()
            n = len(data)
            if offset != side.pos:
                if offset + n <= side.pos:
                    continue
                if offset < side.pos:
                    data = memoryview(data)[side.pos - offset:]
                    n = len(data)
                    offset = side.pos
                else:  # the reassembler announces every hole; be safe anyway
                    self._gap(side, StreamGap(side.sender, side.pos, offset - side.pos, ts, "unannounced hole"), out)
            while n and not self._dead:
                mode = side.mode
                if mode is _SYNC:
                    used = self._sync(side, offset, data, ts, out)
                elif mode is _SCAN:
                    used = n
                    pieces = self._scan_data(side, offset, data, ts, out)
                    if pieces:
                        work.extendleft(reversed(pieces))
                elif mode is _SKIP:
                    used = min(n, side.skip_to - offset)
                    side.pos = offset + used
                    if side.pos == side.skip_to:
                        side.start_scan(side.pos, hint=side.pos)
                else:
                    side.pos = offset + n
                    used = n
                if used >= n:
                    break
                data = memoryview(data)[used:]
                offset += used
                n -= used

    def _sync(self, side: _Side, offset: int, data, ts: int, out: list) -> int:
        """Frames ``data`` while in sync; returns the bytes used (fewer if the mode changed)."""
        view = data if type(data) is memoryview else memoryview(data)
        n = len(view)
        i = 0
        while i < n:
            need = side.need
            if need:
                if n - i < need:
                    side.parts.append(view[i:] if i else view)
                    side.need = need - (n - i)
                    side.pos = offset + n
                    return n
                side.parts.append(view[i:i + need])
                i += need
                side.need = 0
                frame = b"".join(side.parts)
                side.parts = []
                side.pos = offset + i
                self._frame_done(side, frame, ts, out)
                if side.mode is not _SYNC:
                    return i
                continue
            if side.head:
                take = min(4 - len(side.head), n - i)
                side.head += view[i:i + take]
                i += take
                if len(side.head) < 4:
                    side.pos = offset + n
                    return n
                size = _I32.unpack(side.head)[0]
                side.head = b""
            elif n - i >= 4:
                size = _I32.unpack_from(view, i)[0]
                side.frame_offset = offset + i
                side.frame_ts = ts
                i += 4
            else:
                side.head = bytes(view[i:])
                side.frame_offset = offset + i
                side.frame_ts = ts
                side.pos = offset + n
                return n
            side.pos = offset + i
            if size < 0 or size > side.max_frame:
                self._lost_sync(side, size, ts, out)
                return i
            side.size = size
            if n - i >= size:
                frame = bytes(view[i:i + size])
                i += size
                side.pos = offset + i
                self._frame_done(side, frame, ts, out)
                if side.mode is not _SYNC:
                    return i
            else:
                side.parts = [view[i:]]
                side.need = size - (n - i)
                side.pos = offset + n
                return n
        side.pos = offset + n
        return n

    def _lost_sync(self, side: _Side, size: int, ts: int, out: list) -> None:
        out.append(Problem(self.connection, side.direction, ts, "oversized_frame",
                           f"size prefix {size} is outside 0..{side.max_frame}: framing lost sync; resyncing",
                           side.frame_offset, None))
        side.start_scan(side.pos, hint=None)

    def _scan_data(self, side: _Side, offset: int, data, ts: int, out: list) -> list:
        """Buffers ``data`` while looking for a frame boundary; returns the pieces to frame once found."""
        if not side.buf:
            side.buf_offset = offset
            side.scan_pos = 0
            side.piece_offsets.clear()
            side.piece_ts.clear()
        side.piece_offsets.append(offset)
        side.piece_ts.append(ts)
        side.buf += data
        side.pos = offset + len(data)
        return self._scan(side, out, final=False)

    def _scan(self, side: _Side, out: list, final: bool) -> list:
        buf = side.buf
        end = len(buf)
        if side.hint is not None:
            p = side.hint - side.buf_offset
            verdict = self._check_boundary(side, p, end)
            if verdict is _WAIT:
                return []
            if verdict:
                return self._accept(side, p, out)
            side.hint = None
            if side.known_start and not self._frames_seen():
                if _looks_like_tls(buf[p:p + 3]):
                    self._give_up("tls", side.direction, "a TLS record where the first Kafka frame should be: the "
                                  "connection is encrypted and cannot be decoded", out)
                else:
                    self._give_up("not_kafka", side.direction, f"the {side.direction} stream does not start with a "
                                  "valid Kafka frame", out)
                return []
            side.scan_pos = max(side.scan_pos, p + 1)
        # Candidates still waiting for bytes do not block later ones: the earliest that validates wins.
        if side.direction is REQUEST:
            expect = None if side.last_corr is None else side.last_corr + 1
            verdict = partial(_request_verdict, buf, end=end, max_frame=side.max_frame, window=self.scan_window,
                              strong=side.is_piece_start, expect_corr=expect, final=final, client_id=side.client_id)
            candidates, tail = _request_candidates(buf, side.scan_pos, end, side.max_frame), 13
        else:
            ids = [request.correlation_id for request in islice(self._fifo, MAX_SCANNED_IDS)]
            verdict = partial(_response_verdict, buf, end=end, max_frame=side.max_frame, window=self.scan_window,
                              strong=side.is_piece_start, ids=ids, final=final)
            candidates, tail = _response_candidates(buf, side.scan_pos, end, ids), 7
        for p in list(side.pending):
            found = verdict(p)
            if found is _ACCEPT:
                return self._accept(side, p, out)
            if found is None:
                side.pending.remove(p)
        for p in candidates:
            side.scan_pos = p + 1
            found = verdict(p)
            if found is _ACCEPT:
                return self._accept(side, p, out)
            if found is _PENDING and p not in side.pending:
                side.pending.append(p)
                if len(side.pending) > MAX_PENDING:
                    side.pending.pop(0)
        side.scan_pos = max(side.scan_pos, end - tail)
        first = min(side.pending, default=side.scan_pos)
        if side.direction is REQUEST and not self._frames_seen():
            # Not even one frame in more than the largest frame: this is not Kafka.
            rejected = side.buf_offset + first - side.scan_start
            if rejected > side.max_frame + self.scan_window:
                self._give_up("not_kafka", side.direction, f"no valid Kafka request frame in {rejected} bytes", out)
                return []
        keep_from = min(first, side.scan_pos)
        if side.direction is RESPONSE:  # keep some history for responses whose request is framed late
            keep_from = min(keep_from, max(0, end - self.scan_window))
        if keep_from > 65536 and keep_from * 2 > end:
            side.trim(keep_from)
        return []

    def _check_boundary(self, side: _Side, p: int, end: int):
        """At a known frame boundary (stream start, end of a cut frame) a plausible header is enough."""
        if side.direction is REQUEST:
            head = _check_request(side.buf, p, end, side.max_frame, False)
            return head if head is _WAIT else head is not None
        if end - p < 4:
            return _WAIT
        return 4 <= _I32.unpack_from(side.buf, p)[0] <= side.max_frame

    def _accept(self, side: _Side, p: int, out: list) -> list:
        """A boundary was found at buf index ``p``: report what was skipped, frame the bytes from there."""
        offset = side.buf_offset + p
        skipped = offset - side.scan_start
        pieces = side.pieces_from(p)
        if skipped > 0:
            out.append(Problem(self.connection, side.direction, pieces[0][2] if pieces else self._last_ts, "resync",
                               f"skipped {skipped} bytes to the next {side.direction} frame boundary at offset "
                               f"{offset}", side.scan_start, skipped))
        side.mode = _SYNC
        side.buf = bytearray()
        side.piece_offsets, side.piece_ts = [], []
        side.hint = None
        side.pending = []
        side.head, side.parts, side.need = b"", [], 0
        side.pos = offset
        return pieces

    def _frames_seen(self) -> int:
        return sum(s.frames for s in self._sides.values())

    # ------------------------------------------------------------------------------------------------
    # Gaps and ends

    def _gap(self, side: _Side, gap: StreamGap, out: list) -> None:
        gap_end = gap.offset + gap.length
        if gap.reason == "mid-stream start":
            out.append(Problem(self.connection, side.direction, gap.ts_ns, "gap",
                               "the capture started in the middle of the stream", gap.offset, 0))
            if side.mode is _SCAN and not side.buf:
                side.known_start = False
                side.hint = None
            return
        out.append(Problem(self.connection, side.direction, gap.ts_ns, "gap",
                           f"{gap.length} bytes were not captured ({gap.reason})", gap.offset, gap.length))
        if side.mode is _DEAD:
            pass
        elif side.mode is _SKIP:
            if gap_end > side.skip_to:
                side.start_scan(gap_end, hint=None)
        elif side.mode is _SCAN:
            self._abandon_scan(side, gap.ts_ns, out)
            side.start_scan(gap_end, hint=None)
        elif side.need or side.head:
            frame_end = side.frame_offset + 4 + side.size if side.need else None
            self._truncated(side, gap.ts_ns, f"cut by a capture gap at offset {gap.offset} ({gap.reason})", out)
            if frame_end is not None and gap_end < frame_end:
                side.mode = _SKIP
                side.skip_to = frame_end
            else:
                side.start_scan(gap_end, hint=frame_end if frame_end == gap_end else None)
        else:
            side.start_scan(gap_end, hint=None)
        side.pos = max(side.pos, gap_end)

    def _abandon_scan(self, side: _Side, ts: int, out: list) -> None:
        skipped = side.pos - side.scan_start
        if skipped > 0:
            out.append(Problem(self.connection, side.direction, ts, "resync",
                               f"skipped {skipped} bytes without finding a {side.direction} frame boundary",
                               side.scan_start, skipped))

    def _truncated(self, side: _Side, ts: int, why: str, out: list) -> None:
        """The frame being collected will not complete."""
        prefix = side.partial_prefix(8)
        received = side.size - side.need if side.need else len(side.head)
        api_key = api_version = corr = None
        if side.direction is REQUEST and len(prefix) >= 8:
            api_key, api_version, corr = _KEY_VERSION_ID.unpack_from(prefix)
            self._expect_truncated(side, api_key, api_version, corr)
        elif side.direction is RESPONSE and len(prefix) >= 4:
            corr = _I32.unpack_from(prefix)[0]
            if not self._sasl_responses or (self._fifo and self._fifo[0].correlation_id == corr):
                if self._held and self._fifo_index(corr) is not None:
                    self._release_held("no request with this correlation id was captured before a later response",
                                       out)
                request = self._answer(corr, out)
                if request is not None:
                    api_key, api_version = request.api_key, request.api_version
        size = f"of {side.size} bytes " if side.need else ""
        out.append(Problem(self.connection, side.direction, ts, "truncated_frame",
                           f"{side.direction} frame {size}{why}; {received} bytes were received",
                           side.frame_offset, side.size if side.need else None, api_key, api_version, corr))
        side.head, side.parts, side.need = b"", [], 0

    def _expect_truncated(self, side: _Side, api_key: int, api_version: int, corr: int) -> None:
        """Keeps the cut request's place in the FIFO, so its response is recognised (but not decoded)."""
        versions = _VERSIONS.get(api_key)
        if versions is None or not versions[0] <= api_version <= versions[1] or corr < 0:
            return  # not a request header (a SASL token, or garbage): nothing to expect
        if api_key == PRODUCE:
            header_version = _header_version(api_key, api_version)
            prefix = side.partial_prefix(1024)
            client_id_length = _I16.unpack_from(prefix, 8)[0] if len(prefix) >= 10 else -1
            if _produce_acks(prefix, api_version, header_version, client_id_length) == 0:
                return
        self._fifo.append(_Truncated(side.frame_ts, side.frame_offset, side.size, api_key, api_version, corr))

    def _finish_side(self, side: _Side, ts: int, why: str, out: list) -> None:
        while side.mode is _SCAN and side.buf and not self._dead:
            pieces = self._scan(side, out, final=True)
            if not pieces:
                break
            for offset, data, piece_ts in pieces:
                self._feed_side(side, offset, data, piece_ts, out)
        if self._dead:
            return
        if side.mode is _SCAN:
            self._abandon_scan(side, ts, out)
        elif side.mode is _SYNC and (side.need or side.head):
            self._truncated(side, ts, why, out)
        side.mode = _DEAD
        side.buf = bytearray()

    def _end_epoch(self, ts: int, why: str, out: list) -> None:
        """Every direction is done: report what is left and start afresh."""
        for side in self._sides.values():
            if not side.ended:
                self._finish_side(side, ts, "the stream ended", out)
        self._release_held("no request with this correlation id was captured", out)
        while self._fifo:
            request = self._fifo.popleft()
            out.append(Problem(self.connection, REQUEST, request.ts_ns, "unanswered_request", why, request.offset,
                               request.size, request.api_key, request.api_version, request.correlation_id))
        self._new_epoch_state()

    # ------------------------------------------------------------------------------------------------
    # Frames and correlation

    def _frame_done(self, side: _Side, frame: bytes, end_ts: int, out: list) -> None:
        side.frames += 1
        if side.direction is REQUEST:
            self._request(side, frame, end_ts, out)
        else:
            self._response(side, frame, end_ts, out)

    def _request(self, side: _Side, frame: bytes, end_ts: int, out: list) -> None:
        n = len(frame)
        valid = False
        if n >= 8:
            key, version, corr = _KEY_VERSION_ID.unpack_from(frame)
            versions = _VERSIONS.get(key)
            valid = versions is not None and versions[0] <= version <= versions[1] and corr >= 0
        if self._sasl_requests:
            if not valid:
                self._sasl_token(side, out)
                return
            self._sasl_requests = False
        if n < 8:
            out.append(Problem(self.connection, REQUEST, side.frame_ts, "undecodable",
                               f"a {n}-byte request frame is too short for a request header", side.frame_offset, n))
            return
        header_version = _header_version(key, version)
        client_id = None
        client_id_length = -1
        if header_version >= 1 and n >= 10:
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
        request = KafkaFrame(self.connection, REQUEST, self.client, self.broker, side.frame_ts, end_ts,
                             side.frame_offset, n, key, version, corr, client_id, frame)
        out.append(request)
        side.last_corr = corr
        if key == SASL_HANDSHAKE and version == 0:
            self._sasl_requests = True
        if key == PRODUCE and _produce_acks(frame, version, header_version, client_id_length) == 0:
            return  # acks=0: no response will come
        self._fifo.append(request)
        self._fifo_bytes += n
        while len(self._fifo) > self.max_outstanding or self._fifo_bytes > self.max_outstanding_bytes:
            old = self._fifo.popleft()
            self._fifo_bytes -= len(old.frame)
            out.append(Problem(self.connection, REQUEST, old.ts_ns, "unanswered_request",
                               "too many requests outstanding without responses (is the response direction missing "
                               "from the capture?)", old.offset, old.size, old.api_key, old.api_version,
                               old.correlation_id))
        if self._held:
            self._retry_held(out)
        responses = self._sides.get(self.broker)
        if responses is not None and responses.mode is _SCAN and responses.buf and responses.hint is None:
            self._look_back(responses, corr, out)

    def _look_back(self, side: _Side, corr: int, out: list) -> None:
        """A new outstanding request may settle a response boundary candidate, or be answered by response
        bytes already buffered (when the request was framed late): scan the response bytes again."""
        at = side.buf.find(_I32.pack(corr), 4)
        if at != -1 and at - 4 < side.scan_pos:
            side.scan_pos = at - 4
        elif not side.pending:
            return
        for offset, data, ts in self._scan(side, out, final=False):
            self._feed_side(side, offset, data, ts, out)

    def _response(self, side: _Side, frame: bytes, end_ts: int, out: list) -> None:
        corr = _I32.unpack_from(frame)[0] if len(frame) >= 4 else None
        if self._sasl_responses:
            if corr is None or not self._fifo or self._fifo[0].correlation_id != corr:
                self._sasl_token(side, out)
                return
            self._sasl_responses = False
        if corr is None:
            out.append(Problem(self.connection, RESPONSE, side.frame_ts, "unmatched_response",
                               f"a {len(frame)}-byte response frame is too short for a correlation id",
                               side.frame_offset, len(frame)))
            return
        held = _Held(side.frame_offset, side.frame_ts, end_ts, len(frame), frame, corr)
        if self._fifo_index(corr) is None:
            self._hold(held, out)
            return
        if self._held:  # responses come in request order: the held ones will never match
            self._release_held("no request with this correlation id was captured before a later response", out)
        self._match(held, out)

    def _fifo_index(self, corr: int) -> int | None:
        fifo = self._fifo
        if fifo and fifo[0].correlation_id == corr:
            return 0
        for index, request in enumerate(fifo):
            if request.correlation_id == corr:
                return index
        return None

    def _answer(self, corr: int, out: list) -> KafkaFrame | None:
        """Pops the request ``corr`` answers; the ones before it went unanswered."""
        index = self._fifo_index(corr)
        if index is None:
            return None
        for _ in range(index):
            skipped = self._fifo.popleft()
            self._fifo_bytes -= len(skipped.frame)
            out.append(Problem(self.connection, REQUEST, skipped.ts_ns, "unanswered_request",
                               f"no response was captured before the response to the later request {corr}",
                               skipped.offset, skipped.size, skipped.api_key, skipped.api_version,
                               skipped.correlation_id))
        request = self._fifo.popleft()
        self._fifo_bytes -= len(request.frame)
        return request

    def _match(self, held: _Held, out: list) -> None:
        request = self._answer(held.correlation_id, out)
        if type(request) is _Truncated:
            self._unmatched(held, f"its request ({_api_name(request.api_key)} v{request.api_version}) was cut by a "
                            "capture gap", out, request)
            return
        frame = held.frame
        out.append(KafkaFrame(self.connection, RESPONSE, self.client, self.broker, held.ts_ns, held.end_ts_ns,
                              held.offset, held.size, request.api_key, request.api_version, held.correlation_id,
                              None, frame, request))
        if request.api_key == SASL_HANDSHAKE and request.api_version == 0 and held.size >= 6 \
                and _I16.unpack_from(frame, 4)[0] == 0:
            self._sasl_responses = True

    def _hold(self, held: _Held, out: list) -> None:
        self._held.append(held)
        self._held_bytes += held.size
        requests = self._sides.get(self.client)
        if requests is not None and (requests.ended or requests.mode is _DEAD):
            self._release_held("no request with this correlation id was captured", out)
        while len(self._held) > self.max_held or self._held_bytes > self.max_held_bytes:
            self._unmatched(self._held.popleft(), "no request with this correlation id was captured", out)

    def _release_held(self, why: str, out: list) -> None:
        while self._held:
            self._unmatched(self._held.popleft(), why, out)

    def _retry_held(self, out: list) -> None:
        while self._held:
            index = next((i for i, h in enumerate(self._held) if self._fifo_index(h.correlation_id) is not None),
                         None)
            if index is None:
                return
            for _ in range(index):
                self._unmatched(self._held.popleft(), "no request with this correlation id was captured before a "
                                "later response", out)
            held = self._held.popleft()
            self._held_bytes -= held.size
            self._match(held, out)

    def _unmatched(self, held: _Held, why: str, out: list, request: _Truncated | None = None) -> None:
        if request is None:
            self._held_bytes -= held.size
        out.append(KafkaFrame(self.connection, RESPONSE, self.client, self.broker, held.ts_ns, held.end_ts_ns,
                              held.offset, held.size, None, None, held.correlation_id, None, held.frame, None))
        out.append(Problem(self.connection, RESPONSE, held.ts_ns, "unmatched_response",
                           f"response {held.correlation_id}: {why}", held.offset, held.size,
                           request and request.api_key, request and request.api_version, held.correlation_id))

    def _sasl_token(self, side: _Side, out: list) -> None:
        self.sasl_raw = True
        if "sasl" not in self._reported:
            self._reported.add("sasl")
            out.append(Problem(self.connection, side.direction, side.frame_ts, "sasl",
                               "SASL authentication after SaslHandshake v0: raw SASL tokens without a Kafka header "
                               "were skipped", side.frame_offset))


# ----------------------------------------------------------------------------------------------------
# Helpers for the job


def decode_connection(packets: Iterable[Packet], broker_ports: set[int] | None = None,
                      reassembler: TcpReassembler | None = None, **options) -> Iterator[KafkaFrame | Problem]:
    """Frames and problems of one connection, from its packets in capture order.

    ``options`` go to ``Conversation``; pass a configured ``reassembler`` to change its bounds.
    """
    reassembler = reassembler or TcpReassembler()
    conversation = None
    for packet in packets:
        if conversation is None:
            conversation = Conversation(packet.connection, broker_ports, **options)
        for event in reassembler.feed(packet):
            yield from conversation.feed(event)
    if conversation is not None:
        for event in reassembler.finish():
            yield from conversation.feed(event)
        yield from conversation.finish()


def detect_broker_ports(sample_packets: Iterable[Packet], min_hits: int = 2) -> set[int]:
    """Destination ports of payloads that start with a valid request header, seen at least ``min_hits``
    times and clearly more often than as a source port of such payloads (which would be a client's)."""
    as_destination: Counter = Counter()
    as_source: Counter = Counter()
    for packet in sample_packets:
        payload = packet.payload
        if len(payload) < 14:
            continue
        head = _check_request(payload, 0, len(payload), DEFAULT_MAX_FRAME, True)
        if head is None or head is _WAIT:
            continue
        as_destination[packet.dport] += 1
        as_source[packet.sport] += 1
    return {port for port, hits in as_destination.items() if hits >= min_hits and hits > 2 * as_source[port]}

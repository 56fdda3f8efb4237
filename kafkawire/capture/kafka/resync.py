"""Where a Kafka frame may start, in the bytes of a direction that lost sync (or never had it).

A capture can start in the middle of a connection, and a gap can cut a frame whose size was never
seen: the frames that follow are found again by these checks. Requests: a size prefix and header that
``framing.peek_request_head`` accepts, then (when guessing inside binary data) the client id the
connection is known to use or a printable one, and a small tag section; a candidate is accepted when
the frame it starts is followed by another such header. Responses: a size and one of the outstanding
correlation ids, followed by the response to the next one. ``request_candidates`` and
``response_candidates`` find the positions worth checking fast (a regular expression, ``bytes.find``);
the verdicts say accept, wait for more bytes, or no.
"""
from __future__ import annotations

import re
import struct
from functools import lru_cache
from typing import Iterator

from ...codec.primitives import Invalid, read_uvarint
from ...framing import REQUEST_HEAD_SIZE, peek_request_head
from ...messages import apis

MAX_CLIENT_ID = 1024        # longer client ids are implausible when hunting for a frame boundary
MAX_HEADER_TAGS = 8

VERSIONS = {info.key: info.valid_versions for info in apis()}
_INFO = {info.key: info for info in apis()}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PAIR = struct.Struct(">ii")
_PRINTABLE = re.compile(rb"[\x20-\x7e]*")

WAIT = object()  # a check that needs more bytes
ACCEPT, PENDING = "accept", "pending"
ANY_CLIENT = object()  # the client id is not known yet: a boundary guess needs a non-empty printable one


@lru_cache(maxsize=None)
def header_version(key: int, version: int) -> int:
    """The request header version of an API version (1 for an API key the specs do not know)."""
    info = _INFO.get(key)
    return 1 if info is None else info.request_header_version(version)


def is_request_header(key: int, version: int, correlation_id: int) -> bool:
    """Whether a request header's first fields are an API version the specs define and a client's id."""
    versions = VERSIONS.get(key)
    return versions is not None and versions[0] <= version <= versions[1] and correlation_id >= 0


def check_request(buf, p: int, end: int, max_frame: int, strict: bool, client_id=ANY_CLIENT):
    """Does ``buf[p:end]`` start with a size prefix and a plausible request header?

    Returns the ``framing.RequestHead``, None (no) or WAIT (not enough bytes). ``strict`` is for
    guessing a boundary inside binary data, where a header with an empty client id turns up by chance
    far too often: it wants the ``client_id`` this connection is known to use (bytes, or None for null)
    or else a non-empty printable one, and a small tag section; and it refuses v0 headers, which
    have no client id to check.
    """
    if end - p < REQUEST_HEAD_SIZE:
        return WAIT
    head = peek_request_head(buf, p, max_frame)
    if head is None:
        return None
    if head.header_version == 0:
        return None if strict else head
    if not strict:
        return head
    cid = head.client_id_length
    pos = p + REQUEST_HEAD_SIZE
    if client_id is ANY_CLIENT:
        if cid < 1 or cid > MAX_CLIENT_ID:
            return None
        if end < pos + cid:
            return WAIT
        if _PRINTABLE.fullmatch(buf, pos, pos + cid) is None:
            return None
    elif client_id is None:
        if cid != -1:
            return None
    elif cid != len(client_id):
        return None
    elif cid:
        if end < pos + cid:
            return WAIT
        if buf[pos:pos + cid] != client_id:
            return None
    pos += max(cid, 0)
    if head.header_version == 2:
        if end <= pos:
            return WAIT
        if buf[pos] > MAX_HEADER_TAGS:
            return None
    return head


@lru_cache(maxsize=8)
def _candidate_pattern(max_frame: int) -> re.Pattern:
    """Positions that might start a request: a size below the limit, a small api key and version, a
    non-negative correlation id and a client id length below MAX_CLIENT_ID (or -1 for null)."""
    def byte_range(high: int) -> bytes:
        return b"[" + re.escape(b"\x00") + b"-" + re.escape(bytes([high])) + b"]"
    max_key = max(VERSIONS)
    max_version = max(high for _, high in VERSIONS.values())
    return re.compile(b"(?=" + byte_range(max_frame >> 24) + b"[\\s\\S]{3}\\x00" + byte_range(max_key) + b"\\x00"
                      + byte_range(max_version) + byte_range(0x7F) + b"[\\s\\S]{3}(?:"
                      + byte_range((MAX_CLIENT_ID >> 8) - 1) + b"|\\xff\\xff))")


def request_candidates(buf, start: int, end: int, max_frame: int) -> Iterator[int]:
    """Positions from ``start`` on that pass the cheap byte test for a request header, in order."""
    return (match.start() for match in _candidate_pattern(max_frame).finditer(buf, start, end))


def request_verdict(buf, p: int, end: int, max_frame: int, window: int, strong, expect_corr, final: bool,
                     client_id=ANY_CLIENT):
    """Does a request frame start at ``p``? ACCEPT, PENDING (more bytes needed) or None.

    It needs a valid header followed by another valid header. A frame that runs to or past the end of the
    data waits for more, up to ``window`` bytes; beyond that (or at the end of the stream) it is taken only
    if ``strong(p, corr)`` (it starts a segment) or its correlation id is the expected one.
    """
    head = check_request(buf, p, end, max_frame, True, client_id)
    if head is None:
        return None
    if head is WAIT:
        return None if final else PENDING
    frame_end = p + 4 + head[0]
    if frame_end < end:
        following = check_request(buf, frame_end, end, max_frame, True, client_id)
        if following is None:
            return None
        if following is not WAIT:
            return ACCEPT
        if not final:
            return PENDING
    if final or end - p > window:
        return ACCEPT if strong(p, head[3]) or head[3] == expect_corr else None
    return PENDING


def response_candidates(buf, start: int, end: int, ids: list) -> Iterator[int]:
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


def response_verdict(buf, p: int, end: int, max_frame: int, window: int, strong, ids: list, final: bool):
    """Does a response to one of ``ids`` start at ``p``? ACCEPT, PENDING (more bytes needed) or None.

    A response header is only a size and a correlation id, so the evidence must come from around it: the
    next response answers the next outstanding request. Until that can be checked (the data ends, or the
    next request is not framed yet) the candidate waits, up to ``window`` bytes; beyond that (or at the
    end of the stream) it is taken only if it answers the oldest outstanding request and starts a segment.
    """
    if end - p < 8:
        return None if final else PENDING
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
            return ACCEPT if next_id == ids[index + 1] else None
        if next_id <= corr and next_id in ids:
            return None  # a response to an earlier request cannot follow
    elif end > frame_end and final:
        return None  # the stream ends a few bytes after it: too short for the next response
    if final or end - p > window:
        return ACCEPT if index == 0 and strong(p, corr) else None
    return PENDING


def looks_like_tls(data) -> bool:
    """A TLS record header: content type 20-23, version 3.x."""
    return len(data) >= 3 and 20 <= data[0] <= 23 and data[1] == 3 and data[2] <= 4


def produce_acks(frame, version: int, header_version: int, client_id_length: int) -> int | None:
    """Produce's ``acks``, read past the header and the transactional id; None if the frame is too short."""
    try:
        pos = 10 + max(client_id_length, 0) if header_version >= 1 else 8
        if header_version == 2:
            count, pos = read_uvarint(frame, pos)
            for _ in range(count):
                _, pos = read_uvarint(frame, pos)
                length, pos = read_uvarint(frame, pos)
                pos += length
        if version >= 9:
            length, pos = read_uvarint(frame, pos)  # compact nullable string: length + 1, 0 for null
            pos += max(length - 1, 0)
        elif version >= 3:
            length = _I16.unpack_from(frame, pos)[0]
            pos += 2 + max(length, 0)
        return _I16.unpack_from(frame, pos)[0]
    except (IndexError, Invalid, struct.error):
        return None


def api_name(key: int) -> str:
    info = _INFO.get(key)
    return info.name if info else f"api key {key}"


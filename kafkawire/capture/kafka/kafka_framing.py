"""Kafka framing of one direction of a connection: size-prefixed frames out of stream bytes, and the
resync when the way is lost (a gap, a size above the limit, a capture that starts mid-stream).

``DirectionFraming`` is one direction's framing, state and moves; a ``Conversation``
(``kafka_connection``) owns one per direction. Modes: SYNC frames by size prefix without quadratic
copies (a frame's pieces are joined once); SCAN buffers bytes while looking for a frame boundary
(``resync``); SKIP discards the rest of a frame cut by a gap whose end is known; DEAD ignores
everything. Complete frames go to the conversation's correlation (``correlation.RequestCorrelation``),
which the framing also asks for the outstanding correlation ids a response resync looks for.
"""
from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ...framing import peek_request
from ..model import Problem, StreamGap
from .resync import (
    ACCEPT, ANY_CLIENT, PENDING, WAIT, check_request, looks_like_tls, request_candidates, request_verdict,
    response_candidates, response_verdict,
)

REQUEST, RESPONSE = "request", "response"
SYNC, SCAN, SKIP, DEAD = "sync", "scan", "skip", "dead"
MAX_SCANNED_IDS = 64        # outstanding ids looked for when resyncing responses
MAXPENDING = 16            # candidate boundaries waiting for more bytes, per direction
_I32 = struct.Struct(">i")

if TYPE_CHECKING:
    from .correlation import RequestCorrelation


class Connection(Protocol):
    """What a direction's framing needs of the connection it belongs to (``Conversation``)."""
    connection: str
    scan_window: int
    dead: bool          # the connection was given up: frame nothing more
    last_ts: int        # the capture time of the latest event

    def frames_seen(self) -> int: ...

    def give_up(self, kind: str, direction: str | None, reason: str, out: list) -> None: ...

    def tls_start(self, data: bytes | bytearray, sender: str | None, direction: str | None, final: bool,
                  out: list) -> bool: ...


class DirectionFraming:
    """The framing of one direction within the current epoch: its state (mode, position, the frame being
    collected, the bytes buffered while scanning) and the moves that frame its bytes.

    Modes: SYNC frames by size prefix; SCAN buffers bytes while looking for a frame boundary (from the
    stream start, after a gap or after lost sync); SKIP discards the rest of a frame cut by a gap whose
    end is known; DEAD ignores everything.
    """

    __slots__ = ("owner", "correlation", "direction", "sender", "max_frame", "mode", "pos", "ended", "frames",
                 "head", "parts", "need", "size", "frame_offset", "frame_ts", "skip_to",
                 "buf", "buf_offset", "piece_offsets", "piece_ts", "scan_pos", "scan_start", "hint", "known_start",
                 "pending", "last_corr", "client_id", "client_id_text")

    def __init__(self, direction: str, sender: str, max_frame: int, owner: Connection,
                 correlation: RequestCorrelation):
        self.owner = owner              # the connection, for its problems' names and its verdicts
        self.correlation = correlation  # where complete frames go
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
        self.last_corr: int | None = None
        self.client_id = ANY_CLIENT  # the raw client id this client uses, once a request showed it
        self.client_id_text: str | None = None
        self.start_scan(0, hint=0, known_start=True)

    def start_scan(self, offset: int, hint: int | None, known_start: bool = False) -> None:
        self.mode = SCAN
        self.buf = bytearray()
        self.buf_offset = offset  # stream offset of buf[0]
        self.piece_offsets: list[int] = []  # where each buffered piece starts, and when it was captured
        self.piece_ts: list[int] = []
        self.scan_pos = 0         # buf index: no frame starts before it
        self.scan_start = offset  # where this scan began, for the resync report
        self.hint = hint          # a stream offset known to be a frame boundary
        self.known_start = known_start
        self.pending: list[int] = []  # buf indexes of candidate boundaries waiting for more bytes
        self.head = b""
        self.parts: list[bytes | memoryview] = []
        self.need = 0

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

    # ------------------------------------------------------------------------------------------------
    # Framing

    def feed(self, offset: int, data, ts: int, out: list) -> None:
        work = deque([(offset, data, ts)])
        while work:
            offset, data, ts = work.popleft()
            n = len(data)
            if offset != self.pos:
                if offset + n <= self.pos:
                    continue
                if offset < self.pos:
                    data = memoryview(data)[self.pos - offset:]
                    n = len(data)
                    offset = self.pos
                else:  # the reassembler announces every hole; be safe anyway
                    self.gap(StreamGap(self.sender, self.pos, offset - self.pos, ts, "unannounced hole"), out)
            while n and not self.owner.dead:
                mode = self.mode
                if mode is SYNC:
                    used = self.sync(offset, data, ts, out)
                elif mode is SCAN:
                    used = n
                    pieces = self._scan_data(offset, data, ts, out)
                    if pieces:
                        work.extendleft(reversed(pieces))
                elif mode is SKIP:
                    used = min(n, self.skip_to - offset)
                    self.pos = offset + used
                    if self.pos == self.skip_to:
                        self.start_scan(self.pos, hint=self.pos)
                else:
                    self.pos = offset + n
                    used = n
                if used >= n:
                    break
                data = memoryview(data)[used:]
                offset += used
                n -= used

    def sync(self, offset: int, data, ts: int, out: list) -> int:
        """Frames ``data`` while in sync; returns the bytes used (fewer if the mode changed)."""
        view = data if type(data) is memoryview else memoryview(data)
        n = len(view)
        i = 0
        while i < n:
            need = self.need
            if need:
                if n - i < need:
                    self.parts.append(view[i:] if i else view)
                    self.need = need - (n - i)
                    self.pos = offset + n
                    return n
                self.parts.append(view[i:i + need])
                i += need
                self.need = 0
                frame = b"".join(self.parts)
                self.parts = []
                self.pos = offset + i
                self.correlation.frame_done(self, frame, ts, out)
                if self.mode is not SYNC:
                    return i
                continue
            if self.head:
                take = min(4 - len(self.head), n - i)
                self.head += view[i:i + take]
                i += take
                if len(self.head) < 4:
                    self.pos = offset + n
                    return n
                size = _I32.unpack(self.head)[0]
                self.head = b""
            elif n - i >= 4:
                size = _I32.unpack_from(view, i)[0]
                self.frame_offset = offset + i
                self.frame_ts = ts
                i += 4
            else:
                self.head = bytes(view[i:])
                self.frame_offset = offset + i
                self.frame_ts = ts
                self.pos = offset + n
                return n
            self.pos = offset + i
            if size < 0 or size > self.max_frame:
                self._lost_sync(size, ts, out)
                return i
            self.size = size
            if n - i >= size:
                frame = bytes(view[i:i + size])
                i += size
                self.pos = offset + i
                self.correlation.frame_done(self, frame, ts, out)
                if self.mode is not SYNC:
                    return i
            else:
                self.parts = [view[i:]]
                self.need = size - (n - i)
                self.pos = offset + n
                return n
        self.pos = offset + n
        return n

    def _lost_sync(self, size: int, ts: int, out: list) -> None:
        out.append(Problem(self.owner.connection, self.direction, ts, "oversized_frame",
                           f"size prefix {size} is outside 0..{self.max_frame}: framing lost sync; resyncing",
                           self.frame_offset, None))
        self.start_scan(self.pos, hint=None)

    def _scan_data(self, offset: int, data, ts: int, out: list) -> list:
        """Buffers ``data`` while looking for a frame boundary; returns the pieces to frame once found."""
        if not self.buf:
            self.buf_offset = offset
            self.scan_pos = 0
            self.piece_offsets.clear()
            self.piece_ts.clear()
        self.piece_offsets.append(offset)
        self.piece_ts.append(ts)
        self.buf += data
        self.pos = offset + len(data)
        return self.scan(out, final=False)

    def scan(self, out: list, final: bool) -> list:
        buf = self.buf
        end = len(buf)
        if self.hint is not None:
            p = self.hint - self.buf_offset
            verdict = self._check_boundary(p, end)
            if verdict is WAIT:
                return []
            if verdict:
                return self._accept(p, out)
            if self.known_start and not self.owner.frames_seen():
                if looks_like_tls(buf[p:p + 3]):  # given up once its ClientHello is read (the hint kept till then)
                    self.owner.tls_start(buf[p:], None, self.direction, final, out)
                else:
                    self.owner.give_up("not_kafka", self.direction,
                                       f"the {self.direction} stream does not start with a valid Kafka frame", out)
                return []
            self.hint = None
            self.scan_pos = max(self.scan_pos, p + 1)
        # Candidates still waiting for bytes do not block later ones: the earliest that validates wins.
        if self.direction is REQUEST:
            expect = None if self.last_corr is None else self.last_corr + 1
            window = self.owner.scan_window
            verdict = partial(request_verdict, buf, end=end, max_frame=self.max_frame, window=window,
                              strong=self.is_piece_start, expect_corr=expect, final=final, client_id=self.client_id)
            candidates, tail = request_candidates(buf, self.scan_pos, end, self.max_frame), 13
        else:
            ids = self.correlation.outstanding_ids(MAX_SCANNED_IDS)
            verdict = partial(response_verdict, buf, end=end, max_frame=self.max_frame, window=self.owner.scan_window,
                              strong=self.is_piece_start, ids=ids, final=final)
            candidates, tail = response_candidates(buf, self.scan_pos, end, ids), 7
        for p in list(self.pending):
            found = verdict(p)
            if found is ACCEPT:
                return self._accept(p, out)
            if found is None:
                self.pending.remove(p)
        for p in candidates:
            self.scan_pos = p + 1
            found = verdict(p)
            if found is ACCEPT:
                return self._accept(p, out)
            if found is PENDING and p not in self.pending:
                self.pending.append(p)
                if len(self.pending) > MAXPENDING:
                    self.pending.pop(0)
        self.scan_pos = max(self.scan_pos, end - tail)
        first = min(self.pending, default=self.scan_pos)
        if self.direction is REQUEST and not self.owner.frames_seen():
            # Not even one frame in more than the largest frame: this is not Kafka.
            rejected = self.buf_offset + first - self.scan_start
            if rejected > self.max_frame + self.owner.scan_window:
                self.owner.give_up("not_kafka", self.direction, f"no valid Kafka request frame in {rejected} bytes",
                                   out)
                return []
        keep_from = min(first, self.scan_pos)
        if self.direction is RESPONSE:  # keep some history for responses whose request is framed late
            keep_from = min(keep_from, max(0, end - self.owner.scan_window))
        if keep_from > 65536 and keep_from * 2 > end:
            self.trim(keep_from)
        return []

    def _check_boundary(self, p: int, end: int):
        """At a known frame boundary (stream start, end of a cut frame) a plausible header is enough."""
        if self.direction is REQUEST:
            head = check_request(self.buf, p, end, self.max_frame, False)
            return head if head is WAIT else head is not None
        if end - p < 4:
            return WAIT
        return 4 <= _I32.unpack_from(self.buf, p)[0] <= self.max_frame

    def _accept(self, p: int, out: list) -> list:
        """A boundary was found at buf index ``p``: report what was skipped, frame the bytes from there."""
        offset = self.buf_offset + p
        skipped = offset - self.scan_start
        pieces = self.pieces_from(p)
        if skipped > 0:
            ts = pieces[0][2] if pieces else self.owner.last_ts
            out.append(Problem(self.owner.connection, self.direction, ts, "resync",
                               f"skipped {skipped} bytes to the next {self.direction} frame boundary at offset "
                               f"{offset}", self.scan_start, skipped))
        self.mode = SYNC
        self.buf = bytearray()
        self.piece_offsets, self.piece_ts = [], []
        self.hint = None
        self.pending = []
        self.head, self.parts, self.need = b"", [], 0
        self.pos = offset
        return pieces

    def look_back(self, corr: int, out: list) -> None:
        """A new outstanding request may settle a response boundary candidate, or be answered by response
        bytes already buffered (when the request was framed late): scan the response bytes again."""
        at = self.buf.find(_I32.pack(corr), 4)
        if at != -1 and at - 4 < self.scan_pos:
            self.scan_pos = at - 4
        elif not self.pending:
            return
        for offset, data, ts in self.scan(out, final=False):
            self.feed(offset, data, ts, out)

    # ------------------------------------------------------------------------------------------------
    # Gaps and ends

    def gap(self, gap: StreamGap, out: list) -> None:
        gap_end = gap.offset + gap.length
        if gap.reason == "mid-stream start":
            out.append(Problem(self.owner.connection, self.direction, gap.ts_ns, "gap",
                               "the capture started in the middle of the stream", gap.offset, 0))
            if self.mode is SCAN and not self.buf:
                self.known_start = False
                self.hint = None
            return
        out.append(Problem(self.owner.connection, self.direction, gap.ts_ns, "gap",
                           f"{gap.length} bytes were not captured ({gap.reason})", gap.offset, gap.length))
        if self.mode is DEAD:
            pass
        elif self.mode is SKIP:
            if gap_end > self.skip_to:
                self.start_scan(gap_end, hint=None)
        elif self.mode is SCAN:
            self.abandon_scan(gap.ts_ns, out)
            self.start_scan(gap_end, hint=None)
        elif self.need or self.head:
            frame_end = self.frame_offset + 4 + self.size if self.need else None
            self.truncated(gap.ts_ns, f"cut by a capture gap at offset {gap.offset} ({gap.reason})", out)
            if frame_end is not None and gap_end < frame_end:
                self.mode = SKIP
                self.skip_to = frame_end
            else:
                self.start_scan(gap_end, hint=frame_end if frame_end == gap_end else None)
        else:
            self.start_scan(gap_end, hint=None)
        self.pos = max(self.pos, gap_end)

    def abandon_scan(self, ts: int, out: list) -> None:
        skipped = self.pos - self.scan_start
        if skipped > 0:
            out.append(Problem(self.owner.connection, self.direction, ts, "resync",
                               f"skipped {skipped} bytes without finding a {self.direction} frame boundary",
                               self.scan_start, skipped))

    def truncated(self, ts: int, why: str, out: list) -> None:
        """The frame being collected will not complete."""
        prefix = self.partial_prefix(8)
        received = self.size - self.need if self.need else len(self.head)
        api_key = api_version = corr = None
        if self.direction is REQUEST and len(prefix) >= 8:
            api_key, api_version, corr = peek_request(prefix)
            self.correlation.expect_truncated(self, api_key, api_version, corr)
        elif self.direction is RESPONSE and len(prefix) >= 4:
            corr = _I32.unpack_from(prefix)[0]
            api_key, api_version = self.correlation.truncated_response(corr, out)
        size = f"of {self.size} bytes " if self.need else ""
        out.append(Problem(self.owner.connection, self.direction, ts, "truncated_frame",
                           f"{self.direction} frame {size}{why}; {received} bytes were received",
                           self.frame_offset, self.size if self.need else None, api_key, api_version, corr))
        self.head, self.parts, self.need = b"", [], 0

    def finish(self, ts: int, why: str, out: list) -> None:
        while self.mode is SCAN and self.buf and not self.owner.dead:
            pieces = self.scan(out, final=True)
            if not pieces:
                break
            for offset, data, piece_ts in pieces:
                self.feed(offset, data, piece_ts, out)
        if self.owner.dead:
            return
        if self.mode is SCAN:
            self.abandon_scan(ts, out)
        elif self.mode is SYNC and (self.need or self.head):
            self.truncated(ts, why, out)
        self.mode = DEAD
        self.buf = bytearray()

"""Kafka framing of one direction of a connection: size-prefixed frames out of stream bytes, and the
resync when the way is lost (a gap, a size above the limit, a capture that starts mid-stream).

``Direction`` holds one direction's framing state; ``DirectionFraming`` is the part of ``Conversation``
(``kafka_connection``) that moves it along: SYNC frames by size prefix without quadratic copies (a
frame's pieces are joined once); SCAN buffers bytes while looking for a frame boundary (``resync``);
SKIP discards the rest of a frame cut by a gap whose end is known; DEAD ignores everything. Complete
frames go to the conversation's ``_frame_done`` (``correlation``).
"""
from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections import deque
from functools import partial
from itertools import islice

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


class Direction:
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
        self.client_id = ANY_CLIENT  # the raw client id this client uses, once a request showed it
        self.client_id_text = None
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


class DirectionFraming:
    """Framing, resync, gaps and ends of each direction: a part of ``Conversation``, which holds the
    state these methods use (``_sides``, ``_fifo``, ``scan_window``...) and the correlation they hand
    complete frames to."""

    def _feed_side(self, side: Direction, offset: int, data, ts: int, out: list) -> None:
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
                if mode is SYNC:
                    used = self._sync(side, offset, data, ts, out)
                elif mode is SCAN:
                    used = n
                    pieces = self._scan_data(side, offset, data, ts, out)
                    if pieces:
                        work.extendleft(reversed(pieces))
                elif mode is SKIP:
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

    def _sync(self, side: Direction, offset: int, data, ts: int, out: list) -> int:
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
                if side.mode is not SYNC:
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
                if side.mode is not SYNC:
                    return i
            else:
                side.parts = [view[i:]]
                side.need = size - (n - i)
                side.pos = offset + n
                return n
        side.pos = offset + n
        return n

    def _lost_sync(self, side: Direction, size: int, ts: int, out: list) -> None:
        out.append(Problem(self.connection, side.direction, ts, "oversized_frame",
                           f"size prefix {size} is outside 0..{side.max_frame}: framing lost sync; resyncing",
                           side.frame_offset, None))
        side.start_scan(side.pos, hint=None)

    def _scan_data(self, side: Direction, offset: int, data, ts: int, out: list) -> list:
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

    def _scan(self, side: Direction, out: list, final: bool) -> list:
        buf = side.buf
        end = len(buf)
        if side.hint is not None:
            p = side.hint - side.buf_offset
            verdict = self._check_boundary(side, p, end)
            if verdict is WAIT:
                return []
            if verdict:
                return self._accept(side, p, out)
            if side.known_start and not self._frames_seen():
                if looks_like_tls(buf[p:p + 3]):  # given up once its ClientHello is read (the hint kept till then)
                    self._tls_start(buf[p:], None, side.direction, final, out)
                else:
                    self._give_up("not_kafka", side.direction, f"the {side.direction} stream does not start with a "
                                  "valid Kafka frame", out)
                return []
            side.hint = None
            side.scan_pos = max(side.scan_pos, p + 1)
        # Candidates still waiting for bytes do not block later ones: the earliest that validates wins.
        if side.direction is REQUEST:
            expect = None if side.last_corr is None else side.last_corr + 1
            verdict = partial(request_verdict, buf, end=end, max_frame=side.max_frame, window=self.scan_window,
                              strong=side.is_piece_start, expect_corr=expect, final=final, client_id=side.client_id)
            candidates, tail = request_candidates(buf, side.scan_pos, end, side.max_frame), 13
        else:
            ids = [request.correlation_id for request in islice(self._fifo, MAX_SCANNED_IDS)]
            verdict = partial(response_verdict, buf, end=end, max_frame=side.max_frame, window=self.scan_window,
                              strong=side.is_piece_start, ids=ids, final=final)
            candidates, tail = response_candidates(buf, side.scan_pos, end, ids), 7
        for p in list(side.pending):
            found = verdict(p)
            if found is ACCEPT:
                return self._accept(side, p, out)
            if found is None:
                side.pending.remove(p)
        for p in candidates:
            side.scan_pos = p + 1
            found = verdict(p)
            if found is ACCEPT:
                return self._accept(side, p, out)
            if found is PENDING and p not in side.pending:
                side.pending.append(p)
                if len(side.pending) > MAXPENDING:
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

    def _check_boundary(self, side: Direction, p: int, end: int):
        """At a known frame boundary (stream start, end of a cut frame) a plausible header is enough."""
        if side.direction is REQUEST:
            head = check_request(side.buf, p, end, side.max_frame, False)
            return head if head is WAIT else head is not None
        if end - p < 4:
            return WAIT
        return 4 <= _I32.unpack_from(side.buf, p)[0] <= side.max_frame

    def _accept(self, side: Direction, p: int, out: list) -> list:
        """A boundary was found at buf index ``p``: report what was skipped, frame the bytes from there."""
        offset = side.buf_offset + p
        skipped = offset - side.scan_start
        pieces = side.pieces_from(p)
        if skipped > 0:
            out.append(Problem(self.connection, side.direction, pieces[0][2] if pieces else self._last_ts, "resync",
                               f"skipped {skipped} bytes to the next {side.direction} frame boundary at offset "
                               f"{offset}", side.scan_start, skipped))
        side.mode = SYNC
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

    def _gap(self, side: Direction, gap: StreamGap, out: list) -> None:
        gap_end = gap.offset + gap.length
        if gap.reason == "mid-stream start":
            out.append(Problem(self.connection, side.direction, gap.ts_ns, "gap",
                               "the capture started in the middle of the stream", gap.offset, 0))
            if side.mode is SCAN and not side.buf:
                side.known_start = False
                side.hint = None
            return
        out.append(Problem(self.connection, side.direction, gap.ts_ns, "gap",
                           f"{gap.length} bytes were not captured ({gap.reason})", gap.offset, gap.length))
        if side.mode is DEAD:
            pass
        elif side.mode is SKIP:
            if gap_end > side.skip_to:
                side.start_scan(gap_end, hint=None)
        elif side.mode is SCAN:
            self._abandon_scan(side, gap.ts_ns, out)
            side.start_scan(gap_end, hint=None)
        elif side.need or side.head:
            frame_end = side.frame_offset + 4 + side.size if side.need else None
            self._truncated(side, gap.ts_ns, f"cut by a capture gap at offset {gap.offset} ({gap.reason})", out)
            if frame_end is not None and gap_end < frame_end:
                side.mode = SKIP
                side.skip_to = frame_end
            else:
                side.start_scan(gap_end, hint=frame_end if frame_end == gap_end else None)
        else:
            side.start_scan(gap_end, hint=None)
        side.pos = max(side.pos, gap_end)

    def _abandon_scan(self, side: Direction, ts: int, out: list) -> None:
        skipped = side.pos - side.scan_start
        if skipped > 0:
            out.append(Problem(self.connection, side.direction, ts, "resync",
                               f"skipped {skipped} bytes without finding a {side.direction} frame boundary",
                               side.scan_start, skipped))

    def _truncated(self, side: Direction, ts: int, why: str, out: list) -> None:
        """The frame being collected will not complete."""
        prefix = side.partial_prefix(8)
        received = side.size - side.need if side.need else len(side.head)
        api_key = api_version = corr = None
        if side.direction is REQUEST and len(prefix) >= 8:
            api_key, api_version, corr = peek_request(prefix)
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

    def _finish_side(self, side: Direction, ts: int, why: str, out: list) -> None:
        while side.mode is SCAN and side.buf and not self._dead:
            pieces = self._scan(side, out, final=True)
            if not pieces:
                break
            for offset, data, piece_ts in pieces:
                self._feed_side(side, offset, data, piece_ts, out)
        if self._dead:
            return
        if side.mode is SCAN:
            self._abandon_scan(side, ts, out)
        elif side.mode is SYNC and (side.need or side.head):
            self._truncated(side, ts, why, out)
        side.mode = DEAD
        side.buf = bytearray()

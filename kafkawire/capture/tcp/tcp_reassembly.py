"""TCP reassembly of one connection: packets in capture order -> in-order stream pieces per direction.

``TcpReassembler.feed(packet)`` returns the events that packet makes available; ``finish()`` flushes what
is left at the end of the input. Events, per direction (``sender``):

- ``StreamData``: in-order bytes at a stream ``offset`` (0 is the byte after the SYN, or the first byte
  seen when the capture started mid-stream). ``data`` is the packet's payload or a memoryview slice of it,
  never a concatenation.
- ``StreamGap``: bytes that will never come: ``'mid-stream start'`` (offset 0, length 0: the first bytes
  seen are not the start of the stream), ``'lost segment'`` (a hole that outlived the reorder bounds),
  ``'snap length'`` (``Packet.missing``).
- ``StreamEnd``: the direction closed (``'FIN'``, ``'RST'``), the capture ended (``'end of capture'``) or
  the connection started a new epoch (``'connection reused'``, ``'sequence jump'``).
- ``StreamConflict``: a retransmission carried bytes that differ from the ones first captured for the
  same sequence range (first wins; the count says how untrustworthy the capture is).
- ``ConnectionOpen``: a SYN (or SYN-ACK) told which endpoint opened the connection.

Epochs: a SYN with a new initial sequence number after data or FIN/RST (the 4-tuple was reused), or a
sequence jump of 2**30 or more, ends the current epoch: every direction still open gets a StreamEnd
with that reason, and the next StreamData of each direction starts again at offset 0. A consumer that
sees data on a direction after its StreamEnd knows a new epoch began.

Memory: only out-of-order segments are held (bounded by ``max_buffer`` bytes, ``max_segments`` segments
and ``max_hole_ns`` of capture time per direction), plus references to the last ``conflict_segments``
segments delivered, to compare retransmissions against (older retransmissions are dropped unchecked).
"""
from __future__ import annotations

from bisect import bisect_right
from collections import deque
from typing import NamedTuple

from ..model import ACK, FIN, RST, SYN, Packet, StreamData, StreamEnd, StreamGap, endpoint

_M32 = 0xFFFFFFFF
_new_tuple = tuple.__new__  # builds a StreamData without the Python-level __new__ of a NamedTuple
_HALF = 1 << 31
MAX_SEQ_JUMP = 1 << 30  # TCP windows are at most 2**30 bytes: a larger jump is another connection


class StreamConflict(NamedTuple):
    """A retransmission overlapped bytes already captured and ``differing`` of ``length`` bytes differ."""
    sender: str
    offset: int
    length: int
    differing: int
    ts_ns: int


class ConnectionOpen(NamedTuple):
    """A SYN showed which endpoint opened the connection."""
    client: str
    server: str
    ts_ns: int


class _Direction:
    """Reassembly state of one direction within the current epoch."""

    __slots__ = ("sender", "base", "next", "isn", "closed", "fin_at", "starts", "items", "pending_bytes",
                 "hole_since", "recent", "delivered")

    def __init__(self, sender: str, conflict_segments: int):
        self.sender = sender
        # (start, data) delivered lately, for conflict checks
        self.recent: deque[tuple[int, bytes | memoryview]] = deque(maxlen=conflict_segments)
        self.reset()

    def reset(self) -> None:
        self.base: int | None = None  # raw 32-bit sequence number of stream offset 0
        self.next = 0           # stream offset of the next byte to deliver
        self.isn: int | None = None   # from the SYN, when seen
        self.closed = False
        self.fin_at: int | None = None  # stream offset of the FIN, once seen
        self.starts: list[int] = []  # out-of-order pieces, sorted and disjoint: their start offsets ...
        self.items: list[tuple[int, int, bytes | memoryview | None, int]] = []  # ... and (start, end, data or None for a snap-length hole, ts_ns)
        self.pending_bytes = 0
        self.hole_since = 0
        self.recent.clear()
        self.delivered = False  # any byte, gap or FIN delivered in this epoch


def _differing(a, b) -> int:
    if a == b:
        return 0
    return sum(x != y for x, y in zip(bytes(a), bytes(b)))


class TcpReassembler:
    """Reassembles both directions of one TCP connection from its packets in capture order."""

    def __init__(self, max_buffer: int = 8 << 20, max_segments: int = 4096,
                 max_hole_ns: int = 1_000_000_000, conflict_segments: int = 128):
        self.max_buffer = max_buffer
        self.max_segments = max_segments
        self.max_hole_ns = max_hole_ns
        self.conflict_segments = conflict_segments
        self.conflicting_bytes = 0   # differing retransmitted bytes, over the whole connection
        self.epoch = 0
        self._dirs: dict[tuple[str, int], _Direction] = {}
        self._opened = False         # ConnectionOpen emitted in this epoch
        self._waiting = False        # some direction holds out-of-order segments
        self._last_ts = 0

    # ------------------------------------------------------------------------------------------------
    # Input

    def feed(self, packet: Packet) -> list:
        out: list = []
        src, sport = packet.src, packet.sport
        d = self._dirs.get((src, sport))
        if d is None:
            d = self._dirs[(src, sport)] = _Direction(endpoint(src, sport), self.conflict_segments)
        ts = self._last_ts = packet.ts_ns
        flags = packet.flags
        seq = packet.seq
        if flags & SYN:
            self._syn(d, packet, out)
            seq = (seq + 1) & _M32  # the SYN takes one sequence number; any data follows it
        payload = packet.payload
        missing = packet.missing
        if payload or missing:
            base = d.base
            if base is not None and not d.starts and not d.closed and not (seq - base - d.next) & _M32:
                # The in-order fast path (what _data does for a segment that continues the stream).
                start = d.next
                n = len(payload)
                if n:
                    out.append(_new_tuple(StreamData, (d.sender, start, ts, payload)))
                    d.recent.append((start, payload))
                d.next = end = start + n
                d.delivered = True
                if missing:
                    out.append(StreamGap(d.sender, end, missing, ts, "snap length"))
                    d.next = end + missing
                if d.fin_at is not None and d.next >= d.fin_at:
                    self._close(d, ts, "FIN", out)
            else:
                self._data(d, seq, payload, missing, ts, out)
        if flags & (FIN | RST):
            if flags & FIN:
                self._fin(d, (seq + len(payload) + missing) & _M32, ts, out)
            if flags & RST:  # a reset aborts the whole connection, the peer's direction too
                for other in self._dirs.values():
                    if not other.closed and other.base is not None:
                        self._flush(other, ts, out)
                        self._close(other, ts, "RST", out)
        if self._waiting:
            for other in self._dirs.values():
                if other.starts and ts - other.hole_since > self.max_hole_ns:
                    self._expire(other, ts, out)
            self._waiting = any(other.starts for other in self._dirs.values())
        return out

    def finish(self, ts_ns: int | None = None) -> list:
        """Flushes every direction at the end of the input: holes become gaps, open directions end."""
        ts = self._last_ts if ts_ns is None else ts_ns
        out: list = []
        for d in self._dirs.values():
            if d.base is None or d.closed:
                continue
            self._flush(d, ts, out)
            if not d.closed:
                self._close(d, ts, "end of capture", out)
        return out

    # ------------------------------------------------------------------------------------------------
    # Packet kinds

    def _syn(self, d: _Direction, packet: Packet, out: list) -> None:
        isn = packet.seq
        if d.isn == isn and not d.closed:
            return  # a retransmitted SYN
        if d.base is not None and not d.delivered and not d.closed:
            d.reset()  # a new SYN before any byte was delivered: take the new ISN
        elif d.base is not None and (d.closed or d.base != (isn + 1) & _M32):
            self._new_epoch("connection reused", packet.ts_ns, out)
        d.isn = isn
        d.base = (isn + 1) & _M32
        if not self._opened:
            self._opened = True
            peer = endpoint(packet.dst, packet.dport)
            client, server = (peer, d.sender) if packet.flags & ACK else (d.sender, peer)
            out.append(ConnectionOpen(client, server, packet.ts_ns))

    def _data(self, d: _Direction, seq: int, payload, missing: int, ts: int, out: list) -> None:
        if d.base is None:
            d.base = seq
            d.delivered = True
            out.append(StreamGap(d.sender, 0, 0, ts, "mid-stream start"))
            start = 0
        else:
            nxt = d.next
            delta = ((seq - d.base) - nxt) & _M32
            if delta >= _HALF:
                delta -= 1 << 32
            if delta >= MAX_SEQ_JUMP or delta <= -MAX_SEQ_JUMP:
                self._new_epoch("sequence jump", ts, out)
                self._data(d, seq, payload, missing, ts, out)
                return
            if d.closed:
                return  # a retransmission after FIN/RST
            start = nxt + delta  # not 0 with nothing buffered: feed's fast path took that
        self._insert(d, start, payload, missing, ts, out)
        self._waiting = True
        self._drain(d, ts, out)
        if d.starts and (d.pending_bytes > self.max_buffer or len(d.starts) > self.max_segments):
            self._expire(d, ts, out)

    def _fin(self, d: _Direction, seq: int, ts: int, out: list) -> None:
        if d.base is None or d.closed:
            return
        delta = ((seq - d.base) - d.next) & _M32
        if delta >= _HALF:
            delta -= 1 << 32
        d.fin_at = d.next + max(delta, 0)
        if d.next >= d.fin_at:
            self._close(d, ts, "FIN", out)

    # ------------------------------------------------------------------------------------------------
    # Out-of-order buffer

    def _insert(self, d: _Direction, start: int, payload, missing: int, ts: int, out: list) -> None:
        n = len(payload)
        if n == 1 and not missing and start == d.next - 1:
            return  # a keep-alive probe: one garbage byte just below the window
        view = memoryview(payload) if n else payload
        if start < d.next:  # overlaps bytes already delivered: trim, compare with what we kept
            cut = min(d.next - start, n)
            if cut:
                self._compare_delivered(d, start, view[:cut], ts, out)
            if start + n + missing <= d.next:
                return
            if cut >= n:  # only part of the snap-length hole is new
                missing -= d.next - (start + n)
                view, n, start = b"", 0, d.next
            else:
                view, n, start = view[cut:], n - cut, start + cut
        if n:
            self._insert_piece(d, start, start + n, view, ts, out)
        if missing:
            self._insert_piece(d, start + n, start + n + missing, None, ts, out)

    def _insert_piece(self, d: _Direction, start: int, end: int, data, ts: int, out: list) -> None:
        """Adds [start, end) minus what is already buffered (first wins); compares the overlaps."""
        starts, items = d.starts, d.items
        if not starts:
            d.hole_since = ts
        index = bisect_right(starts, start) - 1
        if index < 0 or items[index][1] <= start:
            index += 1
        pieces = []
        cursor = start
        while index < len(items) and items[index][0] < end:
            o_start, o_end, o_data, _ = items[index]
            if o_start > cursor:
                pieces.append((cursor, o_start))
            lo, hi = max(cursor, o_start), min(end, o_end)
            if data is not None and o_data is not None and hi > lo:
                self._conflict(d, lo, data[lo - start:hi - start], o_data[lo - o_start:hi - o_start], ts, out)
            cursor = max(cursor, o_end)
            index += 1
        if cursor < end:
            pieces.append((cursor, end))
        for lo, hi in pieces:
            piece = None if data is None else data[lo - start:hi - start]
            at = bisect_right(starts, lo)
            starts.insert(at, lo)
            items.insert(at, (lo, hi, piece, ts))
            if piece is not None:
                d.pending_bytes += hi - lo

    def _drain(self, d: _Direction, ts: int, out: list) -> None:
        """Delivers the buffered pieces that now continue the stream."""
        starts, items = d.starts, d.items
        count = 0
        while count < len(starts) and starts[count] == d.next:
            start, end, data, piece_ts = items[count]
            if data is None:
                out.append(StreamGap(d.sender, start, end - start, piece_ts, "snap length"))
            else:
                out.append(_new_tuple(StreamData, (d.sender, start, piece_ts, data)))
                d.recent.append((start, data))
                d.pending_bytes -= end - start
            d.next = end
            d.delivered = True
            count += 1
        if count:
            del starts[:count], items[:count]
            if starts:
                d.hole_since = items[0][3]
        if d.fin_at is not None and d.next >= d.fin_at and not starts:
            self._close(d, ts, "FIN", out)

    def _expire(self, d: _Direction, ts: int, out: list) -> None:
        """Gives up on holes until the buffer is back within its bounds."""
        while d.starts and (d.pending_bytes > self.max_buffer or len(d.starts) > self.max_segments
                            or ts - d.hole_since > self.max_hole_ns):
            self._skip_hole(d, ts, out)

    def _flush(self, d: _Direction, ts: int, out: list) -> None:
        """Delivers everything buffered, holes as gaps."""
        while d.starts:
            self._skip_hole(d, ts, out)
        if d.fin_at is not None and not d.closed:
            self._close(d, ts, "FIN", out)

    def _skip_hole(self, d: _Direction, ts: int, out: list) -> None:
        first = d.starts[0]
        out.append(StreamGap(d.sender, d.next, first - d.next, ts, "lost segment"))
        d.next = first
        self._drain(d, ts, out)

    # ------------------------------------------------------------------------------------------------
    # Retransmission conflicts

    def _compare_delivered(self, d: _Direction, start: int, data, ts: int, out: list) -> None:
        end = start + len(data)
        for r_start, r_data in reversed(d.recent):
            r_end = r_start + len(r_data)
            if r_end <= start:
                break
            lo, hi = max(start, r_start), min(end, r_end)
            if hi > lo:
                self._conflict(d, lo, data[lo - start:hi - start], memoryview(r_data)[lo - r_start:hi - r_start],
                               ts, out)

    def _conflict(self, d: _Direction, offset: int, new, old, ts: int, out: list) -> None:
        differing = _differing(new, old)
        if differing:
            self.conflicting_bytes += differing
            out.append(StreamConflict(d.sender, offset, len(new), differing, ts))

    # ------------------------------------------------------------------------------------------------
    # Ends

    def _close(self, d: _Direction, ts: int, reason: str, out: list) -> None:
        d.closed = True
        d.delivered = True
        out.append(StreamEnd(d.sender, d.next, ts, reason))
        d.starts.clear()
        d.items.clear()
        d.pending_bytes = 0
        d.recent.clear()

    def _new_epoch(self, reason: str, ts: int, out: list) -> None:
        for d in self._dirs.values():
            if d.base is not None and not d.closed:
                self._flush(d, ts, out)
                if not d.closed:
                    self._close(d, ts, reason, out)
            d.reset()
        self._opened = False
        self.epoch += 1

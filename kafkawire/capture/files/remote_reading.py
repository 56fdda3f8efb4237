"""Remote captures (``remote_files``) read by byte ranges: the record walks over a window of blocks.

A local capture is one mapping that the walks (``pcap_records``, ``pcapng_blocks``) index by file
offset. A remote one is never mapped nor downloaded whole: a ``_Window`` holds the bytes from where the
walk is, read ahead in large blocks (``remote_files.blocks``), and the walks run over it with offsets
relative to its start; a record that runs past its end makes it read the next block (and drop what the
walk has passed), and the packets' orders and payload offsets are put back in file terms. Memory stays at
a few blocks plus the largest record. A gzip-compressed capture is streamed through the same reads.

``read_remote`` is ``packets.iter_packets`` for a URI (what a whole read or a split yields, the same
counts and skipped runs of bytes); ``remote_pieces`` is ``splits.plan_splits`` for one: a walk over
every record that cuts the file at record offsets, and samples the connections' payload while it is at it
(the local planner maps the file and samples by reading windows of it again).
"""
from __future__ import annotations

import gzip
import io
from functools import partial

from ..model import PacketRef, connection_key
from .pcap_reader import (
    PCAP_HEADER_SIZE, PCAP_RECORD_SIZE, RESYNC_CHAIN, PcapFacts, corrupt_record, find_record_boundary, pcap_facts,
    pcap_records,
)
from .pcapng_reader import Section, corrupt_block, pcapng_blocks
from .reading import (
    WALK_CORRUPT, WALK_DONE, WALK_INCOMPLETE, NotACaptureError, ReadCounts, format_of, torn_tail,
)
from .remote_files import RemoteFile, blocks, display_name
from .splits import Split

__all__ = ["read_remote", "remote_pieces"]

_new_tuple = tuple.__new__
TAIL_BYTES = 64 << 10  # read past a split's end, a piece at a time, to finish its last record
_HEAD = PCAP_HEADER_SIZE + PCAP_RECORD_SIZE  # the magic, a pcap header and its first record's time


class _Window:
    """A remote file's bytes from ``base``, ``buf``, read as a walk asks for more: ahead in blocks up to
    ``end`` (where a split ends), then by ``TAIL_BYTES`` (the rest of its last record)."""

    def __init__(self, remote: RemoteFile, start: int, end: int | None = None):
        self.remote, self.end = remote, end
        self._restart(start)

    def _restart(self, start: int) -> None:
        self.base, self.buf = start, b""
        self._blocks = blocks(self.remote, start, self.end)

    def more(self, keep: int) -> bool:
        """Drops the bytes before ``keep`` (relative) and adds the next block; False at the end of the file."""
        block = next(self._blocks, None)
        if block is None:
            block = self.remote.read_at(self.base + len(self.buf), TAIL_BYTES)
            if not block:
                return False
        self.buf = self.buf[keep:] + block
        self.base += keep
        return True

    def at(self, pos: int, ahead: int) -> bool:
        """Makes the window start at or before ``pos`` (file offset) and hold ``ahead`` bytes from it, or
        up to the end of the file; False if ``pos`` is past the end."""
        if not self.base <= pos <= self.base + len(self.buf):
            self._restart(pos)
        while len(self.buf) < pos - self.base + ahead and self.more(0):
            pass
        return pos < self.base + len(self.buf)


def _shifted(walk, base: int):
    """The walk's PacketRefs with payload offsets of the file, not of the window at ``base``."""
    while True:
        try:
            packet = next(walk)
        except StopIteration as done:
            return done.value
        if packet.__class__ is PacketRef:
            packet = _new_tuple(PacketRef, (*packet[:9], packet[9] + base, packet[10], packet[11]))
        yield packet


def _walk(window: _Window, walk, pos: int, stop: int, order_base: int):
    """``walk(buf, pos, stop, data_end, order_base)`` (a pcap or pcapng walk) over the window from file
    offset ``pos``, reading on while a record runs past its end. Returns (file offset, how it ended):
    WALK_INCOMPLETE only where the file ends."""
    window.at(pos, 1)
    while True:
        base = window.base
        found = walk(window.buf, pos - base, stop - base, len(window.buf), order_base + base)
        relative, ended = yield from _shifted(found, base)
        pos = base + relative
        if ended != WALK_INCOMPLETE or not window.more(relative):
            return pos, ended


def _head(remote: RemoteFile, name: str) -> tuple[str | None, bytes]:
    head = remote.read_at(0, _HEAD)
    if not head:
        return None, head
    kind = format_of(head)
    if kind is None:
        raise NotACaptureError(name, head[:4])
    return kind, head


def read_remote(uri: str, order_base: int, start: int, end: int | None, context, counts, refs: bool):
    """``packets.iter_packets``' reading for a remote capture (its arguments, unpacked)."""
    name = display_name(uri)
    with RemoteFile(uri) as remote:
        kind, head = _head(remote, name)
        if kind is None:
            return
        if kind == "gzip":
            if start == 0:
                yield from _gzip(remote, name, order_base, counts)
            return
        size = remote.size
        stop = size if end is None else min(end, size)
        if start >= stop:
            return
        window = _Window(remote, start, stop)
        if kind == "pcap":
            yield from _read_pcap(window, name, head, size, start, stop, order_base, context, counts, refs)
        else:
            yield from _read_pcapng(window, name, size, start, stop, order_base, context, counts, refs)


def _gzip(remote: RemoteFile, name: str, order_base: int, counts):
    from .packets import _read_stream  # the local reader's streaming walk; it imports this module

    with io.BufferedReader(_BlockStream(blocks(remote, 0)), 1 << 20) as raw:
        with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
            yield from _read_stream(stream, name, order_base, counts)


class _BlockStream(io.RawIOBase):
    """Blocks read ahead (``remote_files.blocks``) as a raw stream, for gzip."""

    def __init__(self, source):
        self._source, self._block, self._at = source, b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._at >= len(self._block):
            self._block, self._at = next(self._source, b""), 0
            if not self._block:
                return 0
        count = min(len(buffer), len(self._block) - self._at)
        buffer[:count] = self._block[self._at:self._at + count]
        self._at += count
        return count


def _resync_span(facts: PcapFacts) -> int:
    """Bytes after a candidate offset that ``find_record_boundary`` may look at: its scan and a chain of
    records of at most the snap length, so that a window this long finds what the whole file would."""
    return (RESYNC_CHAIN + 1) * (facts.chain_bound + PCAP_RECORD_SIZE) + PCAP_RECORD_SIZE


def _resync(window: _Window, pos: int, facts: PcapFacts) -> int | None:
    """``find_record_boundary`` from file offset ``pos`` over the window (which keeps the pcap header's
    length before ``pos``, so that the search is not moved past it)."""
    window.at(pos - PCAP_HEADER_SIZE, PCAP_HEADER_SIZE + _resync_span(facts))
    base = window.base
    found = find_record_boundary(window.buf, pos - base, facts.context(False))
    return None if found is None else base + found


def _read_pcap(window, name, head, size, start, stop, order_base, context, counts, refs):
    """``pcap_reader.read_pcap`` over a window."""
    facts = pcap_facts(head, name, size, start, context, counts)
    if facts is None:
        return
    if start <= PCAP_HEADER_SIZE:
        pos = PCAP_HEADER_SIZE
    elif context is not None and context.get("aligned"):
        pos = start
    else:
        pos = _resync(window, start, facts)
        if pos is None:
            return
    walk = partial(_pcap_walk, facts=facts, counts=counts, refs=refs)
    while True:
        pos, ended = yield from _walk(window, walk, pos, stop, order_base)
        if ended == WALK_CORRUPT:
            resumed = _resync(window, pos + 1, facts)
            corrupt_record(counts, name, pos, resumed, size)
            pos = resumed
            if pos is not None:
                continue
        elif ended == WALK_INCOMPLETE and pos < size:
            torn_tail(counts, name, pos, size - pos)
        return


def _pcap_walk(buf, pos, stop, data_end, order_base, *, facts, counts, refs):
    return pcap_records(buf, pos, stop, data_end, order_base, facts, counts, refs)


def _pcapng_walk(buf, pos, stop, data_end, order_base, *, section, counts, refs):
    return pcapng_blocks(buf, pos, stop, data_end, order_base, section, counts, refs)


def _read_pcapng(window, name, size, start, stop, order_base, context, counts, refs):
    """``pcapng_reader.read_pcapng`` over a window."""
    if start == 0:
        pos, section = 0, Section()
    elif context is not None and context.get("aligned"):
        pos, section = start, Section.from_context(context)
    else:
        # A split we did not plan: the section and interfaces in force come from the blocks before it.
        section = Section()
        walk = partial(_pcapng_walk, section=section, counts=ReadCounts(), refs=True)
        pos, ended = _ended(_walk(window, walk, 0, start, order_base))
        if ended != WALK_DONE:
            return
    walk = partial(_pcapng_walk, section=section, counts=counts, refs=refs)
    pos, ended = yield from _walk(window, walk, pos, stop, order_base)
    if ended == WALK_INCOMPLETE and pos < size:
        torn_tail(counts, name, pos, size - pos)
    elif ended == WALK_CORRUPT:
        corrupt_block(counts, name, pos, size)


def _ended(walk):
    """Runs a walk for where it ends, its packets dropped."""
    while True:
        try:
            next(walk)
        except StopIteration as done:
            return done.value


def remote_pieces(uri: str, file_index: int, spacing: int, sample_window: int = 0,
                  sampled: dict | None = None) -> list[Split]:
    """``splits.plan_splits`` for a remote capture: one walk over its records, read ahead in blocks, cuts
    it at the first record at or after every ``spacing`` bytes (gzip: one split, whole). With ``sampled``,
    adds each connection's payload bytes of the packets that start in the first ``sample_window`` bytes
    of each piece to it (``plan.plan_captures``' sample)."""
    name = display_name(uri)
    whole = [Split(uri, file_index, 0, None, None)]
    with RemoteFile(uri) as remote:
        kind, head = _head(remote, name)
        if kind is None or kind == "gzip":
            return whole
        size = remote.size
        counts = ReadCounts()
        if kind == "pcap":
            if size < PCAP_HEADER_SIZE:
                return [Split(uri, file_index, 0, size, None)]
            facts = PcapFacts.from_header(head, name)
            walk, pos = partial(_pcap_walk, facts=facts, counts=counts, refs=True), PCAP_HEADER_SIZE
        else:
            section = Section()
            walk, pos = partial(_pcapng_walk, section=section, counts=counts, refs=True), 0
        window = _Window(remote, pos)
        cuts: list[tuple[int, dict | None]] = [(0, None)]
        last_ts = None
        while True:
            sample_end = cuts[-1][0] + sample_window
            found = _walk(window, walk, pos, cuts[-1][0] + spacing, 0)
            while True:
                try:
                    packet = next(found)
                except StopIteration as done:
                    pos, ended = done.value
                    break
                last_ts = packet.ts_ns
                if sampled is not None and packet.order < sample_end:
                    key = connection_key(*packet[2:6])
                    sampled[key] = sampled.get(key, 0) + packet.payload_length
            if ended != WALK_DONE or pos >= size:
                break
            cuts.append((pos, section.context() if kind == "pcapng" else None))
    if kind == "pcap":
        if last_ts is not None:  # the file's time window, for resyncs (as the local planner sets it)
            facts.ts_window = [facts.timestamp_at(head, PCAP_HEADER_SIZE), last_ts]
        context = facts.context(True)
        cuts = [(start, context) for start, _ in cuts]
    if len(cuts) == 1:
        return [Split(uri, file_index, 0, size, None)]
    ends = [start for start, _ in cuts[1:]] + [size]
    return [Split(uri, file_index, start, stop, context) for (start, context), stop in zip(cuts, ends) if start < stop]

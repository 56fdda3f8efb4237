"""pcap files: the global header's facts, the records, and the resync after a corrupt record header.

A pcap file is a 24-byte header, then records of a 16-byte header and the frame's bytes. The header's
magic gives the byte order and the time resolution (micro- or nanoseconds); every record after it is
found from the one before by its length, so a corrupt length loses the way: ``find_record_boundary``
finds the next record again by a chain of plausible record headers.
"""
from __future__ import annotations

from ...pcap.layouts import BIG, LITTLE, PCAP_MAGICS, packed, pcap_file_header, pcap_link_type, pcap_record_header
from . import packet_headers
from .packet_headers import decode_packet
from .reading import (
    CORRUPT, TRUNCATED_TAIL, WALK_CORRUPT, WALK_DONE, WALK_INCOMPLETE, CaptureError, torn_tail,
)

__all__ = ["PcapFacts", "pcap_records", "find_record_boundary", "read_pcap", "PCAP_HEADER_SIZE",
           "PCAP_RECORD_SIZE", "RESYNC_CHAIN", "RESYNC_SLACK_NS"]

DEFAULT_SNAPLEN = 262144        # tcpdump's default, and the bound when a header's snaplen is 0 or absurd
MAX_PCAP_RECORD = 16 << 20      # a pcap record longer than this is a corrupt header
RESYNC_CHAIN = 4                # consecutive plausible headers that make a pcap record boundary
RESYNC_SLACK_NS = 3600 * 10**9  # how far timestamps may run backwards, or outside the file's window

PCAP_HEADER_SIZE = pcap_file_header(LITTLE).sizeof()
PCAP_RECORD_SIZE = pcap_record_header(LITTLE).sizeof()


class PcapFacts:
    """What the global header says, and what follows from it."""

    __slots__ = ("byteorder", "nanos", "linktype", "snaplen", "ts_window", "record", "frac_ns",
                 "frac_limit", "max_incl", "chain_bound")

    def __init__(self, byteorder: str, nanos: bool, linktype: int, snaplen: int, ts_window=None):
        self.byteorder, self.nanos, self.linktype, self.snaplen = byteorder, nanos, linktype, snaplen
        self.ts_window = list(ts_window) if ts_window is not None else None
        self.record = packed(pcap_record_header(byteorder))
        self.frac_ns = 1 if nanos else 1000
        self.frac_limit = 1_000_000_000 if nanos else 1_000_000
        sane_snaplen = snaplen if 0 < snaplen <= MAX_PCAP_RECORD else DEFAULT_SNAPLEN
        # Reading is lenient (some writers exceed their own snaplen); the resync chain is strict.
        self.max_incl = max(DEFAULT_SNAPLEN, sane_snaplen)
        self.chain_bound = sane_snaplen

    @classmethod
    def from_header(cls, buf, path: str) -> "PcapFacts":
        byteorder, nanos = PCAP_MAGICS[bytes(buf[:4])]
        header = packed(pcap_file_header(byteorder))
        if len(buf) < header.size:
            raise CaptureError(f"{path}: pcap file header cut short ({len(buf)} of {header.size} bytes)")
        _, _, _, _, _, snaplen, linktype = header.unpack_from(buf, 0)
        return cls(byteorder, nanos, pcap_link_type(linktype), snaplen)

    @classmethod
    def from_context(cls, context: dict) -> "PcapFacts":
        if context.get("format") != "pcap":
            raise ValueError(f"not a pcap split context: {context!r}")
        return cls(context["byteorder"], context["nanos"], context["linktype"], context["snaplen"],
                   context.get("ts_window"))

    def context(self, aligned: bool) -> dict:
        return {"format": "pcap", "byteorder": self.byteorder, "nanos": self.nanos,
                "linktype": self.linktype, "snaplen": self.snaplen, "ts_window": self.ts_window,
                "aligned": aligned}

    def timestamp_at(self, buf, pos: int) -> int:
        sec, frac, _, _ = self.record.unpack_from(buf, pos)
        return sec * 1_000_000_000 + frac * self.frac_ns


def pcap_records(buf, pos: int, stop: int, data_end: int, order_base: int, facts: PcapFacts, counts,
                  refs: bool = False):
    """Yield the packets of the records starting in [pos, stop) and complete before ``data_end``
    (PacketRefs with ``refs``: see ``packet_headers.decode_packet``).

    Returns (position, how it ended): past ``stop`` and WALK_DONE, at an incomplete record and
    WALK_INCOMPLETE, or at a header that cannot be right and WALK_CORRUPT.
    """
    record = facts.record.unpack_from
    frac_ns, linktype, max_incl = facts.frac_ns, facts.linktype, facts.max_incl
    decode = decode_packet
    run = packet_headers.NATIVE.pcap_run if packet_headers.NATIVE is not None else None
    big = facts.byteorder == BIG
    records = packets = 0
    try:
        while pos < stop:
            if run is not None:  # C reads the common records from here; the rest, one at a time, below
                found, at = run(buf, pos, stop, data_end, order_base, big, frac_ns, linktype, max_incl, refs)
                if at != pos:
                    pos = at
                    records += len(found)
                    packets += len(found)
                    yield from found
                    continue
            data = pos + PCAP_RECORD_SIZE
            if data > data_end:
                return pos, WALK_INCOMPLETE
            sec, frac, incl, orig = record(buf, pos)
            if incl > max_incl or not (incl or orig):  # zeros: a crash's unwritten blocks, not a packet
                return pos, WALK_CORRUPT
            following = data + incl
            if following > data_end:
                return pos, WALK_INCOMPLETE
            records += 1
            packet = decode(buf, data, incl, orig if orig > incl else incl, linktype, order_base + pos,
                            sec * 1_000_000_000 + frac * frac_ns, refs)
            if packet.__class__ is str:
                counts[packet] += 1
            else:
                packets += 1
                yield packet
            pos = following
        return pos, WALK_DONE
    finally:
        counts["records"] += records
        counts["packets"] += packets


def find_record_boundary(buf, pos: int, context: dict) -> int | None:
    """The offset of the first pcap record starting at or after ``pos`` in ``buf`` (the whole file), or
    None if there is none.

    A candidate offset is accepted when it starts a chain of ``RESYNC_CHAIN`` plausible record headers
    (or a shorter one ending exactly at the end of the file; a torn last record is not found):
    ``0 < incl_len <= min(orig_len, snaplen)``, the fraction below a second, the timestamp within the
    context's ``ts_window`` (the file's first and last packet; either may be None) give or take
    ``RESYNC_SLACK_NS``, and never running backwards by more than that slack. There are no MTU bounds:
    loopback and TSO captures have 64 KiB packets. A record starts within every snaplen + 16 bytes,
    so the scan is bounded.
    """
    facts = PcapFacts.from_context(context)
    size = len(buf)
    record = facts.record.unpack_from
    frac_ns, frac_limit, bound = facts.frac_ns, facts.frac_limit, facts.chain_bound
    window = facts.ts_window or [None, None]
    low = window[0] - RESYNC_SLACK_NS if window[0] is not None else -1
    high = window[1] + RESYNC_SLACK_NS if len(window) > 1 and window[1] is not None else 1 << 96
    candidate = max(pos, PCAP_HEADER_SIZE)
    last = min(candidate + bound + PCAP_RECORD_SIZE, size)
    while candidate < last:
        at, previous, chained, plausible = candidate, None, 0, True
        while chained < RESYNC_CHAIN:
            if at + PCAP_RECORD_SIZE > size:
                break  # the chain reached the end of the file, or a header torn there
            sec, frac, incl, orig = record(buf, at)
            ts = sec * 1_000_000_000 + frac * frac_ns
            if not (0 < incl <= orig and incl <= bound and frac < frac_limit and low <= ts <= high
                    and (previous is None or ts >= previous - RESYNC_SLACK_NS)):
                plausible = False
                break
            previous = ts
            chained += 1
            at += PCAP_RECORD_SIZE + incl
        # A shorter chain must end exactly at the end of the file: one torn there proves too little.
        if plausible and (chained == RESYNC_CHAIN or chained and at == size):
            return candidate
        candidate += 1
    return None


def corrupt_record(counts, path: str, pos: int, resumed: int | None, size: int) -> None:
    """Counts and lists the bytes skipped from a corrupt record header at ``pos`` to ``resumed`` (None:
    to the end of the file)."""
    skipped = (size if resumed is None else resumed) - pos
    counts.skip(CORRUPT, path, pos, skipped, f"a record header that cannot be right at byte {pos}; " + (
        f"{skipped} bytes to the end of the file not read" if resumed is None
        else f"reading resumed at byte {resumed} ({skipped} bytes skipped)"))


def pcap_facts(head, path: str, size: int, start: int, context, counts) -> PcapFacts | None:
    """What a read of ``path`` from ``start`` knows of the file (``head``: its first bytes, a file header
    and the first record header where it has them): from the split's context past the start, else from
    the header; None (and a truncated tail counted) for a file shorter than a header."""
    if start > 0 and context is not None:
        facts = PcapFacts.from_context(context)
    else:
        if size < PCAP_HEADER_SIZE:
            counts.skip(TRUNCATED_TAIL, path, 0, size, f"{size} bytes, shorter than a pcap file header")
            return None
        facts = PcapFacts.from_header(head, path)
    if facts.ts_window is None and size >= PCAP_HEADER_SIZE + PCAP_RECORD_SIZE:
        # The first packet's time bounds where a resync may land (from below; the end is not known).
        facts.ts_window = [facts.timestamp_at(head, PCAP_HEADER_SIZE), None]
    return facts


def read_pcap(mm, path: str, size: int, start: int, stop: int, order_base: int, context, counts, refs: bool):
    facts = pcap_facts(mm, path, size, start, context, counts)
    if facts is None:
        return
    if start <= PCAP_HEADER_SIZE:
        pos = PCAP_HEADER_SIZE
    elif context is not None and context.get("aligned"):
        pos = start
    else:
        pos = find_record_boundary(mm, start, facts.context(False))
        if pos is None:
            return
    while True:
        pos, ended = yield from pcap_records(mm, pos, stop, size, order_base, facts, counts, refs)
        if ended == WALK_CORRUPT:
            resumed = find_record_boundary(mm, pos + 1, facts.context(False))
            corrupt_record(counts, path, pos, resumed, size)
            pos = resumed
            if pos is not None:
                continue
        elif ended == WALK_INCOMPLETE:
            torn_tail(counts, path, pos, size - pos)
        return


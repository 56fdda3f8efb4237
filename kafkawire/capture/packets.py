"""Capture files -> ``Packet``: the TCP segments of pcap and pcapng files, whole or by byte-range split.

``iter_packets(path, file_index, start, end, context)`` yields the TCP packets whose record (pcap) or
block (pcapng) starts in ``[start, end)``, reading past ``end`` to finish the last one, as Hadoop's
readers do. Plain files are mmap-ed; gzip-compressed captures (magic 1f8b, whatever the name) are read
as a stream, whole: a split of one with ``start > 0`` yields nothing, so any byte-range cutting of a
gzip file still reads it exactly once.

``plan_splits`` walks a file's record headers once (pcap: 16-byte headers; pcapng: block to block by
length) and cuts it at exact record offsets, each split carrying the context needed to parse from
there (``Split.context``, plain JSON values). The walk is cheap (about 3 GB/s for pcap and 2 GB/s for
pcapng of 1.5 KB packets, from the page cache), so planning needs no resync heuristics. A split
without ``context["aligned"]`` (cut by someone else, or of a file still being written) finds its first
record itself: pcap with ``find_record_boundary``'s chain rule, pcapng by walking the blocks from the
file start.

With ``payloads=False`` a plain file yields ``PacketRef`` instead of ``Packet``: the payload's file offset
and length (the record's data offset plus the link, IP and TCP header lengths, known while parsing, so
free), for ``PayloadReader`` to read back later. The capture job carries these between its stages
instead of the bytes.

Skipped records are counted, not raised: pass a dict as ``stats`` and the counts are added to it
(keys below; the dict can be shared by several calls). Where reading skipped a run of bytes (a corrupt
header, a torn tail), pass a list as ``skipped`` to get a ``SkippedBytes`` for each: where, how many
bytes and why, so that the capture job can list them. ``records`` counts the packet records whose
frame was looked at, ``packets`` the TCP packets yielded; every other key is a reason a record gave
no packet, or a reason reading stopped early:

    not_ip            the link layer carries something else (ARP, LLDP, ...)
    not_tcp           IP, but UDP, ICMP, ...
    ip_fragments      a fragment of a fragmented IPv4/IPv6 datagram (not reassembled)
    unknown_link_type a link type this reader does not decode
    unknown_interface a pcapng packet naming an interface no IDB described
    headers_cut       the snap length cut into the IP or TCP header
    malformed         headers that contradict themselves or the record's lengths
    truncated_tail    the last record/block is cut short (a capture killed mid-write)
    corrupt           a record/block header that cannot be right (or zeros where one should be): a plain
                      pcap resyncs after it (``find_record_boundary``), pcapng and gzip streams stop

Checksums are not checked: captures on the sending host carry offloaded, unfilled ones.
"""
from __future__ import annotations

import glob
import gzip
import mmap
import os
import re
import zlib
from collections import defaultdict
from collections.abc import Iterator
from socket import AF_INET6, inet_ntop
from struct import Struct
from typing import NamedTuple

from ..errors import KafkaWireError
from ..pcap.layouts import (
    DEFAULT_TSRESOL, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN_TAGS, GZIP_MAGIC, IF_TSOFFSET,
    IF_TSRESOL, IPPROTO_AH, IPPROTO_FRAGMENT, IPPROTO_TCP, IPV4_HEADER, IPV6_EXTENSION_HEADER,
    IPV6_EXTENSIONS_IN_8_OCTETS, IPV6_FRAGMENT_HEADER, IPV6_HEADER, LINKTYPE_ETHERNET, LINKTYPE_IPV4,
    LINKTYPE_IPV6, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_LOOP, LINKTYPE_NULL, LINKTYPE_RAW,
    LITTLE, NULL_FAMILIES_IPV4, NULL_FAMILIES_IPV6, PCAP_MAGICS, PCAPNG_ENHANCED_PACKET_TYPE,
    PCAPNG_INTERFACE_DESCRIPTION_TYPE, PCAPNG_PACKET_TYPE, PCAPNG_SECTION_HEADER_TYPE,
    PCAPNG_SIMPLE_PACKET_TYPE, SLL2_HEADER, SLL_HEADER, TCP_HEADER, VLAN_TAG, ETHERNET_HEADER,
    offset_of, packed, pcap_file_header, pcap_link_type, pcap_record_header, pcapng_block_header,
    pcapng_block_trailer, pcapng_byte_order, pcapng_enhanced_packet, pcapng_interface_description,
    pcapng_options, pcapng_packet, pcapng_simple_packet, tsresol_ticks_per_second,
)
from .model import Packet

__all__ = [
    "Split", "PacketRef", "SkippedBytes", "PayloadReader", "CaptureError", "NotACaptureError", "iter_packets",
    "iter_split",
    "plan_splits", "find_record_boundary", "expand_inputs", "first_timestamp_ns", "is_capture", "SPLIT_BYTES",
    "ORDER_STRIDE",
]

SPLIT_BYTES = 128 << 20
ORDER_STRIDE = 1 << 40          # Packet.order = file_index * ORDER_STRIDE + record offset
DEFAULT_SNAPLEN = 262144        # tcpdump's default, and the bound when a header's snaplen is 0 or absurd
MAX_PCAP_RECORD = 16 << 20      # a pcap record longer than this is a corrupt header
MAX_PCAPNG_BLOCK = 64 << 20     # likewise a pcapng block
STREAM_CHUNK = 1 << 20          # gzip captures are decompressed this much at a time
RESYNC_CHAIN = 4                # consecutive plausible headers that make a pcap record boundary
RESYNC_SLACK_NS = 3600 * 10**9  # how far timestamps may run backwards, or outside the file's window

_PCAP_HEADER_SIZE = pcap_file_header(LITTLE).sizeof()
_PCAP_RECORD_SIZE = pcap_record_header(LITTLE).sizeof()
_SHB_BYTES = PCAPNG_SECTION_HEADER_TYPE.to_bytes(4, "big")
_BYTE_ORDER_MAGIC_AT = 8  # in a Section Header Block

# Why a packet yielded nothing (the ``stats`` keys).
NOT_IP, NOT_TCP, FRAGMENT, UNKNOWN_LINK = "not_ip", "not_tcp", "ip_fragments", "unknown_link_type"
UNKNOWN_INTERFACE, HEADERS_CUT, MALFORMED = "unknown_interface", "headers_cut", "malformed"
TRUNCATED_TAIL, CORRUPT = "truncated_tail", "corrupt"
# How a walk over records ended.
_DONE, _INCOMPLETE, _CORRUPT = 0, 1, 2


class CaptureError(KafkaWireError):
    """A capture file that cannot be read."""


class NotACaptureError(CaptureError):
    """A file that is not a pcap, pcapng or gzip-compressed capture; names the path and its first bytes."""

    def __init__(self, path: str, magic: bytes, inside: str = ""):
        self.path, self.magic, self.inside = path, bytes(magic), inside
        found = self.magic.hex(" ") if self.magic else "nothing (an empty file)"
        super().__init__(
            f"{path}: not a packet capture{inside}: it starts with {found}; expected a pcap magic "
            f"(a1b2c3d4 or a1b23c4d, either byte order), pcapng's 0a0d0d0a, or gzip's 1f8b")

    def __reduce__(self):  # pickled from the process that plans the splits
        return type(self), (self.path, self.magic, self.inside)


class Split(NamedTuple):
    """A byte range of one capture file. Plain values only, so it pickles and round-trips through JSON
    (``Split(*json.loads(json.dumps(split)))``). ``end`` None reads to the end of the file."""
    path: str
    file_index: int
    start: int
    end: int | None
    context: dict | None


class SkippedBytes(NamedTuple):
    """A run of a capture's bytes that reading gave up on. ``kind`` is ``corrupt`` (a record or block
    header that cannot be right) or ``truncated_tail`` (the last record cut short); ``offset`` is in the
    file, or in the decompressed data of a gzip file; ``length`` is None where the rest of a gzip
    stream was not read (its size is not known)."""
    path: str
    offset: int
    length: int | None
    kind: str
    reason: str


class _Counts(defaultdict):
    """The counts of one read (``stats`` keys), and the runs of bytes it skipped."""

    def __init__(self):
        super().__init__(int)
        self.skips: list[SkippedBytes] = []

    def skip(self, kind: str, path: str, offset: int, length: int | None, reason: str) -> None:
        self[kind] += 1
        self.skips.append(SkippedBytes(path, offset, length, kind, f"{path}: {reason}"))


def _torn(counts: _Counts, path: str, offset: int, length: int, where: str = "") -> None:
    counts.skip(TRUNCATED_TAIL, path, offset, length,
                f"the last record, at byte {offset}{where}, is cut short ({length} bytes, not read)")


class PacketRef(NamedTuple):
    """A ``Packet`` whose payload was left in its file: ``payload_length`` bytes at ``payload_offset``
    of the capture ``order // ORDER_STRIDE`` of the run (``PayloadReader`` reads them back). The other
    fields are the Packet's, in its order."""
    order: int
    ts_ns: int
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload_offset: int
    payload_length: int
    missing: int = 0


# ---------------------------------------------------------------------------------------------------
# Link, IP and TCP headers -> Packet. One function, fast paths first: this runs for every packet.

_U16 = Struct(">H").unpack_from
_U32_LE = Struct("<I").unpack_from
_U32_BE = Struct(">I").unpack_from
_IPV4 = packed(IPV4_HEADER).unpack_from
_IPV6 = packed(IPV6_HEADER).unpack_from
_IPV6_EXTENSION = packed(IPV6_EXTENSION_HEADER).unpack_from
_IPV6_FRAGMENT = packed(IPV6_FRAGMENT_HEADER).unpack_from
_TCP = packed(TCP_HEADER).unpack_from
_ETHERNET_SIZE = ETHERNET_HEADER.sizeof()
_ETHERTYPE_AT = offset_of(ETHERNET_HEADER, "ethertype")
_VLAN_TAG_SIZE = VLAN_TAG.sizeof()
_VLAN_ETHERTYPE_AT = offset_of(VLAN_TAG, "ethertype")
_SLL_SIZE, _SLL_PROTOCOL_AT = SLL_HEADER.sizeof(), offset_of(SLL_HEADER, "protocol")
_SLL2_SIZE, _SLL2_PROTOCOL_AT = SLL2_HEADER.sizeof(), offset_of(SLL2_HEADER, "protocol")
_IPV4_SIZE, _IPV6_SIZE, _TCP_SIZE = IPV4_HEADER.sizeof(), IPV6_HEADER.sizeof(), TCP_HEADER.sizeof()
_MAX_IPV6_EXTENSIONS = 16
_new_tuple = tuple.__new__  # builds a Packet without the Python-level __new__ of a NamedTuple

# Address text per 4- or 16-byte value; a capture has few distinct addresses, cleared if it has many.
_ADDRESS_CACHE_LIMIT = 1 << 16
_V4_TEXT: dict[bytes, str] = {}
_V6_TEXT: dict[bytes, str] = {}


def _v4_text(raw: bytes) -> str:
    if len(_V4_TEXT) >= _ADDRESS_CACHE_LIMIT:
        _V4_TEXT.clear()
    text = _V4_TEXT[raw] = "%d.%d.%d.%d" % tuple(raw)
    return text


def _v6_text(raw: bytes) -> str:
    if len(_V6_TEXT) >= _ADDRESS_CACHE_LIMIT:
        _V6_TEXT.clear()
    text = _V6_TEXT[raw] = inet_ntop(AF_INET6, raw)
    return text


def _short(captured: int, wire: int) -> str:
    """Headers ran past the captured bytes: the snap length's doing, or a malformed packet."""
    return HEADERS_CUT if captured < wire else MALFORMED


def _ip_after_ethertype(buf, ethertype: int, l3: int, end: int):
    """(offset of the IP header, IP version) after an ethertype, through VLAN tags; or a skip reason."""
    while ethertype in ETHERTYPE_VLAN_TAGS:
        if l3 + _VLAN_TAG_SIZE > end:
            return 0, HEADERS_CUT
        ethertype = _U16(buf, l3 + _VLAN_ETHERTYPE_AT)[0]
        l3 += _VLAN_TAG_SIZE
    if ethertype == ETHERTYPE_IPV4:
        return l3, 4
    if ethertype == ETHERTYPE_IPV6:
        return l3, 6
    return 0, NOT_IP


# Link headers that end in an ethertype: (header size, where the ethertype is).
_ETHERTYPE_LINKS = {LINKTYPE_ETHERNET: (_ETHERNET_SIZE, _ETHERTYPE_AT),
                    LINKTYPE_LINUX_SLL2: (_SLL2_SIZE, _SLL2_PROTOCOL_AT),
                    LINKTYPE_LINUX_SLL: (_SLL_SIZE, _SLL_PROTOCOL_AT)}


def _ip_after_link(buf, off: int, end: int, linktype: int):
    """(offset of the IP header, IP version) for a frame of any supported link type; or a skip reason."""
    framing = _ETHERTYPE_LINKS.get(linktype)
    if framing is not None:
        size, ethertype_at = framing
        if off + size > end:
            return 0, HEADERS_CUT
        return _ip_after_ethertype(buf, _U16(buf, off + ethertype_at)[0], off + size, end)
    if linktype == LINKTYPE_NULL or linktype == LINKTYPE_LOOP:
        if off + 4 > end:
            return 0, HEADERS_CUT
        # The family is in the writer's byte order (NULL) or network order (LOOP, mostly): families are
        # small numbers, so a value too big to be one was read in the wrong order.
        family = _U32_LE(buf, off)[0]
        if family > 0xFFFF:
            family = _U32_BE(buf, off)[0]
        if family in NULL_FAMILIES_IPV4:
            return off + 4, 4
        if family in NULL_FAMILIES_IPV6:
            return off + 4, 6
        return 0, NOT_IP
    if linktype == LINKTYPE_RAW:
        if off >= end:
            return 0, HEADERS_CUT
        version = buf[off] >> 4
        return (off, version) if version == 4 or version == 6 else (0, NOT_IP)
    if linktype == LINKTYPE_IPV4:
        return off, 4
    if linktype == LINKTYPE_IPV6:
        return off, 6
    return 0, UNKNOWN_LINK


def _ipv6_to_tcp(buf, l3: int, end: int, wire_end: int):
    """(TCP offset, source, destination, end of the IP packet on the wire) through extension headers;
    or a skip reason."""
    if l3 + _IPV6_SIZE > end:
        return HEADERS_CUT
    version_class_flow, payload_length, next_header, _, source, destination = _IPV6(buf, l3)
    if version_class_flow >> 28 != 6:
        return MALFORMED
    # Payload length 0: a jumbogram or a TSO super-segment; the frame's length is what we have.
    ip_end = l3 + _IPV6_SIZE + payload_length if payload_length else wire_end
    if ip_end > wire_end:
        ip_end = wire_end
    pos = l3 + _IPV6_SIZE
    for _ in range(_MAX_IPV6_EXTENSIONS):
        if next_header == IPPROTO_TCP:
            return pos, source, destination, ip_end
        if pos + 8 > end:  # every extension header is at least 8 bytes
            return HEADERS_CUT
        if next_header in IPV6_EXTENSIONS_IN_8_OCTETS:
            next_header, length = _IPV6_EXTENSION(buf, pos)
            pos += (length + 1) * 8
        elif next_header == IPPROTO_FRAGMENT:
            next_header, _, offset_flags, _ = _IPV6_FRAGMENT(buf, pos)
            if offset_flags & 0xFFF9:  # not an atomic fragment: see layouts.ipv6_is_fragment
                return FRAGMENT
            pos += 8
        elif next_header == IPPROTO_AH:
            next_header, length = _IPV6_EXTENSION(buf, pos)
            pos += (length + 2) * 4
        else:
            return NOT_TCP
        if pos > ip_end:
            return MALFORMED
    return MALFORMED


def _decode(buf, off: int, captured: int, wire: int, linktype: int, order: int, ts_ns: int, refs: bool):
    """The Packet in a frame of ``captured`` bytes at ``off`` (``wire`` bytes on the wire), or why not;
    with ``refs`` (``buf`` is the whole file) a PacketRef to its payload instead of a copy of it."""
    end = off + captured
    if linktype == LINKTYPE_ETHERNET and captured >= _ETHERNET_SIZE:
        ethertype = _U16(buf, off + _ETHERTYPE_AT)[0]
        if ethertype == ETHERTYPE_IPV4:
            l3, version = off + _ETHERNET_SIZE, 4
        else:
            l3, version = _ip_after_ethertype(buf, ethertype, off + _ETHERNET_SIZE, end)
    else:
        l3, version = _ip_after_link(buf, off, end, linktype)
    wire_end = off + wire
    if version == 4:
        if l3 + _IPV4_SIZE > end:
            return _short(captured, wire)
        version_ihl, _, total_length, _, fragment, _, protocol, _, source, destination = _IPV4(buf, l3)
        header_length = (version_ihl & 0x0F) * 4
        if version_ihl >> 4 != 4 or header_length < _IPV4_SIZE:
            return MALFORMED
        if fragment & 0x3FFF:  # more-fragments or an offset: see layouts.ipv4_is_fragment
            return FRAGMENT
        if protocol != IPPROTO_TCP:
            return NOT_TCP
        # Total length 0: a TSO super-segment captured before segmentation; the frame's length is right.
        if total_length:
            if total_length < header_length:
                return MALFORMED
            ip_end = l3 + total_length
            if ip_end > wire_end:
                ip_end = wire_end
        else:
            ip_end = wire_end
        l4 = l3 + header_length
        src = _V4_TEXT.get(source) or _v4_text(source)
        dst = _V4_TEXT.get(destination) or _v4_text(destination)
    elif version == 6:
        found = _ipv6_to_tcp(buf, l3, end, wire_end)
        if found.__class__ is str:
            return _short(captured, wire) if found == HEADERS_CUT else found
        l4, source, destination, ip_end = found
        src = _V6_TEXT.get(source) or _v6_text(source)
        dst = _V6_TEXT.get(destination) or _v6_text(destination)
    else:  # the link layer's reason
        return _short(captured, wire) if version == HEADERS_CUT else version
    if l4 + _TCP_SIZE > end:
        return _short(captured, wire) if l4 + _TCP_SIZE <= ip_end else MALFORMED
    sport, dport, seq, ack, data_offset, flags, _, _, _ = _TCP(buf, l4)
    payload_start = l4 + (data_offset >> 4) * 4
    if payload_start < l4 + _TCP_SIZE or payload_start > ip_end:
        return MALFORMED
    if payload_start > end:
        return HEADERS_CUT
    # Ethernet pads short frames and may end in an FCS: the payload ends where IP says it does.
    captured_end = ip_end if ip_end < end else end
    if refs:
        return _new_tuple(PacketRef, (order, ts_ns, src, sport, dst, dport, seq, ack, flags, payload_start,
                                      captured_end - payload_start, ip_end - captured_end))
    return _new_tuple(Packet, (order, ts_ns, src, sport, dst, dport, seq, ack, flags,
                               buf[payload_start:captured_end], ip_end - captured_end))


# ---------------------------------------------------------------------------------------------------
# pcap

class _PcapFacts:
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
    def from_header(cls, buf, path: str) -> "_PcapFacts":
        byteorder, nanos = PCAP_MAGICS[bytes(buf[:4])]
        header = packed(pcap_file_header(byteorder))
        if len(buf) < header.size:
            raise CaptureError(f"{path}: pcap file header cut short ({len(buf)} of {header.size} bytes)")
        _, _, _, _, _, snaplen, linktype = header.unpack_from(buf, 0)
        return cls(byteorder, nanos, pcap_link_type(linktype), snaplen)

    @classmethod
    def from_context(cls, context: dict) -> "_PcapFacts":
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


def _pcap_records(buf, pos: int, stop: int, data_end: int, order_base: int, facts: _PcapFacts, counts,
                  refs: bool = False):
    """Yield the packets of the records starting in [pos, stop) and complete before ``data_end``
    (PacketRefs with ``refs``: see ``_decode``).

    Returns (position, how it ended): past ``stop`` and _DONE, at an incomplete record and
    _INCOMPLETE, or at a header that cannot be right and _CORRUPT.
    """
    record = facts.record.unpack_from
    frac_ns, linktype, max_incl = facts.frac_ns, facts.linktype, facts.max_incl
    decode = _decode
    records = packets = 0
    try:
        while pos < stop:
            data = pos + _PCAP_RECORD_SIZE
            if data > data_end:
                return pos, _INCOMPLETE
            sec, frac, incl, orig = record(buf, pos)
            if incl > max_incl or not (incl or orig):  # zeros: a crash's unwritten blocks, not a packet
                return pos, _CORRUPT
            following = data + incl
            if following > data_end:
                return pos, _INCOMPLETE
            records += 1
            packet = decode(buf, data, incl, orig if orig > incl else incl, linktype, order_base + pos,
                            sec * 1_000_000_000 + frac * frac_ns, refs)
            if packet.__class__ is str:
                counts[packet] += 1
            else:
                packets += 1
                yield packet
            pos = following
        return pos, _DONE
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
    facts = _PcapFacts.from_context(context)
    size = len(buf)
    record = facts.record.unpack_from
    frac_ns, frac_limit, bound = facts.frac_ns, facts.frac_limit, facts.chain_bound
    window = facts.ts_window or [None, None]
    low = window[0] - RESYNC_SLACK_NS if window[0] is not None else -1
    high = window[1] + RESYNC_SLACK_NS if len(window) > 1 and window[1] is not None else 1 << 96
    candidate = max(pos, _PCAP_HEADER_SIZE)
    last = min(candidate + bound + _PCAP_RECORD_SIZE, size)
    while candidate < last:
        at, previous, chained, plausible = candidate, None, 0, True
        while chained < RESYNC_CHAIN:
            if at + _PCAP_RECORD_SIZE > size:
                break  # the chain reached the end of the file, or a header torn there
            sec, frac, incl, orig = record(buf, at)
            ts = sec * 1_000_000_000 + frac * frac_ns
            if not (0 < incl <= orig and incl <= bound and frac < frac_limit and low <= ts <= high
                    and (previous is None or ts >= previous - RESYNC_SLACK_NS)):
                plausible = False
                break
            previous = ts
            chained += 1
            at += _PCAP_RECORD_SIZE + incl
        # A shorter chain must end exactly at the end of the file: one torn there proves too little.
        if plausible and (chained == RESYNC_CHAIN or chained and at == size):
            return candidate
        candidate += 1
    return None


def _read_pcap(mm, path: str, size: int, start: int, stop: int, order_base: int, context, counts, refs: bool):
    if start > 0 and context is not None:
        facts = _PcapFacts.from_context(context)
    else:
        if size < _PCAP_HEADER_SIZE:
            counts.skip(TRUNCATED_TAIL, path, 0, size, f"{size} bytes, shorter than a pcap file header")
            return
        facts = _PcapFacts.from_header(mm, path)
    if facts.ts_window is None and size >= _PCAP_HEADER_SIZE + _PCAP_RECORD_SIZE:
        # The first packet's time bounds where a resync may land (from below; the end is not known).
        facts.ts_window = [facts.timestamp_at(mm, _PCAP_HEADER_SIZE), None]
    if start <= _PCAP_HEADER_SIZE:
        pos = _PCAP_HEADER_SIZE
    elif context is not None and context.get("aligned"):
        pos = start
    else:
        pos = find_record_boundary(mm, start, facts.context(False))
        if pos is None:
            return
    while True:
        pos, ended = yield from _pcap_records(mm, pos, stop, size, order_base, facts, counts, refs)
        if ended == _CORRUPT:
            resumed = find_record_boundary(mm, pos + 1, facts.context(False))
            skipped = (size if resumed is None else resumed) - pos
            counts.skip(CORRUPT, path, pos, skipped, f"a record header that cannot be right at byte {pos}; " + (
                f"{skipped} bytes to the end of the file not read" if resumed is None
                else f"reading resumed at byte {resumed} ({skipped} bytes skipped)"))
            pos = resumed
            if pos is not None:
                continue
        elif ended == _INCOMPLETE:
            _torn(counts, path, pos, size - pos)
        return


# ---------------------------------------------------------------------------------------------------
# pcapng

_PCAPNG = {}  # byte order -> (block header, trailer, EPB, PB, SPB, IDB) unpackers


def _pcapng_structs(byteorder: str):
    found = _PCAPNG.get(byteorder)
    if found is None:
        found = _PCAPNG[byteorder] = tuple(packed(layout(byteorder)).unpack_from for layout in (
            pcapng_block_header, pcapng_block_trailer, pcapng_enhanced_packet, pcapng_packet,
            pcapng_simple_packet, pcapng_interface_description))
    return found


_EPB_SIZE = pcapng_enhanced_packet(LITTLE).sizeof()
_PB_SIZE = pcapng_packet(LITTLE).sizeof()
_SPB_SIZE = pcapng_simple_packet(LITTLE).sizeof()
_IDB_SIZE = pcapng_interface_description(LITTLE).sizeof()
_TRAILER_SIZE = pcapng_block_trailer(LITTLE).sizeof()
_MIN_BLOCK = pcapng_block_header(LITTLE).sizeof() + _TRAILER_SIZE


class _Section:
    """The state pcapng blocks are read in: the section's byte order and its interfaces.

    ``interfaces`` holds, per interface id, (link type, timestamp multiplier, divisor, offset in ns);
    ``described`` the same as the IDB gave it (link type, snaplen, if_tsresol, if_tsoffset) for contexts.
    ``last_ts`` is the latest Enhanced/Packet Block's time, which Simple Packet Blocks (no time) reuse.
    """

    __slots__ = ("byteorder", "structs", "interfaces", "described", "last_ts")

    def __init__(self, byteorder: str = LITTLE, described=(), last_ts: int = 0):
        self.enter(byteorder)
        for linktype, snaplen, tsresol, tsoffset in described:
            self._add(linktype, snaplen, tsresol, tsoffset)
        self.last_ts = last_ts

    def enter(self, byteorder: str) -> None:
        """A new section: its byte order, no interfaces yet."""
        self.byteorder = byteorder
        self.structs = _pcapng_structs(byteorder)
        self.interfaces, self.described = [], []

    def _add(self, linktype: int, snaplen: int, tsresol: int, tsoffset: int) -> None:
        per_second = tsresol_ticks_per_second(tsresol)
        if per_second <= 1_000_000_000 and 1_000_000_000 % per_second == 0:
            multiplier, divisor = 1_000_000_000 // per_second, 1
        else:
            multiplier, divisor = 1_000_000_000, per_second
        self.interfaces.append((linktype, multiplier, divisor, tsoffset * 1_000_000_000))
        self.described.append([linktype, snaplen, tsresol, tsoffset])

    def add_interface(self, buf, pos: int, length: int) -> None:
        _, _, linktype, _, snaplen = self.structs[5](buf, pos)
        tsresol, tsoffset = DEFAULT_TSRESOL, 0
        if length > _IDB_SIZE + _TRAILER_SIZE:  # options: rare, so parsed with the declaration
            options = bytes(buf[pos + _IDB_SIZE:pos + length - _TRAILER_SIZE])
            for option in pcapng_options(self.byteorder).parse(options):
                if option.code == IF_TSRESOL and option.length >= 1:
                    tsresol = option.value[0]
                elif option.code == IF_TSOFFSET and option.length >= 8:
                    endian = "little" if self.byteorder == LITTLE else "big"
                    tsoffset = int.from_bytes(option.value[:8], endian, signed=True)
        self._add(linktype, snaplen, tsresol, tsoffset)

    def timestamp_at(self, buf, pos: int) -> int | None:
        """The time of the Enhanced or (obsolete) Packet Block at ``pos``; None for an unknown interface."""
        header, _, epb, pb, _, _ = self.structs
        block_type = header(buf, pos)[0]
        if block_type == PCAPNG_ENHANCED_PACKET_TYPE:
            _, _, interface, high, low, _, _ = epb(buf, pos)
        else:
            _, _, interface, _, high, low, _, _ = pb(buf, pos)
        if interface >= len(self.interfaces):
            return None
        _, multiplier, divisor, offset = self.interfaces[interface]
        return ((high << 32) | low) * multiplier // divisor + offset

    def context(self) -> dict:
        return {"format": "pcapng", "byteorder": self.byteorder, "interfaces": [list(d) for d in self.described],
                "last_ts_ns": self.last_ts, "aligned": True}

    @classmethod
    def from_context(cls, context: dict) -> "_Section":
        if context.get("format") != "pcapng":
            raise ValueError(f"not a pcapng split context: {context!r}")
        return cls(context["byteorder"], context["interfaces"], context.get("last_ts_ns") or 0)


def _block_at(buf, pos: int, data_end: int, section: _Section):
    """(block type, total length, how it ended) of the block at ``pos``; enters a new section at an SHB.

    Ends _INCOMPLETE if the block runs past ``data_end``, _CORRUPT if its lengths cannot be right.
    """
    if pos + _MIN_BLOCK > data_end:
        return 0, 0, _INCOMPLETE
    block_type, length = section.structs[0](buf, pos)
    if block_type == PCAPNG_SECTION_HEADER_TYPE:
        at = pos + _BYTE_ORDER_MAGIC_AT
        byteorder = pcapng_byte_order(buf[at:at + 4])
        if byteorder is None:
            return block_type, 0, _CORRUPT
        section.enter(byteorder)
        length = section.structs[0](buf, pos)[1]
    if length < _MIN_BLOCK or length & 3 or length > MAX_PCAPNG_BLOCK:
        return block_type, length, _CORRUPT
    if pos + length > data_end:
        return block_type, length, _INCOMPLETE
    if section.structs[1](buf, pos + length - _TRAILER_SIZE)[0] != length:
        return block_type, length, _CORRUPT
    return block_type, length, _DONE


def _pcapng_blocks(buf, pos: int, stop: int, data_end: int, order_base: int, section: _Section, counts,
                   refs: bool = False):
    """Yield the packets of the blocks starting in [pos, stop) and complete before ``data_end``.
    Returns (position, how it ended), as ``_pcap_records`` does (``refs`` too)."""
    header, trailer, epb, pb, spb, _ = section.structs
    interfaces = section.interfaces
    decode = _decode
    records = packets = 0
    try:
        while pos < stop:
            if pos + _MIN_BLOCK > data_end:
                return pos, _INCOMPLETE
            block_type, length = header(buf, pos)
            if (block_type == PCAPNG_ENHANCED_PACKET_TYPE and _EPB_SIZE + _TRAILER_SIZE <= length <= MAX_PCAPNG_BLOCK
                    and not length & 3):
                following = pos + length
                if following > data_end:
                    return pos, _INCOMPLETE
                if trailer(buf, following - _TRAILER_SIZE)[0] != length:
                    return pos, _CORRUPT
                _, _, interface, high, low, captured, original = epb(buf, pos)
                if interface >= len(interfaces):
                    counts[UNKNOWN_INTERFACE] += 1
                else:
                    linktype, multiplier, divisor, offset = interfaces[interface]
                    ts = section.last_ts = ((high << 32) | low) * multiplier // divisor + offset
                    if _EPB_SIZE + captured > length - _TRAILER_SIZE:
                        counts[MALFORMED] += 1
                    else:
                        records += 1
                        packet = decode(buf, pos + _EPB_SIZE, captured, original if original > captured else captured,
                                        linktype, order_base + pos, ts, refs)
                        if packet.__class__ is str:
                            counts[packet] += 1
                        else:
                            packets += 1
                            yield packet
                pos = following
                continue
            block_type, length, ended = _block_at(buf, pos, data_end, section)
            if ended != _DONE:
                return pos, ended
            if block_type == PCAPNG_SECTION_HEADER_TYPE:
                header, trailer, epb, pb, spb, _ = section.structs
                interfaces = section.interfaces
            elif block_type == PCAPNG_INTERFACE_DESCRIPTION_TYPE:
                if length < _IDB_SIZE + _TRAILER_SIZE:
                    counts[MALFORMED] += 1
                else:
                    section.add_interface(buf, pos, length)
            elif block_type == PCAPNG_SIMPLE_PACKET_TYPE or block_type == PCAPNG_PACKET_TYPE:
                interface, captured, original = 0, -1, -1
                if block_type == PCAPNG_SIMPLE_PACKET_TYPE:
                    data, ts = pos + _SPB_SIZE, section.last_ts
                    if length >= _SPB_SIZE + _TRAILER_SIZE:
                        original = spb(buf, pos)[2]
                        # No captured length: the interface's snaplen and the block's size bound it.
                        captured = min(original, length - _SPB_SIZE - _TRAILER_SIZE)
                        if interfaces and section.described[0][1]:
                            captured = min(captured, section.described[0][1])
                else:
                    data, ts = pos + _PB_SIZE, 0
                    if length >= _PB_SIZE + _TRAILER_SIZE:
                        _, _, interface, _, high, low, captured, original = pb(buf, pos)
                        if interface < len(interfaces):
                            _, multiplier, divisor, offset = interfaces[interface]
                            ts = section.last_ts = ((high << 32) | low) * multiplier // divisor + offset
                if interface >= len(interfaces):
                    counts[UNKNOWN_INTERFACE] += 1
                elif captured < 0 or data + captured > pos + length - _TRAILER_SIZE:
                    counts[MALFORMED] += 1
                else:
                    records += 1
                    packet = decode(buf, data, captured, original if original > captured else captured,
                                    interfaces[interface][0], order_base + pos, ts, refs)
                    if packet.__class__ is str:
                        counts[packet] += 1
                    else:
                        packets += 1
                        yield packet
            elif block_type == PCAPNG_ENHANCED_PACKET_TYPE:
                counts[MALFORMED] += 1  # too short for its fixed fields
            pos += length
        return pos, _DONE
    finally:
        counts["records"] += records
        counts["packets"] += packets


def _walk_pcapng(buf, size: int, first_cut: int, split_bytes: int | None):
    """Yield (offset, context) at the first block starting at or after ``first_cut``, then at the first
    one ``split_bytes`` further each time (once if ``split_bytes`` is None), jumping block to block."""
    section = _Section()
    pos, cut = 0, first_cut
    last_packet = None   # the latest Enhanced/Packet Block of a known interface, for Simple Packet times
    carried_ts = 0       # its time, once the section it was read in has ended
    while True:
        if pos >= cut:
            if last_packet is not None:
                section.last_ts = section.timestamp_at(buf, last_packet)
            else:
                section.last_ts = carried_ts
            yield pos, section.context()
            if split_bytes is None:
                return
            cut = pos + split_bytes
        header, trailer, epb, pb, _, _ = section.structs
        if pos + _MIN_BLOCK > size:
            return
        block_type, length = header(buf, pos)
        # The common block, checked here as _block_at would (lengths, trailer), without its call: the
        # driver walks every block of every capture before any task starts.
        if (block_type == PCAPNG_ENHANCED_PACKET_TYPE and _EPB_SIZE + _TRAILER_SIZE <= length <= MAX_PCAPNG_BLOCK
                and not length & 3 and pos + length <= size
                and trailer(buf, pos + length - _TRAILER_SIZE)[0] == length):
            if epb(buf, pos)[2] < len(section.interfaces):
                last_packet = pos
            pos += length
            continue
        if block_type == PCAPNG_SECTION_HEADER_TYPE and last_packet is not None:
            carried_ts, last_packet = section.timestamp_at(buf, last_packet), None
        block_type, length, ended = _block_at(buf, pos, size, section)
        if ended != _DONE:
            return  # the rest is one split, which stops at the same place
        if block_type == PCAPNG_INTERFACE_DESCRIPTION_TYPE and length >= _IDB_SIZE + _TRAILER_SIZE:
            section.add_interface(buf, pos, length)
        elif block_type == PCAPNG_ENHANCED_PACKET_TYPE and length >= _EPB_SIZE + _TRAILER_SIZE:
            if epb(buf, pos)[2] < len(section.interfaces):
                last_packet = pos
        elif block_type == PCAPNG_PACKET_TYPE and length >= _PB_SIZE + _TRAILER_SIZE:
            if pb(buf, pos)[2] < len(section.interfaces):
                last_packet = pos
        pos += length


def _read_pcapng(mm, path: str, size: int, start: int, stop: int, order_base: int, context, counts, refs: bool):
    if start == 0:
        pos, section = 0, _Section()
    elif context is not None and context.get("aligned"):
        pos, section = start, _Section.from_context(context)
    else:
        # A split we did not plan: the section and interfaces in force come from the blocks before it.
        found = next(_walk_pcapng(mm, size, start, None), None)
        if found is None:
            return
        pos, section = found[0], _Section.from_context(found[1])
    pos, ended = yield from _pcapng_blocks(mm, pos, stop, size, order_base, section, counts, refs)
    if ended == _INCOMPLETE:
        _torn(counts, path, pos, size - pos)
    elif ended == _CORRUPT:  # pcapng has no resync: a block's length is the only way to the next
        counts.skip(CORRUPT, path, pos, size - pos,
                    f"a block that cannot be right at byte {pos}; {size - pos} bytes to the end of the file not read")


# ---------------------------------------------------------------------------------------------------
# Files

def _format_of(magic: bytes) -> str | None:
    if bytes(magic[:4]) in PCAP_MAGICS:
        return "pcap"
    if bytes(magic[:4]) == _SHB_BYTES:
        return "pcapng"
    if bytes(magic[:2]) == GZIP_MAGIC:
        return "gzip"
    return None


def _read_stream(stream, path: str, order_base: int, counts):
    """A decompressed capture, chunk by chunk: memory stays at a chunk plus the largest record."""
    torn = False

    def more(wanted: int = STREAM_CHUNK) -> bytes:
        nonlocal torn
        parts, got = [], 0
        while got < wanted and not torn:
            try:
                part = stream.read1(wanted - got)  # one read at a time keeps what precedes a tear
            except EOFError:  # a gzip file cut short, as a killed compressor leaves it
                torn = True
                break
            except (OSError, zlib.error) as error:
                raise CaptureError(f"{path}: corrupt gzip data: {error}") from error
            if not part:
                break
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    inside = " of the decompressed data"
    buf = more()
    if not buf:
        if torn:
            _torn(counts, path, 0, 0, inside)
        return
    kind = _format_of(buf)
    if kind not in ("pcap", "pcapng"):
        raise NotACaptureError(path, buf[:4], " (inside gzip)")
    while kind == "pcap" and len(buf) < _PCAP_HEADER_SIZE:
        chunk = more()
        if not chunk:
            counts.skip(TRUNCATED_TAIL, path, 0, len(buf), f"{len(buf)} bytes{inside}, shorter than a pcap file header")
            return
        buf += chunk
    if kind == "pcap":
        facts = _PcapFacts.from_header(buf, path)
        pos = _PCAP_HEADER_SIZE
    else:
        section = _Section()
        pos = 0
    consumed = 0
    while True:
        # ``buf`` is a chunk of the decompressed file: payloads are copied out (Packets, never PacketRefs).
        if kind == "pcap":
            walk = _pcap_records(buf, pos, len(buf), len(buf), order_base + consumed, facts, counts)
        else:
            walk = _pcapng_blocks(buf, pos, len(buf), len(buf), order_base + consumed, section, counts)
        pos, ended = yield from walk
        if ended == _CORRUPT:  # a stream is read once, front to back: no resync
            counts.skip(CORRUPT, path, consumed + pos, None,
                        f"a record that cannot be right at byte {consumed + pos}{inside}; the rest was not read")
            return
        # Reading at least as much again as is pending keeps the copying linear for records larger
        # than a chunk.
        chunk = more(max(STREAM_CHUNK, len(buf) - pos))
        if not chunk:
            if pos < len(buf) or torn:
                _torn(counts, path, consumed + pos, len(buf) - pos, inside)
            return
        consumed += pos
        buf = buf[pos:] + chunk
        pos = 0


def iter_packets(path, file_index: int = 0, start: int = 0, end: int | None = None,
                 context: dict | None = None, stats: dict | None = None, *,
                 payloads: bool = True, skipped: list | None = None) -> Iterator[Packet | PacketRef]:
    """The TCP packets of the records of capture ``path`` that start in ``[start, end)``, in file order.

    ``Packet.order`` is ``file_index * 2**40`` plus the record's byte offset in the (decompressed) file.
    ``context`` is a ``Split.context`` from ``plan_splits``; without one, a split starting mid-file finds
    its first record itself. Counts of what was skipped are added to ``stats`` (see the module's doc),
    and a ``SkippedBytes`` for each run of bytes skipped is appended to ``skipped``.
    Raises ``NotACaptureError`` for a file that is no capture; an empty file has no packets.

    ``payloads=False`` leaves the payloads in the file: a plain pcap or pcapng file yields ``PacketRef``
    (where its payload is) instead of ``Packet``; a gzip-compressed one, which cannot be read at an
    offset, still yields Packets with their payloads.
    """
    counts = _Counts()
    try:
        yield from _read(os.fspath(path), file_index * ORDER_STRIDE, start, end, context, counts, not payloads)
    finally:
        if stats is not None:
            for key, value in counts.items():
                if value:
                    stats[key] = stats.get(key, 0) + value
        if skipped is not None:
            skipped.extend(counts.skips)


def iter_split(split: Split, stats: dict | None = None, *, payloads: bool = True,
               skipped: list | None = None) -> Iterator[Packet | PacketRef]:
    """``iter_packets`` over one ``Split``."""
    return iter_packets(split.path, split.file_index, split.start, split.end, split.context, stats,
                        payloads=payloads, skipped=skipped)


def _read(path: str, order_base: int, start: int, end: int | None, context, counts, refs: bool = False):
    with open(path, "rb") as file:
        magic = file.read(4)
        if not magic:
            return
        kind = _format_of(magic)
        if kind is None:
            raise NotACaptureError(path, magic)
        if kind == "gzip":
            if start > 0:
                return  # not splittable: the split at 0 reads it all
            file.seek(0)
            with gzip.GzipFile(fileobj=file, mode="rb") as stream:
                yield from _read_stream(stream, path, order_base, counts)
            return
        size = os.fstat(file.fileno()).st_size
        stop = size if end is None else min(end, size)
        if start >= stop:
            return
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if hasattr(mm, "madvise"):
                mm.madvise(mmap.MADV_SEQUENTIAL)
            if kind == "pcap":
                yield from _read_pcap(mm, path, size, start, stop, order_base, context, counts, refs)
            else:
                yield from _read_pcapng(mm, path, size, start, stop, order_base, context, counts, refs)


def release_pages(mapping: mmap.mmap, end: int | None = None) -> None:
    """Drop the pages of a read-only file mapping (up to ``end``, or all) from this process: they stay
    in the page cache, and a later read maps them again. Without it a process that walks a capture
    keeps every page it touched resident, as much as the file, whatever its size."""
    if _DONTNEED is None:  # a platform without madvise(MADV_DONTNEED): the pages stay
        return
    if end is None:
        mapping.madvise(_DONTNEED)
    elif end >= mmap.PAGESIZE:
        mapping.madvise(_DONTNEED, 0, end - end % mmap.PAGESIZE)


_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


# A read that faults on a file mapping maps the pages around it: 64 KB of small pages (fault_around_bytes),
# or a whole large folio of the page cache, up to 2 MB, which is how a file read sequentially (by the
# planning walk, by stage 1) is cached on recent kernels (6.x, ext4). A PayloadReader counts the 2 MB
# regions its reads touched and releases its pages once they could hold MAPPED_BUDGET.
_REGION_SHIFT = 21
MAPPED_BUDGET = 256 << 20


class PayloadReader:
    """Reads ``PacketRef`` payloads back from the run's files (``paths[file_index]``), each file mmap-ed
    once, on first use, and kept open until ``close()``: a task re-reads many payloads of few files, and
    the page cache makes each read a copy. A small payload's read maps up to the 2 MB around it, and a
    task reading connection after connection across a file would keep all of it resident (3.2 GB in a
    worker decoding a 5 GB capture): once the reads may have mapped ``MAPPED_BUDGET``, the pages are
    released. (Counting 64 KB per read instead let 750 MB stay mapped under a 256 MB budget.)
    (One pread per payload bounds memory too, at 0.05-0.3 CPU-s more per GB here.) Use as a context
    manager."""

    def __init__(self, paths):
        self.paths = [os.fspath(path) for path in paths]
        self._maps: dict[int, mmap.mmap] = {}
        self._regions: set[tuple[int, int]] = set()  # (file, 2 MB region) read since the last release
        self._budget = MAPPED_BUDGET >> _REGION_SHIFT

    def payload(self, ref: PacketRef) -> bytes:
        return self.read(ref.order // ORDER_STRIDE, ref.payload_offset, ref.payload_length)

    def read(self, file_index: int, offset: int, length: int) -> bytes:
        mm = self._maps.get(file_index)
        if mm is None:
            mm = self._open(file_index)
        data = mm[offset:offset + length]
        if len(data) != length:
            raise CaptureError(f"{self.paths[file_index]}: {length} payload bytes at offset {offset} are past "
                               f"the end of the file ({len(mm)} bytes): it changed since it was read")
        regions = self._regions
        first, last = offset >> _REGION_SHIFT, (offset + length - 1) >> _REGION_SHIFT
        regions.add((file_index, first))
        if last != first:
            regions.update((file_index, region) for region in range(first + 1, last + 1))
        if len(regions) >= self._budget:
            self.release()
        return data

    def release(self) -> None:
        """Release the pages mapped so far (see ``release_pages``)."""
        self._regions.clear()
        for mm in self._maps.values():
            release_pages(mm)

    def _open(self, file_index: int) -> mmap.mmap:
        if not 0 <= file_index < len(self.paths):
            raise CaptureError(f"a payload of file {file_index} of a run of {len(self.paths)} file(s)")
        path = self.paths[file_index]
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size == 0:
                raise CaptureError(f"{path}: empty, but packets were read from it: it changed since")
            mm = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)  # stays valid after the file closes
        self._maps[file_index] = mm
        return mm

    def close(self) -> None:
        maps, self._maps = self._maps, {}
        for mm in maps.values():
            mm.close()

    def __enter__(self) -> "PayloadReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------------
# Planning

def plan_splits(path, file_index: int = 0, split_bytes: int = SPLIT_BYTES) -> list[Split]:
    """Cut a capture into splits of about ``split_bytes`` at exact record offsets, with one walk over its
    record headers (nothing else is read). gzip-compressed files cannot be cut: one split, whole."""
    if split_bytes <= 0:
        raise ValueError(f"split_bytes must be positive, not {split_bytes}")
    path = os.fspath(path)
    whole = [Split(path, file_index, 0, None, None)]
    with open(path, "rb") as file:
        magic = file.read(4)
        if not magic:
            return whole
        kind = _format_of(magic)
        if kind is None:
            raise NotACaptureError(path, magic)
        if kind == "gzip":
            return whole
        size = os.fstat(file.fileno()).st_size
        if size <= split_bytes:
            return [Split(path, file_index, 0, size, None)]
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if hasattr(mm, "madvise"):
                mm.madvise(mmap.MADV_SEQUENTIAL)
            if kind == "pcap":
                cuts = _pcap_cuts(mm, path, size, split_bytes)
            else:
                cuts = [(0, None)]
                for cut in _walk_pcapng(mm, size, split_bytes, split_bytes):
                    cuts.append(cut)
                    release_pages(mm, cut[0])
    ends = [start for start, _ in cuts[1:]] + [size]
    return [Split(path, file_index, start, stop, context) for (start, context), stop in zip(cuts, ends)
            if start < stop]


def _pcap_cuts(buf, path: str, size: int, split_bytes: int) -> list[tuple[int, dict | None]]:
    if size < _PCAP_HEADER_SIZE:
        return [(0, None)]
    facts = _PcapFacts.from_header(buf, path)
    lengths = Struct(facts.byteorder + "II").unpack_from  # incl_len, orig_len
    lengths_at = offset_of(pcap_record_header(LITTLE), "incl_len")
    max_incl = facts.max_incl
    starts = [0]
    pos, last, cut = _PCAP_HEADER_SIZE, None, split_bytes
    while pos + _PCAP_RECORD_SIZE <= size:
        if pos >= cut:
            starts.append(pos)
            cut = pos + split_bytes
            release_pages(buf, pos)
        incl, orig = lengths(buf, pos + lengths_at)
        if incl > max_incl or not (incl or orig):
            break  # corrupt (as _pcap_records sees it): the last split resyncs past it, as a whole read does
        last = pos
        pos += _PCAP_RECORD_SIZE + incl
    if last is not None:
        facts.ts_window = [facts.timestamp_at(buf, _PCAP_HEADER_SIZE), facts.timestamp_at(buf, last)]
    context = facts.context(True)
    return [(start, context) for start in starts]


# ---------------------------------------------------------------------------------------------------
# Inputs

def is_capture(path) -> bool:
    """Whether ``path`` starts like a capture: a pcap or pcapng magic, or gzip around one."""
    try:
        with open(path, "rb") as file:
            kind = _format_of(file.read(4))
            if kind != "gzip":
                return kind is not None
            file.seek(0)
            with gzip.GzipFile(fileobj=file, mode="rb") as stream:
                return _format_of(stream.read(4)) in ("pcap", "pcapng")
    except (OSError, EOFError, zlib.error):
        return False


def _read_exactly(stream, count: int) -> bytes | None:
    data = stream.read(count)
    return data if len(data) == count else None


_FIRST_TIMESTAMP_BLOCKS = 4096  # blocks looked at before giving up on finding a pcapng packet


def first_timestamp_ns(path) -> int | None:
    """The time of the first packet record in a capture (None if it has none), reading only its head."""
    path = os.fspath(path)
    with open(path, "rb") as file:
        magic = file.read(4)
        if not magic:
            return None
        kind = _format_of(magic)
        if kind is None:
            raise NotACaptureError(path, magic)
        file.seek(0)
        try:
            if kind == "gzip":
                with gzip.GzipFile(fileobj=file, mode="rb") as stream:
                    return _first_timestamp(stream, path)
            return _first_timestamp(file, path)
        except (EOFError, zlib.error, gzip.BadGzipFile):
            return None


def _first_timestamp(stream, path: str) -> int | None:
    magic = _read_exactly(stream, 4)
    if magic is None:
        return None
    kind = _format_of(magic)
    if kind == "pcap":
        rest = _read_exactly(stream, _PCAP_HEADER_SIZE - 4 + _PCAP_RECORD_SIZE)
        if rest is None:
            return None
        head = magic + rest
        return _PcapFacts.from_header(head, path).timestamp_at(head, _PCAP_HEADER_SIZE)
    if kind != "pcapng":
        raise NotACaptureError(path, magic, " (inside gzip)")
    section = _Section()
    block_head = magic
    for _ in range(_FIRST_TIMESTAMP_BLOCKS):
        rest = _read_exactly(stream, _MIN_BLOCK - len(block_head))
        if rest is None:
            return None
        block = block_head + rest
        block_type, length, ended = _block_at(block, 0, len(block), section)
        if ended == _CORRUPT:
            return None
        if ended == _INCOMPLETE:
            rest = _read_exactly(stream, length - len(block))
            if rest is None:
                return None
            block += rest
            block_type, length, ended = _block_at(block, 0, len(block), section)
            if ended != _DONE:
                return None
        if block_type == PCAPNG_INTERFACE_DESCRIPTION_TYPE and length >= _IDB_SIZE + _TRAILER_SIZE:
            section.add_interface(block, 0, length)
        elif (block_type == PCAPNG_ENHANCED_PACKET_TYPE and length >= _EPB_SIZE + _TRAILER_SIZE
              or block_type == PCAPNG_PACKET_TYPE and length >= _PB_SIZE + _TRAILER_SIZE):
            ts = section.timestamp_at(block, 0)
            if ts is not None:
                return ts
        block_head = b""
    return None


def _natural(path: str) -> list:
    """``cap2`` before ``cap10``: digit runs compare as numbers."""
    return [int(part) if index % 2 else part for index, part in enumerate(re.split(r"(\d+)", path))]


def _captures_under(folder: str) -> list[str]:
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found.extend(path for path in (os.path.join(root, name) for name in sorted(files))
                     if os.path.isfile(path) and is_capture(path))
    return found


def expand_inputs(patterns) -> list[str]:
    """Capture files named by ``patterns`` (a path, a folder or a glob, or a list of them), in capture order.

    Folders are searched recursively, and folders and globs keep only files that start like a capture
    (``is_capture``); a file named outright is kept whatever it is, so a wrong one fails loudly
    (``NotACaptureError``). The order is (first packet's time, name with numbers compared as numbers),
    which puts tcpdump's rotated series (``-C``: name, name1, name2...; ``-G``: strftime names) in
    capture order; files without packets go last.
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    found: dict[str, None] = {}
    for pattern in patterns:
        pattern = os.fspath(pattern)
        if os.path.isdir(pattern):
            found.update(dict.fromkeys(_captures_under(pattern)))
        elif os.path.isfile(pattern):
            found[pattern] = None
        else:
            matches = sorted(glob.glob(pattern, recursive=True))
            if not matches:
                raise FileNotFoundError(f"{pattern}: no such file or folder, and no files match it")
            for match in matches:
                if os.path.isdir(match):
                    found.update(dict.fromkeys(_captures_under(match)))
                elif is_capture(match):
                    found[match] = None
    unique: dict[str, str] = {}
    for path in found:
        unique.setdefault(os.path.realpath(path), path)

    def capture_order(path: str):
        ts = first_timestamp_ns(path)
        return (0, ts, _natural(path)) if ts is not None else (1, 0, _natural(path))

    return sorted(unique.values(), key=capture_order)

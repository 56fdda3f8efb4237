"""pcapng files: sections, interfaces and the packet blocks, read block to block by their lengths.

A Section Header Block starts a section (its byte order); Interface Description Blocks describe the
interfaces (link type, snap length, time resolution and offset) that the section's packet blocks name.
A split that starts mid-file needs the section and interfaces in force there: ``walk_pcapng`` finds
them by walking from the file start (and gives them as a split's context when planning). A corrupt
block length has no resync: a block's length is the only way to the next.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from ...pcap.layouts import (
    BIG, DEFAULT_TSRESOL, IF_TSOFFSET, IF_TSRESOL, LITTLE, PCAPNG_ENHANCED_PACKET_TYPE, PCAPNG_INTERFACE_DESCRIPTION_TYPE,
    PCAPNG_PACKET_TYPE, PCAPNG_SECTION_HEADER_TYPE, PCAPNG_SIMPLE_PACKET_TYPE, packed, pcapng_block_header,
    pcapng_block_trailer, pcapng_byte_order, pcapng_enhanced_packet, pcapng_interface_description, pcapng_options,
    pcapng_packet, pcapng_simple_packet, tsresol_ticks_per_second,
)
from . import packet_headers
from .packet_headers import decode_packet
from .reading import CORRUPT, MALFORMED, UNKNOWN_INTERFACE, WALK_CORRUPT, WALK_DONE, WALK_INCOMPLETE, torn_tail

__all__ = ["Section", "block_at", "pcapng_blocks", "walk_pcapng", "read_pcapng", "MIN_BLOCK", "EPB_SIZE",
           "PB_SIZE", "IDB_SIZE", "TRAILER_SIZE"]

MAX_PCAPNG_BLOCK = 64 << 20     # a pcapng block longer than this is a corrupt header
_BYTE_ORDER_MAGIC_AT = 8        # in a Section Header Block

Unpackers = tuple[Callable[..., tuple[Any, ...]], ...]
_PCAPNG: dict[str, Unpackers] = {}  # byte order -> (block header, trailer, EPB, PB, SPB, IDB) unpackers


def _pcapng_structs(byteorder: str) -> Unpackers:
    found = _PCAPNG.get(byteorder)
    if found is None:
        found = _PCAPNG[byteorder] = tuple(packed(layout(byteorder)).unpack_from for layout in (
            pcapng_block_header, pcapng_block_trailer, pcapng_enhanced_packet, pcapng_packet,
            pcapng_simple_packet, pcapng_interface_description))
    return found


EPB_SIZE = pcapng_enhanced_packet(LITTLE).sizeof()
PB_SIZE = pcapng_packet(LITTLE).sizeof()
SPB_SIZE = pcapng_simple_packet(LITTLE).sizeof()
IDB_SIZE = pcapng_interface_description(LITTLE).sizeof()
TRAILER_SIZE = pcapng_block_trailer(LITTLE).sizeof()
MIN_BLOCK = pcapng_block_header(LITTLE).sizeof() + TRAILER_SIZE


class Section:
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
        self.interfaces: list[tuple[int, int, int, int]] = []
        self.described: list[list[int]] = []

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
        if length > IDB_SIZE + TRAILER_SIZE:  # options: rare, so parsed with the declaration
            options = bytes(buf[pos + IDB_SIZE:pos + length - TRAILER_SIZE])
            for option in pcapng_options(self.byteorder).parse(options):
                if option.code == IF_TSRESOL and option.length >= 1:
                    tsresol = option.value[0]
                elif option.code == IF_TSOFFSET and option.length >= 8:
                    endian: Literal["little", "big"] = "little" if self.byteorder == LITTLE else "big"
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
    def from_context(cls, context: dict) -> "Section":
        if context.get("format") != "pcapng":
            raise ValueError(f"not a pcapng split context: {context!r}")
        return cls(context["byteorder"], context["interfaces"], context.get("last_ts_ns") or 0)


def block_at(buf, pos: int, data_end: int, section: Section):
    """(block type, total length, how it ended) of the block at ``pos``; enters a new section at an SHB.

    Ends WALK_INCOMPLETE if the block runs past ``data_end``, WALK_CORRUPT if its lengths cannot be right.
    """
    if pos + MIN_BLOCK > data_end:
        return 0, 0, WALK_INCOMPLETE
    block_type, length = section.structs[0](buf, pos)
    if block_type == PCAPNG_SECTION_HEADER_TYPE:
        at = pos + _BYTE_ORDER_MAGIC_AT
        byteorder = pcapng_byte_order(buf[at:at + 4])
        if byteorder is None:
            return block_type, 0, WALK_CORRUPT
        section.enter(byteorder)
        length = section.structs[0](buf, pos)[1]
    if length < MIN_BLOCK or length & 3 or length > MAX_PCAPNG_BLOCK:
        return block_type, length, WALK_CORRUPT
    if pos + length > data_end:
        return block_type, length, WALK_INCOMPLETE
    if section.structs[1](buf, pos + length - TRAILER_SIZE)[0] != length:
        return block_type, length, WALK_CORRUPT
    return block_type, length, WALK_DONE


def pcapng_blocks(buf, pos: int, stop: int, data_end: int, order_base: int, section: Section, counts,
                   refs: bool = False):
    """Yield the packets of the blocks starting in [pos, stop) and complete before ``data_end``.
    Returns (position, how it ended), as ``pcap_reader.pcap_records`` does (``refs`` too)."""
    header, trailer, epb, pb, spb, _ = section.structs
    interfaces = section.interfaces
    decode = decode_packet
    run = packet_headers.NATIVE.pcapng_run if packet_headers.NATIVE is not None else None
    big = section.byteorder == BIG
    records = packets = 0
    try:
        while pos < stop:
            if run is not None:  # C reads the common blocks from here; the rest, one at a time, below
                found, at, last = run(buf, pos, stop, data_end, order_base, interfaces, big, refs)
                if at != pos:
                    pos = at
                    records += len(found)
                    packets += len(found)
                    section.last_ts = last
                    yield from found
                    continue
            if pos + MIN_BLOCK > data_end:
                return pos, WALK_INCOMPLETE
            block_type, length = header(buf, pos)
            if (block_type == PCAPNG_ENHANCED_PACKET_TYPE and EPB_SIZE + TRAILER_SIZE <= length <= MAX_PCAPNG_BLOCK
                    and not length & 3):
                following = pos + length
                if following > data_end:
                    return pos, WALK_INCOMPLETE
                if trailer(buf, following - TRAILER_SIZE)[0] != length:
                    return pos, WALK_CORRUPT
                _, _, interface, high, low, captured, original = epb(buf, pos)
                if interface >= len(interfaces):
                    counts[UNKNOWN_INTERFACE] += 1
                else:
                    linktype, multiplier, divisor, offset = interfaces[interface]
                    ts = section.last_ts = ((high << 32) | low) * multiplier // divisor + offset
                    if EPB_SIZE + captured > length - TRAILER_SIZE:
                        counts[MALFORMED] += 1
                    else:
                        records += 1
                        packet = decode(buf, pos + EPB_SIZE, captured, original if original > captured else captured,
                                        linktype, order_base + pos, ts, refs)
                        if packet.__class__ is str:
                            counts[packet] += 1
                        else:
                            packets += 1
                            yield packet
                pos = following
                continue
            block_type, length, ended = block_at(buf, pos, data_end, section)
            if ended != WALK_DONE:
                return pos, ended
            if block_type == PCAPNG_SECTION_HEADER_TYPE:
                header, trailer, epb, pb, spb, _ = section.structs
                interfaces = section.interfaces
                big = section.byteorder == BIG
            elif block_type == PCAPNG_INTERFACE_DESCRIPTION_TYPE:
                if length < IDB_SIZE + TRAILER_SIZE:
                    counts[MALFORMED] += 1
                else:
                    section.add_interface(buf, pos, length)
            elif block_type == PCAPNG_SIMPLE_PACKET_TYPE or block_type == PCAPNG_PACKET_TYPE:
                interface, captured, original = 0, -1, -1
                if block_type == PCAPNG_SIMPLE_PACKET_TYPE:
                    data, ts = pos + SPB_SIZE, section.last_ts
                    if length >= SPB_SIZE + TRAILER_SIZE:
                        original = spb(buf, pos)[2]
                        # No captured length: the interface's snaplen and the block's size bound it.
                        captured = min(original, length - SPB_SIZE - TRAILER_SIZE)
                        if interfaces and section.described[0][1]:
                            captured = min(captured, section.described[0][1])
                else:
                    data, ts = pos + PB_SIZE, 0
                    if length >= PB_SIZE + TRAILER_SIZE:
                        _, _, interface, _, high, low, captured, original = pb(buf, pos)
                        if interface < len(interfaces):
                            _, multiplier, divisor, offset = interfaces[interface]
                            ts = section.last_ts = ((high << 32) | low) * multiplier // divisor + offset
                if interface >= len(interfaces):
                    counts[UNKNOWN_INTERFACE] += 1
                elif captured < 0 or data + captured > pos + length - TRAILER_SIZE:
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
        return pos, WALK_DONE
    finally:
        counts["records"] += records
        counts["packets"] += packets


def walk_pcapng(buf, size: int, first_cut: int, split_bytes: int | None):
    """Yield (offset, context) at the first block starting at or after ``first_cut``, then at the first
    one ``split_bytes`` further each time (once if ``split_bytes`` is None), jumping block to block."""
    section = Section()
    pos, cut = 0, first_cut
    last_packet = None   # the latest Enhanced/Packet Block of a known interface, for Simple Packet times
    carried_ts = 0       # its time, once the section it was read in has ended
    while True:
        if pos >= cut:
            if last_packet is not None:
                section.last_ts = section.timestamp_at(buf, last_packet) or 0  # a known interface's: not None
            else:
                section.last_ts = carried_ts
            yield pos, section.context()
            if split_bytes is None:
                return
            cut = pos + split_bytes
        header, trailer, epb, pb, _, _ = section.structs
        if pos + MIN_BLOCK > size:
            return
        block_type, length = header(buf, pos)
        # The common block, checked here as _block_at would (lengths, trailer), without its call: the
        # driver walks every block of every capture before any task starts.
        if (block_type == PCAPNG_ENHANCED_PACKET_TYPE and EPB_SIZE + TRAILER_SIZE <= length <= MAX_PCAPNG_BLOCK
                and not length & 3 and pos + length <= size
                and trailer(buf, pos + length - TRAILER_SIZE)[0] == length):
            if epb(buf, pos)[2] < len(section.interfaces):
                last_packet = pos
            pos += length
            continue
        if block_type == PCAPNG_SECTION_HEADER_TYPE and last_packet is not None:
            carried_ts, last_packet = section.timestamp_at(buf, last_packet) or 0, None  # as above
        block_type, length, ended = block_at(buf, pos, size, section)
        if ended != WALK_DONE:
            return  # the rest is one split, which stops at the same place
        if block_type == PCAPNG_INTERFACE_DESCRIPTION_TYPE and length >= IDB_SIZE + TRAILER_SIZE:
            section.add_interface(buf, pos, length)
        elif block_type == PCAPNG_ENHANCED_PACKET_TYPE and length >= EPB_SIZE + TRAILER_SIZE:
            if epb(buf, pos)[2] < len(section.interfaces):
                last_packet = pos
        elif block_type == PCAPNG_PACKET_TYPE and length >= PB_SIZE + TRAILER_SIZE:
            if pb(buf, pos)[2] < len(section.interfaces):
                last_packet = pos
        pos += length


def read_pcapng(mm, path: str, size: int, start: int, stop: int, order_base: int, context, counts, refs: bool):
    if start == 0:
        pos, section = 0, Section()
    elif context is not None and context.get("aligned"):
        pos, section = start, Section.from_context(context)
    else:
        # A split we did not plan: the section and interfaces in force come from the blocks before it.
        found = next(walk_pcapng(mm, size, start, None), None)
        if found is None:
            return
        pos, section = found[0], Section.from_context(found[1])
    pos, ended = yield from pcapng_blocks(mm, pos, stop, size, order_base, section, counts, refs)
    if ended == WALK_INCOMPLETE:
        torn_tail(counts, path, pos, size - pos)
    elif ended == WALK_CORRUPT:  # pcapng has no resync: a block's length is the only way to the next
        corrupt_block(counts, path, pos, size)


def corrupt_block(counts, path: str, pos: int, size: int) -> None:
    """Counts and lists the bytes from a corrupt block at ``pos`` to the end of the file (not read)."""
    counts.skip(CORRUPT, path, pos, size - pos,
                f"a block that cannot be right at byte {pos}; {size - pos} bytes to the end of the file not read")


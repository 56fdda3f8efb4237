"""One captured frame -> ``Packet``: its link, IP and TCP headers, parsed in one function.

``decode_packet`` runs for every record of every capture, so its fast paths come first (Ethernet and
IPv4); the other link types, VLAN tags and IPv6 extension headers take the slower paths below it. A
frame that gives no packet gives the reason instead (a ``stats`` key of ``reading``).
Checksums are not checked: captures on the sending host carry offloaded, unfilled ones.

``NATIVE`` is the optional C twin (``_packets.c``, None when not built or ``KAFKAWIRE_PURE_PYTHON=1``):
the readers hand it runs of blocks or records, which it reads while they are the common case (Ethernet,
IPv4 or IPv6 without extension headers, TCP), leaving every other one to the Python code here.
"""
from __future__ import annotations

from socket import AF_INET6, inet_ntop
from struct import Struct

from ...pcap.layouts import (
    ETHERNET_HEADER, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN_TAGS, IPPROTO_AH, IPPROTO_FRAGMENT,
    IPPROTO_TCP, IPV4_HEADER, IPV6_EXTENSION_HEADER, IPV6_EXTENSIONS_IN_8_OCTETS, IPV6_FRAGMENT_HEADER,
    IPV6_HEADER, LINKTYPE_ETHERNET, LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP, LINKTYPE_NULL, LINKTYPE_RAW, NULL_FAMILIES_IPV4, NULL_FAMILIES_IPV6, SLL2_HEADER, SLL_HEADER,
    TCP_HEADER, VLAN_TAG, offset_of, packed,
)
from ...accelerators import load
from ..model import Packet, PacketRef
from .reading import FRAGMENT, HEADERS_CUT, MALFORMED, NOT_IP, NOT_TCP, UNKNOWN_LINK

__all__ = ["decode_packet", "NATIVE"]

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


NATIVE = load("kafkawire.capture.files._packets")
if NATIVE is not None:
    NATIVE.configure(Packet, PacketRef, _v6_text)


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


def decode_packet(buf, off: int, captured: int, wire: int, linktype: int, order: int, ts_ns: int, refs: bool):
    """The Packet in a frame of ``captured`` bytes at ``off`` (``wire`` bytes on the wire), or why not;
    with ``refs`` (``buf`` is the whole file) a PacketRef to its payload instead of a copy of it."""
    end = off + captured
    version: int | str  # the IP version, or why the link layer holds no IP packet
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

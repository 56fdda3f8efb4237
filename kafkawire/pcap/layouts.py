"""The fixed binary layouts of capture files and of the link, IP and TCP headers, declared with construct.

The declarations are the reference: tests, writers and the rare-block readers (pcapng options) parse
or build with them, and the per-packet readers use ``struct`` formats derived from them (``packed``),
so the two cannot drift apart.

Capture files come in either byte order (the writer's), so their layouts are functions of a byte
order, ``"<"`` (little-endian) or ``">"`` (big-endian), and cached. Network headers are big-endian.
Fields that pack several values into one byte or word (IPv4 version and IHL, TCP data offset, fragment
flags) are declared as the whole byte or word; the ``*_of`` helpers below take them apart.

Sources: the pcap and pcapng drafts (draft-ietf-opsawg-pcap, draft-ietf-opsawg-pcapng), the tcpdump.org
link-type registry, RFC 791, RFC 8200 and RFC 9293.
"""
from __future__ import annotations

from functools import cache

from construct import (
    Bytes, GreedyRange, Int8ub, Int8ul, Int16ub, Int16ul, Int32sb, Int32sl, Int32ub, Int32ul, Int64sb,
    Int64sl, Padding, Struct as Layout, this,
)

from ..layout_formats import offset_of, packed  # re-exported: the capture reader derives its formats here

__all__ = [
    "LITTLE", "BIG", "GZIP_MAGIC", "PCAP_MAGIC_MICROS", "PCAP_MAGIC_NANOS", "PCAP_MAGICS",
    "PCAPNG_SECTION_HEADER_TYPE", "PCAPNG_BYTE_ORDER_MAGIC", "PCAPNG_INTERFACE_DESCRIPTION_TYPE",
    "PCAPNG_PACKET_TYPE", "PCAPNG_SIMPLE_PACKET_TYPE", "PCAPNG_ENHANCED_PACKET_TYPE",
    "OPT_ENDOFOPT", "IF_TSRESOL", "IF_TSOFFSET", "DEFAULT_TSRESOL",
    "pcap_file_header", "pcap_record_header", "pcap_byte_order",
    "pcapng_block_header", "pcapng_block_trailer", "pcapng_section_header", "pcapng_interface_description",
    "pcapng_enhanced_packet", "pcapng_simple_packet", "pcapng_packet", "pcapng_options", "pcapng_byte_order",
    "null_header", "ETHERNET_HEADER", "VLAN_TAG", "SLL_HEADER", "SLL2_HEADER",
    "IPV4_HEADER", "IPV6_HEADER", "IPV6_EXTENSION_HEADER", "IPV6_FRAGMENT_HEADER", "TCP_HEADER",
    "LINKTYPE_NULL", "LINKTYPE_ETHERNET", "LINKTYPE_RAW", "LINKTYPE_LOOP", "LINKTYPE_LINUX_SLL",
    "LINKTYPE_IPV4", "LINKTYPE_IPV6", "LINKTYPE_LINUX_SLL2", "pcap_link_type",
    "ETHERTYPE_IPV4", "ETHERTYPE_IPV6", "ETHERTYPE_VLAN_TAGS", "NULL_FAMILIES_IPV4", "NULL_FAMILIES_IPV6",
    "IPPROTO_TCP", "IPV6_EXTENSIONS_IN_8_OCTETS", "IPPROTO_FRAGMENT", "IPPROTO_AH",
    "ipv4_header_length", "ipv4_is_fragment", "ipv6_is_fragment", "tcp_header_length",
    "tsresol_ticks_per_second", "packed", "offset_of",
]

LITTLE, BIG = "<", ">"

# ---------------------------------------------------------------------------------------------------
# Magics: the first bytes of a file tell its format.

GZIP_MAGIC = b"\x1f\x8b"
PCAP_MAGIC_MICROS = 0xA1B2C3D4  # timestamps in seconds + microseconds
PCAP_MAGIC_NANOS = 0xA1B23C4D   # seconds + nanoseconds
# The first four bytes of a pcap file -> (byte order, nanosecond timestamps).
PCAP_MAGICS = {
    PCAP_MAGIC_MICROS.to_bytes(4, "little"): (LITTLE, False),
    PCAP_MAGIC_MICROS.to_bytes(4, "big"): (BIG, False),
    PCAP_MAGIC_NANOS.to_bytes(4, "little"): (LITTLE, True),
    PCAP_MAGIC_NANOS.to_bytes(4, "big"): (BIG, True),
}

PCAPNG_SECTION_HEADER_TYPE = 0x0A0D0D0A  # a palindrome: readable before the byte order is known
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D
PCAPNG_INTERFACE_DESCRIPTION_TYPE = 0x00000001
PCAPNG_PACKET_TYPE = 0x00000002           # obsolete, still written by old tools
PCAPNG_SIMPLE_PACKET_TYPE = 0x00000003
PCAPNG_ENHANCED_PACKET_TYPE = 0x00000006

OPT_ENDOFOPT = 0
IF_TSRESOL = 9     # one byte: 10**-n seconds, or 2**-n with the top bit set
IF_TSOFFSET = 14   # int64 seconds added to every timestamp of the interface
DEFAULT_TSRESOL = 6

_INTS = {
    LITTLE: {"u8": Int8ul, "u16": Int16ul, "u32": Int32ul, "i32": Int32sl, "i64": Int64sl},
    BIG: {"u8": Int8ub, "u16": Int16ub, "u32": Int32ub, "i32": Int32sb, "i64": Int64sb},
}


def _declare(byteorder: str, *fields: tuple[str, str]) -> Layout:
    ints = _INTS[byteorder]
    return Layout(*(name / ints[kind] for name, kind in fields))


# ---------------------------------------------------------------------------------------------------
# pcap (libpcap) files: a 24-byte file header, then records of a 16-byte header and the packet bytes.

@cache
def pcap_file_header(byteorder: str) -> Layout:
    return _declare(
        byteorder,
        ("magic", "u32"),
        ("version_major", "u16"),
        ("version_minor", "u16"),
        ("thiszone", "i32"),   # always 0 in practice
        ("sigfigs", "u32"),    # always 0 in practice
        ("snaplen", "u32"),
        ("linktype", "u32"),   # link type in the low 28 bits; FCS-length flags above (pcap_link_type)
    )


@cache
def pcap_record_header(byteorder: str) -> Layout:
    return _declare(
        byteorder,
        ("ts_sec", "u32"),
        ("ts_frac", "u32"),    # microseconds, or nanoseconds with PCAP_MAGIC_NANOS
        ("incl_len", "u32"),   # bytes captured, following this header
        ("orig_len", "u32"),   # bytes on the wire
    )


def pcap_byte_order(magic: bytes) -> tuple[str, bool] | None:
    """(byte order, nanosecond timestamps) for a pcap file's first four bytes; None if not pcap."""
    return PCAP_MAGICS.get(bytes(magic[:4]))


def pcap_link_type(linktype_field: int) -> int:
    """The link type in a pcap header's ``linktype`` field (the top bits carry FCS-length flags)."""
    return linktype_field & 0x03FFFFFF


# ---------------------------------------------------------------------------------------------------
# pcapng files: blocks of ``type | total_length | body | total_length``, total_length a multiple of 4.
# Each block layout below covers the fixed part from the block type on; options and packet data follow.

@cache
def pcapng_block_header(byteorder: str) -> Layout:
    return _declare(byteorder, ("block_type", "u32"), ("block_total_length", "u32"))


@cache
def pcapng_block_trailer(byteorder: str) -> Layout:
    return _declare(byteorder, ("block_total_length", "u32"))


@cache
def pcapng_section_header(byteorder: str) -> Layout:
    return _declare(
        byteorder,
        ("block_type", "u32"),
        ("block_total_length", "u32"),
        ("byte_order_magic", "u32"),
        ("version_major", "u16"),
        ("version_minor", "u16"),
        ("section_length", "i64"),  # -1 when not known
    )


@cache
def pcapng_interface_description(byteorder: str) -> Layout:
    return _declare(
        byteorder,
        ("block_type", "u32"),
        ("block_total_length", "u32"),
        ("linktype", "u16"),
        ("reserved", "u16"),
        ("snaplen", "u32"),
    )


@cache
def pcapng_enhanced_packet(byteorder: str) -> Layout:
    return _declare(
        byteorder,
        ("block_type", "u32"),
        ("block_total_length", "u32"),
        ("interface_id", "u32"),
        ("timestamp_high", "u32"),
        ("timestamp_low", "u32"),
        ("captured_len", "u32"),
        ("original_len", "u32"),
    )


@cache
def pcapng_simple_packet(byteorder: str) -> Layout:
    """No interface id (always 0), no timestamp, no captured length (the block's size bounds it)."""
    return _declare(
        byteorder,
        ("block_type", "u32"),
        ("block_total_length", "u32"),
        ("original_len", "u32"),
    )


@cache
def pcapng_packet(byteorder: str) -> Layout:
    """The obsolete Packet Block (type 2), which the Enhanced Packet Block replaced."""
    return _declare(
        byteorder,
        ("block_type", "u32"),
        ("block_total_length", "u32"),
        ("interface_id", "u16"),
        ("drops_count", "u16"),
        ("timestamp_high", "u32"),
        ("timestamp_low", "u32"),
        ("captured_len", "u32"),
        ("original_len", "u32"),
    )


@cache
def pcapng_options(byteorder: str) -> GreedyRange:
    """A block's option list: code, length, value padded to 4 bytes; ``OPT_ENDOFOPT`` ends it."""
    ints = _INTS[byteorder]
    return GreedyRange(Layout(
        "code" / ints["u16"],
        "length" / ints["u16"],
        "value" / Bytes(this.length),
        Padding(lambda ctx: -ctx.length % 4),
    ))


def pcapng_byte_order(byte_order_magic: bytes) -> str | None:
    """The byte order of a section from the four bytes of its header's byte-order magic."""
    if bytes(byte_order_magic) == PCAPNG_BYTE_ORDER_MAGIC.to_bytes(4, "little"):
        return LITTLE
    if bytes(byte_order_magic) == PCAPNG_BYTE_ORDER_MAGIC.to_bytes(4, "big"):
        return BIG
    return None


def tsresol_ticks_per_second(tsresol: int) -> int:
    """Timestamp units per second for an ``if_tsresol`` value."""
    return 1 << (tsresol & 0x7F) if tsresol & 0x80 else 10 ** tsresol


# ---------------------------------------------------------------------------------------------------
# Link layers, by LINKTYPE_ value.

LINKTYPE_NULL = 0          # BSD loopback: 4-byte address family in the capturing host's byte order
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101         # IPv4 or IPv6, told apart by the version nibble
LINKTYPE_LOOP = 108        # OpenBSD loopback: the family in network byte order (seen both ways)
LINKTYPE_LINUX_SLL = 113   # tcpdump -i any, libpcap < 1.10
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276  # tcpdump -i any, libpcap >= 1.10

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
ETHERTYPE_VLAN_TAGS = frozenset({0x8100, 0x88A8, 0x9100})  # 802.1Q, 802.1ad (QinQ outer), pre-standard QinQ

# BSD address families differ by OS for IPv6 (NetBSD/OpenBSD 24, FreeBSD 28, Darwin 30, Linux 10).
NULL_FAMILIES_IPV4 = frozenset({2})
NULL_FAMILIES_IPV6 = frozenset({10, 24, 28, 30})

ETHERNET_HEADER = Layout(
    "destination" / Bytes(6),
    "source" / Bytes(6),
    "ethertype" / Int16ub,  # below 0x0600 it is an 802.3 length, not a type
)

# An 802.1Q or 802.1ad tag sits where the ethertype was; its own ethertype follows the TCI.
VLAN_TAG = Layout(
    "tci" / Int16ub,  # priority, drop-eligible bit, VLAN id
    "ethertype" / Int16ub,
)


@cache
def null_header(byteorder: str) -> Layout:
    return _declare(byteorder, ("family", "u32"))


SLL_HEADER = Layout(
    "packet_type" / Int16ub,
    "arphrd_type" / Int16ub,
    "address_length" / Int16ub,
    "address" / Bytes(8),
    "protocol" / Int16ub,  # an ethertype
)

SLL2_HEADER = Layout(
    "protocol" / Int16ub,  # an ethertype
    "reserved" / Int16ub,
    "interface_index" / Int32ub,
    "arphrd_type" / Int16ub,
    "packet_type" / Int8ub,
    "address_length" / Int8ub,
    "address" / Bytes(8),
)

# ---------------------------------------------------------------------------------------------------
# IP and TCP.

IPPROTO_TCP = 6
IPPROTO_FRAGMENT = 44
IPPROTO_AH = 51  # its length counts 4-octet units, less 2
# Extension headers whose second byte is their length in 8-octet units, not counting the first 8:
# hop-by-hop, routing, destination options, mobility, HIP, shim6.
IPV6_EXTENSIONS_IN_8_OCTETS = frozenset({0, 43, 60, 135, 139, 140})

IPV4_HEADER = Layout(
    "version_ihl" / Int8ub,        # version in the high nibble, header length in 4-byte words in the low
    "tos" / Int8ub,
    "total_length" / Int16ub,      # 0 in captures of TSO super-segments
    "identification" / Int16ub,
    "flags_fragment_offset" / Int16ub,
    "ttl" / Int8ub,
    "protocol" / Int8ub,
    "checksum" / Int16ub,
    "source" / Bytes(4),
    "destination" / Bytes(4),
)  # options up to the header length follow

IPV6_HEADER = Layout(
    "version_class_flow" / Int32ub,
    "payload_length" / Int16ub,    # extension headers included; 0 for jumbograms and some TSO captures
    "next_header" / Int8ub,
    "hop_limit" / Int8ub,
    "source" / Bytes(16),
    "destination" / Bytes(16),
)

IPV6_EXTENSION_HEADER = Layout(
    "next_header" / Int8ub,
    "length" / Int8ub,  # see IPV6_EXTENSIONS_IN_8_OCTETS and IPPROTO_AH
)

IPV6_FRAGMENT_HEADER = Layout(
    "next_header" / Int8ub,
    "reserved" / Int8ub,
    "offset_flags" / Int16ub,  # fragment offset in 8-octet units in the top 13 bits, M flag in bit 0
    "identification" / Int32ub,
)

TCP_HEADER = Layout(
    "source_port" / Int16ub,
    "destination_port" / Int16ub,
    "seq" / Int32ub,
    "ack" / Int32ub,
    "data_offset" / Int8ub,  # header length in 4-byte words in the high nibble
    "flags" / Int8ub,        # CWR ECE URG ACK PSH RST SYN FIN
    "window" / Int16ub,
    "checksum" / Int16ub,
    "urgent_pointer" / Int16ub,
)  # options up to the header length follow


def ipv4_header_length(version_ihl: int) -> int:
    return (version_ihl & 0x0F) * 4


def ipv4_is_fragment(flags_fragment_offset: int) -> bool:
    """True for any fragment of a fragmented datagram (more-fragments set or a non-zero offset)."""
    return flags_fragment_offset & 0x3FFF != 0


def ipv6_is_fragment(offset_flags: int) -> bool:
    """True unless an atomic fragment (offset 0, no more fragments), which carries the whole datagram."""
    return offset_flags & 0xFFF9 != 0


def tcp_header_length(data_offset: int) -> int:
    return (data_offset >> 4) * 4

"""pcapng bytes for synthesised TCP conversations, without I/O.

- ``section_header_block`` / ``interface_description_block`` / ``enhanced_packet_block``: the three
  pcapng blocks a capture of one Ethernet interface needs (timestamps in nanoseconds).
- ``TcpConversationWriter``: one TCP connection turned into Ethernet/IPv4-or-IPv6/TCP packets: the
  three-way handshake, each write split into segments of at most ``mss`` bytes (PSH on the last) and
  acknowledged by the peer, then a FIN exchange or a RST. Sequence numbers wrap modulo 2**32 and
  the IPv4 and TCP checksums are correct, so Wireshark's TCP analysis has nothing to flag.

Every method returns the Enhanced Packet Blocks to append to a file that starts with
``file_header()``. The struct formats are derived from the declarations in ``layouts`` and packed
with ``struct``, not construct: this runs on the broker's hot path when its tap is on.
"""
from __future__ import annotations

import hashlib
import ipaddress
import struct

from .layouts import (
    ETHERNET_HEADER, ETHERTYPE_IPV4, ETHERTYPE_IPV6, IF_TSRESOL, IPPROTO_TCP, IPV4_HEADER, IPV6_HEADER,
    LINKTYPE_ETHERNET, LITTLE, OPT_ENDOFOPT, PCAPNG_BYTE_ORDER_MAGIC, PCAPNG_ENHANCED_PACKET_TYPE,
    PCAPNG_INTERFACE_DESCRIPTION_TYPE, PCAPNG_SECTION_HEADER_TYPE, TCP_HEADER, packed, pcapng_block_trailer,
    pcapng_enhanced_packet, pcapng_interface_description, pcapng_section_header,
)

__all__ = [
    "DEFAULT_MSS", "DEFAULT_SNAPLEN", "LINKTYPE_ETHERNET", "TcpConversationWriter",
    "enhanced_packet_block", "file_header", "interface_description_block", "section_header_block",
]

DEFAULT_SNAPLEN = 262144
# Linux's MSS on loopback: IPv4's 16-bit total length less 20 (IP), 20 (TCP) and 12 (TCP timestamps).
# These segments carry no timestamps, so an MSS up to 65495 would fit; ``mss`` is checked against that.
DEFAULT_MSS = 65483

_SHB_USERAPPL = 4
_IF_NAME = 2
_NANOSECONDS = 9  # if_tsresol: 10**-9 s per timestamp unit

# Files are written little-endian; the struct formats come from the declared layouts.
_BLOCK_TRAILER = packed(pcapng_block_trailer(LITTLE))
_SHB_HEAD = packed(pcapng_section_header(LITTLE))
_IDB_HEAD = packed(pcapng_interface_description(LITTLE))
_EPB_HEAD = packed(pcapng_enhanced_packet(LITTLE))
_OPTION_HEAD = struct.Struct("<HH")  # code, length

_FIN, _SYN, _RST, _PSH, _ACK = 0x01, 0x02, 0x04, 0x08, 0x10
_TTL = 64
_DONT_FRAGMENT = 0x4000
_WINDOW_SHIFT = 14  # the largest RFC 7323 allows: a 1 GiB window never fills on a 100 MiB frame
_WINDOW = 0xFFFF
_MASK32 = 0xFFFFFFFF
_CLIENT_MAC = bytes.fromhex("020000000001")  # locally administered addresses
_SERVER_MAC = bytes.fromhex("020000000002")

_ETHERNET = packed(ETHERNET_HEADER)
_IPV4 = packed(IPV4_HEADER)
_IPV6 = packed(IPV6_HEADER)
_TCP_HEADER = packed(TCP_HEADER)
# SYN options: MSS, NOP, window scale (8 bytes, so the header stays a multiple of 4).
_SYN_OPTIONS = struct.Struct(">BBHBBBB")


def _pad4(length: int) -> int:
    return -length % 4


def _option(code: int, value: bytes) -> bytes:
    return _OPTION_HEAD.pack(code, len(value)) + value + b"\0" * _pad4(len(value))


_END_OF_OPTIONS = _OPTION_HEAD.pack(OPT_ENDOFOPT, 0)


def section_header_block(user_appl: str = "kafkawire") -> bytes:
    """A little-endian Section Header Block of unknown section length, naming the writing program."""
    options = _option(_SHB_USERAPPL, user_appl.encode()) + _END_OF_OPTIONS
    total = _SHB_HEAD.size + len(options) + _BLOCK_TRAILER.size
    return (_SHB_HEAD.pack(PCAPNG_SECTION_HEADER_TYPE, total, PCAPNG_BYTE_ORDER_MAGIC, 1, 0, -1)
            + options + _BLOCK_TRAILER.pack(total))


def interface_description_block(name: str = "kafkawire", linktype: int = LINKTYPE_ETHERNET,
                                snaplen: int = DEFAULT_SNAPLEN) -> bytes:
    """An Interface Description Block with nanosecond timestamps (if_tsresol 9)."""
    options = (_option(_IF_NAME, name.encode()) + _option(IF_TSRESOL, bytes([_NANOSECONDS])) + _END_OF_OPTIONS)
    total = _IDB_HEAD.size + len(options) + _BLOCK_TRAILER.size
    return (_IDB_HEAD.pack(PCAPNG_INTERFACE_DESCRIPTION_TYPE, total, linktype, 0, snaplen)
            + options + _BLOCK_TRAILER.pack(total))


def file_header(user_appl: str = "kafkawire", interface_name: str = "kafkawire") -> bytes:
    """The start of a pcapng file: one section with one Ethernet interface (interface id 0)."""
    return section_header_block(user_appl) + interface_description_block(interface_name)


def enhanced_packet_block(frame, ts_ns: int, interface_id: int = 0) -> bytes:
    """One captured packet, whole (captured length = original length), ``ts_ns`` since the epoch."""
    return b"".join(_epb_parts([frame], len(frame), ts_ns, interface_id))


def _epb_parts(pieces: list, length: int, ts_ns: int, interface_id: int) -> list:
    pad = _pad4(length)
    total = _EPB_HEAD.size + length + pad + _BLOCK_TRAILER.size
    head = _EPB_HEAD.pack(PCAPNG_ENHANCED_PACKET_TYPE, total, interface_id, (ts_ns >> 32) & _MASK32,
                          ts_ns & _MASK32, length, length)
    return [head, *pieces, b"\0" * pad + _BLOCK_TRAILER.pack(total)]


def _fold(total: int) -> int:
    """The Internet checksum (RFC 1071) of words whose sum is ``total``.

    Summing 16-bit words with end-around carry is arithmetic modulo 0xFFFF, because 2**16 = 1 there;
    a residue of 0 stands for 0xFFFF (the data is never all zeros: the pseudo-header names TCP).
    """
    return 0xFFFF - (total % 0xFFFF or 0xFFFF)


def _word_sum(data) -> int:
    """The sum of ``data``'s big-endian 16-bit words (zero-padded), modulo 0xFFFF.

    ``int.from_bytes`` reads the bytes as one base-65536 number whose digits are the words, and a
    number is congruent to the sum of its digits modulo 0xFFFF; this is fast in C for any size.
    """
    value = int.from_bytes(data, "big")
    if len(data) & 1:
        value <<= 8
    return value % 0xFFFF


class _Side:
    """One end of the connection: its address and the sequence space of the bytes it sends."""

    __slots__ = ("port", "isn", "sent", "ip_id", "ethernet", "addresses", "pseudo_sum", "ipv4_sum")

    def __init__(self, address, port: int, peer_address, isn: int, mac: bytes, peer_mac: bytes, ipv6: bool):
        self.port = port
        self.isn = isn
        self.sent = 0  # sequence numbers used so far, SYN and FIN included (unbounded; masked when packed)
        self.ip_id = 0
        self.ethernet = _ETHERNET.pack(peer_mac, mac, ETHERTYPE_IPV6 if ipv6 else ETHERTYPE_IPV4)
        self.addresses = (address.packed, peer_address.packed)
        addresses_sum = _word_sum(address.packed) + _word_sum(peer_address.packed)
        self.pseudo_sum = addresses_sum + IPPROTO_TCP  # plus the TCP length, per segment
        # The IPv4 header's words that do not change from packet to packet.
        self.ipv4_sum = 0x4500 + _DONT_FRAGMENT + (_TTL << 8 | IPPROTO_TCP) + addresses_sum

    @property
    def next_seq(self) -> int:
        return self.isn + self.sent


def _initial_sequence(client, server, seed: int, role: str) -> int:
    digest = hashlib.blake2b(repr((client, server, seed, role)).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


class TcpConversationWriter:
    """The packets of one TCP connection between ``client`` and ``server`` (each ``(ip, port)``).

    Call ``open`` once, then ``client_data`` / ``server_data`` for each write in the order they
    happened, then ``close`` (FIN exchange) or ``abort`` (RST). Each returns the pcapng Enhanced
    Packet Blocks of the packets it implies, all stamped ``ts_ns``. Initial sequence numbers are
    derived from the addresses and ``seed`` unless given.
    """

    def __init__(self, client: tuple[str, int], server: tuple[str, int], *, mss: int = DEFAULT_MSS,
                 interface_id: int = 0, seed: int = 0, client_isn: int | None = None,
                 server_isn: int | None = None):
        client_ip, server_ip = ipaddress.ip_address(client[0]), ipaddress.ip_address(server[0])
        if client_ip.version != server_ip.version:
            raise ValueError(f"client {client[0]} and server {server[0]} are not of the same IP version")
        for name, port in (("client", client[1]), ("server", server[1])):
            if not 0 <= port <= 0xFFFF:
                raise ValueError(f"{name} port {port} is outside 0..65535")
        self.ipv6 = client_ip.version == 6
        limit = 0xFFFF - 20 - (0 if self.ipv6 else 20)  # the IP length field is 16 bits
        if not 1 <= mss <= limit:
            raise ValueError(f"mss {mss} is outside 1..{limit}")
        self.mss = mss
        self.interface_id = interface_id
        if client_isn is None:
            client_isn = _initial_sequence(client, server, seed, "client")
        if server_isn is None:
            server_isn = _initial_sequence(client, server, seed, "server")
        self.client = _Side(client_ip, client[1], server_ip, client_isn & _MASK32, _CLIENT_MAC, _SERVER_MAC,
                            self.ipv6)
        self.server = _Side(server_ip, server[1], client_ip, server_isn & _MASK32, _SERVER_MAC, _CLIENT_MAC,
                            self.ipv6)
        self.state = "new"  # new -> open -> closed

    # ---- the connection's events ----------------------------------------------------------------
    def open(self, ts_ns: int) -> bytes:
        """The three-way handshake."""
        self._expect("new", "open")
        self.state = "open"
        client, server = self.client, self.server
        options = _SYN_OPTIONS.pack(2, 4, self.mss, 1, 3, 3, _WINDOW_SHIFT)
        parts = self._segment(client, server, _SYN, b"", ts_ns, options, ack=0)
        client.sent += 1
        parts += self._segment(server, client, _SYN | _ACK, b"", ts_ns, options)
        server.sent += 1
        parts += self._segment(client, server, _ACK, b"", ts_ns)
        return b"".join(parts)

    def client_data(self, data, ts_ns: int) -> bytes:
        """A write by the client: its segments, then the server's acknowledgement."""
        return self._write(self.client, self.server, data, ts_ns)

    def server_data(self, data, ts_ns: int) -> bytes:
        """A write by the server: its segments, then the client's acknowledgement."""
        return self._write(self.server, self.client, data, ts_ns)

    def close(self, ts_ns: int, *, by_client: bool = True) -> bytes:
        """An orderly close begun by one side: FIN, the peer's FIN, the last ACK."""
        self._expect("open", "close")
        self.state = "closed"
        first, second = (self.client, self.server) if by_client else (self.server, self.client)
        parts = self._segment(first, second, _FIN | _ACK, b"", ts_ns)
        first.sent += 1
        parts += self._segment(second, first, _FIN | _ACK, b"", ts_ns)
        second.sent += 1
        parts += self._segment(first, second, _ACK, b"", ts_ns)
        return b"".join(parts)

    def abort(self, ts_ns: int, *, by_client: bool = True) -> bytes:
        """A connection reset by one side."""
        self._expect("open", "abort")
        self.state = "closed"
        sender, receiver = (self.client, self.server) if by_client else (self.server, self.client)
        return b"".join(self._segment(sender, receiver, _RST | _ACK, b"", ts_ns))

    # ---- packets --------------------------------------------------------------------------------
    def _expect(self, state: str, action: str) -> None:
        if self.state != state:
            raise ValueError(f"cannot {action} a TCP conversation that is {self.state}")

    def _write(self, sender: _Side, receiver: _Side, data, ts_ns: int) -> bytes:
        self._expect("open", "write to")
        size = len(data)
        if size == 0:
            return b""
        view = memoryview(data).cast("B")
        parts = []
        mss = self.mss
        for start in range(0, size, mss):
            end = min(start + mss, size)
            parts += self._segment(sender, receiver, _PSH | _ACK if end == size else _ACK, view[start:end], ts_ns)
            sender.sent += end - start
        parts += self._segment(receiver, sender, _ACK, b"", ts_ns)
        return b"".join(parts)

    def _segment(self, sender: _Side, receiver: _Side, flags: int, payload, ts_ns: int, options: bytes = b"",
                 ack: int | None = None) -> list:
        """The EPB pieces of one segment from ``sender``; ``ack`` defaults to all the receiver sent."""
        seq = sender.next_seq & _MASK32
        ack = receiver.next_seq & _MASK32 if ack is None else ack
        window = 0xFFFF if flags & _SYN else _WINDOW  # SYN windows are never scaled
        offset_byte = (5 + len(options) // 4) << 4
        tcp_length = 20 + len(options) + len(payload)
        total = (sender.pseudo_sum + tcp_length + sender.port + receiver.port + seq + ack
                 + (offset_byte << 8 | flags) + window)
        if options:
            total += _word_sum(options)
        if payload:
            total += _word_sum(payload)
        tcp = _TCP_HEADER.pack(sender.port, receiver.port, seq, ack, offset_byte, flags, window, _fold(total), 0)
        source, destination = sender.addresses
        if self.ipv6:
            ip = _IPV6.pack(0x60000000, tcp_length, IPPROTO_TCP, _TTL, source, destination)
        else:
            ip_length = 20 + tcp_length
            ip_id = sender.ip_id
            sender.ip_id = (ip_id + 1) & 0xFFFF
            checksum = _fold(sender.ipv4_sum + ip_length + ip_id)
            ip = _IPV4.pack(0x45, 0, ip_length, ip_id, _DONT_FRAGMENT, _TTL, IPPROTO_TCP, checksum, source, destination)
        headers = sender.ethernet + ip + tcp + options
        pieces = [headers, payload] if payload else [headers]
        return _epb_parts(pieces, len(headers) + len(payload), ts_ns, self.interface_id)

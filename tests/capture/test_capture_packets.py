"""kafkawire.capture.files.packets and its readers: capture files -> Packet, whole and by split.

Synthetic captures are written here byte by byte with ``struct`` (independently of kafkawire.pcap's
declarations); real ones are taken with tcpdump on loopback and checked against tshark.
"""
from __future__ import annotations

import gzip
import json
import os
import pickle
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kafkawire.capture.files.inputs import expand_inputs, first_timestamp_ns, is_capture
from kafkawire.capture.model import ACK, FIN, ORDER_STRIDE, PSH, SYN, Packet, PacketRef
from kafkawire.capture.files.packets import iter_packets, iter_split
from kafkawire.capture.files import payloads as payloads_module, splits as splits_module
from kafkawire.capture.files.payloads import PayloadReader
from kafkawire.capture.files.pcap_reader import find_record_boundary
from kafkawire.capture.files.reading import CaptureError, NotACaptureError
from kafkawire.capture.files.splits import Split, plan_splits
from kafkawire.pcap import layouts

T0 = 1_700_000_000 * 10**9 + 123_456_000  # a timestamp with whole microseconds


# ---------------------------------------------------------------------------------------------------
# Frames, written by hand.

def v4(text: str) -> bytes:
    return socket.inet_pton(socket.AF_INET, text)


def v6(text: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6, text)


def tcp(sport=40000, dport=9092, seq=1000, ack=2000, flags=ACK | PSH, payload=b"", options=b"") -> bytes:
    assert len(options) % 4 == 0
    offset = (20 + len(options)) // 4
    return struct.pack(">HHIIBBHHH", sport, dport, seq, ack, offset << 4, flags, 65535, 0xBEEF, 0) + options + payload


def ipv4(l4: bytes, src="10.0.0.1", dst="10.0.0.2", protocol=6, options=b"", fragment=0, total_length=None) -> bytes:
    ihl = (20 + len(options)) // 4
    length = 20 + len(options) + len(l4) if total_length is None else total_length
    return struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, 0, length, 7, fragment, 64, protocol, 0, v4(src), v4(dst)) \
        + options + l4


def ipv6(l4: bytes, src="fd00::1", dst="fd00::2", extensions=(), next_header=6, payload_length=None) -> bytes:
    """``extensions``: (type, body) pairs; each body gets its next-header byte put in front."""
    chain = b""
    kinds = [kind for kind, _ in extensions] + [next_header]
    for (kind, body), following in zip(extensions, kinds[1:]):
        chain += bytes([following]) + body
    first = kinds[0]
    length = len(chain) + len(l4) if payload_length is None else payload_length
    return struct.pack(">IHBB16s16s", 6 << 28, length, first, 64, v6(src), v6(dst)) + chain + l4


def ext8(extra_units=0) -> bytes:
    """A hop-by-hop / routing / destination-options body (after its next-header byte): 8*(n+1) bytes."""
    return bytes([extra_units]) + b"\x01\x04\x00\x00\x00\x00" + b"\x00" * (8 * extra_units)


def fragment_ext(offset=0, more=False) -> bytes:
    return b"\x00" + struct.pack(">HI", (offset << 3) | int(more), 0x1234)


def ah_ext() -> bytes:
    # length 4: (4 + 2) * 4 = 24 bytes in all
    return bytes([4]) + b"\x00\x00" + b"\x00\x00\x01\x00" + b"\x00\x00\x00\x01" + b"\xaa" * 12


def ethernet(l3: bytes, ethertype=0x0800, tags=()) -> bytes:
    header = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01"
    for tpid, vid in tags:
        header += struct.pack(">HH", tpid, vid)
    return header + struct.pack(">H", ethertype) + l3


def sll(l3: bytes, protocol=0x0800) -> bytes:
    return struct.pack(">HHH8sH", 0, 772, 6, b"\x00" * 8, protocol) + l3


def sll2(l3: bytes, protocol=0x0800) -> bytes:
    return struct.pack(">HHIHBB8s", protocol, 0, 1, 772, 0, 6, b"\x00" * 8) + l3


def null(l3: bytes, family: int, order: str) -> bytes:
    return struct.pack(order + "I", family) + l3


# ---------------------------------------------------------------------------------------------------
# Capture files, written by hand.

def pcap(records, order="<", nanos=False, linktype=1, snaplen=262144) -> bytes:
    """``records``: (ts_ns, frame[, wire length]); frames longer than ``snaplen`` are cut to it."""
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for record in records:
        ts, frame = record[0], record[1]
        wire = record[2] if len(record) > 2 else len(frame)
        kept = frame[:snaplen]
        frac = ts % 10**9 if nanos else ts % 10**9 // 1000
        out.append(struct.pack(order + "IIII", ts // 10**9, frac, len(kept), wire) + kept)
    return b"".join(out)


def _block(order: str, block_type: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    length = 12 + len(body)
    return struct.pack(order + "II", block_type, length) + body + struct.pack(order + "I", length)


def _options(order: str, options) -> bytes:
    out = b""
    for code, value in options:
        out += struct.pack(order + "HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)
    return out + struct.pack(order + "HH", 0, 0) if options else b""


def shb(order="<") -> bytes:
    return _block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1)
                  + _options(order, [(4, b"kafkawire tests")]))


def idb(order="<", linktype=1, snaplen=262144, tsresol=None, tsoffset=None) -> bytes:
    options = [(2, b"eth0")]
    if tsresol is not None:
        options.append((9, bytes([tsresol])))
    if tsoffset is not None:
        options.append((14, struct.pack(order + "q", tsoffset)))
    return _block(order, 1, struct.pack(order + "HHI", linktype, 0, snaplen) + _options(order, options))


def epb(frame: bytes, ticks: int, order="<", interface=0, wire=None) -> bytes:
    return _block(order, 6, struct.pack(order + "IIIII", interface, ticks >> 32, ticks & 0xFFFFFFFF, len(frame),
                                        len(frame) if wire is None else wire) + frame
                  + _options(order, [(1, b"a comment")]))


def spb(frame: bytes, order="<", wire=None) -> bytes:
    return _block(order, 3, struct.pack(order + "I", len(frame) if wire is None else wire) + frame)


def obsolete_pb(frame: bytes, ticks: int, order="<", interface=0) -> bytes:
    return _block(order, 2, struct.pack(order + "HHIIII", interface, 0, ticks >> 32, ticks & 0xFFFFFFFF,
                                        len(frame), len(frame)) + frame)


def other_block(order="<") -> bytes:
    return _block(order, 5, struct.pack(order + "IIII", 0, 0, 0, 0))  # an Interface Statistics Block


def write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def read(path, **kwargs) -> tuple[list[Packet], dict]:
    stats: dict = {}
    return list(iter_packets(path, stats=stats, **kwargs)), stats


def segment(n: int, size: int = 100, **kwargs) -> bytes:
    return tcp(seq=1000 + n, payload=bytes([n % 251]) * size, **kwargs)


# ---------------------------------------------------------------------------------------------------
# Link types, VLANs, IP and TCP headers

IPV4_SEGMENT = ipv4(tcp(payload=b"hello kafka"))
IPV6_SEGMENT = ipv6(tcp(payload=b"hello kafka"))

LINK_CASES = [
    ("ethernet-v4", 1, ethernet(IPV4_SEGMENT)),
    ("ethernet-v6", 1, ethernet(IPV6_SEGMENT, 0x86DD)),
    ("vlan-v4", 1, ethernet(IPV4_SEGMENT, tags=[(0x8100, 42)])),
    ("qinq-v6", 1, ethernet(IPV6_SEGMENT, 0x86DD, tags=[(0x88A8, 100), (0x8100, 42)])),
    ("old-qinq", 1, ethernet(IPV4_SEGMENT, tags=[(0x9100, 7), (0x8100, 42)])),
    ("sll-v4", 113, sll(IPV4_SEGMENT)),
    ("sll-v6", 113, sll(IPV6_SEGMENT, 0x86DD)),
    ("sll-vlan", 113, sll(struct.pack(">HH", 42, 0x0800) + IPV4_SEGMENT, 0x8100)),
    ("sll2-v4", 276, sll2(IPV4_SEGMENT)),
    ("sll2-v6", 276, sll2(IPV6_SEGMENT, 0x86DD)),
    ("null-le-v4", 0, null(IPV4_SEGMENT, 2, "<")),
    ("null-be-v4", 0, null(IPV4_SEGMENT, 2, ">")),
    ("null-linux-v6", 0, null(IPV6_SEGMENT, 10, "<")),
    ("null-bsd-v6", 0, null(IPV6_SEGMENT, 24, "<")),
    ("null-freebsd-v6", 0, null(IPV6_SEGMENT, 28, ">")),
    ("null-darwin-v6", 0, null(IPV6_SEGMENT, 30, "<")),
    ("loop-be-v4", 108, null(IPV4_SEGMENT, 2, ">")),
    ("loop-le-v6", 108, null(IPV6_SEGMENT, 30, "<")),
    ("raw-v4", 101, IPV4_SEGMENT),
    ("raw-v6", 101, IPV6_SEGMENT),
    ("ipv4", 228, IPV4_SEGMENT),
    ("ipv6", 229, IPV6_SEGMENT),
]


@pytest.mark.parametrize("name,linktype,frame", LINK_CASES, ids=[case[0] for case in LINK_CASES])
@pytest.mark.parametrize("order", ["<", ">"])
def test_every_link_type_in_pcap_and_pcapng(tmp_path, name, linktype, frame, order):
    is_v6 = name.endswith("v6")
    src, dst = ("fd00::1", "fd00::2") if is_v6 else ("10.0.0.1", "10.0.0.2")
    expected_tail = (src, 40000, dst, 9092, 1000, 2000, ACK | PSH, b"hello kafka", 0)

    path = write(tmp_path, "a.pcap", pcap([(T0, frame)], order=order, linktype=linktype))
    packets, stats = read(path)
    assert packets == [Packet(24, T0, *expected_tail)]
    assert stats == {"records": 1, "packets": 1}

    path = write(tmp_path, "a.pcapng", shb(order) + idb(order, linktype) + epb(frame, T0 // 1000, order))
    packets, stats = read(path)
    first_block = len(shb(order)) + len(idb(order, linktype))
    assert packets == [Packet(first_block, T0, *expected_tail)]
    assert stats == {"records": 1, "packets": 1}


def test_ip_and_tcp_options_and_ipv6_extension_headers(tmp_path):
    payload = b"\x00\x00\x00\x10" + b"k" * 16
    frames = [
        ipv4(tcp(payload=payload), options=b"\x01" * 4),                        # IHL 6
        ipv4(tcp(payload=payload, options=b"\x01" * 40), options=b"\x07" * 40),  # IHL 15, data offset 15
        ipv4(tcp(payload=payload, options=b"\x02\x04\x05\xb4" + b"\x01\x01\x04\x02")),
        ipv6(tcp(payload=payload), extensions=[(0, ext8())]),                   # hop-by-hop
        ipv6(tcp(payload=payload), extensions=[(0, ext8(1)), (43, ext8(2)), (60, ext8())]),
        ipv6(tcp(payload=payload), extensions=[(44, fragment_ext())]),         # atomic fragment
        ipv6(tcp(payload=payload), extensions=[(60, ext8()), (51, ah_ext())]),
    ]
    packets, stats = read(write(tmp_path, "o.pcap", pcap([(T0 + i, f) for i, f in enumerate(frames)], linktype=101)))
    assert [p.payload for p in packets] == [payload] * len(frames)
    assert all(p.missing == 0 and p.dport == 9092 for p in packets)
    assert stats == {"records": 7, "packets": 7}


def test_what_is_skipped_is_counted(tmp_path):
    udp = struct.pack(">HHHH", 53, 53, 12, 0) + b"dns!"
    frames = [
        (1, ethernet(ipv4(tcp(payload=b"first")))),
        (1, ethernet(b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\x00" * 20, 0x0806)),      # ARP
        (1, ethernet(b"\xaa\xaa\x03" + b"\x00" * 40, 100)),                             # 802.3 length
        (1, ethernet(ipv4(udp, protocol=17))),
        (1, ethernet(ipv6(b"\x80\x00" + b"\x00" * 6, next_header=58), 0x86DD)),       # ICMPv6
        (1, ethernet(ipv4(tcp(payload=b"x" * 8), fragment=0x2000))),                    # first, more follow
        (1, ethernet(ipv4(b"y" * 16, fragment=0x0003))),                                # a later fragment
        (1, ethernet(ipv6(tcp(payload=b"z"), extensions=[(44, fragment_ext(0, True))]), 0x86DD)),
        (1, ethernet(ipv6(b"w" * 16, extensions=[(44, fragment_ext(5, False))]), 0x86DD)),
        (1, ethernet(ipv4(tcp(), options=b"\x01" * 4)[:20] + b"\x45" * 10)),             # IP options cut off, no snap
        (1, ethernet(ipv4(tcp())[:30])),                                                # TCP header cut, no snap
        (1, ethernet(struct.pack(">BBHHHBBH4s4s", 0x43, 0, 40, 0, 0, 64, 6, 0, v4("1.1.1.1"), v4("2.2.2.2"))
                     + tcp())),                                                          # IHL 3
        (1, ethernet(ipv4(tcp()[:12] + b"\x30" + tcp()[13:]))),                          # data offset 3
        (1, ethernet(ipv4(tcp(payload=b"last")))),
    ]
    packets, stats = read(write(tmp_path, "s.pcap", pcap([(T0, f) for _, f in frames])))
    assert [p.payload for p in packets] == [b"first", b"last"]
    assert stats == {"records": 14, "packets": 2, "not_ip": 2, "not_tcp": 2, "ip_fragments": 4,
                     "malformed": 4}

    path = write(tmp_path, "u.pcap", pcap([(T0, b"\x00" * 60)], linktype=147))  # a user DLT
    assert read(path) == ([], {"records": 1, "unknown_link_type": 1})


def test_ethernet_padding_and_fcs_are_not_payload(tmp_path):
    short = ethernet(ipv4(tcp(payload=b"ab"))) + b"\x00" * 4 + b"\xde\xad\xbe\xef"  # padding to 60, then FCS
    packets, _ = read(write(tmp_path, "p.pcap", pcap([(T0, short)], linktype=1 | 0x14000000)))
    assert packets[0].payload == b"ab" and packets[0].missing == 0


def test_tso_segments_with_zero_ip_length(tmp_path):
    big = b"t" * 60000
    frames = [ethernet(ipv4(tcp(payload=big), total_length=0)),
              ethernet(ipv6(tcp(payload=big), payload_length=0), 0x86DD)]
    packets, _ = read(write(tmp_path, "t.pcap", pcap([(T0, f) for f in frames])))
    assert [p.payload for p in packets] == [big, big]


def test_snap_length_cut_becomes_missing(tmp_path):
    payload = bytes(range(256)) * 4
    frame = ethernet(ipv4(tcp(payload=payload)))
    path = write(tmp_path, "snap.pcap", pcap([(T0, frame), (T0 + 1, ethernet(ipv4(tcp(payload=b"tiny"))))], snaplen=96))
    packets, stats = read(path)
    headers = 14 + 20 + 20
    assert packets[0].payload == payload[:96 - headers]
    assert packets[0].missing == len(payload) - (96 - headers)
    assert packets[1].payload == b"tiny" and packets[1].missing == 0
    assert stats == {"records": 2, "packets": 2}

    # A snap length inside the headers: nothing to yield, and said so.
    path = write(tmp_path, "cut.pcap", pcap([(T0, frame)], snaplen=40))
    assert read(path) == ([], {"records": 1, "headers_cut": 1})
    path = write(tmp_path, "cut6.pcap", pcap([(T0, ipv6(tcp(), extensions=[(0, ext8(3))]))], linktype=101, snaplen=60))
    assert read(path) == ([], {"records": 1, "headers_cut": 1})
    path = write(tmp_path, "cut-sll.pcap", pcap([(T0, sll(IPV4_SEGMENT))], linktype=113, snaplen=10))
    assert read(path) == ([], {"records": 1, "headers_cut": 1})
    # The same shortness without a snap length to blame is a malformed frame.
    path = write(tmp_path, "runt.pcap", pcap([(T0, sll(IPV4_SEGMENT)[:10]), (T0, sll(IPV6_SEGMENT, 0x86DD)[:66])],
                                             linktype=113))
    assert read(path) == ([], {"records": 2, "malformed": 2})

    # pcapng: captured and original lengths per block.
    frame = ethernet(ipv6(tcp(payload=payload), extensions=[(60, ext8())]), 0x86DD)
    path = write(tmp_path, "snap.pcapng", shb() + idb(snaplen=200) + epb(frame[:200], 5, wire=len(frame)))
    packets, _ = read(path)
    assert packets[0].payload == payload[:200 - 14 - 40 - 8 - 20]
    assert len(packets[0].payload) + packets[0].missing == len(payload)


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nanos", [False, True])
def test_pcap_timestamps_in_both_byte_orders(tmp_path, order, nanos):
    times = [T0 + 789 * nanos, T0 + 10**9 + 999_999_000 + 999 * nanos, 0]
    path = write(tmp_path, "ts.pcap", pcap([(t, ethernet(IPV4_SEGMENT)) for t in times], order=order, nanos=nanos))
    assert [p.ts_ns for p in read(path)[0]] == times


def test_pcapng_timestamp_resolution_and_offset(tmp_path):
    frame = ethernet(IPV4_SEGMENT)
    data = (shb()
            + idb(tsresol=None)                      # 0: microseconds
            + idb(tsresol=9)                         # 1: nanoseconds
            + idb(tsresol=0x80 | 20)                 # 2: 2**-20 s
            + idb(tsresol=3, tsoffset=1_700_000_000)  # 3: milliseconds after an offset
            + idb(tsresol=10)                        # 4: tenths of nanoseconds
            + epb(frame, 1_700_000_000_123_456, interface=0)
            + epb(frame, 1_700_000_000_123_456_789, interface=1)
            + epb(frame, (1_700_000_000 << 20) + (1 << 19), interface=2)
            + epb(frame, 1500, interface=3)
            + epb(frame, 17_000_000_001_234_567_899, interface=4))
    packets, _ = read(write(tmp_path, "res.pcapng", data))
    assert [p.ts_ns for p in packets] == [
        1_700_000_000_123_456_000, 1_700_000_000_123_456_789, 1_700_000_000_500_000_000,
        1_700_000_001_500_000_000, 1_700_000_000_123_456_789]


def test_pcapng_sections_interfaces_and_block_kinds(tmp_path):
    f4 = ethernet(ipv4(tcp(payload=b"eth")))
    blocks = [
        shb("<"), idb("<", 1), epb(f4, 1, "<"),
        idb("<", 113),  # an interface described after packets of another
        epb(sll(ipv4(tcp(payload=b"sll"))), 2, "<", interface=1),
        epb(f4, 3, "<", interface=7),  # no such interface
        other_block("<"), spb(ethernet(ipv4(tcp(payload=b"simple"))), "<"),
        obsolete_pb(null(ipv4(tcp(payload=b"pb")), 2, "<"), 4, "<"),  # interface 0 is Ethernet: garbage
        shb(">"),  # a new section, other byte order: interface ids start again
        idb(">", 276, tsresol=9), idb(">", 0),
        epb(sll2(ipv4(tcp(payload=b"sll2"))), 5_000, ">"),
        obsolete_pb(null(ipv4(tcp(payload=b"null")), 2, ">"), 6_000, ">", interface=1),
        spb(sll2(ipv4(tcp(payload=b"simple2"))), ">"),
        epb(f4, 7, ">", interface=2),
    ]
    packets, stats = read(write(tmp_path, "multi.pcapng", b"".join(blocks)))
    assert [p.payload for p in packets] == [b"eth", b"sll", b"simple", b"sll2", b"null", b"simple2"]
    assert [p.ts_ns for p in packets] == [1000, 2000, 2000, 5000, 6_000_000, 6_000_000]
    assert [p.order for p in packets] == [sum(map(len, blocks[:i])) for i in (2, 4, 7, 12, 13, 14)]
    assert stats == {"records": 7, "packets": 6, "unknown_interface": 2, "not_ip": 1}


def test_truncated_tails_stop_quietly(tmp_path):
    records = [(T0 + i, ethernet(ipv4(segment(i, 300)))) for i in range(5)]
    whole = pcap(records)
    for cut in (len(whole) - 1, len(whole) - 300, len(whole) - 350 + 5):  # data, then header, torn
        packets, stats = read(write(tmp_path, "t.pcap", whole[:cut]))
        assert len(packets) == 4 and stats["truncated_tail"] == 1
    whole = shb() + idb() + b"".join(epb(f, i) for i, f in records)
    packets, stats = read(write(tmp_path, "t.pcapng", whole[:-10]))
    assert len(packets) == 4 and stats["truncated_tail"] == 1
    assert read(write(tmp_path, "h.pcap", whole[:0] + pcap([])[:10])) == ([], {"truncated_tail": 1})


def test_empty_and_packetless_files_and_not_captures(tmp_path):
    assert read(write(tmp_path, "empty.pcap", b"")) == ([], {})
    assert read(write(tmp_path, "none.pcap", pcap([]))) == ([], {})
    assert read(write(tmp_path, "none.pcapng", shb() + idb())) == ([], {})
    assert first_timestamp_ns(write(tmp_path, "none2.pcap", pcap([]))) is None
    path = write(tmp_path, "notes.txt", b"hello, not a capture")
    with pytest.raises(NotACaptureError) as caught:
        list(iter_packets(path))
    assert isinstance(caught.value, CaptureError) and isinstance(caught.value, ValueError)
    assert path in str(caught.value) and "68 65 6c 6c" in str(caught.value)
    with pytest.raises(NotACaptureError):
        plan_splits(path)
    gz = write(tmp_path, "notes.gz", gzip.compress(b"still not a capture"))
    with pytest.raises(NotACaptureError, match="inside gzip") as caught:
        list(iter_packets(gz))
    # The command line plans splits in a child process, whose errors come back pickled.
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is NotACaptureError and str(again) == str(caught.value)
    assert (again.path, again.magic, again.inside) == (caught.value.path, caught.value.magic, caught.value.inside)


def test_corrupt_pcapng_block_stops_and_pcap_resyncs(tmp_path):
    records = [(T0 + i * 1000, ethernet(ipv4(segment(i, 50 + 37 * i)))) for i in range(40)]
    good = pcap(records)
    offsets = [24]
    for _, frame in records:
        offsets.append(offsets[-1] + 16 + len(frame))
    bad = bytearray(good)
    struct.pack_into("<I", bad, offsets[10] + 8, 0x7FFFFFF0)  # record 10's captured length
    path = write(tmp_path, "bad.pcap", bytes(bad))
    packets, stats = read(path)
    assert [p.seq - 1000 for p in packets] == [i for i in range(40) if i != 10]
    assert stats["corrupt"] == 1
    assert [p for split in plan_splits(path, split_bytes=500) for p in iter_split(split)] == packets

    # Zeros where records should be (blocks a crash never wrote): in the middle, resynced past; at the end, the end.
    bad = bytearray(good)
    bad[offsets[5]:offsets[7]] = bytes(offsets[7] - offsets[5])
    bad[offsets[30]:] = bytes(len(good) - offsets[30])
    path = write(tmp_path, "zeros.pcap", bytes(bad))
    packets, stats = read(path)
    assert [p.seq - 1000 for p in packets] == [i for i in range(30) if i not in (5, 6)]
    assert stats == {"records": 28, "packets": 28, "corrupt": 2}
    assert [p for split in plan_splits(path, split_bytes=500) for p in iter_split(split)] == packets

    blocks = [shb(), idb()] + [epb(f, t // 1000) for t, f in records]
    bad = bytearray(b"".join(blocks))
    struct.pack_into("<I", bad, sum(map(len, blocks[:12])) + 4, 13)  # a length not a multiple of 4
    packets, stats = read(write(tmp_path, "bad.pcapng", bytes(bad)))
    assert len(packets) == 10 and stats["corrupt"] == 1


def test_skipped_bytes_say_where_how_many_and_why(tmp_path):
    """A corrupt record in the middle and a torn tail: each run of bytes skipped is listed with its
    file, offset and length (pcap resyncs past the corrupt header; pcapng and gzip streams stop)."""
    records = [(T0 + i * 1000, ethernet(ipv4(segment(i, 50 + 37 * i)))) for i in range(20)]
    good = pcap(records)
    offsets = [24]
    for _, frame in records:
        offsets.append(offsets[-1] + 16 + len(frame))
    bad = bytearray(good[:-7])  # the last record torn
    struct.pack_into("<I", bad, offsets[10] + 8, 0x7FFFFFF0)  # record 10's captured length
    path = write(tmp_path, "bad.pcap", bytes(bad))
    skipped: list = []
    stats: dict = {}
    packets = list(iter_packets(path, stats=stats, skipped=skipped))
    assert [p.seq - 1000 for p in packets] == [i for i in range(19) if i != 10]
    assert stats["corrupt"] == 1 and stats["truncated_tail"] == 1
    assert [(s.path, s.offset, s.length, s.kind) for s in skipped] == [
        (path, offsets[10], offsets[11] - offsets[10], "corrupt"),
        (path, offsets[19], len(bad) - offsets[19], "truncated_tail")]
    assert skipped[0].reason == (f"{path}: a record header that cannot be right at byte {offsets[10]}; reading "
                                 f"resumed at byte {offsets[11]} ({offsets[11] - offsets[10]} bytes skipped)")
    assert skipped[1].reason == (f"{path}: the last record, at byte {offsets[19]}, is cut short "
                                 f"({len(bad) - offsets[19]} bytes, not read)")
    # Read by splits, each run is listed once, by the split it starts in.
    by_splits: list = []
    for split in plan_splits(path, split_bytes=500):
        list(iter_split(split, skipped=by_splits))
    assert by_splits == skipped

    # gzip: the same file, compressed; a stream stops at the corrupt record.
    zipped = write(tmp_path, "bad.pcap.gz", gzip.compress(bytes(bad)))
    skipped = []
    assert len(list(iter_packets(zipped, skipped=skipped))) == 10
    assert [(s.offset, s.length, s.kind) for s in skipped] == [(offsets[10], None, "corrupt")]
    assert "of the decompressed data" in skipped[0].reason
    torn = write(tmp_path, "torn.pcap.gz", gzip.compress(good[:-7]))
    skipped = []
    assert len(list(iter_packets(torn, skipped=skipped))) == 19
    assert [(s.offset, s.length, s.kind) for s in skipped] == [(offsets[19], len(good) - 7 - offsets[19],
                                                                "truncated_tail")]

    # pcapng: a block of a bad length stops the read; the bytes from there to the end are listed.
    blocks = [shb(), idb()] + [epb(f, t // 1000) for t, f in records]
    at = sum(map(len, blocks[:12]))
    data = bytearray(b"".join(blocks))
    struct.pack_into("<I", data, at + 4, 13)
    path = write(tmp_path, "bad.pcapng", bytes(data))
    skipped = []
    assert len(list(iter_packets(path, skipped=skipped))) == 10
    assert [(s.offset, s.length, s.kind) for s in skipped] == [(at, len(data) - at, "corrupt")]
    path = write(tmp_path, "torn.pcapng", b"".join(blocks)[:-10])
    skipped = []
    assert len(list(iter_packets(path, skipped=skipped))) == 19
    last = sum(map(len, blocks[:-1]))
    assert [(s.offset, s.length, s.kind) for s in skipped] == [(last, len(blocks[-1]) - 10, "truncated_tail")]


# ---------------------------------------------------------------------------------------------------
# gzip

def test_gzip_captures_are_streamed_whole(tmp_path, monkeypatch):
    rng = random.Random(1)
    # One record is far larger than the 4 KiB chunks the stream is read in below.
    records = [(T0 + i, ethernet(ipv4(tcp(seq=i, payload=rng.randbytes(60000 if i == 30 else 1000 + i)))))
               for i in range(60)]
    for name, data in [("c.pcap", pcap(records, order=">")),
                       ("c.pcapng", shb() + idb() + b"".join(epb(f, t // 1000) for t, f in records))]:
        plain = write(tmp_path, name, data)
        packed = write(tmp_path, name + ".anything", gzip.compress(data))
        monkeypatch.setattr("kafkawire.capture.files.packets.STREAM_CHUNK", 4096)  # records straddle chunks
        expected, _ = read(plain, file_index=3)
        assert len(expected) == 60
        assert read(packed, file_index=3) == (expected, {"records": 60, "packets": 60})
        assert read(packed, start=1, end=10) == ([], {})
        assert plan_splits(packed, 3, split_bytes=100) == [Split(packed, 3, 0, None, None)]
        assert first_timestamp_ns(packed) == first_timestamp_ns(plain) == T0
        assert is_capture(packed)
        torn = write(tmp_path, name + ".torn.gz", gzip.compress(data)[:-2000])
        packets, stats = read(torn, file_index=3)
        assert packets == expected[:len(packets)] and len(packets) > 40 and stats["truncated_tail"] == 1


# ---------------------------------------------------------------------------------------------------
# Splits

def mixed_records(count: int, seed: int):
    """Packets from 40 bytes of payload to 64 KiB (loopback, TSO), on a few connections, in both IP
    versions and with a SYN and a FIN here and there."""
    rng = random.Random(seed)
    records, ts = [], T0
    for i in range(count):
        size = rng.choice([0, 40, 100, 1448, 1448, 1448, 9000, 65000 - 54])
        payload = rng.randbytes(size)
        flags = rng.choice([ACK, ACK | PSH, SYN, ACK | FIN])
        port = 40000 + rng.randrange(4)
        if rng.random() < 0.8:
            frame = ethernet(ipv4(tcp(sport=port, seq=i * 7919, payload=payload, flags=flags)))
        else:
            frame = ethernet(ipv6(tcp(sport=port, seq=i * 7919, payload=payload, flags=flags)), 0x86DD)
        ts += rng.randrange(0, 2_000_000)
        records.append((ts, frame))
    return records


@pytest.fixture(scope="module")
def mixed_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixed")
    records = mixed_records(300, seed=6)
    little = folder / "mixed.pcap"
    little.write_bytes(pcap(records, order="<"))
    big = folder / "mixed-be-ns.pcap"
    big.write_bytes(pcap(records, order=">", nanos=True))
    blocks = [shb(), idb(tsresol=9)]
    for i, (ts, frame) in enumerate(records):
        if i == 100:
            blocks += [idb(linktype=276, tsresol=9)]
        if i == 200:
            blocks += [shb(">"), idb(">", 113), idb(">", 1, tsresol=9)]
        if i >= 200:
            blocks.append(epb(frame, ts, ">", interface=1))
        elif i % 50 == 7:
            blocks.append(spb(frame))
        elif i % 3 == 0 and i > 100:
            blocks.append(epb(sll2(frame[14:], 0x0800 if frame[12:14] == b"\x08\x00" else 0x86DD), ts, interface=1))
        else:
            blocks.append(epb(frame, ts))
        if i % 40 == 0:
            blocks.append(other_block(">" if i >= 200 else "<"))
    ng = folder / "mixed.pcapng"
    ng.write_bytes(b"".join(blocks))
    return {"pcap": str(little), "pcap-be-ns": str(big), "pcapng": str(ng)}


@pytest.mark.parametrize("kind", ["pcap", "pcap-be-ns", "pcapng"])
def test_planned_splits_read_exactly_the_whole_file(mixed_files, kind):
    path = mixed_files[kind]
    whole, whole_stats = read(path, file_index=2)
    assert len(whole) == 300
    size = os.path.getsize(path)
    for split_bytes in (1, 100, 4096, 65536, 200_000, 777_777, size // 3, size - 1, size, 10 * size):
        splits = plan_splits(path, 2, split_bytes=split_bytes)
        assert splits[0].start == 0 and splits[-1].end == size
        assert all(a.end == b.start for a, b in zip(splits, splits[1:]))
        splits = [Split(*json.loads(json.dumps(split))) for split in splits]  # as a Spark job ships them
        stats: dict = {}
        assert [p for split in splits for p in iter_split(split, stats)] == whole, split_bytes
        assert stats == whole_stats
        if split_bytes == 65536:
            assert len(splits) > 20


@pytest.mark.parametrize("kind", ["pcap", "pcap-be-ns", "pcapng"])
def test_payload_refs_read_back_the_same_bytes(mixed_files, kind):
    """Split by split, ``payloads=False`` gives a PacketRef per Packet with the same fields, and the
    bytes PayloadReader reads at its offset are the Packet's payload (in a run of several files)."""
    path = mixed_files[kind]
    others = [mixed_files[k] for k in mixed_files if k != kind]
    whole, _ = read(path, file_index=2)
    for split_bytes in (4096, 10 * os.path.getsize(path)):
        refs, stats = [], {}
        for split in plan_splits(path, 2, split_bytes=split_bytes):
            refs += iter_split(Split(*json.loads(json.dumps(split))), stats, payloads=False)
        assert stats["packets"] == len(whole) == len(refs)
        assert {ref.__class__ for ref in refs} == {PacketRef}
        with PayloadReader([others[0], others[1], path]) as reader:
            rebuilt = [Packet(*ref[:9], reader.payload(ref), ref.missing) for ref in refs]
            first = next(iter_packets(others[0], 0, payloads=False))  # another file of the run
            mixed = [reader.payload(first), reader.payload(refs[1])]
        assert rebuilt == whole
        assert mixed == [read(others[0])[0][0].payload, whole[1].payload]
        assert all(ref.order // ORDER_STRIDE == 2 and ref.payload_length == len(p.payload)
                   for ref, p in zip(refs, whole))


def test_payload_reader_releases_what_it_mapped(mixed_files, monkeypatch):
    """Once its reads have touched regions that could hold MAPPED_BUDGET (a faulting read maps up to a
    whole region, a large folio of the page cache), the pages leave the process, and reads go on
    returning the same bytes. Regions of 4 KB here, so the small file spans many."""
    path = mixed_files["pcapng"]
    whole, _ = read(path)
    refs = list(iter_packets(path, payloads=False))
    monkeypatch.setattr(payloads_module, "_REGION_SHIFT", 12)
    monkeypatch.setattr(payloads_module, "MAPPED_BUDGET", 16 << 12)
    released = []
    original = payloads_module.release_pages
    monkeypatch.setattr(payloads_module, "release_pages", lambda mapping, end=None: (released.append(end),
                                                                                     original(mapping, end)))
    with PayloadReader([path]) as reader:
        for _ in range(2):  # again after releases: the pages come back from the page cache
            assert [reader.payload(ref) for ref in refs] == [p.payload for p in whole]
    expected, touched = 0, set()
    for ref in refs * 2:
        start, end = ref.payload_offset >> 12, (ref.payload_offset + ref.payload_length - 1) >> 12
        touched.update(range(start, max(start, end) + 1))
        if len(touched) >= 16:
            expected, touched = expected + 1, set()
    assert expected >= 4 and released == [None] * expected


def test_planning_splits_releases_the_pages_it_walked(mixed_files, monkeypatch):
    """plan_splits walks every record header of a file: the pages behind each cut are released as it
    goes, so the driver's memory does not grow with the capture."""
    released = []
    original = splits_module.release_pages
    monkeypatch.setattr(splits_module, "release_pages", lambda mapping, end=None: (released.append(end),
                                                                                     original(mapping, end)))
    for kind in ("pcap", "pcapng"):
        released.clear()
        splits = plan_splits(mixed_files[kind], 0, split_bytes=4096)
        assert released == [split.start for split in splits[1:]]


def test_gzip_captures_carry_their_payloads_even_as_refs(mixed_files, tmp_path):
    compressed = tmp_path / "mixed.pcap.gz"
    compressed.write_bytes(gzip.compress(Path(mixed_files["pcap"]).read_bytes()))
    packets = list(iter_packets(compressed, payloads=False))
    assert packets == read(mixed_files["pcap"])[0] and {p.__class__ for p in packets} == {Packet}


def test_payload_reader_says_when_a_file_changed(mixed_files, tmp_path):
    path = tmp_path / "shrinking.pcap"
    path.write_bytes(Path(mixed_files["pcap"]).read_bytes())
    refs = list(iter_packets(path, payloads=False))
    last = max((ref for ref in refs if ref.payload_length > 1), key=lambda ref: ref.payload_offset)
    with open(path, "r+b") as file:
        file.truncate(last.payload_offset + 1)
    with PayloadReader([str(path)]) as reader:
        assert reader.payload(refs[0]) == read(mixed_files["pcap"])[0][0].payload
        with pytest.raises(CaptureError, match="changed since it was read"):
            reader.payload(last)
        with pytest.raises(CaptureError, match="file 3 of a run of 1"):
            reader.read(3, 0, 1)


@pytest.mark.parametrize("kind", ["pcap", "pcap-be-ns", "pcapng"])
def test_unplanned_byte_ranges_read_exactly_the_whole_file(mixed_files, kind):
    path = mixed_files[kind]
    whole, _ = read(path)
    size = os.path.getsize(path)
    rng = random.Random(kind)
    for _ in range(4):
        cuts = sorted({0, size} | {rng.randrange(size) for _ in range(rng.randrange(1, 12))})
        got = [p for start, end in zip(cuts, cuts[1:]) for p in iter_packets(path, 0, start, end)]
        assert got == whole, cuts


def test_find_record_boundary_at_random_points(mixed_files):
    path = mixed_files["pcap"]
    data = Path(path).read_bytes()
    boundaries, pos = [], 24
    while pos < len(data):
        boundaries.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    context = plan_splits(path, split_bytes=1 << 20)[1].context
    rng = random.Random(200)
    wrong = 0
    for point in (rng.randrange(len(data)) for _ in range(200)):
        expected = next((b for b in boundaries if b >= point), None)
        wrong += find_record_boundary(data, point, context) != expected
    assert wrong == 0
    # Without the file's time window (a split nobody planned), only the header's facts.
    context = dict(context, ts_window=None)
    for point in (rng.randrange(len(data)) for _ in range(50)):
        assert find_record_boundary(data, point, context) == next((b for b in boundaries if b >= point), None)


def test_split_context_is_plain_data(mixed_files):
    splits = plan_splits(mixed_files["pcapng"], 1, split_bytes=1 << 20)
    later = splits[-1].context
    assert later["format"] == "pcapng" and later["byteorder"] == ">"
    assert later["interfaces"] == [[113, 262144, 6, 0], [1, 262144, 9, 0]]
    assert json.loads(json.dumps(splits)) == [list(s[:4]) + [s.context] for s in splits]
    context = plan_splits(mixed_files["pcap-be-ns"], 0, split_bytes=1 << 20)[1].context
    assert {k: context[k] for k in ("format", "byteorder", "nanos", "linktype", "snaplen", "aligned")} == {
        "format": "pcap", "byteorder": ">", "nanos": True, "linktype": 1, "snaplen": 262144, "aligned": True}


# ---------------------------------------------------------------------------------------------------
# Inputs

def test_expand_inputs_orders_rotated_series_by_first_packet(tmp_path):
    folder = tmp_path / "caps"
    (folder / "deeper").mkdir(parents=True)
    # tcpdump -C names: cap, cap1, cap2, ... cap10 (name order would put cap10 before cap2)
    for n in range(11):
        name = "cap" if n == 0 else f"cap{n}"
        (folder / name).write_bytes(pcap([(T0 + n * 10**9, ethernet(IPV4_SEGMENT))]))
    # -G names, gzip, pcapng, in a subfolder
    (folder / "deeper" / "z-2024-01-01_00.pcapng.gz").write_bytes(
        gzip.compress(shb() + idb() + epb(ethernet(IPV4_SEGMENT), T0 // 1000 - 5_000_000)))
    (folder / "deeper" / "a-2024-01-01_01.pcap").write_bytes(pcap([(T0 + 99 * 10**9, ethernet(IPV4_SEGMENT))]))
    (folder / "README").write_text("not a capture")
    (folder / "logs.gz").write_bytes(gzip.compress(b"not a capture either"))
    (folder / "nothing.pcap").write_bytes(pcap([]))

    found = expand_inputs(str(folder))
    names = [os.path.relpath(p, folder) for p in found]
    assert names == (["deeper/z-2024-01-01_00.pcapng.gz", "cap"] + [f"cap{n}" for n in range(1, 11)]
                     + ["deeper/a-2024-01-01_01.pcap", "nothing.pcap"])
    assert expand_inputs([str(folder / "cap1*"), str(folder / "cap")]) == [
        str(folder / "cap"), str(folder / "cap1"), str(folder / "cap10")]
    assert expand_inputs([str(folder / "**" / "*.pcap*"), str(folder / "cap2"), str(folder / "deeper")]) == [
        str(folder / "deeper" / "z-2024-01-01_00.pcapng.gz"), str(folder / "cap2"),
        str(folder / "deeper" / "a-2024-01-01_01.pcap"), str(folder / "nothing.pcap")]
    with pytest.raises(NotACaptureError, match="README"):
        expand_inputs([str(folder / "README")])
    with pytest.raises(FileNotFoundError, match="nowhere"):
        expand_inputs(str(tmp_path / "nowhere*.pcap"))


def test_layout_declarations_match_their_struct_formats():
    assert layouts.packed(layouts.pcap_file_header(">")).format == ">LHHlLLL"
    assert layouts.packed(layouts.pcapng_enhanced_packet("<")).size == 28
    assert layouts.packed(layouts.pcapng_packet("<")).size == 28
    assert layouts.packed(layouts.SLL_HEADER).size == 16 and layouts.packed(layouts.SLL2_HEADER).size == 20
    header = layouts.IPV4_HEADER.parse(ipv4(tcp(), options=b"\x01" * 8))
    assert layouts.ipv4_header_length(header.version_ihl) == 28 and header.source == v4("10.0.0.1")
    assert layouts.tcp_header_length(layouts.TCP_HEADER.parse(tcp(options=b"\x01" * 12)).data_offset) == 32
    assert layouts.ipv4_is_fragment(0x2000) and layouts.ipv4_is_fragment(0x0001)
    assert not layouts.ipv4_is_fragment(0x4000)  # don't-fragment
    assert layouts.ipv6_is_fragment(0x0001) and layouts.ipv6_is_fragment(0x0008) and not layouts.ipv6_is_fragment(0)
    assert layouts.tsresol_ticks_per_second(0x80 | 10) == 1024 and layouts.tsresol_ticks_per_second(9) == 10**9
    options = layouts.pcapng_options("<").parse(_options("<", [(9, b"\x09"), (14, struct.pack("<q", -3))]))
    assert [(o.code, o.value) for o in options] == [(9, b"\x09"), (14, struct.pack("<q", -3)), (0, b"")]
    built = layouts.pcap_record_header(">").build(dict(ts_sec=1, ts_frac=2, incl_len=3, orig_len=4))
    assert built == struct.pack(">IIII", 1, 2, 3, 4)

# ---------------------------------------------------------------------------------------------------
# Real captures: tcpdump on loopback while this test talks TCP to itself, checked against tshark.

TOOLS = {name: shutil.which(name) for name in ("tcpdump", "tshark", "editcap", "mergecap")}
real_tools = pytest.mark.skipif(
    not (TOOLS["tcpdump"] and TOOLS["tshark"]) or os.geteuid() != 0,
    reason="needs tcpdump and tshark installed and root (to capture on lo)")

MESSAGES = [b"\x00\x00\x00\x05hello", os.urandom(1), os.urandom(1448), os.urandom(5000), os.urandom(70_000),
            os.urandom(300_000), b"bye"]


def _echo_server(family: int, host: str):
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind((host, 0))
    server.listen()

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                while data := connection.recv(65536):
                    connection.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return server


def _talk(family: int, address) -> dict:
    """Send MESSAGES and read each echo back; the bytes each direction carried, by (src, sport, dst, dport)."""
    with socket.create_connection(address[:2], timeout=10) as client:
        for message in MESSAGES:
            client.sendall(message)
            got = b""
            while len(got) < len(message):
                got += client.recv(len(message) - len(got))
            assert got == message
        me, peer = client.getsockname(), client.getpeername()
    data = b"".join(MESSAGES)
    return {(me[0], me[1], peer[0], peer[1]): data, (peer[0], peer[1], me[0], me[1]): data}


def _wait_listening(process: subprocess.Popen, name: str) -> None:
    deadline = time.monotonic() + 15
    line = b""
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if b"listening on" in line:
            return
        if not line and process.poll() is not None:
            break
    process.kill()
    pytest.skip(f"tcpdump could not capture ({name}): {line.decode(errors='replace').strip()}")


@pytest.fixture(scope="module")
def real_captures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("real")
    servers = [_echo_server(socket.AF_INET, "127.0.0.1")]
    try:
        servers.append(_echo_server(socket.AF_INET6, "::1"))
    except OSError:
        pass  # no IPv6 loopback here
    ports = " or ".join(f"tcp port {server.getsockname()[1]}" for server in servers)
    variants = {
        "lo.pcap": ["-i", "lo"],
        "any-sll2.pcap": ["-i", "any", "-y", "LINUX_SLL2"],
        "any-sll-nano-snap.pcap": ["-i", "any", "-y", "LINUX_SLL", "--nano", "-s", "200"],
    }
    processes = {}
    try:
        for name, options in variants.items():
            processes[name] = subprocess.Popen(
                [TOOLS["tcpdump"], *options, "-B", "65536", "-U", "--immediate-mode", "-n", "-w", str(folder / name),
                 ports],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for name, process in processes.items():
            _wait_listening(process, name)
        time.sleep(0.3)
        sent = {}
        for server in servers:
            sent.update(_talk(server.family, server.getsockname()))
        time.sleep(0.5)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        dropped = {}
        for name, process in processes.items():
            report = process.communicate(timeout=15)[1].decode(errors="replace")
            found = re.search(r"(\d+) packets? dropped by kernel", report)
            dropped[name] = int(found.group(1)) if found else 0
        for server in servers:
            server.close()
    files = {name: str(folder / name) for name in variants}
    # (file, the captures it is made from, command writing it to stdout or to the path appended)
    conversions = []
    if TOOLS["editcap"]:
        conversions += [("lo.pcapng", ["lo.pcap"], [TOOLS["editcap"], "-F", "pcapng", files["lo.pcap"]]),
                        ("any-sll2.pcapng", ["any-sll2.pcap"],
                         [TOOLS["editcap"], "-F", "pcapng", files["any-sll2.pcap"]]),
                        ("lo-nsec.pcap", ["lo.pcap"], [TOOLS["editcap"], "-F", "nsecpcap", files["lo.pcap"]])]
    if TOOLS["mergecap"]:  # one pcapng with two interfaces of different link types
        conversions.append(("merged.pcapng", ["lo.pcap", "any-sll-nano-snap.pcap"],
                            [TOOLS["mergecap"], "-F", "pcapng", "-w", "-", files["lo.pcap"],
                             files["any-sll-nano-snap.pcap"]]))
    sources = {name: [name] for name in variants}
    for name, made_from, command in conversions:
        if command[0] == TOOLS["editcap"]:
            subprocess.run(command + [str(folder / name)], check=True, capture_output=True)
        else:
            (folder / name).write_bytes(subprocess.run(command, check=True, capture_output=True).stdout)
        files[name] = str(folder / name)
        sources[name] = made_from
    # A busy machine can make the kernel drop packets: then only the bytes that were captured are checked.
    complete = {name for name in files if not any(dropped[source] for source in sources[name])}
    return files, sent, complete


def _tshark_fields(path: str) -> subprocess.Popen:
    return subprocess.Popen(
        [TOOLS["tshark"], "-n", "-r", path, "-Y", "tcp", "-T", "fields", "-E", "separator=,", "-e", "frame.number",
         "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "tcp.seq_raw", "-e", "tcp.len"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def _check_payloads(packets: list[Packet], sent: dict, complete: bool) -> None:
    """Every captured byte is the byte sent at that stream offset, and (unless the snap length cut
    payloads) every byte sent was captured."""
    by_direction: dict = {}
    for packet in packets:
        by_direction.setdefault((packet.src, packet.sport, packet.dst, packet.dport), []).append(packet)
    assert set(by_direction) == set(sent)
    for direction, seen in by_direction.items():
        expected = sent[direction]
        isn = next(p.seq for p in seen if p.flags & SYN)
        covered = bytearray(len(expected))
        for packet in seen:
            offset = (packet.seq - isn - 1) % 2**32
            if packet.payload or packet.missing:
                assert packet.payload == expected[offset:offset + len(packet.payload)]
                covered[offset:offset + len(packet.payload) + packet.missing] = \
                    b"\x01" * (len(packet.payload) + packet.missing)
        if complete:
            assert covered == b"\x01" * len(expected)


@real_tools
def test_real_captures_agree_with_what_was_sent_and_with_tshark(real_captures):
    files, sent, complete = real_captures
    tshark = {name: _tshark_fields(path) for name, path in files.items()}
    for name, path in files.items():
        packets, stats = read(path)
        assert packets, name
        assert stats.get("truncated_tail", 0) == 0 and stats.get("malformed", 0) == 0
        _check_payloads(packets, sent, name in complete)
        if "snap" in name:
            assert any(p.missing for p in packets)
        if "nano" in name:  # tcpdump --nano: nanosecond magic, and times finer than microseconds
            assert Path(path).read_bytes()[:4] == struct.pack("<I", 0xA1B23C4D)
            assert any(p.ts_ns % 1000 for p in packets)
        lines = tshark[name].communicate(timeout=60)[0].decode().split()
        theirs = [tuple(int(field) for field in line.split(",")[1:]) for line in lines]
        ours = [(p.sport, p.dport, p.seq, len(p.payload) + p.missing) for p in packets]
        assert ours == theirs, name


@real_tools
def test_real_captures_read_the_same_by_splits(real_captures):
    files, _, _ = real_captures
    # The same packets at the same times whatever the file format editcap/mergecap wrote.
    reference = [p[1:] for p in read(files["lo.pcap"])[0]]
    for name in ("lo.pcapng", "lo-nsec.pcap"):
        if name in files:
            assert [p[1:] for p in read(files[name])[0]] == reference
    compressed = Path(files["lo.pcap"]).with_suffix(".pcap.gz")
    compressed.write_bytes(gzip.compress(Path(files["lo.pcap"]).read_bytes()))
    assert read(str(compressed)) == read(files["lo.pcap"])
    compressed.unlink()
    for name, path in files.items():
        whole, whole_stats = read(path, file_index=1)
        for split_bytes in (3000, 64 * 1024):
            stats: dict = {}
            got = [p for split in plan_splits(path, 1, split_bytes=split_bytes) for p in iter_split(split, stats)]
            assert got == whole and stats == whole_stats, (name, split_bytes)
        size = os.path.getsize(path)
        cuts = [0, size // 3, size // 2, size]
        assert [p for a, b in zip(cuts, cuts[1:]) for p in iter_packets(path, 1, a, b)] == whole
    found = expand_inputs(os.path.dirname(files["lo.pcap"]))
    assert sorted(found) == sorted(files.values())
    firsts = [first_timestamp_ns(path) for path in found]
    assert firsts == sorted(firsts) and firsts[0] == read(found[0])[0][0].ts_ns
    if "merged.pcapng" in files:
        context = plan_splits(files["merged.pcapng"], split_bytes=4096)[-1].context
        assert sorted(interface[0] for interface in context["interfaces"]) == [1, 113]

"""The C packet reader (kafkawire/capture/files/_packets.c) against the Python one it stands in for.

The Python reader (``packet_headers.decode_packet``, ``pcapng_blocks``, ``pcap_records``) is the
reference: on any frame the C ``decode_packet`` gives the same Packet or None (the Python code's case),
and whole captures read with the C runs give the same packets, counts and skipped bytes as without.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.capture.files import packet_headers
from kafkawire.capture.model import Packet, PacketRef
from kafkawire.capture.files.packets import iter_packets

from test_capture_packets import (  # the hand-written frames and files of the reader's own tests
    ah_ext, epb, ethernet, ext8, fragment_ext, idb, ipv4, ipv6, obsolete_pb, other_block, pcap, shb, sll, spb, tcp,
    write,
)

NATIVE = packet_headers.NATIVE
pytestmark = pytest.mark.skipif(NATIVE is None, reason="the C accelerator is not built (or KAFKAWIRE_PURE_PYTHON=1)")

ADDRESSES_V4 = ["10.0.0.1", "10.0.0.2", "192.168.1.200", "127.0.0.1"]
ADDRESSES_V6 = ["fd00::1", "fd00::2", "::1", "2001:db8::ff:1"]


@st.composite
def frames(draw):
    """(frame, linktype, whether C must read it): Ethernet frames of TCP (and some of what is not)."""
    payload = draw(st.binary(max_size=80))
    segment = tcp(draw(st.integers(0, 65535)), draw(st.integers(0, 65535)), draw(st.integers(0, 2**32 - 1)),
                  draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 255)), payload,
                  b"\x01" * 4 * draw(st.integers(0, 10)))
    common = True
    if draw(st.booleans()):
        fragment = draw(st.sampled_from([0, 0, 0, 0x4000, 0x2000, 5]))
        protocol = draw(st.sampled_from([6, 6, 6, 17]))
        total = draw(st.one_of(st.none(), st.just(0), st.integers(0, 400)))
        l3 = ipv4(segment, draw(st.sampled_from(ADDRESSES_V4)), draw(st.sampled_from(ADDRESSES_V4)), protocol,
                  b"\x01" * 4 * draw(st.integers(0, 10)), fragment, total)
        ethertype = 0x0800
    else:
        extensions = draw(st.sampled_from([(), (), (), ((0, ext8()),), ((44, fragment_ext()),),
                                           ((51, ah_ext()),), ((44, fragment_ext(3, True)),)]))
        common = not extensions
        l3 = ipv6(segment, draw(st.sampled_from(ADDRESSES_V6)), draw(st.sampled_from(ADDRESSES_V6)), extensions,
                  draw(st.sampled_from([6, 6, 17])), draw(st.one_of(st.none(), st.just(0), st.integers(0, 400))))
        ethertype = 0x86DD
    tags = draw(st.lists(st.tuples(st.sampled_from([0x8100, 0x88A8, 0x9100]), st.integers(0, 4095)), max_size=2))
    ethertype = draw(st.sampled_from([ethertype] * 6 + [0x0806]))
    linktype = 1
    if draw(st.integers(0, 9)) == 0:
        frame, linktype, common = sll(l3, ethertype), 113, False
    else:
        frame = ethernet(l3, ethertype, tags)
    if draw(st.integers(0, 3)) == 0:  # a byte anywhere changed: the verdicts must still agree
        at = draw(st.integers(0, len(frame) - 1))
        frame = frame[:at] + bytes([draw(st.integers(0, 255))]) + frame[at + 1:]
        common = None
    return frame, linktype, common


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.integers(0, 9), st.integers(0, 200), st.integers(0, 30), st.booleans(), st.booleans())
def test_decode_packet_agrees_with_python(frame_facts, pad, cut, extra, refs, as_view):
    frame, linktype, common = frame_facts
    captured = max(0, len(frame) - cut) if cut < 100 else len(frame)  # cut by a snap length, often not
    wire = captured + extra if cut < 100 else len(frame) + extra
    data = b"\xee" * pad + frame + b"\xdd" * 3
    buf = memoryview(data) if as_view else data
    order, ts = 7 << 40 | pad, 1_700_000_000_123_456_789
    expected = packet_headers.decode_packet(buf, pad, captured, wire, linktype, order, ts, refs)
    got = NATIVE.decode_packet(buf, pad, captured, wire, linktype, order, ts, refs)
    if got is None:
        # C leaves a frame to Python only where Python says why not, or for what it does not read
        assert isinstance(expected, str) or not common or captured < len(frame)
        return
    assert type(got) is type(expected) is (PacketRef if refs else Packet)
    assert tuple(got) == tuple(expected)
    assert type(got[9]) is type(expected[9])  # bytes of bytes, views of a view
    if common and captured == len(frame) and wire == len(frame):
        assert got == expected


def test_decode_packet_reads_the_common_frames():
    frame = ethernet(ipv4(tcp(40001, 9092, 5, 6, 0x18, b"kafka")), tags=[(0x8100, 12)])
    got = NATIVE.decode_packet(frame, 0, len(frame), len(frame), 1, 0, 10, False)
    assert got == Packet(0, 10, "10.0.0.1", 40001, "10.0.0.2", 9092, 5, 6, 0x18, b"kafka", 0)
    frame = ethernet(ipv6(tcp(9092, 40001, 2**32 - 1, 0, 0x11, b"x" * 10), "::1", "2001:db8::1"), 0x86DD)
    got = NATIVE.decode_packet(frame, 0, len(frame) - 4, len(frame), 1, 1, 2, True)
    assert got == PacketRef(1, 2, "::1", 9092, "2001:db8::1", 40001, 2**32 - 1, 0, 0x11, len(frame) - 10, 6, 4)
    assert NATIVE.decode_packet(ethernet(ipv4(tcp(), protocol=17)), 0, 54, 54, 1, 0, 0, False) is None


def _read_both(monkeypatch, path, **kwargs):
    """(packets, stats, skipped) read with the C runs, then without them."""
    results = []
    for native in (NATIVE, None):
        monkeypatch.setattr(packet_headers, "NATIVE", native)
        stats, skipped = {}, []
        packets = [tuple(p) if not isinstance(p[9], memoryview) else (*p[:9], bytes(p[9]), p[10])
                   for p in iter_packets(path, stats=stats, skipped=skipped, **kwargs)]
        results.append((packets, stats, skipped))
    return results


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.data(), st.sampled_from(["<", ">"]), st.sampled_from(["plain", "refs", "views"]))
def test_pcapng_files_read_the_same(tmp_path, monkeypatch, data, order, mode):
    draw = data.draw
    blocks = [shb(order), idb(order), idb(order, linktype=113, tsresol=9, tsoffset=draw(st.integers(0, 10**6)))]
    ticks = 1_700_000_000_000_000
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["epb"] * 8 + ["sll", "spb", "pb", "other", "unknown", "short", "idb"]))
        ticks += draw(st.integers(0, 10**6))
        frame = draw(frames())[0]
        if kind == "epb":
            blocks.append(epb(frame, ticks, order, wire=len(frame) + draw(st.sampled_from([0, 0, 10]))))
        elif kind == "sll":
            blocks.append(epb(sll(ipv4(tcp(payload=b"abc"))), ticks, order, interface=1))
        elif kind == "spb":
            blocks.append(spb(frame, order))
        elif kind == "pb":
            blocks.append(obsolete_pb(frame, ticks, order))
        elif kind == "other":
            blocks.append(other_block(order))
        elif kind == "unknown":
            blocks.append(epb(frame, ticks, order, interface=7))
        elif kind == "short":  # a captured length past the block: malformed
            block = bytearray(epb(frame, ticks, order))
            struct.pack_into(order + "I", block, 20, len(frame) + 64)
            blocks.append(bytes(block))
        else:
            blocks.append(idb(order, tsresol=draw(st.sampled_from([6, 9, 0x83]))))
    if draw(st.booleans()):
        blocks.append(shb(">" if order == "<" else "<") + idb(">" if order == "<" else "<"))
        blocks.append(epb(draw(frames())[0], ticks, ">" if order == "<" else "<"))
    tail = draw(st.sampled_from(["", "torn", "corrupt"]))
    content = b"".join(blocks)
    if tail == "torn":
        content += epb(draw(frames())[0], ticks, order)[:-7]
    elif tail == "corrupt":
        content += struct.pack(order + "II", 6, 13) + b"\x00" * 40
    path = write(tmp_path, "run.pcapng", content)
    kwargs = {"refs": {"payloads": False}, "views": {"views": True}}.get(mode, {})
    with_c, without = _read_both(monkeypatch, path, **kwargs)
    assert with_c == without


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.data(), st.sampled_from(["<", ">"]), st.booleans(), st.sampled_from(["plain", "refs", "views"]))
def test_pcap_files_read_the_same(tmp_path, monkeypatch, data, order, nanos, mode):
    draw = data.draw
    ts = 1_700_000_000_000_000_000
    records = []
    for _ in range(draw(st.integers(1, 40))):
        ts += draw(st.integers(0, 10**9))
        frame = draw(frames())[0]
        records.append((ts, frame, len(frame) + draw(st.sampled_from([0, 0, 5]))))
    content = pcap(records, order, nanos, snaplen=draw(st.sampled_from([262144, 60])))
    if draw(st.booleans()):  # a record header that cannot be right, then more records (the resync)
        content += struct.pack(order + "IIII", 0, 0, 0, 0) + pcap(records, order, nanos)[24:]
    if draw(st.booleans()):
        content = content[:-5]
    path = write(tmp_path, "run.pcap", content)
    kwargs = {"refs": {"payloads": False}, "views": {"views": True}}.get(mode, {})
    with_c, without = _read_both(monkeypatch, path, **kwargs)
    assert with_c == without

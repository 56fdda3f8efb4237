"""The broker's wire tap (issue 6): kafkawire.pcap.writer's pcapng and TCP synthesis checked by an
independent reader (block layout, RFC 1071 checksums computed word by word, sequence arithmetic),
then captures of real broker traffic read back by tshark: TCP analysis finds nothing to flag, the
streams tshark reassembles are byte for byte what the clients sent and received, and the Kafka
frames tshark decodes (API keys, versions, correlation ids, client ids) are those the broker handled.
"""
from __future__ import annotations

import functools
import ipaddress
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from support.broker_harness import BrokerThread
from kafkawire import messages as m
from kafkawire.broker.network.tap import WireTap
from kafkawire.broker.network.connection import Connection
from kafkawire.broker.storage.file_records import FileRecords
from kafkawire.framing import Correlator, FrameBuffer, decode_request, decode_response, peek_request
from kafkawire.pcap.writer import (DEFAULT_MSS, TcpConversationWriter, enhanced_packet_block, file_header,
                                   interface_description_block, section_header_block)
from kafkawire.records import RecordBatchBuilder

TSHARK = shutil.which("tshark") or ("/usr/bin/tshark" if Path("/usr/bin/tshark").exists() else None)
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (apt-get install tshark)")
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
T0 = 1_700_000_000_123_456_789


# ---- an independent reader: pcapng blocks, Ethernet/IP/TCP headers, RFC 1071 checksums ------------------------

def blocks(data: bytes) -> list[tuple[int, bytes]]:
    """(block type, body) of each little-endian pcapng block, checking both length fields."""
    out, pos = [], 0
    while pos < len(data):
        block_type, length = struct.unpack_from("<II", data, pos)
        assert length % 4 == 0 and length >= 12, (pos, length)
        assert struct.unpack_from("<I", data, pos + length - 4)[0] == length
        out.append((block_type, data[pos + 8:pos + length - 4]))
        pos += length
    assert pos == len(data)
    return out


def options(body: bytes) -> dict[int, bytes]:
    found, pos = {}, 0
    while pos < len(body):
        code, length = struct.unpack_from("<HH", body, pos)
        if code == 0:
            break
        found[code] = body[pos + 4:pos + 4 + length]
        pos += 4 + length + (-length % 4)
    return found


def packets(data: bytes) -> list[tuple[int, bytes]]:
    """(ts_ns, frame) of every Enhanced Packet Block."""
    out = []
    for block_type, body in blocks(data):
        if block_type == 6:
            _iface, high, low, captured, original = struct.unpack_from("<IIIII", body)
            assert captured == original
            out.append(((high << 32) | low, body[20:20 + captured]))
    return out


def internet_checksum(data: bytes) -> int:
    """RFC 1071, the textbook way: add 16-bit words, fold carries, complement."""
    if len(data) % 2:
        data += b"\0"
    total = 0
    for i in range(0, len(data), 2):
        total += (data[i] << 8) | data[i + 1]
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def dissect(frame: bytes) -> dict:
    """Ethernet, IPv4/IPv6 and TCP fields, with both checksums verified from scratch."""
    ethertype = struct.unpack_from(">H", frame, 12)[0]
    ip = frame[14:]
    if ethertype == 0x0800:
        assert ip[0] == 0x45 and ip[9] == 6
        total_length = struct.unpack_from(">H", ip, 2)[0]
        assert total_length == len(ip)
        assert internet_checksum(ip[:20]) == 0, "bad IPv4 header checksum"
        src, dst, tcp = ip[12:16], ip[16:20], ip[20:]
    else:
        assert ethertype == 0x86DD and ip[0] >> 4 == 6 and ip[6] == 6
        assert struct.unpack_from(">H", ip, 4)[0] == len(ip) - 40
        src, dst, tcp = ip[8:24], ip[24:40], ip[40:]
    pseudo = src + dst + struct.pack(">xBH", 6, len(tcp)) if ethertype == 0x0800 else \
        src + dst + struct.pack(">I3xB", len(tcp), 6)
    assert internet_checksum(pseudo + tcp) == 0, "bad TCP checksum"
    sport, dport, seq, ack, offset, flags, window, checksum = struct.unpack_from(">HHIIBBHH", tcp)
    header_length = (offset >> 4) * 4
    return {"ipv6": ethertype == 0x86DD, "src": ipaddress.ip_address(src), "dst": ipaddress.ip_address(dst),
            "sport": sport, "dport": dport, "seq": seq, "ack": ack, "flags": flags, "window": window,
            "checksum": checksum, "options": tcp[20:header_length], "payload": tcp[header_length:]}


def segments(data: bytes) -> list[dict]:
    return [dissect(frame) for _ts, frame in packets(data)]


def conversation(client=("10.0.0.1", 40000), server=("10.0.0.2", 9092), **settings) -> TcpConversationWriter:
    return TcpConversationWriter(client, server, **settings)


# ---- the pcapng blocks ----------------------------------------------------------------------------------------

def test_section_and_interface_blocks():
    (shb_type, shb), (idb_type, idb) = blocks(file_header())
    assert shb_type == 0x0A0D0D0A
    magic, major, minor, section_length = struct.unpack_from("<IHHq", shb)
    assert (magic, major, minor, section_length) == (0x1A2B3C4D, 1, 0, -1)
    assert options(shb[16:])[4] == b"kafkawire"  # shb_userappl
    assert idb_type == 1
    linktype, _reserved, snaplen = struct.unpack_from("<HHI", idb)
    assert (linktype, snaplen) == (1, 262144)
    idb_options = options(idb[8:])
    assert idb_options[9] == b"\x09" and idb_options[2] == b"kafkawire"
    assert options(blocks(interface_description_block("tap0"))[0][1][8:])[2] == b"tap0"
    assert options(blocks(section_header_block("other"))[0][1][16:])[4] == b"other"


def test_enhanced_packet_block_pads_and_keeps_nanoseconds():
    for size in range(0, 9):
        frame = bytes(range(size))
        ((ts, got),) = packets(enhanced_packet_block(frame, T0 + size))
        assert (ts, got) == (T0 + size, frame)


# ---- TCP synthesis ----------------------------------------------------------------------------------------------

def test_handshake_data_and_orderly_close():
    conv = conversation(mss=1000)
    data = conv.open(T0) + conv.client_data(b"request", T0 + 1) + conv.server_data(b"response!", T0 + 2)
    data += conv.close(T0 + 3)
    got = segments(data)
    assert [s["flags"] for s in got] == [SYN, SYN | ACK, ACK, PSH | ACK, ACK, PSH | ACK, ACK,
                                         FIN | ACK, FIN | ACK, ACK]
    syn, syn_ack, third = got[:3]
    assert syn_ack["ack"] == (syn["seq"] + 1) % 2**32 and third["ack"] == (syn_ack["seq"] + 1) % 2**32
    assert syn["options"][:4] == struct.pack(">BBH", 2, 4, 1000)  # the MSS option
    assert [(s["sport"], s["dport"]) for s in got[:2]] == [(40000, 9092), (9092, 40000)]
    request, request_ack, response, response_ack = got[3:7]
    assert request["payload"] == b"request" and response["payload"] == b"response!"
    assert request_ack["ack"] == (request["seq"] + 7) % 2**32
    assert response_ack["ack"] == (response["seq"] + 9) % 2**32
    client_fin, server_fin, last = got[7:]
    assert server_fin["ack"] == (client_fin["seq"] + 1) % 2**32 and last["ack"] == (server_fin["seq"] + 1) % 2**32
    assert [ts for ts, _ in packets(data)] == [T0] * 3 + [T0 + 1] * 2 + [T0 + 2] * 2 + [T0 + 3] * 3


def test_writes_split_at_the_mss_with_psh_on_the_last_segment():
    conv = conversation(mss=100)
    conv.open(T0)
    payload = bytes(random.Random(1).randbytes(1050))
    got = segments(conv.client_data(payload, T0))
    data_segments, (peer_ack,) = got[:-1], got[-1:]
    assert [len(s["payload"]) for s in data_segments] == [100] * 10 + [50]
    assert [s["flags"] for s in data_segments] == [ACK] * 10 + [PSH | ACK]
    assert b"".join(s["payload"] for s in data_segments) == payload
    assert [s["seq"] - data_segments[0]["seq"] for s in data_segments] == list(range(0, 1050, 100))
    assert peer_ack["payload"] == b"" and peer_ack["ack"] == (data_segments[0]["seq"] + 1050) % 2**32


def test_the_default_mss_fills_the_16_bit_ip_length():
    conv = conversation()
    conv.open(T0)
    got = segments(conv.server_data(bytes(2 * DEFAULT_MSS + 1), T0))
    assert [len(s["payload"]) for s in got] == [DEFAULT_MSS, DEFAULT_MSS, 1, 0]
    conv = conversation(mss=65535 - 40)
    conv.open(T0)
    assert len(segments(conv.client_data(bytes(65535), T0))[0]["payload"]) == 65495  # IPv4 length 65535
    with pytest.raises(ValueError, match="mss"):
        conversation(mss=65535 - 39)
    with pytest.raises(ValueError, match="mss"):
        conversation(mss=0)
    conversation(client=("::1", 1), server=("::1", 2), mss=65535 - 20)  # IPv6's length leaves out its header


def test_sequence_numbers_wrap_past_2_to_the_32():
    conv = conversation(mss=4, client_isn=2**32 - 3, server_isn=2**32 - 1)
    data = conv.open(T0) + conv.client_data(b"0123456789", T0) + conv.server_data(b"abcdef", T0)
    got = segments(data + conv.close(T0))
    client_data = [s for s in got if s["sport"] == 40000 and s["payload"]]
    assert [s["seq"] for s in client_data] == [2**32 - 2, 2, 6]  # ISN + 1 (the SYN), wrapped
    server_data = [s for s in got if s["sport"] == 9092 and s["payload"]]
    assert [s["seq"] for s in server_data] == [0, 4]  # 2**32 - 1 + 1 wraps to 0
    assert client_data[0]["ack"] == 0
    fin = got[-3]
    assert (fin["seq"], fin["ack"]) == (8, 6)


def test_ipv6_conversation():
    conv = conversation(client=("2001:db8::1", 50000), server=("2001:db8::2", 9092), mss=50)
    got = segments(conv.open(T0) + conv.client_data(bytes(range(101)), T0) + conv.abort(T0, by_client=False))
    assert all(s["ipv6"] for s in got)
    assert got[0]["src"] == ipaddress.ip_address("2001:db8::1")
    assert [len(s["payload"]) for s in got if s["sport"] == 50000 and s["payload"]] == [50, 50, 1]
    assert got[-1]["flags"] == RST | ACK and got[-1]["sport"] == 9092


def test_checksum_of_zero_is_written_as_zero():
    """A segment whose words sum to 0xFFFF must carry checksum 0x0000 (the case a modulo shortcut gets wrong)."""
    first = conversation(client_isn=7, server_isn=9)
    first.open(T0)
    zero_payload_checksum = segments(first.client_data(b"\0\0", T0))[0]["checksum"]
    second = conversation(client_isn=7, server_isn=9)
    second.open(T0)
    segment = segments(second.client_data(struct.pack(">H", zero_payload_checksum), T0))[0]
    assert segment["checksum"] == 0  # and dissect() verified it from scratch


def test_checksums_hold_for_random_payloads():
    rng = random.Random(6)
    for family in (("192.168.7.1", "192.168.7.200"), ("fe80::1", "fd00::abcd")):
        conv = conversation(client=(family[0], 51000), server=(family[1], 9092), mss=300)
        data = conv.open(T0)
        for i in range(60):
            payload = rng.randbytes(rng.randrange(0, 1000))
            data += conv.client_data(payload, T0 + i) if i % 2 else conv.server_data(payload, T0 + i)
        assert len(segments(data + conv.close(T0 + 99))) > 100


def test_empty_writes_add_no_packets():
    conv = conversation()
    conv.open(T0)
    assert conv.client_data(b"", T0) == b"" and conv.server_data(memoryview(b""), T0) == b""
    after = segments(conv.client_data(b"x", T0))
    assert after[0]["seq"] == (conv.client.isn + 1) % 2**32


def test_misuse_is_refused():
    with pytest.raises(ValueError, match="same IP version"):
        conversation(client=("::1", 1), server=("127.0.0.1", 2))
    with pytest.raises(ValueError, match="port"):
        conversation(client=("127.0.0.1", 70000))
    conv = conversation()
    with pytest.raises(ValueError, match="new"):
        conv.client_data(b"early", T0)
    conv.open(T0)
    with pytest.raises(ValueError, match="open"):
        conv.open(T0)
    conv.close(T0)
    with pytest.raises(ValueError, match="closed"):
        conv.server_data(b"late", T0)


def test_initial_sequence_numbers_are_deterministic_and_differ_by_seed():
    isns = [(conversation(seed=s).client.isn, conversation(seed=s).server.isn) for s in (0, 0, 1)]
    assert isns[0] == isns[1] and isns[0] != isns[2] and isns[0][0] != isns[0][1]


# ---- tshark ------------------------------------------------------------------------------------------------------

def tshark(*args: str) -> str:
    result = subprocess.run([TSHARK, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def tshark_streams(path: Path) -> dict[int, tuple[bytes, bytes]]:
    """Each TCP stream as tshark reassembles it: (bytes from the connecting side, bytes from the other)."""
    count = len({line for line in tshark("-r", str(path), "-T", "fields", "-e", "tcp.stream").split() if line})
    args = ["-r", str(path), "-q"]
    for stream in range(count):
        args += ["-z", f"follow,tcp,raw,{stream}"]
    streams, current = {}, None
    for line in tshark(*args).splitlines():
        if line.startswith("Filter: tcp.stream eq "):
            current = int(line.split()[-1])
            streams[current] = (bytearray(), bytearray())
        elif current is not None and line and not line.startswith(("=", "Node ", "Follow:")):
            streams[current][line.startswith("\t")].extend(bytes.fromhex(line.strip()))
    assert len(streams) == count
    return {stream: (bytes(a), bytes(b)) for stream, (a, b) in streams.items()}


@functools.cache
def tcp_heuristics_off() -> tuple[str, ...]:
    """Options turning off tshark's heuristic TCP dissectors, which otherwise claim Kafka or random
    bytes on unregistered ports as other protocols and call them malformed."""
    names = [line.split("\t")[1] for line in tshark("-G", "heuristic-decodes").splitlines()
             if line.startswith("tcp\t") and line.endswith("\tT")]
    return ("--disable-protocol", ",".join(names)) if names else ()


def tcp_problems(path: Path, *dissection: str) -> str:
    """Packets that tshark's TCP analysis flags, that fail checksum validation, or that are malformed
    anywhere but in the Kafka dissector (whose own limits are checked separately)."""
    return tshark("-r", str(path), *tcp_heuristics_off(), *dissection,
                  "-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
                  "-Y", "tcp.analysis.flags || tcp.checksum.status == 0 || ip.checksum.status == 0"
                        " || (_ws.malformed && !kafka)")


@needs_tshark
def test_tshark_reads_many_interleaved_conversations(tmp_path):
    rng = random.Random(42)
    conversations, sent = [], []
    out = [file_header()]
    for i in range(30):
        v6 = i % 3 == 0
        client = ("fd00::10" if v6 else "10.1.0.10", 30000 + i)
        server = ("fd00::1" if v6 else "10.1.0.1", 9092)
        conv = TcpConversationWriter(client, server, mss=rng.choice([536, 1460, DEFAULT_MSS]),
                                     seed=i, client_isn=2**32 - 50 if i % 5 == 0 else None)
        conversations.append(conv)
        sent.append((bytearray(), bytearray()))
        out.append(conv.open(T0 + i))
    ts = T0 + 1000
    for _ in range(400):
        i = rng.randrange(30)
        payload = rng.randbytes(rng.choice([0, 1, 7, 100, 1459, 1461, 5000, 70000]))
        from_client = rng.random() < 0.5
        out.append(conversations[i].client_data(payload, ts) if from_client
                   else conversations[i].server_data(payload, ts))
        sent[i][0 if from_client else 1].extend(payload)
        ts += rng.randrange(1, 10_000)
    for i, conv in enumerate(conversations):
        out.append(conv.abort(ts, by_client=True) if i % 7 == 0 else conv.close(ts, by_client=i % 2 == 0))
    path = tmp_path / "interleaved.pcapng"
    path.write_bytes(b"".join(out))

    assert tcp_problems(path, "--disable-protocol", "kafka") == ""  # the payloads are random bytes
    streams = tshark_streams(path)
    assert [streams[i] for i in range(30)] == [(bytes(a), bytes(b)) for a, b in sent]
    resets = tshark("-r", str(path), "-Y", "tcp.flags.reset == 1", "-T", "fields", "-e", "tcp.stream").split()
    assert sorted(map(int, resets)) == [i for i in range(30) if i % 7 == 0]


# ---- the broker's tap ---------------------------------------------------------------------------------------------

class RecordingClient:
    """A blocking Kafka client connection that keeps every byte it sent and received."""

    def __init__(self, host: str, port: int, client_id: str = "tap-test"):
        self.sock = socket.create_connection((host, port), timeout=30)
        self.correlator = Correlator(client_id=client_id)
        self.frames = FrameBuffer()
        self.sent, self.received = bytearray(), bytearray()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)
        self.sent += data

    def request(self, body, version: int):
        self.send_bytes(self.correlator.request(body, version))
        while (frame := self.frames.next_frame()) is None:
            data = self.sock.recv(1 << 16)
            assert data, "the broker closed the connection"
            self.received += data
            self.frames.feed(data)
        return self.correlator.response(frame)[2]

    def read_until_closed(self) -> None:
        while data := self.sock.recv(1 << 16):
            self.received += data

    def close(self, reset: bool = False) -> None:
        if reset:  # linger 0: close() sends a RST
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def record_handled(monkeypatch) -> list:
    """Every request frame the broker's connections handle, with its response frame (None when none)."""
    handled = []
    respond = Connection.respond

    async def recording(self, frame):
        request = bytes(frame)  # as read: the broker writes a produced batch's offsets into its request buffer
        response = await respond(self, frame)
        if isinstance(response, list):  # the response frame's pieces; fetched records are file slices
            handled.append((request, b"".join(p.read() if isinstance(p, FileRecords) else p for p in response)))
        else:
            handled.append((request, None))
        return response
    monkeypatch.setattr(Connection, "respond", recording)
    return handled


def split_frames(stream: bytes) -> tuple[list[bytes], int]:
    """The complete frames of one direction and the count of bytes left over."""
    buffer = FrameBuffer()
    buffer.feed(stream)
    return list(buffer.frames()), len(buffer)


def kafka_fields(path: Path, port: int) -> tuple[dict, dict, dict]:
    """Per TCP stream, from tshark's Kafka dissector, in order: the requests as (api_key, api_version,
    correlation_id), their client ids, and the responses' correlation ids. Each response tshark paired
    with a request (kafka.request_frame) must carry that request's correlation id."""
    output = tshark("-r", str(path), "-d", f"tcp.port=={port},kafka", "-T", "fields", "-E", "aggregator=|",
                    "-e", "frame.number", "-e", "tcp.stream", "-e", "tcp.dstport", "-e", "kafka.api_key",
                    "-e", "kafka.api_version", "-e", "kafka.correlation_id", "-e", "kafka.client_id",
                    "-e", "kafka.request_frame")
    requests, client_ids, responses = defaultdict(list), defaultdict(list), defaultdict(list)
    correlations_in_frame, pairs = {}, []
    for line in output.splitlines():
        number, stream, dport, keys, versions, correlations, clients, request_frames = line.split("\t")
        if not correlations:
            continue
        correlation_ids = list(map(int, correlations.split("|")))
        if int(dport) == port:
            requests[int(stream)] += zip(map(int, keys.split("|")), map(int, versions.split("|")),
                                         correlation_ids, strict=True)
            client_ids[int(stream)] += [c for c in clients.split("|") if c]
            correlations_in_frame[int(number)] = correlation_ids
        else:
            responses[int(stream)] += correlation_ids
            if request_frames and len(request_frames.split("|")) == len(correlation_ids):
                pairs += zip(map(int, request_frames.split("|")), correlation_ids)
    assert pairs, "tshark paired no response with its request"
    assert all(correlation in correlations_in_frame[frame] for frame, correlation in pairs)
    return requests, client_ids, responses


def check_capture(path: Path, port: int, handled: list, t_start: int, t_end: int) -> Counter:
    """The capture against what the broker handled; returns the requests per API key."""
    assert tcp_problems(path, "-d", f"tcp.port=={port},kafka") == ""
    stamps = [ts for ts, _ in packets(path.read_bytes())]
    assert stamps and t_start <= min(stamps) and max(stamps) <= t_end
    answered = {frame for frame, response in handled if response is not None}
    ours_requests, ours_client_ids, ours_responses = {}, {}, {}
    request_frames, response_frames = [], []
    for stream, (from_client, from_broker) in tshark_streams(path).items():
        requests, _partial = split_frames(from_client)
        responses, leftover = split_frames(from_broker)
        assert leftover == 0, f"stream {stream}: a response cut short"
        ours_requests[stream] = [peek_request(frame) for frame in requests]
        headers = [decode_request(frame)[0] for frame in requests if frame in answered]  # each decodes exactly
        ours_client_ids[stream] = [h.client_id for h in headers if h.client_id]
        assert len(responses) == len(headers), stream
        for header, response in zip(headers, responses):  # in request order, each decodes exactly
            decoded, _body = decode_response(response, header.request_api_key, header.request_api_version)
            assert decoded.correlation_id == header.correlation_id
        ours_responses[stream] = [h.correlation_id for h in headers]
        request_frames += requests
        response_frames += [struct.pack(">i", len(r)) + r for r in responses]

    # byte for byte what the broker read and wrote
    assert Counter(request_frames) == Counter(frame for frame, _ in handled)
    assert Counter(response_frames) == Counter(r for _, r in handled if r is not None)

    # tshark's Kafka dissector frames the same PDUs
    tshark_requests, tshark_client_ids, tshark_responses = kafka_fields(path, port)
    assert {s: v for s, v in tshark_requests.items() if v} == {s: v for s, v in ours_requests.items() if v}
    assert {s: v for s, v in tshark_client_ids.items() if v} == {s: v for s, v in ours_client_ids.items() if v}
    assert {s: v for s, v in tshark_responses.items() if v} == {s: v for s, v in ours_responses.items() if v}
    return Counter(peek_request(frame)[0] for frame, _ in handled)


def produce_request(topic: str, records: bytes):
    return m.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=records)])])


def fetch_request(topic: str, offset: int = 0):
    return m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=0x7FFFFFFF, isolation_level=0,
                          session_id=0, session_epoch=-1, topics=[m.FetchRequest.FetchTopic(topic=topic, partitions=[
                              m.FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                                            partition_max_bytes=8 << 20, log_start_offset=-1)])])


@needs_tshark
@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_raw_clients_bytes_are_captured_exactly(tmp_path, host, monkeypatch):
    if ":" in host and not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")
    path = tmp_path / "raw.pcapng"
    t_start = time.time_ns()
    with BrokerThread(data_dir=tmp_path / "data", host=host, tap_path=path) as broker:
        handled = record_handled(monkeypatch)
        builder = RecordBatchBuilder()
        for i in range(3):
            builder.append(random.Random(i).randbytes(100_000), timestamp=int(time.time() * 1000))
        batch = builder.build()  # 300 kB: the broker reads it in several chunks, and writes it back in several segments

        client = RecordingClient(host, broker.port)
        client.request(m.ApiVersionsRequest(), 2)
        client.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="tapped")],
                                         allow_auto_topic_creation=True), 8)
        assert client.request(produce_request("tapped", batch), 8).responses[0].partition_responses[0].error_code == 0
        fetched = client.request(fetch_request("tapped"), 11)
        assert len(fetched.responses[0].partitions[0].records) == len(batch)
        # one request sent in two pieces a moment apart: the broker reads it in two
        frame = client.correlator.request(m.MetadataRequest(topics=[]), 4)
        client.send_bytes(frame[:7])
        time.sleep(0.05)
        client.send_bytes(frame[7:])
        while client.frames.next_frame() is None:
            data = client.sock.recv(1 << 16)
            client.received += data
            client.frames.feed(data)
        client.close()

        resetting = RecordingClient(host, broker.port, client_id="resetter")
        resetting.request(m.ApiVersionsRequest(), 1)
        resetting.close(reset=True)

        refused = RecordingClient(host, broker.port, client_id="refused")
        refused.send_bytes(struct.pack(">ihhi", 8, 999, 0, 1))  # an unknown API key: the broker hangs up
        refused.read_until_closed()
        refused.close()
        deadline = time.monotonic() + 10
        while broker.broker._connections and time.monotonic() < deadline:  # the broker saw each close
            time.sleep(0.01)
    t_end = time.time_ns()

    per_api = check_capture(path, broker.port, handled, t_start, t_end)
    assert per_api == {18: 2, 3: 2, 0: 1, 1: 1, 999: 1}
    streams = tshark_streams(path)
    assert streams[0] == (bytes(client.sent), bytes(client.received))
    assert streams[1] == (bytes(resetting.sent), bytes(resetting.received))
    assert streams[2] == (bytes(refused.sent), b"")
    # every frame but the unknown API's is of a version tshark 4.0 decodes: nothing else malformed
    malformed = tshark("-r", str(path), "-d", f"tcp.port=={broker.port},kafka", "-Y", "_ws.malformed",
                       "-T", "fields", "-e", "tcp.stream", "-e", "kafka.api_key").splitlines()
    assert malformed == ["2\t999"]
    fields = tshark("-r", str(path), "-T", "fields", "-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.flags.str",
                    "-Y", "tcp.flags.fin == 1 || tcp.flags.reset == 1").splitlines()
    first_fin_or_rst = {}
    for line in fields:
        stream, sport, flags = line.split("\t")
        first_fin_or_rst.setdefault(int(stream), (int(sport) == broker.port, "R" in flags))
    assert first_fin_or_rst == {0: (False, False), 1: (False, True), 2: (True, False)}  # (by the broker, reset)
    assert max(len(p) for _, p in packets(path.read_bytes())) > 65000  # the fetch response went out in MSS segments


def _kafka_python_round_trip(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=(2, 0, 0), linger_ms=5)
    for i in range(50):
        producer.send("kp-topic", key=b"k%d" % i, value=b"value-%d" % i)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("kp-topic", bootstrap_servers=bootstrap, api_version=(2, 0, 0), group_id="kp-group",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    values, deadline = [], time.monotonic() + 30
    while len(values) < 50 and time.monotonic() < deadline:
        values += [r.value for records in consumer.poll(timeout_ms=300).values() for r in records]
    consumer.commit()
    consumer.close()
    assert sorted(values) == sorted(b"value-%d" % i for i in range(50))


def _confluent_round_trip(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(50):
        producer.produce("ck-topic", key=b"k%d" % i, value=b"value-%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["ck-topic"])
    values, deadline = [], time.monotonic() + 30
    while len(values) < 50 and time.monotonic() < deadline:
        values += [msg.value() for msg in consumer.consume(100, 0.3) if not msg.error()]
    consumer.commit(asynchronous=False)
    consumer.close()
    del producer
    assert sorted(values) == sorted(b"value-%d" % i for i in range(50))


@needs_tshark
@pytest.mark.parametrize("round_trip", [_kafka_python_round_trip, _confluent_round_trip],
                         ids=["kafka-python", "confluent-kafka"])
def test_real_clients_traffic_decodes_in_tshark(tmp_path, round_trip, monkeypatch):
    path = tmp_path / "clients.pcapng"
    t_start = time.time_ns()
    with BrokerThread(data_dir=tmp_path / "data", tap_path=path) as broker:
        handled = record_handled(monkeypatch)
        round_trip(broker.bootstrap)
    t_end = time.time_ns()
    per_api = check_capture(path, broker.port, handled, t_start, t_end)
    assert per_api[0] >= 1 and per_api[1] >= 1 and per_api[11] >= 1  # produced, fetched, joined a group

    # tshark 4.0 calls some valid frames malformed (flexible versions it predates, and its own JoinGroup
    # and SyncGroup metadata reading); they decoded exactly above, so only a Kafka PDU may be flagged
    malformed = tshark("-r", str(path), "-d", f"tcp.port=={broker.port},kafka", "-Y", "_ws.malformed",
                       "-T", "fields", "-e", "kafka.correlation_id").splitlines()
    assert all(line.strip() for line in malformed)


# ---- WireTap itself and the command line --------------------------------------------------------------------------

def test_tap_buffers_until_a_threshold_or_a_close(tmp_path):
    path = tmp_path / "buffered.pcapng"
    tap = WireTap(path, flush_bytes=10_000, flush_seconds=3600)
    header_size = path.stat().st_size
    assert [t for t, _ in blocks(path.read_bytes())] == [0x0A0D0D0A, 1]  # valid from the start
    conn = tap.connection_opened(("127.0.0.1", 1234, ), ("127.0.0.1", 9092), T0)
    tap.client_sent(conn, b"x" * 100, T0)
    assert path.stat().st_size == header_size
    tap.broker_sent(conn, b"y" * 20_000, T0)
    assert path.stat().st_size > header_size + 20_000
    tap.client_sent(conn, b"z", T0)
    tap.connection_closed(conn, T0)  # a closed connection is written at once
    got = segments(path.read_bytes())
    assert got[-1]["flags"] == ACK and got[-3]["flags"] == FIN | ACK
    gone = tap.connection_opened(None, ("::1", 9092), T0)  # a socket closed before its peer was asked
    tap.close()
    tap.client_sent(conn, b"ignored", T0)  # after close (or a closed connection): nothing, no error
    tap.connection_closed(gone, T0)
    handshake = segments(path.read_bytes())[len(got):]  # written at close; the ignored calls add nothing
    assert [str(s["src"]) for s in handshake] == ["::", "::1", "::"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_failing_tap_stops_instead_of_raising(caplog):
    tap = WireTap("/dev/full", flush_bytes=0)
    assert tap.closed and "capture stopped" in caplog.text
    conn = tap.connection_opened(("127.0.0.1", 1), ("127.0.0.1", 2), T0)
    tap.client_sent(conn, b"data", T0)
    tap.connection_closed(conn, T0)
    tap.close()


@needs_tshark
def test_cli_broker_tap(tmp_path):
    path = tmp_path / "cli.pcapng"
    command = [sys.executable, "-m", "kafkawire.cli", "broker", "--data-dir", str(tmp_path / "data"),
               "--port", "0", "--tap", str(path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert "kafkawire broker on" in line, process.stderr.read() if process.poll() is not None else line
        port = int(line.split()[3].rsplit(":", 1)[1])
        client = RecordingClient("127.0.0.1", port, client_id="cli-tap")
        client.request(m.ApiVersionsRequest(), 0)
        client.request(m.MetadataRequest(topics=[]), 1)
        client.close()
        time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
    requests, client_ids, responses = kafka_fields(path, port)
    assert requests == {0: [(18, 0, 0), (3, 1, 1)]} and responses == {0: [0, 1]}
    assert client_ids == {0: ["cli-tap", "cli-tap"]}
    assert tshark_streams(path)[0] == (bytes(client.sent), bytes(client.received))

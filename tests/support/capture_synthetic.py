"""Synthetic Kafka captures for the capture job's tests: real encoded frames (kafkawire's codecs) in
TCP segments (kafkawire.pcap.writer), with faults (reordering, duplication, a lost segment in a request
and in a response, a capture that starts mid-stream) whose frames and problems are known exactly, and
fetches built to break (or keep) the KIP-74 limits.

``build_synthetic(folder)`` writes them all, interleaved, as one pcapng file.
"""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

from kafkawire import messages as m
from kafkawire.framing import Correlator, encode_response
from kafkawire.pcap.writer import TcpConversationWriter, file_header
from kafkawire.records import Codec, RecordBatchBuilder

PRODUCE, FETCH = 0, 1
BROKER = ("10.9.0.1", 9092)
MSS = 300
T0 = 1_700_000_000_000_000_000  # a whole number of microseconds, as pcap keeps them
TOPIC = "events"


def records_blob(first: int, count: int, codec=Codec.NONE, size: int = 40) -> bytes:
    builder = RecordBatchBuilder(base_offset=first, compression=codec)
    for n in range(first, first + count):
        builder.append(b"value-%d-" % n * (size // 8), key=b"key-%d" % n, headers=[("n", b"%d" % n)],
                       timestamp=1_700_000_000_000 + n)
    return builder.build()


@dataclass
class Exchange:
    api_key: int
    api_version: int
    correlation_id: int
    request: bytes          # size prefix and frame
    response: bytes


class Talk:
    """A client's exchanges with the broker: real encoded requests and their responses."""

    def __init__(self, client_id: str):
        self.correlator = Correlator(client_id=client_id, first_correlation_id=1)
        self.exchanges: list[Exchange] = []

    def add(self, body, version: int, response) -> None:
        data = self.correlator.request(body, version)
        correlation_id = struct.unpack_from(">i", data, 8)[0]
        self.exchanges.append(Exchange(body.API_KEY, version, correlation_id, data,
                                       encode_response(body.API_KEY, version, correlation_id, response)))


# what the standard conversation produces, and fetches back: (partition, first offset, count, codec)
PRODUCED = [(0, 0, 20, Codec.GZIP), (1, 0, 30, Codec.NONE)]


def standard_talk() -> Talk:
    """ApiVersions, Metadata, a Produce of two partitions, a Fetch of them, Metadata again."""
    talk = Talk("synthetic")
    talk.add(m.ApiVersionsRequest(client_software_name="kw", client_software_version="1"), 3,
             m.ApiVersionsResponse(api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=0, max_version=9)]))
    talk.add(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)]), 9,
             m.MetadataResponse(topics=[m.MetadataResponse.MetadataResponseTopic(name=TOPIC, partitions=[
                 m.MetadataResponse.MetadataResponsePartition(partition_index=p) for p, *_ in PRODUCED])]))
    blobs = [records_blob(first, count, codec) for _, first, count, codec in PRODUCED]
    talk.add(m.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=TOPIC, partition_data=[m.ProduceRequest.PartitionProduceData(index=p, records=blob)
                                    for (p, *_), blob in zip(PRODUCED, blobs)])]), 8,
        m.ProduceResponse(responses=[m.ProduceResponse.TopicProduceResponse(name=TOPIC, partition_responses=[
            m.ProduceResponse.PartitionProduceResponse(index=p, base_offset=first) for p, first, *_ in PRODUCED])]))
    talk.add(m.FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, topics=[m.FetchRequest.FetchTopic(
        topic=TOPIC, partitions=[m.FetchRequest.FetchPartition(partition=p, fetch_offset=first,
                                                                partition_max_bytes=1 << 20)
                                 for p, first, *_ in PRODUCED])]), 11,
        m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(topic=TOPIC, partitions=[
            m.FetchResponse.PartitionData(partition_index=p, high_watermark=first + count, records=blob)
            for (p, first, count, _), blob in zip(PRODUCED, blobs)])]))
    talk.add(m.MetadataRequest(topics=[]), 1, m.MetadataResponse())
    return talk


def fetch_talk(client_id: str, fetches: list[tuple[int, list[tuple]]]) -> Talk:
    """Fetches of topic TOPIC: (MaxBytes, [(partition, fetch offset, PartitionMaxBytes, high watermark,
    records or None)]) each."""
    talk = Talk(client_id)
    for max_bytes, partitions in fetches:
        talk.add(m.FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=max_bytes, topics=[m.FetchRequest.FetchTopic(
            topic=TOPIC, partitions=[m.FetchRequest.FetchPartition(partition=p, fetch_offset=offset,
                                                                    partition_max_bytes=limit)
                                     for p, offset, limit, _, _ in partitions])]), 11,
            m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(topic=TOPIC, partitions=[
                m.FetchResponse.PartitionData(partition_index=p, high_watermark=hw, records=blob)
                for p, _, _, hw, blob in partitions])]))
    return talk


@dataclass
class Segment:
    """One packet's Enhanced Packet Block, and which bytes it carries (None for handshakes and ACKs)."""
    block: bytes
    direction: str | None = None
    exchange: int | None = None
    index: int | None = None


def split_blocks(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        length = struct.unpack_from("<I", data, pos + 4)[0]
        out.append(data[pos:pos + length])
        pos += length
    return out


def packets_of(talk: Talk, port: int) -> list[Segment]:
    """Handshake; each request, then its response, in segments of MSS bytes, each acknowledged; FIN exchange."""
    writer = TcpConversationWriter(("10.9.0.2", port), BROKER, mss=MSS, seed=port)
    out = [Segment(block) for block in split_blocks(writer.open(T0))]
    for number, exchange in enumerate(talk.exchanges):
        for direction, write, data in (("request", writer.client_data, exchange.request),
                                       ("response", writer.server_data, exchange.response)):
            *data_blocks, ack = split_blocks(write(data, T0))
            out += [Segment(b, direction, number, i) for i, b in enumerate(data_blocks)] + [Segment(ack)]
    return out + [Segment(block) for block in split_blocks(writer.close(T0))]


def find(packets: list[Segment], direction: str, exchange: int, index: int) -> int:
    (at,) = [i for i, p in enumerate(packets) if (p.direction, p.exchange, p.index) == (direction, exchange, index)]
    return at


def reordered(packets: list[Segment], window: int = 4) -> list[Segment]:
    """Packets shuffled within windows of ``window`` (the handshake and the close stay in place)."""
    rng = random.Random(7)
    middle = packets[3:-3]
    for start in range(0, len(middle), window):
        chunk = middle[start:start + window]
        rng.shuffle(chunk)
        middle[start:start + window] = chunk
    return packets[:3] + middle + packets[-3:]


def duplicated(packets: list[Segment], every: int = 3) -> list[Segment]:
    """Every ``every``-th packet captured again two packets later (a retransmission)."""
    out = list(packets)
    for i in range(len(packets) - 4, 2, -every):
        out.insert(i + 3, packets[i])
    return out


def stream_offsets(talk: Talk) -> dict[str, list[int]]:
    """Where each exchange's request and response start in their direction's byte stream."""
    offsets = {"request": [], "response": []}
    for direction in offsets:
        position = 0
        for exchange in talk.exchanges:
            offsets[direction].append(position)
            position += len(getattr(exchange, direction))
    return offsets


@dataclass
class Scenario:
    name: str
    port: int
    packets: list[Segment]
    frames: set            # (direction, correlation id, api key or None when unmatched)
    problems: list         # (direction, kind, offset, length, api key, correlation id)
    offset_shift: dict = field(default_factory=lambda: {"request": 0, "response": 0})

    @property
    def client(self) -> str:
        return f"10.9.0.2:{self.port}"


def all_frames(talk: Talk) -> set:
    return {(direction, e.correlation_id, e.api_key) for e in talk.exchanges for direction in ("request", "response")}


def fault_scenarios(talk: Talk) -> list[Scenario]:
    full = all_frames(talk)
    at = stream_offsets(talk)
    produce, fetch = 2, 3  # exchange numbers
    p, f = talk.exchanges[produce], talk.exchanges[fetch]
    clean = packets_of(talk, 41001)
    scenarios = [
        Scenario("clean", 41001, clean, full, []),
        Scenario("reordered", 41002, reordered(packets_of(talk, 41002)), full, []),
        Scenario("duplicated", 41003, duplicated(packets_of(talk, 41003)), full, []),
    ]
    # A lost segment in the middle of the Produce request: the request is cut, its response is left
    # without a request, and framing carries on at the next request (the cut frame's size was known).
    packets = packets_of(talk, 41004)
    del packets[find(packets, "request", produce, 2)]
    scenarios.append(Scenario(
        "lost request segment", 41004, packets,
        full - {("request", p.correlation_id, PRODUCE), ("response", p.correlation_id, PRODUCE)}
        | {("response", p.correlation_id, None)},
        [("request", "gap", at["request"][produce] + 2 * MSS, MSS, None, None),
         ("request", "truncated_frame", at["request"][produce], len(p.request) - 4, PRODUCE, p.correlation_id),
         ("response", "unmatched_response", at["response"][produce], len(p.response) - 4, PRODUCE,
          p.correlation_id)]))
    # A lost segment in the middle of the Fetch response: the response is cut (its request known).
    packets = packets_of(talk, 41005)
    del packets[find(packets, "response", fetch, 3)]
    scenarios.append(Scenario(
        "lost response segment", 41005, packets, full - {("response", f.correlation_id, FETCH)},
        [("response", "gap", at["response"][fetch] + 3 * MSS, MSS, None, None),
         ("response", "truncated_frame", at["response"][fetch], len(f.response) - 4, FETCH, f.correlation_id)]))
    # The capture starts inside the Produce request (its third segment): both directions resync, the
    # request side on the Fetch request, the response side on the Fetch response (the Produce response
    # answers nothing captured, so it is skipped too).
    packets = packets_of(talk, 41006)
    start = find(packets, "request", produce, 2)
    request_skip = len(p.request) - 2 * MSS
    scenarios.append(Scenario(
        "mid-stream start", 41006, packets[start:],
        {frame for frame in full if frame[1] > p.correlation_id},
        [("request", "gap", 0, 0, None, None), ("response", "gap", 0, 0, None, None),
         ("request", "resync", 0, request_skip, None, None),
         ("response", "resync", 0, len(p.response), None, None)],
        {"request": at["request"][produce] + 2 * MSS, "response": at["response"][produce]}))
    return scenarios


# Fetches built for the KIP-74 check: (port, fetches) -- see fetch_talk.
SMALL, LARGE = records_blob(0, 5), records_blob(0, 20)  # 341 and 1251 bytes
TWO_BATCHES = SMALL + records_blob(5, 5)
LIMIT_CONNECTIONS = {
    # over max(MaxBytes, first batch): the first partition's batch already filled the response
    42001: [(1000, [(0, 0, 1 << 20, 20, LARGE), (1, 0, 1 << 20, 5, SMALL)])],
    # within: a first batch alone may overshoot MaxBytes; then a response under MaxBytes
    42002: [(1000, [(0, 0, 1 << 20, 20, LARGE), (1, 0, 1 << 20, 0, None)]),
            (1000, [(0, 20, 1 << 20, 20, None), (1, 0, 1 << 20, 5, SMALL)])],
    # a partition over max(PartitionMaxBytes, its first batch): two batches where one fit
    42003: [(1 << 20, [(0, 0, 500, 10, TWO_BATCHES)])],
    # partition 1 starved three fetches in a row while data waited; 2 starved twice; 3 had nothing waiting
    42004: [(1 << 20, [(0, 0, 1 << 20, 20, records_blob(0, 5)), (1, 5, 1 << 20, 10, None),
                       (2, 5, 1 << 20, 10, None), (3, 7, 1 << 20, 7, None)]),
            (1 << 20, [(0, 5, 1 << 20, 20, records_blob(5, 5)), (1, 5, 1 << 20, 10, None),
                       (2, 5, 1 << 20, 10, None), (3, 7, 1 << 20, 7, None)]),
            (1 << 20, [(0, 10, 1 << 20, 20, records_blob(10, 5)), (1, 5, 1 << 20, 10, None),
                       (2, 5, 1 << 20, 10, records_blob(5, 5)), (3, 7, 1 << 20, 7, None)]),
            (1 << 20, [(0, 15, 1 << 20, 20, records_blob(15, 5)), (1, 5, 1 << 20, 10, records_blob(5, 5)),
                       (2, 10, 1 << 20, 10, None), (3, 7, 1 << 20, 7, None)])],
}


@dataclass
class Synthetic:
    path: Path
    talk: Talk
    scenarios: list[Scenario]
    limits: dict[int, Talk]


def interleaved(connections: list[list[Segment]]) -> list[Segment]:
    """The connections' packets taken in turns, two at a time, as a capture of several clients would."""
    out, queues = [], [list(c) for c in connections]
    while any(queues):
        for queue in queues:
            out += queue[:2]
            del queue[:2]
    return out


def restamped(blocks: list[bytes]) -> list[bytes]:
    """Capture times in file order, a microsecond apart."""
    out = []
    for i, block in enumerate(blocks):
        ts = T0 + i * 1000
        stamped = bytearray(block)
        struct.pack_into("<II", stamped, 12, ts >> 32, ts & 0xFFFFFFFF)
        out.append(bytes(stamped))
    return out


def write_pcapng(path: Path, blocks: list[bytes]) -> None:
    path.write_bytes(file_header() + b"".join(blocks))


def write_pcap(path: Path, blocks: list[bytes]) -> None:
    """The same packets as a classic little-endian microsecond pcap (Ethernet)."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    for block in blocks:
        _, _, _, high, low, captured, original = struct.unpack_from("<IIIIIII", block)
        ts = (high << 32 | low) // 1000
        out.append(struct.pack("<IIII", ts // 10**6, ts % 10**6, captured, original) + block[28:28 + captured])
    path.write_bytes(b"".join(out))




def build_synthetic(folder: Path) -> Synthetic:
    """Every scenario and every KIP-74 connection, interleaved, in ``folder``/synthetic.pcapng."""
    talk = standard_talk()
    scenarios = fault_scenarios(talk)
    limits = {port: fetch_talk(f"limits-{port}", fetches) for port, fetches in LIMIT_CONNECTIONS.items()}
    connections = [s.packets for s in scenarios] + [packets_of(t, port) for port, t in limits.items()]
    path = folder / "synthetic.pcapng"
    write_pcapng(path, restamped([p.block for p in interleaved(connections)]))
    return Synthetic(path, talk, scenarios, limits)


def late_topic_names(path: Path, topic_id, topic: str = "orders", records: int = 3) -> Path:
    """A Fetch v13 of ``topic_id`` (``records`` records) on one connection, then, on another, the
    Metadata answer that names the id: the fetching connection first in time and in key order (the order
    a decoding task reads connections in)."""
    fetching = Talk("fetcher")
    fetching.add(m.FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, topics=[m.FetchRequest.FetchTopic(
        topic_id=topic_id, partitions=[m.FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                                      partition_max_bytes=1 << 20)])]), 13,
        m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(topic_id=topic_id, partitions=[
            m.FetchResponse.PartitionData(partition_index=0, high_watermark=records,
                                          records=records_blob(0, records))])]))
    naming = Talk("admin")
    naming.add(m.MetadataRequest(topics=None), 12, m.MetadataResponse(topics=[
        m.MetadataResponse.MetadataResponseTopic(name=topic, topic_id=topic_id, partitions=[
            m.MetadataResponse.MetadataResponsePartition(partition_index=0)])]))
    write_pcapng(path, restamped([s.block for s in packets_of(fetching, 40000) + packets_of(naming, 50000)]))
    return path


def rotated_series(synthetic: Synthetic, folder: Path, per_file: int = 25) -> list[Path]:
    """The capture as tcpdump -C would rotate it: name, name1, name2, ... each a whole pcapng file."""
    folder.mkdir(exist_ok=True)
    blocks = split_blocks(synthetic.path.read_bytes())[2:]
    paths = []
    for number, start in enumerate(range(0, len(blocks), per_file)):
        path = folder / ("series.pcapng" + (str(number) if number else ""))
        write_pcapng(path, blocks[start:start + per_file])
        paths.append(path)
    (folder / "notes.txt").write_text("not a capture: folders and globs skip it\n")
    return paths

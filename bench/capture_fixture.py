"""A realistic Kafka broker capture for bench/capture.py, synthesised quickly and with known counts.

    .venv/bin/python bench/capture_fixture.py --size-mb 64 --work /tmp/kafkawire-bench-capture

What is in it:

- ``--connections`` clients (10.1.x.y, ephemeral ports) talking to one broker, 10.0.0.1:9092, over
  Ethernet/IPv4; half producers, half consumers. With ``--mss mixed`` (the default) every other pair
  of connections (a producer and a consumer) is cut at a 1448-byte MSS (Ethernet) and the rest in
  65483-byte segments (loopback or TSO captures); ``--mss N`` cuts them all at N.
- Producers: ApiVersions and Metadata first, then Produce requests (acks=-1, one batch per partition,
  1-6 partitions, 5-60 records a batch, about what batch.size=16 KiB holds) each with the compression
  its connection is configured with (none, gzip, snappy, lz4, zstd round-robin over connections), up
  to three in flight, and a Metadata refresh every 97 requests.
- Consumers: ApiVersions and Metadata first, then Fetch requests answered with 1-6 partitions of 1-4
  batches of 5-200 records each (batches of every codec, as a topic written by several producers
  holds), one fetch in five empty (a long poll that timed out), a Heartbeat every 5th and an
  OffsetCommit every 10th request.
- Records: JSON-ish values of 100 B to 1 KiB (compressible, as real events are), ``user-%08d`` keys,
  two headers, idempotent producer ids; every batch is a real magic-2 RecordBatch written by
  ``RecordBatchBuilder`` with a valid CRC-32C.
- Versions: Produce v8, Fetch v11, Metadata v8, ApiVersions v2, OffsetCommit v7, Heartbeat v3 (the
  newest non-flexible ones, which tshark 4.0 decodes); ``--flexible`` switches to the first flexible
  version of each (Produce v9, Fetch v12, Metadata v9, ApiVersions v3, OffsetCommit v8, Heartbeat v4).

How it is fast: a few dozen distinct request/response pairs ("templates") are encoded once; each use
copies one and patches its correlation id and its int64 offsets (fetch offset, high watermark and
batch base offsets of a Fetch, base offset of a Produce response). The base offset of a batch is not
covered by its CRC, so patched batches stay valid. The TCP/IP packets around the frames are written by
``kafkawire.pcap.writer.TcpConversationWriter`` (correct sequence numbers and checksums). Patch sites
are found by building templates with unique sentinel values and searching for them.

Known counts: every frame written is counted (by API), and every record of a Produce request and of a
Fetch response; a sample of the frames written is decoded again as a self-check. The capture and its
counts (a JSON file next to it) are kept in ``--work`` and reused when asked for with the same spec.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import struct
import sys
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kafkawire import messages as m
from kafkawire.framing import decode_request, decode_response, encode_request, encode_response, request_header_class
from kafkawire.messages import apis
from kafkawire.pcap.writer import TcpConversationWriter, file_header
from kafkawire.records import Codec, RecordBatchBuilder, iter_batches

GENERATOR_VERSION = 3  # bump when the bytes generated for a spec change: cached captures are rebuilt
BROKER = ("10.0.0.1", 9092)
ETHERNET_MSS = 1448
LOOPBACK_MSS = 65483
T0_NS = 1_700_000_000_000_000_000
CODECS = (Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD)
TOPICS = ("orders", "clicks", "payments", "audit")
PARTITIONS_PER_TOPIC = 12
PRODUCE_INFLIGHT = 3
SAMPLE_EVERY = 97  # decode every 97th exchange again while generating
CLIENT_ID_TEMPLATE = b"producer-000"  # patched per connection with an id of the same length

VERSIONS = {  # API name -> (non-flexible version, flexible version)
    "Produce": (8, 9), "Fetch": (11, 12), "Metadata": (8, 9), "ApiVersions": (2, 3),
    "OffsetCommit": (7, 8), "Heartbeat": (3, 4),
}

_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_SENTINEL = 0x4B57_0000_0000_0000  # int64 values no real field holds; low bits number the site


@dataclass(frozen=True)
class CaptureSpec:
    size_mb: int = 1024
    connections: int = 48
    mss: str = "mixed"            # "mixed", or a number of bytes for every connection
    flexible: bool = False
    file_format: str = "pcapng"   # or "pcap" (classic, nanosecond timestamps)
    seed: int = 1

    def key(self) -> str:
        text = json.dumps({**asdict(self), "generator": GENERATOR_VERSION}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def file_name(self) -> str:
        return f"capture-{self.size_mb}mb-{self.key()}.{self.file_format}"

    def mss_of(self, index: int) -> int:
        if self.mss == "mixed":
            # producers and consumers alternate by index, so alternate the MSS every two connections
            return ETHERNET_MSS if (index // 2) % 2 == 0 else LOOPBACK_MSS
        return int(self.mss)


@dataclass
class CaptureFacts:
    """What the generator wrote: the counts a decoder of the capture must reproduce."""
    path: str
    spec: dict
    file_bytes: int = 0
    packets: int = 0
    connections: int = 0
    frames: int = 0
    requests: int = 0
    responses: int = 0
    records: int = 0              # produce_records + fetch_records
    produce_records: int = 0
    fetch_records: int = 0
    batches: int = 0
    frames_by_api: dict = field(default_factory=dict)
    batches_by_codec: dict = field(default_factory=dict)
    tcp_payload_bytes: int = 0
    seconds: float = 0.0
    samples_checked: int = 0

    @classmethod
    def load(cls, path: Path) -> "CaptureFacts":
        return cls(**json.loads(path.read_text()))


# ---- records ----------------------------------------------------------------------------------------

_WORDS = [w for w in (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu checkout cart view click search "
    "login logout refund shipped pending paid failed retry mobile desktop tablet eu-west us-east "
    "ap-south premium basic trial").split()]


def _value(rng: random.Random, size: int, serial: int) -> bytes:
    """A JSON-ish event of exactly ``size`` bytes: fixed keys, varied numbers and words."""
    head = (f'{{"id":{serial},"user":"user-{rng.randrange(10**8):08d}","event":"{rng.choice(_WORDS)}",'
            f'"amount":{rng.randrange(100000) / 100},"ts":{1_700_000_000_000 + serial},"tags":"')
    words = []
    length = len(head) + 2
    while length < size:
        word = rng.choice(_WORDS) if rng.random() < 0.8 else f"{rng.randrange(16**8):08x}"
        words.append(word)
        length += len(word) + 1
    text = (head + " ".join(words))[:size - 2] + '"}'
    return text.encode()


def _batch(rng: random.Random, codec: Codec, count: int, producer_id: int, serial: int) -> bytes:
    builder = RecordBatchBuilder(compression=codec, producer_id=producer_id, producer_epoch=0,
                                 base_sequence=serial % 1_000_000)
    ts = 1_700_000_000_000 + serial
    for i in range(count):
        headers = [("trace-id", f"{rng.getrandbits(64):016x}".encode()), ("source", b"svc-%d" % (producer_id % 7))]
        builder.append(_value(rng, rng.randint(100, 1024), serial + i), key=b"user-%08d" % rng.randrange(10**8),
                       headers=headers, timestamp=ts + i)
    return builder.build()


# ---- templates: frames encoded once, patched per use ------------------------------------------------

@dataclass
class Frame:
    """A size-prefixed frame and where to patch it: correlation id, client id (requests) and int64 offsets."""
    data: bytes
    correlation_at: int
    offset_sites: list  # (position, delta): the field becomes base + delta
    client_id_at: int | None = None

    def patched(self, correlation_id: int, base: int, client_id: bytes = CLIENT_ID_TEMPLATE) -> bytearray:
        out = bytearray(self.data)
        _I32.pack_into(out, self.correlation_at, correlation_id)
        if self.client_id_at is not None:
            out[self.client_id_at:self.client_id_at + len(client_id)] = client_id  # same length as the template's
        for position, delta in self.offset_sites:
            _I64.pack_into(out, position, base + delta)
        return out


@dataclass
class Exchange:
    api: str
    request: Frame
    response: Frame
    records: int = 0           # records carried (Produce: in the request; Fetch: in the response)
    batches: Counter = field(default_factory=Counter)
    advance: int = 0           # how far the connection's offset cursor moves per use


class _Sentinels:
    """Unique int64 placeholders, resolved to their byte positions in an encoded frame."""

    def __init__(self):
        self.next = 0
        self.deltas: dict[int, int] = {}

    def new(self, delta: int) -> int:
        self.next += 1
        value = _SENTINEL + (self.next << 16)
        self.deltas[value] = delta
        return value

    def sites(self, data: bytes) -> list:
        found = []
        for value, delta in self.deltas.items():
            needle = _I64.pack(value)
            position = data.find(needle)
            if position < 0 or data.find(needle, position + 1) >= 0:
                raise AssertionError(f"sentinel {value:#x} found {'no' if position < 0 else 'more than one'} place")
            found.append((position, delta))
        self.deltas.clear()
        return found


def _request(version: int, body, sentinels: _Sentinels | None = None) -> Frame:
    header = request_header_class()(request_api_key=body.API_KEY, request_api_version=version,
                                    correlation_id=0, client_id=CLIENT_ID_TEMPLATE.decode())
    data = encode_request(header, body)
    # size, api key, version, correlation id, then the client id's int16 length (every header version here)
    assert data[12:14 + len(CLIENT_ID_TEMPLATE)] == _I16.pack(len(CLIENT_ID_TEMPLATE)) + CLIENT_ID_TEMPLATE
    return Frame(data, 8, sentinels.sites(data) if sentinels else [], client_id_at=14)


def _response(api_key: int, version: int, body, sentinels: _Sentinels | None = None) -> Frame:
    data = encode_response(api_key, version, 0, body)
    return Frame(data, 4, sentinels.sites(data) if sentinels else [])


class Templates:
    """Every exchange the generator writes, built once from ``seed``."""

    def __init__(self, flexible: bool, seed: int):
        self.version = {api: pair[1 if flexible else 0] for api, pair in VERSIONS.items()}
        rng = random.Random(seed)
        self.produce: dict[Codec, list[Exchange]] = {codec: [self._produce(rng, codec, i) for i in range(4)]
                                                      for codec in CODECS}
        pool = [_batch(rng, CODECS[i % len(CODECS)], rng.randint(5, 200), 5000 + i, 1000 * i) for i in range(40)]
        self.fetch = [self._fetch(rng, pool, i) for i in range(12)]
        self.empty_fetch = self._fetch(rng, pool, 99, empty=True)
        self.api_versions = self._api_versions()
        self.metadata = self._metadata()
        self.heartbeat = self._heartbeat()
        self.offset_commit = self._offset_commit(rng)

    def all(self) -> list[Exchange]:
        return ([e for group in self.produce.values() for e in group] + self.fetch
                + [self.empty_fetch, self.api_versions, self.metadata, self.heartbeat, self.offset_commit])

    def _produce(self, rng: random.Random, codec: Codec, index: int) -> Exchange:
        version = self.version["Produce"]
        sentinels = _Sentinels()
        topics, responses, records, batches = [], [], 0, Counter()
        chosen = rng.sample([(t, p) for t in TOPICS[:2] for p in range(PARTITIONS_PER_TOPIC)], rng.randint(1, 6))
        for topic in sorted({t for t, _ in chosen}):
            parts, answers = [], []
            for _, partition in sorted(c for c in chosen if c[0] == topic):
                count = rng.randint(5, 60)  # batch.size 16 KiB fills at about 30 of these values
                parts.append(m.ProduceRequest.PartitionProduceData(
                    index=partition, records=_batch(rng, codec, count, 1000 + index, rng.randrange(10**6))))
                answers.append(m.ProduceResponse.PartitionProduceResponse(
                    index=partition, error_code=0, base_offset=sentinels.new(records), log_append_time_ms=-1,
                    log_start_offset=0))
                records += count
                batches[codec.name.lower()] += 1
            topics.append(m.ProduceRequest.TopicProduceData(name=topic, partition_data=parts))
            responses.append(m.ProduceResponse.TopicProduceResponse(name=topic, partition_responses=answers))
        request = _request(version, m.ProduceRequest(acks=-1, timeout_ms=30000, topic_data=topics))
        response = _response(0, version, m.ProduceResponse(responses=responses, throttle_time_ms=0), sentinels)
        return Exchange("Produce", request, response, records, batches, advance=records)

    def _fetch(self, rng: random.Random, pool: list[bytes], index: int, empty: bool = False) -> Exchange:
        version = self.version["Fetch"]
        ask, answer = _Sentinels(), _Sentinels()
        chosen = rng.sample([(t, p) for t in TOPICS for p in range(PARTITIONS_PER_TOPIC)], rng.randint(1, 6))
        request_topics, response_topics, records, batches, advance = [], [], 0, Counter(), 0
        for topic in sorted({t for t, _ in chosen}):
            asked, given = [], []
            for _, partition in sorted(c for c in chosen if c[0] == topic):
                blob, in_partition = bytearray(), 0
                for _ in range(0 if empty else rng.randint(1, 4)):
                    batch = bytearray(rng.choice(pool))
                    _I64.pack_into(batch, 0, answer.new(in_partition))  # not covered by the CRC
                    in_partition += struct.unpack_from(">i", batch, 57)[0]  # the batch's record count
                    batches[Codec(batch[22] & 7).name.lower()] += 1
                    blob += batch
                records += in_partition
                advance = max(advance, in_partition)
                asked.append(m.FetchRequest.FetchPartition(
                    partition=partition, current_leader_epoch=0, fetch_offset=ask.new(0), log_start_offset=-1,
                    partition_max_bytes=1 << 20))
                given.append(m.FetchResponse.PartitionData(
                    partition_index=partition, error_code=0, high_watermark=answer.new(in_partition + 500),
                    last_stable_offset=answer.new(in_partition + 500), log_start_offset=0,
                    preferred_read_replica=-1, records=bytes(blob)))
            request_topics.append(m.FetchRequest.FetchTopic(topic=topic, partitions=asked))
            response_topics.append(m.FetchResponse.FetchableTopicResponse(topic=topic, partitions=given))
        request = _request(version, m.FetchRequest(
            replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, isolation_level=1,
            session_id=0, session_epoch=-1, topics=request_topics, rack_id=""), ask)
        response = _response(1, version, m.FetchResponse(
            throttle_time_ms=0, error_code=0, session_id=0, responses=response_topics), answer)
        return Exchange("Fetch", request, response, records, batches, advance=advance)

    def _api_versions(self) -> Exchange:
        version = self.version["ApiVersions"]
        keys = [m.ApiVersionsResponse.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
                for a in apis()]
        request = _request(version, m.ApiVersionsRequest(
            client_software_name="kafkawire-bench", client_software_version="1.0"))
        response = _response(18, version, m.ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=0))
        return Exchange("ApiVersions", request, response)

    def _metadata(self) -> Exchange:
        version = self.version["Metadata"]
        brokers = [m.MetadataResponse.MetadataResponseBroker(node_id=n, host=f"broker-{n}.kafka.internal", port=9092,
                                                             rack=f"rack-{n % 3}") for n in range(3)]
        topics = [m.MetadataResponse.MetadataResponseTopic(
            error_code=0, name=topic, is_internal=False, topic_authorized_operations=-2147483648,
            partitions=[m.MetadataResponse.MetadataResponsePartition(
                error_code=0, partition_index=p, leader_id=p % 3, leader_epoch=7,
                replica_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3], isr_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3],
                offline_replicas=[]) for p in range(PARTITIONS_PER_TOPIC)]) for topic in TOPICS]
        request = _request(version, m.MetadataRequest(
            topics=[m.MetadataRequest.MetadataRequestTopic(name=t) for t in TOPICS], allow_auto_topic_creation=False,
            include_topic_authorized_operations=False))
        response = _response(3, version, m.MetadataResponse(
            throttle_time_ms=0, brokers=brokers, cluster_id="kafkawire-bench-cluster", controller_id=0,
            topics=topics))
        return Exchange("Metadata", request, response)

    def _heartbeat(self) -> Exchange:
        version = self.version["Heartbeat"]
        request = _request(version, m.HeartbeatRequest(
            group_id="bench-group", generation_id=3, member_id="consumer-bench-1-5f0c2a"))
        return Exchange("Heartbeat", request, _response(12, version, m.HeartbeatResponse(throttle_time_ms=0,
                                                                                         error_code=0)))

    def _offset_commit(self, rng: random.Random) -> Exchange:
        version = self.version["OffsetCommit"]
        sentinels = _Sentinels()
        topics = [m.OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            m.OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=sentinels.new(0), committed_leader_epoch=7,
                committed_metadata="") for p in range(4)]) for topic in TOPICS[:2]]
        request = _request(version, m.OffsetCommitRequest(
            group_id="bench-group", generation_id_or_member_epoch=3, member_id="consumer-bench-1-5f0c2a",
            topics=topics), sentinels)
        response = _response(8, version, m.OffsetCommitResponse(throttle_time_ms=0, topics=[
            m.OffsetCommitResponse.OffsetCommitResponseTopic(name=topic, partitions=[
                m.OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=p, error_code=0)
                for p in range(4)]) for topic in TOPICS[:2]]))
        return Exchange("OffsetCommit", request, response)


def check_exchange(exchange: Exchange, versions: dict, request: bytes, response: bytes, correlation_id: int,
                   base: int, client_id: bytes = CLIENT_ID_TEMPLATE) -> None:
    """Decode a written request/response pair again and check what the generator counted."""
    header, body = decode_request(request[4:])
    version = versions[exchange.api]
    assert header.correlation_id == correlation_id and header.request_api_version == version, header
    assert header.client_id == client_id.decode(), header
    response_header, response_body = decode_response(response[4:], header.request_api_key, version)
    assert response_header.correlation_id == correlation_id
    if exchange.api == "Produce":
        blobs = [(p.records, None) for t in body.topic_data for p in t.partition_data]
    elif exchange.api == "Fetch":
        assert all(p.fetch_offset == base for t in body.topics for p in t.partitions)
        blobs = [(p.records, base) for t in response_body.responses for p in t.partitions]
    else:
        blobs = []
    records = 0
    for blob, first_offset in blobs:
        expected_offset = first_offset
        for batch in iter_batches(blob):  # checks each CRC
            if expected_offset is not None:
                assert batch.base_offset == expected_offset, (batch.base_offset, expected_offset)
                expected_offset += batch.count
            records += sum(1 for _ in batch)
    assert records == exchange.records, (exchange.api, records, exchange.records)


# ---- the conversation ---------------------------------------------------------------------------

class _Client:
    __slots__ = ("index", "role", "codec", "writer", "client_id", "pending", "sent", "cursor", "open", "mss")

    def __init__(self, index: int, spec: CaptureSpec, rng: random.Random):
        self.index = index
        self.role = "producer" if index % 2 == 0 else "consumer"
        self.codec = CODECS[(index // 2) % len(CODECS)]
        self.mss = spec.mss_of(index)
        address = f"10.1.{index // 250}.{index % 250 + 2}"
        self.writer = TcpConversationWriter((address, 40000 + rng.randrange(20000)), BROKER, mss=self.mss,
                                            seed=spec.seed * 100_003 + index)
        self.client_id = f"{self.role}-{index:03d}".encode()  # as long as CLIENT_ID_TEMPLATE
        self.pending: deque = deque()  # (exchange, response bytes) in request order
        self.sent = 0                  # requests sent: the next correlation id
        self.cursor = 0                # the offset cursor patched into offsets
        self.open = False

    def limit(self) -> int:
        return PRODUCE_INFLIGHT if self.role == "producer" else 1


def _segments(length: int, mss: int) -> int:
    return -(-length // mss) + 1  # data segments plus the peer's ACK


class _Output:
    """The capture file: pcapng blocks as the writer makes them, or classic pcap records."""

    def __init__(self, path: Path, file_format: str):
        self.file = open(path, "wb", buffering=8 << 20)
        self.pcapng = file_format == "pcapng"
        if self.pcapng:
            self.file.write(file_header("kafkawire-bench"))
        else:  # classic pcap, nanosecond magic, Ethernet, snaplen 262144
            self.file.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))

    def write(self, blocks: bytes) -> None:
        if self.pcapng:
            self.file.write(blocks)
            return
        out, pos, end = [], 0, len(blocks)
        view = memoryview(blocks)
        while pos < end:
            _, total, _, hi, lo, captured, original = struct.unpack_from("<7I", blocks, pos)
            ts = hi << 32 | lo
            out.append(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000, captured, original))
            out.append(view[pos + 28:pos + 28 + captured])
            pos += total
        self.file.writelines(out)

    def close(self) -> int:
        size = self.file.tell()
        self.file.close()
        return size


def generate(spec: CaptureSpec, path: Path, progress=None) -> CaptureFacts:
    """Write the capture ``spec`` describes to ``path``; returns what it holds."""
    started = time.perf_counter()
    rng = random.Random(spec.seed)
    templates = Templates(spec.flexible, spec.seed)
    versions = templates.version
    facts = CaptureFacts(str(path), asdict(spec), connections=spec.connections)
    frames_by_api, batches_by_codec = Counter(), Counter()
    for exchange in templates.all():  # every template, once, before it is used
        check_exchange(exchange, versions, exchange.request.patched(1, 10), exchange.response.patched(1, 10), 1, 10)
    clients = [_Client(i, spec, rng) for i in range(spec.connections)]
    target = spec.size_mb << 20
    output = _Output(path, spec.file_format)
    written, ts, exchanges = 0, T0_NS, 0

    def emit(data: bytes, packets: int) -> None:
        nonlocal written
        output.write(data)
        written += len(data)
        facts.packets += packets

    def send(client: _Client, exchange: Exchange) -> None:
        nonlocal ts, exchanges
        correlation_id = client.sent
        client.sent += 1
        request = exchange.request.patched(correlation_id, client.cursor, client.client_id)
        response = exchange.response.patched(correlation_id, client.cursor)
        if exchanges % SAMPLE_EVERY == 0:
            check_exchange(exchange, versions, request, response, correlation_id, client.cursor, client.client_id)
            facts.samples_checked += 1
        exchanges += 1
        client.cursor += exchange.advance
        ts += 20_000 + len(request)
        emit(client.writer.client_data(request, ts), _segments(len(request), client.mss))
        client.pending.append((exchange, response))
        facts.requests += 1
        facts.tcp_payload_bytes += len(request)
        frames_by_api[exchange.api] += 1
        if exchange.api == "Produce":
            facts.produce_records += exchange.records
        batches_by_codec.update(exchange.batches)

    def answer(client: _Client) -> None:
        nonlocal ts
        exchange, response = client.pending.popleft()
        ts += 50_000 + len(response)
        emit(client.writer.server_data(response, ts), _segments(len(response), client.mss))
        facts.responses += 1
        facts.tcp_payload_bytes += len(response)
        frames_by_api[exchange.api] += 1
        if exchange.api == "Fetch":
            facts.fetch_records += exchange.records

    def next_request(client: _Client) -> Exchange:
        n = client.sent
        if n == 0:
            return templates.api_versions
        if n == 1 or n % 97 == 0:
            return templates.metadata
        if client.role == "producer":
            group = templates.produce[client.codec]
            return group[rng.randrange(len(group))]
        if n % 10 == 0:
            return templates.offset_commit
        if n % 5 == 0:
            return templates.heartbeat
        if rng.random() < 0.2:
            return templates.empty_fetch
        return templates.fetch[rng.randrange(len(templates.fetch))]

    next_report = 0
    while written < target:
        client = clients[rng.randrange(len(clients))]
        if not client.open:
            ts += 100_000
            emit(client.writer.open(ts), 3)
            client.open = True
        if client.pending and (len(client.pending) >= client.limit() or rng.random() < 0.6):
            answer(client)
        else:
            send(client, next_request(client))
        if progress and written >= next_report:
            progress(written, target)
            next_report += 64 << 20
    for client in clients:  # answer what is in flight, then close
        while client.pending:
            answer(client)
        if client.open:
            ts += 100_000
            emit(client.writer.close(ts), 3)
    facts.file_bytes = output.close()
    facts.frames = facts.requests + facts.responses
    facts.records = facts.produce_records + facts.fetch_records
    facts.batches = sum(batches_by_codec.values())
    facts.frames_by_api = dict(sorted(frames_by_api.items()))
    facts.batches_by_codec = dict(sorted(batches_by_codec.items()))
    facts.seconds = time.perf_counter() - started
    return facts


def ensure_capture(spec: CaptureSpec, work: Path, progress=None) -> tuple[CaptureFacts, bool]:
    """The capture for ``spec`` in ``work``: reused if its facts file matches, else generated.

    Returns the facts and whether they were generated now.
    """
    work.mkdir(parents=True, exist_ok=True)
    path = work / spec.file_name()
    facts_path = path.with_suffix(path.suffix + ".json")
    if path.exists() and facts_path.exists():
        try:
            facts = CaptureFacts.load(facts_path)
            if facts.spec == asdict(spec) and facts.file_bytes == path.stat().st_size:
                return facts, False
        except (ValueError, TypeError):
            pass
    partial = path.with_suffix(path.suffix + ".partial")
    facts = generate(spec, partial, progress)
    os.replace(partial, path)
    facts.path = str(path)
    facts_path.write_text(json.dumps(asdict(facts), indent=2))
    return facts, True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write (or reuse) the benchmark capture and print its counts.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    facts, fresh = ensure_capture(spec_from(args), Path(args.work),
                                  lambda done, total: print(f"  {done >> 20:,} / {total >> 20:,} MiB", file=sys.stderr))
    print(json.dumps(asdict(facts), indent=2))
    print("generated" if fresh else "reused", facts.path, file=sys.stderr)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--work", default="/tmp/kafkawire-bench-capture",
                        help="directory for the capture and its counts, reused across runs")
    parser.add_argument("--size-mb", type=int, default=1024, help="capture size in MiB (default 1024)")
    parser.add_argument("--connections", type=int, default=48, help="client connections (default 48)")
    parser.add_argument("--mss", default="mixed",
                        help="'mixed' (1448 and 65483 on alternate connections, the default) or a byte count")
    parser.add_argument("--flexible", action="store_true",
                        help="flexible versions (Produce v9, Fetch v12, ...) instead of v8/v11 and friends")
    parser.add_argument("--format", dest="file_format", choices=("pcapng", "pcap"), default="pcapng")
    parser.add_argument("--seed", type=int, default=1)


def spec_from(args) -> CaptureSpec:
    if args.mss != "mixed" and not (args.mss.isdigit() and 1 <= int(args.mss) <= LOOPBACK_MSS):
        raise SystemExit(f"--mss must be 'mixed' or a number of bytes in 1..{LOOPBACK_MSS}, not {args.mss!r}")
    if args.size_mb < 1 or args.connections < 2:
        raise SystemExit("--size-mb must be >= 1 and --connections >= 2")
    return CaptureSpec(args.size_mb, args.connections, args.mss, args.flexible, args.file_format, args.seed)


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark fixtures: message bodies built once with kio (as in peers.md section 3.1).

Every fixture is a kio entity encoded once with ``kio.serial.entity_writer``; the resulting bytes are
what every library decodes. Bodies only: no size prefix, no header.

- ``metadata``: MetadataResponse v12, 20 brokers, 1000 topics x 12 partitions (replicas/isr of 3);
  ``metadata_v13``: the same at Kafka 4.3's v13.
- ``fetch``: FetchResponse v12, 10 topics x 10 partitions, each with a real uncompressed v2 RecordBatch
  of exactly 16,384 bytes (CRC32C checked).
- ``produce``: ProduceRequest v9, one partition with a 1 KiB (1,024-byte) v2 RecordBatch;
  ``produce_v13``: the same at Kafka 4.3's v13, the topic named by id.
- ``api_versions``: ApiVersionsRequest v3.

Run ``python bench/fixtures.py`` to print the fixture sizes and check the record batches.
"""
from __future__ import annotations

import datetime
import importlib
import io
import random
import struct
import uuid
from dataclasses import dataclass, field

import crc32c
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_writer
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

SEED = 20240611
BASE_TIME = datetime.datetime(2024, 6, 11, 12, 0, 0, tzinfo=datetime.UTC)


@dataclass
class Fixture:
    key: str           # short name used on the command line and in tables
    title: str         # e.g. "MetadataResponse v12"
    api: str           # the message name (same in kio's module layout and kafkawire/kafka-python classes)
    kio_module: str    # kio.schema.<kio_module>.v<version>.<kind>
    kind: str          # "request" or "response"
    version: int
    data: bytes
    kio_entity: object
    notes: list[str] = field(default_factory=list)


def kio_encode(entity) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


# --------------------------------------------------------------------------- record batches

BATCH_HEADER = 61   # v2 RecordBatch header up to and including the record count
CRC_START = 21      # the CRC covers attributes .. end of batch


def record_batch(size: int, *, base_offset: int, rng: random.Random, records: int) -> bytes:
    """A valid uncompressed v2 RecordBatch of exactly ``size`` bytes, written by kio (CRC32C).

    ``records`` records share the payload; the last record's value length is tuned until the batch
    length hits ``size`` exactly.
    """
    payload = size - BATCH_HEADER - records * 12      # rough per-record overhead
    value_sizes = [payload // records] * records
    value_sizes[-1] += payload - sum(value_sizes)
    values = [rng.randbytes(max(0, n)) for n in value_sizes]
    for _ in range(20):
        recs = tuple(
            Record(
                attributes=i8(0),
                timestamp=TZAwareMicros.parse(BASE_TIME + datetime.timedelta(milliseconds=i)),
                offset=i64(base_offset + i),
                key=f"key-{base_offset + i}".encode(),
                value=values[i],
                headers=(),
            )
            for i in range(records)
        )
        batch = NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
                               records=recs, attributes=i16(0))
        out = io.BytesIO()
        write_new_batch(out, batch)
        raw = out.getvalue()
        delta = size - len(raw)
        if delta == 0:
            check_batch(raw)
            return raw
        # Varint lengths can jump by a byte at 64/8192; spread a stuck delta over another record.
        last = values[-1]
        new_len = len(last) + delta
        if new_len < 0:
            raise ValueError(f"can't build a {size}-byte batch with {records} records")
        values[-1] = rng.randbytes(new_len) if new_len > len(last) else last[:new_len]
    raise RuntimeError(f"could not reach a batch of exactly {size} bytes")


def check_batch(raw: bytes) -> None:
    """Assert ``raw`` is one complete v2 batch: length field, magic and CRC32C."""
    base_offset, batch_length, _epoch, magic, crc = struct.unpack_from(">qiibI", raw, 0)
    assert magic == 2, magic
    assert batch_length + 12 == len(raw), (batch_length, len(raw))
    assert crc == crc32c.crc32c(raw[CRC_START:]), "bad CRC32C"


# --------------------------------------------------------------------------- fixtures

def metadata_response_v12() -> Fixture:
    return metadata_response(12)


def metadata_response_v13() -> Fixture:
    """Kafka 4.3's MetadataResponse (v13 adds a top-level error code), the v12 fixture's shape."""
    return metadata_response(13)


def metadata_response(version: int) -> Fixture:
    m = importlib.import_module(f"kio.schema.metadata.v{version}.response")
    rng = random.Random(SEED)
    brokers = tuple(
        m.MetadataResponseBroker(node_id=BrokerId(b), host=f"broker-{b}.kafka.internal.example.com",
                                 port=i32(9092), rack=f"rack-{b % 3}")
        for b in range(20)
    )
    topics = []
    for t in range(1000):
        partitions = []
        for p in range(12):
            leader = (t + p) % 20
            replicas = tuple(BrokerId((leader + k) % 20) for k in range(3))
            partitions.append(m.MetadataResponsePartition(
                error_code=ErrorCode.none, partition_index=i32(p), leader_id=BrokerId(leader),
                leader_epoch=i32(rng.randrange(0, 50)), replica_nodes=replicas, isr_nodes=replicas,
                offline_replicas=()))
        topics.append(m.MetadataResponseTopic(
            error_code=ErrorCode.none, name=TopicName(f"topic-{t:04d}"),
            topic_id=uuid.UUID(int=rng.getrandbits(128)), is_internal=False,
            partitions=tuple(partitions), topic_authorized_operations=i32(-2147483648)))
    top_error = {"error_code": ErrorCode.none} if version >= 13 else {}
    entity = m.MetadataResponse(throttle_time=datetime.timedelta(0), brokers=brokers,
                                cluster_id="kafkawire-bench-cluster", controller_id=BrokerId(1),
                                topics=tuple(topics), **top_error)
    key = "metadata" if version == 12 else f"metadata_v{version}"
    return Fixture(key, f"MetadataResponse v{version}", "MetadataResponse", "metadata", "response", version,
                   kio_encode(entity), entity)


def fetch_response_v12() -> Fixture:
    from kio.schema.fetch.v12 import response as f
    rng = random.Random(SEED + 1)
    responses = []
    for t in range(10):
        partitions = []
        for p in range(10):
            base = 1_000_000 * t + 10_000 * p
            batch = record_batch(16_384, base_offset=base, rng=rng, records=16)
            partitions.append(f.PartitionData(
                partition_index=i32(p), error_code=ErrorCode.none, high_watermark=i64(base + 16),
                last_stable_offset=i64(base + 16), log_start_offset=i64(0),
                aborted_transactions=None, preferred_read_replica=BrokerId(-1), records=batch))
        responses.append(f.FetchableTopicResponse(topic=TopicName(f"events-{t}"),
                                                  partitions=tuple(partitions)))
    entity = f.FetchResponse(throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
                             session_id=i32(123456), responses=tuple(responses))
    return Fixture("fetch", "FetchResponse v12", "FetchResponse", "fetch", "response", 12,
                   kio_encode(entity), entity,
                   ["100 partitions x 16,384-byte uncompressed v2 batches (CRC32C checked)"])


def produce_request_v9() -> Fixture:
    from kio.schema.produce.v9 import request as p
    rng = random.Random(SEED + 2)
    batch = record_batch(1024, base_offset=0, rng=rng, records=4)
    entity = p.ProduceRequest(transactional_id=None, acks=i16(-1), timeout=datetime.timedelta(seconds=30),
                              topic_data=(p.TopicProduceData(name=TopicName("events"), partition_data=(
                                  p.PartitionProduceData(index=i32(0), records=batch),)),))
    return Fixture("produce", "ProduceRequest v9", "ProduceRequest", "produce", "request", 9,
                   kio_encode(entity), entity, ["one partition, 1,024-byte v2 batch"])


def produce_request_v13() -> Fixture:
    """Kafka 4.3's ProduceRequest (v13 names the topic by id), the v9 fixture's shape."""
    from kio.schema.produce.v13 import request as p
    rng = random.Random(SEED + 2)
    batch = record_batch(1024, base_offset=0, rng=rng, records=4)
    entity = p.ProduceRequest(transactional_id=None, acks=i16(-1), timeout=datetime.timedelta(seconds=30),
                              topic_data=(p.TopicProduceData(topic_id=uuid.UUID(int=rng.getrandbits(128)),
                                                             partition_data=(p.PartitionProduceData(
                                                                 index=i32(0), records=batch),)),))
    return Fixture("produce_v13", "ProduceRequest v13", "ProduceRequest", "produce", "request", 13,
                   kio_encode(entity), entity, ["one partition by topic id, 1,024-byte v2 batch"])


def api_versions_request_v3() -> Fixture:
    from kio.schema.api_versions.v3 import request as a
    entity = a.ApiVersionsRequest(client_software_name="kafkawire", client_software_version="0.1.0")
    return Fixture("api_versions", "ApiVersionsRequest v3", "ApiVersionsRequest", "api_versions",
                   "request", 3, kio_encode(entity), entity)


BUILDERS = {
    "metadata": metadata_response_v12,
    "metadata_v13": metadata_response_v13,
    "fetch": fetch_response_v12,
    "produce": produce_request_v9,
    "produce_v13": produce_request_v13,
    "api_versions": api_versions_request_v3,
}


def build(keys=None) -> list[Fixture]:
    return [BUILDERS[key]() for key in (keys or BUILDERS)]


def small_metadata_v12() -> bytes:
    """A small MetadataResponse v12 (3 brokers, 2 topics x 2 partitions) for cold-start timing."""
    from kio.schema.metadata.v12 import response as m
    brokers = tuple(m.MetadataResponseBroker(node_id=BrokerId(b), host=f"b{b}", port=i32(9092))
                    for b in range(3))
    topics = tuple(
        m.MetadataResponseTopic(error_code=ErrorCode.none, name=TopicName(f"t{t}"),
                                topic_id=uuid.UUID(int=t + 1), partitions=tuple(
                                    m.MetadataResponsePartition(error_code=ErrorCode.none,
                                                                partition_index=i32(p), leader_id=BrokerId(p),
                                                                replica_nodes=(BrokerId(p),),
                                                                isr_nodes=(BrokerId(p),))
                                    for p in range(2)))
        for t in range(2))
    return kio_encode(m.MetadataResponse(throttle_time=datetime.timedelta(0), brokers=brokers,
                                         cluster_id="c", controller_id=BrokerId(0), topics=topics))


if __name__ == "__main__":
    for fx in build():
        print(f"{fx.title:24} {len(fx.data):>10,} bytes  {'; '.join(fx.notes)}")

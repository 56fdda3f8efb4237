"""KIP-74 as a property: random logs, random fetch requests, and every response compared byte for byte
with an independent model of kafka-semantics.md 4.2-4.3.

The model: partitions are read in request order with ``limit = MaxBytes`` (capped by the broker's
fetch.max.bytes); each read starts at the batch containing the fetch offset, ``adjusted =
min(PartitionMaxBytes, limit)``; only the first partition that returns bytes may exceed ``adjusted`` by
its first whole batch; ``adjusted == 0`` (without the exemption) gives nothing; a first batch larger
than ``adjusted`` gives nothing; otherwise ``min(bytes to the log end, adjusted)`` bytes from the first
batch's start, so the last batch may be cut mid-way. ``limit`` drops by what each partition returned.
"""
from __future__ import annotations

import itertools
import struct
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from support.broker_harness import RawClient, own_broker
from kafkawire.records import RecordBatchBuilder
from support.broker_wire import by_partition, create_topic, fetch, produce

MAX_MESSAGE = 4 << 20  # so that 2 MiB batches are accepted
FETCH_MAX_BYTES = 57_671_680  # the broker's default fetch.max.bytes, the cap on MaxBytes
HUGE = 0x7FFFFFFF
_names = itertools.count()


broker = own_broker(auto_create_topics=False, message_max_bytes=MAX_MESSAGE)


@pytest.fixture(scope="module")
def client(broker):
    with RawClient(broker.port) as raw:
        raw.sock.settimeout(60)
        yield raw


# ---- strategies --------------------------------------------------------------------------------------

# value bytes of one batch: mostly small (a batch of ~70 B upwards), a few large, rarely up to 2 MiB
_small = st.integers(0, 400)
_medium = st.integers(400, 20_000)
_large = st.integers(20_000, (2 << 20) - 200)
_payload = st.one_of(_small, _small, _small, _small, _small, _small, _medium, _medium, _large)
_batch = st.tuples(st.integers(1, 4), _payload)  # (records, value bytes in all)
_log = st.lists(_batch, min_size=0, max_size=6)

# byte limits: tiny values (0, a few bytes, around a small batch) as well as large ones
_limit = st.one_of(st.integers(0, 8), st.integers(60, 600), st.integers(600, 50_000),
                   st.integers(50_000, 3 << 20), st.just(HUGE))


def _build(records: int, payload: int) -> bytes:
    builder = RecordBatchBuilder()
    now = time.time_ns() // 1_000_000
    for i in range(records):
        builder.append(b"v" * (payload // records + (i < payload % records)), timestamp=now)
    return builder.build()


@st.composite
def _scenario(draw):
    logs = draw(st.lists(_log, min_size=2, max_size=5))
    if sum(p for log in logs for _, p in log) > (6 << 20):  # keep each example's log small enough
        logs = [[(n, min(p, 1000)) for n, p in log] for log in logs]
    ends = [sum(n for n, _ in log) for log in logs]
    requests = []
    for _ in range(draw(st.integers(1, 4))):
        order = draw(st.permutations(range(len(logs))))
        order = order[:draw(st.integers(1, len(order)))]
        parts = [(p, draw(st.integers(0, ends[p])), draw(_limit)) for p in order]
        requests.append((parts, draw(_limit)))
    return logs, requests


# ---- the model -----------------------------------------------------------------------------------------

def _batches(data: bytes):
    """[(base offset, next offset, position, size)] of a stream of whole magic-2 batches."""
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((base, base + last_delta + 1, pos, 12 + length))
        pos += 12 + length
    assert pos == len(data)
    return out


def model(stored: dict[int, bytes], parts, max_bytes: int) -> dict[int, bytes]:
    limit = min(max_bytes, FETCH_MAX_BYTES)
    min_one_message = True
    result = {}
    for p, offset, partition_max in parts:
        data = stored[p]
        batches = _batches(data)
        containing = [b for b in batches if b[0] <= offset < b[1]]
        records = b""
        if containing:
            _, _, start, first_size = containing[0]
            adjusted = min(partition_max, limit)
            size = max(adjusted, first_size) if min_one_message else adjusted
            if size > 0 and size >= first_size:
                records = data[start:start + min(len(data) - start, size)]
        result[p] = records
        if records:
            min_one_message = False
            limit = max(0, limit - len(records))
    return result


# ---- the property -------------------------------------------------------------------------------------

@settings(max_examples=50, deadline=None, database=InMemoryExampleDatabase(),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(scenario=_scenario())
def test_fetch_responses_follow_kip74(client, scenario):
    logs, requests = scenario
    topic = f"kip74-{next(_names)}"
    create_topic(client, topic, len(logs))
    produced: dict[int, list[bytes]] = {}
    for p, log in enumerate(logs):
        produced[p] = []
        for records, payload in log:
            batch = _build(records, payload)
            response = produce(client, topic, p, batch)
            assert response.error_code == 0, (p, len(batch), response)
            produced[p].append(batch)

    # learn the stored bytes (offsets rewritten by the broker), one partition per fetch, no limits
    stored = {}
    for p in range(len(logs)):
        (part,) = by_partition(fetch(client, [(topic, p, 0, HUGE)], max_bytes=HUGE)).values()
        assert part.error_code == 0
        data = bytes(part.records)
        # the broker stores what was produced, with only the base offset (and leader epoch) rewritten
        batches = _batches(data)
        assert [size for *_, size in batches] == [len(b) for b in produced[p]]
        expected_next = 0
        for (base, nxt, pos, size), original in zip(batches, produced[p]):
            assert base == expected_next
            expected_next = nxt
            assert data[pos + 16:pos + size] == original[16:]
        assert part.high_watermark == expected_next == sum(n for n, _ in logs[p])
        stored[p] = data
    largest = max((len(b) for bs in produced.values() for b in bs), default=0)
    event(f"largest batch: {'>=1 MiB' if largest >= 1 << 20 else '>=20 KB' if largest >= 20_000 else 'small'}")

    for parts, max_bytes in requests:
        response = fetch(client, [(topic, p, offset, pmax) for p, offset, pmax in parts], max_bytes=max_bytes)
        got = by_partition(response)
        assert list(got) == [(topic, p) for p, _, _ in parts], "partitions answered in request order"
        expected = model(stored, parts, max_bytes)
        for p, offset, pmax in parts:
            part = got[topic, p]
            assert part.error_code == 0
            assert part.high_watermark == sum(n for n, _ in logs[p])
            actual = bytes(part.records)
            assert len(actual) == len(expected[p]) and actual == expected[p], (
                f"partition {p} at offset {offset}, PartitionMaxBytes {pmax}, MaxBytes {max_bytes}, "
                f"request {parts}: got {len(actual)} bytes, model {len(expected[p])}")
        # KIP-74's bound: total <= max(MaxBytes, the first returned partition's first batch)
        total = sum(len(got[topic, p].records) for p, _, _ in parts)
        first = next((p for p, _, _ in parts if len(got[topic, p].records)), None)
        first_batch = _batches_prefix_size(bytes(got[topic, first].records)) if first is not None else 0
        if first is not None:
            first_max = next(pmax for p, _, pmax in parts if p == first)
            exempted = len(got[topic, first].records) > min(first_max, max_bytes, FETCH_MAX_BYTES)
            event("exemption used" if exempted else "no exemption")
            cut = [p for p, _, _ in parts if len(got[topic, p].records) and _ends_mid_batch(bytes(got[topic, p].records))]
            event("a partition cut mid-batch" if cut else "no mid-batch cut")
        assert total <= max(min(max_bytes, FETCH_MAX_BYTES), first_batch)


def _batches_prefix_size(data: bytes) -> int:
    """The size of the first batch of ``data`` (which may be longer or cut after it)."""
    (length,) = struct.unpack_from(">i", data, 8)
    return 12 + length


def _ends_mid_batch(data: bytes) -> bool:
    pos = 0
    while pos + 12 <= len(data):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return pos != len(data)

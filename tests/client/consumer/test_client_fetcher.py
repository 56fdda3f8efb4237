"""The consumer's sans-IO fetcher (kafkawire.client.core.consumer.fetcher, completed_fetch): KIP-74 rotation, KIP-41
draining and prefetch, KIP-1178 remote bytes, errors, and what it charges to the KIP-81 memory pool (the
pool alone is in test_client_consumer_memory, fetch sessions in test_client_fetch_sessions).

Responses are FetchResponse messages carrying real record batches, encoded and decoded at the
request's version; the larger scenarios run against FakeBroker, a small model of the broker's KIP-74
read loop (kafka-semantics.md 4.2), with a driver that charges every response to the memory pool
before "reading" it, as the asyncio layer does.
"""
from __future__ import annotations

import random
import uuid
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from kafkawire.client.core.consumer.config import ConsumerConfig
from kafkawire.client.core.consumer.memory import MemoryPool
from kafkawire.client.core.consumer.fetch_session import ZERO_UUID
from kafkawire.client.core.consumer.fetcher import Fetcher, Leader
from kafkawire.client.core.topic_partition import TopicPartition
from kafkawire.client.errors import (
    CorruptRecordException, NoOffsetForPartitionException, OffsetOutOfRangeException, PartitionFetchError,
)
from kafkawire.error_codes import ErrorCode
from kafkawire.messages import FetchRequest, FetchResponse
from kafkawire.records import (
    Codec, LegacyMessageSetBuilder, RecordBatchBuilder, TimestampType, transaction_marker_batch,
)

from support.fake_clock import FakeClock

NODE = 1
T = "events"


def tp(partition: int, topic: str = T) -> TopicPartition:
    return TopicPartition(topic, partition)


def batch(base_offset: int, count: int, value_size: int = 10, *, key: bytes | None = None, headers=(),
          compression=Codec.NONE, leader_epoch: int = -1, timestamp: int = 1_000, **options) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset, compression=compression,
                                 partition_leader_epoch=leader_epoch, **options)
    for i in range(count):
        builder.append(bytes([65 + (base_offset + i) % 26]) * value_size, key=key, headers=headers,
                       timestamp=timestamp + i)
    return builder.build()


def make_fetcher(partitions=(), *, version: int = 12, pool: MemoryPool | None = None, positions=0, **config):
    fetcher = Fetcher(ConsumerConfig(**config), pool)
    fetcher.assign(partitions)
    for p in partitions:
        fetcher.seek(p, positions)
    fetcher.update_metadata({p: Leader(NODE, 3) for p in partitions})
    fetcher.set_fetch_version(NODE, version)
    return fetcher


def fetch_response(version: int, parts: dict, *, session_id: int = 0, error_code: int = 0, throttle_time_ms: int = 0,
                   topic_ids: dict | None = None) -> tuple[FetchResponse, int]:
    """A FetchResponse for ``parts`` (partition -> records bytes, or an error code), encoded at
    ``version`` and decoded again; returns it with its size on the wire."""
    topics: list[FetchResponse.FetchableTopicResponse] = []
    for p, value in parts.items():
        if not topics or topics[-1].topic != p.topic:
            # the name is dropped when encoded at v13+ (ignorable), where the topic id stands for it
            topics.append(FetchResponse.FetchableTopicResponse(
                topic=p.topic, topic_id=(topic_ids or {}).get(p.topic, ZERO_UUID), partitions=[]))
        code, records = (value, b"") if isinstance(value, int) else (0, value)
        topics[-1].partitions.append(FetchResponse.PartitionData(
            partition_index=p.partition, error_code=code, high_watermark=1000, last_stable_offset=1000,
            log_start_offset=0, records=records))
    message = FetchResponse(throttle_time_ms=throttle_time_ms, error_code=error_code, session_id=session_id,
                            responses=topics)
    body = message.encode(version)
    return FetchResponse.decode(body, version, exact=True), len(body)


def answer(fetcher: Fetcher, request, version: int, parts: dict, *, node: int = NODE, now: float = 0, **options):
    response, size = fetch_response(version, parts, **options)
    return fetcher.handle_fetch_response(node, request, response, version, size, now)


def request_order(request: FetchRequest) -> list[TopicPartition]:
    return [TopicPartition(t.topic, p.partition) for t in request.topics for p in t.partitions]


def offsets(records) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in records]


# ==== requests ========================================================================================

@pytest.mark.parametrize("version", [4, 7, 12, 13, 17, 18, 19])
def test_request_fields_by_version(version):
    ids = {T: uuid.uuid4()}
    fetcher = make_fetcher([tp(0), tp(1)], version=version, fetch_max_bytes=123_456,
                           max_partition_fetch_bytes=7_000, remote_max_partition_fetch_bytes=4_000_000,
                           fetch_min_bytes=10, fetch_max_wait_ms=250, buffer_memory=1 << 20)
    fetcher.update_metadata({}, ids)
    (request, sent_version), = fetcher.prepare_fetch_requests(0).values()
    assert sent_version == version
    decoded = FetchRequest.decode(request.encode(version), version, exact=True)
    assert (decoded.max_wait_ms, decoded.min_bytes, decoded.max_bytes) == (250, 10, 123_456)
    parts = [p for t in decoded.topics for p in t.partitions]
    assert [p.partition_max_bytes for p in parts] == [7_000, 7_000]
    assert [p.fetch_offset for p in parts] == [0, 0]
    # RemotePartitionMaxBytes exists from v19 only (KIP-1178; v18 is upstream's, with KIP-1166's HighWatermark)
    assert [p.remote_partition_max_bytes for p in parts] == ([4_000_000] * 2 if version >= 19 else [0, 0])
    if version >= 13:
        assert decoded.topics[0].topic_id == ids[T]
    else:
        assert decoded.topics[0].topic == T
    if version >= 9:
        assert [p.current_leader_epoch for p in parts] == [3, 3]


@pytest.mark.parametrize("version", [12, 18])
def test_max_bytes_leaves_room_for_the_framing_when_buffer_memory_is_tight(version):
    # KIP-81: the pool is charged for whole responses, so with buffer.memory = fetch.max.bytes and many
    # partitions MaxBytes must leave room for the bytes around the records.
    partitions = [tp(p, topic) for topic in ("orders", "a-much-longer-topic-name") for p in range(500)]
    fetcher = make_fetcher(partitions, version=version, fetch_max_bytes=1 << 20, buffer_memory=1 << 20,
                           max_partition_fetch_bytes=1 << 20)
    ids = {"orders": uuid.uuid4(), "a-much-longer-topic-name": uuid.uuid4()}
    fetcher.update_metadata({}, ids)
    (request, sent_version), = fetcher.prepare_fetch_requests(0).values()
    assert request.max_bytes < 1 << 20
    # The worst case a compliant broker can send: every partition in the response, records filling MaxBytes.
    share = request.max_bytes // len(partitions)
    parts = {p: b"x" * share for p in partitions}
    parts[partitions[0]] += b"x" * (request.max_bytes - share * len(partitions))
    _, size = fetch_response(sent_version, parts, topic_ids=ids)
    assert size + 8 <= 1 << 20  # the response header too (correlation id, tagged fields)
    roomy = make_fetcher(partitions[:2], version=version, fetch_max_bytes=1 << 20, buffer_memory=4 << 20)
    (request, _), = roomy.prepare_fetch_requests(0).values()
    assert request.max_bytes == 1 << 20  # with room to spare, fetch.max.bytes as set


def test_remote_bytes_fall_back_to_partition_bytes_and_versions_are_negotiated():
    fetcher = make_fetcher([tp(0)], version=19, max_partition_fetch_bytes=5_000)
    fetcher.update_metadata({}, {T: uuid.uuid4()})
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    assert version == 19 and request.topics[0].partitions[0].remote_partition_max_bytes == 5_000
    # a Kafka 4.3 broker (Fetch up to v18): upstream's v18, with no RemotePartitionMaxBytes on the wire
    fetcher = make_fetcher([tp(0)], version=18, remote_max_partition_fetch_bytes=4_000_000)
    fetcher.update_metadata({}, {T: uuid.uuid4()})
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    assert version == 18
    assert FetchRequest.decode(request.encode(18), 18, exact=True).topics[0].partitions[0].remote_partition_max_bytes == 0
    fetcher = make_fetcher([tp(0)], version=19)  # no topic id known: names, so at most v12
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    assert version == 12
    fetcher.set_fetch_version(2, 40)  # a newer broker: capped at what this client speaks
    with pytest.raises(ValueError, match="needs v4"):
        fetcher.set_fetch_version(3, 3)


def test_one_fetch_in_flight_per_node_and_buffered_partitions_left_out():
    fetcher = make_fetcher([tp(0), tp(1), tp(2)])
    fetcher.update_metadata({tp(2): Leader(2)})
    fetcher.set_fetch_version(2, 12)
    requests = fetcher.prepare_fetch_requests(0)
    assert sorted(requests) == [1, 2]
    assert fetcher.prepare_fetch_requests(1) == {}  # both nodes have a fetch in flight
    request, version = requests[NODE]
    answer(fetcher, request, version, {tp(0): batch(0, 3), tp(1): b""})
    again = fetcher.prepare_fetch_requests(2)
    assert list(again) == [NODE]  # node 2 is still busy
    assert request_order(again[NODE][0]) == [tp(1)]  # tp0 has buffered records
    assert offsets(fetcher.poll()) == [(0, 0), (0, 1), (0, 2)]
    answer(fetcher, *again[NODE], {tp(1): b""})
    (request, _), = fetcher.prepare_fetch_requests(3).values()
    assert request_order(request) == [tp(1), tp(0)] and request.topics[0].partitions[1].fetch_offset == 3


def test_partitions_cut_off_by_max_bytes_lead_the_next_request():
    parts = [tp(i) for i in range(4)]
    fetcher = make_fetcher(parts)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    assert request_order(request) == parts
    # MaxBytes ran out after tp0 and tp1: tp2 and tp3 came back empty
    answer(fetcher, request, version, {tp(0): batch(0, 2), tp(1): batch(0, 2), tp(2): b"", tp(3): b""})
    (request, version), = fetcher.prepare_fetch_requests(1).values()
    assert request_order(request) == [tp(2), tp(3)]
    answer(fetcher, request, version, {tp(2): batch(0, 1), tp(3): b""})  # tp3 cut off again
    fetcher.poll()  # drains tp0, tp1 and tp2
    (request, version), = fetcher.prepare_fetch_requests(2).values()
    assert request_order(request) == [tp(3), tp(0), tp(1), tp(2)]  # the starved partition leads


def test_rotation_against_kip74_broker_reaches_every_partition():
    """Sixteen partitions with plenty of data, MaxBytes room for about two of them: every request is
    led by a partition the previous response cut off, and all are served within a few rounds."""
    parts = [tp(i) for i in range(16)]
    broker = FakeBroker({p: FakeLog(records_per_batch=4, value_size=50) for p in parts})
    one_batch = len(broker.logs[parts[0]].batch(0))
    fetcher = make_fetcher(parts, fetch_max_bytes=2 * one_batch + 10, max_partition_fetch_bytes=one_batch,
                           buffer_memory=1 << 20)
    served_round = {}
    cut_off: list[TopicPartition] = []
    for round_ in range(20):
        (request, version), = fetcher.prepare_fetch_requests(round_).values()
        order = request_order(request)
        if cut_off:
            assert order[0] == cut_off[0]
        response, size = broker.respond(request, version)
        outcome = fetcher.handle_fetch_response(NODE, request, response, version, size, round_)
        cut_off = [p for p in order if p not in outcome.buffered]
        for p in outcome.buffered:
            served_round.setdefault(p, round_)
        fetcher.poll()
    assert sorted(served_round) == parts
    assert max(served_round.values()) <= 8  # two partitions a round: 16 in 8 rounds


# ==== receiving and draining ============================================================================

def test_records_carry_every_field():
    fetcher = make_fetcher([tp(0)])
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    records = batch(0, 2, key=b"k", headers=[("h", b"v"), ("n", None)], compression=Codec.ZSTD, leader_epoch=7)
    log_append = batch(2, 1, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=99_000)
    nulls = RecordBatchBuilder(base_offset=3)
    nulls.append(None, key=None, timestamp=5)
    answer(fetcher, request, version, {tp(0): records + log_append + nulls.build()})
    first, second, third, fourth = fetcher.poll()
    assert (first.topic, first.partition, first.offset, first.timestamp, first.key, first.value) == (
        T, 0, 0, 1_000, b"k", b"A" * 10)
    assert first.headers == (("h", b"v"), ("n", None)) and first.leader_epoch == 7
    assert (first.serialized_key_size, first.serialized_value_size) == (1, 10)
    assert first.timestamp_type == TimestampType.CREATE_TIME and second.offset == 1
    assert (third.timestamp_type, third.timestamp, third.leader_epoch) == (TimestampType.LOG_APPEND_TIME, 99_000, None)
    assert (fourth.key, fourth.value, fourth.serialized_key_size, fourth.serialized_value_size) == (None, None, -1, -1)
    assert fetcher.position(tp(0)) == 4


def test_legacy_message_sets_and_unchecked_crcs():
    fetcher = make_fetcher([tp(0), tp(1)], check_crcs=False)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    legacy = LegacyMessageSetBuilder(1, base_offset=0, compression=Codec.GZIP)
    for i in range(3):
        legacy.append(b"v%d" % i, key=b"k", timestamp=50 + i)
    tampered = bytearray(batch(0, 2))
    tampered[-2] ^= 0x01  # the last value's last byte: the CRC no longer matches, but check.crcs is off
    answer(fetcher, request, version, {tp(0): legacy.build(), tp(1): bytes(tampered)})
    assert fetcher.retained_records() == 1 + 2  # a compressed wrapper counts as one until decoded
    records = fetcher.poll()
    assert [(r.partition, r.offset, r.value, r.timestamp, r.leader_epoch) for r in records[:3]] == [
        (0, 0, b"v0", 50, None), (0, 1, b"v1", 51, None), (0, 2, b"v2", 52, None)]
    assert [r.value for r in records[3:]] == [b"A" * 10, b"B" * 9 + b"C"]
    assert fetcher.retained_records() == 0 and fetcher.position(tp(0)) == 3


def test_offsets_below_the_position_are_skipped():
    fetcher = make_fetcher([tp(0)], positions=7)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    # the broker returns whole batches: the one holding offset 7 starts at 5, and one before it
    answer(fetcher, request, version, {tp(0): batch(0, 5) + batch(5, 5) + batch(10, 2)})
    assert fetcher.retained_records() == 5  # 7..11, counted from the batch headers
    assert [r.offset for r in fetcher.poll()] == [7, 8, 9, 10, 11]
    assert fetcher.position(tp(0)) == 12


def test_control_records_are_skipped_and_move_the_position():
    fetcher = make_fetcher([tp(0), tp(1)])
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    marker = transaction_marker_batch(True, producer_id=4, producer_epoch=0, coordinator_epoch=1, base_offset=2)
    txn = batch(0, 2, producer_id=4, producer_epoch=0, base_sequence=0, transactional=True)
    answer(fetcher, request, version, {tp(0): txn + marker + batch(3, 1),
                                       tp(1): transaction_marker_batch(False, producer_id=5, producer_epoch=0,
                                                                       coordinator_epoch=1, base_offset=0)})
    assert fetcher.retained_records() == 3
    assert offsets(fetcher.poll()) == [(0, 0), (0, 1), (0, 3)]
    assert fetcher.position(tp(0)) == 4
    assert fetcher.position(tp(1)) == 1  # nothing handed out, but the position passed the marker
    assert fetcher.buffered_partitions() == []


def test_poll_never_returns_more_than_max_poll_records():
    fetcher = make_fetcher([tp(0), tp(1)], max_poll_records=7)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    answer(fetcher, request, version, {tp(0): batch(0, 10), tp(1): batch(0, 10)})
    sizes = []
    while records := fetcher.poll():
        sizes.append(len(records))
    assert sizes == [7, 7, 6]
    assert [len(fetcher.poll(max_records=3))] == [0]
    with pytest.raises(ValueError, match="max_records"):
        fetcher.poll(max_records=0)


def test_poll_resumes_with_the_partition_after_the_last_one_served():
    fetcher = make_fetcher([tp(0), tp(1), tp(2)], max_poll_records=4)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    answer(fetcher, request, version, {tp(0): batch(0, 10), tp(1): batch(0, 2), tp(2): batch(0, 2)})
    assert offsets(fetcher.poll()) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert offsets(fetcher.poll()) == [(1, 0), (1, 1), (2, 0), (2, 1)]  # not tp0 again first
    assert offsets(fetcher.poll()) == [(0, 4), (0, 5), (0, 6), (0, 7)]


def test_fairness_one_hot_partition_and_fifty_cold_ones():
    """KIP-41: a hot partition with a deep backlog never makes the cold ones wait more than one poll."""
    hot = tp(0)
    colds = [tp(i) for i in range(1, 51)]
    logs = {hot: FakeLog(records_per_batch=100, value_size=20)}
    logs.update({p: FakeLog(records_per_batch=1, value_size=20, end=0) for p in colds})
    broker = FakeBroker(logs)
    # a hot fetch holds about 1.5 polls' worth, so prefetching (KIP-41) keeps the cold ones coming
    fetcher = make_fetcher([hot, *colds], max_partition_fetch_bytes=16 << 10)
    driver = Driver(fetcher, {NODE: broker})
    rng = random.Random(5)
    waiting: dict[TopicPartition, int] = {}
    worst = defaultdict(int)
    served_total = defaultdict(int)
    for step in range(300):
        for p in rng.sample(colds, 5):
            logs[p].append(rng.randint(1, 3))
        driver.step()
        for p in fetcher.buffered_partitions():
            waiting.setdefault(p, 0)
        records = fetcher.poll()
        assert len(records) <= 500
        served = {r.topic_partition for r in records}
        for p in list(waiting):
            served_total[p] += p in served
            if p in served:
                del waiting[p]
            else:
                waiting[p] += 1
                worst[p] = max(worst[p], waiting[p])
    # measured: the hot partition is served in 199 of 300 polls (it waits for its next fetch in the
    # others), the cold ones 1413 times, and no partition with records waits more than one poll
    assert served_total[hot] >= 150
    assert sum(served_total[p] for p in colds) >= 1000 and all(served_total[p] for p in colds)
    assert max(worst.values(), default=0) <= 1


def test_prefetch_only_while_fewer_than_max_poll_records_are_retained():
    fetcher = make_fetcher([tp(0), tp(1)], max_poll_records=10)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    answer(fetcher, request, version, {tp(0): batch(0, 25), tp(1): b""})
    assert fetcher.retained_records() == 25 and not fetcher.should_prefetch()
    assert fetcher.prepare_fetch_requests(1) == {}  # tp1 waits although it has nothing buffered
    fetcher.poll()
    assert fetcher.retained_records() == 15 and fetcher.prepare_fetch_requests(2) == {}
    fetcher.poll()
    assert fetcher.retained_records() == 5 and fetcher.should_prefetch()
    (request, _), = fetcher.prepare_fetch_requests(3).values()
    assert request_order(request) == [tp(1)]
    # records of paused partitions do not hold prefetching back
    answer(fetcher, request, version, {tp(1): batch(0, 20)})
    assert not fetcher.should_prefetch()
    fetcher.pause([tp(1)])
    assert fetcher.retained_records() == 5 and fetcher.should_prefetch()


def test_paused_partitions_keep_their_records_and_are_not_fetched():
    fetcher = make_fetcher([tp(0), tp(1)])
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    answer(fetcher, request, version, {tp(0): batch(0, 2), tp(1): batch(0, 2)})
    fetcher.pause([tp(0)])
    assert offsets(fetcher.poll()) == [(1, 0), (1, 1)]
    (request, _), = fetcher.prepare_fetch_requests(1).values()
    assert request_order(request) == [tp(1)]
    fetcher.resume([tp(0)])
    assert offsets(fetcher.poll()) == [(0, 0), (0, 1)]


def test_seek_drops_buffered_records_and_stale_responses():
    fetcher = make_fetcher([tp(0)])
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    fetcher.seek(tp(0), 50)  # while the fetch from 0 is in flight
    outcome = answer(fetcher, request, version, {tp(0): batch(0, 3)})
    assert outcome.discarded == [tp(0)] and fetcher.poll() == [] and fetcher.pool.used == 0
    (request, version), = fetcher.prepare_fetch_requests(1).values()
    answer(fetcher, request, version, {tp(0): batch(50, 3)})
    fetcher.seek(tp(0), 10)
    assert fetcher.buffered_partitions() == [] and fetcher.pool.used == 0
    with pytest.raises(ValueError, match="not assigned"):
        fetcher.seek(tp(9), 0)


# ==== errors ==========================================================================================

def test_corrupt_partition_fails_alone_and_the_others_keep_going():
    fetcher = make_fetcher([tp(0), tp(1), tp(2)])
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    bad = bytearray(batch(3, 3))
    bad[-1] ^= 0xFF  # the last record's bytes no longer match the CRC
    answer(fetcher, request, version, {tp(0): batch(0, 2), tp(1): batch(0, 3) + bytes(bad) + batch(6, 2),
                                       tp(2): batch(0, 2)})
    records = fetcher.poll()
    assert offsets(records) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1)]  # up to the bad batch
    with pytest.raises(CorruptRecordException, match=r"events-1 at offset 3: .*CRC mismatch") as caught:
        fetcher.poll()
    assert (caught.value.topic_partition, caught.value.offset, caught.value.next_offset) == (tp(1), 3, 6)
    assert fetcher.position(tp(1)) == 3
    (request, version), = fetcher.prepare_fetch_requests(1).values()
    assert request_order(request) == [tp(0), tp(2)]  # the failed partition is stopped ...
    answer(fetcher, request, version, {tp(0): batch(2, 1), tp(2): batch(2, 1)})
    assert offsets(fetcher.poll()) == [(0, 2), (2, 2)]  # ... the others go on
    fetcher.seek(tp(1), caught.value.next_offset)  # until the application skips the bad batch
    (request, _), = fetcher.prepare_fetch_requests(2).values()
    assert tp(1) in request_order(request)
    assert fetcher.pool.used == 0


def test_truncated_and_malformed_records_fail_their_partition():
    fetcher = make_fetcher([tp(0), tp(1), tp(2)])
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    whole = batch(0, 3)
    bad_size = bytearray(batch(0, 1))
    bad_size[8:12] = (5).to_bytes(4, "big")  # an entry size below the smallest message
    answer(fetcher, request, version, {tp(0): whole[:-4], tp(1): bytes(bad_size), tp(2): batch(0, 1)})
    assert offsets(fetcher.poll()) == [(2, 0)]
    errors = []
    for _ in range(2):
        with pytest.raises(CorruptRecordException) as caught:
            fetcher.poll()
        errors.append(caught.value)
    assert {e.topic_partition for e in errors} == {tp(0), tp(1)}
    assert "no complete batch" in str(next(e for e in errors if e.topic_partition == tp(0)))
    assert "smaller than the smallest message" in str(next(e for e in errors if e.topic_partition == tp(1)))
    assert fetcher.poll() == []


def test_offset_out_of_range_resets_per_auto_offset_reset():
    fetcher = make_fetcher([tp(0), tp(1)], auto_offset_reset="earliest", positions=500)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    outcome = answer(fetcher, request, version, {tp(0): ErrorCode.OFFSET_OUT_OF_RANGE, tp(1): b""})
    assert outcome.errors == {tp(0): ErrorCode.OFFSET_OUT_OF_RANGE}
    assert fetcher.pending_offset_resets() == {tp(0): -2}  # ListOffsets with EARLIEST_TIMESTAMP
    assert fetcher.position(tp(0)) is None
    (request, version), = fetcher.prepare_fetch_requests(1).values()
    assert request_order(request) == [tp(1)]
    answer(fetcher, request, version, {tp(1): b""})
    assert fetcher.complete_offset_reset(tp(0), 120)
    assert not fetcher.complete_offset_reset(tp(0), 130)  # nothing pending any more
    (request, _), = fetcher.prepare_fetch_requests(2).values()
    assert {p.partition: p.fetch_offset for t in request.topics for p in t.partitions} == {1: 500, 0: 120}

    strict = make_fetcher([tp(0)], auto_offset_reset="none", positions=500)
    (request, version), = strict.prepare_fetch_requests(0).values()
    answer(strict, request, version, {tp(0): ErrorCode.OFFSET_OUT_OF_RANGE})
    with pytest.raises(OffsetOutOfRangeException, match="offset 500 is out of range"):
        strict.poll()
    strict.assign([tp(0), tp(5)])
    with pytest.raises(NoOffsetForPartitionException):
        strict.request_offset_reset(tp(5))
        strict.poll()
    latest = make_fetcher([tp(0)])
    latest.request_offset_reset(tp(0))
    assert latest.pending_offset_resets() == {tp(0): -1}


def test_leader_errors_ask_for_metadata_and_other_errors_reach_poll():
    fetcher = make_fetcher([tp(0), tp(1), tp(2)], retry_backoff_ms=100)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    answer(fetcher, request, version, {tp(0): ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                       tp(1): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       tp(2): ErrorCode.UNKNOWN_LEADER_EPOCH})
    assert fetcher.metadata_refresh_needed
    with pytest.raises(PartitionFetchError, match="TOPIC_AUTHORIZATION_FAILED") as caught:
        fetcher.poll()
    assert caught.value.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert fetcher.prepare_fetch_requests(50) == {}  # tp0 has no leader; tp1, tp2 back off 100 ms
    (request, _), = fetcher.prepare_fetch_requests(100).values()
    assert request_order(request) == [tp(1), tp(2)]
    fetcher.handle_fetch_failure(NODE, 100)
    fetcher.update_metadata({tp(0): Leader(NODE, 4)})
    assert not fetcher.metadata_refresh_needed
    (request, _), = fetcher.prepare_fetch_requests(200).values()
    assert request_order(request)[0] == tp(0) and request.topics[0].partitions[0].current_leader_epoch == 4


def test_throttle_and_timeouts_hold_a_node_back():
    fetcher = make_fetcher([tp(0)], request_timeout_ms=1000, retry_backoff_ms=50)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    answer(fetcher, request, version, {tp(0): b""}, throttle_time_ms=300, now=10)
    assert fetcher.prepare_fetch_requests(309) == {}
    (request, _), = fetcher.prepare_fetch_requests(310).values()
    assert fetcher.expired_fetches(1309) == [] and fetcher.expired_fetches(1310) == [NODE]
    fetcher.handle_fetch_failure(NODE, 1310)
    assert fetcher.prepare_fetch_requests(1359) == {}
    assert fetcher.prepare_fetch_requests(1360) != {}
    with pytest.raises(ValueError, match="no fetch to node 1"):
        answer(fetcher, request, version, {tp(0): b""})  # the old request: no longer in flight


def test_fetcher_uses_incremental_sessions_and_resets_on_session_errors():
    parts = [tp(0), tp(1), tp(2)]
    fetcher = make_fetcher(parts)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    assert (request.session_id, request.session_epoch) == (0, 0)
    answer(fetcher, request, version, {tp(0): batch(0, 2), tp(1): b"", tp(2): b""}, session_id=42)
    (request, version), = fetcher.prepare_fetch_requests(1).values()
    assert (request.session_id, request.session_epoch) == (42, 1)
    assert request.topics == [] or request_order(request) == []  # tp1, tp2 unchanged: not re-sent
    assert [(t.topic, list(t.partitions)) for t in request.forgotten_topics_data] == [(T, [0])]  # buffered
    # an incremental response names only partitions with news
    answer(fetcher, request, version, {tp(2): batch(0, 1)}, session_id=42)
    fetcher.poll()
    (request, version), = fetcher.prepare_fetch_requests(2).values()
    assert request.session_epoch == 2 and request_order(request) == [tp(0), tp(2)]  # re-added, moved on
    assert [p.fetch_offset for t in request.topics for p in t.partitions] == [2, 1]
    outcome = answer(fetcher, request, version, {}, session_id=0, error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    assert outcome.ignored and outcome.session_error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    (request, version), = fetcher.prepare_fetch_requests(3).values()
    assert (request.session_id, request.session_epoch) == (42, 0)  # full, closing session 42
    assert request_order(request) == [tp(1), tp(0), tp(2)]
    answer(fetcher, request, version, {p: b"" for p in request_order(request)}, session_id=43)
    (request, version), = fetcher.prepare_fetch_requests(4).values()
    answer(fetcher, request, version, {}, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    (request, version), = fetcher.prepare_fetch_requests(5).values()
    assert (request.session_id, request.session_epoch) == (0, 0)


def test_responses_by_topic_id_on_v13_and_later():
    ids = {T: uuid.uuid4(), "other": uuid.uuid4()}
    parts = [tp(0), tp(0, "other")]
    fetcher = make_fetcher(parts, version=17)
    fetcher.update_metadata({}, ids)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    assert version == 17 and [t.topic_id for t in request.topics] == [ids[T], ids["other"]]
    answer(fetcher, request, version, {tp(0): batch(0, 1), tp(0, "other"): batch(0, 2)}, topic_ids=ids)
    assert [(r.topic, r.offset) for r in fetcher.poll()] == [(T, 0), ("other", 0), ("other", 1)]


def test_response_size_must_cover_the_records():
    fetcher = make_fetcher([tp(0)])
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    response, size = fetch_response(version, {tp(0): batch(0, 3)})
    with pytest.raises(ValueError, match="cannot carry"):
        fetcher.handle_fetch_response(NODE, request, response, version, 10, 0)
    with pytest.raises(ValueError, match="sent as v12"):
        fetcher.handle_fetch_response(NODE, request, response, 11, size, 0)


# ==== memory (KIP-81) ================================================================================

def test_memory_is_charged_per_response_and_released_as_partitions_drain():
    fetcher = make_fetcher([tp(0), tp(1)], max_poll_records=5, buffer_memory=64 << 20)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    first, second = batch(0, 6), batch(0, 2)
    response, size = fetch_response(version, {tp(0): first, tp(1): second})
    lease = fetcher.pool.try_allocate(size)
    fetcher.handle_fetch_response(NODE, request, response, version, size, 0, lease=lease)
    assert fetcher.pool.used == len(first) + len(second)  # the framing went back after parsing
    assert fetcher.pool.peak_used == size
    fetcher.poll()  # tp0: 5 of 6
    assert fetcher.pool.used == len(first) + len(second)
    fetcher.poll()  # tp1 drained, then tp0's last record
    assert fetcher.pool.used == 0


def test_memory_bound_with_1000_partitions_and_a_slow_consumer():
    """Four brokers, 250 partitions each, data everywhere, a consumer taking 20 records a poll: the
    pool refuses responses (the driver leaves them unread), yet the bytes held never exceed
    buffer.memory plus one maximum message, and every partition is consumed in order."""
    nodes = (1, 2, 3, 4)
    parts = [tp(i) for i in range(1000)]
    logs = {p: FakeLog(records_per_batch=4, value_size=60) for p in parts}
    big = tp(500)
    logs[big] = FakeLog(records_per_batch=1, value_size=300_000)  # one message larger than the pool
    max_message = len(logs[big].batch(0))
    buffer_memory = 256 << 10
    clock = FakeClock()
    pool = MemoryPool(buffer_memory, clock=clock)
    fetcher = Fetcher(ConsumerConfig(fetch_max_bytes=64 << 10, max_partition_fetch_bytes=2048,
                                     buffer_memory=buffer_memory, max_poll_records=1_000_000), pool)
    fetcher.assign(parts)
    for p in parts:
        fetcher.seek(p, 0)
    fetcher.update_metadata({p: Leader(nodes[p.partition % 4]) for p in parts})
    for node in nodes:
        fetcher.set_fetch_version(node, 12)
    brokers = {node: FakeBroker({p: logs[p] for p in parts if p.partition % 4 == node - 1}) for node in nodes}
    driver = Driver(fetcher, brokers, clock=clock)
    next_offset = defaultdict(int)
    consumed = 0
    peak = 0
    for step in range(1500):
        clock.now = step
        driver.step()
        assert fetcher.buffered_bytes() <= pool.used
        peak = max(peak, pool.peak_used)
        assert pool.used <= buffer_memory + max_message
        for record in fetcher.poll(max_records=20):
            assert record.offset == next_offset[record.topic_partition]
            next_offset[record.topic_partition] += 1
            consumed += 1
    # the pool held at most buffer.memory, except once: the oversize response alone in an empty pool
    assert peak <= max(buffer_memory, driver.largest_response) <= buffer_memory + max_message
    assert driver.refusals > 0 and pool.depleted_time_total() > 0  # the pool did hold reads back
    assert consumed == 1500 * 20 - driver.short_polls
    assert next_offset[big] >= 1  # the oversize message got through, once the pool was empty
    assert len(next_offset) > 900  # most partitions served despite the slow consumer


def test_an_oversize_message_waits_for_an_empty_pool():
    buffer_memory = 64 << 10
    pool = MemoryPool(buffer_memory, clock=FakeClock())
    fetcher = make_fetcher([tp(0), tp(1)], pool=pool, fetch_max_bytes=buffer_memory, buffer_memory=buffer_memory)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    answer(fetcher, request, version, {tp(0): batch(0, 6), tp(1): b""})
    (request, version), = fetcher.prepare_fetch_requests(1).values()
    response, size = fetch_response(version, {tp(1): batch(0, 1, value_size=100_000)})
    assert size > buffer_memory
    assert pool.try_allocate(size, waiter=NODE) is None and pool.is_out_of_memory  # tp0's records are held
    assert len(fetcher.poll(max_records=3)) == 3 and pool.try_allocate(size, waiter=NODE) is None
    fetcher.poll(max_records=3)
    lease = pool.try_allocate(size, waiter=NODE)
    assert lease is not None and pool.used == size and not pool.is_depleted
    fetcher.handle_fetch_response(NODE, request, response, version, size, 2, lease=lease)
    assert [len(r.value) for r in fetcher.poll()] == [100_000]
    assert pool.used == 0
    assert pool.peak_used <= buffer_memory + size


# ==== properties ======================================================================================

@settings(max_examples=60, deadline=None, database=InMemoryExampleDatabase(),
          suppress_health_check=[HealthCheck.too_slow])
@given(counts=st.lists(st.integers(0, 40), min_size=1, max_size=12),
       max_poll_records=st.integers(1, 30),
       actions=st.lists(st.one_of(st.integers(1, 40), st.just("fetch")), min_size=1, max_size=60),
       seed=st.integers(0, 1000))
def test_draining_is_bounded_and_fair(counts, max_poll_records, actions, seed):
    """For any buffered data and poll sizes: no poll exceeds max.poll.records (or its argument), records
    come out in offset order without loss, and a partition k-th in line is served within k + 1 polls."""
    rng = random.Random(seed)
    parts = [tp(i) for i in range(len(counts))]
    fetcher = make_fetcher(parts, max_poll_records=max_poll_records, buffer_memory=64 << 20)
    produced = {p: 0 for p in parts}
    expected = defaultdict(int)
    deadline: dict[TopicPartition, int] = {}  # partition -> the poll number it must be served by
    polls = 0

    def fetch():
        if fetcher.in_flight_nodes():
            return
        requests = fetcher.prepare_fetch_requests(0)
        if not requests:
            return
        request, version = requests[NODE]
        parts_data = {}
        for p in request_order(request):
            n = counts[p.partition] if rng.random() < 0.8 else 0
            start = fetcher.position(p)
            blob = b"".join(batch(start + i, min(5, n - i)) for i in range(0, n, 5))
            parts_data[p] = blob
            produced[p] = start + n
        answer(fetcher, request, version, parts_data)

    def poll(size):
        nonlocal polls
        for k, p in enumerate(fetcher.buffered_partitions()):
            deadline.setdefault(p, polls + k)
        retained = fetcher.retained_records()
        records = fetcher.poll(max_records=size)
        assert len(records) <= min(size, max_poll_records)
        assert fetcher.retained_records() == retained - len(records)
        served = set()
        for record in records:
            p = record.topic_partition
            assert record.offset == expected[p]
            expected[p] += 1
            served.add(p)
        for p in served:
            deadline.pop(p, None)
        for p, last in deadline.items():
            assert polls < last, f"{p} not served by poll {last}"
        polls += 1

    fetch()
    for action in actions:
        if action == "fetch":
            fetch()
        else:
            poll(action)
    for _ in range(sum(counts) + 1):
        if not fetcher.retained_records():
            break
        poll(40)
    # everything fetched was handed out, in order
    assert fetcher.retained_records() == 0
    assert all(expected[p] == fetcher.position(p) == produced[p] for p in parts if produced[p])


# ==== helpers: a KIP-74 broker model and a driver =========================================================

class FakeLog:
    """A partition's log of equal batches: batch i holds offsets [i * n, (i + 1) * n). ``end`` None
    means endless; otherwise ``append`` adds one-record batches."""

    def __init__(self, records_per_batch: int, value_size: int, end: int | None = None):
        self.per_batch = records_per_batch
        self.value_size = value_size
        self.end = end
        self._cache: dict[int, bytes] = {}

    def append(self, count: int) -> None:
        self.end += count * self.per_batch

    def batch(self, index: int) -> bytes:
        data = self._cache.get(index)
        if data is None:
            data = self._cache[index] = batch(index * self.per_batch, self.per_batch, self.value_size)
            if len(self._cache) > 4096:
                self._cache.pop(next(iter(self._cache)))
        return data

    def read(self, offset: int, max_bytes: int, min_one: bool) -> bytes:
        """Whole batches from the one holding ``offset``; the first may exceed ``max_bytes`` when
        ``min_one``; a first batch that does not fit gives nothing; the last may be cut (KIP-74)."""
        index = offset // self.per_batch
        chunks, total, limit = [], 0, max_bytes
        while self.end is None or index * self.per_batch < self.end:
            data = self.batch(index)
            if not chunks:
                limit = max(max_bytes, len(data)) if min_one else max_bytes
                if len(data) > limit:
                    return b""
            if total + len(data) > limit:
                chunks.append(data[:limit - total])
                break
            chunks.append(data)
            total += len(data)
            index += 1
            if total >= limit:
                break
        return b"".join(chunks)


class FakeBroker:
    """Answers full fetch requests as the broker's KIP-74 loop does, without sessions."""

    def __init__(self, logs: dict[TopicPartition, FakeLog]):
        self.logs = logs

    def respond(self, request: FetchRequest, version: int) -> tuple[FetchResponse, int]:
        assert request.session_epoch in (0, -1)  # the fetcher does not get a session from this broker
        limit, min_one = request.max_bytes, True
        parts = {}
        for topic in request.topics:
            for wire in topic.partitions:
                p = tp(wire.partition, topic.topic)
                data = self.logs[p].read(wire.fetch_offset, min(wire.partition_max_bytes, limit), min_one)
                if data:
                    min_one = False
                    limit = max(0, limit - len(data))
                parts[p] = data
        return fetch_response(version, parts)


class Driver:
    """What the asyncio layer does, minus sockets: sends what the fetcher prepares, and "reads" a
    response only once the memory pool has granted its size."""

    def __init__(self, fetcher: Fetcher, brokers: dict[int, FakeBroker], clock: FakeClock | None = None):
        self.fetcher = fetcher
        self.brokers = brokers
        self.clock = clock or FakeClock()
        self.unread: dict[int, tuple] = {}
        self.refusals = 0
        self.short_polls = 0
        self.largest_response = 0

    def step(self) -> None:
        fetcher = self.fetcher
        for node, (request, version, response, size) in list(self.unread.items()):
            lease = fetcher.pool.try_allocate(size, waiter=node)
            if lease is None:
                self.refusals += 1
                continue
            del self.unread[node]
            fetcher.handle_fetch_response(node, request, response, version, size, self.clock.now, lease=lease)
        for node, (request, version) in fetcher.prepare_fetch_requests(self.clock.now).items():
            response, size = self.brokers[node].respond(request, version)
            self.unread[node] = (request, version, response, size)
            self.largest_response = max(self.largest_response, size)
        retained = fetcher.retained_records()
        if retained < 20:
            self.short_polls += 20 - retained

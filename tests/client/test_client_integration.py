"""kafkawire's asyncio and blocking clients against the reference broker, over real sockets.

Produce and consume with every codec; idempotent retries through a dropped connection (the broker
drops the duplicates by sequence); KIP-74 limits small enough to cut every response while all
partitions still progress; max.poll.records; KIP-81 with a slow consumer (the pool bounds what is
held, reads pause, the coordinator is not held up); interop with kafka-python and confluent-kafka
both ways; a corrupt fetch response failing one partition alone; request timeouts and pipelining at
the connection level; buffer.memory and delivery.timeout.ms on the producer.

Faults are injected by KafkaProxy, a small proxy that reads the frames both ways and lets a test
alter, withhold or cut off responses.
"""
from __future__ import annotations

import asyncio
import logging
import time

import pytest

from support.broker_harness import BrokerThread, RawClient, own_broker
from kafkawire.client import (
    AsyncConsumer, AsyncProducer, BufferExhausted, Consumer, CorruptRecordException, KafkaConnectionError, Producer,
    RequestTimedOut, TopicPartition,
)
from kafkawire.client.aio.connection import BrokerConnection
from kafkawire.framing import FrameBuffer, decode_request, decode_response, encode_response, peek_request
from kafkawire.messages import FetchRequest, MetadataRequest
from kafkawire.records import Codec, iter_batches

PARTITIONS = 6
TIMEOUT_S = 30


broker = own_broker(num_partitions=PARTITIONS)


def run(coroutine, timeout: float = TIMEOUT_S):
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


def make_records(count: int, prefix: str, size: int = 0, null_headers: bool = True):
    """(key, value, headers) triples; every 7th record has no key, every 5th carries headers (one
    with a null value unless ``null_headers`` is false: kafka-python refuses those)."""
    out = []
    for i in range(count):
        key = None if i % 7 == 0 else f"key-{i % 31}".encode()
        value = f"{prefix}-{i}-".encode() + bytes([i % 251]) * size
        headers = (("trace", f"t{i}".encode()), ("empty", None if null_headers else b"")) if i % 5 == 0 else ()
        out.append((key, value, headers))
    return out


async def produce(bootstrap: str, topic: str, records, **settings) -> list:
    async with AsyncProducer(bootstrap_servers=bootstrap, **settings) as producer:
        deliveries = [await producer.send(topic, value, key=key, headers=headers) for key, value, headers in records]
        return await asyncio.gather(*deliveries)


async def consume_all(consumer: AsyncConsumer, count: int, timeout_s: float = TIMEOUT_S, on_poll=None) -> list:
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count:
        assert time.monotonic() < deadline, f"consumed {len(out)} of {count}"
        records = await consumer.poll(timeout_ms=200)
        if on_poll is not None:
            await on_poll(records)
        out += records
    return out


def check_intact(records, consumed, metadata, timestamps: bool = True) -> None:
    """Each record came back once, where its RecordMetadata says, with its key, value and headers
    (and timestamp, unless the broker answered a duplicate: Kafka then reports the batch's
    timestamp as its log-append time, and so does this broker)."""
    assert len(consumed) == len(records)
    by_position = {(r.partition, r.offset): r for r in consumed}
    assert len(by_position) == len(consumed), "a record was returned twice"
    for (key, value, headers), where in zip(records, metadata):
        got = by_position[(where.partition, where.offset)]
        assert (got.key, got.value) == (key, value)
        assert [tuple(h) for h in got.headers] == [tuple(h) for h in headers]
        assert got.timestamp == where.timestamp or not timestamps
    for partition in {r.partition for r in consumed}:
        offsets = [r.offset for r in consumed if r.partition == partition]
        assert offsets == sorted(offsets), f"partition {partition} out of order"


def raw_batches(broker, topic: str, partition: int) -> list:
    """Every batch of a partition, read with a plain Fetch (to look at how the producer wrote them)."""
    batches = []
    with RawClient(broker.port) as client:
        offset = 0
        while True:
            request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24, isolation_level=0,
                                   topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                                       partition=partition, fetch_offset=offset, partition_max_bytes=1 << 24)])])
            data = client.request(request, 11).responses[0].partitions[0]
            found = list(iter_batches(bytes(data.records))) if data.records else []
            if not found:
                return batches
            batches += found
            offset = found[-1].next_offset


# ---- a proxy that reads the frames ----------------------------------------------------------------

DROP = object()  # on_response's answer: cut the connection instead of passing the response on
HOLD = object()  # ...: never pass it on


class KafkaProxy:
    """Between a client and the broker: forwards requests as they are, decodes each response, lets
    ``on_response(api_key, version, body)`` return a body to forward (altered or not), DROP or HOLD,
    and points Metadata and FindCoordinator answers at itself so the client stays behind it."""

    def __init__(self, broker_port: int, on_response=None):
        self.broker_port = broker_port
        self.on_response = on_response or (lambda key, version, body: body)
        self.port = None
        self.dropped = 0
        self._server = None
        self._writers = []

    async def __aenter__(self) -> KafkaProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        await self._server.wait_closed()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _serve(self, client_reader, client_writer) -> None:
        broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", self.broker_port)
        self._writers += [client_writer, broker_writer]
        expected: asyncio.Queue = asyncio.Queue()

        async def upstream():
            frames = FrameBuffer()
            while data := await client_reader.read(1 << 16):
                frames.feed(data)
                for frame in frames.frames():
                    key, version, correlation_id = peek_request(frame)
                    if key != 0 or decode_request(frame)[1].acks != 0:
                        expected.put_nowait((key, version, correlation_id))
                    broker_writer.write(len(frame).to_bytes(4, "big") + frame)

        async def downstream():
            frames = FrameBuffer()
            while data := await broker_reader.read(1 << 16):
                frames.feed(data)
                for frame in frames.frames():
                    key, version, correlation_id = expected.get_nowait()
                    _, body = decode_response(frame, key, version)
                    body = self._point_here(key, body)
                    answer = self.on_response(key, version, body)
                    if answer is DROP:
                        self.dropped += 1
                        client_writer.transport.abort()
                        broker_writer.transport.abort()
                        return
                    if answer is not HOLD:
                        client_writer.write(encode_response(key, version, correlation_id, answer))

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass  # the test is over (a cancelled handler would be logged as an error by asyncio)
        finally:
            for task in tasks:
                task.cancel()
            client_writer.transport.abort()
            broker_writer.transport.abort()

    def _point_here(self, key: int, body):
        if key == 3:  # Metadata
            for broker in body.brokers:
                broker.host, broker.port = "127.0.0.1", self.port
        elif key == 10:  # FindCoordinator
            for coordinator in getattr(body, "coordinators", None) or [body]:
                coordinator.host, coordinator.port = "127.0.0.1", self.port
        return body


# ---- produce and consume ----------------------------------------------------------------------------

@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_10k_records_over_6_partitions_round_trip_with_each_codec(broker, codec):
    topic = f"codec-{codec}"
    records = make_records(10_000, codec, size=20)

    async def scenario():
        metadata = await produce(broker.bootstrap, topic, records, compression_type=codec, linger_ms=5)
        assert len({m.partition for m in metadata}) == PARTITIONS
        consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        try:
            consumed = await consume_all(consumer, len(records))
            assert await consumer.poll(timeout_ms=50) == []  # nothing more, nothing twice
        finally:
            await consumer.close()
        return metadata, consumed

    metadata, consumed = run(scenario())
    check_intact(records, consumed, metadata)
    batches = raw_batches(broker, topic, metadata[0].partition)
    assert batches and {b.compression for b in batches} == {Codec[codec.upper()]}
    assert all(b.producer_id >= 0 for b in batches)  # idempotent by default: a producer id and sequences


def test_idempotent_retries_through_a_dropped_connection_leave_no_duplicates(broker):
    topic = "idempotent"
    records = make_records(4_000, "idem")
    produce_responses = 0

    def cut_the_third_produce_answer(key, version, body):
        nonlocal produce_responses
        if key == 0:
            produce_responses += 1
            if produce_responses == 3:
                return DROP  # the broker appended it; the producer never hears so
        return body

    async def scenario():
        async with KafkaProxy(broker.port, cut_the_third_produce_answer) as proxy:
            async with AsyncProducer(bootstrap_servers=proxy.bootstrap, linger_ms=2, batch_size=2048,
                                     batch_max_size=2048, max_in_flight_requests_per_connection=5,
                                     retry_backoff_ms=20) as producer:
                deliveries = []
                for key, value, headers in records:
                    deliveries.append(await producer.send(topic, value, key=key, partition=len(deliveries) % 2,
                                                          headers=headers))
                    if len(deliveries) % 200 == 0:
                        await asyncio.sleep(0.001)  # let the sender run while records keep coming
                metadata = await asyncio.gather(*deliveries)
                stats = producer.metrics()
            assert proxy.dropped == 1
        consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        try:
            consumed = await consume_all(consumer, len(records))
            assert await consumer.poll(timeout_ms=100) == []
        finally:
            await consumer.close()
        return metadata, consumed, stats

    metadata, consumed, stats = run(scenario())
    assert stats["record-retry-total"] > 0 and stats["record-error-total"] == 0
    check_intact(records, consumed, metadata, timestamps=False)
    for partition in (0, 1):  # exactly once and in send order: the resent batches were dropped as duplicates
        values = [r.value for r in sorted(consumed, key=lambda r: r.offset) if r.partition == partition]
        assert values == [value for i, (_, value, _) in enumerate(records) if i % 2 == partition]
    logs = [log for t, _, log in broker.broker.topics.all_logs() if t.name == topic]
    assert sum(log.log_end_offset for log in logs) == len(records)


@pytest.fixture(scope="module")
def small_batches(broker):
    """1,800 records of ~200 bytes over 6 partitions, in small batches (batch.size 1 KiB)."""
    topic = "small-batches"
    records = make_records(1_800, "small", size=180)
    metadata = run(produce(broker.bootstrap, topic, records, batch_size=1024, batch_max_size=1024, linger_ms=0))
    return topic, records, metadata


def test_kip74_limits_cut_responses_and_every_partition_progresses(broker, small_batches):
    topic, records, metadata = small_batches
    first_seen: dict[int, int] = {}
    polls = 0

    async def note(polled):
        nonlocal polls
        polls += 1
        for record in polled:
            first_seen.setdefault(record.partition, polls)

    async def scenario():
        consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 fetch_max_bytes=3000, max_partition_fetch_bytes=1500, buffer_memory=3000,
                                 max_poll_records=40)
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        try:
            consumed = await consume_all(consumer, len(records), on_poll=note)
            return consumed, consumer.metrics()
        finally:
            await consumer.close()

    consumed, stats = run(scenario())
    check_intact(records, consumed, metadata)
    batches = [b.size for p in range(PARTITIONS) for b in raw_batches(broker, topic, p)]
    # no response held more than fetch.max.bytes plus one batch (the broker's KIP-74 exemption for a
    # first batch), so it took at least this many to carry everything
    assert stats["memory-pool-peak-used"] <= 3000 + max(batches)
    assert stats["fetch-response-total"] >= sum(batches) / (3000 + max(batches))
    # the rotation reaches every partition early, not after the first ones are exhausted
    assert sorted(first_seen) == list(range(PARTITIONS))
    assert max(first_seen.values()) <= 12, first_seen


def test_max_poll_records_bounds_every_poll(broker, small_batches):
    topic, records, metadata = small_batches
    sizes = []

    async def note(polled):
        sizes.append(len(polled))

    async def scenario():
        consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", max_poll_records=7)
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        try:
            consumed = await consume_all(consumer, len(records), on_poll=note)
            few = await consumer.poll(timeout_ms=0, max_records=3)  # nothing left, and a smaller cap is accepted
            return consumed, few
        finally:
            await consumer.close()

    consumed, few = run(scenario())
    assert max(sizes) == 7 and few == []
    check_intact(records, consumed, metadata)


def test_kip81_slow_consumer_stays_within_buffer_memory_and_reads_pause(broker):
    topic = "kip81"
    partitions = 40
    run(_create_topic(broker, topic, partitions))
    records = make_records(1_200, "slow", size=1_000)
    metadata = run(produce(broker.bootstrap, topic, records, batch_size=4096, batch_max_size=4096, linger_ms=0))
    largest_batch = max(b.size for p in range(partitions) for b in raw_batches(broker, topic, p))
    buffer_memory = 16 * 1024
    commit_seconds = []

    async def scenario():
        consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", group_id="kip81",
                                 enable_auto_commit=False, buffer_memory=buffer_memory, fetch_max_bytes=buffer_memory,
                                 # A response holds about 12 records (three 4 KiB batches): a poll of 7
                                 # leaves 5 behind, so the prefetch goes out with 5 KiB held and its
                                 # 12 KiB response must wait for memory.
                                 max_partition_fetch_bytes=4096, max_poll_records=7,
                                 fetch_max_wait_ms=50)  # the last, hottest partition is not held up by parked fetches
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])

        async def slow(polled):
            await asyncio.sleep(0.005)  # the application's work; responses meanwhile wait for memory
            if not commit_seconds:
                # Until the pool has been depleted once, each poll's work lasts until the response its
                # prefetch asked for has come (at most 1 s). With 5 ms alone the test needed the broker
                # to answer within one poll's work, which a loaded machine (CI, with other tests beside
                # it) did not always do.
                deadline = time.monotonic() + 1
                while (consumer.fetcher.in_flight_nodes() and not consumer.pool.is_depleted
                       and time.monotonic() < deadline):
                    await asyncio.sleep(0.002)
            if consumer.pool.is_depleted and not commit_seconds:
                started = time.monotonic()  # the coordinator's connection never waits for the pool
                await consumer.commit()
                commit_seconds.append(time.monotonic() - started)
        try:
            consumed = await consume_all(consumer, len(records), on_poll=slow)
            return consumed, consumer.metrics()
        finally:
            await consumer.close()

    consumed, stats = run(scenario())
    check_intact(records, consumed, metadata)
    assert stats["memory-pool-peak-used"] <= buffer_memory + largest_batch
    assert stats["memory-pool-depleted-time-total"] > 0 and stats["reads-paused-total"] > 0
    assert stats["memory-pool-used"] == 0
    assert commit_seconds and commit_seconds[0] < 2


async def _create_topic(broker, topic: str, partitions: int) -> None:
    from kafkawire.messages import CreateTopicsRequest
    connection = await BrokerConnection("127.0.0.1", broker.port).connect()
    try:
        response = await connection.send(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=1)], timeout_ms=5000))
        assert response.topics[0].error_code == 0
    finally:
        await connection.close()


# ---- positions and commits --------------------------------------------------------------------------

def test_seek_position_pause_and_commits(broker, small_batches):
    topic, records, metadata = small_batches
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    end0, end1 = (sum(m.partition == p for m in metadata) for p in (0, 1))

    async def scenario():
        consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap, group_id="positions", enable_auto_commit=False)
        consumer.assign([tp0, tp1])
        try:
            assert await consumer.position(tp0) == end0  # auto.offset.reset latest: the log end
            consumer.seek(tp0, end0 - 10)
            consumer.seek_to_beginning(tp1)
            consumer.pause(tp1)
            got = await consume_all(consumer, 10)
            assert {(r.partition, r.offset) for r in got} == {(0, o) for o in range(end0 - 10, end0)}
            assert await consumer.poll(timeout_ms=100) == []  # tp1 is paused
            consumer.resume(tp1)
            polled = await consumer.poll(timeout_ms=2000)
            assert polled and polled[0].partition == 1 and polled[0].offset == 0
            await consumer.commit()
            committed = await consumer.committed([tp0, tp1])
            assert committed == {tp0: end0, tp1: await consumer.position(tp1)}
            consumer.seek_to_end(tp1)
            assert await consumer.position(tp1) == end1
            await consumer.commit({tp1: 123})
        finally:
            await consumer.close()
        resumed = AsyncConsumer(bootstrap_servers=broker.bootstrap, group_id="positions", enable_auto_commit=False)
        resumed.assign([tp1])
        try:
            assert await resumed.position(tp1) == 123  # a group's committed offset wins over auto.offset.reset
            assert (await resumed.poll(timeout_ms=2000))[0].offset == 123
        finally:
            await resumed.close()

    run(scenario())


def test_subscribe_splits_partitions_across_a_group_and_hands_them_over_on_leave(broker):
    topic = "grouped"
    records = make_records(3_000, "grouped")
    metadata = run(produce(broker.bootstrap, topic, records))
    everything = {(m.partition, m.offset) for m in metadata}
    settings = dict(bootstrap_servers=broker.bootstrap, group_id="split", auto_offset_reset="earliest",
                    enable_auto_commit=False, heartbeat_interval_ms=100, session_timeout_ms=6000)

    async def scenario():
        members = [AsyncConsumer(**settings), AsyncConsumer(**settings)]
        for member in members:
            member.subscribe([topic])
        seen = set()
        deadline = time.monotonic() + TIMEOUT_S
        try:
            while True:  # poll both in turn until they own disjoint halves and everything is consumed
                assert time.monotonic() < deadline, (members[0].assignment(), members[1].assignment(), len(seen))
                for member in members:
                    seen |= {(r.partition, r.offset) for r in await member.poll(timeout_ms=50)}
                owned = [member.assignment() for member in members]
                if all(owned) and not owned[0] & owned[1] and len(owned[0] | owned[1]) == PARTITIONS \
                        and seen == everything:
                    break
            assert {len(o) for o in owned} == {PARTITIONS // 2}  # range assignor: 3 and 3
            for member in members:
                await member.commit()
            await members[1].close()  # leaves the group: its partitions move to the other member
            later = make_records(600, "later")
            more = await produce(broker.bootstrap, topic, later)
            wanted = {(m.partition, m.offset) for m in more}
            got = set()
            while members[0].assignment() != {TopicPartition(topic, p) for p in range(PARTITIONS)} or got != wanted:
                assert time.monotonic() < deadline, (members[0].assignment(), len(got))
                got |= {(r.partition, r.offset) for r in await members[0].poll(timeout_ms=50)}
            assert got == wanted  # the partitions handed over resumed at the committed offsets
            assert members[0].metrics()["rebalance-total"] >= 2
        finally:
            for member in members:
                await member.close()

    run(scenario(), timeout=TIMEOUT_S + 5)


def test_a_topic_created_after_assign_is_found_by_refreshing_metadata(broker):
    async def scenario():
        consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 retry_backoff_ms=20)
        consumer.assign([TopicPartition("late", 0)])
        try:
            assert await consumer.poll(timeout_ms=200) == []  # UNKNOWN_TOPIC_OR_PARTITION: nothing to fetch yet
            assert consumer.metadata.cluster.topic_errors.get("late") == 3
            async with AsyncProducer(bootstrap_servers=broker.bootstrap) as producer:  # creates the topic
                await producer.send_and_wait("late", b"finally", partition=0)
            got = await consume_all(consumer, 1)
            assert [(r.partition, r.offset, r.value) for r in got] == [(0, 0, b"finally")]
        finally:
            await consumer.close()

    run(scenario())


# ---- interop -----------------------------------------------------------------------------------------

def _kafka_python_read(bootstrap: str, topic: str, count: int) -> list:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([KTopicPartition(topic, p) for p in range(PARTITIONS)])
    out = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(out) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                out += [(r.partition, r.offset, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]
    finally:
        consumer.close()
    return out


def _confluent_read(bootstrap: str, topic: str, count: int) -> list:
    from confluent_kafka import OFFSET_BEGINNING, Consumer as CConsumer, TopicPartition as CTopicPartition
    consumer = CConsumer({"bootstrap.servers": bootstrap, "group.id": f"interop-{time.monotonic_ns()}",
                          "enable.auto.commit": False})
    consumer.assign([CTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    out = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(out) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                assert message.error() is None, message.error()
                out.append((message.partition(), message.offset(), message.key(), message.value(),
                            [(k, v) for k, v in (message.headers() or [])]))
    finally:
        consumer.close()
    return out


def test_records_from_kafkawire_read_intact_by_kafka_python_and_confluent(broker):
    topic = "from-kafkawire"
    records = make_records(2_000, "kw", size=10)
    with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4", linger_ms=5) as producer:
        futures = [producer.send(topic, value, key=key, headers=headers) for key, value, headers in records]
        producer.flush()
        metadata = [future.result(TIMEOUT_S) for future in futures]
    expected = sorted((m.partition, m.offset, key, value, [tuple(h) for h in headers])
                      for (key, value, headers), m in zip(records, metadata))  # (partition, offset) are unique
    assert sorted(_kafka_python_read(broker.bootstrap, topic, len(records))) == expected
    assert sorted(_confluent_read(broker.bootstrap, topic, len(records))) == expected


def _kafkawire_read(bootstrap: str, topic: str, count: int) -> list:
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        out = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < count and time.monotonic() < deadline:
            out += [(r.key, r.value, [tuple(h) for h in r.headers]) for r in consumer.poll(timeout_ms=200)]
        assert consumer.poll(timeout_ms=50) == []
    return out


def test_records_from_kafka_python_and_confluent_read_intact_by_kafkawire(broker):
    from confluent_kafka import Producer as CProducer
    from kafka import KafkaProducer
    records = make_records(2_000, "other", size=10, null_headers=False)
    expected = sorted(((key, value, [tuple(h) for h in headers]) for key, value, headers in records), key=repr)

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5, compression_type="gzip")
    for key, value, headers in records:
        producer.send("from-kafka-python", value=value, key=key, headers=list(headers))
    producer.flush(TIMEOUT_S)
    producer.close()
    assert sorted(_kafkawire_read(broker.bootstrap, "from-kafka-python", len(records)), key=repr) == expected

    producer = CProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "enable.idempotence": True,
                          "compression.type": "zstd"})
    for key, value, headers in records:
        producer.produce("from-confluent", value=value, key=key, headers=list(headers) or None)
    assert producer.flush(TIMEOUT_S) == 0
    assert sorted(_kafkawire_read(broker.bootstrap, "from-confluent", len(records)), key=repr) == expected


# ---- bad input ------------------------------------------------------------------------------------------

def test_a_corrupt_fetch_response_fails_one_partition_and_the_others_keep_going(broker, small_batches):
    topic, records, metadata = small_batches
    victim = 1
    counts = {p: sum(m.partition == p for m in metadata) for p in (0, 1, 2)}
    corrupted = []

    def flip_a_byte_in_one_partition(key, version, body):
        if key == 1 and not corrupted:
            for topic_response in body.responses:
                for partition in topic_response.partitions:
                    if partition.partition_index == victim and partition.records:
                        data = bytearray(partition.records)
                        data[len(data) // 3] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
                        partition.records = bytes(data)
                        corrupted.append(True)
        return body

    async def scenario():
        async with KafkaProxy(broker.port, flip_a_byte_in_one_partition) as proxy:
            consumer = AsyncConsumer(bootstrap_servers=proxy.bootstrap, auto_offset_reset="earliest")
            consumer.assign([TopicPartition(topic, p) for p in (0, 1, 2)])
            got, failures = [], []
            deadline = time.monotonic() + TIMEOUT_S
            try:
                while len([r for r in got if r.partition != victim]) < counts[0] + counts[2]:
                    assert time.monotonic() < deadline
                    try:
                        got += await consumer.poll(timeout_ms=200)
                    except CorruptRecordException as error:
                        failures.append(error)
                assert await consumer.poll(timeout_ms=200) == []  # the victim stays stopped
                # seeking to the failed offset fetches it again (intact this time: the proxy corrupts once)
                consumer.seek(failures[0].topic_partition, failures[0].offset)
                while len(got) < sum(counts.values()):
                    assert time.monotonic() < deadline
                    got += await consumer.poll(timeout_ms=200)
            finally:
                await consumer.close()
            return got, failures

    got, failures = run(scenario())
    assert len(failures) == 1 and failures[0].topic_partition == TopicPartition(topic, victim)
    assert "corrupt" in str(failures[0]).lower()
    for partition in (0, 1, 2):
        assert sorted(r.offset for r in got if r.partition == partition) == list(range(counts[partition]))


def test_request_timeout_closes_the_connection_and_fails_every_pending_request(broker):
    async def scenario():
        async with KafkaProxy(broker.port, lambda key, version, body: HOLD if key == 3 else body) as proxy:
            connection = await BrokerConnection("127.0.0.1", proxy.port, request_timeout_ms=300).connect()
            started = time.monotonic()
            first = connection.request(MetadataRequest(topics=[]), 9)
            second = connection.request(MetadataRequest(topics=[]), 9, timeout_ms=10_000)
            with pytest.raises(RequestTimedOut, match="Metadata"):
                await first
            assert 0.25 < time.monotonic() - started < 3
            with pytest.raises(KafkaConnectionError):
                await second
            assert connection.closed
            with pytest.raises(KafkaConnectionError):
                await connection.request(MetadataRequest(topics=[]), 9)

    run(scenario())


def test_pipelined_requests_are_answered_in_order_and_a_disconnect_fails_cleanly(broker):
    async def scenario():
        connection = await BrokerConnection("127.0.0.1", broker.port).connect()
        assert connection.api_version(1) == 19 and connection.api_version(0, 3, 9) == 9
        names = [f"pipelined-{i}" for i in range(40)]
        futures = [connection.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                                      allow_auto_topic_creation=False)) for name in names]
        answers = await asyncio.gather(*futures)
        assert [a.topics[0].name for a in answers] == names
        pending = connection.request(MetadataRequest(topics=[]))
        connection._transport.abort()  # the peer goes away mid-request
        with pytest.raises(KafkaConnectionError):
            await pending
        assert connection.closed

    run(scenario())


def test_buffer_memory_blocks_send_then_buffer_exhausted_and_delivery_timeout(broker):
    async def scenario():
        async with KafkaProxy(broker.port, lambda key, version, body: HOLD if key == 0 else body) as proxy:
            producer = AsyncProducer(bootstrap_servers=proxy.bootstrap, buffer_memory=64 * 1024, batch_size=16 * 1024,
                                     max_block_ms=300, request_timeout_ms=400, delivery_timeout_ms=800,
                                     linger_ms=0, retries=0, enable_idempotence=False)
            deliveries = []
            started = None
            with pytest.raises(BufferExhausted):
                for i in range(1_000):
                    started = time.monotonic()
                    deliveries.append(await producer.send("held", b"x" * 1000, partition=0))
            assert 0.25 < time.monotonic() - started < 3  # it waited max.block.ms for memory first
            assert producer.metrics()["buffer-exhausted-total"] >= 1
            results = await asyncio.gather(*deliveries, return_exceptions=True)
            assert results and all(isinstance(r, (TimeoutError, KafkaConnectionError)) for r in results)
            await producer.close()
            assert producer.pool.available_memory == 64 * 1024

    run(scenario())


logging.getLogger("kafka").setLevel(logging.CRITICAL)


@pytest.mark.parametrize("upstream", [False, True], ids=["kafkawire-ranges", "kafka-4.3-ranges"])
def test_the_client_uses_the_newest_versions_both_sides_speak(tmp_path, upstream):
    """Against kafkawire's broker the consumer fetches at v19 (KIP-1178's RemotePartitionMaxBytes); against
    one advertising exactly Kafka 4.3's ranges, at v18, upstream's, without it. Either way: Produce v13
    and OffsetCommit/OffsetFetch v10 by topic id, Metadata v13, ListOffsets v11."""
    seen: dict[int, set[int]] = {}
    with BrokerThread(data_dir=tmp_path / "data", num_partitions=2, upstream_versions=upstream) as running:
        handlers = running.broker.handlers
        handle = handlers.handle

        async def recording(api_key, request, version, *args):
            seen.setdefault(api_key, set()).add(version)
            if api_key == 1:
                remote = {p.remote_partition_max_bytes for t in request.topics for p in t.partitions}
                assert remote <= ({0} if version < 19 else {0, 3_000_000}), remote
            return await handle(api_key, request, version, *args)

        handlers.handle = recording

        async def scenario():
            records = make_records(50, "versions")
            metadata = await produce(running.bootstrap, "versions", records)
            consumer = AsyncConsumer(bootstrap_servers=running.bootstrap, group_id="versions",
                                     enable_auto_commit=False, auto_offset_reset="earliest",
                                     remote_max_partition_fetch_bytes=3_000_000)
            tps = [TopicPartition("versions", p) for p in range(2)]
            consumer.assign(tps)
            try:
                check_intact(records, await consume_all(consumer, len(records)), metadata)
                await consumer.commit()
                assert await consumer.committed(tps) == {tp: await consumer.position(tp) for tp in tps}
            finally:
                await consumer.close()

        run(scenario())
    assert seen[1] == {18 if upstream else 19}
    assert seen[0] == {13} and seen[3] == {13} and seen[8] == {10} and seen[9] == {10} and seen[2] == {11}

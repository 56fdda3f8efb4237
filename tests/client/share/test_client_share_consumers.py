"""kafkawire's share consumers (``AsyncShareConsumer``, ``ShareConsumer``) against kafkawire's broker:
members of one group on one partition together get every record once, explicit RELEASE redelivers
(delivery count 2) and REJECT archives, implicit mode accepts on the next poll, the acknowledgement
commit callback, close leaves the group, and kafkawire's members in one group with confluent-kafka's
``ShareConsumer``. Each test its own topic and group; waits are on conditions, with generous deadlines.
"""
from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from support.broker_harness import BrokerThread, RawClient
from kafkawire import messages as m
from kafkawire.client import AcknowledgeType, AsyncShareConsumer, ShareConsumer, TopicPartition

DEADLINE_S = 60
_names = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("share-client") / "data",
                      share_auto_offset_reset="earliest") as running:
        yield running


def _topic(broker, count: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"share-client-{next(_names)}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1)])[name].result(15)
    _produce(broker, name, 0, count)
    return name


def _produce(broker, topic: str, start: int, end: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(start, end):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(15) == 0


def _members(broker, group: str) -> list[str]:
    with RawClient(broker.port) as client:
        (described,) = client.request(m.ShareGroupDescribeRequest(group_ids=[group]), 1).groups
    return [member.member_id for member in described.members]


async def _poll_until(consumer: AsyncShareConsumer, wanted: int, deadline_s: float = DEADLINE_S) -> list:
    got: list = []
    deadline = time.monotonic() + deadline_s
    while len(got) < wanted and time.monotonic() < deadline:
        got += await consumer.poll(200)
    return got


def _consumer(broker, group: str, topic: str, **settings) -> AsyncShareConsumer:
    consumer = AsyncShareConsumer(bootstrap_servers=broker.bootstrap, group_id=group, **settings)
    consumer.subscribe([topic])
    return consumer


def test_members_of_one_group_on_one_partition_get_every_record_once(broker):
    topic = _topic(broker, 300)

    async def run():
        # record_limit: at most max.poll.records acquired per fetch, so one member cannot take the lot
        consumers = [_consumer(broker, "several", topic, max_poll_records=100, share_acquire_mode="record_limit")
                     for _ in range(3)]
        seen: dict[int, list[int]] = {i: [] for i in range(3)}
        try:
            for consumer in consumers:
                await _assigned(consumer)
            deadline = time.monotonic() + DEADLINE_S
            while sum(map(len, seen.values())) < 300 and time.monotonic() < deadline:
                for index, consumer in enumerate(consumers):
                    seen[index] += [record.offset for record in await consumer.poll(100)]
            for consumer in consumers:
                assert all(error is None for error in (await consumer.commit_sync(15000)).values())
        finally:
            for consumer in consumers:
                await consumer.close()
        assert sorted(offset for offsets in seen.values() for offset in offsets) == list(range(300))  # once each
        assert sum(1 for offsets in seen.values() if offsets) >= 2  # shared, not one member's
        late = _consumer(broker, "several", topic)
        try:
            assert await _poll_until(late, 1, deadline_s=1.5) == []  # all accepted
        finally:
            await late.close()
    asyncio.run(run())


async def _assigned(consumer: AsyncShareConsumer) -> None:
    """Wait until the group has given ``consumer`` its partitions."""
    await consumer.start()
    deadline = time.monotonic() + DEADLINE_S
    while not consumer.assignment() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert consumer.assignment()


def test_explicit_release_redelivers_and_reject_archives(broker):
    topic = _topic(broker, 3)

    async def run():
        consumer = _consumer(broker, "explicit", topic, share_acknowledgement_mode="explicit")
        try:
            records = await _poll_until(consumer, 3)
            assert [(r.offset, r.delivery_count) for r in records] == [(0, 1), (1, 1), (2, 1)]
            with pytest.raises(RuntimeError, match="not acknowledged"):
                await consumer.poll(0)  # explicit mode: every record first
            consumer.acknowledge(records[0], AcknowledgeType.ACCEPT)
            consumer.acknowledge(records[1], AcknowledgeType.RELEASE)
            consumer.acknowledge(records[2], AcknowledgeType.REJECT)
            with pytest.raises(RuntimeError, match="not waiting"):
                consumer.acknowledge(records[2], AcknowledgeType.ACCEPT)  # acknowledged already
            results = await consumer.commit_sync(15000)
            assert results == {TopicPartition(topic, 0): None}
            again = await _poll_until(consumer, 1)
            assert [(r.offset, r.value, r.delivery_count) for r in again] == [(1, b"v1", 2)]
            consumer.acknowledge(again[0])
            await consumer.commit_sync(15000)
            assert await _poll_until(consumer, 1, deadline_s=1.5) == []  # accepted and rejected stay done
        finally:
            await consumer.close()
    asyncio.run(run())


def test_renew_keeps_a_record_acquired_until_it_is_accepted(broker):
    topic = _topic(broker, 1)

    async def run():
        consumer = _consumer(broker, "renewing", topic, share_acknowledgement_mode="explicit")
        try:
            (record,) = await _poll_until(consumer, 1)
            consumer.acknowledge(record, AcknowledgeType.RENEW)  # the lock starts again; still ours
            assert await consumer.commit_sync(15000) == {TopicPartition(topic, 0): None}
            assert await consumer.poll(0) == []  # a renewed record does not hold up the next poll
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)
            assert await consumer.commit_sync(15000) == {TopicPartition(topic, 0): None}
            assert await _poll_until(consumer, 1, deadline_s=1.5) == []
        finally:
            await consumer.close()
    asyncio.run(run())


def test_implicit_mode_accepts_on_the_next_poll_and_close_releases_the_rest(broker):
    topic = _topic(broker, 10)

    async def run():
        first = _consumer(broker, "implicit", topic, max_poll_records=4, share_acquire_mode="record_limit")
        try:
            batch = await _poll_until(first, 1)
            assert [r.offset for r in batch] == [0, 1, 2, 3]
            with pytest.raises(RuntimeError, match="explicit"):
                first.acknowledge(batch[0])  # implicit mode acknowledges by itself
            await first.poll(0)  # accepts 0-3
        finally:
            await first.close()  # accepts what that poll returned; releases what was fetched beyond
        second = _consumer(broker, "implicit", topic)
        try:
            rest: list = []
            deadline = time.monotonic() + DEADLINE_S
            while (not rest or rest[-1].offset < 9) and time.monotonic() < deadline:
                rest += await second.poll(200)
            offsets = [r.offset for r in rest]
            # 0-3 accepted by the poll, what that poll handed out accepted by close, the rest released
            assert offsets and offsets[0] >= 4 and offsets == list(range(offsets[0], 10))
            assert {r.delivery_count for r in rest} <= {1, 2}
        finally:
            await second.close()
    asyncio.run(run())


def test_the_acknowledgement_commit_callback_gets_each_partitions_offsets(broker):
    topic = _topic(broker, 5)

    async def run():
        consumer = _consumer(broker, "callback", topic, share_acknowledgement_mode="explicit")
        calls: list = []
        refusals: list[str] = []

        def callback(offsets, error) -> None:
            calls.append((offsets, error))
            try:  # the callback may not call the consumer back (Kafka's rule)
                consumer.acknowledge_offset(topic, 0, 0)
            except RuntimeError as refused:
                refusals.append(str(refused))
        consumer.set_acknowledgement_commit_callback(callback)
        try:
            records = await _poll_until(consumer, 5)
            for record in records:
                consumer.acknowledge(record, AcknowledgeType.ACCEPT if record.offset % 2 else AcknowledgeType.RELEASE)
            await consumer.commit_sync(15000)
            assert calls == [({TopicPartition(topic, 0): {0, 1, 2, 3, 4}}, None)]
            assert len(refusals) == 1 and "callback" in refusals[0]
        finally:
            await consumer.close()
    asyncio.run(run())


def test_close_leaves_the_group(broker):
    topic = _topic(broker, 2)

    async def run():
        consumer = _consumer(broker, "leaving", topic)
        await _poll_until(consumer, 2)
        assert _members(broker, "leaving") == [consumer.member.member_id]
        await consumer.close()
        assert consumer.member.left
        assert _members(broker, "leaving") == []
        again = _consumer(broker, "leaving", topic)
        try:  # the two records were accepted on close (implicit mode)
            assert await _poll_until(again, 1, deadline_s=1.5) == []
        finally:
            await again.close()
    asyncio.run(run())


def test_kafkawire_and_confluent_kafka_members_share_one_group(broker):
    from confluent_kafka import ShareConsumer as ConfluentShareConsumer
    topic = _topic(broker, 200)
    # ours takes at most 50 until it polls again (no fetch while they are unacknowledged); theirs gets the rest
    ours = ShareConsumer(bootstrap_servers=broker.bootstrap, group_id="mixed", max_poll_records=50,
                         share_acquire_mode="record_limit")
    ours.subscribe([topic])
    theirs = ConfluentShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "mixed"})
    theirs.subscribe([topic])
    got_ours: list[int] = []
    got_theirs: list[int] = []

    def poll_theirs() -> None:
        got_theirs.extend(message.offset() for message in theirs.poll(0.2) if message.error() is None)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not got_ours and time.monotonic() < deadline:
            got_ours += [r.offset for r in ours.poll(200)]
        while not got_theirs and time.monotonic() < deadline:
            poll_theirs()
        while len(got_ours) + len(got_theirs) < 200 and time.monotonic() < deadline:
            got_ours += [r.offset for r in ours.poll(200)]
            poll_theirs()
        assert all(error is None for error in ours.commit_sync(15000).values())
        theirs.commit_sync(15)
    finally:
        ours.close()
        theirs.close()
    assert sorted(got_ours + got_theirs) == list(range(200))  # every record once
    assert got_ours and got_theirs  # both members got part of the stream

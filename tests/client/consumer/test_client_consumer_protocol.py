"""kafkawire's consumer in KIP-848 groups (``group.protocol=consumer``): the sans-IO member step by step
(joining, incremental revocation before the next heartbeat, fencing, leaving, errors), then against the
broker with kafkawire's and confluent-kafka's consumers sharing a group, every record read once; and
static membership (``group.instance.id``) in classic groups: a restart within the session timeout gets
the same partitions without a new generation."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kafkawire import messages as m
from kafkawire.client import AsyncConsumer, AsyncProducer
from kafkawire.client.core.consumer.config import ConsumerConfig
from kafkawire.client.core.group.member import GroupMember
from kafkawire.client.core.group.protocol import (
    Coordinator, GroupFailure, MemberState, PartitionsAssigned, PartitionsLost, PartitionsRevoked,
)
from kafkawire.client.core.topic_partition import TopicPartition as TP
from kafkawire.error_codes import ErrorCode as E

from support.broker_harness import own_broker

ORDERS = uuid.uuid4()
Response = m.ConsumerGroupHeartbeatResponse


def member(**settings) -> GroupMember:
    config = ConsumerConfig(group_id="g", group_protocol="consumer", enable_auto_commit=False,
                            group_remote_assignor="range", **settings)
    joined = GroupMember(config, group_instance_id=settings.get("group_instance_id"))
    joined.set_topic_ids({"orders": ORDERS})
    joined.subscribe(["orders"], 0)
    joined.coordinator = Coordinator(1, "127.0.0.1", 9092)  # as if FindCoordinator had answered
    return joined


def answer(epoch, partitions=None, error=0, interval=1000, member_id="m-1"):
    assignment = None if partitions is None else Response.Assignment(
        topic_partitions=[Response.TopicPartitions(topic_id=ORDERS, partitions=sorted(partitions))])
    return Response(error_code=error, member_id=member_id if not error else None, member_epoch=epoch,
                    heartbeat_interval_ms=interval, assignment=assignment)


def heartbeats(requests):
    return [r for r in requests if r.kind == "consumer_heartbeat"]


def test_join_take_an_assignment_then_give_part_of_it_back():
    a = member()
    (join,) = heartbeats(a.poll(0))
    body = join.body
    assert (body.member_epoch, body.subscribed_topic_names, body.server_assignor, body.topic_partitions,
            body.rebalance_timeout_ms) == (0, ["orders"], "range", [], 300000)
    a.handle_response(join, answer(1, {0, 1, 2}), 0)
    (assigned,) = a.drain_events()
    assert isinstance(assigned, PartitionsAssigned) and set(assigned.added) == {TP("orders", p) for p in (0, 1, 2)}
    assert a.state is MemberState.STABLE and a.generation.generation_id == 1
    assert not heartbeats(a.poll(500))  # not due yet
    (beat,) = heartbeats(a.poll(1000))
    assert beat.body.member_epoch == 1 and beat.body.subscribed_topic_names is None  # unchanged: not sent
    assert [(t.topic_id, t.partitions) for t in beat.body.topic_partitions] == [(ORDERS, [0, 1, 2])]
    a.handle_response(beat, answer(1, {0}), 1000)  # 1 and 2 go to another member
    # revoked first; the next heartbeat waits for the application to let them go
    assert not heartbeats(a.poll(1001))
    (revoked,) = a.drain_events()
    assert isinstance(revoked, PartitionsRevoked) and set(revoked.partitions) == {TP("orders", 1), TP("orders", 2)}
    (ack,) = heartbeats(a.poll(1002))  # at once, not at the interval: the broker is waiting for it
    assert [(t.topic_id, t.partitions) for t in ack.body.topic_partitions] == [(ORDERS, [0])]


def test_a_fenced_member_loses_its_partitions_and_rejoins_with_its_id():
    a = member()
    (join,) = heartbeats(a.poll(0))
    a.handle_response(join, answer(3, {0, 1}), 0)
    a.drain_events()
    (beat,) = heartbeats(a.poll(1000))
    a.handle_response(beat, answer(0, error=E.FENCED_MEMBER_EPOCH), 1000)
    (lost,) = a.drain_events()
    assert isinstance(lost, PartitionsLost) and not a.assignment
    (rejoin,) = heartbeats(a.poll(1001))
    assert (rejoin.body.member_epoch, rejoin.body.member_id) == (0, "m-1")


@pytest.mark.parametrize("code", [E.UNSUPPORTED_ASSIGNOR, E.INCONSISTENT_GROUP_PROTOCOL, E.UNRELEASED_INSTANCE_ID])
def test_errors_that_stop_the_member(code):
    a = member()
    (join,) = heartbeats(a.poll(0))
    a.handle_response(join, answer(0, error=code), 0)
    (failure,) = a.drain_events()
    assert isinstance(failure, GroupFailure) and failure.fatal and failure.error.error_code == code


def test_a_broker_without_the_protocol_is_a_clear_failure():
    a = member()
    a.set_api_versions({8: (2, 9), 9: (1, 9), 10: (0, 6)})  # no ConsumerGroupHeartbeat
    a.poll(0)
    (failure,) = a.drain_events()
    assert isinstance(failure, GroupFailure) and "KIP-848" in str(failure.error)


@pytest.mark.parametrize("instance, epoch", [(None, -1), ("host-a", -2)])
def test_leaving(instance, epoch):
    a = member(group_instance_id=instance)
    (join,) = heartbeats(a.poll(0))
    a.handle_response(join, answer(1, {0}), 0)
    a.drain_events()
    a.close(10)
    a.drain_events()
    (leave,) = heartbeats(a.poll(11))
    assert (leave.body.member_epoch, leave.body.instance_id) == (epoch, instance)
    a.handle_response(leave, answer(epoch), 12)
    assert a.closed


# ---- against the broker -----------------------------------------------------------------------------

broker = own_broker(num_partitions=6, group_consumer_heartbeat_interval_ms=200)


async def produce(bootstrap, topic, count):
    producer = AsyncProducer({"bootstrap.servers": bootstrap})
    await producer.start()
    for i in range(count):
        await producer.send(topic, value=str(i).encode(), partition=i % 6)
    await producer.flush()
    await producer.close()


def test_kafkawire_and_confluent_consumers_share_a_group(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    asyncio.run(produce(broker.bootstrap, "shared", 600))
    seen: dict[str, list[str]] = {}

    async def kafkawire_member(name, seconds):
        # a few records a poll, as confluent-kafka hands them one by one: the group changes while they last
        consumer = AsyncConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "mixed",
                                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                  "max.poll.records": 10})
        consumer.subscribe(["shared"])
        stop = time.monotonic() + seconds
        while time.monotonic() < stop and len(seen) < 600:
            for record in await consumer.poll(timeout_ms=100):
                seen.setdefault(record.value.decode(), []).append(name)
                await asyncio.sleep(0.005)  # slow enough that the members share the work
        await consumer.close()

    def confluent_member(seconds):
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "mixed",
                                             "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                             "log_level": 0})
        consumer.subscribe(["shared"])
        stop = time.monotonic() + seconds
        while time.monotonic() < stop and len(seen) < 600:
            message = consumer.poll(0.1)
            if message is not None and not message.error():
                seen.setdefault(message.value().decode(), []).append("confluent")
                time.sleep(0.005)
        consumer.close()

    async def everyone():
        # kw-2 leaves early: its partitions move to the others, from its committed offsets
        await asyncio.gather(kafkawire_member("kw-1", 20), kafkawire_member("kw-2", 1.5),
                             asyncio.to_thread(confluent_member, 20))

    asyncio.run(everyone())
    assert len(seen) == 600 and all(len(readers) == 1 for readers in seen.values())
    assert {reader for readers in seen.values() for reader in readers} >= {"kw-1", "confluent"}


def test_a_static_classic_member_restarting_keeps_its_partitions(broker):
    asyncio.run(produce(broker.bootstrap, "static-classic", 60))

    async def start(instance):
        consumer = AsyncConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "static-classic",
                                  "group.instance.id": instance, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 10000})
        consumer.subscribe(["static-classic"])
        return consumer

    async def settle(*consumers):
        deadline = time.monotonic() + 20
        while not all(c.assignment() for c in consumers) or \
                sum(len(c.assignment()) for c in consumers) != 6:
            assert time.monotonic() < deadline
            await asyncio.gather(*(c.poll(timeout_ms=50) for c in consumers))

    async def run():
        a, b = await start("host-a"), await start("host-b")
        await settle(a, b)
        before = a.assignment()
        generation = broker.broker.groups.groups["static-classic"].generation_id
        await a.close()  # a static member sends no LeaveGroup: its partitions wait for it
        restarted = await start("host-a")
        await settle(restarted, b)
        assert restarted.assignment() == before
        assert broker.broker.groups.groups["static-classic"].generation_id == generation
        await restarted.close()
        await b.close()

    asyncio.run(run())

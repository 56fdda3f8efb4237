"""Closing a client is bounded whatever the broker does: against a broker that answers ApiVersions
and Metadata and then nothing (tests/support/silent_broker.py), every close returns within its timeout (a
little more for sockets and tasks), and the records it could not deliver fail instead of hanging.

Also the cause of the hang seen against Tansu: on Python 3.11 ``asyncio.wait_for`` drops a
cancellation that arrives as the awaited event is set, so a sender cancelled by close() could go
back to waiting forever; the clients wait with ``common.wait_event`` instead.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from kafkawire.client import AsyncConsumer, AsyncProducer, Consumer, Producer, TopicPartition
from kafkawire.client.aio.waiting import wait_event
from kafkawire.client.errors import ProducerClosed
from support.silent_broker import SilentBroker

SLACK_S = 1.5  # past the close timeout: cancelling tasks and closing sockets
FAST = {"request_timeout_ms": 300, "linger_ms": 5, "delivery_timeout_ms": 400, "retry_backoff_ms": 20,
        "max_block_ms": 2000}


@pytest.fixture
def silent():
    with SilentBroker() as broker:
        yield broker


def test_wait_event_keeps_a_cancel_that_arrives_as_the_event_is_set():
    async def main():
        event = asyncio.Event()
        waiter = asyncio.create_task(wait_event(event, 30))
        await asyncio.sleep(0)  # the waiter is now inside event.wait()
        event.set()
        waiter.cancel()  # in the same loop iteration: asyncio.wait_for would return True here
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await wait_event(asyncio.Event(), 0.01) is False
    asyncio.run(main())


@pytest.mark.parametrize("acks", [1, "all"])  # "all": idempotent, so InitProducerId goes unanswered
def test_async_producer_close_is_bounded_when_the_broker_goes_silent(silent, acks):
    async def main():
        producer = AsyncProducer(bootstrap_servers=silent.bootstrap, acks=acks, **FAST)
        deliveries = [await producer.send("held", b"record %d" % i) for i in range(50)]
        with pytest.raises(TimeoutError):
            await producer.flush(timeout_ms=200)
        started = time.monotonic()
        await producer.close(timeout_ms=300)
        assert time.monotonic() - started < 0.3 + SLACK_S
        for delivery in deliveries:
            assert isinstance(delivery.exception(), (ProducerClosed, TimeoutError)), delivery
        with pytest.raises(ProducerClosed):
            await producer.send("held", b"after close")
    asyncio.run(main())
    assert {"ProduceRequest", "InitProducerIdRequest"} & set(silent.unanswered)


def test_async_producer_default_close_is_bounded_by_delivery_timeout(silent):
    async def main():
        async with AsyncProducer(bootstrap_servers=silent.bootstrap, acks=1, **FAST) as producer:
            delivery = await producer.send("held", b"never acknowledged")
            silent.go_silent()  # not even metadata from now on
            started = time.monotonic()
        assert time.monotonic() - started < FAST["delivery_timeout_ms"] / 1000 + SLACK_S
        assert delivery.done() and delivery.exception() is not None
    asyncio.run(main())


def test_producer_close_is_bounded_when_the_broker_goes_silent(silent):
    started = None
    with Producer(bootstrap_servers=silent.bootstrap, acks=1, **FAST) as producer:
        futures = [producer.send("held", b"record %d" % i, partition=i % 2) for i in range(200)]
        silent.go_silent()
        with pytest.raises(TimeoutError):
            futures[0].result(timeout=0.1)
        started = time.monotonic()
    assert time.monotonic() - started < FAST["delivery_timeout_ms"] / 1000 + SLACK_S
    assert all(future.done() and future.exception() is not None for future in futures)
    with pytest.raises(ProducerClosed):
        producer.send("held", b"after close")


def test_producer_close_with_a_timeout_fails_what_is_left(silent):
    producer = Producer(bootstrap_servers=silent.bootstrap, acks=1, request_timeout_ms=30_000,
                        delivery_timeout_ms=60_000)
    futures = [producer.send("held", b"record %d" % i) for i in range(20)]
    started = time.monotonic()
    producer.close(timeout_ms=200)
    assert time.monotonic() - started < 0.2 + SLACK_S
    assert all(isinstance(future.exception(), ProducerClosed) for future in futures)


def test_consumer_close_is_bounded_when_the_broker_goes_silent(silent):
    async def group_member():
        consumer = AsyncConsumer(bootstrap_servers=silent.bootstrap, group_id="g", request_timeout_ms=300,
                                 session_timeout_ms=6000, heartbeat_interval_ms=100)
        consumer.subscribe(["held"])
        assert await consumer.poll(timeout_ms=100) == []  # FindCoordinator goes unanswered
        started = time.monotonic()
        await consumer.close()
        return time.monotonic() - started

    async def assigned():
        consumer = AsyncConsumer(bootstrap_servers=silent.bootstrap, group_id="g", request_timeout_ms=300,
                                 auto_offset_reset="earliest", enable_auto_commit=True)
        consumer.assign([TopicPartition("held", 0)])
        assert await consumer.poll(timeout_ms=100) == []  # ListOffsets goes unanswered
        consumer.seek(TopicPartition("held", 0), 5)  # a position to commit on close
        started = time.monotonic()
        await consumer.close(timeout_ms=300)
        return time.monotonic() - started

    assert asyncio.run(group_member()) < 0.3 + SLACK_S
    assert asyncio.run(assigned()) < 0.3 + SLACK_S
    consumer = Consumer(bootstrap_servers=silent.bootstrap, group_id="g", request_timeout_ms=300)
    consumer.subscribe(["held"])
    consumer.poll(timeout_ms=100)
    silent.go_silent()
    started = time.monotonic()
    consumer.close()
    assert time.monotonic() - started < 0.3 + SLACK_S
    assert "FindCoordinatorRequest" in silent.unanswered

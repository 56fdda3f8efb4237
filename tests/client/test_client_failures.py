"""How every client fails when it cannot reach the cluster: the producer, the consumer and the admin
client, blocking and on asyncio, retry the bootstrap servers (after each one's reconnect backoff)
until the call's timeout, then raise KafkaTimeoutError naming the broker and the last cause; a
broker that comes up within the timeout is used; a broker that accepts and never answers is named
with the request it left unanswered within request.timeout.ms. Clients dropped without close()
leave no pending task and no open socket behind.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from support.broker_harness import BrokerThread
from kafkawire.client import (
    AdminClient, AsyncAdminClient, AsyncConsumer, AsyncProducer, Consumer, KafkaTimeoutError, Producer, TopicPartition,
)
from kafkawire.client.core.network_config import ExponentialBackoff
from support.silent_broker import SilentBroker

TIMEOUT_S = 1.0
SLACK_S = 5.0  # past the timeout, on a loaded machine
TP = TopicPartition("events", 0)


@pytest.fixture
def closed_port():
    """A loopback port bound and never listening: every connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def refused(port: int, what: str) -> str:
    return (rf"^{what} timed out after {TIMEOUT_S:.1f} s: could not connect to 127.0.0.1:{port} "
            rf"\(ConnectionRefusedError: ")


@contextlib.contextmanager
def takes_the_timeout():
    started = time.monotonic()
    yield
    assert TIMEOUT_S - 0.05 <= time.monotonic() - started < TIMEOUT_S + SLACK_S


# ---- an unreachable bootstrap: every client fails after its timeout, naming the broker and the cause ----

def test_producer_fails_after_max_block_ms(closed_port):
    with takes_the_timeout(), pytest.raises(KafkaTimeoutError,
                                            match=refused(closed_port, r"fetching metadata \(max.block.ms\)")):
        Producer(bootstrap_servers=f"127.0.0.1:{closed_port}", max_block_ms=int(TIMEOUT_S * 1000))


def test_async_producer_fails_after_max_block_ms(closed_port):
    async def main():
        producer = AsyncProducer(bootstrap_servers=f"127.0.0.1:{closed_port}", max_block_ms=int(TIMEOUT_S * 1000))
        try:
            expected = refused(closed_port, r"fetching metadata \(max.block.ms\)")
            with takes_the_timeout(), pytest.raises(KafkaTimeoutError, match=expected):
                await producer.send("events", b"value")
            assert producer.connections.failed_attempts() > 1  # tried again, not once
        finally:
            await producer.close()
    asyncio.run(main())


def test_consumer_calls_fail_after_their_timeout_and_poll_returns_nothing(closed_port):
    consumer = Consumer(bootstrap_servers=f"127.0.0.1:{closed_port}", group_id="g",
                        default_api_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        consumer.assign([TP])
        with takes_the_timeout(), pytest.raises(KafkaTimeoutError, match=refused(closed_port, f"position of {TP}")):
            consumer.position(TP)  # default.api.timeout.ms
        with takes_the_timeout(), pytest.raises(KafkaTimeoutError, match=refused(closed_port, "committed offsets")):
            consumer.committed([TP], timeout_ms=TIMEOUT_S * 1000)
        with takes_the_timeout():
            assert consumer.poll(TIMEOUT_S * 1000) == []  # as Kafka's poll: nothing yet, not an error
    finally:
        consumer.close()


def test_async_consumer_position_fails_after_its_timeout(closed_port):
    async def main():
        consumer = AsyncConsumer(bootstrap_servers=f"127.0.0.1:{closed_port}")
        consumer.assign([TP])
        try:
            with takes_the_timeout(), pytest.raises(KafkaTimeoutError, match=refused(closed_port, f"position of {TP}")):
                await consumer.position(TP, timeout_ms=TIMEOUT_S * 1000)
        finally:
            await consumer.close()
    asyncio.run(main())


def test_admin_client_fails_after_its_timeout(closed_port):
    with AdminClient({"bootstrap.servers": f"127.0.0.1:{closed_port}"}) as admin:
        with takes_the_timeout(), pytest.raises(KafkaTimeoutError, match=refused(closed_port, "list_topics")):
            admin.list_topics(request_timeout=TIMEOUT_S).result(TIMEOUT_S + SLACK_S)


def test_async_admin_client_fails_after_default_api_timeout(closed_port):
    async def main():
        admin = AsyncAdminClient(bootstrap_servers=f"127.0.0.1:{closed_port}", request_timeout_ms=500,
                                 default_api_timeout_ms=int(TIMEOUT_S * 1000))
        try:
            with takes_the_timeout(), pytest.raises(KafkaTimeoutError, match=refused(closed_port, "list_topics")):
                await admin.list_topics()
        finally:
            await admin.close()
    asyncio.run(main())


def test_every_bootstrap_server_is_named(closed_port):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        second = other.getsockname()[1]
        with AdminClient({"bootstrap.servers": f"127.0.0.1:{closed_port},127.0.0.1:{second}"}) as admin:
            with pytest.raises(KafkaTimeoutError) as failure:
                admin.list_topics(request_timeout=TIMEOUT_S).result(TIMEOUT_S + SLACK_S)
    assert f"127.0.0.1:{closed_port} (ConnectionRefusedError" in str(failure.value)
    assert f"127.0.0.1:{second} (ConnectionRefusedError" in str(failure.value)


# ---- a broker that accepts and never answers --------------------------------------------------------------

def test_a_silent_broker_is_named_with_the_request_it_did_not_answer():
    with SilentBroker() as broker:
        broker.go_silent()
        settings = {"bootstrap.servers": broker.bootstrap, "request.timeout.ms": 300, "default.api.timeout.ms": 300}
        with AdminClient(settings) as admin:
            # request.timeout.ms passes within the call: its cause is the unanswered ApiVersions
            expected = (rf"^list_topics timed out after 1.0 s: {broker.bootstrap} did not answer ApiVersions "
                        r"within request.timeout.ms \(300 ms\)")
            with pytest.raises(KafkaTimeoutError, match=expected):
                admin.list_topics(request_timeout=TIMEOUT_S).result(TIMEOUT_S + SLACK_S)
        with AdminClient({**settings, "request.timeout.ms": 30000, "default.api.timeout.ms": 30000}) as admin:
            # the call's timeout is the shorter: it says what it was still waiting for
            expected = (rf"^list_topics timed out after 0.5 s: {broker.bootstrap} has not answered ApiVersions yet "
                        r"\(request.timeout.ms is 30000 ms\)")
            with pytest.raises(KafkaTimeoutError, match=expected):
                admin.list_topics(request_timeout=0.5).result(0.5 + SLACK_S)
        with pytest.raises(KafkaTimeoutError, match=rf"{broker.bootstrap} did not answer ApiVersions within "
                                                    r"request.timeout.ms \(300 ms\)"):
            Producer(bootstrap_servers=broker.bootstrap, request_timeout_ms=300, max_block_ms=1000)


# ---- a connection that never completes ----------------------------------------------------------------------

def test_a_connection_that_never_completes_is_given_up_on_a_growing_setup_timeout():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        fillers = []  # fill the accept queue: the kernel then drops the client's SYN, and connect() hangs
        try:
            for _ in range(3):
                filler = socket.socket()
                filler.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
                fillers.append(filler)
            settings = {"bootstrap.servers": f"127.0.0.1:{port}", "socket.connection.setup.timeout.ms": 200,
                        "socket.connection.setup.timeout.max.ms": 1000}
            with AdminClient(settings) as admin:
                with pytest.raises(KafkaTimeoutError) as failure:
                    admin.list_topics(request_timeout=2).result(2 + SLACK_S)
        finally:
            for filler in fillers:
                filler.close()
    found = re.search(rf"could not connect to 127.0.0.1:{port} within socket.connection.setup.timeout.ms "
                      r"\((\d+) ms\)", str(failure.value))
    assert found is not None, str(failure.value)
    assert 200 * 1.2 < int(found.group(1)) <= 1000  # doubled (with jitter) after each attempt that timed out


# ---- a broker that comes up within the call's timeout ----------------------------------------------------

async def _start_broker_after_failures(call: asyncio.Future, connections, port_socket: socket.socket,
                                       data_dir: Path) -> BrokerThread:
    """Once the client has failed to connect twice, free the port and start a broker on it."""
    while connections.failed_attempts() < 2 and not call.done():  # (a call that gave up fails the test)
        await asyncio.sleep(0.01)
    port = port_socket.getsockname()[1]
    port_socket.close()
    return await asyncio.to_thread(lambda: BrokerThread(data_dir=data_dir, port=port).start())


def test_a_bootstrap_server_that_comes_up_in_time_is_used(tmp_path):
    async def main():
        port_socket = socket.socket()
        port_socket.bind(("127.0.0.1", 0))
        port = port_socket.getsockname()[1]
        admin = AsyncAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        broker = None
        try:
            listing = asyncio.ensure_future(admin.list_topics(request_timeout=30))
            broker = await _start_broker_after_failures(listing, admin._router.connections, port_socket,
                                                        tmp_path / "admin")
            assert isinstance(await listing, dict)
            producer = AsyncProducer(bootstrap_servers=f"127.0.0.1:{port}")
            await producer.start()
            await producer.close()
        finally:
            port_socket.close()
            await admin.close()
            if broker is not None:
                await asyncio.to_thread(broker.stop)
    asyncio.run(main())


def test_a_producer_started_before_its_broker_sends_once_it_is_up(tmp_path):
    async def main():
        port_socket = socket.socket()
        port_socket.bind(("127.0.0.1", 0))
        producer = AsyncProducer(bootstrap_servers=f"127.0.0.1:{port_socket.getsockname()[1]}")
        broker = None
        try:
            sending = asyncio.ensure_future(producer.send_and_wait("events", b"value"))
            broker = await _start_broker_after_failures(sending, producer.connections, port_socket,
                                                        tmp_path / "producer")
            assert (await sending).offset == 0
        finally:
            port_socket.close()
            await producer.close()
            if broker is not None:
                await asyncio.to_thread(broker.stop)
    asyncio.run(main())


# ---- backoffs ---------------------------------------------------------------------------------------------

def test_backoffs_grow_exponentially_with_jitter_up_to_their_maximum():
    backoff = ExponentialBackoff(50, 1000)
    for attempts, term in ((0, 50), (1, 100), (2, 200), (3, 400)):
        values = [backoff.backoff_ms(attempts) for _ in range(200)]
        assert term * 0.8 <= min(values) < max(values) <= term * 1.2
    assert max(backoff.backoff_ms(30) for _ in range(200)) <= 1000
    assert ExponentialBackoff(10000, 10000).backoff_ms(5) == 10000  # no room to grow: no jitter either


# ---- clients dropped without close() -----------------------------------------------------------------------

_DROPPED = textwrap.dedent("""
    import asyncio, gc, socket, sys
    sys.path.insert(0, {tests!r})
    from support.silent_broker import SilentBroker
    from kafkawire.client import (AdminClient, AsyncAdminClient, AsyncConsumer, AsyncProducer, Consumer,
                                  KafkaTimeoutError, Producer, TopicPartition)
    with SilentBroker() as broker:
        producer = Producer(bootstrap_servers=broker.bootstrap)
        consumer = Consumer(bootstrap_servers=broker.bootstrap)
        consumer.assign([TopicPartition("t", 0)])
        consumer.poll(100)
        admin = AdminClient({{"bootstrap.servers": broker.bootstrap}})
        admin.list_topics().result(10)
        del producer, consumer, admin
        gc.collect()
        async def main():
            producer = AsyncProducer(bootstrap_servers=broker.bootstrap)
            await producer.start()
            consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap)
            consumer.assign([TopicPartition("t", 0)])
            await consumer.poll(100)
            admin = AsyncAdminClient(bootstrap_servers=broker.bootstrap)
            await admin.list_topics()
        asyncio.run(main())
        gc.collect()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    unreachable = "127.0.0.1:%d" % closed.getsockname()[1]
    try:
        Producer(bootstrap_servers=unreachable, max_block_ms=300)
    except KafkaTimeoutError:
        pass
    gc.collect()
    kept = Consumer(bootstrap_servers=unreachable)  # still open, and retrying, when the interpreter exits
    kept.assign([TopicPartition("t", 0)])
    kept.poll(100)
    closed.close()
    print("done")
""")


def test_clients_dropped_without_close_leave_no_pending_task_nor_open_socket(tmp_path):
    script = tmp_path / "dropped.py"
    script.write_text(_DROPPED.format(tests=str(Path(__file__).parent.parent)))
    run = subprocess.run([sys.executable, "-X", "dev", "-W", "error", str(script)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "done", run.stderr
    for warning in ("Task was destroyed", "unclosed", "ResourceWarning", "never retrieved"):
        assert warning not in run.stderr, run.stderr

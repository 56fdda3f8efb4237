"""Share-group state survives a broker killed with -9: every record ACCEPTed stays accepted (never
delivered again), and the records acquired but not acknowledged are offered again, with their first
delivery counted. A confluent-kafka ``ShareConsumer`` consumes from a ``kafkawire broker`` process
that is killed and restarted on the same port and data directory."""
from __future__ import annotations

import socket
import time

from support.broker_process import BrokerProcess

TOPIC = "restart-share"
SHARE = ("--override", "share.auto.offset.reset=earliest")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _poll_until(consumer, count: int, timeout: float = 30) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            got.append(message)
    return got


def test_accepted_records_stay_accepted_and_acquired_ones_come_back_after_a_kill(tmp_path):
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    port = _free_port()
    broker = BrokerProcess(tmp_path, "--port", str(port), *SHARE)
    bootstrap = f"127.0.0.1:{port}"
    settings = {"bootstrap.servers": bootstrap, "group.id": "survivors", "reconnect.backoff.max.ms": 200}
    before = after = None
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(15)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(30):
            producer.produce(TOPIC, value=f"v{i}".encode())
        assert producer.flush(15) == 0

        before = ShareConsumer({**settings, "share.acknowledgement.mode": "explicit", "socket.timeout.ms": 2000})
        before.subscribe([TOPIC])
        held = _poll_until(before, 30)
        assert [m.offset() for m in held] == list(range(30))
        for message in held[:10]:
            before.acknowledge(message, AcknowledgeType.ACCEPT)
        assert all(error is None for error in before.commit_sync(15).values())

        broker.kill()  # with 10..29 acquired and not acknowledged
        broker = BrokerProcess(tmp_path, "--port", str(port), *SHARE)

        after = ShareConsumer(settings)
        after.subscribe([TOPIC])
        again = _poll_until(after, 20)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(i, 2) for i in range(10, 30)]
        assert _poll_until(after, 1, timeout=2) == []  # nothing accepted came back
    finally:
        for consumer in (before, after):
            if consumer is not None:
                consumer.close()
        broker.kill()

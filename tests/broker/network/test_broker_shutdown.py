"""The broker as an operable server: SIGTERM and SIGINT stop it gracefully whatever signal dispositions
it inherited (a background job of a non-interactive shell starts with SIGINT ignored), a request in
flight is answered before the connection closes, and a log written under load restarts intact."""
from __future__ import annotations

import signal
import threading
import time

import pytest

from kafkawire import messages as m

from support.broker_harness import RawClient
from support.broker_process import BrokerProcess
from support.broker_wire import create_topic

confluent_kafka = pytest.importorskip("confluent_kafka")


def stop(broker: BrokerProcess, signum: int) -> int:
    broker.proc.send_signal(signum)
    code = broker.proc.wait(15)
    broker.proc.stdout.close()
    return code


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_broker_with_exit_0_even_if_sigint_was_ignored(tmp_path, signum):
    # the broker inherits SIGINT ignored, as under `cmd &` in a script
    original = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        broker = BrokerProcess(tmp_path)
    finally:
        signal.signal(signal.SIGINT, original)
    assert stop(broker, signum) == 0


def test_a_parked_fetch_is_answered_before_the_connection_closes(tmp_path):
    broker = BrokerProcess(tmp_path)
    try:
        with RawClient(broker.port) as client:
            create_topic(client, "parked", 1)
            client.send(m.FetchRequest(replica_id=-1, max_wait_ms=30_000, min_bytes=1, max_bytes=1 << 20, topics=[
                m.FetchRequest.FetchTopic(topic="parked", partitions=[m.FetchRequest.FetchPartition(
                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                    log_start_offset=-1)])], forgotten_topics_data=[], rack_id=""), 12)
            time.sleep(0.3)  # the fetch is parked, waiting for data
            started = time.monotonic()
            broker.proc.send_signal(signal.SIGTERM)
            response = client.receive()
            assert response.responses[0].partitions[0].error_code == 0
            assert time.monotonic() - started < 5  # answered at once, not after its 30 s
        assert broker.proc.wait(15) == 0
    finally:
        broker.kill()


def test_sigterm_during_a_produce_load_leaves_a_log_that_restarts_intact(tmp_path):
    broker = BrokerProcess(tmp_path)
    with RawClient(broker.port) as client:
        create_topic(client, "load", 2)
    acknowledged: list[str] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "enable.idempotence": True,
                                         "linger.ms": 2, "log_level": 0, "message.timeout.ms": 3000})

    def delivered(error, message):
        if error is None:
            acknowledged.append(message.value().decode())

    running = True

    def produce():
        i = 0
        while running:
            try:
                producer.produce("load", value=f"v{i}", partition=i % 2, on_delivery=delivered)
                i += 1
            except BufferError:
                pass
            producer.poll(0.001)

    thread = threading.Thread(target=produce)
    thread.start()
    deadline = time.monotonic() + 10
    while len(acknowledged) < 1000 and time.monotonic() < deadline:
        time.sleep(0.01)
    code = stop(broker, signal.SIGTERM)
    running = False
    thread.join()
    producer.purge()  # whatever was not acknowledged fails: the broker is gone
    producer.flush(2)
    assert code == 0 and len(acknowledged) >= 1000

    restarted = BrokerProcess(tmp_path)
    try:
        consumer = confluent_kafka.Consumer({"bootstrap.servers": f"127.0.0.1:{restarted.port}", "group.id": "check",
                                             "auto.offset.reset": "earliest", "enable.partition.eof": True,
                                             "log_level": 0})
        consumer.subscribe(["load"])
        values, at_end, deadline = [], set(), time.monotonic() + 20
        while len(at_end) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                at_end.add(message.partition())
                continue
            values.append(message.value().decode())
        consumer.close()
        assert len(values) == len(set(values))  # nothing twice
        assert set(acknowledged) <= set(values)  # nothing acknowledged lost
    finally:
        restarted.kill()

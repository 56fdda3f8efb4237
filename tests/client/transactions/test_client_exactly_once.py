"""Exactly-once consume-transform-produce with kafkawire's client: a worker process (eos_worker.py)
killed with SIGKILL in the middle of a transaction and started again leaves every input in the output
exactly once for a read_committed reader, while the killed transaction's records are in the log
(read_uncommitted sees them) and aborted."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.broker_harness import BrokerThread
from kafkawire.client import Consumer, Producer, TopicPartition
from support.paths import REPO

PARTITIONS = 2
PER_PARTITION = 100
TIMEOUT_S = 60  # a bound for a loaded machine; each run takes a few seconds
WORKER = Path(__file__).with_name("eos_worker.py")


@pytest.fixture(scope="module", params=[1, 2], ids=["txn-v1", "txn-v2"])
def broker(request, tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("eos-broker"), num_partitions=PARTITIONS,
                      transaction_version=request.param) as running:
        yield running


def start_worker(bootstrap: str, source: str, sink: str, hold: int = 0) -> subprocess.Popen:
    """The worker; with ``hold``, it waits after the hold-th transaction's records are written."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, str(WORKER), bootstrap, source, sink, str(PARTITIONS),
                             str(PER_PARTITION), str(hold)], stdin=subprocess.PIPE if hold else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, text=True, env=env)


def read(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value of ``topic`` that ``isolation`` lets through (read until the high watermarks)."""
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as consumer:
        consumer.assign(partitions)
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            values += [record.value for record in consumer.poll(timeout_ms=100)]
            if all(0 <= consumer.highwater(tp) <= consumer.position(tp) for tp in partitions):
                return values
        raise AssertionError(f"{topic} not read to its end within {TIMEOUT_S} s")


def test_a_worker_killed_mid_transaction_and_restarted_writes_every_input_exactly_once(broker):
    source, sink = "eos-in", "eos-out"
    inputs = {p: [b"in-%d-%03d" % (p, i) for i in range(PER_PARTITION)] for p in range(PARTITIONS)}
    with Producer(bootstrap_servers=broker.bootstrap) as producer:
        for partition, values in inputs.items():
            for value in values:
                producer.send(source, value, partition=partition)
        producer.flush()

    first = start_worker(broker.bootstrap, source, sink, hold=3)
    try:
        assert first.stdout is not None
        begun: list[int] = []  # the records of each transaction begun
        for line in first.stdout:
            if line.startswith("begun"):
                begun.append(int(line.split()[1]))
            if len(begun) == 3:  # the worker holds: the third transaction's records are in the log, uncommitted
                first.send_signal(signal.SIGKILL)
                break
        assert first.wait(TIMEOUT_S) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
    assert len(begun) == 3
    second = start_worker(broker.bootstrap, source, sink)
    try:
        assert second.wait(TIMEOUT_S) == 0
    finally:
        if second.poll() is None:
            second.kill()

    expected = sorted(value + b"-out" for values in inputs.values() for value in values)
    assert sorted(read(broker.bootstrap, sink, "read_committed")) == expected
    everything = read(broker.bootstrap, sink, "read_uncommitted")
    assert len(everything) == len(expected) + begun[2]  # the killed transaction's records, aborted
    assert set(everything) == set(expected)

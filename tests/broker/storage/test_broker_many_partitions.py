"""Start and stop with Kafka's default partition limit (issue 33): a broker process holding 10,000
partitions (50 topics x 200) restarts and answers, and stops on SIGTERM, in about the time the same
command takes with no partitions (their logs open on first use). The bounds are relative to that
empty broker's, measured in the same test, and generous, so that a loaded machine slows both alike;
bench/broker_lifecycle.py measures the figures."""
from __future__ import annotations

import signal
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkawire.broker.storage.log import PartitionLog
from support.broker_process import BrokerProcess
from support.log_helpers import batch, open_log

TOPICS, PARTITIONS = 50, 200
START_TIMEOUT_S = 120  # (a loaded machine)


def bound(empty_s: float) -> float:
    """What a start or stop with the partitions may take, given the same with none."""
    return 4 * empty_s + 5


def start(data_dir) -> tuple[BrokerProcess, float]:
    """A broker on ``data_dir`` and the seconds until it answers a request."""
    started = time.monotonic()
    broker = BrokerProcess(data_dir, start_timeout_s=START_TIMEOUT_S)
    api_versions(broker.port)
    return broker, time.monotonic() - started


def api_versions(port: int) -> None:
    """One ApiVersions v0 round trip on a new connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        request = struct.pack(">hhih", 18, 0, 1, -1)  # ApiVersions v0, correlation id 1, no client id
        sock.sendall(struct.pack(">i", len(request)) + request)
        answer = b""
        while len(answer) < 10:
            more = sock.recv(65536)
            assert more, "closed before answering"
            answer += more
        assert struct.unpack(">ih", answer[4:10]) == (1, 0)  # correlation id, no error


def stop(broker: BrokerProcess) -> float:
    """SIGTERM, then the seconds until the process exits."""
    started = time.monotonic()
    broker.proc.send_signal(signal.SIGTERM)
    broker.proc.wait(120)
    seconds = time.monotonic() - started
    broker.proc.stdout.close()
    assert broker.proc.returncode == 0
    return seconds


def high_watermark(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "many-partitions"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A data folder with 10,000 partitions and one record in idle-007 partition 123, closed cleanly."""
    folder = tmp_path_factory.mktemp("many-partitions")
    broker = BrokerProcess(folder, start_timeout_s=START_TIMEOUT_S)
    try:
        bootstrap = f"127.0.0.1:{broker.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for t in range(TOPICS):
            for future in admin.create_topics([NewTopic(f"idle-{t:03d}", PARTITIONS, 1)],
                                              operation_timeout=60).values():
                future.result(120)
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("idle-007", b"kept", partition=123)
        assert producer.flush(60) == 0
        stop(broker)
    finally:
        broker.kill()
    return folder


def test_a_restart_answers_and_a_sigterm_stops_in_bounded_time(data_dir, tmp_path):
    empty, empty_start = start(tmp_path / "empty")
    try:
        empty_stop = stop(empty)
    finally:
        empty.kill()
    broker, restarted = start(data_dir)
    try:
        bootstrap = f"127.0.0.1:{broker.port}"
        assert high_watermark(bootstrap, "idle-007", 123) == 1  # a log opened on first use has its record
        assert high_watermark(bootstrap, "idle-049", 199) == 0
        stopped = stop(broker)
    finally:
        broker.kill()
    assert restarted < bound(empty_start), (restarted, empty_start)
    assert stopped < bound(empty_stop), (stopped, empty_stop)


def test_the_partitions_survive_a_second_restart(data_dir):
    """A log never opened closes as it was: its folder (made after the creation, or not yet: made on
    first use) is left untouched, and a clean-shutdown marker in it still vouches for it."""
    never_opened = data_dir / "idle-020-5"
    before = folder_state(never_opened)
    for _ in range(2):
        broker = BrokerProcess(data_dir, start_timeout_s=START_TIMEOUT_S)
        try:
            assert high_watermark(f"127.0.0.1:{broker.port}", "idle-007", 123) == 1
            stop(broker)
        finally:
            broker.kill()
    assert folder_state(never_opened) == before
    assert before is None or before[".kafkawire-clean-shutdown"] == b"0 0"


def folder_state(folder) -> dict[str, bytes] | None:
    """Each file's bytes, or None when there is no folder."""
    return {f.name: f.read_bytes() for f in folder.iterdir()} if folder.exists() else None


# ---- a log opened on first use (in process) ----------------------------------------------------------

def test_a_lazy_log_opens_on_first_use_and_closes_untouched_when_never_used(tmp_path):
    with open_log(tmp_path / "t-0") as written:
        written.append(batch([b"a", b"b"]))
    PartitionLog(tmp_path / "t-1").close()
    lazy = PartitionLog(tmp_path / "t-0", lazy=True)
    assert not lazy.opened
    assert lazy.log_end_offset == 2 and lazy.opened  # (opened by the first use)
    lazy.close()
    untouched = PartitionLog(tmp_path / "t-1", lazy=True)
    marker = tmp_path / "t-1" / ".kafkawire-clean-shutdown"
    before = marker.read_text()
    untouched.close()
    assert not untouched.opened and marker.read_text() == before


def test_only_a_log_holding_records_is_opened_for_retention(tmp_path):
    """A pass over every log (retention) skips an idle, empty one without opening it."""
    with open_log(tmp_path / "t-0") as written:
        written.append(batch([b"a"]))
    PartitionLog(tmp_path / "t-1").close()
    holding, empty = PartitionLog(tmp_path / "t-0", lazy=True), PartitionLog(tmp_path / "t-1", lazy=True)
    assert not holding.empty_on_disk() and empty.empty_on_disk()
    assert not holding.opened and not empty.opened
    assert empty.log_end_offset == 0  # opened now
    assert not empty.empty_on_disk()  # (an opened log is asked directly)

"""Kafka's limits in the broker, each with its Kafka name (issue 17): max.connections,
max.connections.per.ip and its overrides, connections.max.idle.ms, the 10,000-record cap of one
topic operation, max.broker.partitions, a handler that fails, the descriptor cache of the logs, and
the directories of topics that do not exist."""
from __future__ import annotations

import os
import socket
import time

import pytest

from support.broker_harness import BrokerThread, RawClient
from kafkawire import messages as m
from kafkawire.broker.config.broker_config import BrokerConfig
from kafkawire.broker.storage.log import PartitionLog
from kafkawire.broker.storage.descriptors import DescriptorCache
from kafkawire.records import RecordBatchBuilder, iter_records
from support.broker_wire import create_topic, fetch, produce

API_VERSIONS = m.ApiVersionsRequest(client_software_name="limits", client_software_version="1")


def _closed_by_broker(sock: socket.socket, timeout: float = 5) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _wait(condition, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# ---- connections ---------------------------------------------------------------------------------------------

def test_max_connections_refuses_the_one_over(tmp_path):
    with BrokerThread(data_dir=tmp_path, max_connections=5) as broker:
        clients = [RawClient(broker.port) for _ in range(5)]
        for client in clients:
            assert client.request(API_VERSIONS, 3).error_code == 0
        with socket.create_connection(("127.0.0.1", broker.port)) as extra:
            assert _closed_by_broker(extra)
        clients.pop().close()
        _wait(lambda: broker.broker.limits.total == 4)
        with RawClient(broker.port) as again:  # a slot is free again
            assert again.request(API_VERSIONS, 3).error_code == 0
        for client in clients:
            client.close()
        assert broker.broker.limits.refused == 1


def test_max_connections_per_ip_and_its_overrides(tmp_path):
    config = BrokerConfig.from_properties({"max.connections.per.ip": "2",
                                           "max.connections.per.ip.overrides": "10.1.1.1:50"},
                                          data_dir=tmp_path, port=0, group_initial_rebalance_delay_ms=0)
    assert config.connection_limit_for("10.1.1.1") == 50 and config.connection_limit_for("127.0.0.1") == 2
    with BrokerThread(config=config) as broker:
        first, second = RawClient(broker.port), RawClient(broker.port)
        with socket.create_connection(("127.0.0.1", broker.port)) as third:
            assert _closed_by_broker(third)
        assert first.request(API_VERSIONS, 3).error_code == 0 and second.request(API_VERSIONS, 3).error_code == 0
        first.close()
        second.close()


def test_idle_connections_are_closed_after_connections_max_idle_ms(tmp_path):
    with BrokerThread(data_dir=tmp_path, connections_max_idle_ms=300) as broker:
        with RawClient(broker.port) as busy, socket.create_connection(("127.0.0.1", broker.port)) as idle:
            started = time.monotonic()
            while time.monotonic() - started < 0.8:  # a client that keeps talking is not idle
                assert busy.request(API_VERSIONS, 3).error_code == 0
                time.sleep(0.05)
            assert _closed_by_broker(idle, timeout=2)
            assert busy.request(API_VERSIONS, 3).error_code == 0


def test_a_parked_fetch_is_not_idle(tmp_path):
    with BrokerThread(data_dir=tmp_path, connections_max_idle_ms=200) as broker, RawClient(broker.port) as client:
        create_topic(client, "parked", 1)
        response = fetch(client, [("parked", 0, 0, 1 << 20)], min_bytes=1, max_wait_ms=800)
        assert response.error_code == 0  # answered at MaxWaitMs, not cut off as idle


def test_bad_properties_are_refused_with_their_name(tmp_path):
    with pytest.raises(ValueError, match="unknown broker setting 'max.conections'"):
        BrokerConfig.from_properties({"max.conections": "5"}, data_dir=tmp_path)
    with pytest.raises(ValueError, match="invalid value 'lots' for queued.max.request.bytes"):
        BrokerConfig.from_properties({"queued.max.request.bytes": "lots"}, data_dir=tmp_path)
    with pytest.raises(ValueError, match="max.connections must be positive"):
        BrokerConfig.from_properties({"max.connections": "0"}, data_dir=tmp_path)
    with pytest.raises(ValueError, match="topic_defaults: Invalid value shrink for configuration cleanup.policy"):
        BrokerThread(data_dir=tmp_path, topic_defaults={"cleanup.policy": "shrink"}).start()


# ---- a failing handler -------------------------------------------------------------------------------------------

def test_a_handler_that_raises_answers_unknown_server_error_and_keeps_the_connection(tmp_path, caplog):
    with BrokerThread(data_dir=tmp_path) as broker, RawClient(broker.port) as client:
        create_topic(client, "fails", 2)

        async def broken(request, version, context):
            raise RuntimeError("a bug in a handler")
        broker.broker.handlers.table[2] = broken  # ListOffsets
        request = m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
            name="fails", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=-1)
                                      for p in (0, 1)])])
        response = client.request(request, 7)
        assert [p.error_code for p in response.topics[0].partitions] == [-1, -1]
        assert client.request(API_VERSIONS, 3).error_code == 0
    assert sum("a bug in a handler" in r.getMessage() or (r.exc_info and "a bug" in str(r.exc_info[1]))
               for r in caplog.records) == 1


# ---- topics --------------------------------------------------------------------------------------------------------

def test_more_than_10000_records_in_one_operation_is_a_policy_violation(tmp_path):
    with BrokerThread(data_dir=tmp_path) as broker, RawClient(broker.port) as client:
        topics = [m.CreateTopicsRequest.CreatableTopic(name=f"t{i}", num_partitions=2500, replication_factor=1)
                  for i in range(4)]  # 4 topics + 10,000 partitions
        results = client.request(m.CreateTopicsRequest(topics=topics, timeout_ms=1000), 7).topics
        assert {r.error_code for r in results} == {44}
        assert not any(entry.is_dir() and entry.name.startswith("t") for entry in tmp_path.iterdir())
        # Metadata auto-creation obeys the same cap, and max.broker.partitions
        names = [m.MetadataRequest.MetadataRequestTopic(name=f"auto-{i}") for i in range(3)]
        response = client.request(m.MetadataRequest(topics=names, allow_auto_topic_creation=True), 12)
        assert [t.error_code for t in response.topics] == [0, 0, 0]


def test_auto_creation_stops_at_max_broker_partitions(tmp_path):
    with BrokerThread(data_dir=tmp_path, max_broker_partitions=5, num_partitions=2) as broker, \
            RawClient(broker.port) as client:
        names = [m.MetadataRequest.MetadataRequestTopic(name=f"auto-{i}") for i in range(4)]
        response = client.request(m.MetadataRequest(topics=names, allow_auto_topic_creation=True), 12)
        assert [t.error_code for t in response.topics] == [0, 0, 44, 44]
        assert broker.broker.topics.partition_count == 4


def test_stray_partition_directories_are_removed_at_start(tmp_path):
    with BrokerThread(data_dir=tmp_path) as broker, RawClient(broker.port) as client:
        create_topic(client, "kept", 2)
        deadline = time.monotonic() + 30  # (the folders are made after the answer, off the loop)
        while not all((tmp_path / f"kept-{index}").is_dir() for index in (0, 1)):
            assert time.monotonic() < deadline, "the topic's folders were not made"
            time.sleep(0.02)
    (tmp_path / "gone-0").mkdir()  # a creation cut short by a crash
    (tmp_path / "gone-0" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "kept-7").mkdir()  # a partition the topic does not have
    (tmp_path / "notes-1").mkdir()  # not a log directory: left alone
    (tmp_path / "notes-1" / "readme.txt").write_text("mine")
    with BrokerThread(data_dir=tmp_path):
        names = {entry.name for entry in tmp_path.iterdir() if entry.is_dir()}
    assert {"kept-0", "kept-1", "notes-1"} <= names and not names & {"gone-0", "kept-7"}


def test_a_folder_that_cannot_be_made_after_a_creation_is_made_on_first_use(tmp_path, monkeypatch):
    """A creation answers once its topic is recorded (as Kafka's controller does); the folders are made
    afterwards, and one that fails then (a full disk) is made by the log's first use."""
    with BrokerThread(data_dir=tmp_path) as broker, RawClient(broker.port) as client:
        failed = []
        real = PartitionLog.make_folder

        def flaky(self):
            if self.name == "flaky-2":
                failed.append(self.name)
                raise OSError(28, "No space left on device")
            real(self)
        monkeypatch.setattr(PartitionLog, "make_folder", flaky)
        create_topic(client, "flaky", 5)
        deadline = time.monotonic() + 60
        while not (failed and (tmp_path / "flaky-4" / ".kafkawire-clean-shutdown").exists()):
            assert time.monotonic() < deadline, "the folders were not made"
            time.sleep(0.02)
        monkeypatch.undo()
        assert not (tmp_path / "flaky-2").exists()
        builder = RecordBatchBuilder()
        builder.append(b"kept")
        produced = produce(client, "flaky", 2, builder.build())
        assert produced.error_code == 0 and (tmp_path / "flaky-2" / "00000000000000000000.log").stat().st_size > 0


# ---- descriptors -------------------------------------------------------------------------------------------------

def test_the_descriptor_cache_bounds_open_segment_files_and_reads_stay_right(tmp_path):
    cache = DescriptorCache(4)
    logs = [PartitionLog(tmp_path / f"p-{i}", descriptors=cache) for i in range(12)]
    for index, log in enumerate(logs):
        for round_ in range(3):
            builder = RecordBatchBuilder()
            builder.append(f"{index}-{round_}".encode())
            log.append(builder.build())
    assert len(cache) <= 4 and cache.evictions > 0
    opened = len(os.listdir("/proc/self/fd"))
    for index, log in enumerate(logs):  # every log reads back its own records, reopening as needed
        read = log.read(0, 1 << 20, True)
        assert [r.value for r in iter_records(read.records)] == [f"{index}-{r}".encode() for r in range(3)]
    assert len(os.listdir("/proc/self/fd")) <= opened + 4 * 3
    for log in logs:
        log.close()
    assert len(cache) == 0

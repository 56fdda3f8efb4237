"""Several log.dirs (JBOD): placement, AlterReplicaLogDirs moving a live partition, DescribeLogDirs,
a failed directory taken offline, and a restart finding partitions in every directory."""
from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

from kafkawire import messages as m
from kafkawire.broker import BrokerConfig
from kafkawire.broker.background import BrokerThread

kafka = pytest.importorskip("kafka")
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402
from kafka.errors import KafkaStorageError  # noqa: E402
from kafka.structs import TopicPartition, TopicPartitionReplica  # noqa: E402
from support.broker_harness import RawClient  # noqa: E402
from support.broker_wire import by_partition, fetch  # noqa: E402

TIMEOUT = 30


def _wait(condition, what: str):
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _placement(admin: KafkaAdminClient, topic: str) -> dict[tuple[int, bool], str]:
    """(partition, future?) -> the log directory DescribeLogDirs shows it in."""
    [described] = admin.describe_log_dirs()
    return {(p["partition_index"], p["is_future_key"]): d["log_dir"] for d in described["log_dirs"]
            for t in d["topics"] if t["name"] == topic for p in t["partitions"]}


@pytest.fixture
def dirs(tmp_path):
    return tmp_path / "a", tmp_path / "b"


def _broker(dirs, **settings) -> BrokerThread:
    # as server.properties gives them: log.dirs=a,b
    config = BrokerConfig.from_properties({"log.dirs": ",".join(map(str, dirs))}, port=0, **settings)
    return BrokerThread(config)


def test_move_a_partition_while_a_producer_writes(dirs):
    from kafka import KafkaConsumer, KafkaProducer
    with _broker(dirs, segment_bytes=16 * 1024) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("moving", 4, 1)])
        placed = _placement(admin, "moving")
        resolved = [str(d.resolve()) for d in dirs]
        assert sorted(placed.values()) == sorted(resolved * 2)  # the fewest partitions first: two each
        source = placed[(0, False)]
        destination = next(d for d in resolved if d != source)

        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 fetch_max_wait_ms=100)
        consumer.assign([TopicPartition("moving", 0)])
        sent: list[bytes] = []
        read: list[bytes] = []
        stop = threading.Event()

        def produce() -> None:
            while not stop.is_set() or len(sent) < 200:
                value = b"%06d" % len(sent)
                producer.send("moving", value, partition=0).get(timeout=TIMEOUT)
                sent.append(value)

        def consume() -> None:  # a consumer reading through the move
            deadline = time.monotonic() + 3 * TIMEOUT
            while not (stop.is_set() and not writer.is_alive() and len(read) >= len(sent)) \
                    and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    read.extend(record.value for record in records)
        writer, reader = threading.Thread(target=produce), threading.Thread(target=consume)
        writer.start()
        reader.start()
        try:
            _wait(lambda: len(sent) >= 100, "records before the move")
            result = admin.alter_replica_log_dirs({TopicPartitionReplica("moving", 0, 0): destination})
            assert [error.errno for error in result.values()] == [0]
            _wait(lambda: _placement(admin, "moving").get((0, False)) == destination, "the move to end")
        finally:
            stop.set()
            writer.join(TIMEOUT)
            reader.join(3 * TIMEOUT)
        producer.close()
        consumer.close()
        assert not writer.is_alive() and not reader.is_alive()
        assert read == sent  # every record, in order, once
        assert not (dirs[0 if source == resolved[0] else 1] / "moving-0").exists()
        assert list((dirs[0 if destination == resolved[0] else 1] / "moving-0").glob("*.log"))
        admin.close()


def test_alter_replica_log_dirs_errors(dirs):
    with _broker(dirs) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("errors", 1, 1)])
        result = admin.alter_replica_log_dirs({TopicPartitionReplica("errors", 0, 0): str(dirs[0].parent / "c"),
                                               TopicPartitionReplica("missing", 0, 0): str(dirs[1])})
        assert {replica.topic: error.errno for replica, error in result.items()} == {"errors": 57, "missing": 3}
        admin.close()


def test_a_failed_directory_goes_offline_and_the_other_serves(dirs):
    from kafka import KafkaProducer
    with _broker(dirs) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("failing", 2, 1)])
        placed = _placement(admin, "failing")
        lost = next(i for i, d in enumerate(dirs) if str(d.resolve()) == placed[(0, False)])
        shutil.rmtree(dirs[lost])
        _wait(lambda: any(d["error_code"] == 56 for d in admin.describe_log_dirs()[0]["log_dirs"]), "offline dir")
        [described] = admin.describe_log_dirs()
        assert {d["log_dir"]: d["error_code"] for d in described["log_dirs"]} == {
            str(dirs[lost].resolve()): 56, str(dirs[1 - lost].resolve()): 0}
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
        with pytest.raises(KafkaStorageError):
            producer.send("failing", b"x", partition=0).get(timeout=TIMEOUT)
        assert producer.send("failing", b"y", partition=1).get(timeout=TIMEOUT).offset == 0
        producer.close()
        admin.close()
        with RawClient(broker.port) as client:  # Fetch and ListOffsets: the lost partition only
            fetched = by_partition(fetch(client, [("failing", 0, 0, 1 << 20), ("failing", 1, 0, 1 << 20)]))
            assert [fetched[("failing", p)].error_code for p in (0, 1)] == [56, 0]
            listed = client.request(m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
                name="failing", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=-1)
                                            for p in (0, 1)])]), 7)
            assert [(p.error_code, p.offset) for p in listed.topics[0].partitions] == [(56, -1), (0, 1)]


def test_restart_finds_partitions_in_every_directory(dirs):
    from kafka import KafkaConsumer, KafkaProducer
    with _broker(dirs) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("kept", 2, 1)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for partition in (0, 1):
            producer.send("kept", b"%d" % partition, partition=partition).get(timeout=TIMEOUT)
        producer.close()
    assert (dirs[0] / "kept-0").is_dir() != (dirs[0] / "kept-1").is_dir()
    leftover = dirs[1] / "kept-0.0123456789abcdef0123456789abcdef-future"  # a move a crash cut short
    leftover.mkdir()
    with _broker(dirs) as broker:
        assert not leftover.exists()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 consumer_timeout_ms=3000)
        consumer.assign([TopicPartition("kept", 0), TopicPartition("kept", 1)])
        assert sorted(record.value for record in consumer) == [b"0", b"1"]
        consumer.close()


def test_describe_log_dirs_shows_the_future_log_of_a_move(dirs):
    """While a move is under way (here: started, its copy not yet run), DescribeLogDirs shows the
    partition's future log in the directory it goes to, beside the current one."""
    from kafkawire.broker.apis.partitions_admin import PartitionAdminApis

    with _broker(dirs) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("future", 1, 1)])
        admin.close()
        topics = broker.broker.topics
        source = str(topics.get("future").partitions[0].directory.parent)
        destination = next(d for d in topics.dirs.paths if d != source)

        async def start_and_describe():
            topics.move(topics.get("future"), 0, destination)  # the copy starts at the next await
            return await PartitionAdminApis(broker.broker.handlers.state).describe_log_dirs(
                m.DescribeLogDirsRequest(topics=None), 4, None)
        response = broker.call(start_and_describe())
        shown = {(r.log_dir, p.is_future_key) for r in response.results for t in r.topics for p in t.partitions}
        assert shown == {(os.path.realpath(source), False), (os.path.realpath(destination), True)}
        _wait(lambda: str(topics.get("future").partitions[0].directory.parent) == destination
              and not topics.dirs.moves, "the move")  # (read from another thread than the broker's)


def test_an_append_that_fails_takes_its_directory_offline(dirs, monkeypatch):
    """The I/O error itself (a segment roll in a removed directory), not the periodic check, takes the
    directory offline."""
    from kafka import KafkaProducer
    from kafkawire.broker import server
    monkeypatch.setattr(server, "_LOG_DIR_CHECK_S", 3600.0)
    with _broker(dirs, segment_bytes=1024) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("rolling", 2, 1)])
        admin.close()
        topics = broker.broker.topics
        lost = str(topics.get("rolling").partitions[0].directory.parent)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
        producer.send("rolling", b"a" * 600, partition=0).get(timeout=TIMEOUT)
        shutil.rmtree(lost)
        assert not topics.dirs.offline
        with pytest.raises(KafkaStorageError):  # the second batch rolls a segment: there is no folder
            producer.send("rolling", b"b" * 600, partition=0).get(timeout=TIMEOUT)
        assert topics.dirs.offline == {lost}
        assert producer.send("rolling", b"c", partition=1).get(timeout=TIMEOUT).offset == 0
        producer.close()

"""Crash safety of transactions (issue 22, "Crash safety"): the broker runs as a real process and is
killed with SIGKILL while a confluent-kafka transactional producer runs 20 transactions (a known
pattern of commits and aborts, each over every partition); it restarts on the same data directory (on a
new port) and a new producer instance with the same transactional.id carries on.

Afterwards a read_committed consumer sees exactly the records of the transactions whose
commit_transaction() returned, each once, in order in every partition, and stops at the high watermark
(no transaction left hanging); the group offsets each transaction sent (send_offsets_to_transaction)
are committed exactly when its records are; a read_uncommitted consumer sees those and every aborted record that was
written. A transaction whose PrepareCommit was durable when the broker died is completed by the restart:
its markers are written and read_committed consumers see it.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from support.broker_harness import RawClient
from support.broker_process import SEGMENT_BYTES, BrokerProcess
from support.broker_wire import create_topic
from kafkawire.broker.storage.config import LogConfig
from kafkawire.broker.storage.log import PartitionLog
from kafkawire.records import RecordBatch, iter_batches
from kafkawire.records.control import ControlType, control_record

TOPIC = "txn-crash"
PARTITIONS = 3
TRANSACTIONS = 20
RECORDS_PER_TRANSACTION = 6  # two per partition
STATE_LOG = "transaction-state.jsonl"
INPUT = "txn-crash-input"  # transaction i commits the group's offset i + 1 in it, as a consume-transform-produce would
GROUP = "txn-crash-group"


def commits(i: int) -> bool:
    """The pattern: every third transaction is aborted."""
    return i % 3 != 2


def transactional_producer(port: int, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "transactional.id": transactional_id,
                         "transaction.timeout.ms": 10_000, "linger.ms": 2, "reconnect.backoff.ms": 10,
                         "reconnect.backoff.max.ms": 100, "retry.backoff.ms": 20, "retry.backoff.max.ms": 100})
    producer.init_transactions(15)  # after a crash: fences the old instance and aborts what it left open
    return producer


def keys_of(i: int) -> list[tuple[int, bytes]]:
    return [(j % PARTITIONS, f"txn{i}-{j}".encode()) for j in range(RECORDS_PER_TRANSACTION)]


def write_transaction(producer: Producer, i: int) -> None:
    """Begin transaction ``i`` and write its records; flush() returns once the broker acknowledged them."""
    producer.begin_transaction()
    for partition, key in keys_of(i):
        producer.produce(TOPIC, key=key, value=key * 4, partition=partition)
    assert producer.flush(10) == 0


def group_metadata(port: int):
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": GROUP})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def committed_offset(port: int) -> int:
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": GROUP})
    try:
        return consumer.committed([TopicPartition(INPUT, 0)], 10)[0].offset
    finally:
        consumer.close()


def end_transaction(producer: Producer, i: int, timeout: float = 10) -> None:
    if commits(i):
        producer.commit_transaction(timeout)
    else:
        producer.abort_transaction(timeout)


def consume_all(port: int, isolation: str, topic: str = TOPIC,
                partitions: int = PARTITIONS) -> tuple[dict[int, list[bytes]], dict[int, tuple[int, int]]]:
    """Every record of ``topic`` in each partition, read from the start until EOF: keys per partition,
    and (position at EOF, high watermark) per partition."""
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": f"check-{isolation}",
                         "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        keys: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        ends: dict[int, tuple[int, int]] = {}
        deadline = time.monotonic() + 15
        while len(ends) < partitions:
            assert time.monotonic() < deadline, f"{isolation}: no EOF on {set(range(partitions)) - set(ends)}"
            message = consumer.poll(1)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == -191, message.error()  # _PARTITION_EOF
                partition = message.partition()
                position = consumer.position([TopicPartition(topic, partition)])[0].offset
                ends[partition] = (position, consumer.get_watermark_offsets(TopicPartition(topic, partition))[1])
                continue
            ends.pop(message.partition(), None)
            keys[message.partition()].append(message.key())
        return keys, ends
    finally:
        consumer.close()


def expected(transactions) -> dict[int, list[bytes]]:
    by_partition: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in transactions:
        for partition, key in keys_of(i):
            by_partition[partition].append(key)
    return by_partition


def is_subsequence(wanted: list, seen: list) -> bool:
    remaining = iter(seen)
    return all(key in remaining for key in wanted)


def restart(start, broker: BrokerProcess, data_dir: Path) -> BrokerProcess:
    broker.kill()
    return start(data_dir)


def test_kills_between_during_and_inside_transactions(processes, tmp_path):
    data_dir = tmp_path / "data"
    broker = processes(data_dir)
    with RawClient(broker.port) as admin:
        create_topic(admin, TOPIC, PARTITIONS)
        create_topic(admin, INPUT, 1)
    producer = transactional_producer(broker.port, "crash-txn")
    metadata = group_metadata(broker.port)
    committed: list[int] = []  # commit_transaction() returned
    written: list[int] = []  # records acknowledged (committed, aborted or left open)
    uncertain: list[int] = []  # the broker died during commit_transaction(): all or nothing
    for i in range(TRANSACTIONS):
        if i == 6:  # killed between two transactions
            broker = restart(processes, broker, data_dir)
            assert committed_offset(broker.port) == committed[-1] + 1
            producer = transactional_producer(broker.port, "crash-txn")
        write_transaction(producer, i)
        written.append(i)
        producer.send_offsets_to_transaction([TopicPartition(INPUT, 0, i + 1)], metadata, 10)
        if i == 11:  # killed with the transaction open: the next instance's init aborts it
            broker = restart(processes, broker, data_dir)
            producer = transactional_producer(broker.port, "crash-txn")
            # the open transaction's offset was aborted with it (before the init ended it, a read_committed
            # OffsetFetch is answered UNSTABLE_OFFSET_COMMIT, KIP-447, and librdkafka retries)
            assert committed_offset(broker.port) == committed[-1] + 1
            continue
        if i == 16:  # killed while the commit is in flight: the transaction is whole or absent
            killer = threading.Timer(0.002, broker.kill)
            killer.start()
            try:
                end_transaction(producer, i, timeout=2)
            except KafkaException:
                uncertain.append(i)
            else:
                committed.append(i)
            killer.join()
            broker = restart(processes, broker, data_dir)
            producer = transactional_producer(broker.port, "crash-txn")  # completes or aborts it
            offset_after_crash = committed_offset(broker.port)  # i or i + 1: checked against the data below
            continue
        end_transaction(producer, i)
        if commits(i):
            committed.append(i)

    read_committed, ends = consume_all(broker.port, "read_committed")
    for partition, (position, high_watermark) in ends.items():
        assert position == high_watermark, f"partition {partition}: a transaction still open at {position}"
    for uncertain_i in uncertain:  # wholly visible (the PrepareCommit was durable) or not at all
        visible = [key for p, key in keys_of(uncertain_i) if key in read_committed[p]]
        assert len(visible) in (0, RECORDS_PER_TRANSACTION), visible
        if visible:
            committed.append(uncertain_i)
    assert offset_after_crash == max(i for i in committed if i <= 16) + 1  # offsets and output together
    assert read_committed == expected(sorted(committed))
    assert committed_offset(broker.port) == max(committed) + 1  # the offsets went with the output

    read_uncommitted, _ = consume_all(broker.port, "read_uncommitted")
    wanted = expected(written)
    for partition in range(PARTITIONS):
        seen = read_uncommitted[partition]
        assert len(set(seen)) == len(seen), f"partition {partition}: a record twice"
        assert is_subsequence(wanted[partition], seen), partition  # every acknowledged record, in order


def markers_in(partition_dir: Path) -> list[tuple[int, ControlType]]:
    """(producer id, COMMIT/ABORT) of the transaction markers in a partition's segment files."""
    found = []
    for segment in sorted(partition_dir.glob("*.log")):
        for batch in iter_batches(segment.read_bytes()):
            assert isinstance(batch, RecordBatch)
            if batch.is_control:
                found.append((batch.producer_id, control_record(next(iter(batch.records()))).type))
    return found


def test_a_durable_prepare_commit_completes_on_restart(processes, tmp_path):
    """The broker dies after writing PrepareCommit and one of the three markers (the state log line and
    the marker written by hand, as the coordinator writes them): the restart writes the markers and
    completes the commit."""
    data_dir = tmp_path / "data"
    broker = processes(data_dir)
    with RawClient(broker.port) as admin:
        create_topic(admin, TOPIC, PARTITIONS)
    producer = transactional_producer(broker.port, "prepared")
    write_transaction(producer, 0)
    broker.kill()
    del producer

    state_log = data_dir / STATE_LOG
    ongoing = json.loads(state_log.read_text().splitlines()[-1])
    assert (ongoing["t"], ongoing["s"]) == ("prepared", "Ongoing")
    assert sorted(map(tuple, ongoing["p"])) == [(TOPIC, p) for p in range(PARTITIONS)]
    prepare = dict(ongoing, s="PrepareCommit", ut=ongoing["ut"] + 1)
    if ongoing["v"] >= 2:  # transaction version 2 bumps the epoch with the decision
        prepare.update(e=ongoing["e"] + 1, le=ongoing["e"])
    with state_log.open("a") as file:
        file.write(json.dumps(prepare) + "\n")
    # and the first partition's marker, as the coordinator writes it before dying
    records = [json.loads(line) for line in state_log.read_text().splitlines()]
    coordinator_epoch = max(record["coordinator_epoch"] for record in records if "coordinator_epoch" in record)
    with PartitionLog(data_dir / f"{TOPIC}-0", LogConfig(segment_bytes=SEGMENT_BYTES)) as first:
        first.append_marker(prepare["pid"], prepare["e"], True, coordinator_epoch)

    broker = processes(data_dir)
    read_committed, ends = consume_all(broker.port, "read_committed")
    assert read_committed == expected([0])
    assert all(position == high for position, high in ends.values())
    commit = (ongoing["pid"], ControlType.COMMIT)  # the restart writes every marker again, as Kafka does
    assert [markers_in(data_dir / f"{TOPIC}-{p}") for p in range(PARTITIONS)] == [[commit, commit], [commit], [commit]]
    last = json.loads(state_log.read_text().splitlines()[-1])
    assert (last["t"], last["s"]) == ("prepared", "CompleteCommit")

    # the transactional id carries on: a new instance commits its own transaction
    producer = transactional_producer(broker.port, "prepared")
    write_transaction(producer, 1)
    end_transaction(producer, 1)
    assert consume_all(broker.port, "read_committed")[0] == expected([0, 1])

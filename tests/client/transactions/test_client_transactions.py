"""kafkawire's transactional producer and read_committed consumer against kafkawire's broker, under
transaction version 1 (AddPartitionsToTxn, AddOffsetsToTxn) and 2 (KIP-890: partitions added by
Produce v12+, EndTxn bumping the epoch): commits and aborts as read_committed and read_uncommitted
consumers see them (kafkawire's and confluent-kafka's), offsets committed only with their transaction,
and zombie fencing. The exactly-once loop killed with SIGKILL is in test_client_exactly_once."""
from __future__ import annotations

import asyncio
import time

import pytest

from support.broker_harness import BrokerThread
from kafkawire.client import (
    AsyncConsumer, AsyncProducer, Consumer, KafkaError, Producer, ProducerFencedError, TopicPartition,
    TransactionAbortableError, TransactionAbortedError, TransactionError, TransactionStateError,
)
from kafkawire.error_codes import ErrorCode

PARTITIONS = 2
TIMEOUT_S = 60  # a bound for a loaded machine, not a duration


@pytest.fixture(scope="module", params=[1, 2], ids=["txn-v1", "txn-v2"])
def broker(request, tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("txn-broker"), num_partitions=PARTITIONS,
                      transaction_version=request.param) as running:
        yield running


def run(coroutine, timeout: float = TIMEOUT_S):
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


def kafkawire_read(bootstrap: str, topic: str, isolation: str, count: int) -> tuple[list[bytes], dict]:
    """Values read from the start of ``topic`` (``count`` of them, then polls until the position is at
    the high watermark, so that nothing more can come), and each partition's final position."""
    with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as consumer:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            values += [record.value for record in consumer.poll(timeout_ms=100)]
            if len(values) >= count and all(
                    consumer.highwater(tp) >= 0 and consumer.position(tp) >= consumer.highwater(tp)
                    for tp in partitions):
                break
        return sorted(values), {tp.partition: consumer.position(tp) for tp in partitions}


def confluent_read(bootstrap: str, topic: str, isolation: str, count: int) -> list[bytes]:
    """Values confluent-kafka reads from the start of ``topic``: ``count``, and none in a further 0.5 s."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer as CConsumer, TopicPartition as CTopicPartition
    consumer = CConsumer({"bootstrap.servers": bootstrap, "group.id": f"txn-{time.monotonic_ns()}",
                          "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([CTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.1):
                if message.error() is None:
                    values.append(message.value())
            if len(values) >= count:
                quiet_until = quiet_until or time.monotonic() + 0.5
                if time.monotonic() >= quiet_until:
                    break
    finally:
        consumer.close()
    return sorted(values)


def test_committed_and_aborted_transactions_as_each_isolation_level_sees_them(broker):
    topic = "txn-commit-abort"
    with Producer(bootstrap_servers=broker.bootstrap, transactional_id="commit-abort", linger_ms=2) as producer:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        for i in range(30):
            producer.send(topic, b"committed-%02d" % i, partition=i % PARTITIONS)
        producer.commit_transaction(TIMEOUT_S)

        producer.begin_transaction()
        sent = [producer.send(topic, b"aborted-%02d" % i, partition=i % PARTITIONS) for i in range(20)]
        producer.flush()  # in the log, then aborted: read_uncommitted sees them
        producer.abort_transaction(TIMEOUT_S)
        assert all(future.result(TIMEOUT_S).offset >= 0 for future in sent)

        producer.begin_transaction()
        unsent = producer.send(topic, b"never-sent", partition=0)  # aborted before the sender took it
        producer.abort_transaction(TIMEOUT_S)
        with pytest.raises(TransactionAbortedError):
            unsent.result(TIMEOUT_S)

        producer.begin_transaction()
        for i in range(10):
            producer.send(topic, b"committed-%02d" % (30 + i), partition=i % PARTITIONS)
        producer.commit_transaction(TIMEOUT_S)

    committed = sorted(b"committed-%02d" % i for i in range(40))
    everything = sorted(committed + [b"aborted-%02d" % i for i in range(20)])
    values, positions = kafkawire_read(broker.bootstrap, topic, "read_committed", len(committed))
    assert values == committed
    values_all, positions_all = kafkawire_read(broker.bootstrap, topic, "read_uncommitted", len(everything))
    assert values_all == everything
    assert positions == positions_all  # read_committed moved past the aborted batches and the markers too
    assert confluent_read(broker.bootstrap, topic, "read_committed", len(committed)) == committed
    assert confluent_read(broker.bootstrap, topic, "read_uncommitted", len(everything)) == everything


def test_offsets_sent_to_a_transaction_are_committed_only_with_it(broker):
    topic, group = "txn-offsets", "txn-offsets-group"
    source = TopicPartition(topic, 0)

    async def scenario():
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, transactional_id="offsets") as producer:
            await producer.init_transactions(TIMEOUT_S)
            consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap, group_id=group)
            metadata = consumer.consumer_group_metadata()
            assert (metadata.group_id, metadata.generation_id, metadata.member_id) == (group, -1, "")

            producer.begin_transaction()
            await producer.send(topic, b"x", partition=0)
            await producer.send_offsets_to_transaction({source: 11}, metadata)
            await producer.abort_transaction(TIMEOUT_S)
            assert await consumer.committed([source]) == {source: None}

            producer.begin_transaction()
            await producer.send(topic, b"y", partition=0)
            from confluent_kafka import TopicPartition as CTopicPartition  # confluent-kafka's form works too
            await producer.send_offsets_to_transaction([CTopicPartition(topic, 0, 12)], metadata)
            assert await consumer.committed([source]) == {source: None}  # pending until the commit
            await producer.commit_transaction(TIMEOUT_S)
            assert await consumer.committed([source]) == {source: 12}
            await consumer.close()
    run(scenario())


def test_a_fenced_producer_that_commits_gets_a_fatal_fenced_error(broker):
    topic = "txn-zombie-commit"
    with Producer(bootstrap_servers=broker.bootstrap, transactional_id="zombie-commit") as zombie, \
            Producer(bootstrap_servers=broker.bootstrap, transactional_id="zombie-commit") as successor:
        zombie.init_transactions(TIMEOUT_S)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0).result(TIMEOUT_S)
        successor.init_transactions(TIMEOUT_S)
        with pytest.raises(ProducerFencedError) as fenced:
            zombie.commit_transaction(TIMEOUT_S)
        assert fenced.value.fatal()
    values, _ = kafkawire_read(broker.bootstrap, topic, "read_uncommitted", 1)
    assert values == [b"zombie"]  # written, then aborted by the successor's init_transactions
    assert kafkawire_read(broker.bootstrap, topic, "read_committed", 0)[0] == []


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker):
    topic = "txn-zombie"
    zombie = Producer(bootstrap_servers=broker.bootstrap, transactional_id="zombie-id")
    successor = Producer(bootstrap_servers=broker.bootstrap, transactional_id="zombie-id")
    try:
        zombie.init_transactions(TIMEOUT_S)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie-1", partition=0).result(TIMEOUT_S)

        successor.init_transactions(TIMEOUT_S)  # bumps the epoch and aborts the zombie's open transaction
        successor.begin_transaction()
        successor.send(topic, b"successor", partition=1)
        successor.commit_transaction(TIMEOUT_S)

        refused = zombie.send(topic, b"zombie-2", partition=0)
        with pytest.raises(KafkaError) as produce_error:  # the partition's producer epoch has moved on
            refused.result(TIMEOUT_S)
        assert produce_error.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
        # as in Kafka (KIP-588), a refused epoch on produce makes the transaction abortable (a coordinator
        # that aborted a timed-out transaction bumps the epoch too); the abort then learns of the fencing
        with pytest.raises(TransactionAbortableError) as abortable:
            zombie.commit_transaction(TIMEOUT_S)
        assert abortable.value.txn_requires_abort() and not abortable.value.fatal()
        with pytest.raises(ProducerFencedError) as fenced:
            zombie.abort_transaction(TIMEOUT_S)
        assert fenced.value.fatal() and not fenced.value.txn_requires_abort()
        with pytest.raises(ProducerFencedError):  # fatal: every later call says so
            zombie.begin_transaction()
    finally:
        zombie.close()
        successor.close()
    values, _ = kafkawire_read(broker.bootstrap, topic, "read_committed", 1)
    assert values == [b"successor"]


def test_transactional_calls_in_the_wrong_order_are_refused(broker):
    with Producer(bootstrap_servers=broker.bootstrap, transactional_id="wrong-order") as producer:
        with pytest.raises(TransactionStateError):
            producer.begin_transaction()  # before init_transactions
        producer.init_transactions(TIMEOUT_S)
        with pytest.raises(TransactionStateError):
            producer.send("txn-wrong-order", b"outside a transaction")
        with pytest.raises(TransactionStateError):
            producer.commit_transaction(TIMEOUT_S)
        producer.begin_transaction()
        producer.send("txn-wrong-order", b"inside", partition=0)
        producer.commit_transaction(TIMEOUT_S)
    with Producer(bootstrap_servers=broker.bootstrap) as plain, pytest.raises(TransactionStateError):
        plain.init_transactions(TIMEOUT_S)  # no transactional.id


def test_kafkawire_read_committed_reads_confluent_kafkas_transactions(broker):
    from confluent_kafka import Producer as CProducer
    topic = "txn-from-confluent"
    producer = CProducer({"bootstrap.servers": broker.bootstrap, "transactional.id": "confluent-txn",
                          "linger.ms": 2})
    producer.init_transactions(TIMEOUT_S)
    for outcome in ("committed", "aborted", "committed-again"):
        producer.begin_transaction()
        for i in range(15):
            producer.produce(topic, b"%s-%02d" % (outcome.encode(), i), partition=i % PARTITIONS)
        producer.flush(TIMEOUT_S)
        if outcome == "aborted":
            producer.abort_transaction(TIMEOUT_S)
        else:
            producer.commit_transaction(TIMEOUT_S)
    committed = sorted(b"%s-%02d" % (outcome, i) for outcome in (b"committed", b"committed-again") for i in range(15))
    values, positions = kafkawire_read(broker.bootstrap, topic, "read_committed", len(committed))
    assert values == committed
    values_all, positions_all = kafkawire_read(broker.bootstrap, topic, "read_uncommitted", 45)
    assert len(values_all) == 45 and positions == positions_all


def test_a_transaction_left_open_past_its_timeout_is_aborted_and_cannot_commit(tmp_path):
    topic = "txn-timeout"
    with BrokerThread(data_dir=tmp_path, num_partitions=1, transaction_abort_interval_ms=50) as broker, \
            Producer(bootstrap_servers=broker.bootstrap, transactional_id="slow", transaction_timeout_ms=200) as producer, \
            Consumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                     auto_offset_reset="earliest") as reader:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.send(topic, b"too slow", partition=0).result(TIMEOUT_S)
        partition = TopicPartition(topic, 0)
        reader.assign([partition])
        deadline = time.monotonic() + TIMEOUT_S
        while not 0 < reader.highwater(partition) <= reader.position(partition):  # past the broker's ABORT marker
            assert reader.poll(timeout_ms=100) == []
            assert time.monotonic() < deadline, "the broker did not abort the timed-out transaction"
        with pytest.raises(TransactionError):  # the coordinator has moved the epoch on: the commit is refused
            producer.commit_transaction(TIMEOUT_S)

"""Compaction seen by real clients: confluent-kafka creates a compacted topic, produces keyed records
(idempotently) and a consumer from the start, once the broker's cleaner has run in the background,
gets the latest value of each key at the offset it was written at; a record without a key is refused.

Then logs written by plain, idempotent and transactional producers, cleaned by rounds the test runs,
read to the end by confluent-kafka, kafka-python and kafkawire's consumer: no error, and exactly the
surviving records. librdkafka doubles a partition's fetch size on each answer that holds batches but
no message, and reports MSG_SIZE_TOO_LARGE once that size reached 1 GiB: a cleaned log must not leave
an empty batch in every segment (Kafka keeps one only for an active producer's last sequence)."""
from __future__ import annotations

import threading
import time

import pytest
from support.broker_harness import BrokerThread

from kafkawire.client import Consumer, TopicPartition

confluent_kafka = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")

TIMEOUT = 30
TOPIC = "table"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("compaction"), log_cleaner_backoff_ms=20) as running:
        client = admin.AdminClient({"bootstrap.servers": running.bootstrap})
        topic = admin.NewTopic(TOPIC, 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "86400000"})
        client.create_topics([topic])[TOPIC].result(TIMEOUT)
        yield running


def _produce(bootstrap, records):
    """Produce (key, value) pairs; returns offset -> (key, value) from the delivery reports."""
    delivered = {}
    errors = []

    def report(error, message):
        if error is not None:
            errors.append(error)
        else:
            delivered[message.offset()] = (message.key(), message.value())

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                                         "batch.size": 2048, "enable.idempotence": True})
    for key, value in records:
        producer.produce(TOPIC, key=key, value=value, on_delivery=report)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    return delivered, errors


def _consume_all(bootstrap, end_offset):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)])
    seen = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while (not seen or seen[-1][0] < end_offset - 1) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                if message.error() is None:
                    seen.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return seen


def _cleaned_up_to(broker) -> int:
    async def checkpoint():
        return broker.broker.cleaner.checkpoints.get(f"{TOPIC}-0", 0), \
            broker.broker.topics.log(TOPIC, 0).segments[-1].base_offset
    return broker.call(checkpoint())


def test_a_consumer_gets_the_latest_value_of_each_key_after_cleaning(broker):
    records = [(b"user-%d" % (index % 40), b"state-%d" % index) for index in range(3000)]
    delivered, errors = _produce(broker.bootstrap, records)
    assert not errors and len(delivered) == 3000
    deadline = time.monotonic() + TIMEOUT
    while True:  # the cleaner runs in the background; it cleans up to the active segment
        cleaned, active = _cleaned_up_to(broker)
        if cleaned == active > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert cleaned == active > 0
    seen = _consume_all(broker.bootstrap, max(delivered) + 1)
    assert seen[-1][0] == max(delivered)
    for offset, key, value in seen:  # every record is the one written at its offset
        assert delivered[offset] == (key, value)
    assert len(seen) < 3000
    latest = {}
    for offset in sorted(delivered):
        latest[delivered[offset][0]] = (offset, delivered[offset][1])
    assert {key: (offset, value) for offset, key, value in seen} == latest
    cleaned_part = [key for offset, key, _ in seen if offset < cleaned]
    assert len(cleaned_part) == len(set(cleaned_part))  # below the checkpoint, one record a key


def test_a_consumer_reading_while_the_cleaner_swaps_segments_gets_whole_records(broker):
    """A consumer reads the topic from the start again and again while a producer writes and the
    cleaner rewrites segments under it: every record it gets is the one written at its offset, in
    order (a fetch of a replaced segment still sends that segment's bytes)."""
    passes: list[list[tuple[int, bytes, bytes]]] = []
    stop = threading.Event()

    def consume():
        while not stop.is_set():
            passes.append(_consume_all(broker.bootstrap, _end_offset(broker)))

    reader = threading.Thread(target=consume)
    reader.start()
    delivered, errors = {}, []
    try:
        for chunk in range(3):  # a cleaning round after each chunk, while the reader reads
            rounds = broker.call(_rounds(broker))
            records = [(b"user-%d" % (index % 40), b"chunk-%d-%d" % (chunk, index)) for index in range(1000)]
            more, failed = _produce(broker.bootstrap, records)
            delivered.update(more)
            errors += failed
            deadline = time.monotonic() + TIMEOUT
            while broker.call(_rounds(broker)) == rounds and time.monotonic() < deadline:
                time.sleep(0.02)
            assert broker.call(_rounds(broker)) > rounds
    finally:
        stop.set()
        reader.join(TIMEOUT)
    assert not errors and len(passes) >= 2
    for seen in passes:
        offsets = [offset for offset, _, _ in seen]
        assert offsets == sorted(set(offsets))
        for offset, key, value in seen:
            if offset in delivered:
                assert delivered[offset] == (key, value)


async def _rounds(broker) -> int:
    """The cleaning rounds the broker's cleaner has run (read on the broker's loop)."""
    return broker.broker.cleaner.rounds


def _end_offset(broker) -> int:
    async def end():
        return broker.broker.topics.log(TOPIC, 0).log_end_offset
    return broker.call(end())


def test_a_record_without_a_key_is_refused(broker):
    delivered, errors = _produce(broker.bootstrap, [(None, b"no key")])
    assert not delivered
    assert [error.code() for error in errors] == [confluent_kafka.KafkaError.INVALID_RECORD]


def test_the_topic_describes_its_compaction_configs(broker):
    client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = admin.ConfigResource(admin.ResourceType.TOPIC, TOPIC)
    configs = client.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["min.cleanable.dirty.ratio"].value == "0.01"
    assert configs["delete.retention.ms"].value == "86400000"


# ---- logs written by each kind of producer, cleaned, read to the end by each client ------------------
PRODUCERS = {"plain": {"enable.idempotence": False}, "idempotent": {"enable.idempotence": True},
             "transactional": {"transactional.id": "compaction-clients"}}
KEYS = 20
ROUNDS = 16  # each round overwrites every key and fills more than a segment: the older segments empty


@pytest.fixture(scope="module")
def quiet_broker(tmp_path_factory):
    """A broker whose background cleaner waits an hour between passes: the tests run the rounds."""
    with BrokerThread(data_dir=tmp_path_factory.mktemp("cleaned"), log_cleaner_backoff_ms=3_600_000) as running:
        yield running


def _write_rounds(bootstrap, topic, settings, rounds) -> dict[bytes, tuple[int, bytes]]:
    """``rounds`` overwrites of every key, one producer; a transactional producer aborts every third
    round. Returns key -> (offset, value) of the latest committed record."""
    latest: dict[bytes, tuple[int, bytes]] = {}
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "batch.size": 1024,
                                         **settings})
    transactional = "transactional.id" in settings
    if transactional:
        producer.init_transactions(TIMEOUT)
    for round_ in rounds:
        delivered: dict[bytes, tuple[int, bytes]] = {}

        def report(error, message, delivered=delivered):
            assert error is None, error
            delivered[message.key()] = (message.offset(), message.value())

        if transactional:
            producer.begin_transaction()
        for index in range(KEYS):
            producer.produce(topic, key=b"key-%d" % index,
                             value=b"round-%d-" % round_ + b"v" * 200, on_delivery=report)
        assert producer.flush(TIMEOUT) == 0
        if transactional and round_ % 3 == 2:
            producer.abort_transaction(TIMEOUT)
            continue
        if transactional:
            producer.commit_transaction(TIMEOUT)
        latest.update(delivered)
    return latest


async def _roll_and_clean(broker, topic) -> int:
    """Everything written becomes cleanable (a roll), then one round: it empties the older segments
    (groups are made of segments as they were before it). Returns the log end offset and the
    producer ids of the empty batches left."""
    log = broker.broker.topics.log(topic, 0)
    log.roll()
    assert (await broker.broker.cleaner.cleaner.clean(log)).swapped
    empty = [info.producer_id for segment in log.segments if segment.size for info in segment.batches()
             if not info.count]
    return log.log_end_offset, empty


@pytest.fixture(scope="module", params=sorted(PRODUCERS))
def cleaned_topic(request, quiet_broker):
    """(topic, key -> (offset, value) of what survives, log end offset) for a log written by one kind
    of producer; the idempotent kind has a second producer overwrite every key last, so that the
    first one's last batch stays as an empty batch (its sequence)."""
    kind = request.param
    topic = f"cleaned-{kind}"
    client = admin.AdminClient({"bootstrap.servers": quiet_broker.bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "delete.retention.ms": "86400000"}
    client.create_topics([admin.NewTopic(topic, 1, 1, config=config)])[topic].result(TIMEOUT)
    settings = PRODUCERS[kind]
    if kind == "idempotent":
        latest = _write_rounds(quiet_broker.bootstrap, topic, settings, range(ROUNDS - 1))
        latest.update(_write_rounds(quiet_broker.bootstrap, topic, settings, [ROUNDS - 1]))
    else:
        latest = _write_rounds(quiet_broker.bootstrap, topic, settings, range(ROUNDS))
    assert len(latest) == KEYS
    end, empty = quiet_broker.call(_roll_and_clean(quiet_broker, topic))
    assert len(empty) == (kind == "idempotent") and all(producer_id >= 0 for producer_id in empty)
    return topic, latest, end


def _read_confluent(bootstrap, topic, end):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                                         "enable.auto.commit": False, "enable.partition.eof": True,
                                         "isolation.level": "read_committed"})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    seen, errors = [], []
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is None:
                seen.append((message.offset(), message.key(), message.value()))
            elif message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                assert message.offset() == end
                break
            else:
                errors.append(message.error())
    finally:
        consumer.close()
    return seen, errors


def _read_kafka_python(bootstrap, topic, end):
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   isolation_level="read_committed")
    partition = kafka.TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    seen = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while consumer.position(partition) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                seen += [(record.offset, record.key, record.value) for record in records]
        assert consumer.position(partition) == end
    finally:
        consumer.close()
    return seen, []


def _read_kafkawire(bootstrap, topic, end):
    partition = TopicPartition(topic, 0)
    seen = []
    deadline = time.monotonic() + TIMEOUT
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                  isolation_level="read_committed") as consumer:
        consumer.assign([partition])
        while consumer.position(partition) < end and time.monotonic() < deadline:
            seen += [(record.offset, record.key, record.value) for record in consumer.poll(200)]
        assert consumer.position(partition) == end
    return seen, []


@pytest.mark.parametrize("read", [_read_confluent, _read_kafka_python, _read_kafkawire],
                         ids=["confluent-kafka", "kafka-python", "kafkawire"])
def test_a_cleaned_log_is_read_to_its_end_with_exactly_the_surviving_records(quiet_broker, cleaned_topic, read):
    topic, latest, end = cleaned_topic
    seen, errors = read(quiet_broker.bootstrap, topic, end)
    assert not errors
    assert sorted(seen) == sorted((offset, key, value) for key, (offset, value) in latest.items())

"""Transactions in captures decoded on Spark and in process.

- The synthetic capture of kafkawire-encoded transactional traffic (``capture_transactions``) gives the
  same tables on Spark as in process, and the Spark report engine the same transactions view and
  problems as the Arrow one.
- Real clients: confluent-kafka's and kafka-python's transactional producers against kafkawire's broker
  (its transaction coordinator), recorded by the broker's tap: transactions committed and aborted, a producer fenced by
  a second instance that goes on writing, a transaction left open past its timeout (which the broker
  aborts), and a read_committed consumer that fetches the transaction markers. The oracles: the
  broker's coordinator state (producer ids and epochs) and what the clients were told.

One local Spark session serves the module.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
from support import capture_transactions as synthetic
import pyarrow.parquet as pq
from support.broker_harness import BrokerThread
from support.capture_bodies import assert_bodies_tables_match_frames
from support.capture_in_process import decode_in_process
from support.loopback_capture import wait_until

from kafkawire.capture.reporting import report
from kafkawire.capture.tables.table_sets import table_names
from kafkawire.capture_spark import job
from kafkawire.capture_spark.report_spark import build

pytestmark = [pytest.mark.xdist_group("spark"),
              pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")]


def rows(out, table: str) -> list[dict]:
    return sorted(pq.read_table(out / table).to_pylist(), key=repr)


@pytest.fixture(scope="module")
def decoded(spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("transactions_spark")
    capture = synthetic.build(folder / "transactions.pcapng")
    job.decode(spark, [str(capture)], str(folder / "spark"), records=True)
    return {"spark": folder / "spark", "local": decode_in_process(capture, folder / "local")}


def test_synthetic_tables_agree_with_in_process(decoded):
    assert table_names(str(decoded["spark"])) == table_names(str(decoded["local"]))
    for table in table_names(str(decoded["local"])):
        assert rows(decoded["spark"], table) == rows(decoded["local"], table), table


def test_synthetic_report_engines_agree(spark, decoded):
    by_spark = build(spark, str(decoded["spark"]))
    assert by_spark.transactions == synthetic.EXPECTED_TRANSACTIONS
    assert {row["kind"]: row["count"] for row in by_spark.problems} == {
        kind: len(reasons) for kind, reasons in synthetic.EXPECTED_PROBLEMS.items()}
    assert by_spark == report.build_arrow(str(decoded["spark"]))


# ---- real clients ----------------------------------------------------------------------------------------

TOPIC = "transactional"


@dataclass
class Workload:
    tap: Path
    producers: dict[str, list[tuple[int, int]]]  # transactional id -> (producer id, epoch) each init gave
    fenced: list                           # what the fenced producer was told
    committed: list[bytes]                 # the keys the read_committed consumer got


def _transactions(bootstrap: str, coordinator, producers: dict) -> tuple[list, list[bytes]]:
    from confluent_kafka import Consumer, KafkaException, Producer

    def initialized(name: str) -> None:  # the broker's answer to this InitProducerId
        found = coordinator.describe(name)
        producers.setdefault(name, []).append((found.producer_id, found.producer_epoch))

    committing = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-tx", "linger.ms": 5})
    committing.init_transactions(15)
    initialized("ck-tx")
    for keys, commit in (([b"c0", b"c1", b"c2", b"c3"], True), ([b"a0", b"a1"], False), ([b"c4"], True)):
        committing.begin_transaction()
        for key in keys:
            committing.produce(TOPIC, key=key, value=b"value")
        if commit:
            committing.commit_transaction(15)
        else:
            assert committing.flush(15) == 0  # written, then aborted
            committing.abort_transaction(15)
    del committing

    # kafka-python's transactional producer (other versions of the transaction APIs than librdkafka's)
    from kafka import KafkaProducer
    other = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-tx", client_id="kafka-python")
    other.init_transactions()
    initialized("kp-tx")
    for key, commit in ((b"k0", True), (b"k1", False)):
        other.begin_transaction()
        other.send(TOPIC, key=key, value=b"kafka-python").get(15)
        if commit:
            other.commit_transaction()
        else:
            other.abort_transaction()
    other.close()

    def open_transaction(name: str, key: bytes, **settings):
        """A producer with one record written in a transaction left open."""
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": name, **settings})
        producer.init_transactions(15)
        initialized(name)
        producer.begin_transaction()
        producer.produce(TOPIC, key=key, value=b"open")
        assert producer.flush(15) == 0
        return producer

    # a zombie: written in a transaction, fenced by a second instance, then writing again
    zombie = open_transaction("ck-zombie", b"z0")
    successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-zombie"})
    successor.init_transactions(15)
    initialized("ck-zombie")
    zombie.produce(TOPIC, key=b"z1", value=b"fenced")
    fenced = []
    try:
        zombie.flush(15)
    except KafkaException as error:
        fenced.append(error.args[0].code())
    successor.begin_transaction()
    successor.produce(TOPIC, key=b"s0", value=b"successor")
    successor.commit_transaction(15)
    del zombie, successor

    # left open past its 1 s timeout: the broker aborts it
    hanging = open_transaction("ck-hang", b"h0", **{"transaction.timeout.ms": 1000})
    wait_until(lambda: coordinator.describe("ck-hang").state.name == "COMPLETE_ABORT",
               "the broker to abort the transaction past its timeout")
    del hanging

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "committed", "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.subscribe([TOPIC])
    committed, deadline = [], time.monotonic() + 30
    while len(committed) < 7 and time.monotonic() < deadline:
        committed += [message.key() for message in consumer.consume(100, 0.3) if not message.error()]
    consumer.close()
    del consumer
    return fenced, committed


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Workload:
    pytest.importorskip("confluent_kafka")
    folder = tmp_path_factory.mktemp("transactions_real")
    with BrokerThread(data_dir=folder / "data", num_partitions=2, tap_path=folder / "tap.pcapng",
                      transaction_abort_interval_ms=100) as broker:
        producers: dict[str, list[tuple[int, int]]] = {}
        fenced, committed = _transactions(broker.bootstrap, broker.broker.handlers.transactions, producers)
        gc.collect()
        wait_until(lambda: not broker.broker._connections, "the clients' connections to close")
    return Workload(folder / "tap.pcapng", producers, fenced, committed)


@pytest.fixture(scope="module")
def real(spark, workload, tmp_path_factory):
    folder = tmp_path_factory.mktemp("transactions_real_tables")
    job.decode(spark, [str(workload.tap)], str(folder / "spark"), records=True)
    return {"spark": folder / "spark", "local": decode_in_process(workload.tap, folder / "local")}


def test_real_clients_did_what_the_test_says(workload):
    from confluent_kafka import KafkaError

    assert sorted(workload.committed) == [b"c0", b"c1", b"c2", b"c3", b"c4", b"k0", b"s0"]
    assert workload.fenced == [KafkaError._FENCED]
    (zombie, successor) = workload.producers["ck-zombie"]
    assert successor[0] == zombie[0] and successor[1] > zombie[1]  # the successor's InitProducerId bumped it


def test_real_tables_agree_with_in_process(real):
    assert table_names(str(real["spark"])) == table_names(str(real["local"]))
    for table in table_names(str(real["local"])):
        assert rows(real["spark"], table) == rows(real["local"], table), table
    seen = assert_bodies_tables_match_frames(real["spark"])
    assert {"InitProducerIdRequest", "AddPartitionsToTxnResponse", "EndTxnRequest",
            "FindCoordinatorResponse"} <= seen


def test_real_produces_carry_the_transactional_id_producer_and_epoch(workload, real):
    produces = [r for r in rows(real["local"], "produces") if r["topic"] == TOPIC]
    assert produces and all(r["is_transactional"] for r in produces)
    written = {(r["transactional_id"], r["producer_id"], r["producer_epoch"]) for r in produces}
    assert written == {(name, *producer) for name, given in workload.producers.items() for producer in given}
    refused = [r for r in produces if r["error_code"]]
    assert [(r["transactional_id"], r["producer_id"], r["producer_epoch"]) for r in refused] == [
        ("ck-zombie", *workload.producers["ck-zombie"][0])]


def test_real_fetches_carry_the_transaction_markers(workload, real):
    fetched = [r for r in rows(real["local"], "records") if r["source"] == "fetch" and r["topic"] == TOPIC]
    markers = [r for r in fetched if r["is_control"]]
    assert {r["control_type"] for r in markers} == {"COMMIT", "ABORT"}
    assert all(r["is_transactional"] for r in markers)
    assert {r["producer_id"] for r in markers} <= {producer[0] for given in workload.producers.values()
                                                   for producer in given}
    # read_committed fetches hold the aborted transactions' records too (the consumer drops them, by the
    # response's aborted transactions): every record written, all transactions being over by then
    assert sorted(r["key"] for r in fetched if not r["is_control"]) == sorted(
        workload.committed + [b"a0", b"a1", b"k1", b"z0", b"h0"])


def test_real_report_transactions_and_problems(spark, workload, real):
    summary = report.build_arrow(str(real["local"]))
    found = {row["transactional_id"]: (row["begun"], row["committed"], row["aborted"], row["open"])
             for row in summary.transactions}
    # ck-zombie: the zombie's, aborted by the successor's InitProducerId, and the successor's, committed;
    # ck-hang: no EndTxn in the capture (the broker aborted it after its timeout)
    assert found == {"ck-tx": (3, 2, 1, 0), "kp-tx": (2, 1, 1, 0), "ck-zombie": (2, 1, 1, 0), "ck-hang": (1, 0, 0, 1)}
    assert all(0 < row["mean_ms"] <= row["max_ms"]
               for row in summary.transactions if row["transactional_id"] != "ck-hang")
    problems = {row["kind"]: row for row in summary.problems}
    zombie_id, zombie_epoch = workload.producers["ck-zombie"][0]
    assert problems["fenced_producer"]["count"] == 1
    assert problems["fenced_producer"]["example"].startswith(
        f"transactional id 'ck-zombie': producer id {zombie_id} epoch {zombie_epoch} wrote to 1 partition(s)")
    ((hang_id, _),) = workload.producers["ck-hang"]
    assert problems["hanging_transaction"]["count"] == 1
    assert problems["hanging_transaction"]["example"].startswith(f"transactional id 'ck-hang': producer id {hang_id}")
    assert "timeout of 1000 ms" in problems["hanging_transaction"]["example"]
    assert build(spark, str(real["spark"])) == summary

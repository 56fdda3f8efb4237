"""The capture job end to end (kafkawire.capture_spark.job, the reports and the commands on local Spark).

- A real capture: tcpdump on loopback while kafka-python (pinned to broker version 2.5, so its Produce
  v8 and Fetch v11 are versions tshark 4.0 decodes) and confluent-kafka produce and consume against the
  reference broker. tshark's Kafka dissector is the oracle for every frame it decodes; every produced
  record must appear once in ``records`` and be fetched back.
- The broker's own tap of confluent-kafka at its default (flexible) versions: no problems, every
  request the broker handled.
- Synthetic captures of real encoded frames with faults (reordering, duplication, a lost segment in a
  request and in a response, a capture that starts mid-stream) give exactly the expected frames and
  problems, and what survives decodes as it does without the faults.
- Inputs: pcap and pcapng, gzip, a rotated series (folder and glob) and many small splits give the same
  tables; a file that is not a capture gives a clear error. (The synthetic captures are built by
  ``capture_synthetic``; the job's planning and stages run without Spark in test_capture_spark_stages.py.)
- The report: counts per API, problems, and the KIP-74 fetch-limits check on fetches built to break
  (or keep) the limits; and ``kafkawire decode`` / ``kafkawire report`` as commands.

One local Spark session serves the module (so its tests stay in one file: pytest-xdist's
``--dist loadfile`` runs them on one worker); each capture is decoded once and the tests read the
tables back with pyarrow (no Spark job per assertion).
"""
from __future__ import annotations

import functools
import gc
import gzip
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from kafkawire.broker.network.connection import Connection  # noqa: E402
from support.broker_harness import BrokerThread  # noqa: E402
from support.loopback_capture import TCPDUMP, served_ports, start_tcpdump, stop_tcpdump, wait_for_ends, wait_until  # noqa: E402
from support.paths import REPO  # noqa: E402
from support.capture_bodies import assert_bodies_tables_match_frames  # noqa: E402
from support.capture_synthetic import (  # noqa: E402
    FETCH, LARGE, LIMIT_CONNECTIONS, PRODUCE, PRODUCED, SMALL, TOPIC, TWO_BATCHES, Synthetic, all_frames,
    build_synthetic, rotated_series, split_blocks, stream_offsets, write_pcap,
)
from kafkawire.capture.reporting import report  # noqa: E402
from kafkawire.capture.tables.bodies import to_json  # noqa: E402
from kafkawire.capture.model import connection_key  # noqa: E402
from kafkawire.capture.files.packets import iter_packets, iter_split  # noqa: E402
from kafkawire.capture.files.splits import plan_splits  # noqa: E402
from kafkawire.capture.tables.table_schemas import FRAME_KEY, TABLES, schema_of  # noqa: E402
from kafkawire.capture.tables.table_sets import BODIES, SUMMARY, TABLE_ORDER, table_names  # noqa: E402
from kafkawire.capture_spark import job  # noqa: E402
from kafkawire.capture_spark.decode_stage import decode_partition  # noqa: E402
from kafkawire.capture_spark.part_files import parquet_leaves, writer_options  # noqa: E402
from kafkawire.capture_spark.read_stage import read_splits  # noqa: E402
from kafkawire.capture_spark.report_spark import build  # noqa: E402
from kafkawire.capture_spark.session import DAEMON_MODULE  # noqa: E402
from kafkawire.framing import decode_request, decode_response, peek_request, read_request  # noqa: E402
from kafkawire.messages import api  # noqa: E402

pytestmark = [pytest.mark.xdist_group("spark"),
              # kafka-python reads its protocol schemas with a deprecated importlib.resources call
              pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")]

TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (apt-get install tshark)")
TABLE_KEYS = {  # a unique order for comparing tables row by row
    "frames": ["connection", "direction", "stream_offset", "ts"],
    "fetches": ["connection", "correlation_id", "topic", "topic_id", "partition"],
    "produces": ["connection", "correlation_id", "topic", "topic_id", "partition"],
    "records": ["connection", "source", "correlation_id", "topic", "topic_id", "partition", "offset"],
    "problems": ["connection", "direction", "kind", "stream_offset", "ts", "reason"],
    "connections": ["connection", "ts_first", "ts"],
    "share_acquisitions": ["connection", "correlation_id", "topic_id", "partition", "first_offset"],
    "share_acknowledgements": ["connection", "correlation_id", "topic_id", "partition", "first_offset"],
}
# The synthetic captures hold no share-group traffic: test_capture_spark_shares.py compares those tables.
WITHOUT_ROWS = {"share_acquisitions", "share_acknowledgements"}


# ---- Spark and the tables ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("capture_job")


def read(out, table: str, columns=None) -> pa.Table:
    """A table written by the job, read back with pyarrow."""
    return pq.read_table(Path(out) / table, columns=columns)


def rows(out, table: str, columns=None, where=None) -> list[dict]:
    found = read(out, table, columns).to_pylist()
    return [row for row in found if where is None or where(row)]


def sorted_table(out, table: str) -> pa.Table:
    data = read(out, table)
    return data.sort_by([(key, "ascending") for key in TABLE_KEYS.get(table, FRAME_KEY)])


def assert_same_tables(expected_out, actual_out, tables=None):
    """The same tables (every one of ``expected_out``'s, bodies tables included, unless ``tables`` are
    named), with the same rows."""
    if tables is None:
        tables = table_names(str(expected_out))
        assert table_names(str(actual_out)) == tables
        assert len([name for name in tables if name.startswith(BODIES)]) > 1
    for name in tables:
        expected, actual = sorted_table(expected_out, name), sorted_table(actual_out, name)
        assert expected.num_rows > 0 or name in WITHOUT_ROWS, f"{name}: nothing to compare"
        assert actual.schema == expected.schema, name
        if not actual.equals(expected):
            narrow = [c for c in expected.column_names if c != "body"]
            diff = [(e, a) for e, a in zip(expected.select(narrow).to_pylist(), actual.select(narrow).to_pylist())
                    if e != a]
            pytest.fail(f"{name}: {expected.num_rows} rows expected, {actual.num_rows} found; "
                        f"first difference {diff[:1]}")


def decode(spark, inputs, out, **options) -> job.DecodeResult:
    result = job.decode(spark, inputs, str(out), **options)
    for name, count in result.rows.items():
        assert read(out, name).num_rows == count, name
    return result


# ---- tshark -------------------------------------------------------------------------------------------------

def tshark(*args: str) -> str:
    done = subprocess.run([TSHARK, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@functools.cache
def tcp_heuristics_off() -> tuple[str, ...]:
    """tshark's heuristic TCP dissectors claim Kafka bytes as other protocols; turn them off."""
    names = [line.split("\t")[1] for line in tshark("-G", "heuristic-decodes").splitlines()
             if line.startswith("tcp\t") and line.endswith("\tT")]
    return ("--disable-protocol", ",".join(names)) if names else ()


@dataclass
class TsharkPdu:
    frame: int
    client_port: int
    direction: str
    api_key: int | None            # None for a response whose request tshark could not read
    api_version: int | None        # requests only: tshark leaves it out of responses
    correlation_id: int
    client_id: str | None
    request_frame: int | None      # responses: the frame of the request tshark paired them with
    response_frame: int | None     # requests: the frame of the response tshark paired them with
    topics: list[str] | None       # the frame's topics and partitions, when it holds this one PDU only
    partitions: list[int] | None
    malformed: bool


def nth(values: list[str], i: int, count: int) -> str | None:
    """The i-th PDU's value of a field, when each of the frame's ``count`` PDUs has one (otherwise which
    value is whose cannot be told)."""
    return values[i] if len(values) == count else None


def optional_int(text: str | None) -> int | None:
    return None if text is None else int(text)


def tshark_pdus(path: Path, port: int) -> list[TsharkPdu]:
    fields = ["frame.number", "tcp.srcport", "tcp.dstport", "kafka.api_key", "kafka.api_version",
              "kafka.correlation_id", "kafka.client_id", "kafka.request_frame", "kafka.response_frame",
              "kafka.topic_name", "kafka.partition_id", "_ws.malformed"]
    output = tshark("-r", str(path), *tcp_heuristics_off(), "-d", f"tcp.port=={port},kafka", "-Y", "kafka",
                    "-T", "fields", "-E", "aggregator=|", "-E", "occurrence=a", *[a for f in fields for a in ("-e", f)])
    pdus = []
    for line in output.splitlines():
        number, sport, dport, *lists, malformed = line.split("\t")
        keys, versions, correlations, clients, request_frames, response_frames, topics, partitions = [
            text.split("|") if text else [] for text in lists]
        count = len(correlations)
        if not count:
            continue
        is_request = int(dport) == port
        assert len(keys) == count or not is_request, line  # a request header always reads
        for i, correlation in enumerate(correlations):
            pdus.append(TsharkPdu(
                int(number), int(sport if is_request else dport), "request" if is_request else "response",
                optional_int(nth(keys, i, count)), int(versions[i]) if is_request else None, int(correlation),
                nth(clients, i, count) if is_request else None,
                None if is_request else optional_int(nth(request_frames, i, count)),
                optional_int(nth(response_frames, i, count)) if is_request else None,
                topics if count == 1 else None, [int(p) for p in partitions] if count == 1 else None,
                bool(malformed)))
    return pdus


def port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


# ---- 1. a real capture: tcpdump on loopback, kafka-python and confluent-kafka --------------------------------

REAL_PARTITIONS = 3
REAL_RECORDS = 30  # per producer


def real_records(client: str) -> list[tuple]:
    """(topic, partition, key, value, headers) of what ``client`` produces."""
    return [(client, i % REAL_PARTITIONS, f"{client}-key-{i}".encode(), f"{client}-value-{i}-".encode() * (1 + i % 4),
             [("n", str(i).encode()), ("client", client.encode())]) for i in range(REAL_RECORDS)]


@dataclass
class RealCapture:
    path: Path
    port: int
    produced: list[tuple]
    topic_ids: dict[str, str]  # topic id text -> name


def _kafka_python_workload(bootstrap: str) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=(2, 5), client_id="kp-producer",
                             compression_type="gzip", acks="all", linger_ms=5)
    for topic, partition, key, value, headers in real_records("kp"):
        producer.send(topic, key=key, value=value, partition=partition, headers=headers)
    producer.flush(30)
    producer.close()


def _confluent_workload(bootstrap: str) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "ck-producer", "compression.type": "zstd",
                         "linger.ms": 5})
    for topic, partition, key, value, headers in real_records("ck"):
        producer.produce(topic, key=key, value=value, partition=partition, headers=headers)
    assert producer.flush(30) == 0
    del producer  # librdkafka closes its connections when the handle is destroyed


def _consume_all(bootstrap: str, wanted: int) -> None:
    """kafka-python (Fetch v11) and confluent-kafka (its default, flexible Fetch) each read both topics."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as ConfluentPartition
    from kafka import KafkaConsumer, TopicPartition
    partitions = [(topic, p) for topic in ("kp", "ck") for p in range(REAL_PARTITIONS)]

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=(2, 5), client_id="kp-consumer",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(t, p) for t, p in partitions])
    got, deadline = 0, time.monotonic() + 30
    while got < wanted and time.monotonic() < deadline:
        got += sum(len(batch) for batch in consumer.poll(timeout_ms=300).values())
    consumer.close()
    assert got >= wanted

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-group", "client.id": "ck-consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([ConfluentPartition(t, p, 0) for t, p in partitions])
    got, deadline = 0, time.monotonic() + 30
    while got < wanted and time.monotonic() < deadline:
        got += sum(1 for message in consumer.consume(100, 0.3) if not message.error())
    consumer.close()
    del consumer
    assert got >= wanted


@pytest.fixture(scope="module")
def real(workdir) -> RealCapture:
    if TCPDUMP is None:
        pytest.skip("tcpdump is not installed (apt-get install tcpdump)")
    path = workdir / "loopback.pcap"
    with BrokerThread(data_dir=workdir / "real-broker", num_partitions=REAL_PARTITIONS) as broker:
        dump = start_tcpdump(path, [broker.port])
        try:
            with served_ports() as clients:
                _kafka_python_workload(broker.bootstrap)
                _confluent_workload(broker.bootstrap)
                _consume_all(broker.bootstrap, 2 * REAL_RECORDS)
                gc.collect()
                wait_until(lambda: not broker.broker._connections, "the clients' connections to close")
            wait_for_ends(path, [broker.port], clients)
        finally:
            report_text = stop_tcpdump(dump)
        assert re.search(r"^0 packets dropped by kernel", report_text, re.MULTILINE), report_text
        topic_ids = {str(broker.broker.topics.get(name).topic_id): name for name in ("kp", "ck")}
    return RealCapture(path, broker.port, real_records("kp") + real_records("ck"), topic_ids)


@pytest.fixture(scope="module")
def real_out(spark, real, workdir) -> Path:
    out = workdir / "real-tables"
    decode(spark, [str(real.path)], out, records=True)
    return out


@needs_tshark
def test_real_capture_agrees_with_tshark(real, real_out):
    frames = rows(real_out, "frames", ["connection", "client", "direction", "api_key", "api_version",
                                       "correlation_id", "client_id", "decode_error"])
    ours = {(port_of(f["client"]), f["direction"], f["correlation_id"]): f for f in frames}
    assert len(ours) == len(frames), "correlation ids repeat within a connection"
    assert all(f["decode_error"] is None for f in frames)
    pdus = tshark_pdus(real.path, real.port)
    assert {p.api_key for p in pdus} >= {PRODUCE, FETCH, 3, 18}
    by_frame = defaultdict(list)
    for pdu in pdus:
        by_frame[pdu.frame].append(pdu)

    requests = 0
    for pdu in pdus:
        mine = ours.get((pdu.client_port, pdu.direction, pdu.correlation_id))
        assert mine is not None, f"tshark's {pdu} is missing from frames"
        assert pdu.api_key is None or mine["api_key"] == pdu.api_key, pdu
        if pdu.direction == "request":
            requests += 1
            assert mine["api_version"] == pdu.api_version, pdu
            assert pdu.client_id is not None and mine["client_id"] == pdu.client_id, pdu
            if pdu.response_frame is not None:  # tshark saw its response: so did we
                assert (pdu.client_port, "response", pdu.correlation_id) in ours, pdu
        elif pdu.request_frame is not None:  # tshark's pairing is ours
            paired = [p for p in by_frame[pdu.request_frame] if p.correlation_id == pdu.correlation_id]
            assert len(paired) == 1 and paired[0].api_key == mine["api_key"], pdu
    assert requests == sum(1 for f in frames if f["direction"] == "request")  # tshark reads every request header
    versions = {(f["client_id"], f["api_key"], f["api_version"]) for f in frames if f["direction"] == "request"}
    assert {("kp-producer", PRODUCE, 8), ("kp-consumer", FETCH, 11)} <= versions

    # Topics and partitions of each Produce and Fetch frame tshark decoded whole.
    fetches = rows(real_out, "fetches")
    produces = rows(real_out, "produces")
    checked = Counter()
    for pdu in pdus:
        if pdu.api_key not in (PRODUCE, FETCH) or pdu.malformed or pdu.topics is None:
            continue
        client = next(f["client"] for f in frames if port_of(f["client"]) == pdu.client_port)
        table = fetches if pdu.api_key == FETCH else produces
        mine = [r for r in table if r["client"] == client and r["correlation_id"] == pdu.correlation_id]
        if pdu.direction == "request":  # the rows of the partitions the request names
            side = "request_index" if pdu.api_key == FETCH else "records_bytes"
        else:
            side = "error_code"
        mine = [r for r in mine if r[side] is not None]
        assert sorted(set(pdu.topics)) == sorted({r["topic"] for r in mine}), pdu
        assert sorted(pdu.partitions) == sorted(r["partition"] for r in mine), pdu
        checked[(pdu.api_key, pdu.direction)] += 1
    assert set(checked) == {(PRODUCE, "request"), (PRODUCE, "response"), (FETCH, "request"), (FETCH, "response")}


def test_real_capture_has_every_record_once(real, real_out):
    def headers(row) -> list:
        return [(h["key"], h["value"]) for h in row["headers"]]

    produced = Counter((topic, partition, key, value, tuple(h)) for topic, partition, key, value, h in real.produced)
    records = rows(real_out, "records")
    frames = rows(real_out, "frames", ["connection", "client_id", "direction"])
    client_of = {f["connection"]: f["client_id"] for f in frames if f["direction"] == "request"}

    from_produce = [r for r in records if r["source"] == "produce"]
    found = Counter((r["topic"], r["partition"], r["key"], r["value"], tuple(headers(r))) for r in from_produce)
    assert found == produced  # each exactly once
    # kafka-python sends a batch uncompressed when gzip would not make it smaller (one small record, as
    # linger.ms may leave on a loaded machine): the batches are gzip, and maybe some plain ones
    assert "gzip" in {r["compression"] for r in from_produce if r["topic"] == "kp"} <= {"gzip", "none"}
    assert {r["compression"] for r in from_produce if r["topic"] == "ck"} == {"zstd"}
    offsets = {(r["topic"], r["partition"], r["offset"]) for r in from_produce}
    assert len(offsets) == len(from_produce) and None not in {o for _, _, o in offsets}

    # Each consumer fetched every record, at the offset its Produce response assigned.
    produced_at = {(r["topic"], r["partition"], r["offset"]): (r["key"], r["value"], headers(r)) for r in from_produce}
    for consumer in ("kp-consumer", "ck-consumer"):
        fetched = {}
        for r in records:
            if r["source"] == "fetch" and client_of[r["connection"]] == consumer:
                topic = r["topic"] if r["topic"] is not None else real.topic_ids[r["topic_id"]]
                fetched[(topic, r["partition"], r["offset"])] = (r["key"], r["value"], headers(r))
        assert {k: v for k, v in fetched.items() if k in produced_at} == produced_at, consumer
        assert set(fetched) <= set(produced_at), consumer


def test_real_capture_problems_are_requests_in_flight(real, real_out):
    """The only problems a clean loopback capture may have: requests still waiting for their response
    when the connection closed or tcpdump stopped (a consumer closing with a long-poll Fetch out)."""
    frames = rows(real_out, "frames", ["connection", "direction", "correlation_id", "api_key", "client_id"])
    answered = {(f["connection"], f["correlation_id"]) for f in frames if f["direction"] == "response"}
    unanswered = {(f["connection"], f["correlation_id"], f["api_key"]) for f in frames
                  if f["direction"] == "request" and (f["connection"], f["correlation_id"]) not in answered}
    problems = rows(real_out, "problems")
    assert [p["kind"] for p in problems] == ["unanswered_request"] * len(unanswered)
    assert {(p["connection"], p["correlation_id"], p["api_key"]) for p in problems} == unanswered
    assert all(p["direction"] == "request" and p["reason"] in (
        "capture ended before the response", "connection closed before the response",
        "connection reset before the response") for p in problems), problems
    assert PRODUCE not in {api_key for _, _, api_key in unanswered}  # the producers flushed before closing


# ---- 2. the broker's tap at flexible versions ----------------------------------------------------------------

@dataclass
class TapCapture:
    path: Path
    handled: list  # (request frame, response frame or None), as the broker handled them


@pytest.fixture(scope="module")
def tap(workdir) -> TapCapture:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient
    path = workdir / "tap.pcapng"
    with BrokerThread(data_dir=workdir / "tap-broker", num_partitions=2, tap_path=path) as broker:
        handled = []
        respond = Connection.respond

        async def recording(self, frame):
            response = await respond(self, frame)
            # a response comes as bytes or as a list of pieces; None (no response) and False (close) are none
            handled.append((frame, response if isinstance(response, (bytes, list)) else None))
            return response
        Connection.respond = recording
        try:
            # The call people make first: librdkafka 2.16's all-topics MetadataRequest has 3 bytes after its body.
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            assert admin.list_topics(timeout=10).brokers
            del admin
            producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 5})
            for i in range(40):
                producer.produce("tapped", key=b"k%d" % i, value=b"v%d" % i, headers=[("n", b"%d" % i)])
            assert producer.flush(30) == 0
            del producer
            # a short long-poll: no Fetch is left waiting for its response when the consumer closes
            consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "tap-group",
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 10})
            consumer.subscribe(["tapped"])
            got, deadline = 0, time.monotonic() + 30
            while got < 40 and time.monotonic() < deadline:
                got += sum(1 for message in consumer.consume(100, 0.3) if not message.error())
            consumer.commit(asynchronous=False)
            consumer.close()
            del consumer
            gc.collect()
            assert got == 40
            wait_until(lambda: not broker.broker._connections, "the clients' connections to close")
        finally:
            Connection.respond = respond
    return TapCapture(path, handled)


def test_tap_capture_at_flexible_versions_decodes_cleanly(spark, tap, workdir):
    out = workdir / "tap-tables"
    decode(spark, [str(tap.path)], out, records=True)
    frames = rows(out, "frames", ["direction", "api_key", "api_version", "correlation_id", "decode_error",
                                  "header_version"])
    assert [f for f in frames if f["decode_error"] is not None] == []
    # The only problems: the bytes after a body that librdkafka's all-topics Metadata requests carry,
    # one row for each request the broker handled with such bytes, which are decoded all the same.
    with_trailing = [frame for frame, _ in tap.handled if read_request(frame).trailing]
    assert with_trailing and all(peek_request(frame)[0] == 3 for frame in with_trailing)
    problems = rows(out, "problems")
    assert sorted((p["kind"], p["api_name"], p["correlation_id"], p["length"]) for p in problems) == sorted(
        ("trailing_bytes", "Metadata", peek_request(frame)[2], read_request(frame).trailing) for frame in with_trailing)
    requests = Counter((f["api_key"], f["api_version"]) for f in frames if f["direction"] == "request")
    responses = Counter((f["api_key"], f["api_version"]) for f in frames if f["direction"] == "response")
    assert requests == Counter(peek_request(frame)[:2] for frame, _ in tap.handled)
    assert responses == Counter(peek_request(frame)[:2] for frame, response in tap.handled if response is not None)
    # librdkafka used flexible versions (header v2 requests) for most APIs
    assert any(f["header_version"] == 2 for f in frames if f["direction"] == "request")
    records = rows(out, "records", ["source", "key", "value", "compression"])
    for source in ("produce", "fetch"):
        assert sorted(r["key"] for r in records if r["source"] == source) == sorted(b"k%d" % i for i in range(40))
    assert {r["compression"] for r in records} == {"lz4"}


# ---- 3. synthetic captures with faults (capture_synthetic) -------------------------------------------------

@pytest.fixture(scope="module")
def synthetic(workdir) -> Synthetic:
    return build_synthetic(workdir)


@pytest.fixture(scope="module")
def synthetic_out(spark, synthetic, workdir) -> Path:
    out = workdir / "synthetic-tables"
    decode(spark, [str(synthetic.path)], out, records=True)
    return out


def test_clean_conversation_decodes_exactly(synthetic, synthetic_out):
    talk, clean = synthetic.talk, synthetic.scenarios[0]
    frames = rows(synthetic_out, "frames", where=lambda r: r["client"] == clean.client)
    at = stream_offsets(talk)
    expected = []
    for number, e in enumerate(talk.exchanges):
        expected += [("request", e.correlation_id, e.api_key, e.api_version, at["request"][number],
                      len(e.request) - 4, "synthetic"),
                     ("response", e.correlation_id, e.api_key, e.api_version, at["response"][number],
                      len(e.response) - 4, "synthetic")]
    assert sorted((f["direction"], f["correlation_id"], f["api_key"], f["api_version"], f["stream_offset"], f["size"],
                   f["client_id"]) for f in frames) == sorted(expected)
    assert all(f["broker"] == "10.9.0.1:9092" and f["decode_error"] is None for f in frames)
    # Bodies, as JSON and as typed structs, are those that were encoded.
    for f in frames:
        e = next(e for e in talk.exchanges if e.correlation_id == f["correlation_id"])
        if f["direction"] == "request":
            _, body = decode_request(e.request[4:])
        else:
            _, body = decode_response(e.response[4:], e.api_key, e.api_version)
        assert json.loads(f["body"]) == json.loads(to_json(body, e.api_version))
        assert f["latency_ms"] is None if f["direction"] == "request" else f["latency_ms"] > 0

    def typed(message: str, frame: dict) -> dict:
        (row,) = rows(synthetic_out, f"{BODIES}/{message}",
                      where=lambda r: all(r[key] == frame[key] for key in FRAME_KEY))
        return row["body"]

    produce = next(typed("ProduceRequest", f) for f in frames if f["api_key"] == PRODUCE and
                   f["direction"] == "request")
    assert produce["acks"] == -1 and [p["index"] for p in produce["topic_data"][0]["partition_data"]] == [0, 1]
    fetched = next(typed("FetchResponse", f) for f in frames if f["api_key"] == FETCH and
                   f["direction"] == "response")
    assert [p["high_watermark"] for p in fetched["responses"][0]["partitions"]] == [20, 30]

    # fetches and produces: one row per partition, request and response joined
    fetches = rows(synthetic_out, "fetches", where=lambda r: r["client"] == clean.client)
    assert sorted((r["partition"], r["fetch_offset"], r["high_watermark"], r["record_count"], r["first_offset"],
                   r["last_offset"]) for r in fetches) == [(0, 0, 20, 20, 0, 19), (1, 0, 30, 30, 0, 29)]
    produces = rows(synthetic_out, "produces", where=lambda r: r["client"] == clean.client)
    assert sorted((r["partition"], r["acks"], r["record_count"], r["compression"], r["base_offset"], r["error_code"])
                  for r in produces) == [(0, -1, 20, "gzip", 0, 0), (1, -1, 30, "none", 0, 0)]

    # records: every record, produced and fetched, with key, value, headers and offset
    expected_records = sorted((p, n, b"key-%d" % n, b"value-%d-" % n * 5, [("n", b"%d" % n)], codec.name.lower())
                              for p, first, count, codec in PRODUCED for n in range(first, first + count))
    records = rows(synthetic_out, "records", where=lambda r: r["connection"] == frames[0]["connection"])
    for source in ("produce", "fetch"):
        assert sorted((r["partition"], r["offset"], r["key"], r["value"],
                       [(h["key"], h["value"]) for h in r["headers"]], r["compression"])
                      for r in records if r["source"] == source) == expected_records
    assert rows(synthetic_out, "problems", where=lambda r: r["connection"] == frames[0]["connection"]) == []


@pytest.mark.parametrize("name", ["reordered", "duplicated", "lost request segment", "lost response segment",
                                  "mid-stream start"])
def test_fault_scenario(synthetic, synthetic_out, name):
    scenario = next(s for s in synthetic.scenarios if s.name == name)
    clean = synthetic.scenarios[0]
    frames = rows(synthetic_out, "frames", where=lambda r: r["client"] in (scenario.client, clean.client))
    mine = [f for f in frames if f["client"] == scenario.client]
    assert len(mine) == len(scenario.frames)
    assert {(f["direction"], f["correlation_id"], f["api_key"]) for f in mine} == scenario.frames

    # What survives decodes exactly as without the faults (offsets move when the capture starts late).
    same = ["api_version", "size", "client_id", "body", "error_code", "decode_error", "header_version"]
    reference = {(f["direction"], f["correlation_id"]): f for f in frames if f["client"] == clean.client}
    for f in mine:
        if f["api_key"] is None:  # an unmatched response: framed, not decoded
            assert f["body"] is None and f["decode_error"] is None and f["size"] == \
                reference[(f["direction"], f["correlation_id"])]["size"]
            continue
        expected = reference[(f["direction"], f["correlation_id"])]
        assert {k: f[k] for k in same} == {k: expected[k] for k in same}, f["correlation_id"]
        assert f["stream_offset"] == expected["stream_offset"] - scenario.offset_shift[f["direction"]]

    connection = mine[0]["connection"]
    problems = rows(synthetic_out, "problems", where=lambda r: r["connection"] == connection)
    assert sorted((p["direction"], p["kind"], p["stream_offset"], p["length"], p["api_key"], p["correlation_id"])
                  for p in problems) == sorted(scenario.problems, key=str), [p["reason"] for p in problems]

    # Records come from the frames that survived, as they were.
    def record_rows(client):
        conn = next(f["connection"] for f in frames if f["client"] == client)
        return sorted((r["source"], r["correlation_id"], r["partition"], r["offset"], r["key"], r["value"])
                      for r in rows(synthetic_out, "records", where=lambda r: r["connection"] == conn))
    produce_id, fetch_id = synthetic.talk.exchanges[2].correlation_id, synthetic.talk.exchanges[3].correlation_id
    keep = {"produce": ("request", produce_id, PRODUCE) in scenario.frames,
            "fetch": ("response", fetch_id, FETCH) in scenario.frames}
    assert record_rows(scenario.client) == [r for r in record_rows(clean.client) if keep[r[0]]]
    # A Fetch whose response was lost still has its request's rows.
    fetches = rows(synthetic_out, "fetches", where=lambda r: r["connection"] == connection)
    if ("request", fetch_id, FETCH) in scenario.frames:
        assert sorted(r["partition"] for r in fetches) == [0, 1]
        assert all((r["high_watermark"] is None) == (not keep["fetch"]) for r in fetches)
    else:
        assert fetches == []


# ---- 4. inputs -------------------------------------------------------------------------------------------------

def test_pcap_and_pcapng_give_the_same_tables(spark, synthetic, synthetic_out, workdir):
    blocks = split_blocks(synthetic.path.read_bytes())[2:]  # after the section and interface blocks
    pcap = workdir / "synthetic.pcap"
    write_pcap(pcap, blocks)
    decode(spark, [str(pcap)], workdir / "pcap-tables", records=True)
    assert_same_tables(synthetic_out, workdir / "pcap-tables")


def test_gzip_compressed_capture(spark, synthetic, synthetic_out, workdir):
    folder = workdir / "gzip"
    folder.mkdir()
    compressed = folder / "synthetic.pcapng.gz"
    compressed.write_bytes(gzip.compress(synthetic.path.read_bytes()))
    result = decode(spark, [str(compressed)], folder, records=True)  # the tables beside the capture
    assert result.splits == 1  # gzip cannot be cut
    assert compressed.exists()
    assert_same_tables(synthetic_out, folder)


def test_rotated_series_in_a_folder(spark, synthetic, synthetic_out, workdir):
    files = rotated_series(synthetic, workdir / "series")
    assert len(files) > 10  # so that name order (series.pcapng10 before series.pcapng2) differs from capture order
    result = decode(spark, [str(workdir / "series")], workdir / "series-tables", records=True)
    assert result.files == [str(f) for f in files]
    assert_same_tables(synthetic_out, workdir / "series-tables")


def test_rotated_series_with_some_files_gzip(spark, synthetic, synthetic_out, workdir):
    """Rows that point into their files and rows that carry their payloads (gzip) meet in one shuffle."""
    files = rotated_series(synthetic, workdir / "mixed-series")
    for path in files[1::2]:
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    result = decode(spark, [str(workdir / "mixed-series")], workdir / "mixed-series-tables", records=True)
    assert sum(name.endswith(".gz") for name in result.files) == len(files) // 2
    assert_same_tables(synthetic_out, workdir / "mixed-series-tables")


def index_rows(paths: list[Path], split_bytes: int = 4096) -> list[tuple]:
    """Stage 1 and the shuffle without Spark: packet index rows sorted by (connection, order)."""
    splits = [split for index, path in enumerate(paths) for split in plan_splits(str(path), index, split_bytes)]
    rows = list(read_splits(splits)(iter(range(len(splits)))))
    assert all(payloads is None for _, (_, _, payloads) in rows)  # plain files: no payload bytes
    assert len({key for key, _ in rows}) == len(rows)
    return sorted(rows, key=lambda row: row[0])


def test_a_retried_partition_rewrites_its_files(synthetic, synthetic_out, workdir):
    """Stage 2 run by hand as Spark would run one partition: an attempt that fails leaves nothing a
    reader sees, and attempts that complete write the same files under the same names (no duplicate
    rows), which hold what the Spark job wrote."""
    out = workdir / "retried"
    rows = index_rows([synthetic.path])

    def attempt(attempt_id: int, input_rows) -> list[tuple[str, str, int]]:
        stage = decode_partition([str(synthetic.path)], str(out), None, True, task=(7, attempt_id))
        return list(stage(input_rows))

    def failing():
        yield from rows[:len(rows) // 2]
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        attempt(1, failing())
    assert [p for p in out.rglob("*") if p.is_file()] == []  # no part file, and no temporary one left

    written = attempt(2, iter(rows))
    files = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    # a partition writes no file for a table it has no rows of (the synthetic captures have no share traffic)
    with_rows = [name for name in table_names(str(synthetic_out)) if name not in WITHOUT_ROWS]
    assert sorted(files) == sorted(file for _, file, _ in written) == [
        f"{name}/part-00007-000.parquet" for name in sorted(with_rows)]
    assert {table: count for table, _, count in written} == {
        name: read(synthetic_out, name).num_rows for name in with_rows}

    assert attempt(3, iter(rows)) == written
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == files
    assert_same_tables(synthetic_out, out, with_rows)


def test_local_workers_environment(spark):
    """The embedded session's Python workers run with Arrow's system allocator and a single OpenBLAS
    thread, import PySpark from its installed package, not from pyspark.zip, and start with the capture
    job's modules loaded by their daemon (see LOCAL_SETTINGS and capture_spark.daemon)."""
    from kafkawire.capture_spark.daemon import PRELOAD

    def facts(_):
        import os
        import sys

        preloaded = [name for name in PRELOAD if name in sys.modules]  # before this task imports any

        import py4j
        import pyarrow
        import pyspark

        zipped = [module.__file__ for module in (pyspark, py4j) if ".zip" in module.__file__]
        return (pyarrow.default_memory_pool().backend_name, os.environ.get("OPENBLAS_NUM_THREADS"), zipped,
                preloaded)

    assert spark.sparkContext.parallelize([0, 1], 2).map(facts).collect() == [("system", "1", [], list(PRELOAD))] * 2


@pytest.mark.parametrize("tables", ["real_out", "synthetic_out"])
def test_bodies_tables_hold_what_the_frames_json_says(tables, request):
    """Every frame with a body has its row in its message's bodies table, saying what its JSON says."""
    seen = assert_bodies_tables_match_frames(request.getfixturevalue(tables))
    assert {"ProduceRequest", "ProduceResponse", "FetchRequest", "FetchResponse", "MetadataResponse"} <= seen


def test_spark_reads_a_message_from_its_table_alone(spark, synthetic_out):
    """Spark sees frames without a struct column, and reads FetchResponse bodies from their own files."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType, StructType

    frames = spark.read.parquet(str(synthetic_out / "frames"))
    assert frames.columns == TABLES["frames"].names
    assert [f.name for f in frames.schema.fields if isinstance(f.dataType, (StructType, MapType))] == []
    fetched = spark.read.parquet(str(synthetic_out / BODIES / "FetchResponse"))
    files = {row[0] for row in fetched.select(F.input_file_name()).distinct().collect()}
    assert files and all(f"/{BODIES}/FetchResponse/part-" in name for name in files)
    partitions = fetched.select(F.explode("body.responses").alias("topic")).select(
        F.explode("topic.partitions").alias("partition")).select("partition.high_watermark")
    expected = [p["high_watermark"] for row in rows(synthetic_out, f"{BODIES}/FetchResponse")
                for topic in row["body"]["responses"] for p in topic["partitions"]]
    assert sorted(row[0] for row in partitions.collect()) == sorted(expected) and expected
    joined = frames.join(fetched, list(FRAME_KEY)).select(frames["api_name"], frames["direction"], "body_version")
    assert {tuple(row) for row in joined.collect()} == {("Fetch", "response", 11)}
    assert joined.count() == fetched.count() > 0


def test_raw_batches_are_written_without_dictionary_or_statistics(synthetic_out):
    """The raw record batches in the typed bodies are neither dictionary-encoded nor given min/max
    statistics (they never repeat and nobody filters them by range); scalar columns keep both."""
    part = next((synthetic_out / BODIES / "FetchResponse").glob("part-*.parquet"))
    group = pq.ParquetFile(part).metadata.row_group(0)
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    raw = columns["body.responses.list.element.partitions.list.element.records"]
    assert raw.total_uncompressed_size > 1000  # the synthetic fetches carry batches
    assert "RLE_DICTIONARY" not in raw.encodings and not raw.is_stats_set
    assert set(writer_options(f"{BODIES}/FetchResponse")["use_dictionary"]) == {
        path for path, kind in parquet_leaves(schema_of(f"{BODIES}/FetchResponse")) if not pa.types.is_binary(kind)}
    ts = columns["ts"]
    assert ts.is_stats_set and ts.statistics.min <= ts.statistics.max
    assert "RLE_DICTIONARY" in columns["connection"].encodings
    assert writer_options("frames") == {}  # no binary column there: the defaults


def readme_cluster_example() -> tuple[list[str], str]:
    """The captures guide's spark-submit example: its ``--conf`` settings for the workers (all but the packed
    virtualenv's Python, which needs the cluster's ``--archives``) and the entry script its command
    substitution names, run as written."""
    readme = (REPO / "docs" / "guide" / "captures.md").read_text()
    (example,) = [block for block in re.findall(r"^```sh\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
                  if "spark-submit" in block]
    settings = []
    for value in re.findall(r"--conf (\S+)", example):
        if not value.startswith("spark.pyspark.python="):
            settings += ["--conf", value]
    (substitution,) = re.findall(r'"\$\((python -c .*?)\)"', example)
    command = shlex.split(substitution)
    script = subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.strip()
    return settings, script


def test_spark_submit_keeps_its_master(synthetic, synthetic_out, workdir):
    """Under spark-submit the command line decides where the job runs: the decode keeps its master
    (a cluster's job must not fall back to local mode on the driver) and writes the same tables, with
    the worker settings and the entry script the captures guide's cluster example passes."""
    submit = Path(sys.executable).with_name("spark-submit")
    if not submit.exists():
        pytest.skip("PySpark's spark-submit is not beside this Python")
    out = workdir / "submitted"
    environment = {key: value for key, value in os.environ.items() if key != "PYSPARK_GATEWAY_PORT"}
    environment.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                       SPARK_LOCAL_IP="127.0.0.1")
    settings, script = readme_cluster_example()
    assert settings == ["--conf", "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL=system",
                        "--conf", "spark.executorEnv.OPENBLAS_NUM_THREADS=1",
                        "--conf", f"spark.python.daemon.module={DAEMON_MODULE}"]  # the embedded session's too
    done = subprocess.run([str(submit), "--master", "local[1]", *settings, script, "decode",
                           str(synthetic.path), "--out", str(out), "--records"],
                          env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert " on local[1], into " in done.stdout
    assert_same_tables(synthetic_out, out)


def test_tables_without_rows_still_read(spark, workdir):
    """A capture without Kafka traffic: every table is there, with its schema and no rows, for pyarrow,
    for Spark and for the report."""
    capture = workdir / "quiet.pcap"
    capture.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))  # a header, no packets
    out = workdir / "quiet-tables"
    result = decode(spark, [str(capture)], out, records=True)
    assert result.rows == {name: 0 for name in TABLE_ORDER}
    assert not (out / BODIES).exists()  # a table per message there is: none
    for name in TABLE_ORDER:
        table = read(out, name)
        assert table.num_rows == 0 and table.schema == TABLES[name], name
        assert spark.read.parquet(str(out / name)).columns == TABLES[name].names
    summary = build(spark, str(out))
    assert summary.totals["frames"] == 0 and summary.apis == [] and summary.problems == []
    assert report.build_arrow(str(out)) == summary
    assert json.loads((out / SUMMARY / "summary.json").read_text())["rows"] == result.rows


def test_many_small_splits(spark, synthetic, synthetic_out, workdir):
    out = workdir / "split-tables"
    (out / "records").mkdir(parents=True)  # a stale table of an earlier run, and a file of the user's
    (out / "records" / "part-0.parquet").write_bytes(b"stale")
    (out / "notes.txt").write_text("keep me")
    result = decode(spark, [str(synthetic.path)], out, split_bytes=4096)
    assert result.splits >= synthetic.path.stat().st_size // 4096
    # the summary's counts, added up over the splits' tasks, are those of one read of the whole file
    packets = [packet for split in plan_splits(str(synthetic.path), 0) for packet in iter_split(split)]
    assert result.connections == len({connection_key(*packet[2:6]) for packet in packets})
    assert result.payload_bytes == sum(len(packet.payload) for packet in packets) > 0
    assert_same_tables(synthetic_out, out, tables=("frames", "fetches", "produces", "problems", "connections"))
    assert read(out, "connections").num_rows == result.connections  # none of them reuses its addresses
    assert not (out / "records").exists() and (out / "notes.txt").read_text() == "keep me"


def test_skipped_capture_records_are_problems_and_in_the_summary(spark, synthetic, synthetic_out, workdir, capsys):
    """The synthetic capture as pcap with a corrupt record header in the middle (a bare ACK's) and its
    last record torn: both are rows of the problems table (file, where, how many bytes) and counts in
    the summary, and every Kafka frame decodes as without them."""
    blocks = split_blocks(synthetic.path.read_bytes())[2:]
    packets = list(iter_packets(synthetic.path))
    assert len(packets) == len(blocks)
    middle = next(i for i in range(len(blocks) // 2, len(blocks)) if not packets[i].payload)
    path = workdir / "damaged.pcap"
    write_pcap(path, blocks)
    data = bytearray(path.read_bytes())
    offsets = [24]
    for block in blocks:
        offsets.append(offsets[-1] + 16 + struct.unpack_from("<I", block, 20)[0])  # the EPB's captured length
    assert offsets[-1] == len(data)
    struct.pack_into("<I", data, offsets[middle] + 8, 0x7FFFFFF0)
    del data[-5:]
    path.write_bytes(bytes(data))

    out = workdir / "damaged-tables"
    from kafkawire.cli import main
    assert main(["decode", str(path), "--out", str(out)]) == 0  # in this process: the module's session
    summary = json.loads((out / SUMMARY / "summary.json").read_text())
    assert summary["skipped"] == {"corrupt": 1, "truncated_tail": 1}
    assert summary["capture_records"] == len(blocks) - 2
    assert summary["rows"]["problems"] == read(out, "problems").num_rows
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == (f"skipped 2 of {len(blocks) - 2:,} capture records: corrupt 1, truncated_tail 1 "
                           f"(corrupt records and torn tails are in the problems table)")
    found = rows(out, "problems", where=lambda r: r["file"] is not None)
    assert [(r["kind"], r["file"], r["file_offset"], r["length"], r["connection"], r["stream_offset"])
            for r in found] == [
        ("corrupt_record", str(path), offsets[middle], offsets[middle + 1] - offsets[middle], None, None),
        ("truncated_tail", str(path), offsets[-2], offsets[-1] - offsets[-2] - 5, None, None)]
    assert found[0]["reason"].startswith(f"{path}: a record header that cannot be right at byte {offsets[middle]}")
    assert_same_tables(synthetic_out, out, tables=("frames", "fetches", "produces"))
    connections = TABLE_KEYS["problems"]
    assert sorted_table(out, "problems").filter(pc.is_valid(pc.field("connection"))).select(
        connections).equals(sorted_table(synthetic_out, "problems").select(connections))


def test_cli_decode_refuses_a_table_set_and_overwrite_replaces_all_of_it(spark, synthetic, synthetic_out, workdir,
                                                                        capsys):
    """`kafkawire decode --out DIR` on the tables of an earlier run is refused, touching nothing; with
    --overwrite the whole set is replaced: a run without --records leaves no records table of the
    earlier run beside its frames. (In this process: the command uses the module's session.)"""
    from kafkawire.cli import main
    out = workdir / "rerun-tables"
    assert main(["decode", str(synthetic.path), "--out", str(out), "--records"]) == 0
    capsys.readouterr()
    (out / "notes.txt").write_text("the user's")
    files = {path: path.stat().st_mtime_ns for path in out.rglob("*")}

    assert main(["decode", str(synthetic.path), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "already holds the tables of a decode" in error and "--overwrite" in error
    assert {path: path.stat().st_mtime_ns for path in out.rglob("*")} == files

    stale = out / BODIES / "DescribeAclsResponse"  # a message this capture does not have
    shutil.copytree(out / BODIES / "FetchResponse", stale)
    assert main(["decode", str(synthetic.path), "--out", str(out), "--overwrite"]) == 0
    printed = capsys.readouterr().out
    assert "records" not in printed.split("rows")[0]
    assert not (out / "records").exists() and (out / "notes.txt").read_text() == "the user's"
    assert not stale.exists()
    assert sorted(path.name for path in out.iterdir()) == ["_summary", BODIES, "connections", "fetches", "frames",
                                                          "notes.txt", "problems", "produces",
                                                          "share_acknowledgements", "share_acquisitions"]
    assert_same_tables(synthetic_out, out, tables=("frames", "fetches", "produces", "problems", "connections"))


def test_cli_decode_of_a_glob_and_report(spark, synthetic, synthetic_out, workdir):
    """The commands as a user runs them, each in its own process (and Spark): ``decode`` of a glob over the
    rotated series, and (at the same time, to overlap the two JVM starts) ``report --engine spark`` of the
    synthetic tables, which gives the text the Arrow engine gives."""
    rotated_series(synthetic, workdir / "cli-series")
    out = workdir / "cli-tables"
    command = [sys.executable, "-m", "kafkawire.cli"]
    decoding = subprocess.Popen(command + ["decode", str(workdir / "cli-series" / "series.pcapng*"), "--out", str(out),
                                           "--records", "--master", "local[2]"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reporting = subprocess.Popen(command + ["report", str(synthetic_out), "--engine", "spark", "--master", "local[2]"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    decoded, decode_errors = decoding.communicate(timeout=600)
    text, report_errors = reporting.communicate(timeout=600)

    assert decoding.returncode == 0, decode_errors[-3000:]
    files = len(list((workdir / "cli-series").glob("series.pcapng*")))
    assert decoded.startswith(f"decoded {files} file(s)"), decoded
    counts = {line.split()[0]: int(line.split()[1].replace(",", "")) for line in decoded.splitlines()[1:]}
    bodies = [name for name in table_names(str(synthetic_out)) if name.startswith(BODIES)]
    assert counts == {**{name: read(synthetic_out, name).num_rows for name in TABLE_ORDER},
                      BODIES: sum(read(synthetic_out, name).num_rows for name in bodies)}
    assert f"rows in {len(bodies)} tables" in decoded
    assert_same_tables(synthetic_out, out)

    assert reporting.returncode == 0, report_errors[-3000:]
    assert text == report.build_arrow(str(synthetic_out)).text() + "\n"
    for section in ("per API (latency in ms, responses)", "per client", "problems",
                    "authentication (connections per SASL mechanism and user)",
                    "TLS (connections per server name and version offered)", "fetch limits (KIP-74)"):
        assert f"\n{section}\n" in text, text
    assert "responses over max(MaxBytes, first batch): 1" in text
    assert "partitions over max(PartitionMaxBytes, first batch): 1" in text
    assert "partitions starved for 3+ consecutive fetches with data waiting: 1" in text
    assert "events-1 on 10.9.0.1:9092-10.9.0.2:42004: 3 fetches in a row" in text
    assert "  Fetch " in text and "  unmatched_response " in text


# ---- 5. the report ---------------------------------------------------------------------------------------------

def test_report_counts_and_fetch_limits(spark, synthetic, synthetic_out):
    summary = build(spark, str(synthetic_out))
    assert report.build_arrow(str(synthetic_out)) == summary  # the other engine, the same report

    # Requests and responses per API: every frame the scenarios and the fetch-limit clients should give.
    expected = defaultdict(lambda: [0, 0])
    frames = set()
    for scenario in synthetic.scenarios:
        frames |= {(scenario.port, *frame) for frame in scenario.frames}
    for port, talk in synthetic.limits.items():
        frames |= {(port, *frame) for frame in all_frames(talk)}
    for _, direction, _, api_key in frames:
        expected[None if api_key is None else api(api_key).name][direction == "response"] += 1
    assert {row["api_name"]: [row["requests"], row["responses"]] for row in summary.apis} == expected
    assert all(row["errors"] == 0 for row in summary.apis)
    assert summary.totals["requests"] == sum(r for r, _ in expected.values())
    assert summary.totals["responses"] == sum(r for _, r in expected.values())

    kinds = Counter(problem[1] for scenario in synthetic.scenarios for problem in scenario.problems)
    assert {row["kind"]: row["count"] for row in summary.problems} == kinds

    clean = synthetic.scenarios[0]
    (client,) = [row for row in summary.clients if row["client"] == clean.client]
    assert client["sent"] == sum(len(e.request) for e in synthetic.talk.exchanges)
    assert client["received"] == sum(len(e.response) for e in synthetic.talk.exchanges)

    # The fetch-limits check flags exactly the fetches built to break the limits.
    conn = {port: f"10.9.0.1:9092-10.9.0.2:{port}" for port in LIMIT_CONNECTIONS}
    assert [(r["connection"], r["correlation_id"], r["bytes"], r["max_bytes"], r["first_batch"])
            for r in summary.oversized_responses] == [(conn[42001], 1, len(LARGE) + len(SMALL), 1000, len(LARGE))]
    assert [(r["connection"], r["correlation_id"], r["partition"], r["records_bytes"], r["partition_max_bytes"])
            for r in summary.oversized_partitions] == [(conn[42003], 1, 0, len(TWO_BATCHES), 500)]
    assert [(r["connection"], r["topic"], r["partition"], r["longest"]) for r in summary.starved] == [
        (conn[42004], TOPIC, 1, 3)]


@pytest.mark.parametrize("seed", [11, 12])
def test_report_engines_agree(spark, workdir, seed):
    """Made-up tables in several part files, with many groups, ties and nulls (null API names, topics,
    request indexes, MaxBytes, times): Spark and Arrow give the same report, text and JSON."""
    from dataclasses import asdict

    from support.capture_tables import random_tables
    out = random_tables(workdir / f"made-up-{seed}", seed, rows=1200, records=seed % 2 == 0)
    by_spark, by_arrow = build(spark, str(out)), report.build_arrow(str(out))
    assert by_arrow.text() == by_spark.text()
    assert json.dumps(asdict(by_arrow), default=str) == json.dumps(asdict(by_spark), default=str)
    assert by_spark.starved and by_spark.oversized_responses and by_spark.oversized_partitions  # all exercised
    assert None in {row["api_name"] for row in by_spark.apis}

"""``kafkawire show`` (kafkawire.capture.terminal.show): the capture decoder in process, a line per frame.

- Against the capture job: on the synthetic captures with faults (reordering, duplication, lost segments,
  a mid-stream start, and a torn tail added here), ``show --json`` lists exactly the frames of the job's
  frames table (same connection, direction, stream offset, API, version, correlation id, size, latency,
  error codes) and exactly the rows of its problems table; ``-V N`` prints the body the table holds as JSON.
- Against tshark: a real capture (tcpdump on loopback, kafka-python pinned to broker version 2.5 so that
  tshark 4.0 knows its versions) has every PDU tshark decodes, with the same API, version and correlation
  id, and the same topics and partitions for Produce and Fetch.
- Filters by API, client, topic, error, correlation id, direction and problem kind, and bad ones.
- A topic named by id before any response named the id: show (streaming) says so, the job's tables name it.

The job's Spark session is the shared fixture (conftest): one per module.
"""
from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

pytest.importorskip("pyspark")
import pyarrow.parquet as pq  # noqa: E402

from support.broker_harness import BrokerThread  # noqa: E402
from support.capture_synthetic import build_synthetic, late_topic_names  # noqa: E402
from support.loopback_capture import served_ports, start_tcpdump, stop_tcpdump, wait_for_ends, wait_until  # noqa: E402
from kafkawire.capture.files.inputs import expand_inputs  # noqa: E402
from kafkawire.capture.kafka.kafka_connection import decode_connection  # noqa: E402
from kafkawire.capture.files.packets import iter_packets  # noqa: E402
from kafkawire.capture.streaming import CaptureStream  # noqa: E402
from kafkawire.capture_spark import job  # noqa: E402
from kafkawire.cli import main  # noqa: E402

TSHARK = shutil.which("tshark")
PRODUCE, FETCH = 0, 1
# kafka-python reads its protocol schemas with a deprecated importlib.resources call
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")


def show(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["show", *map(str, args)])
    return status, out.getvalue(), err.getvalue()


def show_json(*args: str) -> tuple[list[dict], list[dict]]:
    """(frames, problems) of ``show --json``."""
    status, out, err = show(*args, "--json")
    assert status == 0, err
    items = [json.loads(line) for line in out.splitlines()]
    return [i for i in items if "frame" in i], [i for i in items if "problem" in i]


def table(out: Path, name: str) -> list[dict]:
    return pq.read_table(out / name).to_pylist()


def micros(ts_ns: int | None) -> int | None:
    return None if ts_ns is None else ts_ns // 1000


# ---- against the capture job ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("show")


@pytest.fixture(scope="module")
def synthetic(workdir) -> Path:
    """The synthetic captures, with a block's tail added after the last block (bytes the reader skips)."""
    path = build_synthetic(workdir).path
    torn = workdir / "torn.pcapng"
    data = path.read_bytes()
    torn.write_bytes(data + data[-200:-100])
    return torn


@pytest.fixture(scope="module")
def synthetic_out(spark, synthetic, workdir) -> Path:
    out = workdir / "synthetic-tables"
    job.decode(spark, [str(synthetic)], str(out))
    return out


def frame_key(connection, direction, offset) -> tuple:
    return connection, direction, offset


def test_show_lists_the_frames_of_the_frames_table(synthetic, synthetic_out):
    frames, _ = show_json(synthetic)
    expected = {frame_key(r["connection"], r["direction"], r["stream_offset"]): r
                for r in table(synthetic_out, "frames")}
    mine = {frame_key(f["connection"], f["direction"], f["stream_offset"]): f for f in frames}
    assert len(mine) == len(frames) == len(expected) > 50
    assert mine.keys() == expected.keys()
    for key, row in expected.items():
        f = mine[key]
        assert (f["client"], f["broker"], f["api_key"], f["api_name"], f["api_version"], f["correlation_id"],
                f["client_id"], f["size"], f["decode_error"], micros(f["ts_ns"])) == (
            row["client"], row["broker"], row["api_key"], row["api_name"], row["api_version"], row["correlation_id"],
            row["client_id"], row["size"], row["decode_error"], int(row["ts"].timestamp() * 1e6)), key
        assert f["latency_ms"] == pytest.approx(row["latency_ms"]) if row["latency_ms"] is not None \
            else f["latency_ms"] is None, key
        if row["direction"] == "response" and row["body"] is not None:
            assert (f["error_code"], f["error_codes"]) == (row["error_code"], row["error_codes"]), key
    assert [f["frame"] for f in frames] == list(range(1, len(frames) + 1))


def test_show_reports_the_problems_of_the_problems_table(synthetic, synthetic_out):
    _, problems = show_json(synthetic)
    expected = Counter((r["connection"], r["direction"], r["kind"], r["reason"], r["stream_offset"], r["length"],
                        r["api_key"], r["api_version"], r["correlation_id"], r["file"], r["file_offset"])
                       for r in table(synthetic_out, "problems"))
    mine = Counter((p.get("connection"), p.get("direction"), p["problem"], p["reason"], p.get("stream_offset"),
                    p["length"], p.get("api_key"), p.get("api_version"), p.get("correlation_id"), p.get("file"),
                    p.get("file_offset")) for p in problems)
    kinds = {key[2] for key in expected}
    assert {"gap", "resync", "truncated_frame"} <= kinds  # the faults
    assert {"corrupt_record", "truncated_tail"} & kinds  # and the bytes added after the last block
    assert mine == expected


def test_detail_of_one_frame_is_its_body(synthetic, synthetic_out):
    frames, _ = show_json(synthetic)
    produce = next(f for f in frames if f["api_key"] == PRODUCE and f["direction"] == "request")
    status, out, _ = show(synthetic, "-V", produce["frame"])
    assert status == 0
    head, *detail = out.splitlines()
    assert head.split()[0] == str(produce["frame"]) and "Produce v" in head
    assert any(line.strip() == "ProduceRequest:" for line in detail)
    row = next(r for r in table(synthetic_out, "frames") if (r["connection"], r["direction"], r["stream_offset"])
               == (produce["connection"], "request", produce["stream_offset"]))
    status, out, _ = show(synthetic, "-V", produce["frame"], "--json")
    (record,) = [json.loads(line) for line in out.splitlines()]
    assert record["body"] == json.loads(row["body"])
    status, _, err = show(synthetic, "-V", 10_000)
    assert status == 1 and "no frame 10000" in err


def test_the_stream_is_the_jobs_decoder_connection_by_connection(synthetic):
    """What CaptureStream interleaves is what decode_connection gives each connection alone (the job's
    stage 2), item for item, in the same order within a connection."""
    (path,) = expand_inputs([str(synthetic)])
    by_connection: dict[str, list] = {}
    for packet in iter_packets(path):
        by_connection.setdefault(packet.connection, []).append(packet)
    expected = {key: list(decode_connection(packets)) for key, packets in by_connection.items()}
    streamed: dict[str, list] = {}
    for item in CaptureStream([path]):
        streamed.setdefault(item.connection, []).append(item)
    assert streamed == expected


# ---- filters ----------------------------------------------------------------------------------------

def test_filters(synthetic):
    frames, problems = show_json(synthetic)
    assert problems

    def kept(expression: str) -> list[int]:
        """The frames kept, by number."""
        return [f["frame"] for f in show_json(synthetic, "--filter", expression)[0]]

    def kept_problems(expression: str) -> list[str]:
        return [p["problem"] for p in show_json(synthetic, "--filter", expression)[1]]

    def frames_where(test) -> list[int]:
        return [f["frame"] for f in frames if test(f)]

    assert kept("api=Fetch") == frames_where(lambda f: f["api_key"] == FETCH) != []
    # a problem that names the API, the client's endpoint or the correlation id is kept by a filter on it
    assert kept_problems("api=Fetch") == [p["problem"] for p in problems if p["api_key"] == FETCH] != []
    assert kept_problems("topic=events") == []
    assert kept("api=fetch,0") == frames_where(lambda f: f["api_key"] in (FETCH, PRODUCE))
    assert kept("api!=Fetch dir=request") == frames_where(lambda f: f["api_key"] != FETCH
                                                          and f["direction"] == "request")
    assert kept("corr=2") == frames_where(lambda f: f["correlation_id"] == 2) != []
    assert kept("client=limits-42001") == frames_where(lambda f: f["client_id"] == "limits-42001") != []
    assert kept("client=10.9.0.2:42001 dir=response") == frames_where(
        lambda f: f["client"] == "10.9.0.2:42001" and f["direction"] == "response") != []
    assert kept("topic=events api=Metadata") == frames_where(lambda f: f["api_key"] == 3 and any(
        t["topic"] == "events" for t in f["topics"])) != []
    assert kept("error") == frames_where(lambda f: f["error_codes"] or f["decode_error"])
    with_codes = {code for f in frames for code in f["error_codes"]}
    for code in with_codes:
        assert kept(f"error={code}") == frames_where(lambda f: code in f["error_codes"])
    assert kept("problems") == []
    assert kept_problems("problems=gap") == ["gap"] * sum(1 for p in problems if p["problem"] == "gap") != []
    assert kept_problems("problems") == [p["problem"] for p in problems]
    # two --filter options: both hold
    mine, _ = show_json(synthetic, "--filter", "api=Fetch", "--filter", "dir=response")
    assert [f["frame"] for f in mine] == frames_where(lambda f: f["api_key"] == FETCH and f["direction"] == "response")


@pytest.mark.parametrize("expression, message", [
    ("api=Nope", "no API named 'Nope'"), ("colour=red", "unknown field 'colour'"), ("corr=x", "invalid literal"),
    ("topic", "topic needs a value"), ("error=NOT_AN_ERROR", "no error named"),
])
def test_bad_filters_are_usage_errors(synthetic, expression, message):
    status, out, err = show(synthetic, "--filter", expression)
    assert status == 2 and out == "" and message in err


def test_text_lines(synthetic):
    status, out, _ = show(synthetic, "--filter", "api=Fetch dir=response corr=1")
    assert status == 0
    lines = out.splitlines()
    assert lines and all(" < 10.9.0.1:9092  Fetch v11  resp  corr=1  events[" in line for line in lines)
    assert all(line.rstrip().endswith(" ok") or "errors=" in line for line in lines)


def test_a_file_that_is_no_capture(workdir):
    bad = workdir / "notes.txt"
    bad.write_text("not a capture")
    status, _, err = show(bad)
    assert status == 2 and "not a packet capture" in err
    status, _, err = show(workdir / "missing.pcap")
    assert status == 2 and "no such file" in err


# ---- against tshark ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real(workdir) -> tuple[Path, int]:
    """tcpdump on loopback while kafka-python (broker version 2.5: Produce v8, Fetch v11) produces to
    two partitions and reads them back."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    path = workdir / "loopback.pcap"
    with BrokerThread(data_dir=workdir / "broker", num_partitions=2) as broker:
        dump = start_tcpdump(path, [broker.port])
        try:
            with served_ports() as clients:
                producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(2, 5), client_id="show-producer",
                                         linger_ms=5)
                for i in range(20):
                    producer.send("shown", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
                producer.flush(30)
                producer.close()
                consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=(2, 5), client_id="show-consumer",
                                         auto_offset_reset="earliest", enable_auto_commit=False)
                consumer.assign([TopicPartition("shown", p) for p in range(2)])
                got, deadline = 0, time.monotonic() + 30
                while got < 20 and time.monotonic() < deadline:
                    got += sum(len(batch) for batch in consumer.poll(timeout_ms=300).values())
                consumer.close()
                assert got == 20
                wait_until(lambda: not broker.broker._connections, "the clients' connections to close")
            wait_for_ends(path, [broker.port], clients)
        finally:
            stop_tcpdump(dump)
        return path, broker.port


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (apt-get install tshark)")
def test_show_agrees_with_tshark(real):
    path, port = real
    fields = ["tcp.srcport", "tcp.dstport", "kafka.api_key", "kafka.api_version", "kafka.correlation_id",
              "kafka.topic_name", "kafka.partition_id"]
    done = subprocess.run([TSHARK, "-r", str(path), "-d", f"tcp.port=={port},kafka", "-Y", "kafka", "-T", "fields",
                           "-E", "aggregator=|", "-E", "occurrence=a", *[a for f in fields for a in ("-e", f)]],
                          capture_output=True, text=True, check=True)
    frames, problems = show_json(path)
    assert problems == [] or {p["problem"] for p in problems} <= {"unanswered_request"}
    mine = {(f["client"].rsplit(":", 1)[1], f["direction"], f["correlation_id"]): f for f in frames}
    assert len(mine) == len(frames)
    compared = Counter()
    for line in done.stdout.splitlines():
        sport, dport, keys, versions, correlations, topics, partitions = line.split("\t")
        correlations = correlations.split("|") if correlations else []
        if not correlations:
            continue
        request = int(dport) == port
        client_port = sport if request else dport
        keys, versions = keys.split("|") if keys else [], versions.split("|") if versions else []
        for i, correlation in enumerate(correlations):
            f = mine.get((client_port, "request" if request else "response", int(correlation)))
            assert f is not None, line
            if len(keys) == len(correlations):
                assert f["api_key"] == int(keys[i]), line
            if request:
                assert f["api_version"] == int(versions[i]), line
            if len(correlations) == 1 and f["api_key"] in (PRODUCE, FETCH) and topics:
                assert {t["topic"] for t in f["topics"]} == set(topics.split("|")), line
                assert sorted(p for t in f["topics"] for p in t["partitions"]) == sorted(
                    int(p) for p in partitions.split("|")), line
            compared[f["api_key"], f["direction"]] += 1
    assert compared[PRODUCE, "request"] and compared[FETCH, "response"] and compared[3, "request"], compared
    assert sum(compared.values()) == len(frames)  # tshark 4.0 decodes every frame of these versions
    assert all(f["decode_error"] is None for f in frames)
    records = sum(f["records"] or 0 for f in frames if f["api_key"] == PRODUCE)
    assert records == 20 and sum(f["records"] or 0 for f in frames if f["api_key"] == FETCH) >= 20


def test_the_job_names_topics_met_by_id_before_their_names(spark, workdir):
    import uuid
    topic_id = uuid.uuid4()
    capture = late_topic_names(workdir / "late-names.pcapng", topic_id, "orders")
    frames, _ = show_json(capture)
    assert {t["topic"] for f in frames if f["api_key"] == FETCH for t in f["topics"]} == {None}
    out = workdir / "late-names-tables"
    job.decode(spark, [str(capture)], str(out), records=True, partitions=2)
    assert [(r["topic"], r["topic_id"]) for r in table(out, "fetches")] == [("orders", str(topic_id))]
    assert {(r["topic"], r["topic_id"]) for r in table(out, "records")} == {("orders", str(topic_id))}


def test_it_says_when_spark_serves_better(synthetic, monkeypatch):
    from kafkawire.capture.terminal import show as command
    monkeypatch.setattr(command, "SPARK_ADVISED_BYTES", 1000)
    status, out, err = show(synthetic, "--filter", "corr=1")
    assert status == 0 and out  # and it goes on
    assert "MB of captures: `kafkawire decode` (Spark, every core, tables to query) serves captures above" in err


@given(st.integers(-(10**18), 4 * 10**18))
def test_line_time_is_datetimes_utc_microsecond(ts_ns):
    import datetime

    from kafkawire.capture.terminal.show_output import _time
    moment = datetime.datetime.fromtimestamp(ts_ns // 1000 / 1e6, datetime.timezone.utc)
    assert _time(ts_ns) == moment.strftime("%H:%M:%S.%f")

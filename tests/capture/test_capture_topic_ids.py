"""Topics named by id only (Fetch v13+, Produce v13+) get the names that responses pair with the ids.

- A real capture: the broker's tap while confluent-kafka (librdkafka, Fetch v13+ against kafkawire's
  broker) produces to ``orders`` and consumes it. ``kafkawire show --filter 'api=Fetch topic=orders'``
  lists its fetches by name, and the decoded tables (no Spark: the job's stage 2 and its driver's
  naming, in process) have the name in every Fetch row.
- The same capture cut to start at the first Fetch and end before any later Metadata request: show says
  "unknown topic id" and the tables keep the id with a null topic.
- A synthetic capture whose Metadata answer comes after the fetches, on a connection the decoding task
  reads after the fetches': ``show`` (streaming) uses what it knew when it printed each line, the tables
  name every row (the job's join at the end).
"""
from __future__ import annotations

import contextlib
import io
import json
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from support.capture_in_process import decode_in_process
from support.capture_synthetic import late_topic_names
from kafkawire import messages as m
from kafkawire.capture.files.packets import iter_packets
from kafkawire.capture.model import ORDER_STRIDE, KafkaFrame
from kafkawire.capture.streaming import CaptureStream
from kafkawire.capture.tables.topic_names import names_ids
from kafkawire.cli import main
from support.tapped_clients import confluent_round_trip

FETCH = 1
TOPIC = "orders"


def show(*args) -> list[str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["show", *map(str, args)])
    assert status == 0, err.getvalue()
    return out.getvalue().splitlines()


def show_json(*args) -> list[dict]:
    return [item for item in map(json.loads, show(*args, "--json")) if "frame" in item]


def fetches(tables: Path) -> list[dict]:
    return pq.read_table(tables / "fetches").to_pylist()


# ---- a real capture: confluent-kafka through the broker's tap ----------------------------------------

@pytest.fixture(scope="module")
def tapped_at(tmp_path_factory) -> tuple[Path, int]:
    """The broker's tap while confluent-kafka produces 20 records to ``orders`` and consumes them, and
    the broker's port."""
    return confluent_round_trip(tmp_path_factory.mktemp("topic-ids"), TOPIC)


@pytest.fixture(scope="module")
def tapped(tapped_at) -> Path:
    return tapped_at[0]


def test_show_filters_librdkafkas_fetches_by_topic_name(tapped):
    frames = show_json(tapped)
    fetch_frames = [f for f in frames if f["api_key"] == FETCH]
    assert fetch_frames and all(f["api_version"] >= 13 for f in fetch_frames)  # topics by id
    named = [f for f in fetch_frames if any(t["topic"] == TOPIC for t in f["topics"])]
    assert any(f["records"] for f in named)
    for f in named:
        assert all(t["topic_id"] is not None for t in f["topics"])
    # every fetch that names a topic names orders (others are empty incremental-session fetches)
    assert [f["frame"] for f in named] == [f["frame"] for f in fetch_frames if f["topics"]]

    lines = show(tapped, "--filter", f"api=Fetch topic={TOPIC}")
    assert len(lines) == len(named)
    assert all(" Fetch v" in line and f" {TOPIC}[" in line for line in lines)


def test_the_tables_name_librdkafkas_fetches(tapped, tmp_path):
    rows = fetches(decode_in_process(tapped, tmp_path / "tables"))
    assert rows and {row["topic"] for row in rows} == {TOPIC}
    assert all(row["topic_id"] is not None for row in rows)
    assert sum(row["record_count"] or 0 for row in rows) >= 20


@pytest.fixture(scope="module")
def mid_stream(tapped) -> Path:
    """The tap's capture from its first Fetch request up to the next request whose answer names topic
    ids (the file's header blocks kept): a capture started late, without a name for any id."""
    frames = [f for f in CaptureStream([str(tapped)], None) if isinstance(f, KafkaFrame) and f.direction == "request"]
    start = min(f.ts_ns for f in frames if f.api_key == FETCH)
    end = min((f.ts_ns for f in frames if f.ts_ns > start and names_ids(f.api_key, f.api_version)), default=None)
    offsets = [(p.ts_ns, p.order % ORDER_STRIDE) for p in iter_packets(str(tapped))]
    first = offsets[0][1]
    cut_from = next(offset for ts, offset in offsets if ts >= start)
    cut_to = next((offset for ts, offset in offsets if end is not None and ts >= end), None)
    data = tapped.read_bytes()
    cut = tapped.with_name("mid-stream.pcapng")
    cut.write_bytes(data[:first] + data[cut_from:cut_to])
    return cut


def test_a_capture_without_metadata_says_unknown_topic_id(mid_stream, tmp_path):
    frames = show_json(mid_stream)
    fetch_frames = [f for f in frames if f["api_key"] == FETCH and f["topics"]]
    assert fetch_frames
    assert all(t["topic"] is None and t["topic_id"] for f in fetch_frames for t in f["topics"])
    assert show(mid_stream, "--filter", f"api=Fetch topic={TOPIC}") == []
    topic_id = fetch_frames[0]["topics"][0]["topic_id"]
    lines = show(mid_stream, "--filter", f"api=Fetch topic={topic_id}")
    assert lines and all(f"(unknown topic id {topic_id})[" in line for line in lines)

    rows = fetches(decode_in_process(mid_stream, tmp_path / "tables"))
    assert rows and all(row["topic"] is None and row["topic_id"] == topic_id for row in rows)


# ---- the names come after the fetches -----------------------------------------------------------------

def test_a_name_learnt_later_names_the_tables_rows(tmp_path):
    topic_id = uuid.UUID("6f1e0c52-0d7c-4a51-9a0b-2f7e3c4d5e6f")
    capture = late_topic_names(tmp_path / "late-names.pcapng", topic_id, TOPIC)

    frames = show_json(capture)
    fetch_topics = [t for f in frames if f["api_key"] == FETCH for t in f["topics"]]
    assert fetch_topics == [{"topic": None, "topic_id": str(topic_id), "partitions": [0]}] * 2
    assert show(capture, "--filter", f"api=Fetch topic={TOPIC}") == []  # not known yet when printed
    assert all("(unknown topic id " in line for line in show(capture, "--filter", "api=Fetch"))

    rows = fetches(decode_in_process(capture, tmp_path / "tables"))
    assert [(r["topic"], r["topic_id"], r["record_count"]) for r in rows] == [(TOPIC, str(topic_id), 3)]
    records = pq.read_table(tmp_path / "tables" / "records").to_pylist()
    assert len(records) == 3 and {r["topic"] for r in records} == {TOPIC}


def test_the_names_come_from_any_response_pairing_them():
    from kafkawire.capture.tables.topic_names import TopicNames
    names = TopicNames()
    ids = [uuid.uuid4() for _ in range(3)]
    names.learn(m.CreateTopicsResponse(topics=[m.CreateTopicsResponse.CreatableTopicResult(
        name="created", topic_id=ids[0])]), 7)
    names.learn(m.DescribeTopicPartitionsResponse(topics=[
        m.DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(name="described", topic_id=ids[1])]), 0)
    names.learn(m.DeleteTopicsResponse(responses=[m.DeleteTopicsResponse.DeletableTopicResult(
        name="deleted", topic_id=ids[2])]), 6)
    assert [names.get(str(i)) for i in ids] == ["created", "described", "deleted"]
    # a request's pairs are the client's say-so; versions without ids give none
    names = TopicNames()
    names.learn(m.DeleteTopicsRequest(topics=[m.DeleteTopicsRequest.DeleteTopicState(name="x", topic_id=ids[0])]), 6)
    names.learn(m.CreateTopicsResponse(topics=[m.CreateTopicsResponse.CreatableTopicResult(
        name="old", topic_id=ids[0])]), 6)
    assert names.names == {}

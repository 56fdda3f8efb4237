"""kafkawire.capture.tables.bodies and rows (with frame_decoding, joins, table_schemas): frames as table rows.

Frames are real: encoded with kafkawire.framing from generated message classes, record batches built
with kafkawire.records (compressed, transactional, control, legacy). Every emitted RecordBatch is
checked against TABLES.
"""
from __future__ import annotations

import base64
import json
import uuid

import pyarrow as pa
import pytest
from support.capture_bodies import assert_json_is_typed
from hypothesis import HealthCheck, given, settings, strategies as st
from support.strategies import message_strategy

from kafkawire.capture.tables import bodies
from kafkawire.capture.model import KafkaFrame, Problem
from kafkawire.capture.tables.frame_decoding import decode_frame, summarize_records
from kafkawire.capture.tables.rows import TableBatcher
from kafkawire.capture.tables.table_schemas import FRAME_KEY, MESSAGES, schema_of
from kafkawire.framing import encode_request, encode_response
from kafkawire.messages import (
    ApiVersionsRequest, ApiVersionsResponse, CreateTopicsResponse, FetchRequest, FetchResponse, MetadataRequest,
    MetadataResponse, ProduceRequest, ProduceResponse, RequestHeader, SaslAuthenticateRequest, api, apis, message_class,
)
from kafkawire.records import Codec, LegacyMessageSetBuilder, RecordBatchBuilder, transaction_marker_batch

CONNECTION = "10.0.0.1:50000-10.0.0.2:9092"
CLIENT, BROKER = "10.0.0.1:50000", "10.0.0.2:9092"
T0 = 1_700_000_000_000_000_000  # ns

FR, FS, PR, PS = FetchRequest, FetchResponse, ProduceRequest, ProduceResponse


# ---- building frames ---------------------------------------------------------------------------

class Wire:
    """One connection's frames, with stream offsets and timestamps that advance like a capture's."""

    def __init__(self, connection=CONNECTION):
        self.connection = connection
        self.offsets = {"request": 0, "response": 0}
        self.clock = T0
        self.correlation_id = 0

    def _tick(self, ns=1_000_000):
        self.clock += ns
        return self.clock

    def request(self, body, version, client_id="client-1", correlation_id=None):
        if correlation_id is None:
            correlation_id = self.correlation_id
            self.correlation_id += 1
        header = RequestHeader(request_api_key=body.API_KEY, request_api_version=version,
                               correlation_id=correlation_id, client_id=client_id)
        data = encode_request(header, body)[4:]
        return self._frame("request", data, body.API_KEY, version, correlation_id, client_id)

    def raw_request(self, data, api_key, version, correlation_id, client_id="client-1"):
        return self._frame("request", data, api_key, version, correlation_id, client_id)

    def response(self, request, body, version=None):
        version = request.api_version if version is None else version
        data = encode_response(request.api_key, version, request.correlation_id, body)[4:]
        return self.raw_response(request, data)

    def raw_response(self, request, data):
        return self._frame("response", data, request.api_key, request.api_version, request.correlation_id, None,
                           request)

    def _frame(self, direction, data, api_key, version, correlation_id, client_id, request=None):
        first = self._tick()
        last = self._tick(250_000)
        offset = self.offsets[direction]
        self.offsets[direction] += len(data) + 4
        return KafkaFrame(self.connection, direction, CLIENT, BROKER, first, last, offset, len(data), api_key,
                          version, correlation_id, client_id, data, request)


def batch_bytes(count, *, base_offset=0, compression=Codec.NONE, producer_id=-1, producer_epoch=-1,
                base_sequence=-1, transactional=False, headers=(), timestamp=1_700_000_000_000):
    builder = RecordBatchBuilder(base_offset=base_offset, compression=compression, producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=base_sequence,
                                 transactional=transactional)
    for i in range(count):
        builder.append(b"value-%d" % i, key=b"key-%d" % i, headers=headers, timestamp=timestamp + i)
    return builder.build()


def run(items, **options):
    """Every batch the batcher emits for ``items``, as rows per table (after checking each batch)."""
    batcher = TableBatcher(**options)
    tables = {}
    for name, batch in batcher.add_all(items):
        assert batch.schema == schema_of(name), name
        batch.validate(full=True)
        tables.setdefault(name, []).extend(batch.to_pylist())
    return tables


def typed(tables, frame) -> dict | None:
    """The typed body of a frames row: its bodies/<message> row's ``body`` (found by FRAME_KEY, and only
    in the table of the frame's own message), None when the frame has none."""
    key = tuple(frame[name] for name in FRAME_KEY)
    found = [(name, row) for name, rows in tables.items() if name.startswith("bodies/") for row in rows
             if tuple(row[k] for k in FRAME_KEY) == key]
    assert len(found) <= 1, found
    if not found:
        return None
    name, row = found[0]
    info = api(frame["api_key"])
    assert name == "bodies/" + (info.request if frame["direction"] == "request" else info.response)
    assert (row["correlation_id"], row["api_version"]) == (frame["correlation_id"], frame["api_version"])
    return row["body"]


def by_partition(rows):
    return {(row["topic"] or row["topic_id"], row["partition"]): row for row in rows}


# ---- bodies ------------------------------------------------------------------------------------

def test_fields_outside_the_version_are_null_in_values_and_absent_from_json():
    message = FS(throttle_time_ms=5, error_code=3, session_id=9, responses=(
        FS.FetchableTopicResponse(topic="t", partitions=(FS.PartitionData(partition_index=2, records=b"abc"),)),))
    v4 = bodies.to_value(message, 4)
    names = [f.name for f in bodies.arrow_type("FetchResponse")]
    as_dict = dict(zip(names, v4))
    assert as_dict["throttle_time_ms"] == 5
    assert as_dict["error_code"] is None and as_dict["session_id"] is None  # 7+
    assert as_dict["node_endpoints"] is None and as_dict["unknown_tags"] is None
    assert json.loads(bodies.to_json(message, 4)) == {
        "throttle_time_ms": 5,
        "responses": [{"topic": "t", "partitions": [{
            "partition_index": 2, "error_code": 0, "high_watermark": 0, "last_stable_offset": -1,
            "aborted_transactions": [], "records": {"records_bytes": 3}}]}]}
    # pyarrow takes the value as it is, and gives back what went in
    (back,) = pa.array([v4], type=bodies.arrow_type("FetchResponse")).to_pylist()
    assert back["responses"][0]["partitions"][0]["records"] == b"abc"
    assert back["responses"][0]["partitions"][0]["log_start_offset"] is None  # 5+


def test_json_bytes_uuids_floats_and_unknown_tags():
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    message = FR(topics=(FR.FetchTopic(topic_id=topic_id, partitions=()),), unknown_tags={7: b"\x01\x02"})
    data = json.loads(bodies.to_json(message, 13))
    assert data["topics"][0] == {"topic_id": str(topic_id), "partitions": []}
    assert data["unknown_tags"] == {"7": base64.b64encode(b"\x01\x02").decode()}
    value = dict(zip([f.name for f in bodies.arrow_type("FetchRequest")], bodies.to_value(message, 13)))
    assert value["topics"][0][1] == str(topic_id) and value["unknown_tags"] == {7: b"\x01\x02"}

    sasl = SaslAuthenticateRequest(auth_bytes=b"\x00secret\xff")
    assert json.loads(bodies.to_json(sasl, 2)) == {"auth_bytes": base64.b64encode(b"\x00secret\xff").decode()}
    assert bodies.to_value(sasl, 2)[0] == b"\x00secret\xff"

    quota_cls = message_class("DescribeClientQuotasResponse")
    entry = quota_cls.EntryData(values=(quota_cls.ValueData(key="k", value=float("nan")),
                                        quota_cls.ValueData(key="j", value=1.5)))
    text = bodies.to_json(quota_cls(entries=(entry,)), 0)
    assert [v["value"] for v in json.loads(text)["entries"][0]["values"]] == ["nan", 1.5]


def test_error_codes_collects_every_nested_code_once():
    cls = CreateTopicsResponse
    message = cls(topics=(cls.CreatableTopicResult(name="a", error_code=36, topic_config_error_code=41),
                          cls.CreatableTopicResult(name="b", error_code=0),
                          cls.CreatableTopicResult(name="c", error_code=36)))
    assert bodies.error_codes(message) == [36, 41]
    assert bodies.top_error_code(message, 5) is None  # no top-level error code in CreateTopics
    fetch = FS(error_code=0, responses=(FS.FetchableTopicResponse(topic="t", partitions=(
        FS.PartitionData(partition_index=0, error_code=1), FS.PartitionData(partition_index=1, error_code=6))),))
    assert bodies.error_codes(fetch) == [1, 6]
    assert bodies.top_error_code(fetch, 7) == 0 and bodies.top_error_code(fetch, 6) is None


def test_converter_refuses_versions_the_message_lacks():
    with pytest.raises(ValueError, match="no version 99"):
        bodies.converter("FetchRequest", 99)
    with pytest.raises(KeyError):
        bodies.arrow_type("NoSuchMessage")


def test_arrow_types_agree_with_pyspark():
    from pyspark.sql.pandas.types import to_arrow_type

    from kafkawire.capture_spark.message_types import spark_type
    for name in ("FetchResponse", "MetadataResponse", "ApiVersionsResponse", "DescribeClientQuotasResponse"):
        assert bodies.arrow_type(name) == to_arrow_type(spark_type(name)), name


# ---- frames ------------------------------------------------------------------------------------

def fetch_pair(wire, version=11, error_code=0):
    blob = batch_bytes(5, base_offset=40, compression=Codec.ZSTD, producer_id=7, producer_epoch=1, base_sequence=0)
    request = wire.request(FR(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=1, topics=(
        FR.FetchTopic(topic="orders", partitions=(
            FR.FetchPartition(partition=0, fetch_offset=40, partition_max_bytes=65536, log_start_offset=3),
            FR.FetchPartition(partition=1, fetch_offset=7, partition_max_bytes=65536))),)), version)
    response = wire.response(request, FS(throttle_time_ms=2, error_code=error_code, responses=(
        FS.FetchableTopicResponse(topic="orders", partitions=(
            FS.PartitionData(partition_index=0, high_watermark=45, last_stable_offset=45, log_start_offset=3,
                             preferred_read_replica=-1, records=blob),
            FS.PartitionData(partition_index=1, error_code=1, high_watermark=-1, records=None))),)))
    return request, response, blob


def test_frames_rows_for_a_fetch():
    wire = Wire()
    request, response, blob = fetch_pair(wire)
    tables = run([request, response])
    req_row, resp_row = tables["frames"]
    assert req_row["direction"] == "request" and resp_row["direction"] == "response"
    assert req_row["api_key"] == 1 and req_row["api_name"] == "Fetch" and req_row["api_version"] == 11
    assert req_row["header_version"] == 1 and resp_row["header_version"] == 0
    assert req_row["client_id"] == resp_row["client_id"] == "client-1"
    assert req_row["ts"].timestamp() * 1e9 == pytest.approx(request.end_ts_ns, abs=1e3)
    assert req_row["ts_first"] < req_row["ts"]
    assert req_row["size"] == request.size and resp_row["stream_offset"] == 0
    assert req_row["latency_ms"] is None and resp_row["latency_ms"] == (response.end_ts_ns - request.end_ts_ns) / 1e6
    assert req_row["error_code"] is None and req_row["error_codes"] is None
    assert resp_row["error_code"] == 0 and resp_row["error_codes"] == [1]
    assert req_row["decode_error"] is None and resp_row["decode_error"] is None
    # the typed bodies: a table per message, one row per frame
    assert sorted(name for name in tables if name.startswith("bodies/")) == ["bodies/FetchRequest",
                                                                              "bodies/FetchResponse"]
    assert [row["body_version"] for row in tables["bodies/FetchResponse"]] == [11]
    partitions = typed(tables, resp_row)["responses"][0]["partitions"]
    assert partitions[0]["records"] == blob and partitions[1]["records"] is None
    assert typed(tables, resp_row)["session_id"] == 0  # 7+
    assert typed(tables, resp_row)["node_endpoints"] is None  # 16+
    assert typed(tables, req_row)["topics"][0]["partitions"][1]["last_fetched_epoch"] is None  # 12+
    body = json.loads(resp_row["body"])
    assert body["responses"][0]["partitions"][0]["records"] == {"records_bytes": len(blob)}
    assert json.loads(req_row["body"])["isolation_level"] == 1


def test_undecodable_frames_get_a_decode_error_and_a_problem():
    wire = Wire()
    good = wire.request(FR(max_wait_ms=1, topics=(FR.FetchTopic(topic="t", partitions=(
        FR.FetchPartition(partition=0),)),)), 11)
    truncated = wire.raw_request(good.frame[:-6], 1, 11, 5)
    unknown_key = wire.raw_request(b"\x03\xe7\x00\x00\x00\x00\x00\x06\x00\x00junk", 999, 0, 6)
    bad_version = wire.raw_request(b"\x00\x01\x00\x63\x00\x00\x00\x07\x00\x00junk", 1, 99, 7)
    tables = run([truncated, unknown_key, bad_version])
    rows = tables["frames"]
    assert all(row["body"] is None and typed(tables, row) is None for row in rows)
    assert not [name for name in tables if name.startswith("bodies/")]
    assert rows[0]["api_name"] == "Fetch" and "FetchRequest" in rows[0]["decode_error"]
    assert "at byte" in rows[0]["decode_error"]
    assert rows[1]["api_name"] is None and "unknown API key 999" in rows[1]["decode_error"]
    assert "unsupported Fetch version 99" in rows[2]["decode_error"] and rows[2]["header_version"] is None
    problems = tables["problems"]
    assert [p["kind"] for p in problems] == ["undecodable"] * 3
    assert [p["reason"] for p in problems] == [row["decode_error"] for row in rows]
    assert problems[1]["api_key"] == 999 and problems[1]["api_name"] is None
    assert problems[0]["stream_offset"] == truncated.offset
    assert problems[0]["length"] == truncated.size + 4


def all_topics_metadata_request_of_librdkafka_2_16(correlation_id):
    """The frame confluent-kafka 2.16.1's ``AdminClient.list_topics()`` sends (recorded from it against
    the reference broker): MetadataRequest v12 for all topics, then 3 bytes after the body."""
    return bytes.fromhex(
        "0003000c%08x" % correlation_id  # Metadata v12, correlation id
        + "000772646b61666b61"           # client id "rdkafka"
        + "00"                           # no header tags
        + "00" + "00" + "00" + "00"      # topics null, allow_auto_topic_creation, include_topic_authorized_operations, tags
        + "010000")                      # what librdkafka adds


def test_bytes_after_a_body_are_decoded_past_and_noted():
    """A request or response with bytes after its body is decoded (Kafka does not check for them) and
    the bytes are a problem of kind trailing_bytes: where they start in the stream, and how many."""
    wire = Wire()
    good = wire.request(FR(max_wait_ms=1, topics=(FR.FetchTopic(topic="t", partitions=(
        FR.FetchPartition(partition=0),)),)), 11)
    request = wire.raw_request(good.frame + b"\x00", 1, 11, good.correlation_id)
    response_body = FS(responses=(FS.FetchableTopicResponse(topic="t", partitions=(
        FS.PartitionData(partition_index=0, high_watermark=3),)),))
    response = wire.raw_response(request, encode_response(1, 11, good.correlation_id, response_body)[4:]
                                 + b"\x01\x02")
    metadata = wire.raw_request(all_topics_metadata_request_of_librdkafka_2_16(9), 3, 12, 9, "rdkafka")
    tables = run([request, response, metadata])
    frames = tables["frames"]
    assert [row["decode_error"] for row in frames] == [None, None, None]
    assert typed(tables, frames[0])["topics"][0]["topic"] == "t"
    assert typed(tables, frames[1])["responses"][0]["partitions"][0]["high_watermark"] == 3
    assert frames[2]["api_name"] == "Metadata" and json.loads(frames[2]["body"])["topics"] is None
    problems = tables["problems"]
    assert [(p["kind"], p["direction"], p["api_name"], p["correlation_id"], p["stream_offset"], p["length"])
            for p in problems] == [
        ("trailing_bytes", "request", "Fetch", good.correlation_id, request.offset + 4 + good.size, 1),
        ("trailing_bytes", "response", "Fetch", good.correlation_id, response.offset + response.size + 2, 2),
        ("trailing_bytes", "request", "Metadata", 9, metadata.offset + metadata.size + 1, 3)]
    assert problems[2]["reason"] == ("MetadataRequest: 3 bytes after the body at byte 22 "
                                     "(ignored, as Kafka does)")
    # the request still joins with its response
    assert [(r["partition"], r["high_watermark"]) for r in tables["fetches"]] == [(0, 3)]


def test_response_that_does_not_decode():
    wire = Wire()
    request, response, _ = fetch_pair(wire)
    broken = wire.raw_response(request, response.frame[:40])
    tables = run([request, broken])
    row = tables["frames"][1]
    assert row["body"] is None and "FetchResponse" in row["decode_error"]
    assert typed(tables, row) is None and "bodies/FetchResponse" not in tables
    assert tables["problems"][0]["direction"] == "response"
    # the fetched partitions still get rows, from the request alone
    fetches = tables["fetches"]
    assert [(r["partition"], r["fetch_offset"], r["high_watermark"]) for r in fetches] == [(0, 40, None),
                                                                                          (1, 7, None)]


def test_unmatched_response_is_not_decoded():
    wire = Wire()
    request, response, _ = fetch_pair(wire)
    orphan = response._replace(request=None, api_key=None, api_version=None)
    tables = run([orphan])
    (row,) = tables["frames"]
    assert row["body"] is None and row["decode_error"] is None and row["api_key"] is None
    assert set(tables) == {"frames"}


def test_api_versions_v0_fallback_body_read_at_v0():
    wire = Wire()
    request = wire.request(ApiVersionsRequest(client_software_name="x", client_software_version="1"), 3)
    v0 = ApiVersionsResponse(error_code=35, api_keys=(ApiVersionsResponse.ApiVersion(api_key=18, min_version=0,
                                                                                      max_version=2),))
    response = wire.raw_response(request, encode_response(18, 0, request.correlation_id, v0)[4:])
    decoded = decode_frame(response)
    assert decoded.version == 0 and decoded.error is None
    tables = run([request, response])
    row = tables["frames"][1]
    assert row["api_version"] == 3 and row["error_code"] == 35 and row["error_codes"] == [35]
    assert typed(tables, row)["throttle_time_ms"] is None  # not in v0
    assert [r["body_version"] for r in tables["bodies/ApiVersionsResponse"]] == [0]
    assert "throttle_time_ms" not in json.loads(row["body"])


def test_problems_pass_through():
    problem = Problem(CONNECTION, "response", T0, "gap", "12 bytes never captured", offset=100, length=12,
                      api_key=1, api_version=11, correlation_id=4)
    tables = run([problem])
    assert tables["problems"] == [{
        "connection": CONNECTION, "direction": "response", "ts": tables["problems"][0]["ts"], "kind": "gap",
        "reason": "12 bytes never captured", "stream_offset": 100, "length": 12, "api_key": 1, "api_name": "Fetch",
        "api_version": 11, "correlation_id": 4, "file": None, "file_offset": None}]
    assert tables["problems"][0]["ts"].timestamp() == T0 / 1e9
    with pytest.raises(TypeError):
        TableBatcher().add("not a frame")


# ---- fetches -----------------------------------------------------------------------------------

def test_fetch_join():
    wire = Wire()
    request, response, blob = fetch_pair(wire)
    tables = run([request, response])
    first, second = tables["fetches"]
    assert first["ts"] == tables["frames"][1]["ts"]  # the response's
    assert (first["connection"], first["client"], first["broker"], first["client_id"]) == (
        CONNECTION, CLIENT, BROKER, "client-1")
    assert (first["max_wait_ms"], first["min_bytes"], first["max_bytes"], first["isolation_level"]) == (
        500, 1, 1 << 20, 1)
    assert (first["session_id"], first["session_epoch"]) == (0, -1)
    assert (first["topic"], first["topic_id"], first["partition"], first["request_index"]) == ("orders", None, 0, 0)
    assert (first["fetch_offset"], first["partition_max_bytes"], first["request_log_start_offset"]) == (40, 65536, 3)
    assert first["remote_partition_max_bytes"] is None  # 18+
    assert (first["error_code"], first["high_watermark"], first["last_stable_offset"], first["log_start_offset"],
            first["preferred_read_replica"]) == (0, 45, 45, 3, -1)
    assert (first["records_bytes"], first["batch_count"], first["record_count"], first["first_offset"],
            first["last_offset"]) == (len(blob), 1, 5, 40, 44)
    assert (first["response_error_code"], first["response_session_id"], first["throttle_time_ms"]) == (0, 0, 2)
    assert first["response_size"] == response.size
    assert first["latency_ms"] == (response.end_ts_ns - request.end_ts_ns) / 1e6
    assert (second["partition"], second["request_index"], second["error_code"], second["records_bytes"],
            second["batch_count"], second["first_offset"]) == (1, 1, 1, 0, 0, None)


def test_fetch_v4_leaves_later_fields_null():
    wire = Wire()
    request = wire.request(FR(max_wait_ms=100, min_bytes=1, topics=(FR.FetchTopic(topic="t", partitions=(
        FR.FetchPartition(partition=3, fetch_offset=9, partition_max_bytes=100),)),)), 4)
    response = wire.response(request, FS(responses=(FS.FetchableTopicResponse(topic="t", partitions=(
        FS.PartitionData(partition_index=3, high_watermark=10, records=b""),)),)))
    (row,) = run([request, response])["fetches"]
    for column in ("session_id", "session_epoch", "request_log_start_offset", "log_start_offset",
                   "preferred_read_replica", "response_error_code", "response_session_id",
                   "remote_partition_max_bytes", "topic_id"):
        assert row[column] is None, column
    assert (row["topic"], row["partition"], row["fetch_offset"], row["high_watermark"]) == ("t", 3, 9, 10)


def test_fetch_incremental_session_with_topic_ids_and_remote_bytes():
    """KIP-227: the response carries partitions the request did not list (changed since the last
    fetch), and leaves out requested ones with nothing new; both get a row."""
    wire = Wire()
    a, b = uuid.uuid4(), uuid.uuid4()
    request = wire.request(FR(max_wait_ms=500, min_bytes=1, session_id=77, session_epoch=3, topics=(
        FR.FetchTopic(topic_id=a, partitions=(
            FR.FetchPartition(partition=0, fetch_offset=10, partition_max_bytes=1000,
                              remote_partition_max_bytes=5000),
            FR.FetchPartition(partition=1, fetch_offset=20, partition_max_bytes=1000))),)), 19)
    blob = batch_bytes(2, base_offset=20)
    response = wire.response(request, FS(session_id=77, responses=(
        FS.FetchableTopicResponse(topic_id=a, partitions=(
            FS.PartitionData(partition_index=1, high_watermark=22, records=blob),)),
        FS.FetchableTopicResponse(topic_id=b, partitions=(
            FS.PartitionData(partition_index=4, high_watermark=8, records=b""),)))))
    rows = run([request, response])["fetches"]
    assert [(r["topic_id"], r["partition"]) for r in rows] == [(str(a), 1), (str(b), 4), (str(a), 0)]
    joined, response_only, request_only = rows
    assert all(r["topic"] is None for r in rows)  # v13+: topics by id
    assert (joined["request_index"], joined["fetch_offset"], joined["record_count"], joined["first_offset"]) == (
        1, 20, 2, 20)
    assert joined["session_id"] == 77 and joined["session_epoch"] == 3 and joined["response_session_id"] == 77
    assert response_only["fetch_offset"] is None and response_only["request_index"] is None
    assert response_only["session_id"] == 77  # request-level fields stay: the partition was in the session
    assert response_only["high_watermark"] == 8
    assert request_only["high_watermark"] is None and request_only["records_bytes"] is None
    assert request_only["remote_partition_max_bytes"] == 5000 and joined["remote_partition_max_bytes"] == 0
    assert request_only["latency_ms"] is None


def test_unanswered_fetch_gets_rows_at_finish():
    wire = Wire()
    request, _, _ = fetch_pair(wire)
    batcher = TableBatcher()
    emitted = batcher.add(request)
    assert emitted == []
    tables = {name: batch.to_pylist() for name, batch in batcher.finish()}
    assert [r["partition"] for r in tables["fetches"]] == [0, 1]
    assert all(r["high_watermark"] is None and r["latency_ms"] is None for r in tables["fetches"])
    assert tables["fetches"][0]["ts"] == tables["frames"][0]["ts"]


def test_response_whose_request_frame_was_not_seen_joins_once():
    """The response carries its request's frame: the join does not need the request to come first,
    and a request frame arriving after its response does not wait for another one."""
    wire = Wire()
    request, response, _ = fetch_pair(wire)
    tables = run([response, request])
    assert [r["partition"] for r in tables["fetches"]] == [0, 1]
    assert all(r["high_watermark"] is not None for r in tables["fetches"])


# ---- produces and records ------------------------------------------------------------------------

def produce_pair(wire, acks=-1, version=9):
    gz = batch_bytes(3, compression=Codec.GZIP, producer_id=42, producer_epoch=2, base_sequence=10,
                     transactional=True, headers=[("trace", b"t1"), ("empty", None)])
    plain = batch_bytes(2)
    request = wire.request(PR(transactional_id="tx-1", acks=acks, timeout_ms=3000, topic_data=(
        PR.TopicProduceData(name="orders", partition_data=(
            PR.PartitionProduceData(index=0, records=gz),
            PR.PartitionProduceData(index=1, records=plain))),)), version)
    response = wire.response(request, PS(throttle_time_ms=1, responses=(
        PS.TopicProduceResponse(name="orders", partition_responses=(
            PS.PartitionProduceResponse(index=0, base_offset=100, log_append_time_ms=-1, log_start_offset=0),
            PS.PartitionProduceResponse(index=1, error_code=19, base_offset=-1,
                                        error_message="not enough replicas"))),))) if acks else None
    return request, response, gz, plain


def test_produce_join_and_record_offsets_from_the_response():
    wire = Wire()
    request, response, gz, plain = produce_pair(wire)
    tables = run([request, response], records=True)
    first, second = tables["produces"]
    assert (first["acks"], first["timeout_ms"], first["transactional_id"], first["topic"], first["partition"]) == (
        -1, 3000, "tx-1", "orders", 0)
    assert (first["records_bytes"], first["batch_count"], first["record_count"], first["compression"]) == (
        len(gz), 1, 3, "gzip")
    assert (first["producer_id"], first["producer_epoch"], first["base_sequence"], first["is_transactional"]) == (
        42, 2, 10, True)
    assert (first["error_code"], first["base_offset"], first["log_append_time_ms"], first["log_start_offset"]) == (
        0, 100, -1, 0)
    assert first["error_message"] is None and first["throttle_time_ms"] == 1
    assert first["latency_ms"] == (response.end_ts_ns - request.end_ts_ns) / 1e6
    assert (second["compression"], second["producer_id"], second["base_sequence"], second["is_transactional"]) == (
        "none", -1, -1, False)
    assert (second["error_code"], second["error_message"], second["base_offset"]) == (19, "not enough replicas", -1)

    records = tables["records"]
    assert [(r["partition"], r["offset"]) for r in records] == [(0, 100), (0, 101), (0, 102), (1, None), (1, None)]
    r0 = records[0]
    assert (r0["source"], r0["connection"], r0["correlation_id"], r0["topic"]) == (
        "produce", CONNECTION, request.correlation_id, "orders")
    assert (r0["key"], r0["value"], r0["timestamp_type"], r0["compression"]) == (
        b"key-0", b"value-0", "CREATE_TIME", "gzip")
    assert r0["timestamp"].timestamp() == 1_700_000_000.0
    assert r0["headers"] == [{"key": "trace", "value": b"t1"}, {"key": "empty", "value": None}]
    assert [r["sequence"] for r in records[:3]] == [10, 11, 12]
    assert records[3]["sequence"] is None and records[3]["headers"] == []
    assert (r0["producer_id"], r0["producer_epoch"], r0["is_transactional"], r0["is_control"]) == (42, 2, True, False)
    assert r0["ts"] == tables["frames"][0]["ts"]  # the request's


def test_produce_acks0_has_rows_without_a_response():
    wire = Wire()
    request, _, gz, _ = produce_pair(wire, acks=0, version=3)
    batcher = TableBatcher(records=True)
    emitted = batcher.add(request)
    assert emitted == []  # under the batch limits: nothing emitted yet
    assert batcher.tables["produces"].rows == 2 and batcher._pending == {}  # not waiting for a response
    tables = {name: batch.to_pylist() for name, batch in batcher.finish()}
    rows = tables["produces"]
    assert [r["acks"] for r in rows] == [0, 0]
    for column in ("error_code", "error_message", "base_offset", "log_append_time_ms", "latency_ms"):
        assert all(r[column] is None for r in rows), column
    assert all(r["offset"] is None for r in tables["records"]) and len(tables["records"]) == 5


def test_unanswered_produce_at_finish():
    wire = Wire()
    request = wire.request(PR(acks=1, timeout_ms=10, topic_data=(PR.TopicProduceData(name="t", partition_data=(
        PR.PartitionProduceData(index=0, records=batch_bytes(1)),)),)), 3)
    (row,) = run([request])["produces"]
    assert row["transactional_id"] is None and row["base_offset"] is None and row["record_count"] == 1


def _produce_v13(wire, topic_id):
    request = wire.request(PR(acks=-1, timeout_ms=10, topic_data=(PR.TopicProduceData(topic_id=topic_id, partition_data=(
        PR.PartitionProduceData(index=2, records=batch_bytes(2)),)),)), 13)
    response = wire.response(request, PS(responses=(PS.TopicProduceResponse(topic_id=topic_id, partition_responses=(
        PS.PartitionProduceResponse(index=2, base_offset=7),)),)))
    return [request, response]


def test_produce_v13_rows_carry_the_topic_name_the_capture_saw_for_its_id():
    """Produce v13 names topics by id (KIP-516): its rows, and its records' rows, get the name from a
    Metadata (or CreateTopics) response seen earlier; an id never resolved leaves the name null."""
    wire = Wire()
    known, unknown = uuid.uuid4(), uuid.uuid4()
    request = wire.request(MetadataRequest(topics=None), 13)
    metadata = wire.response(request, MetadataResponse(topics=(MetadataResponse.MetadataResponseTopic(
        name="orders", topic_id=known),)))
    tables = run(_produce_v13(wire, unknown) + [request, metadata] + _produce_v13(wire, known)
                 + _produce_v13(wire, unknown), records=True)
    rows = [(r["topic"], r["topic_id"], r["partition"], r["base_offset"]) for r in tables["produces"]]
    assert rows == [(None, str(unknown), 2, 7), ("orders", str(known), 2, 7), (None, str(unknown), 2, 7)]
    assert [(r["topic"], r["offset"]) for r in tables["records"]] == [
        (None, 7), (None, 8), ("orders", 7), ("orders", 8), (None, 7), (None, 8)]
    # and a Fetch v13+ of that id too
    request = wire.request(FR(max_wait_ms=1, topics=(FR.FetchTopic(topic_id=known, partitions=(
        FR.FetchPartition(partition=2, fetch_offset=7),)),)), 18)
    response = wire.response(request, FS(responses=(FS.FetchableTopicResponse(topic_id=known, partitions=(
        FS.PartitionData(partition_index=2, high_watermark=9, records=batch_bytes(2, base_offset=7)),)),)))
    batcher = TableBatcher()
    for item in [metadata, request, response]:
        batcher.add(item)
    (row,) = [r for _, batch in batcher.finish() if _ == "fetches" for r in batch.to_pylist()]
    assert (row["topic"], row["topic_id"], row["record_count"]) == ("orders", str(known), 2)


def test_topic_names_are_bounded():
    from kafkawire.capture.tables.joins import TopicNames
    names = TopicNames(limit=2)
    ids = [uuid.uuid4() for _ in range(3)]
    for n, topic_id in enumerate(ids):
        names.learn(MetadataResponse(topics=(MetadataResponse.MetadataResponseTopic(name=f"t{n}", topic_id=topic_id),)), 12)
    assert [names.get(str(i)) for i in ids] == [None, "t1", "t2"]
    names.learn(MetadataResponse(topics=(MetadataResponse.MetadataResponseTopic(name="x"),)), 12)  # no id: nothing
    assert len(names.names) == 2


def test_fetch_records_with_control_and_legacy_batches():
    wire = Wire()
    data = batch_bytes(2, base_offset=10, compression=Codec.LZ4, producer_id=5, producer_epoch=0,
                       base_sequence=0, transactional=True)
    marker = transaction_marker_batch(True, producer_id=5, producer_epoch=0, coordinator_epoch=3, base_offset=12,
                                      timestamp=1_700_000_000_500)
    legacy = LegacyMessageSetBuilder(1, base_offset=50, compression=Codec.SNAPPY)
    for i in range(3):
        legacy.append(b"old-%d" % i, key=None, timestamp=1_600_000_000_000 + i)
    v0 = LegacyMessageSetBuilder(0, base_offset=53)
    v0.append(b"v0-value", key=b"k")
    legacy_blob = legacy.build() + v0.build()
    request = wire.request(FR(max_wait_ms=1, topics=(FR.FetchTopic(topic="t", partitions=(
        FR.FetchPartition(partition=0, fetch_offset=10), FR.FetchPartition(partition=1, fetch_offset=50))),)), 11)
    response = wire.response(request, FS(responses=(FS.FetchableTopicResponse(topic="t", partitions=(
        FS.PartitionData(partition_index=0, high_watermark=13, records=data + marker),
        FS.PartitionData(partition_index=1, high_watermark=54, records=legacy_blob))),)))
    tables = run([request, response], records=True)
    fetches = by_partition(tables["fetches"])
    assert (fetches["t", 0]["batch_count"], fetches["t", 0]["record_count"], fetches["t", 0]["last_offset"]) == (
        2, 3, 12)
    # legacy: a compressed wrapper counts once, and its first offset is not known without decompressing
    assert (fetches["t", 1]["batch_count"], fetches["t", 1]["record_count"], fetches["t", 1]["first_offset"],
            fetches["t", 1]["last_offset"]) == (2, 2, None, 53)
    records = tables["records"]
    assert [(r["partition"], r["offset"]) for r in records] == [(0, 10), (0, 11), (0, 12), (1, 50), (1, 51),
                                                               (1, 52), (1, 53)]
    control = records[2]
    assert control["is_control"] and control["is_transactional"] and control["source"] == "fetch"
    assert control["timestamp"].timestamp() == 1_700_000_000.5
    assert [r["compression"] for r in records] == ["lz4", "lz4", "none", "snappy", "snappy", "snappy", "none"]
    old, newest = records[3], records[6]
    assert (old["key"], old["value"], old["timestamp_type"]) == (None, b"old-0", "CREATE_TIME")
    assert old["producer_id"] is None and old["sequence"] is None and old["is_control"] is False
    assert (newest["timestamp"], newest["timestamp_type"], newest["key"]) == (None, "NO_TIMESTAMP", b"k")


def test_corrupt_batch_is_a_problem_and_other_partitions_continue():
    wire = Wire()
    good = batch_bytes(2, base_offset=0)
    bad = bytearray(batch_bytes(3, base_offset=2))
    bad[-1] ^= 0xFF  # inside the records: the CRC no longer matches
    request = wire.request(FR(max_wait_ms=1, topics=(FR.FetchTopic(topic="t", partitions=(
        FR.FetchPartition(partition=0), FR.FetchPartition(partition=1))),)), 11)
    response = wire.response(request, FS(responses=(FS.FetchableTopicResponse(topic="t", partitions=(
        FS.PartitionData(partition_index=0, records=good + bytes(bad)),
        FS.PartitionData(partition_index=1, records=good))),)))
    tables = run([request, response], records=True)
    (problem,) = tables["problems"]
    assert problem["kind"] == "undecodable" and "CRC mismatch" in problem["reason"]
    assert problem["reason"].startswith("records of t-0:")
    assert problem["correlation_id"] == response.correlation_id and problem["api_name"] == "Fetch"
    fetches = by_partition(tables["fetches"])
    assert fetches["t", 0]["batch_count"] == 1 and fetches["t", 0]["records_bytes"] == len(good) + len(bad)
    assert [(r["partition"], r["offset"]) for r in tables["records"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_records_that_do_not_decompress_are_a_problem():
    wire = Wire()
    blob = bytearray(batch_bytes(4, compression=Codec.ZSTD))
    blob[70:80] = b"\x00" * 10  # garbles the zstd frame; fix the CRC so only decompression fails
    from crc32c import crc32c
    blob[17:21] = crc32c(bytes(blob[21:])).to_bytes(4, "big")
    request = wire.request(PR(acks=0, timeout_ms=1, topic_data=(PR.TopicProduceData(name="t", partition_data=(
        PR.PartitionProduceData(index=0, records=bytes(blob)),)),)), 8)
    tables = run([request], records=True)
    assert tables["produces"][0]["record_count"] == 4  # from the header
    (problem,) = tables["problems"]
    assert problem["direction"] == "request" and "records of t-0" in problem["reason"]
    assert "records" not in tables


def test_summaries_read_headers_only():
    blob = batch_bytes(3, base_offset=7, compression=Codec.ZSTD) + batch_bytes(2, base_offset=10)
    summary = summarize_records(memoryview(blob + blob[:20]))  # a partial trailing batch is normal
    assert (summary.batch_count, summary.record_count, summary.first_offset, summary.last_offset,
            summary.compression, summary.error) == (2, 5, 7, 11, "zstd", None)
    assert summarize_records(None).records_bytes == 0


# ---- batching ----------------------------------------------------------------------------------

def test_batches_are_bounded_and_conform():
    wire = Wire()
    items = []
    for _ in range(4):
        request, response, _ = fetch_pair(wire)
        items += [request, response]
    batcher = TableBatcher(max_rows=3, records=True)
    emitted = []
    for item in items:
        emitted += batcher.add(item)
    emitted += batcher.finish()
    counts = {}
    for name, batch in emitted:
        assert batch.schema == schema_of(name)
        assert 0 < batch.num_rows <= 3
        counts[name] = counts.get(name, 0) + batch.num_rows
    assert counts == {"frames": 8, "fetches": 8, "records": 20, "bodies/FetchRequest": 4,
                      "bodies/FetchResponse": 4}
    small = TableBatcher(max_bytes=1)
    assert [name for name, _ in small.add(items[0])] == ["frames", "bodies/FetchRequest"]


def test_table_selection():
    wire = Wire()
    request, response, _ = fetch_pair(wire)
    tables = run([request, response], tables=["fetches"])
    assert set(tables) == {"fetches"}
    assert set(run([request, response], tables=["bodies"])) == {"bodies/FetchRequest", "bodies/FetchResponse"}
    assert set(run([request, response], tables=["frames"])) == {"frames"}
    with pytest.raises(ValueError, match="unknown tables"):
        TableBatcher(tables=["nope"])


def test_every_api_at_every_version_converts():
    """Default-constructed requests and responses of every API at every version (Kafka 4.3's, and Fetch
    v19), through real frames: the schemas and the converters agree across the whole spec set, and each
    message's bodies table takes them all."""
    wire = Wire()
    items = []
    for info in apis():
        for version in range(info.min_version, info.max_version + 1):
            request = wire.request(info.request_class(), version)
            items += [request, wire.response(request, info.response_class())]
    tables = run(items)
    rows = tables["frames"]
    assert len(rows) == len(items)
    failed = [(row["api_name"], row["api_version"], row["direction"], row["decode_error"]) for row in rows
              if row["decode_error"] is not None]
    assert failed == []
    for row in rows:
        name = api(row["api_key"]).request if row["direction"] == "request" else api(row["api_key"]).response
        assert_json_is_typed(json.loads(row["body"]), typed(tables, row), bodies.SCHEMAS[name], name)
    assert "problems" not in tables
    assert MESSAGES == {name for info in apis() for name in (info.request, info.response)}
    assert {name for name in tables if name.startswith("bodies/")} == {f"bodies/{name}" for name in MESSAGES}


def test_metadata_response_with_many_partitions():
    wire = Wire()
    request = wire.request(message_class("MetadataRequest")(), 12)
    cls = MetadataResponse
    topics = tuple(cls.MetadataResponseTopic(name=f"t{t}", topic_id=uuid.uuid4(), partitions=tuple(
        cls.MetadataResponsePartition(partition_index=p, leader_id=p % 3, replica_nodes=(1, 2, 3),
                                      isr_nodes=(1, 2), error_code=9 if p == 5 else 0) for p in range(100)))
                   for t in range(10))
    response = wire.response(request, cls(topics=topics))
    tables = run([request, response])
    row = tables["frames"][1]
    assert row["error_codes"] == [9]
    body = typed(tables, row)
    assert sum(len(t["partitions"]) for t in body["topics"]) == 1000
    assert body["topics"][0]["partitions"][5]["isr_nodes"] == [1, 2]
    assert json.loads(row["body"])["topics"][9]["partitions"][99]["replica_nodes"] == [1, 2, 3]


# ---- the compiled converters against a plain reference walk -----------------------------------------

def _versions(text):
    from codegen.model import Versions
    return Versions.parse(text)


def reference_value(obj, schema, version, flexible):
    """What Arrow should give back for ``obj``: a dict per struct, None for fields not in ``version``."""
    out = {}
    for f in schema["fields"]:
        name = f["name"]
        if name == "unknown_tags":
            out[name] = dict(obj.unknown_tags) if flexible and obj.unknown_tags else None
        elif version not in _versions(f["versions"]):
            out[name] = None
        else:
            out[name] = _reference_item(getattr(obj, name), f, f["type"], version, flexible, json_form=False)
    return out


def reference_json(obj, schema, version, flexible):
    out = {}
    for f in schema["fields"]:
        name = f["name"]
        if name == "unknown_tags":
            if flexible and obj.unknown_tags:
                out[name] = {str(tag): base64.b64encode(raw).decode() for tag, raw in obj.unknown_tags.items()}
        elif version in _versions(f["versions"]):
            out[name] = _reference_item(getattr(obj, name), f, f["type"], version, flexible, json_form=True)
    return out


def _reference_item(value, field, kafka_type, version, flexible, json_form):
    if value is None:
        return None
    if kafka_type.startswith("[]"):
        return [_reference_item(item, field, kafka_type[2:], version, flexible, json_form) for item in value]
    if "fields" in field:  # a struct (the field holds its fields)
        walk = reference_json if json_form else reference_value
        return walk(value, field, version, flexible)
    if kafka_type == "uuid":
        return str(value)
    if kafka_type == "records":
        return {"records_bytes": len(value)} if json_form else bytes(value)
    if kafka_type == "bytes":
        return base64.b64encode(value).decode() if json_form else bytes(value)
    return value


def _maps_as_dicts(value):
    """Arrow gives maps back as lists of pairs."""
    if isinstance(value, dict):
        return {key: dict(item) if key == "unknown_tags" and item is not None else _maps_as_dicts(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_maps_as_dicts(item) for item in value]
    return value


def _differential_cases():
    cases = []
    for name in sorted(bodies.SCHEMAS):
        cls = message_class(name)
        low, high = cls.VALID_VERSIONS
        versions = {low, high}
        if cls.FLEXIBLE_VERSIONS is not None:
            versions.add(max(cls.FLEXIBLE_VERSIONS[0], low))
        cases += [(cls, version) for version in sorted(versions)]
    return cases


DIFFERENTIAL_CASES = _differential_cases()


@pytest.mark.parametrize("cls, version", DIFFERENTIAL_CASES,
                         ids=[f"{cls.NAME}-v{version}" for cls, version in DIFFERENTIAL_CASES])
@settings(max_examples=3, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_converters_agree_with_a_reference_walk(cls, version, data):
    """Random messages (unknown tags included), decoded so that bytes are memoryviews and default
    structs are lazy: the compiled converters give what a plain walk over SCHEMAS gives."""
    flexible = cls.FLEXIBLE_VERSIONS is not None and version >= cls.FLEXIBLE_VERSIONS[0]
    drawn = data.draw(message_strategy(cls, version, unknown_tags=flexible), label=cls.NAME)
    message = cls.decode(drawn.encode(version), version, exact=True)
    schema = bodies.SCHEMAS[cls.NAME]
    convert = bodies.converter(cls.NAME, version)
    (back,) = pa.array([convert.value(message)], type=bodies.arrow_type(cls.NAME)).to_pylist()
    assert _maps_as_dicts(back) == reference_value(message, schema, version, flexible)
    assert json.loads(convert.json(message)) == reference_json(message, schema, version, flexible)


FRAMED_CASES = [(cls, version) for cls, version in DIFFERENTIAL_CASES if cls.NAME in MESSAGES]  # no data types


@pytest.mark.parametrize("cls, version", FRAMED_CASES, ids=[f"{cls.NAME}-v{version}" for cls, version in FRAMED_CASES])
@settings(max_examples=1, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_the_bodies_table_holds_what_the_frames_json_says(cls, version, data):
    """Random messages (unknown tags included) framed and batched: the frame's JSON body and its row of
    bodies/<message> say the same, field by field (capture_bodies)."""
    flexible = cls.FLEXIBLE_VERSIONS is not None and version >= cls.FLEXIBLE_VERSIONS[0]
    drawn = data.draw(message_strategy(cls, version, unknown_tags=flexible), label=cls.NAME)
    wire = Wire()
    info = api(cls.API_KEY)
    if cls.NAME == info.request:
        items = [wire.request(drawn, version)]
    else:
        request = wire.request(info.request_class(), version)
        items = [request, wire.response(request, drawn)]
    tables = run(items, tables=["frames", "bodies"])
    frame = tables["frames"][-1]
    assert frame["decode_error"] is None
    assert_json_is_typed(json.loads(frame["body"]), typed(tables, frame), bodies.SCHEMAS[cls.NAME], cls.NAME)


def test_end_connection_emits_its_unanswered_requests_only():
    one, two = Wire("a:1-b:9092"), Wire("c:1-b:9092")
    request_one, _, _ = fetch_pair(one)
    request_two, _, _ = fetch_pair(two)
    batcher = TableBatcher(tables=["fetches"], max_rows=2)
    assert batcher.add(request_one) == [] and batcher.add(request_two) == []
    emitted = batcher.end_connection("a:1-b:9092")
    assert [r["connection"] for _, batch in emitted for r in batch.to_pylist()] == ["a:1-b:9092"] * 2
    rest = batcher.finish()
    assert [r["connection"] for _, batch in rest for r in batch.to_pylist()] == ["c:1-b:9092"] * 2

"""Share groups (KIP-932) in captures, decoded in process (no Spark; the Spark engines' agreement is in
tests/capture_spark/test_capture_spark_shares.py):

- a real capture (tcpdump on loopback) of confluent-kafka's ShareConsumers against kafkawire's broker
  (``capture_shares``: explicit ACCEPT, RELEASE, REJECT, a poison record released to the delivery
  limit, a member gone quiet whose records another gets after the lock expires): the share tables, the
  records ShareFetch responses carry, and the report's share view, against what the test did;
- tshark 4.0 (which predates the share APIs) against the same capture: it agrees on every frame header,
  and it cannot read exactly the bodies of APIs and versions newer than it;
- a synthetic capture for what librdkafka does not send: acknowledgements piggybacked on ShareFetch with
  one type per offset, a ShareAcknowledge never answered;
- the replay's rules (``shares.share_view``) one by one.
"""
from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
import subprocess
import uuid
from collections import Counter

import pyarrow.parquet as pq
import pytest

from support import capture_shares as workload_of
from support.capture_in_process import decode_in_process
from support.capture_transactions import Capture

from kafkawire import messages as m
from kafkawire.capture.reporting import report
from kafkawire.capture.reporting.shares import MAX_RANGE, TOO_WIDE, share_view
from kafkawire.capture.tables.share_joins import acknowledgement_runs
from kafkawire.cli import main
from kafkawire.records import RecordBatchBuilder

TSHARK = shutil.which("tshark")
LIMIT = workload_of.DELIVERY_LIMIT
GROUPS = workload_of.TOPICS


def rows(out, table: str) -> list[dict]:
    return pq.read_table(out / table).to_pylist()


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    pytest.importorskip("confluent_kafka")
    folder = tmp_path_factory.mktemp("shares")
    workload = workload_of.capture_shares(folder)
    return workload, decode_in_process(workload.capture, folder / "tables")


def test_the_test_did_what_it_says(real):
    workload, _ = real
    acks, quiet = workload_of.ACKS_GROUP, workload_of.QUIET_GROUP
    assert workload.deliveries == {(acks, 0): [1], (acks, 1): [1, 2], (acks, 2): [1], (acks, 3): [1, 2, 3],
                                   **{(quiet, offset): [1, 2] for offset in range(3)}}
    assert len(workload.members[acks]) == 1 and len(set(workload.members[quiet])) == 2


def test_the_capture_decodes_cleanly(real):
    _, tables = real
    assert [p for p in rows(tables, "problems") if p["kind"] != "unanswered_request"] == []
    frames = rows(tables, "frames")
    assert all(f["decode_error"] is None for f in frames)
    assert {"ShareFetch", "ShareAcknowledge", "ShareGroupHeartbeat"} <= {f["api_name"] for f in frames}


def _expanded(table: list[dict], value: str) -> dict[tuple[str, int], list]:
    """(group, offset) -> (member, value) of each row covering it, in capture order."""
    found: dict[tuple[str, int], list] = {}
    for row in sorted(table, key=lambda row: (row["ts"], row["first_offset"])):
        for offset in range(row["first_offset"], row["last_offset"] + 1):
            found.setdefault((row["group_id"], offset), []).append((row["member_id"], row[value]))
    return found


def test_acquisitions_are_the_deliveries_each_member_got(real):
    workload, tables = real
    acquired = rows(tables, "share_acquisitions")
    assert {(r["group_id"], r["topic"], r["partition"]) for r in acquired} == {(g, t, 0) for g, t in GROUPS.items()}
    assert all(r["error_code"] == 0 and r["response_error_code"] == 0 for r in acquired)
    assert {r["acquisition_lock_timeout_ms"] for r in acquired} == {workload_of.LOCK_MS}
    (acks_member,) = workload.members[workload_of.ACKS_GROUP]
    quiet, other = workload.members[workload_of.QUIET_GROUP]
    expected = {}
    for (group, offset), counts in workload.deliveries.items():
        members = [acks_member] * len(counts) if group == workload_of.ACKS_GROUP else [quiet, other]
        expected[group, offset] = list(zip(members, counts))
    assert _expanded(acquired, "delivery_count") == expected


def test_acknowledgements_are_what_the_members_sent(real):
    workload, tables = real
    acknowledged = rows(tables, "share_acknowledgements")
    assert all(r["error_code"] == 0 and r["response_error_code"] == 0 for r in acknowledged)
    assert {r["api_name"] for r in acknowledged} <= {"ShareFetch", "ShareAcknowledge"}
    (acks_member,) = workload.members[workload_of.ACKS_GROUP]
    _, other = workload.members[workload_of.QUIET_GROUP]
    member = {workload_of.ACKS_GROUP: acks_member, workload_of.QUIET_GROUP: other}
    assert _expanded(acknowledged, "acknowledge_type") == {
        key: [(member[key[0]], kind) for kind in kinds] for key, kinds in workload.acknowledged.items()}
    assert {(r["topic"], r["partition"]) for r in acknowledged} == {(t, 0) for t in GROUPS.values()}


def test_share_fetched_records_carry_what_was_acquired(real):
    _, tables = real
    fetched = [r for r in rows(tables, "records") if r["source"] == "share_fetch"]
    by_response = {(r["connection"], r["correlation_id"], r["topic"], r["offset"]): r for r in fetched}
    for acquired in rows(tables, "share_acquisitions"):
        for offset in range(acquired["first_offset"], acquired["last_offset"] + 1):
            record = by_response[acquired["connection"], acquired["correlation_id"], acquired["topic"], offset]
            assert (record["key"], record["value"]) == (b"k%d" % offset, b"v%d" % offset)


def test_report_share_view(real):
    workload, tables = real
    summary = report.build_arrow(str(tables), delivery_limit=LIMIT)
    assert summary.share_records == workload_of.expected_share_records(workload)
    assert summary.share_groups == [
        dict(group="acks", members=1, records=4, accepted=2, released=4, rejected=1, redelivered=2, lock_expiries=0,
             delivery_limit=1, acquired=0),
        dict(group="quiet", members=2, records=3, accepted=3, released=0, rejected=0, redelivered=3, lock_expiries=3,
             delivery_limit=0, acquired=0)]
    text = summary.text()
    assert "share groups (KIP-932" in text
    assert f"acks share-acks-0@3: deliveries {LIMIT}, members 1, lock expiries 0, acknowledged " \
           f"RELEASE/RELEASE/RELEASE, archived (delivery_limit)" in text
    assert "quiet share-quiet-0@0: deliveries 2, members 2, lock expiries 1, acknowledged ACCEPT, acknowledged" in text


def test_report_command_takes_the_delivery_limit(real):
    workload, tables = real
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", str(tables), "--json", "--engine", "arrow", "--share-delivery-limit", "9"]) == 0
    found = json.loads(out.getvalue())
    poison = [r for r in found["share_records"] if r["group"] == "acks" and r["offset"] == 3]
    expected = workload_of.expected_share_records(workload)[3]
    assert poison == [dict(expected, state="available", archived=None)]  # under the limit


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (apt-get install tshark)")
def test_tshark_disagrees_only_on_bodies_newer_than_it(real):
    """tshark 4.0 reads every frame's header as the tables do; the bodies it cannot read are those of
    APIs it does not know (the share APIs among them) and of versions above the ones it knows."""
    workload, tables = real
    fields = ["tcp.srcport", "tcp.dstport", "kafka.api_key", "kafka.api_version", "kafka.correlation_id",
              "_ws.expert.message"]
    done = subprocess.run([TSHARK, "-r", str(workload.capture), "-d", f"tcp.port=={workload.port},kafka", "-Y",
                           "kafka", "-T", "fields", "-E", "aggregator=|", "-E", "occurrence=a",
                           *[a for f in fields for a in ("-e", f)]], capture_output=True, text=True, check=True)
    frames = rows(tables, "frames")
    mine = {(f["client"].rsplit(":", 1)[1], f["direction"], f["correlation_id"]): f for f in frames}
    seen: Counter = Counter()
    unread = set()
    for line in done.stdout.splitlines():
        sport, dport, keys, versions, correlations, expert = line.split("\t")
        correlations = correlations.split("|") if correlations else []
        request = int(dport) == workload.port
        keys, versions = keys.split("|") if keys else [], versions.split("|") if versions else []
        for i, correlation in enumerate(correlations):
            f = mine[sport if request else dport, "request" if request else "response", int(correlation)]
            if len(keys) == len(correlations):
                assert f["api_key"] == int(keys[i]), line
            if request and len(versions) == len(correlations):
                assert f["api_version"] == int(versions[i]), line
            seen[f["api_name"]] += 1
        if "18" in keys:  # an ApiVersions answer: tshark notes each API it lists that it does not read
            continue
        for message in expert.split("|"):
            if message.startswith("Unknown ") and message.endswith(" API key"):
                unread.add(int(message.split()[1]))
            elif message.startswith("Unsupported ") and " version. Supports v0-" in message:
                name, known = message.split()[1], int(message.rsplit("-", 1)[1].rstrip("."))
                assert any(f["api_name"] == name and f["api_version"] > known for f in frames), message
    assert sum(seen.values()) == len(frames)  # tshark found every frame the tables have
    assert {78, 79} <= unread and all(key >= 68 for key in unread)  # ShareFetch, ShareAcknowledge, ...
    assert all(f["decode_error"] is None for f in frames if f["api_key"] in unread)


# ---- a synthetic capture: acknowledgements piggybacked on ShareFetch -------------------------------------

TOPIC_ID = uuid.UUID(int=0x5EED)


def _records(base_offset: int, count: int) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset)
    for i in range(count):
        builder.append(b"job-%d" % (base_offset + i), timestamp=1_750_000_000_000)
    return builder.build()


def test_piggybacked_acknowledgements_one_type_per_offset(tmp_path):
    capture = Capture()
    connection = capture.connection(43001, "app")
    connection.call(0, m.MetadataRequest(topics=[]), 12, m.MetadataResponse(topics=[
        m.MetadataResponse.MetadataResponseTopic(name="jobs", topic_id=TOPIC_ID)]))
    batches = [m.ShareFetchRequest.AcknowledgementBatch(first_offset=10, last_offset=14,
                                                        acknowledge_types=[1, 1, 2, 0, 3]),
               m.ShareFetchRequest.AcknowledgementBatch(first_offset=20, last_offset=22, acknowledge_types=[1, 2])]
    connection.call(10, m.ShareFetchRequest(group_id="g", member_id="m1", share_session_epoch=3, max_wait_ms=500,
                                            min_bytes=1, max_records=100, batch_size=100, topics=[
        m.ShareFetchRequest.FetchTopic(topic_id=TOPIC_ID, partitions=[m.ShareFetchRequest.FetchPartition(
            partition_index=2, acknowledgement_batches=batches)])]), 1,
        m.ShareFetchResponse(acquisition_lock_timeout_ms=30000, responses=[
            m.ShareFetchResponse.ShareFetchableTopicResponse(topic_id=TOPIC_ID, partitions=[
                m.ShareFetchResponse.PartitionData(partition_index=2, records=_records(30, 2), acquired_records=[
                    m.ShareFetchResponse.AcquiredRecords(first_offset=30, last_offset=31, delivery_count=4)])])]))
    connection.call(20, m.ShareAcknowledgeRequest(group_id="g", member_id="m1", share_session_epoch=4, topics=[
        m.ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=TOPIC_ID, partitions=[
            m.ShareAcknowledgeRequest.AcknowledgePartition(partition_index=2, acknowledgement_batches=[
                m.ShareAcknowledgeRequest.AcknowledgementBatch(first_offset=30, last_offset=31,
                                                               acknowledge_types=[1])])])]), 1, None)
    tables = decode_in_process(capture.write(tmp_path / "piggyback.pcapng"), tmp_path / "tables")
    acknowledged = sorted(rows(tables, "share_acknowledgements"), key=lambda r: (r["ts"], r["first_offset"]))
    assert [(r["api_name"], r["first_offset"], r["last_offset"], r["acknowledge_type"], r["error_code"])
            for r in acknowledged] == [
        ("ShareFetch", 10, 11, "ACCEPT", 0), ("ShareFetch", 12, 12, "RELEASE", 0), ("ShareFetch", 13, 13, "GAP", 0),
        ("ShareFetch", 14, 14, "REJECT", 0), ("ShareFetch", 20, 22, None, 0),  # 2 types for 3 offsets
        ("ShareAcknowledge", 30, 31, "ACCEPT", None)]  # never answered
    assert {(r["group_id"], r["member_id"], r["topic"], r["topic_id"], r["partition"]) for r in acknowledged} == {
        ("g", "m1", "jobs", str(TOPIC_ID), 2)}
    assert [r["share_session_epoch"] for r in acknowledged] == [3] * 5 + [4]
    (acquired,) = rows(tables, "share_acquisitions")
    assert (acquired["topic"], acquired["first_offset"], acquired["last_offset"], acquired["delivery_count"],
            acquired["acquisition_lock_timeout_ms"]) == ("jobs", 30, 31, 4, 30000)
    fetched = [r for r in rows(tables, "records") if r["source"] == "share_fetch"]
    assert [(r["topic"], r["partition"], r["offset"], r["value"]) for r in fetched] == [
        ("jobs", 2, 30, b"job-30"), ("jobs", 2, 31, b"job-31")]


def test_acknowledgement_runs():
    assert acknowledgement_runs(5, 9, [1]) == [(5, 9, "ACCEPT")]
    assert acknowledgement_runs(5, 7, [2, 2, 2]) == [(5, 7, "RELEASE")]
    assert acknowledgement_runs(5, 8, [4, 3, 3, 9]) == [(5, 5, "RENEW"), (6, 7, "REJECT"), (8, 8, "UNKNOWN")]
    assert acknowledgement_runs(5, 7, [1, 2]) == [(5, 7, None)]
    assert acknowledgement_runs(5, 7, []) == [(5, 7, None)]
    assert acknowledgement_runs(7, 5, [1, 2]) == [(7, 5, None)]


# ---- the replay's rules -------------------------------------------------------------------------------

def acquired(ts: int, first: int, last: int, count: int, member: str = "a", lock_ms: int | None = 1000,
             group: str = "g") -> dict:
    return dict(ts=ts, group_id=group, member_id=member, topic="t", topic_id=None, partition=0, first_offset=first,
                last_offset=last, delivery_count=count, acquisition_lock_timeout_ms=lock_ms)


def acked(ts: int, first: int, last: int, kind: str, error_code: int | None = 0, member: str = "a") -> dict:
    return dict(ts=ts, group_id="g", member_id=member, topic="t", topic_id=None, partition=0, first_offset=first,
                last_offset=last, acknowledge_type=kind, error_code=error_code)


def by_offset(records: list[dict]) -> dict[int, dict]:
    return {r["offset"]: r for r in records}


def test_a_lock_that_ran_out_at_the_limit_archives():
    # offset 0: at the limit, its lock (1 s) ran out before the capture's end; offset 1: not yet
    _, records, _ = share_view([acquired(0, 0, 0, 3), acquired(2_000_000, 1, 1, 3)], [], end=2_500_000,
                               delivery_limit=3)
    found = by_offset(records)
    assert (found[0]["state"], found[0]["archived"]) == ("archived", "delivery_limit")
    assert (found[1]["state"], found[1]["archived"]) == ("acquired", None)
    _, records, _ = share_view([acquired(0, 0, 0, 2)], [], end=2_500_000, delivery_limit=3)
    assert by_offset(records)[0]["state"] == "available"  # under the limit: offered again


def test_renew_keeps_the_record_acquired():
    _, records, _ = share_view([acquired(0, 0, 0, 1)], [acked(900_000, 0, 0, "RENEW")], end=1_500_000)
    assert by_offset(records)[0]["state"] == "acquired" and by_offset(records)[0]["acknowledgements"] == []
    _, records, _ = share_view([acquired(0, 0, 0, 1)], [acked(900_000, 0, 0, "RENEW")], end=1_900_000)
    assert by_offset(records)[0]["state"] == "available"  # a lock duration after the renewal


def test_refused_and_unanswered_acknowledgements_take_no_effect():
    groups, records, _ = share_view(
        [acquired(0, 0, 1, 1), acquired(5_000_000, 0, 1, 2, member="b")],
        [acked(10, 0, 0, "ACCEPT", error_code=None), acked(20, 1, 1, "ACCEPT", error_code=76)], end=None)
    assert [(r["members"], r["lock_expiries"], r["acknowledgements"]) for r in records] == [
        (["a", "b"], 1, []), (["a", "b"], 1, [])]
    assert groups[0]["lock_expiries"] == 2 and groups[0]["members"] == 2 and groups[0]["acquired"] == 2


def test_ranges_too_wide_are_problems():
    groups, records, problems = share_view(
        [acquired(0, 0, MAX_RANGE, 1)], [acked(5, 10, 9, "ACCEPT"), acked(6, 0, 0, "ACCEPT")], end=10)
    assert [p["kind"] for p in problems] == [TOO_WIDE]
    assert f"offsets 0-{MAX_RANGE} of t-0 acquired in one range" in problems[0]["reason"]
    assert [(r["offset"], r["state"], r["members"]) for r in records] == [(0, "acknowledged", [])]


def test_the_replay_does_not_depend_on_the_order_rows_come_in():
    acquisitions = [acquired(0, 0, 4, 1), acquired(30, 2, 3, 2, member="b"), acquired(50, 0, 0, 2, group="h")]
    acknowledgements = [acked(10, 0, 1, "ACCEPT"), acked(20, 2, 3, "RELEASE"), acked(40, 2, 2, "REJECT", member="b")]
    expected = share_view(acquisitions, acknowledgements, end=60)
    shuffled = random.Random(7)
    for _ in range(5):
        shuffled.shuffle(acquisitions)
        shuffled.shuffle(acknowledgements)
        assert share_view(acquisitions, acknowledgements, end=60) == expected
    groups, records, _ = expected
    assert [g["group"] for g in groups] == ["g", "h"]
    assert [(r["group"], r["offset"], r["state"]) for r in records] == [
        ("g", 0, "acknowledged"), ("g", 1, "acknowledged"), ("g", 2, "archived"), ("g", 3, "acquired"),
        ("g", 4, "acquired"), ("h", 0, "acquired")]

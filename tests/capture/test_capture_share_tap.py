"""kafkawire's own share consumer (``AsyncShareConsumer``, explicit acknowledgement) captured by the
broker's wire tap (``tap_path``, pcapng written by the broker itself) and decoded in process: its
acknowledgements ride on ShareFetch requests (ACCEPT, RELEASE, REJECT of the first delivery) and on a
ShareAcknowledge at commit (the redelivered record ACCEPTed), and ``share_acknowledgements``, the
records ShareFetch responses carry and the report's share view say so, against what the test did.
"""
from __future__ import annotations

import asyncio
import time

import pyarrow.parquet as pq
import pytest

from support.broker_harness import BrokerThread
from support.capture_in_process import decode_in_process

from kafkawire.capture.reporting import report
from kafkawire.client import AcknowledgeType, AsyncShareConsumer, Producer

TOPIC, GROUP = "tapped-shares", "tapped"
FIRST = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.RELEASE, 2: AcknowledgeType.REJECT,
         3: AcknowledgeType.ACCEPT}  # each record's first acknowledgement; 1 comes back and is accepted
DEADLINE_S = 60


def rows(out, table: str) -> list[dict]:
    return pq.read_table(out / table).to_pylist()


async def _consume(bootstrap: str) -> tuple[str, list[tuple[int, int]]]:
    """(member id, (offset, delivery count) of each record polled): every first delivery acknowledged
    as FIRST says (sent with the next ShareFetch), the redelivered record ACCEPTed and committed."""
    consumer = AsyncShareConsumer(bootstrap_servers=bootstrap, group_id=GROUP, share_acknowledgement_mode="explicit")
    consumer.subscribe([TOPIC])
    polled: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while (1, 2) not in polled and time.monotonic() < deadline:
            for record in await consumer.poll(200):
                polled.append((record.offset, record.delivery_count))
                if record.delivery_count == 1:
                    consumer.acknowledge(record, FIRST[record.offset])
                else:
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
        assert (1, 2) in polled, polled
        assert all(error is None for error in (await consumer.commit_sync(15000)).values())
        return consumer.member.member_id, polled
    finally:
        await consumer.close()


@pytest.fixture(scope="module")
def tapped(tmp_path_factory):
    folder = tmp_path_factory.mktemp("share-tap")
    capture = folder / "tap.pcapng"
    with BrokerThread(data_dir=folder / "data", share_auto_offset_reset="earliest", tap_path=str(capture)) as broker:
        producer = Producer(bootstrap_servers=broker.bootstrap)
        try:
            for offset in range(len(FIRST)):
                producer.send(TOPIC, b"v%d" % offset, key=b"k%d" % offset)
            producer.flush(15000)
        finally:
            producer.close()
        member, polled = asyncio.run(_consume(broker.bootstrap))
    return member, polled, decode_in_process(capture, folder / "tables")  # the broker's stop closed the tap


def test_the_consumer_did_what_the_test_says(tapped):
    _, polled, _ = tapped
    assert sorted(polled) == [(0, 1), (1, 1), (1, 2), (2, 1), (3, 1)]


def test_the_tap_decodes_cleanly(tapped):
    _, _, tables = tapped
    assert [p for p in rows(tables, "problems") if p["kind"] != "unanswered_request"] == []
    frames = rows(tables, "frames")
    assert all(f["decode_error"] is None for f in frames)
    assert {"ShareGroupHeartbeat", "ShareFetch", "ShareAcknowledge"} <= {f["api_name"] for f in frames}


def test_acknowledgements_ride_on_share_fetch_and_on_the_commits_share_acknowledge(tapped):
    member, _, tables = tapped
    acknowledged = sorted(rows(tables, "share_acknowledgements"), key=lambda r: (r["ts"], r["first_offset"]))
    assert all((r["group_id"], r["member_id"], r["topic"], r["partition"], r["error_code"], r["response_error_code"])
               == (GROUP, member, TOPIC, 0, 0, 0) for r in acknowledged)
    by_offset: dict[int, list[tuple[str, str]]] = {}
    for r in acknowledged:
        for offset in range(r["first_offset"], r["last_offset"] + 1):
            by_offset.setdefault(offset, []).append((r["api_name"], r["acknowledge_type"]))
    assert by_offset == {0: [("ShareFetch", "ACCEPT")], 1: [("ShareFetch", "RELEASE"), ("ShareAcknowledge", "ACCEPT")],
                         2: [("ShareFetch", "REJECT")], 3: [("ShareFetch", "ACCEPT")]}


def test_acquisitions_and_the_records_share_fetch_carried(tapped):
    member, polled, tables = tapped
    acquired = rows(tables, "share_acquisitions")
    assert {(r["group_id"], r["member_id"], r["topic"]) for r in acquired} == {(GROUP, member, TOPIC)}
    assert sorted((o, r["delivery_count"]) for r in acquired
                  for o in range(r["first_offset"], r["last_offset"] + 1)) == sorted(polled)
    fetched = {(r["correlation_id"], r["offset"]): (r["key"], r["value"])
               for r in rows(tables, "records") if r["source"] == "share_fetch"}
    for r in acquired:
        for offset in range(r["first_offset"], r["last_offset"] + 1):
            assert fetched[r["correlation_id"], offset] == (b"k%d" % offset, b"v%d" % offset)


def test_the_report_share_view_shows_the_acknowledgement_types(tapped):
    member, _, tables = tapped
    summary = report.build_arrow(str(tables))
    assert summary.share_groups == [dict(group=GROUP, members=1, records=4, accepted=3, released=1, rejected=1,
                                         redelivered=1, lock_expiries=0, delivery_limit=0, acquired=0)]
    records = {r["offset"]: r for r in summary.share_records}
    assert {offset: (r["acknowledgements"], r["deliveries"], r["state"], r["archived"], r["members"])
            for offset, r in records.items()} == {
        0: (["ACCEPT"], 1, "acknowledged", None, [member]),
        1: (["RELEASE", "ACCEPT"], 2, "acknowledged", None, [member]),
        2: (["REJECT"], 1, "archived", "rejected", [member]),
        3: (["ACCEPT"], 1, "acknowledged", None, [member])}
    text = summary.text()
    assert f"{TOPIC}-0@1: deliveries 2, members 1, lock expiries 0, acknowledged RELEASE/ACCEPT, acknowledged" in text
    assert f"{TOPIC}-0@2: deliveries 1, members 1, lock expiries 0, acknowledged REJECT, archived (rejected)" in text

"""Transactions in captures, decoded in process (no Spark): the produces table's transactional columns,
transaction markers in the records table, and the report's transactions view and problems, on a
synthetic capture of kafkawire-encoded frames whose answers are known (``capture_transactions``);
then the replay's rules one by one (``transactions.follow``)."""
from __future__ import annotations

import re

from support import capture_transactions as synthetic
import pyarrow.parquet as pq
import pytest
from support.capture_in_process import decode_in_process

from kafkawire.capture.reporting import report
from kafkawire.capture.reporting.transactions import follow


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("transactions")
    return decode_in_process(synthetic.build(folder / "transactions.pcapng"), folder / "tables")


def rows(out, table: str) -> list[dict]:
    return pq.read_table(out / table).to_pylist()


def ms(ts) -> int:
    return round((ts.timestamp() * 1e9 - synthetic.T0) / 1e6)


def test_the_capture_decodes_cleanly(tables):
    assert [p for p in rows(tables, "problems")] == []
    assert all(f["decode_error"] is None for f in rows(tables, "frames"))


def test_produces_carry_the_transactional_id_producer_and_epoch(tables):
    produces = rows(tables, "produces")
    transactional = sorted((ms(r["ts"]), r["producer_epoch"], r["partition"])
                           for r in produces if r["is_transactional"])
    assert transactional == sorted((at, epoch, p) for at, epoch, partitions in synthetic.EXPECTED_PRODUCES
                                   for p in partitions)
    for row in produces:
        if row["is_transactional"]:
            expected = synthetic.AUDIT if row["producer_id"] == synthetic.AUDIT_PID else synthetic.ORDERS
            assert (row["transactional_id"], row["producer_id"]) == (
                expected, synthetic.AUDIT_PID if expected == synthetic.AUDIT else synthetic.ORDERS_PID)
        else:  # the idempotent producer's
            assert (row["transactional_id"], row["producer_id"], row["producer_epoch"]) == (
                None, synthetic.IDEMPOTENT_PID, 0)
    fenced = [r for r in produces if r["error_code"] == 90]
    assert [(ms(r["ts"]), r["producer_epoch"]) for r in fenced] == [(2011, 0)]


def test_transaction_markers_are_control_records(tables):
    fetched = [r for r in rows(tables, "records") if r["source"] == "fetch"]
    assert [(r["offset"], r["is_transactional"], r["is_control"], r["control_type"]) for r in fetched] == [
        (0, True, False, None), (1, True, True, "COMMIT")]
    assert {r["control_type"] for r in rows(tables, "records") if r["source"] == "produce"} == {None}


def test_report_transactions_and_their_problems(tables):
    summary = report.build_arrow(str(tables))
    assert summary.transactions == synthetic.EXPECTED_TRANSACTIONS
    problems = {row["kind"]: row for row in summary.problems}
    assert set(problems) == set(synthetic.EXPECTED_PROBLEMS)
    for kind, reasons in synthetic.EXPECTED_PROBLEMS.items():
        assert (problems[kind]["count"], problems[kind]["example"]) == (len(reasons), reasons[0])
    text = summary.text()
    assert re.search(r"\n  orders-tx +5 +2 +3 +0 +398\.80 +1901\.00\n", text), text
    assert re.search(r"\n  audit-tx +1 +0 +0 +1 +- +-\n", text), text
    assert re.search(r"\n  fenced_producer +2  e\.g\. transactional id 'orders-tx'", text), text


def test_a_capture_without_transactions_says_none(tmp_path):
    from support.capture_tables import random_tables

    summary = report.build_arrow(str(random_tables(tmp_path / "t", seed=3)))
    assert summary.transactions == []
    assert "transactions (per transactional id" in summary.text()


# ---- the replay's rules ------------------------------------------------------------------------------------
# Times in these rows are milliseconds * 1000 (the tables' microseconds); the capture's end likewise.

def call(at: int, api_key: int, body: dict, errors=(), answered: bool = True, connection: str = "c"):
    request = {"connection": connection, "direction": "request", "ts": at * 1000, "api_key": api_key,
               "correlation_id": at, "error_codes": None, "body": body}
    if not answered:
        return [request]
    return [request, {**request, "direction": "response", "ts": (at + 1) * 1000, "error_codes": list(errors),
                      "body": {}}]


def end_txn(at: int, committed: bool, errors=(), answered: bool = True):
    return call(at, 26, {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "committed": committed},
                errors, answered)


def add_offsets(at: int, errors=()):
    return call(at, 25, {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "group_id": "g"}, errors)


def written(at: int, transactional_id="t", producer_id: int = 1, epoch: int = 0, errors=()):
    return {"connection": "d", "ts": at * 1000, "correlation_id": at, "transactional_id": transactional_id,
            "producer_id": producer_id, "producer_epoch": epoch, "partitions": 1, "error_codes": list(errors)}


def test_a_transaction_the_capture_joined_late_counts_without_a_duration():
    (row,), problems = follow(end_txn(5, committed=True), [], 10_000 * 1000)
    assert (row["begun"], row["committed"], row["mean_ms"]) == (1, 1, None) and problems == []


def test_a_refused_end_leaves_the_transaction_open_and_then_hanging():
    frames = add_offsets(0) + end_txn(10, committed=True, errors=[51])  # CONCURRENT_TRANSACTIONS
    (row,), problems = follow(frames, [written(5)], 59_000 * 1000)
    assert (row["begun"], row["committed"], row["open"], problems) == (1, 0, 1, [])  # within the default 60 s
    (row,), problems = follow(frames, [written(5)], 70_000 * 1000)
    assert [p["kind"] for p in problems] == ["hanging_transaction"]
    assert "timeout of 60000 ms" in problems[0]["reason"]


def test_an_end_sent_in_time_but_not_answered_in_the_capture_is_not_hanging():
    frames = add_offsets(0) + end_txn(10, committed=False, answered=False)
    (row,), problems = follow(frames, [written(5)], 90_000 * 1000)
    assert (row["open"], problems) == (1, [])


def test_a_transaction_without_data_does_not_hang():
    (row,), problems = follow(add_offsets(0), [], 90_000 * 1000)
    assert (row["open"], problems) == (1, [])


def test_a_produce_without_a_transactional_id_is_known_by_its_producer_id():
    frames = call(0, 22, {"transactional_id": "t", "transaction_timeout_ms": 100, "producer_id": -1,
                          "producer_epoch": -1}) + end_txn(500, committed=True)
    frames[1]["body"] = {"producer_id": 1, "producer_epoch": 0}
    (row,), problems = follow(frames, [written(10, transactional_id=None)], 1_000 * 1000)
    assert (row["begun"], row["committed"]) == (1, 1)
    assert [p["kind"] for p in problems] == ["hanging_transaction"]  # ended at 500 ms, past its 100 ms
    assert "timeout of 100 ms" in problems[0]["reason"]


def test_failed_adds_begin_nothing():
    assert follow(add_offsets(0, errors=[47]), [], 90_000 * 1000) == ([], [])


def test_the_replay_does_not_depend_on_the_order_rows_come_in(tables):
    """The engines hand the rows over in any order: shuffled, they give the same view and problems."""
    import random

    from kafkawire.capture.reporting.transactions import (
        FRAME_COLUMNS,
        FRAME_KEY,
        PRODUCE_COLUMNS,
        TXN_API_KEYS,
        TXN_MESSAGES,
        frame_rows,
        produce_requests,
    )

    def micros(row):
        return {**row, "ts": round(row["ts"].timestamp() * 1e6)}

    bodies = [micros(row) for name in TXN_MESSAGES if (tables / "bodies" / name).is_dir()
              for row in pq.read_table(tables / "bodies" / name, columns=[*FRAME_KEY, "body"]).to_pylist()]
    assert len({row["connection"] for row in bodies}) > 1  # the coordinators' connections
    frames = frame_rows([micros(row) for row in pq.read_table(tables / "frames", columns=list(FRAME_COLUMNS)).to_pylist()
                         if row["api_key"] in TXN_API_KEYS], bodies)
    assert sum(row["body"] is not None for row in frames) == len(bodies) > 0
    produces = produce_requests(micros(row) for row in pq.read_table(
        tables / "produces", columns=[*PRODUCE_COLUMNS, "is_transactional"]).to_pylist() if row["is_transactional"])
    end = max(micros(row)["ts"] for row in pq.read_table(tables / "frames", columns=["ts"]).to_pylist())
    expected = follow(frames, produces, end)
    assert expected[0] == synthetic.EXPECTED_TRANSACTIONS
    rng = random.Random(5)
    for _ in range(5):
        rng.shuffle(frames)
        rng.shuffle(produces)
        assert follow(frames, produces, end) == expected

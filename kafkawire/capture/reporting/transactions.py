"""Transactions as a capture shows them, for the report: per transactional id, the transactions begun,
committed, aborted and still open, how long they took, and two kinds of problem, hanging transactions
and fenced producers still writing.

A producer's transaction spans connections (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and
EndTxn go to the transaction coordinator, TxnOffsetCommit to the group coordinator, the data to each
partition's leader), so it is followed here, after decoding, over the rows of every connection: the
frames of those APIs with their typed bodies (from the ``bodies/<message>`` tables of ``TXN_MESSAGES``,
matched by ``FRAME_KEY``) and the transactional rows of the produces table. Both report engines select
those rows (``FRAME_COLUMNS``, ``frame_rows``, ``PRODUCE_COLUMNS``); ``follow`` replays them in capture
order through one small state per transactional id, as Kafka's coordinator keeps it (KIP-98):

- a transaction begins with its first AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit or
  transactional produce after the previous one ended, and ends with an EndTxn answered without error
  (``committed`` says commit or abort), or with an InitProducerId answered for the same transactional
  id (the coordinator aborts what the older instance left open);
- *hanging*: data was written in it and no EndTxn was sent within the transaction timeout (the last
  InitProducerId's ``transaction_timeout_ms``, 60000 when the capture has none) of its start, when the
  capture goes on past that moment (a transaction still open at the capture's end within its timeout
  is only ``open``);
- *fenced producer still writing*: a transactional produce with a producer epoch older than one that an
  InitProducerId answer gave the same transactional id (or a producer id it had before), or a produce
  answered INVALID_PRODUCER_EPOCH or PRODUCER_FENCED.

Times are capture times in microseconds; durations are from the transaction's first request to the
EndTxn response.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import ApiKey

from ..tables.table_sets import FRAME_KEY

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "FENCED",
    "FRAME_COLUMNS",
    "HANGING",
    "PRODUCE_COLUMNS",
    "TXN_API_KEYS",
    "TXN_MESSAGES",
    "follow",
    "frame_rows",
    "problem_summary",
    "produce_requests",
]

INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS = ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN
END_TXN, TXN_OFFSET_COMMIT, PRODUCE = ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT, ApiKey.PRODUCE
TXN_API_KEYS = (INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT)
_NAMES = {INIT_PRODUCER_ID: "InitProducerId", ADD_PARTITIONS: "AddPartitionsToTxn",
          ADD_OFFSETS: "AddOffsetsToTxn", END_TXN: "EndTxn", TXN_OFFSET_COMMIT: "TxnOffsetCommit"}
# The typed bodies the replay reads (their bodies/<message> tables): each API's request and response.
TXN_MESSAGES = tuple(f"{name}{kind}" for name in _NAMES.values() for kind in ("Request", "Response"))
FRAME_COLUMNS = ("connection", "direction", "stream_offset", "ts", "api_key", "correlation_id", "error_codes")
PRODUCE_COLUMNS = ("connection", "ts", "correlation_id", "transactional_id", "producer_id", "producer_epoch",
                   "error_code")
DEFAULT_TIMEOUT_MS = 60_000  # the producer's transaction.timeout.ms default
HANGING, FENCED = "hanging_transaction", "fenced_producer"
_FENCING_ERRORS = frozenset((ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED))


def frame_rows(frames, bodies) -> list[dict]:
    """The transaction APIs' frames rows as the engines select them (``FRAME_COLUMNS``, ``ts`` in
    microseconds) with their typed bodies: ``bodies`` are rows of the ``TXN_MESSAGES`` tables
    (``FRAME_KEY`` and ``body``, as dicts). Each frame gets ``body``, None when it did not decode."""
    by_key = {tuple(row[name] for name in FRAME_KEY): row["body"] for row in bodies}
    return [{**{name: row[name] for name in FRAME_COLUMNS}, "body": by_key.get(tuple(row[name] for name in FRAME_KEY))}
            for row in frames]


def produce_requests(rows) -> list[dict]:
    """Transactional rows of the produces table (one per partition) -> one per Produce request and
    producer: ``PRODUCE_COLUMNS`` but ``error_code``, plus ``partitions`` and ``error_codes`` (the
    partitions' distinct codes, none for no response). The Spark engine makes the same rows with a
    GROUP BY."""
    grouped: dict[tuple, dict] = {}
    for row in rows:
        key = tuple(row[name] for name in PRODUCE_COLUMNS[:-1])
        entry = grouped.get(key)
        if entry is None:
            entry = grouped[key] = {name: row[name] for name in PRODUCE_COLUMNS[:-1]}
            entry["partitions"], entry["error_codes"] = 0, set()
        entry["partitions"] += 1
        if row["error_code"] is not None:
            entry["error_codes"].add(row["error_code"])
    for entry in grouped.values():
        entry["error_codes"] = sorted(entry["error_codes"])
    return list(grouped.values())


# ---- the replay -------------------------------------------------------------------------------------------

@dataclass
class _Open:
    """A transaction in progress."""
    start: int | None                        # None: it began before the capture did
    producer: tuple[int | None, int | None]  # (producer id, epoch) of its first request
    timeout_ms: int
    first_write: int | None = None           # the first transactional produce answered without error
    write_connection: str | None = None
    partitions: int = 0
    end_requested: int | None = None         # an EndTxn sent, its answer not (yet) seen


@dataclass
class _TransactionalId:
    name: str
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    producer_ids: set[int] = field(default_factory=set)
    fenced_at: tuple[int, int] | None = None  # the (producer id, epoch) the last InitProducerId gave
    current: _Open | None = None
    begun: int = 0
    committed: int = 0
    aborted: int = 0
    durations: list[int] = field(default_factory=list)  # microseconds


@dataclass
class _Call:
    """A request of a transaction API with its response (None when the capture has none)."""
    request: dict
    response: dict | None

    @property
    def ts(self) -> int:
        return self.request["ts"]

    @property
    def answered_ts(self) -> int:
        return (self.response or self.request)["ts"]

    @property
    def ok(self) -> bool:
        """Answered without an error anywhere in the response."""
        return self.response is not None and not self.response["error_codes"]


class _Replay:
    def __init__(self, capture_end: int | None):
        self.capture_end = capture_end
        self.ids: dict[str, _TransactionalId] = {}
        self.by_producer: dict[int, str] = {}  # producer id -> transactional id, from InitProducerId answers
        self.problems: list[dict] = []

    def state(self, transactional_id: str) -> _TransactionalId:
        found = self.ids.get(transactional_id)
        if found is None:
            found = self.ids[transactional_id] = _TransactionalId(transactional_id)
        return found

    # ---- events ----------------------------------------------------------------------------------------
    def init_producer_id(self, call: _Call) -> None:
        body = call.request["body"]
        if body is None or body["transactional_id"] is None:
            return  # an idempotent producer's
        state = self.state(body["transactional_id"])
        if body["transaction_timeout_ms"] is not None:
            state.timeout_ms = body["transaction_timeout_ms"]
        answer = call.response["body"] if call.response is not None else None
        if not call.ok or answer is None:
            return
        if state.current is not None:  # the coordinator aborts what the older instance left open
            self.end(state, call.answered_ts, committed=False)
        state.fenced_at = (answer["producer_id"], answer["producer_epoch"])
        state.producer_ids.add(answer["producer_id"])
        self.by_producer[answer["producer_id"]] = body["transactional_id"]

    def adds(self, call: _Call) -> None:
        """AddPartitionsToTxn (each transaction of a v4+ batch; verify-only ones are the brokers'),
        AddOffsetsToTxn and TxnOffsetCommit: the transaction begins, if it has not."""
        body = call.request["body"]
        if body is None or not call.ok:
            return
        if call.request["api_key"] == ADD_PARTITIONS:
            entries = [(t["transactional_id"], t["producer_id"], t["producer_epoch"])
                       for t in body["transactions"] or () if not t["verify_only"]]
            if body["v3_and_below_transactional_id"] is not None:
                entries.append((body["v3_and_below_transactional_id"], body["v3_and_below_producer_id"],
                                body["v3_and_below_producer_epoch"]))
        else:
            entries = [(body["transactional_id"], body["producer_id"], body["producer_epoch"])]
        for transactional_id, producer_id, epoch in entries:
            self.begin(self.state(transactional_id), call.ts, (producer_id, epoch))

    def end_txn(self, call: _Call) -> None:
        body = call.request["body"]
        if body is None:
            return
        state = self.state(body["transactional_id"])
        sent = call.ok or call.response is None  # a refused EndTxn (retried, or fenced) does not end it
        if sent and state.current is not None and state.current.end_requested is None:
            state.current.end_requested = call.ts
        if call.ok:
            if state.current is None:
                state.current = _Open(None, (body["producer_id"], body["producer_epoch"]), state.timeout_ms)
                state.begun += 1
            self.end(state, call.answered_ts, committed=bool(body["committed"]))

    def produce(self, row: dict) -> None:
        transactional_id = row["transactional_id"] or self.by_producer.get(row["producer_id"])
        if transactional_id is None:
            return
        state = self.state(transactional_id)
        producer = (row["producer_id"], row["producer_epoch"])
        fenced = [code for code in row["error_codes"] if code in _FENCING_ERRORS]
        if fenced or self.stale(state, producer):
            at = state.fenced_at or (None, None)  # (set when stale)
            why = (f"and was answered {ErrorCode(fenced[0]).name}" if fenced else
                   f"after InitProducerId gave it producer id {at[0]} epoch {at[1]}")
            self.problem(FENCED, row, f"transactional id {transactional_id!r}: producer id {producer[0]} epoch "
                                      f"{producer[1]} wrote to {row['partitions']} partition(s) {why}")
            return
        self.begin(state, row["ts"], producer)
        if all(code in (0, None) for code in row["error_codes"]):
            current = state.current
            assert current is not None  # begun above
            if current.first_write is None:
                current.first_write, current.write_connection = row["ts"], row["connection"]
            current.partitions += row["partitions"]

    @staticmethod
    def stale(state: _TransactionalId, producer: tuple) -> bool:
        """Whether a producer id and epoch are older than the last InitProducerId answer's."""
        if state.fenced_at is None or producer[0] is None:
            return False
        if producer[0] == state.fenced_at[0]:
            return producer[1] is not None and producer[1] < state.fenced_at[1]
        return producer[0] in state.producer_ids

    # ---- transactions ----------------------------------------------------------------------------------
    def begin(self, state: _TransactionalId, ts: int, producer: tuple) -> None:
        if state.current is None:
            state.current = _Open(ts, producer, state.timeout_ms)
            state.begun += 1

    def end(self, state: _TransactionalId, ts: int, committed: bool) -> None:
        current = state.current
        assert current is not None  # the caller ends an open transaction
        self.check_hanging(state, current, current.end_requested if current.end_requested is not None else ts)
        if committed:
            state.committed += 1
        else:
            state.aborted += 1
        if current.start is not None:
            state.durations.append(ts - current.start)
        state.current = None

    def check_hanging(self, state: _TransactionalId, current: _Open, ended: int | None) -> None:
        """A problem when data was written and the transaction was not ended (``ended``: None if it
        never was) within its timeout, as far as the capture shows."""
        if current.first_write is None or current.start is None:
            return
        deadline = current.start + current.timeout_ms * 1000
        if ended is not None and ended <= deadline:
            return
        if ended is None and (self.capture_end is None or self.capture_end < deadline):
            return  # still within its timeout when the capture stopped
        self.problems.append({
            "kind": HANGING, "ts": current.first_write, "connection": current.write_connection,
            "reason": f"transactional id {state.name!r}: producer id {current.producer[0]} epoch "
                      f"{current.producer[1]} wrote to {current.partitions} partition(s) and sent no EndTxn within "
                      f"its transaction timeout of {current.timeout_ms} ms"})

    def problem(self, kind: str, row: dict, reason: str) -> None:
        self.problems.append({"kind": kind, "ts": row["ts"], "connection": row["connection"], "reason": reason})

    def finish(self) -> list[dict]:
        rows = []
        for _, state in sorted(self.ids.items()):
            if state.current is not None:
                self.check_hanging(state, state.current, state.current.end_requested)
            if not state.begun:
                continue  # InitProducerId only
            durations = state.durations
            rows.append({"transactional_id": state.name, "begun": state.begun, "committed": state.committed,
                         "aborted": state.aborted, "open": int(state.current is not None),
                         "mean_ms": sum(durations) / len(durations) / 1000 if durations else None,
                         "max_ms": max(durations) / 1000 if durations else None})
        return rows


def _frame_order(row: dict) -> tuple:
    """A total order of frames rows (the engines hand them over in any order): time, requests before
    responses, then connection and correlation id (nulls first, as Spark sorts)."""
    return (row["ts"], row["direction"] != "request", row["connection"] or "", row["correlation_id"] or 0,
            row["api_key"])


def _produce_order(row: dict) -> tuple:
    return (row["connection"] or "", row["correlation_id"] or 0, row["producer_id"] is not None,
            row["producer_id"] or 0, row["producer_epoch"] is not None, row["producer_epoch"] or 0)


def _calls(frames: list[dict]) -> list[_Call]:
    """Requests paired with their responses (same connection and correlation id, the response after)."""
    waiting: dict[tuple, _Call] = {}
    calls: list[_Call] = []
    for row in sorted(frames, key=_frame_order):
        key = (row["connection"], row["correlation_id"], row["api_key"])
        if row["direction"] == "request":
            call = _Call(row, None)
            waiting[key] = call
            calls.append(call)
        else:
            answered = waiting.pop(key, None)
            if answered is not None:
                answered.response = row
    return calls


def follow(frames: list[dict], produces: list[dict], capture_end: int | None) -> tuple[list[dict], list[dict]]:
    """Replays the transaction APIs' frames (``frame_row`` rows) and transactional Produce requests
    (``produce_requests`` rows) in capture order, whatever order they come in. Returns (one row per
    transactional id that began a transaction, by id; the problems by time: dicts of kind, ts, connection
    and reason). ``capture_end`` is the
    capture's last frame time."""
    replay = _Replay(capture_end)
    # (time, 0 for calls in request order / 1 for produces in _produce_order, kind, item): an
    # InitProducerId counts when answered
    events: list[tuple[int, int, int, _Call | dict]] = []
    for call in _calls(frames):
        api_key = call.request["api_key"]
        events.append((call.answered_ts if api_key == INIT_PRODUCER_ID else call.ts, 0, api_key, call))
    events += [(row["ts"], 1, PRODUCE, row) for row in sorted(produces, key=_produce_order)]
    # each handler takes the item of its kind (a _Call, or a produce row)
    handlers: dict[int, Callable[[Any], None]] = {
        INIT_PRODUCER_ID: replay.init_producer_id, ADD_PARTITIONS: replay.adds, ADD_OFFSETS: replay.adds,
        TXN_OFFSET_COMMIT: replay.adds, END_TXN: replay.end_txn, PRODUCE: replay.produce}
    for _, _, kind, item in sorted(events, key=lambda event: event[:2]):  # stable: the orders above stay
        handlers[kind](item)
    transactions = replay.finish()
    return transactions, sorted(replay.problems, key=lambda p: (p["ts"], p["kind"], p["reason"]))


def problem_summary(problems: list[dict]) -> list[dict]:
    """Problems by kind as the report lists them: count, and the earliest's reason (by time, then
    reason) as the example."""
    by_kind: dict[str, list[dict]] = {}
    for problem in problems:
        by_kind.setdefault(problem["kind"], []).append(problem)
    return [{"kind": kind, "count": len(found), "example": min(found, key=lambda p: (p["ts"], p["reason"]))["reason"]}
            for kind, found in by_kind.items()]

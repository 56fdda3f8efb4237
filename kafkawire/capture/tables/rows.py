"""Kafka frames and problems as rows of the output tables, batched into Arrow RecordBatches.

Tables (schemas in ``TABLES``):

- ``frames``: one row per request or response frame, with its body as JSON, error codes and the
  decode error when it does not decode.
- ``bodies/<message>`` (``BODIES`` in the ``tables`` selection): one row per frame that decoded to
  that message, its typed body with the frame's key; a table is made only for messages that occur.
- ``fetches``: one row per fetched partition, a Fetch request joined with its response (KIP-227
  incremental sessions leave partitions on one side only; those rows have the other side null).
- ``produces``: one row per produced partition, a Produce request joined with its response (acks=0:
  response fields null).
- ``records`` (only with ``TableBatcher(records=True)``): one row per record of Produce requests, Fetch
  responses and ShareFetch responses.
- ``problems``: the Problems of the earlier stages, frames or record batches that do not decode, and
  bytes after a frame's body (``trailing_bytes``: the frame is decoded, as Kafka reads it). The capture
  job adds the capture records its reader skipped (``table_schemas.capture_problems``).
- ``connections``: one row per ConnectionSummary (a TCP connection: times, frame counts, TLS, SASL).
- ``share_acquisitions`` and ``share_acknowledgements`` (KIP-932): the record ranges ShareFetch
  responses acquired, and the acknowledgements of ShareFetch and ShareAcknowledge requests
  (``share_joins``).

SASL tokens reach no table: SaslAuthenticate bodies are redacted when decoded (``frame_decoding``).

Batch summaries (batch and record counts, offsets, codec) read batch headers only; records are
decompressed only for the records table.

The schemas are in ``table_schemas``, the frames' decoding in ``frame_decoding``, the Fetch and
Produce joins in ``joins``, the ShareFetch and ShareAcknowledge ones in ``share_joins``.
"""
from __future__ import annotations

import gc
from collections.abc import Collection, Iterable
from contextlib import contextmanager
from typing import NamedTuple

import pyarrow as pa

from kafkawire.errors import DecodeError
from kafkawire.framing import read_request

from .bodies import converter, error_codes, top_error_code
from .column_table import ColumnTable
from .frame_decoding import Decoded, api_info, decode_frame, decode_problem
from .joins import FetchJoin, ProduceJoin, TopicNames
from .share_joins import ShareAcknowledgeJoin, ShareFetchJoin
from ..model import ConnectionSummary, KafkaFrame, Problem
from .record_table import RecordsTable
from .table_schemas import BODIES, TABLES, body_schema, body_table, latency_ms, micros

__all__ = ["TableBatcher", "DEFAULT_MAX_ROWS", "DEFAULT_MAX_BYTES"]

PRODUCE, FETCH, SHARE_FETCH, SHARE_ACKNOWLEDGE = 0, 1, 78, 79
_JOINS = {FETCH: FetchJoin, PRODUCE: ProduceJoin, SHARE_FETCH: ShareFetchJoin, SHARE_ACKNOWLEDGE: ShareAcknowledgeJoin}
DEFAULT_MAX_ROWS = 8192
DEFAULT_MAX_BYTES = 32 * 1024 * 1024  # Python values held per table before a batch is emitted


class _Pending(NamedTuple):
    frame: KafkaFrame
    body: object
    version: int


@contextmanager
def _gc_paused():
    """Run with the cyclic GC paused (as the codecs decode large messages): the rows held until a
    batch is cut are many small containers that all survive, and collections triggered while they
    are built scan them again and again, at a cost per frame as large as the decoding's. Nothing here
    makes cycles."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()



class TableBatcher:
    """Turns KafkaFrames and Problems into rows and emits ``(table name, RecordBatch)`` pairs.

    ``add(item)`` returns the batches that filled up (``max_rows`` rows or about ``max_bytes`` of
    values); ``end_connection(connection)`` gives that connection's Fetch, Produce and share requests that
    never got a response their rows (response columns null); ``finish()`` does so for every
    connection and emits the rest. Requests wait for their responses in a bounded cache; a response
    whose request was evicted (or never seen) decodes the request from ``frame.request``, and an
    evicted request that is never answered gets no fetches/produces rows.
    """

    def __init__(self, *, records: bool = False, tables: Collection[str] | None = None,
                 max_rows: int = DEFAULT_MAX_ROWS, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_pending: int = 10_000, max_pending_bytes: int = 256 * 1024 * 1024):
        names = (set(TABLES) | {BODIES}) - {"records"} if tables is None else set(tables)
        if records:
            names.add("records")
        unknown = names - set(TABLES) - {BODIES}
        if unknown:
            raise ValueError(f"unknown tables {sorted(unknown)}; known: {sorted({*TABLES, BODIES})}")
        if max_rows < 1 or max_bytes < 1:
            raise ValueError("max_rows and max_bytes must be positive")
        # every table, in TABLES' order (the batches' order); the row tables again by name, to append to
        self.records = RecordsTable(TABLES["records"], max_rows, max_bytes) if "records" in names else None
        self._rows = {name: ColumnTable(name, TABLES[name], max_rows, max_bytes)
                      for name in TABLES if name in names and name != "records"}
        self.tables: dict[str, ColumnTable | RecordsTable] = {
            name: self.records if name == "records" and self.records is not None else self._rows[name]
            for name in TABLES if name in names}
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self._bodies = BODIES in names  # their tables are added to ``tables`` as messages turn up
        self.max_pending = max_pending
        self.max_pending_bytes = max_pending_bytes
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._pending_bytes = 0
        # requests whose response came first (then the request must not wait for it); bounded
        self._answered: dict[tuple[str, int], None] = {}
        self._joins = any(name in self.tables for name in ("fetches", "produces", "records", "share_acquisitions",
                                                            "share_acknowledgements"))
        self.topic_names = TopicNames()  # ids resolved by responses seen so far, for Produce v13+ and Fetch v13+

    # ---- input --------------------------------------------------------------------------------
    def add(self, item: KafkaFrame | Problem | ConnectionSummary) -> list[tuple[str, pa.RecordBatch]]:
        if isinstance(item, KafkaFrame):
            with _gc_paused():
                self._frame(item)
        elif isinstance(item, Problem):
            self._problem(item)
        elif isinstance(item, ConnectionSummary):
            self._connection(item)
        else:
            raise TypeError(f"expected a KafkaFrame, a Problem or a ConnectionSummary, got {type(item).__name__}")
        return self._ready()

    def add_all(self, items: Iterable[KafkaFrame | Problem | ConnectionSummary]) -> list[tuple[str, pa.RecordBatch]]:
        """Add every item, then finish."""
        out = []
        for item in items:
            out.extend(self.add(item))
        out.extend(self.finish())
        return out

    def flush(self) -> list[tuple[str, pa.RecordBatch]]:
        """Every table's rows so far as batches (requests still waiting for responses stay waiting)."""
        with _gc_paused():
            for table in self.tables.values():
                table.cut()
        return self._ready()

    def end_connection(self, connection: str) -> list[tuple[str, pa.RecordBatch]]:
        """A connection's frames are all in: its unanswered Fetch, Produce and share requests get their rows
        now (instead of waiting in the cache until ``finish``). Returns the batches that filled up."""
        with _gc_paused():
            for key in [key for key in self._pending if key[0] == connection]:
                waiting = self._pending.pop(key)
                self._pending_bytes -= waiting.frame.size
                self._join(waiting.frame, waiting.body, waiting.version, None, None, None)
        for key in [key for key in self._answered if key[0] == connection]:
            del self._answered[key]
        return self._ready()

    def finish(self) -> list[tuple[str, pa.RecordBatch]]:
        """The end of the input: rows for unanswered Fetch, Produce and share requests, then everything."""
        pending, self._pending = self._pending, {}
        self._pending_bytes = 0
        self._answered.clear()
        with _gc_paused():
            for waiting in pending.values():
                self._join(waiting.frame, waiting.body, waiting.version, None, None, None)
        return self.flush()

    # ---- frames -------------------------------------------------------------------------------
    def _frame(self, frame: KafkaFrame) -> None:
        decoded = decode_frame(frame)
        self._frame_rows(frame, decoded)
        problem = decode_problem(frame, decoded)  # undecodable, trailing_bytes
        if problem is not None:
            self._problem(problem)
        body, version = decoded.body, decoded.version  # (a body comes with its version)
        if frame.direction == "response" and body is not None and version is not None:
            self.topic_names.learn(body, version)
        if not self._joins or frame.api_key not in _JOINS:
            return
        if frame.direction == "request":
            if body is not None and version is not None:
                self._request(frame, body, version)
        elif frame.request is not None:
            self._response(frame, frame.request, decoded)

    def _frame_rows(self, frame: KafkaFrame, decoded: Decoded) -> None:
        """The frame's row of ``frames`` (the body as JSON) and its typed body's of ``bodies/<message>``."""
        body, version = decoded.body, decoded.version
        convert = None if body is None or version is None else converter(body.NAME, version)
        if convert is not None and body is not None and self._bodies:
            self._body_table(body.NAME).append((
                frame.connection, frame.direction, frame.offset, micros(frame.end_ts_ns), frame.correlation_id,
                frame.api_version, decoded.version, convert.value(body)), frame.size + 64)
        frames = self._rows.get("frames")
        if frames is None:
            return
        request = frame.request
        is_response = frame.direction == "response"
        body_json = error_code = codes = None
        if convert is not None and body is not None and version is not None:
            body_json = convert.json(body)
            if is_response:
                error_code = top_error_code(body, version)
                codes = error_codes(body)
        frames.append((
            frame.connection, frame.client, frame.broker, frame.direction, micros(frame.end_ts_ns), micros(frame.ts_ns),
            frame.offset, frame.api_key, decoded.api_name, frame.api_version, decoded.header_version,
            frame.correlation_id, request.client_id if is_response and request is not None else frame.client_id,
            frame.size, latency_ms(frame, request) if is_response else None, error_code, codes, body_json,
            decoded.error, frame.sasl_mechanism, frame.sasl_user,
        ), frame.size + 256)

    def _body_table(self, message: str) -> ColumnTable:
        name = body_table(message)
        table = self._rows.get(name)
        if table is None:
            table = self.tables[name] = self._rows[name] = ColumnTable(name, body_schema(message), self.max_rows,
                                                                       self.max_bytes)
        return table

    def _request(self, frame: KafkaFrame, body, version: int) -> None:
        key = (frame.connection, frame.offset)
        if key in self._answered:
            del self._answered[key]
            return
        if frame.api_key == PRODUCE and body.acks == 0:
            self._join(frame, body, version, None, None, None)  # no response will come
            return
        self._pending[key] = _Pending(frame, body, version)
        self._pending_bytes += frame.size
        while self._pending and (len(self._pending) > self.max_pending
                                 or self._pending_bytes > self.max_pending_bytes):
            oldest = next(iter(self._pending))
            self._pending_bytes -= self._pending.pop(oldest).frame.size

    def _response(self, frame: KafkaFrame, request: KafkaFrame, decoded: Decoded) -> None:
        key = (request.connection, request.offset)
        request_version: int | None
        waiting = self._pending.pop(key, None)
        if waiting is not None:
            self._pending_bytes -= waiting.frame.size
            request_body, request_version = waiting.body, waiting.version
        else:
            self._answered[key] = None
            while len(self._answered) > self.max_pending:
                del self._answered[next(iter(self._answered))]
            try:  # the request's own frame row reported a failure already
                request_body = read_request(request.frame).body
                request_version = request.api_version
            except DecodeError:
                request_body = request_version = None
        self._join(request, request_body, request_version, frame, decoded.body, decoded.version)

    def _join(self, request: KafkaFrame, request_body, request_version, response: KafkaFrame | None,
              response_body, response_version) -> None:
        if request_body is None and response_body is None:
            return
        join = _JOINS.get(request.api_key)  # type: ignore[arg-type]
        if join is not None:
            join(self, request, request_body, request_version, response, response_body, response_version).run()

    # ---- problems -----------------------------------------------------------------------------
    def _problem(self, problem: Problem) -> None:
        info = api_info(problem.api_key)
        self._add_problem(problem.connection, problem.direction, problem.ts_ns, problem.kind, problem.reason,
                          problem.offset, problem.length, problem.api_key, info.name if info else None,
                          problem.api_version, problem.correlation_id)

    def _add_problem(self, connection, direction, ts_ns, kind, reason, offset, length, api_key, api_name,
                     api_version, correlation_id) -> None:
        table = self._rows.get("problems")
        if table is not None:
            table.append((connection, direction, micros(ts_ns), kind, reason, offset, length, api_key, api_name,
                          api_version, correlation_id, None, None), 256)

    # ---- connections --------------------------------------------------------------------------
    def _connection(self, summary: ConnectionSummary) -> None:
        table = self._rows.get("connections")
        if table is not None:
            table.append((summary.connection, summary.client, summary.broker, micros(summary.end_ts_ns),
                          micros(summary.ts_ns), *summary[5:]), 256)

    def _ready(self) -> list[tuple[str, pa.RecordBatch]]:
        return [(name, batch) for name, table in self.tables.items() if table.ready
                for batch in table.take_ready()]


"""Kafka frames and problems as rows of the output tables, batched into Arrow RecordBatches.

Tables (schemas in ``TABLES``):

- ``frames``: one row per request or response frame, with the typed body (see ``BODY``), its JSON,
  error codes and the decode error when it does not decode.
- ``fetches``: one row per fetched partition, a Fetch request joined with its response (KIP-227
  incremental sessions leave partitions on one side only; those rows have the other side null).
- ``produces``: one row per produced partition, a Produce request joined with its response (acks=0:
  response fields null).
- ``records`` (only with ``TableBatcher(records=True)``): one row per record of Produce requests and
  Fetch responses.
- ``problems``: the Problems of the earlier stages, frames or record batches that do not decode, and
  bytes after a frame's body (``trailing_bytes``: the frame is decoded, as Kafka reads it). The capture
  job adds the capture records its reader skipped (``job.capture_problems``).

Batch summaries (batch and record counts, offsets, codec) read batch headers only; records are
decompressed only for the records table.
"""
from __future__ import annotations

import gc
from collections.abc import Collection, Iterable
from contextlib import contextmanager
from typing import NamedTuple

import pyarrow as pa

from kafkawire.errors import DecodeError
from kafkawire.framing import read_request, read_response
from kafkawire.messages import api, apis
from kafkawire.records import LegacyBatch, iter_batches
from kafkawire.records.batch import CODEC_MASK
from kafkawire.records.legacy import LEGACY_CODEC_MASK

from .bodies import arrow_type, converter, error_codes, has_field, top_error_code
from .column_table import ColumnTable
from .model import KafkaFrame, Problem
from .record_table import CODEC_NAMES, RecordRows, RecordsTable

__all__ = ["TABLES", "BODY", "BodyStructColumn", "TableBatcher", "Decoded", "decode_frame", "BlobSummary",
           "summarize_records", "DEFAULT_MAX_ROWS", "DEFAULT_MAX_BYTES"]

PRODUCE, FETCH = 0, 1
_NAMING_RESPONSES = (3, 19)  # Metadata and CreateTopics responses pair topic names with topic ids
DEFAULT_MAX_ROWS = 8192
DEFAULT_MAX_BYTES = 32 * 1024 * 1024  # Python values held per table before a batch is emitted
_TS = pa.timestamp("us", tz="UTC")


def _list(item: pa.DataType) -> pa.DataType:
    return pa.list_(pa.field("element", item))  # the element name Spark's Arrow conversion uses


# ---- the typed body -------------------------------------------------------------------------------

class BodyStructColumn:
    """The typed body stored as one struct column with a child per message name, exactly one set per
    row (``(name, value)`` from ``bodies.to_value``; None when there is no body).

    This is the one place that decides how typed bodies are stored; per-message tables would replace
    it (and the ``body`` column of ``frames``).
    """

    def __init__(self, names: Iterable[str]):
        self.names = tuple(names)
        self.types = tuple(arrow_type(name) for name in self.names)
        self.type = pa.struct([pa.field(name, t) for name, t in zip(self.names, self.types)])
        self._known = frozenset(self.names)

    def value(self, name: str, value: tuple):
        if name not in self._known:
            raise KeyError(f"no body column for message {name}")
        return (name, value)

    def to_arrow(self, values: list) -> pa.Array:
        """One struct array; each message's rows are converted densely, then spread out with a take
        (a wide struct of mostly-null children is slow to build row by row)."""
        count = len(values)
        rows_by_name: dict[str, list[int]] = {}
        for row, value in enumerate(values):
            if value is not None:
                rows_by_name.setdefault(value[0], []).append(row)
        children = []
        for name, child_type in zip(self.names, self.types):
            rows = rows_by_name.get(name)
            if rows is None:
                children.append(pa.nulls(count, child_type))
                continue
            dense = pa.array([values[row][1] for row in rows], type=child_type)
            positions: list[int | None] = [None] * count
            for position, row in enumerate(rows):
                positions[row] = position
            children.append(dense.take(pa.array(positions, type=pa.int32())))
        mask = pa.array([value is None for value in values], type=pa.bool_())
        return pa.StructArray.from_arrays(children, fields=list(self.type), mask=mask)


BODY = BodyStructColumn(sorted({name for info in apis() for name in (info.request, info.response)}))

# ---- table schemas --------------------------------------------------------------------------------

_WHERE = [("connection", pa.string()), ("client", pa.string()), ("broker", pa.string())]

TABLES: dict[str, pa.Schema] = {
    "frames": pa.schema(_WHERE + [
        ("direction", pa.string()), ("ts", _TS), ("ts_first", _TS), ("stream_offset", pa.int64()),
        ("api_key", pa.int16()), ("api_name", pa.string()), ("api_version", pa.int16()),
        ("header_version", pa.int16()), ("correlation_id", pa.int32()), ("client_id", pa.string()),
        ("size", pa.int32()), ("latency_ms", pa.float64()), ("error_code", pa.int16()),
        ("error_codes", _list(pa.int16())), ("body_json", pa.string()), ("decode_error", pa.string()),
        ("body", BODY.type),
    ]),
    "fetches": pa.schema([("ts", _TS)] + _WHERE + [
        ("client_id", pa.string()), ("correlation_id", pa.int32()), ("api_version", pa.int16()),
        # request
        ("max_wait_ms", pa.int32()), ("min_bytes", pa.int32()), ("max_bytes", pa.int32()),
        ("isolation_level", pa.int8()), ("session_id", pa.int32()), ("session_epoch", pa.int32()),
        ("topic", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32()),
        ("request_index", pa.int32()), ("fetch_offset", pa.int64()), ("partition_max_bytes", pa.int32()),
        ("remote_partition_max_bytes", pa.int32()), ("request_log_start_offset", pa.int64()),
        # response
        ("response_error_code", pa.int16()), ("response_session_id", pa.int32()),
        ("throttle_time_ms", pa.int32()), ("error_code", pa.int16()), ("high_watermark", pa.int64()),
        ("last_stable_offset", pa.int64()), ("log_start_offset", pa.int64()),
        ("preferred_read_replica", pa.int32()), ("records_bytes", pa.int64()),
        ("first_batch_bytes", pa.int64()), ("batch_count", pa.int32()),
        ("record_count", pa.int64()), ("first_offset", pa.int64()), ("last_offset", pa.int64()),
        ("response_size", pa.int32()), ("latency_ms", pa.float64()),
    ]),
    "produces": pa.schema([("ts", _TS)] + _WHERE + [
        ("client_id", pa.string()), ("correlation_id", pa.int32()), ("api_version", pa.int16()),
        # request
        ("acks", pa.int16()), ("timeout_ms", pa.int32()), ("transactional_id", pa.string()),
        ("topic", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32()),
        ("records_bytes", pa.int64()), ("batch_count", pa.int32()), ("record_count", pa.int64()),
        ("compression", pa.string()), ("producer_id", pa.int64()), ("producer_epoch", pa.int16()),
        ("base_sequence", pa.int32()), ("is_transactional", pa.bool_()),
        # response
        ("error_code", pa.int16()), ("error_message", pa.string()), ("base_offset", pa.int64()),
        ("log_append_time_ms", pa.int64()), ("log_start_offset", pa.int64()),
        ("throttle_time_ms", pa.int32()), ("latency_ms", pa.float64()),
    ]),
    "records": pa.schema([
        ("source", pa.string()), ("connection", pa.string()), ("correlation_id", pa.int32()), ("ts", _TS),
        ("topic", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
        ("timestamp", _TS), ("timestamp_type", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
        ("headers", _list(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ("producer_id", pa.int64()), ("producer_epoch", pa.int16()), ("sequence", pa.int32()),
        ("is_transactional", pa.bool_()), ("is_control", pa.bool_()), ("compression", pa.string()),
    ]),
    "problems": pa.schema([
        ("connection", pa.string()), ("direction", pa.string()), ("ts", _TS), ("kind", pa.string()),
        ("reason", pa.string()), ("stream_offset", pa.int64()), ("length", pa.int64()), ("api_key", pa.int16()),
        ("api_name", pa.string()), ("api_version", pa.int16()), ("correlation_id", pa.int32()),
        # runs of capture bytes the reader skipped (job.capture_problems): which file, where in it
        ("file", pa.string()), ("file_offset", pa.int64()),
    ]),
}
_CONVERTERS = {"frames": {"body": BODY.to_arrow}}

# ---- decoding ---------------------------------------------------------------------------------------


class Decoded(NamedTuple):
    """What became of one frame's body."""
    api_name: str | None
    header_version: int | None
    body: object | None
    version: int | None   # the version the body was read at (ApiVersions may fall back to 0)
    error: str | None      # why there is no body
    trailing: int = 0      # bytes after the body (read past, as Kafka does; a problem says so)


def decode_frame(frame: KafkaFrame) -> Decoded:
    """Decode a request (``framing.read_request``) or a matched response (``framing.read_response``).
    Bytes after the body do not stop it: Kafka ignores them, and librdkafka 2.16 sends 3 after its
    all-topics MetadataRequest; ``Decoded.trailing`` counts them."""
    info = _api_info(frame.api_key)
    name = info.name if info is not None else None
    version = frame.api_version
    if frame.direction == "request":
        if info is not None and version is not None and not info.supports(version):
            # said before the header is read: its version depends on the body's
            return Decoded(name, None, None, None, f"unsupported {info.name} version {version}")
        header_version = info.request_header_version(version) if info is not None else None
        try:
            _, body, trailing = read_request(frame.frame)
        except DecodeError as error:
            return Decoded(name, header_version, None, None, str(error))
        return Decoded(name, header_version, body, version, None, trailing)
    if frame.request is None or frame.api_key is None:
        return Decoded(name, None, None, None, None)  # unmatched: not decoded (a Problem says so)
    if info is None:
        return Decoded(None, None, None, None, f"unknown API key {frame.api_key}")
    if not info.supports(version):
        return Decoded(name, None, None, None, f"unsupported {info.name} version {version}")
    header_version = info.response_header_version(version)
    try:
        _, body, body_version, trailing = read_response(frame.frame, info.key, version)
    except DecodeError as error:
        return Decoded(name, header_version, None, None, str(error))
    return Decoded(name, header_version, body, body_version, None, trailing)


def _api_info(key):
    if key is None:
        return None
    try:
        return api(key)
    except KeyError:
        return None


# ---- record blobs -----------------------------------------------------------------------------------

class BlobSummary(NamedTuple):
    """One partition's records field, from batch headers only (no decompression). Legacy message sets
    count each top-level message (a compressed wrapper counts once) as a batch and as a record."""
    records_bytes: int
    first_batch_bytes: int | None  # the size of the first whole batch (KIP-74 lets it exceed the limits)
    batch_count: int
    record_count: int
    first_offset: int | None   # None when the first entry is a compressed legacy wrapper
    last_offset: int | None
    compression: str | None    # codec of the first batch
    producer_id: int | None
    producer_epoch: int | None
    base_sequence: int | None
    is_transactional: bool | None
    batches: tuple             # RecordBatch / LegacyBatch views, for the records table
    error: str | None          # why reading stopped early (corrupt batch, bad size)


_EMPTY_BLOB = BlobSummary(0, None, 0, 0, None, None, None, None, None, None, None, (), None)


def summarize_records(blob) -> BlobSummary:
    """Batch headers of a records blob, CRCs checked; reading stops at the first bad batch."""
    if blob is None or len(blob) == 0:
        return _EMPTY_BLOB
    batches = []
    error = None
    try:
        for batch in iter_batches(blob):
            batches.append(batch)
    except DecodeError as exc:
        error = str(exc)
    if not batches:
        return BlobSummary(len(blob), None, 0, 0, None, None, None, None, None, None, None, (), error)
    first = batches[0]
    records = 0
    for batch in batches:
        records += 1 if isinstance(batch, LegacyBatch) else batch.count
    if isinstance(first, LegacyBatch):
        first_offset = None if first.is_compressed else first.offset
        codec = first.attributes & LEGACY_CODEC_MASK
        producer = (None, None, None, None)
    else:
        first_offset = first.base_offset
        codec = first.attributes & CODEC_MASK
        producer = (first.producer_id, first.producer_epoch, first.base_sequence, first.is_transactional)
    return BlobSummary(len(blob), first.size, len(batches), records, first_offset, batches[-1].last_offset,
                       CODEC_NAMES[codec], *producer, tuple(batches), error)


class _Pending(NamedTuple):
    frame: KafkaFrame
    body: object
    version: int


@contextmanager
def _gc_paused():
    """Run with the cyclic GC paused (as the codecs decode large messages): the rows held until a
    batch is cut are many small containers that all survive, and collections triggered while they
    are built scan them again and again, which doubled the cost per frame. Nothing here makes cycles."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _us(ts_ns: int | None) -> int | None:
    return None if ts_ns is None else ts_ns // 1000


def _latency_ms(response: KafkaFrame, request: KafkaFrame | None) -> float | None:
    return None if request is None else (response.end_ts_ns - request.end_ts_ns) / 1e6


class TableBatcher:
    """Turns KafkaFrames and Problems into rows and emits ``(table name, RecordBatch)`` pairs.

    ``add(item)`` returns the batches that filled up (``max_rows`` rows or about ``max_bytes`` of
    values); ``end_connection(connection)`` gives that connection's Fetch and Produce requests that
    never got a response their rows (response columns null); ``finish()`` does so for every
    connection and emits the rest. Requests wait for their responses in a bounded cache; a response
    whose request was evicted (or never seen) decodes the request from ``frame.request``, and an
    evicted request that is never answered gets no fetches/produces rows.
    """

    def __init__(self, *, records: bool = False, tables: Collection[str] | None = None,
                 max_rows: int = DEFAULT_MAX_ROWS, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_pending: int = 10_000, max_pending_bytes: int = 256 * 1024 * 1024):
        names = set(TABLES) - {"records"} if tables is None else set(tables)
        if records:
            names.add("records")
        unknown = names - set(TABLES)
        if unknown:
            raise ValueError(f"unknown tables {sorted(unknown)}; known: {sorted(TABLES)}")
        if max_rows < 1 or max_bytes < 1:
            raise ValueError("max_rows and max_bytes must be positive")
        self.tables = {
            name: RecordsTable(TABLES[name], max_rows, max_bytes) if name == "records"
            else ColumnTable(name, TABLES[name], max_rows, max_bytes, _CONVERTERS.get(name))
            for name in TABLES if name in names}
        self.max_pending = max_pending
        self.max_pending_bytes = max_pending_bytes
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._pending_bytes = 0
        # requests whose response came first (then the request must not wait for it); bounded
        self._answered: dict[tuple[str, int], None] = {}
        self._joins = "fetches" in self.tables or "produces" in self.tables or "records" in self.tables
        self.topic_names = TopicNames()  # ids resolved by responses seen so far, for Produce v13+ and Fetch v13+

    # ---- input --------------------------------------------------------------------------------
    def add(self, item: KafkaFrame | Problem) -> list[tuple[str, pa.RecordBatch]]:
        if isinstance(item, KafkaFrame):
            with _gc_paused():
                self._frame(item)
        elif isinstance(item, Problem):
            self._problem(item)
        else:
            raise TypeError(f"expected a KafkaFrame or a Problem, got {type(item).__name__}")
        return self._ready()

    def add_all(self, items: Iterable[KafkaFrame | Problem]) -> list[tuple[str, pa.RecordBatch]]:
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
        """A connection's frames are all in: its unanswered Fetch and Produce requests get their rows
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
        """The end of the input: rows for unanswered Fetch and Produce requests, then everything."""
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
        if "frames" in self.tables:
            self._frame_row(frame, decoded)
        if decoded.error is not None:
            self._add_problem(frame.connection, frame.direction, frame.end_ts_ns, "undecodable", decoded.error,
                              frame.offset, frame.size + 4, frame.api_key, decoded.api_name, frame.api_version,
                              frame.correlation_id)
        elif decoded.trailing:
            end = frame.size - decoded.trailing  # where the body ended, in the frame
            self._add_problem(frame.connection, frame.direction, frame.end_ts_ns, "trailing_bytes",
                              f"{decoded.body.NAME}: {decoded.trailing} bytes after the body at byte {end} "
                              f"(ignored, as Kafka does)", frame.offset + 4 + end, decoded.trailing,
                              frame.api_key, decoded.api_name, frame.api_version, frame.correlation_id)
        if frame.api_key in _NAMING_RESPONSES and frame.direction == "response" and decoded.body is not None:
            self.topic_names.learn(decoded.body)
        if not self._joins or frame.api_key not in (PRODUCE, FETCH):
            return
        if frame.direction == "request":
            if decoded.body is not None:
                self._request(frame, decoded.body, decoded.version)
        elif frame.request is not None:
            self._response(frame, decoded)

    def _frame_row(self, frame: KafkaFrame, decoded: Decoded) -> None:
        body = decoded.body
        request = frame.request
        is_response = frame.direction == "response"
        body_value = body_json = error_code = codes = None
        if body is not None:
            convert = converter(body.NAME, decoded.version)
            body_value = BODY.value(body.NAME, convert.value(body))
            body_json = convert.json(body)
            if is_response:
                error_code = top_error_code(body, decoded.version)
                codes = error_codes(body)
        self.tables["frames"].append((
            frame.connection, frame.client, frame.broker, frame.direction, _us(frame.end_ts_ns), _us(frame.ts_ns),
            frame.offset, frame.api_key, decoded.api_name, frame.api_version, decoded.header_version,
            frame.correlation_id, request.client_id if is_response and request is not None else frame.client_id,
            frame.size, _latency_ms(frame, request) if is_response else None, error_code, codes, body_json,
            decoded.error, body_value,
        ), frame.size * 2 + 256)

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

    def _response(self, frame: KafkaFrame, decoded: Decoded) -> None:
        request = frame.request
        key = (request.connection, request.offset)
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
        if request.api_key == FETCH:
            _FetchJoin(self, request, request_body, request_version, response, response_body,
                       response_version).run()
        elif request.api_key == PRODUCE:
            _ProduceJoin(self, request, request_body, request_version, response, response_body,
                         response_version).run()

    # ---- problems -----------------------------------------------------------------------------
    def _problem(self, problem: Problem) -> None:
        info = _api_info(problem.api_key)
        self._add_problem(problem.connection, problem.direction, problem.ts_ns, problem.kind, problem.reason,
                          problem.offset, problem.length, problem.api_key, info.name if info else None,
                          problem.api_version, problem.correlation_id)

    def _add_problem(self, connection, direction, ts_ns, kind, reason, offset, length, api_key, api_name,
                     api_version, correlation_id) -> None:
        table = self.tables.get("problems")
        if table is not None:
            table.append((connection, direction, _us(ts_ns), kind, reason, offset, length, api_key, api_name,
                          api_version, correlation_id, None, None), 256)

    def _ready(self) -> list[tuple[str, pa.RecordBatch]]:
        return [(name, batch) for name, table in self.tables.items() if table.ready
                for batch in table.take_ready()]


# ---- joins ------------------------------------------------------------------------------------------

class _Join:
    """A request and its response (either may be missing), flattened to partitions by (topic name,
    topic id, partition): the response's partitions in its order, then request partitions it lacks."""

    REQUEST: str
    RESPONSE: str

    def __init__(self, batcher: TableBatcher, request: KafkaFrame, request_body, request_version,
                 response: KafkaFrame | None, response_body, response_version):
        self.batcher = batcher
        self.request = request
        self.request_body = request_body
        self.request_version = request_version
        self.response = response
        self.response_body = response_body
        self.response_version = response_version
        self.ts = _us((response or request).end_ts_ns)
        self.latency_ms = _latency_ms(response, request) if response is not None else None

    def request_has(self, *path: str) -> bool:
        return self.request_body is not None and has_field(self.REQUEST, path, self.request_version)

    def response_has(self, *path: str) -> bool:
        return self.response_body is not None and has_field(self.RESPONSE, path, self.response_version)

    def pairs(self, request_partitions: list, response_partitions: list):
        """(request item or None, response item or None) per partition; items are
        (topic, topic_id, partition number, partition struct, index)."""
        by_key = {}
        for item in request_partitions:
            by_key.setdefault(item[:3], item)
        matched = set()
        for item in response_partitions:
            found = by_key.get(item[:3])
            if found is not None and item[:3] not in matched:
                matched.add(item[:3])
                yield found, item
            else:
                yield None, item
        for item in request_partitions:
            if item[:3] not in matched:
                matched.add(item[:3])
                yield item, None

    def problem(self, frame: KafkaFrame, topic, topic_id, partition, reason: str) -> None:
        where = f"{topic if topic is not None else topic_id}-{partition}"
        self.batcher._add_problem(frame.connection, frame.direction, frame.end_ts_ns, "undecodable",
                                  f"records of {where}: {reason}", frame.offset, frame.size + 4, frame.api_key,
                                  api(frame.api_key).name, frame.api_version, frame.correlation_id)

    def records(self, source: str, frame: KafkaFrame, topic, topic_id, partition, summary: BlobSummary,
                first_offset: int | None) -> None:
        """The partition's records into the records table, and a problem for a batch that does not read."""
        if summary.error is not None:
            self.problem(frame, topic, topic_id, partition, summary.error)
        table = self.batcher.tables.get("records")
        if table is None or not summary.batches:
            return
        rows = RecordRows(table, source, frame.connection, frame.correlation_id, _us(frame.end_ts_ns), topic,
                           topic_id, partition, first_offset)
        for batch in summary.batches:
            try:
                rows.add(batch)
            except DecodeError as error:
                self.problem(frame, topic, topic_id, partition, str(error))
                return


class TopicNames:
    """Topic names by topic id (as text), from the Metadata (v10+) and CreateTopics (v7+) responses the
    batcher has seen: a request that names topics by id only (Produce and Fetch v13+) still gets the name
    in its rows when the capture saw the id resolved. Bounded: the oldest ids are forgotten first."""

    def __init__(self, limit: int = 100_000):
        self.limit = limit
        self.names: dict[str, str] = {}

    def learn(self, body) -> None:
        for topic in getattr(body, "topics", None) or ():
            topic_id, name = getattr(topic, "topic_id", None), getattr(topic, "name", None)
            if name and topic_id is not None and topic_id.int != 0:
                self.names.pop(str(topic_id), None)
                self.names[str(topic_id)] = name
        while len(self.names) > self.limit:
            del self.names[next(iter(self.names))]

    def get(self, topic_id: str | None) -> str | None:
        return self.names.get(topic_id) if topic_id is not None else None


def _topic_items(topics, topic_field: str | None, id_field: str | None, partitions_field: str,
                 partition_field: str, names: TopicNames) -> list:
    items = []
    index = 0
    for topic in topics:
        topic_id = str(getattr(topic, id_field)) if id_field else None
        name = getattr(topic, topic_field) if topic_field else names.get(topic_id)
        for partition in getattr(topic, partitions_field):
            items.append((name, topic_id, getattr(partition, partition_field), partition, index))
            index += 1
    return items


class _FetchJoin(_Join):
    REQUEST, RESPONSE = "FetchRequest", "FetchResponse"

    def run(self) -> None:
        request, response = self.request_body, self.response_body
        request_items = response_items = []
        if request is not None:
            request_items = _topic_items(request.topics, "topic" if self.request_has("topics", "topic") else None,
                                         "topic_id" if self.request_has("topics", "topic_id") else None,
                                         "partitions", "partition", self.batcher.topic_names)
            top = request
            head = (top.max_wait_ms, top.min_bytes,
                    top.max_bytes if self.request_has("max_bytes") else None,
                    top.isolation_level if self.request_has("isolation_level") else None,
                    top.session_id if self.request_has("session_id") else None,
                    top.session_epoch if self.request_has("session_epoch") else None)
            has_log_start = self.request_has("topics", "partitions", "log_start_offset")
            has_remote = self.request_has("topics", "partitions", "remote_partition_max_bytes")
        else:
            head = (None,) * 6
        if response is not None:
            response_items = _topic_items(
                response.responses, "topic" if self.response_has("responses", "topic") else None,
                "topic_id" if self.response_has("responses", "topic_id") else None, "partitions", "partition_index",
                self.batcher.topic_names)
            tail = (response.error_code if self.response_has("error_code") else None,
                    response.session_id if self.response_has("session_id") else None,
                    response.throttle_time_ms if self.response_has("throttle_time_ms") else None)
            has_lso = self.response_has("responses", "partitions", "last_stable_offset")
            has_log_start_response = self.response_has("responses", "partitions", "log_start_offset")
            has_replica = self.response_has("responses", "partitions", "preferred_read_replica")
            response_size = self.response.size
        else:
            tail = (None,) * 3
            response_size = None
        table = self.batcher.tables.get("fetches")
        where = (self.ts, self.request.connection, self.request.client, self.request.broker,
                 self.request.client_id, self.request.correlation_id, self.request.api_version)
        for asked, got in self.pairs(request_items, response_items):
            topic, topic_id, partition = (asked or got)[:3]
            if asked is not None:
                p = asked[3]
                request_part = (asked[4], p.fetch_offset, p.partition_max_bytes,
                                p.remote_partition_max_bytes if has_remote else None,
                                p.log_start_offset if has_log_start else None)
            else:
                request_part = (None,) * 5
            if got is not None:
                p = got[3]
                summary = summarize_records(p.records)
                response_part = (p.error_code, p.high_watermark, p.last_stable_offset if has_lso else None,
                                 p.log_start_offset if has_log_start_response else None,
                                 p.preferred_read_replica if has_replica else None,
                                 summary.records_bytes, summary.first_batch_bytes, summary.batch_count,
                                 summary.record_count, summary.first_offset, summary.last_offset, response_size,
                                 self.latency_ms)
                self.records("fetch", self.response, topic, topic_id, partition, summary, None)
            else:
                response_part = (None,) * 13
            if table is not None:
                table.append(where + head + (topic, topic_id, partition) + request_part + tail + response_part,
                              256)


class _ProduceJoin(_Join):
    REQUEST, RESPONSE = "ProduceRequest", "ProduceResponse"

    def run(self) -> None:
        request, response = self.request_body, self.response_body
        request_items = response_items = []
        head = (None,) * 3
        if request is not None:
            request_items = _topic_items(request.topic_data, "name" if self.request_has("topic_data", "name") else None,
                                         "topic_id" if self.request_has("topic_data", "topic_id") else None,
                                         "partition_data", "index", self.batcher.topic_names)
            head = (request.acks, request.timeout_ms,
                    request.transactional_id if self.request_has("transactional_id") else None)
        throttle = None
        if response is not None:
            response_items = _topic_items(
                response.responses, "name" if self.response_has("responses", "name") else None,
                "topic_id" if self.response_has("responses", "topic_id") else None, "partition_responses", "index",
                self.batcher.topic_names)
            throttle = response.throttle_time_ms if self.response_has("throttle_time_ms") else None
            has_message = self.response_has("responses", "partition_responses", "error_message")
            has_append_time = self.response_has("responses", "partition_responses", "log_append_time_ms")
            has_log_start = self.response_has("responses", "partition_responses", "log_start_offset")
        table = self.batcher.tables.get("produces")
        where = (self.ts, self.request.connection, self.request.client, self.request.broker,
                 self.request.client_id, self.request.correlation_id, self.request.api_version)
        for asked, got in self.pairs(request_items, response_items):
            topic, topic_id, partition = (asked or got)[:3]
            base_offset = None
            if got is not None:
                p = got[3]
                base_offset = p.base_offset
                response_part = (p.error_code, p.error_message if has_message else None, p.base_offset,
                                 p.log_append_time_ms if has_append_time else None,
                                 p.log_start_offset if has_log_start else None, throttle, self.latency_ms)
            else:
                response_part = (None,) * 7
            if asked is not None:
                summary = summarize_records(asked[3].records)
                request_part = (summary.records_bytes, summary.batch_count, summary.record_count,
                                summary.compression, summary.producer_id, summary.producer_epoch,
                                summary.base_sequence, summary.is_transactional)
                assigned = base_offset if base_offset is not None and base_offset >= 0 else None
                self.records("produce", self.request, topic, topic_id, partition, summary, assigned)
            else:
                request_part = (None,) * 8
            if table is not None:
                table.append(where + head + (topic, topic_id, partition) + request_part + response_part, 256)

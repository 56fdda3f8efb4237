"""The schemas of the capture tables (``TABLES``), and of the per-message tables of typed bodies
(``bodies/<message>``, ``body_schema``): ``frames`` holds each body as JSON, and each message's typed
bodies go to a table of their own, so that a query reads only the messages it asks for and a table is
written only for the messages a capture has.

What each table holds, row by row, is in the README ("Decoding captures"); ``rows.TableBatcher`` fills
them. ``capture_problems`` makes the problems table's rows for the runs of capture bytes the reader
skipped, which belong to no connection.
"""
from __future__ import annotations

from functools import lru_cache

import pyarrow as pa

from kafkawire.messages import apis

from .bodies import arrow_type
from ..files.reading import CAPTURE_PROBLEMS
from .table_sets import BODIES, FRAME_KEY

__all__ = ["TABLES", "BODIES", "MESSAGES", "FRAME_KEY", "body_table", "body_schema", "schema_of", "capture_problems",
           "micros", "latency_ms"]

_TS = pa.timestamp("us", tz="UTC")


def _list(item: pa.DataType) -> pa.DataType:
    return pa.list_(pa.field("element", item))  # the element name Spark's Arrow conversion uses



def micros(ts_ns: int | None) -> int | None:
    """A capture time in the tables' unit (microseconds)."""
    return None if ts_ns is None else ts_ns // 1000


def latency_ms(response, request) -> float | None:
    """From a request's last byte to its response's last byte (``KafkaFrame``s), in milliseconds."""
    return None if request is None else (response.end_ts_ns - request.end_ts_ns) / 1e6


# ---- the typed bodies ------------------------------------------------------------------------------

MESSAGES = frozenset(name for info in apis() for name in (info.request, info.response))


def body_table(message: str) -> str:
    """The table name (and folder under a table set) of message ``message``'s typed bodies."""
    if message not in MESSAGES:
        raise KeyError(f"no body table for message {message!r}")
    return f"{BODIES}/{message}"


@lru_cache(maxsize=None)
def body_schema(message: str) -> pa.Schema:
    """``bodies/<message>``: the frame's key (``FRAME_KEY``), its correlation id and API version, the
    version the body was read at, and the typed body (``bodies.arrow_type``)."""
    body_table(message)
    return pa.schema([
        ("connection", pa.string()), ("direction", pa.string()), ("stream_offset", pa.int64()), ("ts", _TS),
        ("correlation_id", pa.int32()), ("api_version", pa.int16()), ("body_version", pa.int16()),
        ("body", arrow_type(message)),
    ])


def schema_of(table: str) -> pa.Schema:
    """The schema of a table by name: ``TABLES[table]``, or ``body_schema`` for ``bodies/<message>``."""
    folder, _, message = table.partition("/")
    if folder == BODIES and message:
        return body_schema(message)
    try:
        return TABLES[table]
    except KeyError:
        raise KeyError(f"no table {table!r}") from None


# ---- table schemas --------------------------------------------------------------------------------

_WHERE = [("connection", pa.string()), ("client", pa.string()), ("broker", pa.string())]
# A share request's partition: who asked (the request header, the group, the member, the session).
_SHARE_WHERE = _WHERE + [
    ("client_id", pa.string()), ("correlation_id", pa.int32()), ("api_version", pa.int16()),
    ("group_id", pa.string()), ("member_id", pa.string()), ("share_session_epoch", pa.int32()),
    ("topic", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32()),
]

TABLES: dict[str, pa.Schema] = {
    "frames": pa.schema(_WHERE + [
        ("direction", pa.string()), ("ts", _TS), ("ts_first", _TS), ("stream_offset", pa.int64()),
        ("api_key", pa.int16()), ("api_name", pa.string()), ("api_version", pa.int16()),
        ("header_version", pa.int16()), ("correlation_id", pa.int32()), ("client_id", pa.string()),
        ("size", pa.int32()), ("latency_ms", pa.float64()), ("error_code", pa.int16()),
        ("error_codes", _list(pa.int16())), ("body", pa.string()), ("decode_error", pa.string()),
        ("sasl_mechanism", pa.string()), ("sasl_user", pa.string()),
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
        ("control_type", pa.string()),
    ]),
    "problems": pa.schema([
        ("connection", pa.string()), ("direction", pa.string()), ("ts", _TS), ("kind", pa.string()),
        ("reason", pa.string()), ("stream_offset", pa.int64()), ("length", pa.int64()), ("api_key", pa.int16()),
        ("api_name", pa.string()), ("api_version", pa.int16()), ("correlation_id", pa.int32()),
        # runs of capture bytes the reader skipped (capture_problems): which file, where in it
        ("file", pa.string()), ("file_offset", pa.int64()),
    ]),
    "connections": pa.schema(_WHERE + [
        ("ts", _TS), ("ts_first", _TS), ("requests", pa.int64()), ("responses", pa.int64()),
        ("tls", pa.bool_()), ("tls_server_name", pa.string()), ("tls_version", pa.string()),
        ("sasl_mechanism", pa.string()), ("sasl_user", pa.string()), ("sasl_handshake_version", pa.int16()),
        ("authentication", pa.string()), ("sasl_error_code", pa.int16()), ("authentications", pa.int32()),
        ("tls_decrypted", pa.bool_()),
    ]),
    # KIP-932 share groups (``share_joins``): what ShareFetch responses acquired, range by range ...
    "share_acquisitions": pa.schema([("ts", _TS)] + _SHARE_WHERE + [
        ("first_offset", pa.int64()), ("last_offset", pa.int64()), ("delivery_count", pa.int16()),
        ("error_code", pa.int16()), ("response_error_code", pa.int16()),
        ("acquisition_lock_timeout_ms", pa.int32()),
    ]),
    # ... and what ShareFetch and ShareAcknowledge requests acknowledged, one run of one type a row
    "share_acknowledgements": pa.schema([("ts", _TS)] + _SHARE_WHERE + [
        ("api_name", pa.string()), ("is_renew_ack", pa.bool_()), ("first_offset", pa.int64()),
        ("last_offset", pa.int64()), ("acknowledge_type", pa.string()), ("error_code", pa.int16()),
        ("response_error_code", pa.int16()), ("latency_ms", pa.float64()),
    ]),
}


def capture_problems(skipped) -> pa.Table:
    """Rows of the problems table for ``SkippedBytes``: no connection (the bytes belong to none that is
    known), the file and where in it, and how many bytes (null where a gzip stream was left unread)."""
    ordered = sorted(skipped, key=lambda skip: (skip.path, skip.offset, skip.kind))
    schema = TABLES["problems"]
    columns: dict[str, list[object]] = {name: [None] * len(ordered) for name in schema.names}
    columns["kind"] = [CAPTURE_PROBLEMS[skip.kind] for skip in ordered]
    columns["reason"] = [skip.reason for skip in ordered]
    columns["length"] = [skip.length for skip in ordered]
    columns["file"] = [skip.path for skip in ordered]
    columns["file_offset"] = [skip.offset for skip in ordered]
    return pa.table(columns, schema=schema)

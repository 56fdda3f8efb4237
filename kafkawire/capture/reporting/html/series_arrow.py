"""The charts' figures (``series``) with pyarrow and numpy on this process, for local tables: only the
columns a tally needs are read, and rows are grouped by one int64 per row made of the time bucket and
the dense codes of the key columns (numpy's unique and bincount), as ``report_arrow`` groups without
importing pyarrow's hash aggregation."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...tables.table_sets import BODIES
from ..report import PERCENTILES, rank_of
from ..report_arrow import _read
from .series import FILL_BINS, SPANNED, TALLIES, ChartData, Tally, bucket_width, shape


# Each table is read once, with every column a chart of it needs.
_COLUMNS = {"frames": ["ts", "direction", "api_name", "api_version", "latency_ms", "error_codes"],
            "fetches": ["ts", "connection", "correlation_id", "topic", "partition", "max_bytes", "partition_max_bytes",
                        "records_bytes", "batch_count", "high_watermark", "response_size"],
            "produces": ["ts", "topic", "records_bytes"]}


def compute(out: str) -> ChartData:
    """The ChartData of the tables in ``out`` (a local folder)."""
    tables = _Tables(out[len("file://"):] if out.startswith("file://") else out)
    spans = [pc.min_max(pc.cast(tables.base[name]["ts"], pa.int64())).as_py() for name in SPANNED]
    if spans[0]["min"] is None:  # no frames
        return shape(None, 1, {}, [], {})
    first = min(span["min"] for span in spans if span["min"] is not None)
    width = bucket_width(first, max(span["max"] for span in spans if span["max"] is not None))
    tallies = {name: tally_rows(tables.read(tally), tally, width) for name, tally in TALLIES.items()}
    answered = _filtered(tables.base["fetches"], (("valid", "response_size"),))
    return shape(first, width, tallies, latency_rows(tables.base["frames"]), fill_rows(answered))


class _Tables:
    """The tables the tallies read (``base``), with the two derived ones (``commits``, ``response_errors``)."""

    def __init__(self, out: str):
        self.out = out
        self.base = {name: _read(out, name, columns) for name, columns in _COLUMNS.items()}

    def read(self, tally: Tally) -> pa.Table:
        derived = {"commits": self._commits, "response_errors": self._response_errors}
        table = derived[tally.table]() if tally.table in derived else self.base[tally.table]
        return _filtered(table, tally.conditions)

    def _commits(self) -> pa.Table:
        """One row per partition an OffsetCommit request commits: ts, group_id, topic, partition,
        committed_offset (from ``bodies/OffsetCommitRequest``, absent when the capture has none)."""
        names = ["ts", "group_id", "topic", "partition", "committed_offset"]
        if not os.path.isdir(f"{self.out}/{BODIES}/OffsetCommitRequest"):
            return pa.table({name: pa.array([], pa.int64()) for name in names})
        requests = _read(self.out, f"{BODIES}/OffsetCommitRequest", ["ts", "body"])
        body = _array(requests["body"])
        topics = pc.list_flatten(pc.struct_field(body, "topics"))
        topic_row = pc.list_parent_indices(pc.struct_field(body, "topics"))
        partitions = pc.struct_field(topics, "partitions")
        partition_topic = pc.list_parent_indices(partitions)
        flat = pc.list_flatten(partitions)
        request_row = pc.take(topic_row, partition_topic)
        return pa.table({"ts": pc.take(_array(requests["ts"]), request_row),
                         "group_id": pc.take(pc.struct_field(body, "group_id"), request_row),
                         "topic": pc.take(pc.struct_field(topics, "name"), partition_topic),
                         "partition": pc.struct_field(flat, "partition_index"),
                         "committed_offset": pc.struct_field(flat, "committed_offset")})

    def _response_errors(self) -> pa.Table:
        frames = self.base["frames"]
        frames = frames.filter(pc.equal(frames["direction"], "response"))
        codes = _array(frames["error_codes"])
        return pa.table({"api_name": pc.take(_array(frames["api_name"]), pc.list_parent_indices(codes)),
                         "error_code": pc.list_flatten(codes)})


def _array(column) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _filtered(table: pa.Table, where) -> pa.Table:
    mask = None
    for condition in where:
        op, column = condition[0], table[condition[1]]
        test = (pc.equal(column, condition[2]) if op == "eq" else
                pc.is_in(column, pa.array(condition[2], column.type)) if op == "in" else pc.is_valid(column))
        test = pc.fill_null(test, False)
        mask = test if mask is None else pc.and_(mask, test)
    return table if mask is None else table.filter(mask)


def _codes(column) -> tuple[np.ndarray, list]:
    """Dense codes of a column's values from 0 (null one of them), and the values by code."""
    encoded = pc.dictionary_encode(_array(column), null_encoding="encode")
    return (pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False).astype(np.int64),
            encoded.dictionary.to_pylist())


def _groups(table: pa.Table, names, width: int | None = None):
    """(the key columns as (codes, values by code or None for buckets), each row's group, the first row
    of each group, the groups' count, the smallest bucket) of ``table`` grouped by its ``names`` columns
    and, given a ``width``, the time bucket of its ``ts`` first."""
    keys: list[tuple[np.ndarray, list | None]] = [_codes(table[name]) for name in names]
    low = 0
    if width is not None:
        buckets = pc.cast(table["ts"], pa.int64()).to_numpy(zero_copy_only=False) // width
        low = int(buckets.min())
        keys.insert(0, (buckets - low, None))
    combined = np.zeros(table.num_rows, dtype=np.int64)
    for codes, values in keys:
        span = int(codes.max()) + 1 if values is None else max(len(values), 1)
        combined = combined * span + codes
    groups, first_row, inverse = np.unique(combined, return_index=True, return_inverse=True)
    return keys, inverse, first_row, len(groups), low


def tally_rows(table: pa.Table, tally: Tally, width: int) -> list[tuple]:
    """The rows ``(bucket or None, *keys, figure)`` of ``tally`` over ``table``'s rows."""
    if table.num_rows == 0:
        return []
    keys, inverse, first_row, count, low = _groups(table, tally.keys, width if tally.timed else None)
    if tally.how == "count":
        figures = np.bincount(inverse, minlength=count).tolist()
    else:
        column = _array(table[tally.value])
        valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
        values = pc.fill_null(column.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        if tally.how == "sum":
            figures = np.bincount(inverse, weights=values, minlength=count).astype(np.int64).tolist()
        else:
            largest = np.full(count, np.iinfo(np.int64).min)
            np.maximum.at(largest, inverse[valid], values[valid])
            seen = np.bincount(inverse[valid], minlength=count) > 0
            figures = [int(v) if ok else None for v, ok in zip(largest.tolist(), seen.tolist())]
    columns = [(codes[first_row] + low).tolist() if by_code is None else [by_code[c] for c in codes[first_row].tolist()]
               for codes, by_code in keys]
    if not tally.timed:
        columns.insert(0, [None] * count)
    return list(zip(*columns, figures))


def latency_rows(frames: pa.Table) -> list[dict]:
    """Per API and version, its responses' count and nearest-rank latency percentiles and largest."""
    timed = frames.filter(pc.fill_null(pc.and_(pc.equal(frames["direction"], "response"),
                                               pc.is_valid(frames["latency_ms"])), False))
    if timed.num_rows == 0:
        return []
    names, by_name = _codes(timed["api_name"])
    versions = pc.fill_null(_array(timed["api_version"]).cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    latencies = _array(timed["latency_ms"]).to_numpy(zero_copy_only=False)
    order = np.lexsort((latencies, versions, names))
    key = names[order] * 65_536 + versions[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    rows = []
    for start, end in zip(starts.tolist(), np.r_[starts[1:], len(order)].tolist()):
        values, n = latencies[order[start:end]], end - start
        version = int(versions[order[start]])
        rows.append(dict(api_name=by_name[names[order[start]]], api_version=None if version < 0 else version,
                         responses=n, **{f"p{p}": float(values[rank_of(p, n) - 1]) for p in PERCENTILES},
                         max=float(values[-1])))
    return rows


def fill_rows(fetches: pa.Table) -> dict[str, list[tuple]]:
    """The fill tallies (``series.fill_figures``): rows (bin, limit-bound, count) for responses (their
    partitions' bytes and batches added up, against MaxBytes) and for partitions (PartitionMaxBytes)."""
    def numbers(table, name):
        return pc.fill_null(_array(table[name]).cast(pa.int64()), 0).to_numpy(zero_copy_only=False)

    if fetches.num_rows == 0:
        return {"responses": [], "partitions": []}
    partitions = np.stack([numbers(fetches, "records_bytes"), numbers(fetches, "partition_max_bytes"),
                           numbers(fetches, "batch_count")], axis=1)
    _, inverse, _, count, _ = _groups(fetches, ("connection", "correlation_id"))
    limits = np.zeros(count, dtype=np.int64)  # a response's MaxBytes (one per request; 0: none)
    np.maximum.at(limits, inverse, numbers(fetches, "max_bytes"))
    per_response = np.stack([np.bincount(inverse, weights=partitions[:, 0], minlength=count).astype(np.int64), limits,
                             np.bincount(inverse, weights=partitions[:, 2], minlength=count).astype(np.int64)], axis=1)
    return {"responses": _fill(per_response), "partitions": _fill(partitions)}


def _fill(rows: np.ndarray) -> list[tuple]:
    """(bin, bound, count) of rows (bytes, limit, batches) with a limit (MaxBytes is absent before Fetch v3)."""
    rows = rows[rows[:, 1] > 0]
    size, limit, batches = rows[:, 0], rows[:, 1], rows[:, 2]
    bins = np.where(size > limit, FILL_BINS, np.minimum(size * FILL_BINS // np.maximum(limit, 1), FILL_BINS - 1))
    mean = np.where(batches > 0, size // np.maximum(batches, 1), 0)
    bound = (size > 0) & (size + mean > limit)
    key = bins * 2 + bound
    counts = np.bincount(key, minlength=2 * (FILL_BINS + 1))
    return [(k // 2, bool(k % 2), int(c)) for k, c in enumerate(counts.tolist()) if c]

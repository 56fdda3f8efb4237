"""The report's figures with pyarrow and numpy on this process, for local tables (see ``report``: the
definitions, the size limit, and the order, which ``report.ordered`` applies).

Only the columns the report needs are read. Rows are grouped by sorting: the key columns become int64
stand-ins (strings: the ranks of their distinct values; nulls: the smallest value, so that they sort
first as in Spark's ascending order), pyarrow sorts the rows by them (and by the columns that order
the rows of a group, where that matters: a kind's earliest problem, a response's first partition with
data, runs of fetches), a group starts wherever a key changes, so a null key is a group of its own as
in SQL, and numpy adds up each group's slice. (pyarrow's hash aggregation would do, but importing it
imports pandas, which takes longer than a small report.)
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..kafka.authentication import AUTHENTICATED, FAILED, INCOMPLETE
from .report import PERCENTILES, Report, rank_of, versions_text
from ..tables.table_sets import BODIES, FRAME_KEY
from .shares import ACKNOWLEDGEMENT_COLUMNS, ACQUISITION_COLUMNS, DEFAULT_DELIVERY_LIMIT, share_view
from .transactions import FRAME_COLUMNS, PRODUCE_COLUMNS, TXN_API_KEYS, TXN_MESSAGES, follow, frame_rows, \
    problem_summary, produce_requests

_FRAMES = ["ts", "api_key", "direction", "api_name", "api_version", "latency_ms", "error_codes", "client", "client_id",
           "size"]
_FETCHES = ["ts", "connection", "correlation_id", "topic", "topic_id", "partition", "request_index",
            "max_bytes", "partition_max_bytes", "fetch_offset", "high_watermark", "records_bytes",
            "first_batch_bytes", "response_size"]
_CONNECTIONS = ["tls", "tls_server_name", "tls_version", "sasl_mechanism", "sasl_user", "authentication"]
_NULL = np.iinfo(np.int64).min


def compute(out: str, starved_after: int, delivery_limit: int = DEFAULT_DELIVERY_LIMIT) -> Report:
    frames = _read(out, "frames", _FRAMES)
    fetches = _read(out, "fetches", _FETCHES)
    problems = _read(out, "problems", ["ts", "kind", "reason"])
    connections = _read(out, "connections", _CONNECTIONS)
    is_request = pc.fill_null(pc.equal(frames["direction"], "request"), False)
    report = Report(apis=_per_api(frames, is_request), clients=_per_client(frames, is_request),
                    problems=_problems(problems), authentications=_authentications(connections),
                    tls=_tls(connections))

    answered = fetches.filter(pc.is_valid(fetches["response_size"]))
    report.oversized_responses = _oversized_responses(answered)
    partition_limit = pc.max_element_wise(pc.cast(answered["partition_max_bytes"], pa.int64()),
                                          pc.fill_null(answered["first_batch_bytes"], 0))
    over = answered.filter(pc.and_(pc.is_valid(answered["partition_max_bytes"]),
                                   pc.greater(answered["records_bytes"], partition_limit)))
    report.oversized_partitions = over.select(["connection", "correlation_id", "topic", "partition",
                                               "records_bytes", "partition_max_bytes", "topic_id"]).to_pylist()
    report.starved = _starved(answered, starved_after)

    report.transactions, problems_of_transactions = _transactions(out, frames)
    report.problems += problem_summary(problems_of_transactions)
    report.share_groups, report.share_records, problems_of_shares = _shares(out, frames, delivery_limit)
    report.problems += problem_summary(problems_of_shares)

    report.totals = {"frames": frames.num_rows, "requests": _count(is_request),
                     "responses": _count(pc.equal(frames["direction"], "response")), "fetches": fetches.num_rows,
                     "produces": sum(rows for _, rows in part_files(f"{out}/produces")),
                     "connections": connections.num_rows}
    if os.path.isdir(f"{out}/records"):  # the records table exists only with --records
        report.totals["records"] = sum(rows for _, rows in part_files(f"{out}/records"))
    return report


def part_files(folder: str) -> list[tuple[str, int]]:
    """(path, rows) of a table's Parquet files, as readers see them: names starting with ``.`` or ``_``
    are not part of it (temporary files, Spark's markers)."""
    found = []
    for entry in sorted(os.scandir(folder), key=lambda entry: entry.name):
        if entry.is_file() and entry.name.endswith(".parquet") and entry.name[0] not in "._":
            found.append((entry.path, pq.ParquetFile(entry.path).metadata.num_rows))
    return found


def _read(out: str, table: str, columns: list[str]) -> pa.Table:
    """Some columns of a table, file by file (``pq.read_table`` goes through pyarrow.dataset, whose
    import alone takes longer than a small report)."""
    parts = [pq.ParquetFile(path).read(columns=columns) for path, _ in part_files(f"{out}/{table}")]
    return pa.concat_tables(parts)


# ---- columns, keys and groups ------------------------------------------------------------------------

def _array(column) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _count(condition) -> int:
    return int(pc.sum(pc.fill_null(condition, False).cast(pa.int64())).as_py() or 0)


def _is_text(array) -> bool:
    return pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or pa.types.is_binary(array.type)


def _text_ranks(array) -> tuple[np.ndarray, list]:
    """Dense ranks of a text column's values from 1 (nulls 0), and the values in rank order."""
    encoded = pc.dictionary_encode(array)
    ranks = np.zeros(len(encoded.dictionary) + 1, dtype=np.int64)
    ranks[1:] = pc.rank(encoded.dictionary, sort_keys="ascending", tiebreaker="dense").to_numpy()
    by_rank = [None] * len(encoded.dictionary)
    for value, rank in zip(encoded.dictionary.to_pylist(), ranks[1:].tolist()):
        by_rank[rank - 1] = value
    return ranks[pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64) + 1], by_rank


def _key(column) -> np.ndarray:
    """An int64 stand-in for a column that sorts as it does, nulls first: text becomes the dense ranks
    of its distinct values (from 1, nulls 0), integers and times their values (nulls the smallest int64)."""
    array = _array(column)
    if _is_text(array):
        return _text_ranks(array)[0] if len(array) else np.zeros(0, dtype=np.int64)
    return pc.fill_null(array.cast(pa.int64()), _NULL).to_numpy(zero_copy_only=False)


def _grouped(table: pa.Table, keys: list[str], then: Sequence[str] = ()):
    """(row order, each row's group in that order, the first row of each group) for ``table`` grouped
    by ``keys``, the rows of a group ordered by ``then``."""
    columns = [_key(table[name]) for name in (*keys, *then)]
    if table.num_rows == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    order = pc.sort_indices(pa.table({str(i): c for i, c in enumerate(columns)}),
                            sort_keys=[(str(i), "ascending") for i in range(len(columns))]).to_numpy()
    new = np.zeros(len(order), dtype=bool)
    new[0] = True
    for column in columns[:len(keys)]:
        in_order = column[order]
        new[1:] |= in_order[1:] != in_order[:-1]
    return order, np.cumsum(new) - 1, np.flatnonzero(new)


def _sums(values: np.ndarray, order: np.ndarray, firsts: np.ndarray) -> list[int]:
    return np.add.reduceat(values[order], firsts).tolist() if len(firsts) else []


def _extremes(column, order: np.ndarray, firsts: np.ndarray, largest: bool, as_arrays: bool = False):
    """The smallest or largest non-null value of each group (None where a group has none); with
    ``as_arrays`` (numbers only), (values, whether the group has one) as numpy arrays."""
    if not len(firsts):
        return (np.zeros(0), np.zeros(0, dtype=bool)) if as_arrays else []
    array = _array(column)
    valid = _np_valid(array)
    if _is_text(array):
        values, by_rank = _text_ranks(array)
    elif pa.types.is_floating(array.type):
        values = pc.fill_null(array, 0.0).to_numpy(zero_copy_only=False)
    else:
        values = pc.fill_null(array.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    if values.dtype.kind == "f":
        absent = -np.inf if largest else np.inf
    else:
        absent = np.iinfo(np.int64).min if largest else np.iinfo(np.int64).max
    picked = (np.maximum if largest else np.minimum).reduceat(np.where(valid, values, absent)[order], firsts)
    found = np.maximum.reduceat(valid[order].astype(np.int8), firsts).astype(bool)
    if as_arrays:
        return picked, found
    if _is_text(array):
        return [by_rank[rank - 1] if ok else None for rank, ok in zip(picked.tolist(), found)]
    return [value if ok else None for value, ok in zip(picked.tolist(), found)]


def _np_valid(array) -> np.ndarray:
    return pc.is_valid(array).to_numpy(zero_copy_only=False)


# ---- sections --------------------------------------------------------------------------------------

def _per_api(frames: pa.Table, is_request) -> list[dict]:
    order, groups, firsts = _grouped(frames, ["api_name"])
    requests = _array(is_request).to_numpy(zero_copy_only=False).astype(np.int64)
    has_errors = pc.and_(pc.invert(is_request),
                         pc.greater(pc.fill_null(pc.list_value_length(frames["error_codes"]), 0), 0))
    errors = _array(has_errors).to_numpy(zero_copy_only=False).astype(np.int64)
    names = frames["api_name"].take(pa.array(order[firsts])).to_pylist() if len(firsts) else []
    low = _extremes(frames["api_version"], order, firsts, False)
    high = _extremes(frames["api_version"], order, firsts, True)
    slowest = _extremes(frames["latency_ms"], order, firsts, True)
    percentiles = _percentiles(frames)
    rows = []
    for i, (name, count, req, err) in enumerate(zip(names, np.bincount(groups).tolist(),
                                                     _sums(requests, order, firsts), _sums(errors, order, firsts))):
        pct = percentiles.get(name, {})
        rows.append(dict(api_name=name, versions=versions_text(low[i], high[i]), requests=req,
                         responses=count - req, errors=err, **{f"p{p}": pct.get(p) for p in PERCENTILES},
                         max=slowest[i]))
    return rows


def _percentiles(frames: pa.Table) -> dict:
    """api_name -> {p: the latency at rank ceil(p * n / 100) of its n latencies}."""
    timed = frames.filter(pc.is_valid(frames["latency_ms"]))
    if timed.num_rows == 0:
        return {}
    names = pc.dictionary_encode(_array(timed["api_name"]))
    codes = pc.fill_null(names.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64) + 1
    latencies = _array(timed["latency_ms"]).to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names.dictionary) + 2))
    found = {}
    for code in range(len(names.dictionary) + 1):
        values = latencies[order[bounds[code]:bounds[code + 1]]]
        if len(values):
            ranks = [rank_of(p, len(values)) - 1 for p in PERCENTILES]
            chosen = np.partition(values, ranks)
            found[None if code == 0 else names.dictionary[code - 1].as_py()] = {
                p: float(chosen[rank]) for p, rank in zip(PERCENTILES, ranks)}
    return found


def _per_client(frames: pa.Table, is_request) -> list[dict]:
    order, _, firsts = _grouped(frames, ["client"])
    size = _key(frames["size"]) + 4
    sent = np.where(_array(is_request).to_numpy(zero_copy_only=False), size, 0)
    clients = frames["client"].take(pa.array(order[firsts])).to_pylist() if len(firsts) else []
    return [dict(client=client, client_id=client_id, sent=s, received=r)
            for client, client_id, s, r in zip(clients, _extremes(frames["client_id"], order, firsts, True),
                                                _sums(sent, order, firsts), _sums(size - sent, order, firsts))]


def _problems(problems: pa.Table) -> list[dict]:
    order, groups, firsts = _grouped(problems, ["kind"], ["ts", "reason"])
    counts: np.ndarray | list[int] = np.bincount(groups) if len(groups) else []
    taken = problems.take(pa.array(order[firsts])).to_pylist() if len(firsts) else []
    return [dict(kind=first["kind"], count=int(count), example=first["reason"]) for first, count in zip(taken, counts)]


def _authentications(connections: pa.Table) -> list[dict]:
    """Connections per SASL mechanism and user, by the outcome of their authentication."""
    sasl = connections.filter(pc.is_valid(connections["authentication"]))
    order, _, firsts = _grouped(sasl, ["sasl_mechanism", "sasl_user"])
    if not len(firsts):
        return []
    counts = {outcome: _sums(_array(pc.equal(sasl["authentication"], outcome)).to_numpy(zero_copy_only=False)
                             .astype(np.int64), order, firsts) for outcome in (AUTHENTICATED, FAILED, INCOMPLETE)}
    taken = sasl.take(pa.array(order[firsts])).select(["sasl_mechanism", "sasl_user"]).to_pylist()
    return [dict(mechanism=first["sasl_mechanism"], user=first["sasl_user"],
                 **{outcome: counts[outcome][i] for outcome in counts}) for i, first in enumerate(taken)]


def _tls(connections: pa.Table) -> list[dict]:
    """TLS connections per server name and version offered."""
    tls = connections.filter(pc.fill_null(connections["tls"], False))
    order, groups, firsts = _grouped(tls, ["tls_server_name", "tls_version"])
    if not len(firsts):
        return []
    taken = tls.take(pa.array(order[firsts])).select(["tls_server_name", "tls_version"]).to_pylist()
    return [dict(server_name=first["tls_server_name"], version=first["tls_version"], connections=int(count))
            for first, count in zip(taken, np.bincount(groups))]


def _oversized_responses(answered: pa.Table) -> list[dict]:
    """Responses whose record bytes exceed max(MaxBytes, the first batch of the first partition with data)."""
    with_data = answered.filter(pc.greater(answered["records_bytes"], 0))
    order, groups, firsts = _grouped(with_data, ["connection", "correlation_id"],
                                     ["request_index", "topic", "topic_id", "partition", "first_batch_bytes"])
    if not len(firsts):
        return []
    total = np.add.reduceat(_key(with_data["records_bytes"])[order], firsts)
    limits, limited = _extremes(with_data["max_bytes"], order, firsts, True, as_arrays=True)
    first_batch = pc.fill_null(with_data["first_batch_bytes"], 0).to_numpy()[order[firsts]]
    over = np.flatnonzero(total > np.where(limited, np.maximum(limits, first_batch), first_batch))
    taken = with_data.take(pa.array(order[firsts[over]])).select(["connection", "correlation_id"]).to_pylist()
    return [dict(connection=first["connection"], correlation_id=first["correlation_id"], bytes=size,
                 max_bytes=limit if has_limit else None, first_batch=batch)
            for first, size, limit, has_limit, batch in zip(taken, total[over].tolist(), limits[over].tolist(),
                                                            limited[over].tolist(), first_batch[over].tolist())]


def _starved(answered: pa.Table, starved_after: int) -> list[dict]:
    """Partitions starved ``starved_after`` or more fetches in a row on a connection."""
    keyed = answered.append_column("key_topic", pc.coalesce(answered["topic"], answered["topic_id"]))
    then = ["ts", "correlation_id"]
    order, groups, firsts = _grouped(keyed, ["connection", "key_topic", "partition"], then)
    if not len(firsts):
        return []
    starved = pc.fill_null(pc.and_kleene(pc.equal(keyed["records_bytes"], 0),
                                         pc.greater(keyed["high_watermark"], keyed["fetch_offset"])), False)
    starved = _array(starved).to_numpy(zero_copy_only=False)[order]
    first = np.zeros(len(order), dtype=bool)
    first[firsts] = True
    run = np.cumsum(~starved | first)  # a run of consecutive starved rows of a group shares one number
    # Rows of a group at the same (ts, correlation id) are peers, which SQL's running sum counts
    # together: each takes the number of the last of them.
    peer = first.copy()
    for name in then:
        in_order = _key(keyed[name])[order]
        peer[1:] |= in_order[1:] != in_order[:-1]
    peer_starts = np.flatnonzero(peer)
    run = run[(np.append(peer_starts[1:], len(order)) - 1)[np.cumsum(peer) - 1]]
    lengths = np.bincount(run[starved], minlength=int(run.max()) + 1)
    longest = np.zeros(len(firsts), dtype=np.int64)
    np.maximum.at(longest, groups[starved], lengths[run[starved]])
    taken = keyed.take(pa.array(order[firsts])).select(["connection", "key_topic", "partition"]).to_pylist()
    return [dict(connection=row["connection"], topic=row["key_topic"], partition=row["partition"],
                 longest=int(length))
            for row, length in zip(taken, longest) if length >= starved_after]


def _transactions(out: str, frames: pa.Table) -> tuple[list[dict], list[dict]]:
    """The transactions view and its problems (``transactions.follow``), from the frames of the
    transaction APIs with their typed bodies (``bodies/<message>`` tables, read only when the capture has
    such frames) and the transactional rows of the produces table."""
    is_txn = _array(pc.is_in(frames["api_key"], pa.array(TXN_API_KEYS, pa.int16())))
    produces = _read(out, "produces", [*PRODUCE_COLUMNS, "is_transactional"])
    produces = produces.filter(pc.fill_null(produces["is_transactional"], False))
    if not _count(is_txn) and not produces.num_rows:
        return [], []
    txn = _micros(_read(out, "frames", list(FRAME_COLUMNS)).filter(is_txn))
    bodies = []
    for message in TXN_MESSAGES:
        if os.path.isdir(f"{out}/{BODIES}/{message}"):
            bodies += _micros(_read(out, f"{BODIES}/{message}", [*FRAME_KEY, "body"])).to_pylist()
    produces = _micros(produces)
    end = pc.max(pc.cast(frames["ts"], pa.int64())).as_py()
    return follow(frame_rows(txn.to_pylist(), bodies), produce_requests(produces.to_pylist()), end)


def _shares(out: str, frames: pa.Table, delivery_limit: int) -> tuple[list[dict], list[dict], list[dict]]:
    """The share-group view (``shares.share_view``) from the share tables (absent from table sets that
    older versions wrote)."""
    if not os.path.isdir(f"{out}/share_acquisitions") and not os.path.isdir(f"{out}/share_acknowledgements"):
        return [], [], []
    tables = [_micros(_read(out, name, list(columns))) if os.path.isdir(f"{out}/{name}") else None
              for name, columns in (("share_acquisitions", ACQUISITION_COLUMNS),
                                    ("share_acknowledgements", ACKNOWLEDGEMENT_COLUMNS))]
    acquired, acknowledged = [[] if table is None else table.to_pylist() for table in tables]
    if not acquired and not acknowledged:
        return [], [], []
    return share_view(acquired, acknowledged, pc.max(pc.cast(frames["ts"], pa.int64())).as_py(), delivery_limit)


def _micros(table: pa.Table) -> pa.Table:
    """``ts`` as integer microseconds, as the transactions view takes times."""
    return table.set_column(table.column_names.index("ts"), "ts", pc.cast(table["ts"], pa.int64()))

"""Table sets as `kafkawire decode` writes them, made up with pyarrow for the report's tests: every
column the report reads, drawn from small sets so that groups, ties and nulls are common, in several
part files per table (``random_tables``); and large ones of many topics and groups over an hour, made
with numpy (``large_tables``)."""
from __future__ import annotations

import datetime
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kafkawire.capture.tables.table_schemas import TABLES, body_schema

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def _maybe(rng: random.Random, value, none: float = 0.1):
    return None if rng.random() < none else value


def _ts(rng: random.Random, spread: int = 50):
    return T0 + datetime.timedelta(milliseconds=rng.randrange(spread))


def _frames(rng: random.Random, count: int) -> list[dict]:
    rows = []
    for _ in range(count):
        request = rng.random() < 0.5
        rows.append(dict(
            connection=f"c{rng.randrange(3)}", client=rng.choice(["10.0.0.1:1", "10.0.0.2:2", "10.0.0.3:3"]),
            broker="10.0.0.9:9092", direction="request" if request else "response", ts=_ts(rng),
            api_name=_maybe(rng, rng.choice(["Fetch", "Produce", "Metadata"]), 0.05),
            api_version=_maybe(rng, rng.randrange(4, 13)), client_id=_maybe(rng, rng.choice(["a", "b", "ü"]), 0.3),
            size=rng.randrange(10, 5000), correlation_id=rng.randrange(20),
            latency_ms=None if request else _maybe(rng, rng.randrange(200) / 8),  # ties: a few hundred values
            error_codes=None if request else rng.choice([None, [], [0], [3, 7]])))
    return rows


def _fetches(rng: random.Random, count: int) -> list[dict]:
    rows = []
    for _ in range(count):
        answered = rng.random() < 0.9
        connection, correlation_id = rng.randrange(2), rng.randrange(12)
        rows.append(dict(
            ts=_ts(rng, 30), connection=f"c{connection}", correlation_id=correlation_id,
            topic=_maybe(rng, rng.choice(["t", "u"]), 0.2), topic_id=_maybe(rng, rng.choice(["id-1", "id-2"]), 0.5),
            partition=rng.randrange(3), request_index=_maybe(rng, rng.randrange(4), 0.15),
            max_bytes=[None, 500, 2000, 1 << 20, 80_000][(connection * 12 + correlation_id) % 5],  # one a request
            partition_max_bytes=_maybe(rng, rng.choice([300, 1500]), 0.2), fetch_offset=rng.randrange(5),
            high_watermark=_maybe(rng, rng.randrange(8)), response_size=rng.randrange(100, 9000) if answered else None,
            records_bytes=_maybe(rng, rng.choice([0, 0, 0, 200, 900, 1800]) if answered else None, 0.05),
            first_batch_bytes=_maybe(rng, rng.choice([100, 700, 1600]), 0.3)))
    return rows


def _problems(rng: random.Random, count: int) -> list[dict]:
    return [dict(connection=f"c{rng.randrange(3)}", direction="request", ts=_maybe(rng, _ts(rng, 5), 0.2),
                 kind=rng.choice(["gap", "resync", "undecodable"]), reason=f"reason {rng.randrange(6)}")
            for _ in range(count)]


def _connections(rng: random.Random, count: int) -> list[dict]:
    rows = []
    for n in range(count):
        tls = rng.random() < 0.3
        sasl = not tls and rng.random() < 0.6
        rows.append(dict(
            connection=f"c{n}", tls=tls, tls_server_name=_maybe(rng, rng.choice(["a.example", "b.example"]), 0.3)
            if tls else None, tls_version=_maybe(rng, rng.choice(["TLS 1.2", "TLS 1.3"]), 0.2) if tls else None,
            sasl_mechanism=_maybe(rng, rng.choice(["PLAIN", "SCRAM-SHA-512"]), 0.1) if sasl else None,
            sasl_user=_maybe(rng, rng.choice(["alice", "bob"]), 0.2) if sasl else None,
            authentication=rng.choice(["authenticated", "authenticated", "failed", "incomplete"]) if sasl else None))
    return rows


def _write(folder: Path, name: str, rows: list[dict], files: int) -> None:
    schema = TABLES[name]
    folder = folder / name
    folder.mkdir(parents=True)
    per_file = -(-len(rows) // files) if rows else 0
    for number in range(files):
        part = rows[number * per_file:(number + 1) * per_file]
        columns = {field.name: [row.get(field.name) for row in part] for field in schema}
        pq.write_table(pa.table(columns, schema=schema), folder / f"part-{number:05d}-000.parquet")


def random_tables(out: Path, seed: int, rows: int = 400, records: bool = True) -> Path:
    """A table set of about ``rows`` rows per table (problems: a quarter; connections, records: a fifth)
    under ``out``."""
    rng = random.Random(seed)
    _write(out, "frames", _frames(rng, rows), 3)
    _write(out, "fetches", _fetches(rng, rows), 2)
    _write(out, "produces", [dict(topic="t", partition=0)] * (rows // 10), 1)
    _write(out, "problems", _problems(rng, rows // 4), 2)
    _write(out, "connections", _connections(rng, rows // 5), 2)
    if records:
        _write(out, "records", [dict(topic="t", partition=0, offset=n) for n in range(rows // 5)], 1)
    (out / "_summary").mkdir()
    return out


def large_tables(out: Path, requests: int, seed: int = 7) -> Path:
    """A made-up table set of ``requests`` requests and as many responses over an hour, fetches and
    produces of 500 topics and offset commits of 200 groups: a large capture's variety."""
    rng = np.random.default_rng(seed)
    t0 = 1_780_000_000_000_000

    def write(name, columns: dict, count: int, schema=None):
        schema = schema or TABLES[name]
        arrays = [pa.array(columns[f.name], type=f.type) if f.name in columns else pa.nulls(count, f.type)
                  for f in schema]
        (out / name).mkdir(parents=True)
        pq.write_table(pa.Table.from_arrays(arrays, schema=schema), out / name / "part-00000-000.parquet")

    n = 2 * requests
    ts = (t0 + rng.integers(0, 3_600_000_000, n)).astype("datetime64[us]")
    apis = np.array(["Fetch", "Produce", "Metadata", "JoinGroup", "EndTxn", "OffsetCommit"])
    write("frames", dict(
        ts=ts, direction=np.where(np.arange(n) % 2 == 0, "request", "response"),
        api_name=apis[rng.integers(0, len(apis), n)], api_version=rng.integers(0, 13, n).astype(np.int16),
        size=rng.integers(10, 5000, n).astype(np.int32), client=np.full(n, "10.0.0.1:1"),
        latency_ms=pa.array(rng.random(n) * 100, mask=np.arange(n) % 2 == 0),
        error_codes=_error_codes(n)), n)
    topics = np.array([f"topic-{i}" for i in range(500)])
    m = requests
    common = dict(ts=ts[:m], topic=topics[rng.integers(0, 500, m)], partition=rng.integers(0, 8, m).astype(np.int32),
                  records_bytes=rng.integers(0, 1 << 20, m))
    write("fetches", dict(common, connection=np.array([f"c{i}" for i in range(50)])[rng.integers(0, 50, m)],
                          correlation_id=rng.integers(0, m, m).astype(np.int32), max_bytes=np.full(m, 1 << 22, np.int32),
                          partition_max_bytes=np.full(m, 1 << 20, np.int32), batch_count=np.full(m, 4, np.int32),
                          high_watermark=rng.integers(10**6, 10**7, m), response_size=np.full(m, 5000, np.int32)), m)
    write("produces", common, m)
    for name in ("problems", "connections"):
        write(name, {}, 0)
    groups = np.array([f"group-{i}" for i in range(200)])
    commits = body_schema("OffsetCommitRequest")
    body = pa.array([dict(group_id=str(groups[i % 200]), topics=[dict(name=str(topics[i % 500]), partitions=[
        dict(partition_index=i % 8, committed_offset=10**6 + i)])]) for i in range(m // 10)],
        commits.field("body").type)
    write("bodies/OffsetCommitRequest", dict(ts=ts[: m // 10], body=body), m // 10, commits)
    return out


def _error_codes(n: int) -> pa.Array:
    """Responses' error codes: one code (of 50) on every seventh frame, none on the others."""
    has = np.arange(n) % 7 == 0
    offsets = np.concatenate([[0], np.cumsum(has)]).astype(np.int32)
    codes = (np.flatnonzero(has) % 50 + 1).astype(np.int16)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(codes)).cast(pa.list_(pa.field("element", pa.int16())))

"""Table sets as `kafkawire decode` writes them, made up with pyarrow for the report's tests: every
column the report reads, drawn from small sets so that groups, ties and nulls are common, in several
part files per table."""
from __future__ import annotations

import datetime
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kafkawire.capture.tables.table_schemas import TABLES

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

"""``kafkawire report DIR``: a summary of decoded tables.

Sections: frames and latency percentiles per API, bytes per client, problems by kind (the problems
table's, and the transactions' problems: hanging transactions, fenced producers still writing),
authentication (connections per SASL mechanism and user: authenticated, failed, incomplete; TLS
connections per server name and version offered, from the connections table), transactions per
transactional id (``transactions``: begun, committed, aborted, open, mean and longest duration), share
groups per group and record (``shares``: members, acknowledgements, redeliveries, lock expiries,
records archived), and the fetch-limits check (KIP-74):

- a fetch response whose record bytes exceed ``max(MaxBytes, first batch)``, where the first batch
  is the first batch of the first partition that returned data (the one overshoot KIP-74 allows);
- a partition whose record bytes exceed ``max(PartitionMaxBytes, its first batch)``;
- a partition starved across consecutive fetches: data was waiting (high watermark above the fetch
  offset) yet nothing came back, ``starved_after`` fetches in a row on one connection.

Two engines compute it and give the same Report: pyarrow on the driver (``report_arrow``, through
``build_arrow``: tables on the local file system of up to ``ARROW_MAX_ROWS`` rows) and Spark SQL
(``capture_spark.report_spark.build``: larger tables, and tables behind a URI). Both compute exact
figures, each defined once here: percentiles are nearest-rank (the value at rank ceil(p * n) of the n
latencies), a kind's example problem is its earliest (by time, then reason), and every list is put in
one order by ``ordered`` (ties broken by name), so the text and JSON do not depend on the engine.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

STARVED_AFTER = 3
PERCENTILES = (50, 90, 99)
# The Arrow engine holds the columns it reads in this process's memory and works on one core; past
# this many rows (frames, fetches, produces, problems and records together) Spark, which spills and
# uses every core, takes over. The figures behind the choice are in docs/performance.md.
ARROW_MAX_ROWS = 5_000_000
ENGINES = ("auto", "arrow", "spark")


@dataclass
class Report:
    apis: list[dict] = field(default_factory=list)
    clients: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)
    authentications: list[dict] = field(default_factory=list)
    tls: list[dict] = field(default_factory=list)
    oversized_responses: list[dict] = field(default_factory=list)
    oversized_partitions: list[dict] = field(default_factory=list)
    starved: list[dict] = field(default_factory=list)
    transactions: list[dict] = field(default_factory=list)
    share_groups: list[dict] = field(default_factory=list)
    share_records: list[dict] = field(default_factory=list)  # shares.share_view's records
    totals: dict = field(default_factory=dict)

    def text(self) -> str:
        lines = [f"frames {self.totals.get('frames', 0):,}  requests {self.totals.get('requests', 0):,}  "
                 f"responses {self.totals.get('responses', 0):,}  fetched partitions "
                 f"{self.totals.get('fetches', 0):,}  produced partitions {self.totals.get('produces', 0):,}"
                 f"  connections {self.totals.get('connections', 0):,}"
                 + (f"  records {self.totals['records']:,}" if "records" in self.totals else "")]
        lines += ["", "per API (latency in ms, responses)",
                  f"  {'api':<24}{'ver':>8}{'requests':>10}{'responses':>10}{'errors':>8}"
                  f"{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}"]
        for row in self.apis:
            lines.append(f"  {row['api_name'] or '(unknown)':<24}{row['versions']:>8}{row['requests']:>10,}"
                         f"{row['responses']:>10,}{row['errors']:>8,}" + "".join(
                             f"{_ms(row[k]):>9}" for k in ("p50", "p90", "p99", "max")))
        lines += ["", "per client", f"  {'client':<28}{'client id':<24}{'sent':>14}{'received':>14}"]
        for row in self.clients:
            lines.append(f"  {row['client']:<28}{(row['client_id'] or '')[:23]:<24}"
                         f"{row['sent']:>14,}{row['received']:>14,}")
        lines += ["", "problems"] + ([f"  {row['kind']:<26}{row['count']:>8,}  e.g. {row['example']}"
                                      for row in self.problems] or ["  none"])
        lines += ["", "authentication (connections per SASL mechanism and user)"]
        if self.authentications:
            lines.append(f"  {'mechanism':<16}{'user':<24}{'authenticated':>14}{'failed':>8}{'incomplete':>12}")
            lines += [f"  {row['mechanism'] or '(unknown)':<16}{_name(row['user'], 23):<24}{row['authenticated']:>14,}"
                      f"{row['failed']:>8,}{row['incomplete']:>12,}" for row in self.authentications]
        else:
            lines.append("  none")
        lines += ["", "TLS (connections per server name and version offered)"]
        if self.tls:
            lines.append(f"  {'server name':<40}{'version':<10}{'connections':>12}")
            lines += [f"  {_name(row['server_name'], 39):<40}{row['version'] or '-':<10}{row['connections']:>12,}"
                      for row in self.tls]
        else:
            lines.append("  none")
        lines += ["", "transactions (per transactional id; duration in ms, first request to EndTxn answer)"]
        if self.transactions:
            lines.append(f"  {'transactional id':<32}{'begun':>8}{'committed':>11}{'aborted':>9}{'open':>6}"
                         f"{'mean':>10}{'max':>10}")
            lines += [f"  {_name(row['transactional_id'], 31):<32}{row['begun']:>8,}{row['committed']:>11,}"
                      f"{row['aborted']:>9,}{row['open']:>6,}{_ms(row['mean_ms']):>10}{_ms(row['max_ms']):>10}"
                      for row in self.transactions]
        else:
            lines.append("  none")
        lines += share_text(self.share_groups, self.share_records)
        lines += ["", "fetch limits (KIP-74)",
                  f"  responses over max(MaxBytes, first batch): {len(self.oversized_responses)}",
                  f"  partitions over max(PartitionMaxBytes, first batch): {len(self.oversized_partitions)}",
                  f"  partitions starved for {STARVED_AFTER}+ consecutive fetches with data waiting: "
                  f"{len(self.starved)}"]
        for row in self.oversized_responses[:5]:
            lines.append(f"    response {row['connection']} #{row['correlation_id']}: {row['bytes']:,} bytes, "
                         f"MaxBytes {_count(row['max_bytes'])}, first batch {row['first_batch']:,}")
        for row in self.oversized_partitions[:5]:
            lines.append(f"    partition {row['topic']}-{row['partition']} #{row['correlation_id']}: "
                         f"{row['records_bytes']:,} bytes, PartitionMaxBytes {row['partition_max_bytes']:,}")
        for row in self.starved[:5]:
            lines.append(f"    {row['topic']}-{row['partition']} on {row['connection']}: "
                         f"{row['longest']} fetches in a row")
        return "\n".join(lines)


SHARE_RECORDS_SHOWN = 10


def share_text(groups: list[dict], records: list[dict]) -> list[str]:
    """The share-group view's lines: per group, then the records that were redelivered, whose lock
    expired or that were archived (the first ``SHARE_RECORDS_SHOWN``)."""
    lines = ["", "share groups (KIP-932; records acquired and acknowledged per group)"]
    if not groups:
        return lines + ["  none"]
    lines.append(f"  {'group':<24}{'members':>8}{'records':>9}{'accepted':>9}{'released':>9}{'rejected':>9}"
                 f"{'redelivered':>12}{'lock exp.':>10}{'at limit':>9}{'held':>6}")
    lines += [f"  {_name(g['group'], 23):<24}{g['members']:>8,}{g['records']:>9,}{g['accepted']:>9,}"
              f"{g['released']:>9,}{g['rejected']:>9,}{g['redelivered']:>12,}{g['lock_expiries']:>10,}"
              f"{g['delivery_limit']:>9,}{g['acquired']:>6,}" for g in groups]
    notable = [r for r in records if r["redeliveries"] or r["lock_expiries"] or r["archived"]]
    for r in notable[:SHARE_RECORDS_SHOWN]:
        lines.append(f"    {_name(r['group'], 23)} {_name(r['topic'], 39)}-{r['partition']}@{r['offset']}: "
                     f"deliveries {r['deliveries']}, members {len(r['members'])}, lock expiries "
                     f"{r['lock_expiries']}, acknowledged {'/'.join(t or '?' for t in r['acknowledgements']) or '-'}"
                     + (f", archived ({r['archived']})" if r["archived"] else f", {r['state']}"))
    if len(notable) > SHARE_RECORDS_SHOWN:
        lines.append(f"    ... {len(notable) - SHARE_RECORDS_SHOWN:,} more redelivered, expired or archived records")
    return lines


def _name(value, width: int) -> str:
    return "(none)" if value is None else value[:width]


def _ms(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _count(value) -> str:
    return "-" if value is None else f"{value:,}"  # MaxBytes: not in Fetch v0-2


def rank_of(p: int, n: int) -> int:
    """The 1-based rank of the p-th percentile of n values (nearest rank: ceil(p * n / 100))."""
    return (p * n + 99) // 100


def versions_text(low, high) -> str:
    return "-" if low is None else (str(low) if low == high else f"{low}-{high}")


def _first(value) -> tuple:
    """A sort key that puts None first (as Spark's ascending order does)."""
    return (value is not None, value if value is not None else 0)


def _last(value) -> tuple:
    return (value is None, value if value is not None else "")


def ordered(report: Report) -> Report:
    """The report's lists in the one order both engines give."""
    report.apis.sort(key=lambda r: (-r["requests"], -r["responses"], _last(r["api_name"])))
    report.clients.sort(key=lambda r: (-r["received"], -r["sent"], _first(r["client"])))
    report.problems.sort(key=lambda r: (-r["count"], _first(r["kind"])))
    report.authentications.sort(key=lambda r: (_last(r["mechanism"]), _last(r["user"])))
    report.tls.sort(key=lambda r: (-r["connections"], _last(r["server_name"]), _last(r["version"])))
    report.oversized_responses.sort(key=lambda r: (_first(r["connection"]), _first(r["correlation_id"])))
    report.oversized_partitions.sort(key=lambda r: (_first(r["connection"]), _first(r["correlation_id"]),
                                                    _first(r["topic"]), _first(r.get("topic_id")),
                                                    _first(r["partition"]), _first(r["records_bytes"]),
                                                    _first(r["partition_max_bytes"])))
    for row in report.oversized_partitions:
        row.pop("topic_id", None)  # a tie-breaker only
    report.transactions.sort(key=lambda r: r["transactional_id"])
    report.starved.sort(key=lambda r: (-r["longest"], _first(r["connection"]), _first(r["topic"]),
                                       _first(r["partition"])))
    return report


def local_rows(out_dir: str) -> int | None:
    """Rows of the tables the report reads, from the Parquet footers; None for tables behind a URI
    (other than ``file://``)."""
    from .report_arrow import part_files
    from ..tables.table_sets import REPORTED

    path = str(out_dir)
    if "://" in path:
        if not path.startswith("file://"):
            return None
        path = path[len("file://"):]
    return sum(rows for name in (*REPORTED, "records") if os.path.isdir(os.path.join(path, name))
               for _, rows in part_files(os.path.join(path, name)))


def engine_for(out_dir: str, engine: str = "auto", max_rows: int = ARROW_MAX_ROWS) -> str:
    """``arrow`` or ``spark``: ``auto`` takes Arrow for local tables of up to ``max_rows`` rows."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: one of {', '.join(ENGINES)}")
    if engine != "auto":
        return engine
    rows = local_rows(out_dir)
    return "arrow" if rows is not None and rows <= max_rows else "spark"


def build_arrow(out_dir: str, starved_after: int = STARVED_AFTER, delivery_limit: int | None = None) -> Report:
    """The report of the tables in ``out_dir`` (a local folder), computed with pyarrow on this process;
    ``delivery_limit``: the share groups' delivery count limit (``shares.DEFAULT_DELIVERY_LIMIT``)."""
    from .report_arrow import compute

    path = str(out_dir)
    if path.startswith("file://"):
        path = path[len("file://"):]
    from .shares import DEFAULT_DELIVERY_LIMIT

    return ordered(compute(path.rstrip("/") or "/", starved_after,
                           DEFAULT_DELIVERY_LIMIT if delivery_limit is None else delivery_limit))

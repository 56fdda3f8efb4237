"""The charts' figures, aggregated before they are plotted, defined once for both engines.

A chart never gets one point per request: rows are counted into at most ``MAX_BUCKETS`` time buckets
(of a round width: ``bucket_width``) and by a few keys (``Tally``), and the series drawn are the
``TOP_SERIES`` largest (the rest added up as "other"), so the page's size depends on the capture's
time span and its APIs, topics and groups, not on its number of requests. An engine runs the tallies
(``Tally``: a table's rows, filtered, grouped by time bucket and key columns, counted, summed or their
largest value taken) and the two figures that need more than a tally, the per-version latency
percentiles and the fetch responses' fill of their limits; ``shape`` makes the ``ChartData`` the page
draws from the engine's rows, the same for either engine.

Definitions:

- requests per second: requests (frames with direction request) per API in a bucket, over its width;
- bytes in and out per topic: record bytes of Produce requests (in to the brokers) and of answered
  Fetch partitions (out of them);
- latency percentiles: nearest rank (``report.rank_of``) per API and version, over responses;
- fetch limits (KIP-74): each answered fetch response's record bytes against its MaxBytes, and each
  partition's against its PartitionMaxBytes, in ``FILL_BINS`` bins of the limit, past the limit in one
  more; a response (or partition) is limit-bound when one more batch of its mean batch size would not
  have fitted (bytes + bytes / batches > limit): the broker stopped at the limit rather than for lack of
  data. Past the limit is allowed for the first batch alone (the report's fetch-limits section names
  the responses that break the rule);
- consumer lag: per group and partition, in a bucket where the group committed an offset, the highest
  high watermark a Fetch response gave for the partition up to then, less the highest offset committed
  in the bucket;
- timeline: group membership (JoinGroup, SyncGroup, LeaveGroup, ConsumerGroupHeartbeat) and transaction
  (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) requests per bucket;
- errors: responses per API and error code (a response with several codes counts once per code).
"""
from __future__ import annotations

from dataclasses import dataclass, field

MAX_BUCKETS = 240
TOP_SERIES = 12
FILL_BINS = 20
OTHER = "(other)"
UNNAMED = "(none)"
_MS = 1_000
_S = 1_000_000
# Round bucket widths in microseconds, from a millisecond to a day; past a day, whole days.
WIDTHS = tuple(n * unit for unit, steps in ((_MS, (1, 2, 5, 10, 20, 50, 100, 200, 500)),
                                             (_S, (1, 2, 5, 10, 15, 30)), (60 * _S, (1, 2, 5, 10, 15, 30)),
                                             (3600 * _S, (1, 2, 3, 6, 12, 24)))
               for n in steps)
_DAY = 86_400 * _S

MEMBERSHIP_APIS = ("JoinGroup", "SyncGroup", "LeaveGroup", "ConsumerGroupHeartbeat")
TRANSACTION_APIS = ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn")


def bucket_width(first_us: int, last_us: int, max_buckets: int = MAX_BUCKETS) -> int:
    """The smallest round width (microseconds) that cuts first..last into at most ``max_buckets``."""
    span = max(last_us - first_us, 0) + 1
    for width in WIDTHS:
        if (last_us // width) - (first_us // width) < max_buckets:
            return width
    return _DAY * -(-span // (_DAY * (max_buckets - 1)))


@dataclass(frozen=True)
class Tally:
    """Rows of ``table`` that pass ``conditions`` (conditions all true: ``("eq", column, value)``,
    ``("in", column, values)``, ``("valid", column)``), grouped by time bucket (when ``timed``) and the
    ``keys`` columns; per group the row count (``how`` "count"), or the sum or largest value of
    ``value``. An engine gives rows ``(bucket or None, *keys, figure)``."""
    table: str
    keys: tuple[str, ...]
    how: str = "count"
    value: str | None = None
    where: tuple[tuple, ...] = ()
    timed: bool = True

    @property
    def conditions(self) -> tuple[tuple, ...]:
        """``where``, and a time for a timed tally (a row without one is in no bucket)."""
        return (*self.where, ("valid", "ts")) if self.timed else self.where


# The tables whose times the buckets span (the frames first; commits are frames' bodies).
SPANNED = ("frames", "fetches", "produces")
_REQUEST = ("eq", "direction", "request")
_ANSWERED = ("valid", "response_size")
TALLIES: dict[str, Tally] = {
    "requests": Tally("frames", ("api_name",), where=(_REQUEST,)),
    "bytes_in": Tally("produces", ("topic",), "sum", "records_bytes"),
    "bytes_out": Tally("fetches", ("topic",), "sum", "records_bytes", where=(_ANSWERED,)),
    "timeline": Tally("frames", ("api_name",), where=(_REQUEST, ("in", "api_name",
                                                                  MEMBERSHIP_APIS + TRANSACTION_APIS))),
    "high_watermarks": Tally("fetches", ("topic", "partition"), "max", "high_watermark", where=(_ANSWERED,)),
    # derived tables each engine makes: one row per committed partition, and per error code of a response
    "commits": Tally("commits", ("group_id", "topic", "partition"), "max", "committed_offset"),
    "errors": Tally("response_errors", ("api_name", "error_code"), timed=False),
}


@dataclass
class ChartData:
    """What the page draws. Times are microseconds since the epoch; ``buckets`` the start of each bucket."""
    bucket_us: int = _S
    buckets: list[int] = field(default_factory=list)
    requests: dict[str, list[int]] = field(default_factory=dict)  # per API: requests per bucket
    bytes_in: dict[str, list[int]] = field(default_factory=dict)  # per topic: bytes per bucket
    bytes_out: dict[str, list[int]] = field(default_factory=dict)
    latency: list[dict] = field(default_factory=list)  # api_name, api_version, responses, p50, p90, p99, max
    fill: dict[str, dict] = field(default_factory=dict)  # "responses"/"partitions": bins, bound, over, total
    lag: dict[str, list[int | None]] = field(default_factory=dict)  # "group topic-partition": lag per bucket
    timeline: dict[str, list[int]] = field(default_factory=dict)  # per API: requests per bucket
    errors: list[dict] = field(default_factory=list)  # api_name, error_code, error, responses

    @property
    def empty(self) -> bool:
        return not self.buckets


def fill_figures(rows) -> dict:
    """A fill chart's figures from rows (bin, limit-bound, count) of one engine's fill tally: bin
    ``bytes * FILL_BINS // limit`` (at most FILL_BINS - 1) within the limit, FILL_BINS past it."""
    bins = [0] * (FILL_BINS + 1)
    bound = 0
    for bin_, is_bound, count in rows:
        bins[bin_] += count
        bound += count if is_bound else 0
    return dict(bins=bins, bound=bound, over=bins[FILL_BINS], total=sum(bins))


def _series(rows, count: int, first: int, top: int = TOP_SERIES) -> dict[str, list[int]]:
    """Per key, its figure per bucket (zero where absent), the ``top`` largest keys by total and the rest
    as ``OTHER``."""
    per_key: dict = {}
    for bucket, key, figure in rows:
        values = per_key.setdefault(key, [0] * count)
        values[bucket - first] += figure or 0
    ranked = sorted(per_key.items(), key=lambda item: (-sum(item[1]), _label(item[0])))
    series = {_label(key): values for key, values in ranked[:top]}
    if len(ranked) > top:
        series[OTHER] = [sum(column) for column in zip(*(values for _, values in ranked[top:]))]
    return series


def _label(value) -> str:
    return UNNAMED if value is None else str(value)


def _lag(high_watermarks, commits, count: int, first: int) -> dict[str, list[int | None]]:
    """Per group and partition, its lag in the buckets where it committed (``None`` elsewhere): the highest
    watermark seen up to the bucket less the offset committed; the ``TOP_SERIES`` largest lags."""
    committed = {(topic, partition) for _, _, topic, partition, _ in commits}
    watermarks: dict = {}
    for bucket, topic, partition, high in high_watermarks:
        if high is not None and (topic, partition) in committed:
            watermarks.setdefault((topic, partition), {})[bucket] = high
    highest: dict = {}  # (topic, partition) -> the running maximum per bucket, in bucket order
    for key, per_bucket in watermarks.items():
        running: list[int | None] = [None] * count
        seen = None
        for i in range(count):
            high = per_bucket.get(first + i)
            seen = high if seen is None or (high is not None and high > seen) else seen
            running[i] = seen
        highest[key] = running
    lags: dict = {}
    for bucket, group, topic, partition, committed in commits:
        high = highest.get((topic, partition), [None] * count)[bucket - first]
        if high is None or committed is None or committed < 0:
            continue
        values = lags.setdefault((group, topic, partition), [None] * count)
        values[bucket - first] = max(high - committed, 0)
    ranked = sorted(lags.items(), key=lambda item: (-max(v for v in item[1] if v is not None),
                                                   tuple(_label(k) for k in item[0])))
    return {f"{_label(group)} {_label(topic)}-{partition}": values
            for (group, topic, partition), values in ranked[:TOP_SERIES]}


def shape(first_us: int | None, width: int, tallies: dict[str, list[tuple]], latency: list[dict],
          fills: dict[str, list[tuple]]) -> ChartData:
    """The ChartData from one engine's figures: the first time of the ``SPANNED`` tables and the buckets'
    width (``bucket_width`` of their span; ``first_us`` None: no frames), the rows of each of
    ``TALLIES`` (buckets as numbers since the epoch, in widths), the latency rows and the fill rows."""
    from ....error_codes import ErrorCode

    data = ChartData(bucket_us=width)
    if first_us is None:
        return data
    # widened to a row outside the span (none: the commits are frames' bodies)
    timed = [row[0] for name, tally in TALLIES.items() if tally.timed for row in tallies[name]]
    first = min([first_us // width] + timed)
    last = max([first] + timed)
    count = last - first + 1
    data.buckets = [(first + i) * width for i in range(count)]
    data.requests = _series(tallies["requests"], count, first, top=len(tallies["requests"]))
    data.bytes_in = _series(tallies["bytes_in"], count, first)
    data.bytes_out = _series(tallies["bytes_out"], count, first)
    data.timeline = _series(tallies["timeline"], count, first, top=len(tallies["timeline"]))
    data.lag = _lag(tallies["high_watermarks"], tallies["commits"], count, first)
    data.latency = sorted(latency, key=lambda row: (_label(row["api_name"]), _first(row["api_version"])))
    data.fill = {name: fill_figures(rows) for name, rows in sorted(fills.items())}
    names = {code.value: code.name for code in ErrorCode}
    data.errors = sorted(
        (dict(api_name=api, error_code=code, error=names.get(code, "(unknown code)"), responses=count)
         for _, api, code, count in tallies["errors"]),
        key=lambda row: (-row["responses"], _label(row["api_name"]), row["error_code"]))
    return data


def _first(value) -> tuple:
    return (value is not None, value if value is not None else 0)

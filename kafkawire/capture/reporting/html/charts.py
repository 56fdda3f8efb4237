"""The page's charts: plotly figures made from ``series.ChartData``, one function per chart. A chart whose
data the capture does not show is left out (``figures`` gives ``None`` and the page says why)."""
from __future__ import annotations

from datetime import datetime, timezone

import plotly.graph_objects as go

from ..report import PERCENTILES
from .series import FILL_BINS, ChartData, MEMBERSHIP_APIS

_LAYOUT = dict(template="plotly_white", height=360, margin=dict(l=60, r=20, t=50, b=50),
               legend=dict(font=dict(size=10)))


def _times(data: ChartData) -> list[datetime]:
    return [datetime.fromtimestamp(us / 1e6, tz=timezone.utc) for us in data.buckets]


def _span(data: ChartData) -> dict:
    """The x axis of a chart over time: the capture's whole span, the same on every such chart."""
    return dict(range=[_times(data)[0], datetime.fromtimestamp((data.buckets[-1] + data.bucket_us) / 1e6,
                                                                 tz=timezone.utc)])


def _per_second(values: list[int], data: ChartData) -> list[float]:
    return [value * 1e6 / data.bucket_us for value in values]


def requests_per_second(data: ChartData) -> go.Figure | None:
    if not data.requests:
        return None
    figure = go.Figure([go.Scatter(x=_times(data), y=_per_second(values, data), name=api, mode="lines",
                                   stackgroup="requests") for api, values in data.requests.items()])
    return figure.update_layout(title="Requests per second per API", yaxis_title="requests/s", xaxis=_span(data),
                                **_LAYOUT)


def latency_percentiles(data: ChartData) -> go.Figure | None:
    if not data.latency:
        return None
    labels = [f"{row['api_name'] or '(unknown)'} v{'?' if row['api_version'] is None else row['api_version']}"
              for row in data.latency]
    figure = go.Figure([go.Bar(x=labels, y=[row[f"p{p}"] for row in data.latency], name=f"p{p}")
                        for p in PERCENTILES])
    figure.add_trace(go.Scatter(x=labels, y=[row["max"] for row in data.latency], name="max", mode="markers",
                                customdata=[row["responses"] for row in data.latency],
                                hovertemplate="%{x}: max %{y:.2f} ms of %{customdata} responses"))
    return figure.update_layout(title="Latency percentiles per API and version (ms, request to response)",
                                barmode="group", yaxis=dict(type="log", title="ms"), **_LAYOUT)


def topic_bytes(data: ChartData) -> go.Figure | None:
    if not data.bytes_in and not data.bytes_out:
        return None
    times = _times(data)
    figure = go.Figure([go.Scatter(x=times, y=_per_second(values, data), name=f"in: {topic}", mode="lines",
                                   stackgroup="in") for topic, values in data.bytes_in.items()]
                       + [go.Scatter(x=times, y=[-v for v in _per_second(values, data)], name=f"out: {topic}",
                                     mode="lines", stackgroup="out") for topic, values in data.bytes_out.items()])
    return figure.update_layout(title="Record bytes per second per topic: in (produced, up) and out (fetched, down)",
                                yaxis_title="bytes/s", xaxis=_span(data), **_LAYOUT)


def _bin_labels() -> list[str]:
    step = 100 // FILL_BINS
    return [f"{i * step}-{(i + 1) * step}%" for i in range(FILL_BINS)] + ["over the limit"]


def fetch_limits(data: ChartData) -> go.Figure | None:
    if not any(figures["total"] for figures in data.fill.values()):
        return None
    limits = {"responses": "responses against MaxBytes", "partitions": "partitions against PartitionMaxBytes"}
    traces = []
    for name, figures in data.fill.items():
        if figures["total"]:
            bound = 100 * figures["bound"] / figures["total"]
            traces.append(go.Bar(x=_bin_labels(), y=figures["bins"],
                                 name=f"{limits[name]} ({figures['total']:,}; limit-bound {bound:.1f}%, "
                                      f"over {figures['over']:,})"))
    figure = go.Figure(traces)
    return figure.update_layout(
        title="Fetch responses' record bytes against their limits (KIP-74: only a first batch may go over)",
        barmode="group", xaxis_title="share of the limit", yaxis=dict(type="log", title="fetches"),
        **{**_LAYOUT, "legend": dict(orientation="h", yanchor="bottom", y=1.0, font=dict(size=10))})


def consumer_lag(data: ChartData) -> go.Figure | None:
    if not data.lag:
        return None
    figure = go.Figure([go.Scatter(x=_times(data), y=values, name=name, mode="lines+markers", connectgaps=True)
                        for name, values in data.lag.items()])
    return figure.update_layout(title="Consumer lag per group and partition (high watermark less committed offset)",
                                yaxis_title="records", xaxis=_span(data), **_LAYOUT)


def timeline(data: ChartData) -> go.Figure | None:
    if not data.timeline:
        return None
    times = _times(data)
    figure = go.Figure()
    for api, values in sorted(data.timeline.items()):
        points = [(t, v) for t, v in zip(times, values) if v]
        kind = "rebalance" if api in MEMBERSHIP_APIS else "transaction"
        figure.add_trace(go.Scatter(
            x=[t for t, _ in points], y=[f"{api} ({kind})"] * len(points), mode="markers", name=api,
            customdata=[v for _, v in points], hovertemplate="%{x}: %{customdata} requests",
            marker=dict(size=[min(6 + v ** 0.5, 30) for _, v in points])))
    return figure.update_layout(title="Rebalances and transactions: group membership and transaction requests",
                                showlegend=False, xaxis=_span(data), **_LAYOUT)


def errors_by_code(data: ChartData) -> go.Figure | None:
    if not data.errors:
        return None
    rows = data.errors[:40]
    labels = [f"{row['api_name'] or '(unknown)'}: {row['error']} ({row['error_code']})" for row in rows]
    figure = go.Figure(go.Bar(x=[row["responses"] for row in rows][::-1], y=labels[::-1], orientation="h"))
    return figure.update_layout(title="Error codes in responses, per API", xaxis_title="responses",
                                **{**_LAYOUT, "height": max(300, 60 + 22 * len(rows)),
                                   "margin": dict(l=320, r=20, t=50, b=50)})


# (anchor, heading, the chart, what the page says when the capture does not show it)
CHARTS = (
    ("requests", "Requests", requests_per_second, "no requests"),
    ("latency", "Latency", latency_percentiles, "no answered requests"),
    ("topics", "Bytes per topic", topic_bytes, "no produced or fetched records"),
    ("fetch-limits", "Fetch limits (KIP-74)", fetch_limits, "no answered Fetch with MaxBytes (Fetch v3 and later)"),
    ("lag", "Consumer lag", consumer_lag,
     "no offset commit of a partition whose high watermark a Fetch response gave"),
    ("timeline", "Rebalances and transactions", timeline, "no group membership or transaction requests"),
    ("errors", "Errors", errors_by_code, "no error codes in responses"),
)

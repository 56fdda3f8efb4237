"""The HTML page: the charts (``charts``) with plotly's JavaScript inlined once, so the page needs no
network, each beside the text report's table that goes with it, then the report's other tables."""
from __future__ import annotations

from html import escape

from ..report import PERCENTILES, STARVED_AFTER, Report
from .series import ChartData

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
section { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 1.5em; margin-bottom: 2em; }
section.tables { display: block; }
table { border-collapse: collapse; font-size: 12px; margin-bottom: 1em; }
th, td { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.tablebox { max-height: 380px; overflow: auto; }
.missing { color: #777; font-style: italic; }
"""


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return escape(str(value))


def table(title: str, rows: list[dict], columns: list[tuple[str, str]], limit: int = 200) -> str:
    """An HTML table of ``rows``' ``columns`` (key, heading), the first ``limit`` rows."""
    if not rows:
        return f"<h4>{escape(title)}</h4><p class='missing'>none</p>"
    head = "".join(f"<th>{escape(heading)}</th>" for _, heading in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(row.get(key))}</td>" for key, _ in columns) + "</tr>"
                   for row in rows[:limit])
    more = f"<p class='missing'>... {len(rows) - limit:,} more</p>" if len(rows) > limit else ""
    return f"<h4>{escape(title)}</h4><div class='tablebox'><table><tr>{head}</tr>{body}</table></div>{more}"


def _tables(report: Report, data: ChartData) -> dict[str, str]:
    """The report's tables (and the latency and lag charts' figures), by the chart they go beside (and
    "rest" for the others)."""
    apis = table("per API (latency in ms)", report.apis, [("api_name", "API"), ("versions", "versions"),
                 ("requests", "requests"), ("responses", "responses"), ("errors", "errors"),
                 *[(f"p{p}", f"p{p}") for p in PERCENTILES], ("max", "max")])
    clients = table("per client (bytes)", report.clients, [("client", "client"), ("client_id", "client id"),
                                                            ("sent", "sent"), ("received", "received")])
    limits = "".join([
        table("responses over max(MaxBytes, first batch)", report.oversized_responses,
              [("connection", "connection"), ("correlation_id", "correlation id"), ("bytes", "bytes"),
               ("max_bytes", "MaxBytes"), ("first_batch", "first batch")]),
        table("partitions over max(PartitionMaxBytes, first batch)", report.oversized_partitions,
              [("topic", "topic"), ("partition", "partition"), ("correlation_id", "correlation id"),
               ("records_bytes", "bytes"), ("partition_max_bytes", "PartitionMaxBytes")]),
        table(f"partitions starved for {STARVED_AFTER}+ fetches in a row with data waiting", report.starved,
              [("topic", "topic"), ("partition", "partition"), ("connection", "connection"),
               ("longest", "fetches in a row")])])
    transactions = table("transactions (duration in ms)", report.transactions, [
        ("transactional_id", "transactional id"), ("begun", "begun"), ("committed", "committed"),
        ("aborted", "aborted"), ("open", "open"), ("mean_ms", "mean"), ("max_ms", "max")])
    problems = table("problems", report.problems, [("kind", "kind"), ("count", "count"), ("example", "e.g.")])
    rest = "".join([
        table("authentication (connections per SASL mechanism and user)", report.authentications, [
            ("mechanism", "mechanism"), ("user", "user"), ("authenticated", "authenticated"),
            ("failed", "failed"), ("incomplete", "incomplete")]),
        table("TLS (connections per server name and version offered)", report.tls, [
            ("server_name", "server name"), ("version", "version"), ("connections", "connections")]),
        table("share groups", report.share_groups, [
            ("group", "group"), ("members", "members"), ("records", "records"), ("accepted", "accepted"),
            ("released", "released"), ("rejected", "rejected"), ("redelivered", "redelivered"),
            ("lock_expiries", "lock expiries"), ("delivery_limit", "at limit"), ("acquired", "held")])])
    latency = table("per API and version (latency in ms)", data.latency, [
        ("api_name", "API"), ("api_version", "version"), ("responses", "responses"),
        *[(f"p{p}", f"p{p}") for p in PERCENTILES], ("max", "max")])
    lag = table("largest lag per group and partition (records)", [
        dict(series=name, lag=max(v for v in values if v is not None)) for name, values in data.lag.items()],
        [("series", "group topic-partition"), ("lag", "lag")])
    return {"requests": apis, "latency": latency, "topics": clients, "fetch-limits": limits, "lag": lag,
            "timeline": transactions, "errors": problems, "rest": rest}


def render(report: Report, data: ChartData, title: str) -> str:
    """The page of ``report`` and its charts' ``data``."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    from .charts import CHARTS

    tables = _tables(report, data)
    totals = report.totals
    sections = []
    for anchor, heading, chart, missing in CHARTS:
        figure = chart(data)
        drawn = (f"<div class='missing'>The capture shows {escape(missing)}.</div>" if figure is None else
                 pio.to_html(figure, full_html=False, include_plotlyjs=False, div_id=f"chart-{anchor}",
                             config={"displaylogo": False, "responsive": True}))
        sections.append(f"<h2 id='{anchor}'>{escape(heading)}</h2><section data-chart='{anchor}' "
                        f"data-drawn='{'no' if figure is None else 'yes'}'><div>{drawn}</div>"
                        f"<div>{tables[anchor]}</div></section>")
    summary = ", ".join(f"{escape(name)} {value:,}" for name, value in totals.items())
    width = f"{data.bucket_us / 1e6:g} s" if data.bucket_us >= 1_000_000 else f"{data.bucket_us / 1e3:g} ms"
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{_STYLE}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            f"<h1>{escape(title)}</h1><p>{summary}. Charts in buckets of {width}.</p>"
            + "".join(sections)
            + f"<h2 id='other'>Other tables</h2><section class='tables'>{tables['rest']}</section></body></html>")

"""The HTML report's chart figures on Spark (``capture_spark.report_html_spark``) against the Arrow
engine's (``series_arrow``): the same ChartData from made-up tables with many groups, ties and nulls
(``random_tables``), and from a large table set with offset commits of many groups (``large_tables``)."""
from __future__ import annotations

from support.capture_tables import large_tables, random_tables

from kafkawire.capture.reporting.html.series_arrow import compute as compute_arrow
from kafkawire.capture_spark.report_html_spark import compute as compute_spark


def test_spark_and_arrow_give_the_same_charts(spark, tmp_path):
    for tables in (random_tables(tmp_path / "made-up", seed=13, rows=1200),
                   large_tables(tmp_path / "large", requests=5_000)):
        by_arrow = compute_arrow(str(tables))
        assert compute_spark(spark, str(tables)) == by_arrow, tables
        assert by_arrow.requests and by_arrow.latency and by_arrow.errors and by_arrow.fill["responses"]["total"]
    assert by_arrow.lag and by_arrow.timeline and by_arrow.bytes_in  # the large set's commits, groups, topics

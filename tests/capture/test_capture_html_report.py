"""`kafkawire report DIR --html FILE` (the Arrow engine, no Spark): the page opened in headless Chromium
with the network blocked (every chart drawn by plotly's script, no console message), and its size bounded
whatever the number of requests; then the chart figures' definitions (``series``) on known rows.

The table set is three real captures decoded in process, merged: the benchmark's producers and
consumers (Produce, Fetch, OffsetCommit: bytes per topic and consumer lag), the transactions capture
(InitProducerId, EndTxn, a fenced producer's errors) and the synthetic capture's KIP-74 fetches."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import capture_transactions
from support.capture_in_process import decode_in_process
from support.capture_synthetic import build_synthetic
from support.capture_tables import large_tables
from support.paths import REPO

from kafkawire.capture.reporting import report
from kafkawire.capture.reporting.html import series
from kafkawire.capture.reporting.html.charts import CHARTS
from kafkawire.capture.reporting.html.page import render
from kafkawire.capture.reporting.html.series_arrow import compute

sys.path.insert(0, str(REPO))
from bench.capture_fixture import CaptureSpec, ensure_capture  # noqa: E402

CHROMIUM = shutil.which("chromium")


def _merge(sets: list[Path], out: Path) -> Path:
    """One table set of several: each table's part files side by side, renamed apart."""
    for number, tables in enumerate(sets):
        for part in tables.rglob("*.parquet"):
            folder = out / part.parent.relative_to(tables)
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy(part, folder / f"part-{number:02d}{part.name[len('part'):]}")
    return out


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("html")
    facts, _ = ensure_capture(CaptureSpec(size_mb=3, connections=2), work / "fixture")
    sets = [decode_in_process(Path(facts.path), work / "fixture-tables", records=False),
            decode_in_process(capture_transactions.build(work / "transactions.pcapng"), work / "txn-tables"),
            decode_in_process(build_synthetic(work).path, work / "synthetic-tables", records=False)]
    return _merge(sets, work / "tables")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_page_draws_every_chart_offline(tables, tmp_path):
    page = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "kafkawire", "report", str(tables), "--engine", "arrow",
                           "--html", str(page)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == report.build_arrow(str(tables)).text() + "\n"  # the text report as without --html
    html = page.read_text()
    # nothing to fetch: no script, style, image or frame from elsewhere
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)=["']?(https?:)?//""", html)

    # One launch: the network off (every host unresolvable, a proxy that refuses), the DOM once the
    # scripts have run, and the console's messages on stderr.
    shown = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path}/profile",
         "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr",
         "--virtual-time-budget=15000", "--window-size=1400,5000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert re.findall(r"CONSOLE.*", shown.stderr) == []
    dom = shown.stdout
    for anchor, *_ in CHARTS:
        section = re.search(rf"<section data-chart=\"{anchor}\" data-drawn=\"(\w+)\">(.*?)</section>", dom, re.S)
        assert section and section.group(1) == "yes", anchor
        drawn = section.group(2)
        # plotly drew it: its SVG, and in it traces with painted shapes (bar or line paths, or markers)
        assert "class=\"main-svg\"" in drawn, anchor
        traces = re.findall(r"<g class=\"trace[^\"]*\"", drawn)
        shapes = re.findall(r"<path class=\"(?:js-line|js-fill|point)[^\"]*\" [^>]*d=\"M|<g class=\"point\"><path d=\"M", drawn)
        assert traces and shapes, anchor


def test_the_page_size_does_not_grow_with_the_requests(tmp_path):
    """Ten times the requests over the same hour, topics and groups: the same page size within a few
    per cent (the figures' digits), and the page's data (all but plotly's script) well under a megabyte."""
    from plotly.offline import get_plotlyjs

    sizes = []
    for requests in (10_000, 100_000):
        tables = large_tables(tmp_path / str(requests), requests)
        data = compute(str(tables))
        assert len(data.buckets) <= series.MAX_BUCKETS
        assert len(data.bytes_in) == series.TOP_SERIES + 1 and len(data.lag) == series.TOP_SERIES
        sizes.append(len(render(report.build_arrow(str(tables)), data, "large").encode()) - len(get_plotlyjs()))
    small, large = sizes
    assert large < 1_000_000
    assert abs(large - small) < 0.1 * small, sizes


# ---- the figures' definitions -------------------------------------------------------------------------

@pytest.mark.parametrize("first, last, width", [
    (0, 0, 1_000), (0, 239_999, 1_000), (0, 240_000, 2_000), (0, 3_599_999_999, 15_000_000), (0, 3_600_000_000, 30_000_000),
    (1_000_500, 1_239_900, 1_000),  # 240 buckets of a millisecond, not counting from zero
    (0, 400 * 86_400_000_000, 2 * 86_400_000_000)])
def test_bucket_width_is_the_smallest_round_width_within_the_limit(first, last, width):
    assert series.bucket_width(first, last) == width
    assert last // width - first // width < series.MAX_BUCKETS


def test_fill_bins_and_the_limit_bound_responses():
    # (bytes, limit, batches): empty; a quarter full; bound (one more mean batch would not fit); over
    rows = np.array([(0, 1000, 0), (250, 1000, 1), (960, 1000, 4), (1500, 1000, 1), (10, 0, 1)], dtype=np.int64)
    from kafkawire.capture.reporting.html.series_arrow import _fill

    figures = series.fill_figures(_fill(rows))
    assert figures["total"] == 4  # no limit (MaxBytes before Fetch v3): not counted
    assert figures["bins"][0] == 1 and figures["bins"][5] == 1 and figures["bins"][19] == 1
    assert figures["over"] == figures["bins"][series.FILL_BINS] == 1
    assert figures["bound"] == 2  # 960 + 240 > 1000, and the one over


def test_lag_is_the_highest_watermark_so_far_less_the_commit():
    high_watermarks = [(10, "t", 0, 100), (12, "t", 0, 90), (11, "u", 1, 5)]
    commits = [(10, "g", "t", 0, 40), (13, "g", "t", 0, 95), (11, "g", "u", 1, 9), (12, "h", "v", 0, 1)]
    lag = series._lag(high_watermarks, commits, 4, 10)
    # t-0: 100 - 40 at 10, then max(100, 90) - 95 at 13; u-1 committed past the watermark: no lag, not negative;
    # v-0: no watermark seen, no lag drawn
    assert lag == {"g t-0": [60, None, None, 5], "g u-1": [None, 0, None, None]}


def test_a_capture_without_frames_draws_nothing(tmp_path):
    from support.capture_tables import random_tables

    tables = random_tables(tmp_path / "t", seed=1, rows=0)
    data = compute(str(tables))
    assert data.empty and data.requests == {}
    assert "The capture shows no requests" in render(report.build_arrow(str(tables)), data, "empty")

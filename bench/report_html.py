"""`kafkawire report --html` against the text report alone (issue 36), on the Arrow engine.

The made-up table sets of bench/report.py (half frames over an hour, a quarter fetches; sizes in rows of
all tables together) are reported twice each, `kafkawire report DIR --engine arrow` and the same with
`--html FILE`. Printed: the wall and CPU time (user and system, of the command's process: steadier than the
wall on a shared machine) of each, the page's size, and the page's size less plotly's inlined
script (the figures and tables: bounded whatever the number of rows).

    .venv/bin/python bench/report_html.py                   # 1e5, 1e6 and 5e6 rows
    .venv/bin/python bench/report_html.py --rows 100000 --keep /tmp/report-bench
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import git_state  # noqa: E402
from bench.report import write_tables  # noqa: E402


def run(tables: Path, *options: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of `kafkawire report TABLES --engine arrow OPTIONS`."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kafkawire", "report", str(tables), "--engine", "arrow", *options],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"report {' '.join(options)} on {tables} exited with {done.returncode}: {done.stderr[-2000:]}")
    wall, now = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime


def main() -> int:
    from plotly.offline import get_plotlyjs

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, action="append", help="table set sizes (repeatable)")
    parser.add_argument("--keep", help="write the table sets here and keep them")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="report-html-bench-"))
    script = len(get_plotlyjs().encode())
    print(f"# kafkawire report --html against the text report ({git_state()}, load {os.getloadavg()[0]:.1f})\n")
    print(f"{'rows':>12} {'text s':>8} {'CPU s':>7} {'--html s':>9} {'CPU s':>7} {'html/text CPU':>14} "
          f"{'page bytes':>12} {'less script':>12}")
    for rows in args.rows or [100_000, 1_000_000, 5_000_000]:
        tables = work / f"rows-{rows}"
        if not tables.exists():
            write_tables(tables, rows)
        page = work / f"rows-{rows}.html"
        (text_wall, text_cpu), (html_wall, html_cpu) = run(tables), run(tables, "--html", str(page))
        size = page.stat().st_size
        print(f"{rows:>12,} {text_wall:>8.2f} {text_cpu:>7.2f} {html_wall:>9.2f} {html_cpu:>7.2f} "
              f"{html_cpu / text_cpu:>13.1f}x {size:>12,} {size - script:>12,}")
    if not args.keep:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

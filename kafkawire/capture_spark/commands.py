"""``decode`` and ``report``, the capture commands: their arguments and what they run.

The ``kafkawire`` command line and the spark-submit entry (``submit``) both take them from here, so
the two accept the same arguments. A mistake in what the user gave (a missing capture, an ``--out``
that would mix tables) is one line on stderr and exit status 2, found before Spark starts; a failure
while running is exit status 1. Only argparse is imported until a command runs.
"""
from __future__ import annotations

import os
import sys

from ..errors import KafkaWireError

__all__ = ["add_decode_command", "add_report_command", "run", "decode", "report", "USAGE_ERROR"]

USAGE_ERROR = 2


def add_decode_command(commands) -> None:
    """The ``decode`` subcommand, on ``commands`` (what ``ArgumentParser.add_subparsers`` returns)."""
    decode = commands.add_parser("decode", help="decode pcap/pcapng captures into Parquet tables with Spark")
    decode.add_argument("captures", nargs="+", metavar="CAPTURE",
                        help="capture files (pcap, pcapng, gzip-compressed), folders or globs; local or URIs "
                             "(s3://, gs://, abfs://, hdfs://...)")
    decode.add_argument("--out", required=True,
                        help="directory (or URI) for the tables; refused if it holds the tables of an earlier "
                             "decode (see --overwrite) or is inside a table")
    decode.add_argument("--overwrite", action="store_true",
                        help="replace the tables already in --out, all of them (other files there stay)")
    decode.add_argument("--master", help="Spark master URL (default: local[*], or spark-submit's)")
    decode.add_argument("--fs-option", action="append", default=[], dest="fs_options", metavar="KEY=VALUE",
                        help="an option of the file system of --out and of captures given as URIs (repeatable), e.g. endpoint_override=host:9000, "
                             "scheme=http, region=eu-west-1; credentials come from the environment")
    decode.add_argument("--port", type=int, action="append", dest="ports", metavar="N",
                        help="a broker port (repeatable; default: detected per connection)")
    decode.add_argument("--records", action="store_true", help="also write one row per record (records table)")
    decode.add_argument("--keylog", metavar="FILE",
                        help="an NSS key log (SSLKEYLOGFILE of the clients or brokers, librdkafka's ssl.keylog.location): "
                             "TLS connections whose secrets it holds are decrypted (TLS 1.2 and 1.3, AES-GCM and "
                             "ChaCha20-Poly1305)")
    decode.add_argument("--split-mb", type=int, default=128, help="split large captures into pieces of this size")
    decode.add_argument("--partitions", type=int, help="tasks of the connection stage (default: from input size)")


def add_report_command(commands) -> None:
    """The ``report`` subcommand, on ``commands``."""
    from ..capture.reporting.report import ARROW_MAX_ROWS
    from ..capture.reporting.shares import DEFAULT_DELIVERY_LIMIT

    report = commands.add_parser(
        "report", help="summarise tables written by `kafkawire decode`",
        description=f"Summarise the tables of `kafkawire decode`. Local tables of up to {ARROW_MAX_ROWS:,} rows "
                    f"are read with pyarrow in this process; larger ones, and tables behind a URI, with Spark. "
                    f"Both give the same report.")
    report.add_argument("tables", metavar="DIR", help="the --out directory of `kafkawire decode`")
    report.add_argument("--engine", choices=("auto", "arrow", "spark"), default="auto",
                        help=f"auto (the default): pyarrow for local tables of up to {ARROW_MAX_ROWS:,} rows, "
                             f"Spark otherwise")
    report.add_argument("--master", help="Spark master URL, when Spark reads the tables (default: local[*])")
    report.add_argument("--json", action="store_true", help="print JSON instead of text")
    report.add_argument("--html", metavar="FILE",
                        help="also write the report as one self-contained HTML page of charts and tables to FILE "
                             "(it opens without network access)")
    report.add_argument("--share-delivery-limit", type=_positive, default=DEFAULT_DELIVERY_LIMIT, metavar="N",
                        help="the brokers' group.share.delivery.count.limit, which no frame carries: the share "
                             f"groups' records released at N deliveries are archived (default {DEFAULT_DELIVERY_LIMIT}, "
                             "Kafka's)")


def _positive(text: str) -> int:
    import argparse

    value = int(text) if text.strip().isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def run(args) -> int:
    """Runs ``args.command`` (``decode`` or ``report``) with the parsed arguments; the exit status."""
    return decode(args) if args.command == "decode" else report(args)


def _refuse(command: str, message) -> int:
    print(f"kafkawire {command}: {message}", file=sys.stderr)
    return USAGE_ERROR


def _check_captures(patterns: list[str]) -> None:
    """Raises FileNotFoundError or CaptureError unless every pattern names at least one capture; reads
    the head of each file only (the walk of the records comes later, while Spark starts)."""
    from ..capture.files.inputs import expand_inputs

    for pattern in patterns:
        if not expand_inputs([pattern]):
            what = "this folder holds" if _is_folder(pattern) else "the files that match it are"
            raise FileNotFoundError(f"{pattern}: no packet captures: {what} no pcap, pcapng or gzip-compressed "
                                    f"capture files")


def _is_folder(pattern: str) -> bool:
    from ..capture.files.remote_files import expand_remote, is_remote

    return expand_remote(pattern)[0] == "folder" if is_remote(pattern) else os.path.isdir(pattern)


def _key_log(path: str | None):
    """The key log of ``--keylog`` (read on the driver: it travels to the workers with the tasks)."""
    if path is None:
        return None
    from ..capture.tls.key_log import load_key_log
    return load_key_log(path)


def decode(args) -> int:
    """``kafkawire decode``: the captures into tables, on Spark; prints what it wrote."""
    from ..capture.files.reading import CaptureError
    from ..capture.files.remote_files import is_remote, with_fs_options
    from ..capture.tables.table_sets import BODIES, check_out, with_options
    from . import job
    from .background_plan import BackgroundPlan
    from .session import context, stop

    try:
        # the options go to every URI given (--out's and the captures'), and need one at least
        if "://" in args.out or not any(is_remote(capture) for capture in args.captures):
            args.out = with_options(args.out, args.fs_options)
        args.captures = with_fs_options(args.captures, args.fs_options)
        check_out(args.out, args.overwrite)
        _check_captures(args.captures)
        keys = _key_log(args.keylog)
    except (KafkaWireError, OSError, ValueError) as error:  # TableSetError, CaptureError; FileNotFoundError...
        return _refuse("decode", error)

    # The driver's walk of the captures (serial, longer from disk) runs in a child process while the JVM
    # starts, which takes a few seconds and leaves a core idle. (A thread would hold the GIL that the
    # Spark start's many Py4J calls wait for.)
    planning = BackgroundPlan(args.captures, args.split_mb << 20)
    try:
        spark = context(args.master, keep_classes=True)  # RDDs only: no SQL session to start
    except BaseException:
        planning.cancel()
        raise
    try:
        result = job.decode(spark, planning.result(), args.out, broker_ports=args.ports, records=args.records,
                            partitions=args.partitions, keys=keys, overwrite=args.overwrite, progress=sys.stderr)
    except (CaptureError, FileNotFoundError) as error:
        print(f"kafkawire decode: {error}", file=sys.stderr)
        return 1
    finally:
        stop(spark)
    print(f"decoded {len(result.files)} file(s), {result.input_bytes:,} bytes in {result.splits} split(s), "
          f"{result.connections:,} connection(s) with {result.payload_bytes:,} bytes of TCP payload, "
          f"in {result.seconds:.1f} s on {result.master}, into {result.out_dir}")
    bodies = {name: count for name, count in result.rows.items() if name.startswith(f"{BODIES}/")}
    for name, count in result.rows.items():
        if name not in bodies:
            print(f"  {name:<10}{count:>14,} rows")
    if bodies:
        print(f"  {BODIES:<10}{sum(bodies.values()):>14,} rows in {len(bodies)} tables, one per message type "
              f"({BODIES}/<message>)")
    if result.skipped:
        print(f"skipped {sum(result.skipped.values()):,} of {result.capture_records:,} capture records: " + ", ".join(
            f"{reason} {count:,}" for reason, count in result.skipped.items())
              + (" (corrupt records and torn tails are in the problems table)"
                 if {"corrupt", "truncated_tail"} & set(result.skipped) else ""))
    return 0


def report(args) -> int:
    """``kafkawire report``: the summary of a table set, with pyarrow or Spark; prints it."""
    import json
    from dataclasses import asdict

    import pyarrow as pa

    from ..capture.reporting import report as reports
    from ..capture.tables.table_sets import check_tables

    local = "://" not in args.tables or args.tables.startswith("file://")
    if args.engine == "arrow" and not local:
        return _refuse("report", f"{args.tables}: the arrow engine reads local tables only")
    try:
        check_tables(args.tables)
    except (KafkaWireError, OSError) as error:  # TableSetError; a URI's file system that cannot be reached
        return _refuse("report", error)
    if args.html:
        try:
            import plotly  # noqa: F401  (the capture extra's; checked before the report is computed)
        except ImportError:
            return _refuse("report", "--html draws with plotly: pip install 'kafkawire[capture]'")
    engine = reports.engine_for(args.tables, args.engine)
    charts = None
    if engine == "arrow":
        try:
            summary = reports.build_arrow(args.tables, delivery_limit=args.share_delivery_limit)
            if args.html:
                from ..capture.reporting.html.series_arrow import compute

                charts = compute(args.tables)
        except (OSError, pa.ArrowException) as error:
            print(f"kafkawire report: cannot read the tables in {args.tables}: {error}", file=sys.stderr)
            return 1
    else:
        from .report_spark import build
        from .session import session, stop

        spark = session(args.master, keep_classes=True)
        try:
            summary = build(spark, args.tables, delivery_limit=args.share_delivery_limit)
            if args.html:
                from .report_html_spark import compute as compute_on_spark

                charts = compute_on_spark(spark, args.tables)
        finally:
            stop(spark)
    print(json.dumps(asdict(summary), indent=2, default=str) if args.json else summary.text())
    if charts is not None:
        from ..capture.reporting.html.page import render

        try:
            with open(args.html, "w", encoding="utf-8") as page:
                page.write(render(summary, charts, f"kafkawire report of {args.tables}"))
        except OSError as error:
            print(f"kafkawire report: cannot write {args.html}: {error}", file=sys.stderr)
            return 1
        print(f"kafkawire report: wrote {args.html}", file=sys.stderr)
    return 0

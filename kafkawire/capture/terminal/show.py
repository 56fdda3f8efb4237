"""``kafkawire show``: a quick look at a capture in the terminal, without Spark.

One line per request and response as the capture is read (``streaming.CaptureStream``: the capture job's
decoder, in this process), and one per problem:

    frame  time             client > broker         API vN  req|resp  corr  client id  topics  size  ...

A request line has the client id and, for Produce, the records it carries; a response line the
latency from its request and the error codes it carries (``ok`` for none). ``--filter`` keeps some
(``show_filter``), ``--json`` prints JSON Lines instead (``show_output`` writes both), and ``-V N``
prints frame N (the first column: frames are numbered in the order they are read, filters or not)
with its whole body, then stops.

A topic named by id only (Fetch and Produce v13+) shows by the name the responses read so far paired
with its id (``topic_names``), as "(unknown topic id ...)" before any did: a line is printed as it is read.

It suits captures up to a few hundred MB; above ``SPARK_ADVISED_BYTES`` it says that ``kafkawire decode``
(Spark, every core, tables to query) serves better, and goes on.
"""
from __future__ import annotations

import gc
import sys

__all__ = ["add_show_command", "run", "SPARK_ADVISED_BYTES"]

SPARK_ADVISED_BYTES = 512 << 20
USAGE_ERROR = 2


def add_show_command(commands) -> None:
    """The ``show`` subcommand, on ``commands`` (what ``ArgumentParser.add_subparsers`` returns)."""
    show = commands.add_parser(
        "show", help="print a capture's Kafka requests and responses, one line each (no Spark)",
        description="Decode captures in this process, as `kafkawire decode` does, and print a line per request "
                    "and response (time, client, API and version, correlation id, topics and partitions, size, "
                    "error codes, latency) and per problem, as they are read. For captures up to a few hundred "
                    "MB; `kafkawire decode` serves larger ones better.")
    show.add_argument("captures", nargs="+", metavar="CAPTURE",
                      help="capture files (pcap, pcapng, gzip-compressed), folders or globs; local or URIs "
                           "(s3://, gs://, abfs://, hdfs://...)")
    show.add_argument("--filter", action="append", default=[], metavar="EXPR",
                      help="keep frames that match, e.g. 'api=Fetch topic=orders', 'error', 'client=rdkafka', "
                           "'corr=12', 'problems' (repeatable; all must hold)")
    show.add_argument("--json", action="store_true", help="print JSON Lines instead of text")
    show.add_argument("-V", dest="detail", type=int, metavar="N",
                      help="print frame N (the first column) with its whole body, then stop")
    show.add_argument("--keylog", metavar="FILE",
                      help="an NSS key log (SSLKEYLOGFILE of the clients or brokers, librdkafka's ssl.keylog.location): "
                           "TLS connections whose secrets it holds are decrypted (TLS 1.2 and 1.3, AES-GCM and "
                           "ChaCha20-Poly1305)")
    show.add_argument("--port", type=int, action="append", dest="ports", metavar="N",
                      help="a broker port (repeatable; default: detected per connection)")
    show.add_argument("--fs-option", action="append", default=[], dest="fs_options", metavar="KEY=VALUE",
                      help="an option of the captures' file system when they are URIs (repeatable), e.g. "
                           "endpoint_override=host:9000, scheme=http, region=eu-west-1; credentials come "
                           "from the environment")


def _key_log(path: str | None):
    if path is None:
        return None
    from ..tls import tls_connection  # noqa: F401 - cryptography (the capture extra), before anything is read
    from ..tls.key_log import load_key_log  # KeyLogError is a ValueError: a usage error
    return load_key_log(path)


def run(args, out=None, *, own_process: bool = False) -> int:
    """``kafkawire show`` with the parsed arguments; the exit status. ``own_process``: the command line's
    process, which ends with the command."""
    from ..files.inputs import expand_inputs
    from ..files.reading import CaptureError
    from ..files.remote_files import file_size, with_fs_options
    from .show_filter import FilterError, FrameFilter
    from .show_output import Printer
    from ..streaming import CaptureStream

    if own_process:
        # What the imports made lives as long as the process: out of the cyclic collector's passes, which
        # would otherwise walk it again and again while the capture's short-lived objects come and go.
        gc.freeze()

    out = out or sys.stdout
    try:
        keep = FrameFilter(args.filter)
        files = expand_inputs(with_fs_options(args.captures, getattr(args, "fs_options", [])))
        keys = _key_log(getattr(args, "keylog", None))
        if not files:
            raise FileNotFoundError(f"{' '.join(args.captures)}: no packet captures")
    except (FilterError, CaptureError, OSError, ValueError) as error:  # found before anything is read: usage
        print(f"kafkawire show: {error}", file=sys.stderr)
        return USAGE_ERROR
    total = sum(file_size(path) for path in files)
    if total > SPARK_ADVISED_BYTES:
        print(f"kafkawire show: {total / 1e6:,.0f} MB of captures: `kafkawire decode` (Spark, every core, tables "
              f"to query) serves captures above {SPARK_ADVISED_BYTES / 1e6:,.0f} MB better", file=sys.stderr)
    stream = CaptureStream(files, set(args.ports) if args.ports else None, keys)
    printer = Printer(out, keep, args.json, args.detail)
    try:
        for item in stream:
            if printer.item(item):
                return 0
        for skip in sorted(stream.skipped, key=lambda s: (s.path, s.offset, s.kind)):
            printer.skipped(skip)
    except CaptureError as error:
        print(f"kafkawire show: {error}", file=sys.stderr)
        return 1
    if args.detail is not None:
        print(f"kafkawire show: no frame {args.detail} (the capture has {printer.frames})", file=sys.stderr)
        return 1
    return 0

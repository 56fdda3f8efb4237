"""The ``kafkawire`` command line (also ``python -m kafkawire``).

A mistake in what the user gave (a port in use, a missing capture, an ``--out`` that would mix tables)
is one line on stderr and exit status 2, found before anything slow (Spark) starts; a failure while
running is exit status 1.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import TYPE_CHECKING

from . import __version__
from .errors import DecodeError

USAGE_ERROR = 2
# The capture extra (pyproject.toml), left out of the base install: what decode, report and the demo run
# on, what `show` reads remote captures with, and what decrypts TLS captures (--keylog).
CAPTURE_EXTRA = ("pyspark", "pyarrow", "pandas", "numpy", "cryptography")
INSTALL_CAPTURE = "pip install 'kafkawire[capture]'"


# The commands that need nothing of the capture packages: their parser is built without the capture
# commands' options, which would import those packages (a broker's start pays for every import).
_BASE_COMMANDS = frozenset({"apis", "inspect", "broker", "cluster", "fuzz", "demo"})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(capture_commands=not argv or argv[0] not in _BASE_COMMANDS)
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ModuleNotFoundError as error:  # a path of another command that needs the extra (show on s3://...)
        package = (error.name or "").partition(".")[0]
        if package not in CAPTURE_EXTRA:
            raise
        return _refuse(args.command, f"needs {package}, of kafkawire's capture extra: {INSTALL_CAPTURE}")
    except BrokenPipeError:  # e.g. `kafkawire apis | head`: stop quietly, as other filters do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


def build_parser(capture_commands: bool = True) -> argparse.ArgumentParser:
    """The ``kafkawire`` command's parser (the docs' command-line reference is generated from it);
    without ``capture_commands``, without decode, report and show."""
    parser = argparse.ArgumentParser(prog="kafkawire", description="The Apache Kafka wire protocol in Python.")
    parser.add_argument("--version", action="version", version=f"kafkawire {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    apis = commands.add_parser("apis", help="list API keys, names and versions, and which the broker serves",
                               description="Every API of the message specs: key, name, versions, the first "
                                           "flexible version, and the versions `kafkawire broker` serves "
                                           "('-': not served).")
    apis.add_argument("--json", action="store_true", help="print JSON instead of a table")

    inspect = commands.add_parser("inspect", help="print one request or response frame as JSON")
    which = inspect.add_mutually_exclusive_group(required=True)
    which.add_argument("--request", metavar="FILE", help="a request frame ('-' reads stdin)")
    which.add_argument("--response", metavar="FILE", help="a response frame ('-' reads stdin)")
    inspect.add_argument("--api", help="the response's API (name or key)")
    inspect.add_argument("--version", type=int, help="the response's API version")
    inspect.add_argument("--hex", action="store_true", help="the input is hex text (whitespace ignored)")

    broker = commands.add_parser("broker", help="run the reference broker")
    _add_broker_options(broker)
    broker.add_argument("--tap", metavar="FILE", help="write the broker's own traffic to FILE as pcapng (for tshark)")
    broker.add_argument("--metrics-port", type=int, metavar="PORT",
                        help="serve Prometheus metrics on PORT (/metrics; 0 picks a free port)")

    cluster = commands.add_parser(
        "cluster", help="run several brokers in one process, with faults on command",
        description="N brokers in one process, each on its own port (--port, --port + 1, ...), sharing one "
                    "copy of the data: partitions have replicas on several brokers with leaders spread out, "
                    "and coordinators live on one broker each. --control-port serves a line-based control "
                    "interface (send 'help') to move leaders, stop and start brokers, fail or drop requests, "
                    "add latency and shrink ISRs.")
    cluster.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    cluster.add_argument("--control-port", type=int, metavar="PORT",
                         help="serve the control interface on PORT (0 picks a free port)")
    _add_broker_options(cluster)

    if capture_commands:
        from .capture_spark.commands import add_decode_command, add_report_command
        add_decode_command(commands)
        add_report_command(commands)
        from .capture.terminal.show import add_show_command
        add_show_command(commands)

    fuzz = commands.add_parser(
        "fuzz", help="send a broker generated and malformed requests and check its answers",
        description="Ask the target for its ApiVersions, then send generated requests of every API and version "
                    "it advertises, and malformed frames, checking that every answer decodes with the schema "
                    "of its version, that correlation ids match, and that nothing hangs or crashes it. Exit "
                    "status 1 when anything did. Needs kafkawire's fuzz extra only for its Hypothesis "
                    "strategies, not for this command.")
    fuzz.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="the broker to fuzz")
    fuzz.add_argument("--seconds", type=float, default=30, help="how long to run (default 30)")
    fuzz.add_argument("--seed", type=int, help="the random seed (default: random; printed, to replay a run)")
    fuzz.add_argument("--out", metavar="DIR", default="kafkawire-fuzz",
                      help="where each finding's request and response bytes go (default ./kafkawire-fuzz)")
    fuzz.add_argument("--all-apis", action="store_true",
                      help="also send the APIs that change the target (produce, create and delete topics, "
                           "commit offsets, ...): never against a cluster you care about")
    fuzz.add_argument("--timeout-ms", type=int, default=5000, help="an answer later than this is a hang")

    demo = commands.add_parser("demo", help="an end-to-end run on embedded defaults")
    demo.add_argument("--out", help="keep the capture and tables in this directory (default: a temporary one)")
    return parser


def _add_broker_options(parser) -> None:
    """The options `kafkawire broker` and `kafkawire cluster` share."""
    parser.add_argument("--config", metavar="FILE",
                        help="a Kafka server.properties file (Kafka's property names); the options below and "
                             "--override win over it")
    parser.add_argument("--data-dir", help="where partition logs and offsets live (log.dirs)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; unless "
                                                            "listeners is set)")
    parser.add_argument("--port", type=int, default=9092, help="port to listen on (default 9092; 0 picks one)")
    parser.add_argument("--advertised-host", help="host name clients are told to connect to")
    parser.add_argument("--partitions", type=int, help="partitions of auto-created topics (num.partitions, default 1)")
    parser.add_argument("--no-auto-create", action="store_true", help="refuse topics that were not created "
                                                                      "(auto.create.topics.enable=false)")
    parser.add_argument("--segment-bytes", type=int, help="log.segment.bytes (default 1 GiB)")
    parser.add_argument("--retention-ms", type=int, help="log.retention.ms (default 7 days)")
    parser.add_argument("--retention-bytes", type=int, help="log.retention.bytes (default -1: no limit)")
    parser.add_argument("--remote-dir", help="a directory to use as the remote tier (tiered storage)")
    parser.add_argument("--remote-latency-ms", type=float, default=0.0, help="added latency of remote reads")
    parser.add_argument("--rebalance-delay-ms", type=int, help="group.initial.rebalance.delay.ms (default 3000)")
    parser.add_argument("--add-scram", action="append", default=[], metavar="SCRAM-SHA-256=[name=N,password=P]",
                        help="add a SCRAM credential at start, as kafka-storage format --add-scram does (repeatable)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a broker property by its Kafka name (repeatable), e.g. "
                             "--override queued.max.request.bytes=104857600")
    parser.add_argument("--request-log", action="store_true",
                        help="log every request (API, version, client, latency, error) on kafkawire.broker.requests")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each connection problem")
    parser.add_argument("--upstream-versions", action="store_true",
                        help="advertise exactly Kafka 4.3's API versions (Fetch up to v18, not kafkawire's "
                             "KIP-1178 v19)")


def _run(args) -> int:
    if args.command in ("decode", "report", "demo"):
        missing = _missing_packages(CAPTURE_EXTRA)
        if missing:  # said before anything starts, rather than when the first of them is imported
            return _refuse(args.command, f"needs kafkawire's capture extra ({', '.join(missing)} not "
                                         f"installed): {INSTALL_CAPTURE}")
    if args.command == "apis":
        return _apis(args)
    if args.command == "inspect":
        return _inspect(args)
    if args.command == "broker":
        return _broker(args)
    if args.command == "show":
        from .capture.terminal.show import run as show
        return show(args, own_process=True)
    if args.command == "cluster":
        return _cluster(args)
    if args.command in ("decode", "report"):
        from .capture_spark.commands import run as run_capture
        return run_capture(args)
    if args.command == "fuzz":
        from .testing.fuzz import command
        return command(args.bootstrap, seconds=args.seconds, seed=args.seed, out=args.out,
                       all_apis=args.all_apis, timeout_ms=args.timeout_ms)
    if args.command == "demo":
        from .demo import run as run_demo
        return run_demo(args.out)
    return 2


def _missing_packages(names) -> list[str]:
    import importlib.util
    return [name for name in names if importlib.util.find_spec(name) is None]


def _refuse(command: str, message) -> int:
    print(f"kafkawire {command}: {message}", file=sys.stderr)
    return USAGE_ERROR


def _broker_config(args, command: str, defaults: dict[str, str] | None = None):
    """The BrokerConfig the options of `kafkawire broker` or `cluster` say (over ``defaults``, by Kafka
    name), or the exit status of a refusal."""
    import logging

    from .broker import BrokerConfig
    from .broker.config.properties import read_properties

    for option, folder in (("--data-dir", args.data_dir), ("--remote-dir", args.remote_dir)):
        problem = _folder_problem(folder) if folder else None
        if problem:
            return _refuse(command, f"{option} {folder}: {problem}")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.request_log:
        logging.getLogger("kafkawire.broker.requests").setLevel(logging.INFO)
    properties: dict[str, str] = dict(defaults or {})
    if args.config:
        try:
            properties.update(read_properties(args.config))
        except OSError as error:
            return _refuse(command, f"--config {args.config}: {error.strerror or error}")
        except ValueError as error:
            return _refuse(command, f"--config {args.config}: {error}")
    flags = {"log.dirs": args.data_dir, "num.partitions": args.partitions, "log.segment.bytes": args.segment_bytes,
             "log.retention.ms": args.retention_ms, "log.retention.bytes": args.retention_bytes,
             "group.initial.rebalance.delay.ms": args.rebalance_delay_ms,
             "auto.create.topics.enable": "false" if args.no_auto_create else None}
    properties.update({key: str(value) for key, value in flags.items() if value is not None})
    for item in args.override:
        key, equals, value = item.partition("=")
        if not equals:
            return _refuse(command, f"--override takes KEY=VALUE, not {item!r}")
        properties[key.strip()] = value
    data_dir = properties.pop("log.dirs", None) or properties.pop("log.dir", None)
    if not data_dir:
        return _refuse(command, "no data folder: give --data-dir or log.dirs")
    for folder in data_dir.split(","):  # log.dirs (JBOD): every folder must be usable
        problem = _folder_problem(folder.strip()) if folder.strip() else None
        if problem:
            return _refuse(command, f"log.dirs {folder.strip()}: {problem}")
    try:
        return BrokerConfig.from_properties(
            properties, data_dir=data_dir, host=args.host, port=args.port, advertised_host=args.advertised_host,
            remote_dir=args.remote_dir, remote_read_latency_ms=args.remote_latency_ms,
            tap_path=getattr(args, "tap", None), upstream_versions=args.upstream_versions,
            scram_credentials=args.add_scram, metrics_port=getattr(args, "metrics_port", None),
            request_log=args.request_log)
    except (TypeError, ValueError) as error:  # a setting the broker cannot honour
        return _refuse(command, error)


def _broker(args) -> int:
    import asyncio

    from .broker import Broker

    config = _broker_config(args, "broker")
    if isinstance(config, int):
        return config
    config.freeze_heap = True  # (this process's heap is the broker's own)

    async def serve() -> int:
        try:
            broker = Broker(config)
        except (OSError, ValueError) as error:
            return _refuse("broker", _start_problem(error, config))
        try:
            await broker.start()
        except (OSError, ValueError) as error:
            with contextlib.suppress(Exception):  # what did start (groups, the tap) is let go
                await broker.close()
            return _refuse("broker", _start_problem(error, config))
        def ready() -> None:
            for listener in broker.listeners[1:]:  # before the ready line, which names the first listener
                print(f"listener {listener.name} ({listener.protocol}) on {broker.bootstrap_for(listener.name)}",
                      flush=True)
            if broker.metrics_port is not None:
                print(f"metrics on http://{config.host or '0.0.0.0'}:{broker.metrics_port}/metrics", flush=True)
            print(f"kafkawire broker on {broker.bootstrap} (data in {config.data_dir})", flush=True)

        try:
            await _serve_until_signalled(broker, ready)
        finally:
            await broker.close()
        return 0

    try:
        return asyncio.run(serve())
    except KeyboardInterrupt:
        return 0


def _cluster(args) -> int:
    import asyncio

    from .broker import Cluster
    from .broker.cluster.control import serve_control

    if args.brokers < 1:
        return _refuse("cluster", f"--brokers must be at least 1, not {args.brokers}")
    # replicas on up to three brokers, unless the settings say otherwise
    config = _broker_config(args, "cluster", {"default.replication.factor": str(min(3, args.brokers))})
    if isinstance(config, int):
        return config
    config.freeze_heap = True

    async def serve() -> int:
        cluster = Cluster(args.brokers, config=config)
        try:
            await cluster.start()
            control = (await serve_control(cluster, config.host, args.control_port)
                       if args.control_port is not None else None)
        except (OSError, ValueError) as error:
            with contextlib.suppress(Exception):
                await cluster.close()
            return _refuse("cluster", _start_problem(error, config))

        def ready() -> None:
            if control is not None:
                print(f"control on {config.host}:{control.sockets[0].getsockname()[1]}", flush=True)
            print(f"kafkawire cluster on {cluster.bootstrap} (data in {config.data_dir})", flush=True)

        try:
            await _serve_until_signalled(cluster, ready)
        finally:
            if control is not None:
                control.close()
            await cluster.close()
        return 0

    try:
        return asyncio.run(serve())
    except KeyboardInterrupt:
        return 0

async def _serve_until_signalled(broker, ready) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully. The handlers are installed here, whatever
    the process inherited (a background job of a non-interactive shell starts with SIGINT ignored), and
    before ``ready()`` announces the broker, so that a signal sent once it is announced is never lost."""
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    ready()
    serving = asyncio.ensure_future(broker.serve_forever())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        stopping.cancel()
    print("kafkawire broker: shutting down", flush=True)
    await broker.shutdown()
    serving.cancel()


def _folder_problem(folder: str) -> str | None:
    """Why ``folder`` cannot be a folder the broker writes in (None if it can, or can be made)."""
    path = os.path.abspath(folder)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        return "is a file, not a folder" if path == os.path.abspath(folder) else f"{path} is a file, not a folder"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    return None


def _start_problem(error: Exception, config) -> str:
    import errno

    address = f"{config.host}:{config.port}"
    if isinstance(error, OSError) and error.errno == errno.EADDRINUSE:
        return f"cannot listen on {address}: the address is in use (another broker? pass another --port, " \
               f"or --port 0 for any free one)"
    if isinstance(error, OSError) and error.errno == errno.EACCES and error.filename is None:
        return f"cannot listen on {address}: permission denied (ports below 1024 need privileges)"
    if isinstance(error, OSError) and error.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        return f"cannot listen on {address}: {os.strerror(error.errno)} (is --host an address of this machine?)"
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.filename}: {error.strerror}"
    return str(error)


def _apis(args) -> int:
    from .broker.dispatch.versions import SUPPORTED_VERSIONS
    from .messages import apis
    rows = apis(include_removed=True)  # Kafka 4's removed APIs too, with no versions
    if args.json:
        print(json.dumps([{"key": a.key, "name": a.name, "min_version": None if a.removed else a.min_version,
                           "max_version": None if a.removed else a.max_version, "removed": a.removed,
                           "flexible_from": a.flexible_versions[0] if a.flexible_versions else None,
                           "broker_min_version": SUPPORTED_VERSIONS.get(a.key, (None, None))[0],
                           "broker_max_version": SUPPORTED_VERSIONS.get(a.key, (None, None))[1]}
                          for a in rows], indent=2))
        return 0
    print(f"{'key':>4}  {'name':<36} {'versions':<9} {'flexible':<9} broker")
    for a in rows:
        flexible = f"{a.flexible_versions[0]}+" if a.flexible_versions else "none"
        served = SUPPORTED_VERSIONS.get(a.key)
        broker = f"{served[0]}-{served[1]}" if served else "-"
        versions = "removed" if a.removed else f"{a.min_version}-{a.max_version}"
        print(f"{a.key:>4}  {a.name:<36} {versions:<9} {'-' if a.removed else flexible:<9} {broker}")
    return 0


def _read_input(path: str, hex_text: bool) -> bytes:
    data = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()
    if hex_text:
        data = bytes.fromhex("".join(data.decode("ascii").split()))
    return data


def _readings(data: bytes) -> list[bytes]:
    """A frame may come with or without its int32 size prefix: the readings to try, likeliest first."""
    if len(data) >= 4 and int.from_bytes(data[:4], "big") == len(data) - 4:
        return [data[4:], data]
    return [data]


def _inspect(args) -> int:
    from .framing import decode_request, decode_response
    from .messages import api
    if TYPE_CHECKING:
        from .messages.request_header import RequestHeader
        from .messages.response_header import ResponseHeader
    if args.response and (args.api is None or args.version is None):
        return _refuse("inspect", "--response needs --api and --version")
    try:
        info = None if args.request else api(int(args.api) if args.api.isdigit() else args.api)
    except KeyError as exc:
        return _refuse("inspect", f"--api {exc.args[0]}")
    option, path = ("--request", args.request) if args.request else ("--response", args.response)
    try:
        data = _read_input(path, args.hex)
    except OSError as exc:
        return _refuse("inspect", f"{option} {path}: {exc.strerror or exc}")
    except ValueError as exc:  # --hex text that is not hex
        return _refuse("inspect", f"{option} {path}: not hex text ({exc})")
    first_error = None
    header: RequestHeader | ResponseHeader
    for reading in _readings(data):
        try:
            if args.request:
                header, body = decode_request(reading)
                found, version = api(header.request_api_key), header.request_api_version
            else:
                assert info is not None  # looked up above for a response
                found, version = info, args.version
                header, body = decode_response(reading, info.key, version)
        except DecodeError as exc:
            first_error = first_error or exc
            continue
        print(json.dumps({"api": found.name, "api_key": found.key, "api_version": version,
                          "header": header.to_dict(), "body": body.to_dict()}, indent=2))
        return 0
    print(f"kafkawire inspect: cannot decode: {first_error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

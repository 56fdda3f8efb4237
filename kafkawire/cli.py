"""The ``kafkawire`` command line."""
from __future__ import annotations

import argparse
import json
import os
import sys

from .errors import DecodeError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkawire", description="The Apache Kafka wire protocol in Python.")
    commands = parser.add_subparsers(dest="command", required=True)

    apis = commands.add_parser("apis", help="list API keys, names and versions")
    apis.add_argument("--json", action="store_true", help="print JSON instead of a table")

    inspect = commands.add_parser("inspect", help="print one request or response frame as JSON")
    which = inspect.add_mutually_exclusive_group(required=True)
    which.add_argument("--request", metavar="FILE", help="a request frame ('-' reads stdin)")
    which.add_argument("--response", metavar="FILE", help="a response frame ('-' reads stdin)")
    inspect.add_argument("--api", help="the response's API (name or key)")
    inspect.add_argument("--version", type=int, help="the response's API version")
    inspect.add_argument("--hex", action="store_true", help="the input is hex text (whitespace ignored)")

    commands.add_parser("demo", help="an end-to-end run on embedded defaults")

    args = parser.parse_args(argv)
    try:
        return _run(args, parser)
    except BrokenPipeError:  # e.g. `kafkawire apis | head`: stop quietly, as other filters do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


def _run(args, parser) -> int:
    if args.command == "apis":
        return _apis(args)
    if args.command == "inspect":
        return _inspect(args, parser)
    if args.command == "demo":
        from .demo import run
        return run()
    return 2


def _apis(args) -> int:
    from .messages import apis
    rows = apis()
    if args.json:
        print(json.dumps([{"key": a.key, "name": a.name, "min_version": a.min_version,
                           "max_version": a.max_version,
                           "flexible_from": a.flexible_versions[0] if a.flexible_versions else None}
                          for a in rows], indent=2))
        return 0
    print(f"{'key':>4}  {'name':<36} {'versions':<9} flexible")
    for a in rows:
        flexible = f"{a.flexible_versions[0]}+" if a.flexible_versions else "none"
        print(f"{a.key:>4}  {a.name:<36} {a.min_version}-{a.max_version:<7} {flexible}")
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


def _inspect(args, parser) -> int:
    from .framing import decode_request, decode_response
    from .messages import api
    if args.response and (args.api is None or args.version is None):
        parser.error("--response needs --api and --version")
    try:
        data = _read_input(args.request or args.response, args.hex)
    except (OSError, ValueError) as exc:
        print(f"kafkawire: {exc}", file=sys.stderr)
        return 2
    try:
        info = None if args.request else api(int(args.api) if args.api.isdigit() else args.api)
    except KeyError as exc:
        print(f"kafkawire: {exc.args[0]}", file=sys.stderr)
        return 2
    first_error = None
    for reading in _readings(data):
        try:
            if args.request:
                header, body = decode_request(reading)
                info, version = api(header.request_api_key), header.request_api_version
            else:
                version = args.version
                header, body = decode_response(reading, info.key, version)
        except DecodeError as exc:
            first_error = first_error or exc
            continue
        print(json.dumps({"api": info.name, "api_key": info.key, "api_version": version,
                          "header": header.to_dict(), "body": body.to_dict()}, indent=2))
        return 0
    print(f"kafkawire: cannot decode: {first_error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

"""``python -m codegen [--specs DIR] [--out DIR] [--check]``"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .generate import DEFAULT_OUT, DEFAULT_OVERLAYS, DEFAULT_SPECS, generate, stale, write
from .parse import SpecError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen",
                                     description="Generate kafkawire codecs from Kafka JSON message specs.")
    parser.add_argument("--specs", type=Path, default=None,
                        help="directory of upstream-format *.json specs (default: schemas/)")
    parser.add_argument("--overlay", type=Path, action="append", default=None, metavar="DIR",
                        help="directory of specs replacing those of the same file name; repeatable "
                             "(default: schemas/kip-1178/ with the default --specs, none with another)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="package directory to write (default: kafkawire/messages/)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the output directory is stale")
    args = parser.parse_args(argv)
    try:
        specs = args.specs if args.specs is not None else DEFAULT_SPECS
        overlays = args.overlay if args.overlay is not None else (DEFAULT_OVERLAYS if args.specs is None else ())
        files = generate(specs, overlays=tuple(overlays), message_schemas=True)
    except SpecError as exc:
        print(f"codegen: {exc}", file=sys.stderr)
        return 2
    if args.check:
        problems = stale(files, args.out)
        for problem in problems:
            print(f"codegen: stale: {problem}", file=sys.stderr)
        if problems:
            print("codegen: run `python -m codegen` and commit the result", file=sys.stderr)
            return 1
        print(f"codegen: {len(files)} files up to date")
        return 0
    changed = write(files, args.out)
    print(f"codegen: {len(files)} files, {len(changed)} changed, in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

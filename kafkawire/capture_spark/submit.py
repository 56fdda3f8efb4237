"""The file to give spark-submit: ``spark-submit [options] .../kafkawire/capture_spark/submit.py decode ...``.

Spark runs it as a script, so it imports kafkawire absolutely (kafkawire must be installed where the
driver runs). It takes the arguments of ``kafkawire decode`` and ``kafkawire report`` (``commands``),
whose session() then finds the session spark-submit configured.
"""
import argparse
import sys

from kafkawire.capture_spark.commands import add_decode_command, add_report_command, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="submit.py", description="kafkawire's capture commands under spark-submit.")
    commands = parser.add_subparsers(dest="command", required=True)
    add_decode_command(commands)
    add_report_command(commands)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

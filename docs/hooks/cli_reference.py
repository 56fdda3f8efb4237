"""mkdocs hook: the command-line reference page's options, generated from the ``kafkawire`` parser.

The page holds the marker ``<!-- cli-reference -->``; each subcommand's ``--help`` replaces it, so the
reference cannot drift from the command.
"""
from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- cli-reference -->"


def cli_reference() -> str:
    from kafkawire.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal: fix the width for the page
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    sections = [f"## kafkawire\n\n```text\n{parser.format_help()}```\n"]
    for name, sub in commands.choices.items():
        sections.append(f"## kafkawire {name}\n\n```text\n{sub.format_help()}```\n")
    return "\n".join(sections)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return markdown.replace(MARKER, cli_reference()) if MARKER in markdown else markdown

"""``python -m codegen.import_specs UPSTREAM_DIR [--out schemas/]``: take a Kafka release's message specs
into schemas/, keeping the wire facts only.

Each upstream ``*.json`` is read as upstream's Jackson reader reads it (comments allowed), its ``about``
texts and comments dropped, and written in schemas/' layout: a top-level key a line, a field a line
(nested fields indented under it), keys in upstream's order. Files of schemas/ that upstream no longer
has are removed, so schemas/ is the release, spec for spec. Overlays (``schemas/kip-1178/``) are left
alone: ``tests/test_schema_agreement.py`` says when one no longer fits the specs under it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .generate import DEFAULT_SPECS
from .parse import strip_comments


def wire_facts(node):
    """``node`` without its ``about`` texts, at every depth."""
    if isinstance(node, dict):
        return {key: wire_facts(value) for key, value in node.items() if key != "about"}
    if isinstance(node, list):
        return [wire_facts(item) for item in node]
    return node


def _field_text(spec_field: dict, indent: int) -> str:
    pad = " " * indent
    items = ", ".join(f"{json.dumps(key)}: {json.dumps(value)}"
                      for key, value in spec_field.items() if key != "fields")
    if "fields" not in spec_field:
        return f"{pad}{{{items}}}"
    children = spec_field["fields"]
    if not children:
        return f'{pad}{{{items}, "fields": []}}'
    inner = ",\n".join(_field_text(child, indent + 2) for child in children)
    return f'{pad}{{{items}, "fields": [\n{inner}\n{pad}]}}'


def spec_text(spec: dict) -> str:
    """A spec (already reduced to wire facts) in schemas/' layout."""
    lines = []
    for key, value in spec.items():
        if key in ("fields", "commonStructs") and isinstance(value, list):
            body = ",\n".join(_field_text(item, 4) for item in value)
            lines.append(f"  {json.dumps(key)}: [\n{body}\n  ]" if value else f"  {json.dumps(key)}: [\n  ]")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def import_specs(upstream: Path, out: Path) -> tuple[list[str], list[str]]:
    """Write ``upstream``'s specs into ``out``; returns (written or changed names, removed names)."""
    sources = sorted(upstream.glob("*.json"))
    if not sources:
        raise ValueError(f"{upstream}: no *.json spec files")
    out.mkdir(parents=True, exist_ok=True)
    changed = []
    for source in sources:
        text = spec_text(wire_facts(json.loads(strip_comments(source.read_text(encoding="utf-8")))))
        target = out / source.name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            changed.append(source.name)
    names = {source.name for source in sources}
    removed = sorted(path.name for path in out.glob("*.json") if path.name not in names)
    for name in removed:
        (out / name).unlink()
    return changed, removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen.import_specs",
                                     description="Take upstream Kafka's message specs into schemas/ (wire facts only).")
    parser.add_argument("upstream", type=Path, help="directory of upstream *.json specs "
                                                    "(clients/src/main/resources/common/message)")
    parser.add_argument("--out", type=Path, default=DEFAULT_SPECS, help="default: schemas/")
    args = parser.parse_args(argv)
    try:
        changed, removed = import_specs(args.upstream, args.out)
    except (ValueError, OSError) as exc:
        print(f"import_specs: {exc}", file=sys.stderr)
        return 2
    print(f"import_specs: {len(changed)} specs written, {len(removed)} removed, in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

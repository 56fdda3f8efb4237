"""What a decode's tables cost on disk (issue 25): per table, rows, part files, bytes, Parquet leaf
columns and footer bytes, and the total; and how pandas sees a frames row (columns, and how many of
them hold dicts). Any folder under the table set that holds Parquet files counts as a table, so that
table sets of any layout (``bodies/<message>/`` tables, or one frames table with a struct per message)
are measured alike.

    .venv/bin/python bench/capture_fixture.py --size-mb 1 --connections 4 --work /tmp/sizes
    .venv/bin/kafkawire decode /tmp/sizes/*.pcapng --out /tmp/sizes/tables
    .venv/bin/python bench/table_sizes.py /tmp/sizes/tables
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pyarrow.parquet as pq


def tables(root: Path) -> dict[str, list[Path]]:
    """Table name (its folder relative to ``root``) -> its part files (names not starting with . or _)."""
    found: dict[str, list[Path]] = {}
    for folder, _, files in os.walk(root):
        parts = sorted(Path(folder) / name for name in files if name.endswith(".parquet") and name[0] not in "._")
        if parts:
            found[str(Path(folder).relative_to(root))] = parts
    return dict(sorted(found.items()))


def measure(parts: list[Path]) -> dict:
    metadata = [pq.ParquetFile(part).metadata for part in parts]
    return {"rows": sum(m.num_rows for m in metadata), "files": len(parts),
            "bytes": sum(part.stat().st_size for part in parts),
            "leaves": max(m.num_columns for m in metadata), "footer": sum(m.serialized_size for m in metadata)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", type=Path, help="the --out folder of a decode")
    args = parser.parse_args()
    found = tables(args.tables)
    if not found:
        print(f"{args.tables}: no Parquet tables", file=sys.stderr)
        return 1
    print(args.tables)
    print(f"  {'table':<40}{'rows':>9}{'files':>7}{'bytes':>12}{'leaves':>8}{'footer':>11}")
    total = {"rows": 0, "files": 0, "bytes": 0, "footer": 0}
    for name, parts in found.items():
        figures = measure(parts)
        for key in total:
            total[key] += figures[key]
        print(f"  {name:<40}{figures['rows']:>9,}{figures['files']:>7}{figures['bytes']:>12,}{figures['leaves']:>8,}"
              f"{figures['footer']:>11,}")
    print(f"  {'all ' + str(len(found)) + ' tables':<40}{total['rows']:>9,}{total['files']:>7}{total['bytes']:>12,}"
          f"{'':>8}{total['footer']:>11,}")
    if "frames" in found:
        frame = pq.read_table(found["frames"]).to_pandas()
        first = frame.iloc[0].to_dict() if len(frame) else {}
        dicts = [name for name, value in first.items() if isinstance(value, dict)]
        keys = sum(len(first[name]) for name in dicts)
        print(f"  pandas: a frames row has {len(frame.columns)} columns, {len(dicts)} of them dicts"
              + (f" ({keys} keys)" if dicts else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The documentation site: it builds with ``mkdocs build --strict`` (broken links, missing pages and
docstrings mkdocstrings cannot read fail it), every repository path the pages name exists, and the
"differences from Kafka" page lists exactly the APIs the broker does not serve."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kafkawire.broker.dispatch.versions import SERVED_APIS
from kafkawire.messages import api

from support.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# A path in backquotes that starts with one of the repository's folders is a claim that it exists.
FOLDERS = ("kafkawire/", "tests/", "bench/", "codegen/", "schemas/", "docs/", "config/", ".ci/")
ALL_API_KEYS = range(0, 100)


def named_paths(text: str) -> set[str]:
    paths = set()
    for match in re.finditer(r"`([^`\s]+)`", text):
        path = match.group(1).split("::")[0].rstrip(",.:")
        if path.startswith(FOLDERS) and not any(c in path for c in "*<>{}$"):
            paths.add(path)
    return paths


def test_every_path_the_pages_name_exists():
    missing = [f"{page.relative_to(REPO)}: {path}" for page in PAGES
               for path in sorted(named_paths(page.read_text())) if not (REPO / path).exists()]
    assert not missing, "\n".join(missing)


def test_the_readme_keeps_to_the_pitch_set_up_and_commands():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250


def unserved_api_names() -> set[str]:
    names = set()
    for key in ALL_API_KEYS:
        try:
            info = api(key)
        except KeyError:
            continue
        if not info.removed and key not in SERVED_APIS:
            names.add(info.name)
    return names


def test_the_differences_page_lists_every_api_not_served():
    text = (REPO / "docs" / "differences.md").read_text()
    table = text.split("## APIs not served", 1)[1].split("\n## ", 1)[0]
    listed = {name.strip() for row in re.findall(r"^\| ([^|]+) \|", table, re.MULTILINE)[1:]
              for name in row.split(",")}
    listed.discard("---")
    assert listed == unserved_api_names()


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "kafkawire broker" in cli and "--override" in cli  # the generated reference is on the page
    assert (tmp_path / "site" / "differences" / "index.html").is_file()

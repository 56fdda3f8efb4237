"""Running a test file that uses kafkawire's pytest plugin, with pytest in a subprocess, as a user's
suite runs it (tests/broker/cluster/test_cluster_pytest_plugin.py, and the README's example in tests/cli)."""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

from support.paths import REPO

__all__ = ["run_pytest"]


def _plugin_arguments() -> list[str]:
    """``-p`` the plugin's module unless its entry point is installed (an install of this tree)."""
    installed = any(entry.value == "kafkawire.testing.pytest_plugin"
                    for entry in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "kafkawire.testing.pytest_plugin"]


def run_pytest(folder: Path, *arguments: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-p", "no:hypothesispytest", *_plugin_arguments(), *arguments],
                          cwd=folder, capture_output=True, text=True, timeout=120, env=env)

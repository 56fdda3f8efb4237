"""Shared fixtures: packages of codecs generated on the fly from a directory of specs, ``processes``
(brokers as real processes, killed after the test: ``broker_process``) and ``shared_broker`` (the pytest
plugin's session broker, for every module that needs no broker of its own)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from support.broker_process import processes  # noqa: F401 (a fixture, for every test module)
from codegen.generate import generate, write
from support.broker_harness import SharedBroker
from support.paths import UPSTREAM_SPECS


@pytest.fixture(scope="session")
def shared_broker(kafka_broker_session):
    """The plugin's ``kafka_broker_session`` as a SharedBroker: one broker for the session's modules."""
    return SharedBroker(kafka_broker_session)


@pytest.fixture(scope="session")
def generated_package(tmp_path_factory):
    """``generated_package(specs_dir, name)``: generate ``name`` from ``specs_dir`` and import it.

    Each package is generated once per session (per xdist worker) into its own temporary directory,
    which is put on ``sys.path`` for the session and removed afterwards.
    """
    made: dict[tuple[Path, str], object] = {}
    paths: list[str] = []

    def make(specs_dir: Path, name: str):
        key = (Path(specs_dir).resolve(), name)
        if key not in made:
            if name in sys.modules:
                raise RuntimeError(f"a module named {name!r} is already imported")
            root = tmp_path_factory.mktemp(f"gen_{name}")
            write(generate(Path(specs_dir)), root / name)
            sys.path.insert(0, str(root))
            paths.append(str(root))
            importlib.invalidate_caches()
            made[key] = importlib.import_module(name)
        return made[key]

    yield make
    for path in paths:
        if path in sys.path:
            sys.path.remove(path)
    for _, name in made:
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[module]


@pytest.fixture(scope="session")
def upstream_messages(generated_package):
    """Codecs generated from upstream Kafka's specs, as package ``upstream_messages`` (skips if absent)."""
    if not UPSTREAM_SPECS.is_dir():
        pytest.skip(f"upstream specs not found at {UPSTREAM_SPECS}")
    return generated_package(UPSTREAM_SPECS, "upstream_messages")

"""The optional C accelerators: setup.py builds them where a C compiler exists, and each stands in
for Python code that stays the fallback and the reference. ``KAFKAWIRE_PURE_PYTHON=1`` in the
environment turns them all off."""
from __future__ import annotations

import importlib
import os

__all__ = ["PURE_PYTHON", "load"]

PURE_PYTHON = os.environ.get("KAFKAWIRE_PURE_PYTHON") == "1"


def load(name: str):
    """The extension module ``name`` (e.g. ``kafkawire.records._rows``), or None when it was not built
    or KAFKAWIRE_PURE_PYTHON=1."""
    if PURE_PYTHON:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None

"""The log cleaner: compaction of the logs whose cleanup.policy includes compact (Kafka's ``LogCleaner``).

``manager`` picks the filthiest log and keeps the checkpoints; ``cleaner`` runs a round over one log:
``rounds`` plans it and builds the offset map (``offset_map``) on a worker thread, ``batches`` filters
each batch, ``transactions`` follows aborted transactions and markers, ``files`` writes the cleaned
segments and swaps them in crash-safely, and ``throttler`` bounds its I/O.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cleaner import LogCleaner
    from .manager import LogCleanerManager

__all__ = ["LogCleaner", "LogCleanerManager"]

_MODULES = {"LogCleaner": "cleaner", "LogCleanerManager": "manager"}


def __getattr__(name: str) -> Any:
    """The cleaner's classes, imported on first use: opening a log needs only ``files``."""
    if name in _MODULES:
        return getattr(import_module(f".{_MODULES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

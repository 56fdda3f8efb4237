"""The log cleaner: compaction of the logs whose cleanup.policy includes compact (Kafka's ``LogCleaner``).

``manager`` picks the filthiest log and keeps the checkpoints; ``cleaner`` runs a round over one log:
``rounds`` plans it and builds the offset map (``offset_map``) on a worker thread, ``batches`` filters
each batch, ``transactions`` follows aborted transactions and markers, ``files`` writes the cleaned
segments and swaps them in crash-safely, and ``throttler`` bounds its I/O.
"""
from .cleaner import LogCleaner
from .manager import LogCleanerManager

__all__ = ["LogCleaner", "LogCleanerManager"]

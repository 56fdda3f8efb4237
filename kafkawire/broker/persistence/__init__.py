"""The broker's own state on disk, beside the partition logs:

- ``atomic_file``: small state files (topics, ACLs, dynamic configs) written whole and atomically;
- ``journal``: append-only JSON lines, the stand-in for a compacted internal topic
  (``__consumer_offsets``, ``__transaction_state``), compacted as it grows.
"""

"""Where the tests find the repository and the reference data beside it (``../shared``, relative to
the repository, never an absolute path)."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SCHEMAS = REPO / "schemas"
SHARED = REPO.parent / "shared"
# Kafka 4.3's own specs; KAFKAWIRE_UPSTREAM_SPECS points elsewhere for another Kafka
UPSTREAM_SPECS = Path(os.environ.get("KAFKAWIRE_UPSTREAM_SPECS", SHARED / "kafka-message-specs-4.3"))

"""Share groups (KIP-932): membership (``membership``), share sessions (``sessions``), each share
partition's delivery state (``partition``), all of a broker's share partitions (``partitions``) and
their durable store (``store``)."""
from .membership import ShareGroups
from .partition import AcknowledgeType, RecordState, SharePartition
from .partitions import SharePartitions, ShareSettings
from .sessions import ShareSessions
from .store import ShareStateStore

__all__ = ["ShareGroups", "SharePartition", "SharePartitions", "ShareSettings", "ShareSessions",
           "ShareStateStore", "AcknowledgeType", "RecordState"]

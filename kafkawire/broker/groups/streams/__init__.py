"""KIP-1071 streams groups: the topology and its internal topics (``topology``), members, tasks and
reconciliation (``state``), the sticky task assignor (``assignor``) and the warm-up tasks that hold a
stateful task's move back until its new owner has restored it (``warmups``), the coordinator that runs
StreamsGroupHeartbeat (``coordinator``) and what survives a restart (``store``)."""
from .coordinator import HeartbeatResult, StreamsGroupCoordinator
from .store import StreamsGroupStore

__all__ = ["StreamsGroupCoordinator", "HeartbeatResult", "StreamsGroupStore"]

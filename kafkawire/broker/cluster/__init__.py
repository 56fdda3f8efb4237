"""Several brokers in one process, for testing clients and applications against leader moves, broker
restarts and injected errors over the real protocol.

- ``controller``: live brokers, partition replicas, ISRs, leaders and epochs, coordinators;
- ``view``: one node's answers from the controller (``node_view.NodeView``);
- ``cluster``: ``Cluster`` (asyncio), its nodes and the faults on command;
- ``thread``: ``ClusterThread``, the same on a background thread for blocking callers;
- ``control``: the text commands of ``kafkawire cluster``'s control interface.
"""
from __future__ import annotations

from .cluster import Cluster
from .thread import ClusterThread

__all__ = ["Cluster", "ClusterThread"]

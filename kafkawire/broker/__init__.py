"""A Kafka-compatible reference broker: ``Broker`` (asyncio, in-process or ``kafkawire broker``).

- ``server`` (connections, framing, the request limits of ``connection_limits`` and
  ``request_memory``), ``handlers`` (API key -> handler) over ``apis/`` (one module per family of APIs)
  and ``error_responses`` (what a failing handler answers);
- ``fetch`` (KIP-74's read loop, parked fetches, the remote tier), ``fetch_sessions`` (KIP-227) and
  ``fetch_encoder`` (the Fetch response as sendfile pieces), ``sending`` (writing them);
- ``topics`` (topics and their logs), ``storage/`` (partition logs on disk);
- ``groups/`` (the group coordinator: classic groups, Kafka 4's consumer groups, committed offsets);
- ``config`` and ``properties`` (settings by Kafka's names), ``versions`` (what is served),
  ``security/`` (ACLs, TLS, JAAS), ``tap`` (the broker's traffic as pcapng) and ``background`` (a
  broker on a thread, for blocking callers);
- ``cluster/`` (``Cluster``: several brokers in one process, leader moves and faults on command), over
  ``node_view`` (what a node leads and coordinates), ``coordinator_keys`` and ``faults``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["Broker", "BrokerConfig", "BrokerThread", "Cluster", "ClusterThread"]

if TYPE_CHECKING:  # what __getattr__ loads, for type checkers
    from .background import BrokerThread as BrokerThread
    from .cluster import Cluster as Cluster, ClusterThread as ClusterThread
    from .config import BrokerConfig as BrokerConfig
    from .server import Broker as Broker
else:
    def __getattr__(name: str) -> type:
        # Loaded on first use, so that importing one part (say, storage) does not start the rest.
        if name == "Broker":
            from .server import Broker
            return Broker
        if name == "BrokerConfig":
            from .config import BrokerConfig
            return BrokerConfig
        if name == "BrokerThread":
            from .background import BrokerThread
            return BrokerThread
        if name in ("Cluster", "ClusterThread"):
            from . import cluster
            return getattr(cluster, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

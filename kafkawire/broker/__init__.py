"""A Kafka-compatible reference broker: ``Broker`` (asyncio, in-process or ``kafkawire broker``).

- ``server`` (``Broker``: its listeners, the shared state, the background work) and ``background``
  (``BrokerThread``: a broker on a thread, for blocking callers);
- ``network/`` (listeners, connections and their framing, the limits of ``connection_limits`` and
  ``request_memory``, ``sending`` with sendfile, injected ``faults``, the ``tap`` writing pcapng);
- ``dispatch/`` (``handlers``: API key -> handler, ``versions`` served, ``error_responses``,
  ``coordinator_keys``) over ``apis/`` (one module per family of APIs);
- ``fetch/`` (``reads``: KIP-74's read loop, parked fetches, the remote tier; ``sessions``: KIP-227;
  ``encoder``: the Fetch response as sendfile pieces);
- ``topics`` (topics and their logs), ``storage/`` (partition logs on disk), ``persistence/`` (the
  broker's other state files: atomic files and journals);
- ``groups/`` (the group coordinator: classic groups, Kafka 4's consumer groups, committed offsets),
  ``transactions/`` (the transaction coordinator), ``client_metrics`` (KIP-714);
- ``config/`` (settings by Kafka's names, ``.properties`` files, topic configs, loggers),
  ``security/`` (ACLs, TLS, SASL, JAAS), ``delegation_tokens/`` (KIP-48), ``metrics`` (Prometheus,
  the request log);
- ``cluster/`` (``Cluster``: several brokers in one process, leader moves and faults on command), over
  ``node_view`` (what a node leads and coordinates).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["Broker", "BrokerConfig", "BrokerThread", "Cluster", "ClusterThread"]

if TYPE_CHECKING:  # what __getattr__ loads, for type checkers
    from .background import BrokerThread as BrokerThread
    from .cluster import Cluster as Cluster, ClusterThread as ClusterThread
    from .config.broker_config import BrokerConfig as BrokerConfig
    from .server import Broker as Broker
else:
    def __getattr__(name: str) -> type:
        # Loaded on first use, so that importing one part (say, storage) does not start the rest.
        if name == "Broker":
            from .server import Broker
            return Broker
        if name == "BrokerConfig":
            from .config.broker_config import BrokerConfig
            return BrokerConfig
        if name == "BrokerThread":
            from .background import BrokerThread
            return BrokerThread
        if name in ("Cluster", "ClusterThread"):
            from . import cluster
            return getattr(cluster, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

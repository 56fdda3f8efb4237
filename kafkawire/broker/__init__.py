"""A Kafka-compatible reference broker: ``Broker`` (asyncio, in-process or ``kafkawire broker``).

The submodules stand alone: ``storage`` (partition logs on disk), ``fetch`` (KIP-74 limits, parked
fetches, the remote tier), ``sessions`` (KIP-227), ``groups`` (the classic group coordinator),
``handlers`` (one coroutine per API), ``server`` (connections and framing), ``tap`` (the broker's
traffic as pcapng) and ``background`` (a broker on a thread, for blocking callers).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["Broker", "BrokerConfig", "BrokerThread"]

if TYPE_CHECKING:  # what __getattr__ loads, for type checkers
    from .background import BrokerThread as BrokerThread
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
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""A Kafka-compatible reference broker: ``Broker`` (asyncio, in-process or ``kafkawire broker``).

The submodules stand alone: ``storage`` (partition logs on disk), ``fetch`` (KIP-74 limits, parked
fetches, the remote tier), ``sessions`` (KIP-227), ``groups`` (the classic group coordinator),
``handlers`` (one coroutine per API) and ``server`` (connections and framing).
"""
from __future__ import annotations

__all__ = ["Broker", "BrokerConfig"]


def __getattr__(name: str):
    # Loaded on first use, so that importing one part (say, storage) does not start the rest.
    if name == "Broker":
        from .server import Broker
        return Broker
    if name == "BrokerConfig":
        from .config import BrokerConfig
        return BrokerConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""A Broker on a background thread with its own event loop, for scripts and blocking clients."""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from .config.broker_config import BrokerConfig
from .server import Broker

_T = TypeVar("_T")


class BrokerThread:
    """``with BrokerThread(data_dir=..., port=0) as broker:`` runs a broker until the block ends;
    ``broker.bootstrap`` is its address."""

    def __init__(self, config: BrokerConfig | None = None, **settings: Any) -> None:
        settings.setdefault("port", 0)
        self.config = config if config is not None else BrokerConfig(**settings)
        self.loop = asyncio.new_event_loop()
        self.broker: Broker | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="kafkawire-broker", daemon=True)

    def start(self) -> "BrokerThread":
        self._thread.start()
        self.broker = Broker(self.config)
        self.call(self.broker.start())
        return self

    def call(self, coroutine: Coroutine[Any, Any, _T], timeout: float = 30) -> _T:
        """Run ``coroutine`` on the broker's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    @property
    def bootstrap(self) -> str:
        return self._started().bootstrap

    @property
    def port(self) -> int:
        port = self._started().port
        assert port is not None  # bound by Broker.start
        return port

    def _started(self) -> Broker:
        if self.broker is None:
            raise RuntimeError("the broker thread is not started")
        return self.broker

    def stop(self) -> None:
        self.call(self._started().close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def __enter__(self) -> "BrokerThread":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

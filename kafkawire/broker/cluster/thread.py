"""A Cluster on a background thread with its own event loop, for plain (blocking) tests and scripts."""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..node_view import PartitionInfo
from .cluster import Cluster

__all__ = ["ClusterThread"]

_T = TypeVar("_T")


class ClusterThread:
    """``with ClusterThread(brokers=3) as cluster:`` runs the brokers until the block ends. Its methods
    are the Cluster's, blocking; each runs on the cluster's loop."""

    def __init__(self, brokers: int = 3, data_dir: Any = None, **settings: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.cluster = Cluster(brokers, data_dir, **settings)
        self._thread = threading.Thread(target=self.loop.run_forever, name="kafkawire-cluster", daemon=True)

    def start(self) -> "ClusterThread":
        self._thread.start()
        self.call(self.cluster.start())
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        try:
            self.call(self.cluster.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    def __enter__(self) -> "ClusterThread":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, coroutine: Coroutine[Any, Any, _T], timeout: float = 30) -> _T:
        """Run ``coroutine`` on the cluster's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def _on_loop(self, function: Callable[..., _T], *args: Any) -> _T:
        async def run() -> _T:
            return function(*args)
        return self.call(run())

    @property
    def bootstrap(self) -> str:
        return self._on_loop(lambda: self.cluster.bootstrap)

    @property
    def node_ids(self) -> list[int]:
        return list(self.cluster.node_ids)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None) -> None:
        self.call(self.cluster.create_topic(name, partitions, replication_factor, configs))

    def leader(self, topic: str, partition: int = 0) -> int:
        return self._on_loop(self.cluster.leader, topic, partition)

    def partition(self, topic: str, partition: int = 0) -> PartitionInfo:
        return self._on_loop(self.cluster.partition, topic, partition)

    def coordinator(self, group: str | None = None, *, transactional_id: str | None = None) -> int:
        return self._on_loop(lambda: self.cluster.coordinator(group, transactional_id=transactional_id))

    def move_leader(self, topic: str, partition: int = 0, to: int | None = None) -> int:
        return self._on_loop(self.cluster.move_leader, topic, partition, to)

    def set_isr(self, topic: str, partition: int = 0, isr: list[int] | None = None) -> list[int]:
        return self._on_loop(self.cluster.set_isr, topic, partition, isr)

    def stop_broker(self, node: int) -> None:
        self.call(self.cluster.stop_broker(node))

    def start_broker(self, node: int, restore_leaders: bool = True) -> None:
        self.call(self.cluster.start_broker(node, restore_leaders))

    def push_request_errors(self, node: int, api: int | str, *errors: int | str) -> None:
        self._on_loop(self.cluster.push_request_errors, node, api, *errors)

    def fail_next(self, node: int, api: int | str, error: int | str, count: int = 1) -> None:
        self._on_loop(self.cluster.fail_next, node, api, error, count)

    def drop_next(self, node: int, api: int | str, count: int = 1) -> None:
        self._on_loop(self.cluster.drop_next, node, api, count)

    def set_latency(self, node: int, rtt_ms: float) -> None:
        self._on_loop(self.cluster.set_latency, node, rtt_ms)

    def set_throttle(self, node: int, bytes_per_second: int) -> None:
        self._on_loop(self.cluster.set_throttle, node, bytes_per_second)

    def clear_faults(self, node: int | None = None) -> None:
        self._on_loop(self.cluster.clear_faults, node)

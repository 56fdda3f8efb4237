"""``Cluster``: N brokers in one process, each on its own port, with one controller, and faults on command.

The first node owns the storage and the coordinators (topics, logs, groups, transactions); the others
are Brokers built over it (``Broker(over=...)``), each with its own listeners, connections, fetch
sessions and node id, answering for what the controller says it leads or coordinates. Stopping a
broker closes its listeners and drops its connections; its leaderships move to live in-sync replicas.
"""
from __future__ import annotations

import asyncio
import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ...error_codes import ErrorCode
from ... import messages as m
from ..config.broker_config import BrokerConfig
from ..node_view import GROUP, TRANSACTION
from ..server import Broker
from ..topics import TopicError
from .controller import Controller
from .leader_epochs import OffsetForLeaderEpochApi
from .view import ClusterNodeView

__all__ = ["Cluster", "api_key", "error_code"]


class Cluster:
    """``async with Cluster(brokers=3, data_dir=...) as cluster:``; ``cluster.bootstrap`` names every
    broker. ``data_dir`` None: a temporary folder, removed at close. ``port`` 0: free ports; else the
    brokers listen on ``port``, ``port + 1``, ... Other settings are BrokerConfig's."""

    def __init__(self, brokers: int = 3, data_dir: str | Path | None = None, *, port: int = 0,
                 config: BrokerConfig | None = None, **settings: Any) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        self._temporary = data_dir is None and config is None
        if config is None:
            settings.setdefault("default_replication_factor", min(3, brokers))
            config = BrokerConfig(data_dir=Path(data_dir) if data_dir is not None
                                  else Path(tempfile.mkdtemp(prefix="kafkawire-cluster-")), port=port, **settings)
        self.config = config
        self.node_ids = list(range(1, brokers + 1))
        self.nodes: dict[int, Broker] = {}
        self.controller: Controller | None = None
        self.stopped: set[int] = set()

    # ---- lifecycle ------------------------------------------------------------------------------
    def _node_config(self, node: int) -> BrokerConfig:
        base = self.config
        port = base.port + node - 1 if base.port else 0
        return dataclasses.replace(base, node_id=node, port=port,
                                   metrics_port=base.metrics_port if node == self.node_ids[0] else None)

    async def start(self) -> None:
        first = self.node_ids[0]
        owner = Broker(self._node_config(first))
        owner.topics.brokers = len(self.node_ids)
        controller = Controller(self.node_ids, owner.topics, min_insync_replicas=self.config.min_insync_replicas,
                                default_replication_factor=self.config.default_replication_factor)
        self.controller = controller
        controller.address = self._address
        owner.view = ClusterNodeView(controller, first)
        self.nodes[first] = owner
        try:
            await owner.start()
            for node in self.node_ids[1:]:
                broker = Broker(self._node_config(node), over=owner, view=ClusterNodeView(controller, node))
                self.nodes[node] = broker
                await broker.start()
            for node, broker in self.nodes.items():
                assert broker.handlers is not None
                OffsetForLeaderEpochApi(controller, node, broker.handlers.state).install(broker.handlers)
        except BaseException:
            await self.close()
            raise

    def _address(self, node: int, listener: str) -> tuple[str, int] | None:
        broker = self.nodes.get(node)
        if broker is None or listener not in broker.ports:
            return None
        host, port = broker.bootstrap_for(listener).rsplit(":", 1)
        return host, int(port)

    async def close(self) -> None:
        for node in reversed(list(self.nodes)):  # the owner of the shared state last
            await self.nodes[node].close()
        self.nodes.clear()
        if self._temporary:
            shutil.rmtree(self.config.data_dir, ignore_errors=True)

    async def shutdown(self, grace_s: float = 10.0) -> None:
        """Every broker's graceful stop (``Broker.shutdown``), the owner of the shared state last."""
        for node in reversed(list(self.nodes)):
            await self.nodes[node].shutdown(grace_s)
        await self.close()

    async def serve_forever(self) -> None:
        """Wait until cancelled (the brokers serve from their own tasks)."""
        await asyncio.Event().wait()

    async def __aenter__(self) -> "Cluster":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- addresses ------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """Every running broker's address, comma-separated (clients' bootstrap.servers)."""
        return ",".join(self.nodes[node].bootstrap for node in self.node_ids if node not in self.stopped)

    def broker(self, node: int) -> Broker:
        try:
            return self.nodes[node]
        except KeyError:
            raise KeyError(f"no broker {node} (brokers {self.node_ids})") from None

    @property
    def _controller(self) -> Controller:
        if self.controller is None:
            raise RuntimeError("the cluster is not started")
        return self.controller

    # ---- topics ---------------------------------------------------------------------------------
    async def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                           configs: dict[str, str] | None = None) -> None:
        topics = self.broker(self.node_ids[0]).topics
        planned = topics.plan(name, partitions, replication_factor, configs)
        (result,) = await topics.create([planned])
        if isinstance(result, TopicError):
            raise result

    def leader(self, topic: str, partition: int = 0) -> int:
        return self._controller.leader(topic, partition)

    def partition(self, topic: str, partition: int = 0):
        """(leader, leader epoch, replicas, ISR, offline replicas) as Metadata gives them."""
        return self._controller.partition_info(topic, partition)

    def coordinator(self, group: str | None = None, *, transactional_id: str | None = None) -> int:
        if (group is None) == (transactional_id is None):
            raise ValueError("name a group or a transactional id")
        if group is not None:
            return self._controller.coordinator(GROUP, group)
        assert transactional_id is not None
        return self._controller.coordinator(TRANSACTION, transactional_id)

    # ---- faults ---------------------------------------------------------------------------------
    def move_leader(self, topic: str, partition: int = 0, to: int | None = None) -> int:
        """A leader election: ``to`` (default: the next in-sync replica) leads, at the next leader epoch.
        Clients of the old leader get NOT_LEADER_OR_FOLLOWER, or FENCED_LEADER_EPOCH with the old epoch."""
        return self._controller.move_leader(topic, partition, to)

    def set_isr(self, topic: str, partition: int = 0, isr: list[int] | None = None) -> list[int]:
        """Shrink the in-sync replicas (acks=all below min.insync.replicas: NOT_ENOUGH_REPLICAS), or with
        ``isr`` None restore them to every live replica."""
        return self._controller.set_isr(topic, partition, isr)

    async def stop_broker(self, node: int) -> None:
        """The broker stops answering: listeners closed, connections dropped, its leaderships and
        coordinators moved to live brokers."""
        broker = self.broker(node)
        if node in self.stopped:
            return
        self.stopped.add(node)
        self._controller.broker_stopped(node)
        await broker.stop_listening()

    async def start_broker(self, node: int, restore_leaders: bool = True) -> None:
        """The broker listens again on its ports and rejoins the ISRs; with ``restore_leaders`` it takes
        back the leaderships it is the preferred replica of."""
        broker = self.broker(node)
        if node not in self.stopped:
            return
        await broker.resume_listening()
        self.stopped.discard(node)
        self._controller.broker_started(node, restore_leaders)

    def push_request_errors(self, node: int, api: int | str, *errors: int | str) -> None:
        """The next requests of ``api`` (key or name) to ``node`` fail with these error codes (or names),
        one each, in order; "drop" reads a request and never answers it."""
        codes = [error if error == "drop" else error_code(error) for error in errors]
        self.broker(node).faults.push_errors(api_key(api), *codes)

    def fail_next(self, node: int, api: int | str, error: int | str, count: int = 1) -> None:
        self.push_request_errors(node, api, *([error] * count))

    def drop_next(self, node: int, api: int | str, count: int = 1) -> None:
        self.push_request_errors(node, api, *(["drop"] * count))

    def set_latency(self, node: int, rtt_ms: float) -> None:
        """Delay every response of ``node`` by ``rtt_ms``."""
        self.broker(node).faults.set_latency(rtt_ms)

    def set_throttle(self, node: int, bytes_per_second: int) -> None:
        """Send ``node``'s responses at most this fast (0: unlimited)."""
        self.broker(node).faults.set_throttle(bytes_per_second)

    def clear_faults(self, node: int | None = None) -> None:
        for each in ([node] if node is not None else self.node_ids):
            self.broker(each).faults.clear()


def api_key(api: int | str) -> int:
    """An API key from its number or its name (``Produce``, ``"0"``)."""
    if isinstance(api, int):
        return api
    text = api.strip()
    if text.isdigit():
        return int(text)
    try:
        return m.api(text).key
    except (KeyError, ValueError):
        raise ValueError(f"unknown API {text!r} (a name such as Produce, or a key)") from None


def error_code(error: int | str) -> int:
    """An error code from its number or its name (``NOT_LEADER_OR_FOLLOWER``)."""
    if isinstance(error, int):
        return error
    text = error.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(ErrorCode[text.upper()])
    except KeyError:
        raise ValueError(f"unknown error {text!r} (a name such as NOT_LEADER_OR_FOLLOWER, or a code)") from None

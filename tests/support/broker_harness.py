"""Running the reference broker for tests: in a thread with its own event loop (for blocking
clients such as kafka-python and confluent-kafka), and a minimal raw client that speaks the wire
protocol through kafkawire.framing, for tests that need exact control over each request.

Most modules share the pytest plugin's session broker through ``shared_broker`` (tests/conftest.py,
a ``SharedBroker``); a module that needs a broker of its own settings declares
``broker = own_broker(num_partitions=6, ...)``."""
from __future__ import annotations

import contextlib
import socket
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from kafkawire.broker.background import BrokerThread as _BrokerThread
from kafkawire.broker.server import Broker
from kafkawire.framing import Correlator, FrameBuffer
from kafkawire.testing.pytest_plugin import KafkaTestCluster

_T = TypeVar("_T")


class BrokerThread(_BrokerThread):
    """kafkawire.broker.BrokerThread with groups that rebalance at once (tests need no join delay)."""

    def __init__(self, **settings):
        settings.setdefault("group_initial_rebalance_delay_ms", 0)
        super().__init__(**settings)


def own_broker(scope: str = "module", **settings: Any):
    """A ``broker`` fixture of ``scope``: a BrokerThread of ``settings`` on its own temporary folder."""
    @pytest.fixture(scope=scope)
    def broker(tmp_path_factory):
        with BrokerThread(data_dir=tmp_path_factory.mktemp("broker"), **settings) as running:
            yield running
    return broker


class SharedBroker:
    """The plugin's session broker (a one-broker ``KafkaTestCluster``) with BrokerThread's face: ``bootstrap``,
    ``port``, ``broker`` (its Broker) and ``call``. Tests that share it give each test its own topics and groups."""

    def __init__(self, cluster: KafkaTestCluster) -> None:
        self.cluster = cluster
        (node,) = cluster.node_ids
        self.broker: Broker = cluster.cluster.broker(node)

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def node(self) -> str:
        """The broker's id as a BROKER (or BROKER_LOGGER) config resource names it."""
        return str(self.broker.config.node_id)

    @property
    def port(self) -> int:
        port = self.broker.port
        assert port is not None  # bound when the cluster started
        return port

    def call(self, coroutine: Coroutine[Any, Any, _T], timeout: float = 30) -> _T:
        return self.cluster.call(coroutine, timeout)

    def topic(self, partitions: int = 1, **options: Any) -> str:
        """A new topic with a unique name (KafkaTestCluster.topic)."""
        return self.cluster.topic(partitions, **options)


class RawClient:
    """One blocking connection that sends requests and reads their responses, in order."""

    def __init__(self, port: int, client_id: str = "raw-test-client"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlator = Correlator(client_id=client_id)
        self.frames = FrameBuffer()

    def send(self, body, version: int, expects_response: bool | None = None) -> None:
        self.sock.sendall(self.correlator.request(body, version, expects_response))

    def receive(self):
        while True:
            frame = self.frames.next_frame()
            if frame is not None:
                _, _header, response = self.correlator.response(frame)
                return response
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the broker closed the connection")
            self.frames.feed(data)

    def request(self, body, version: int):
        self.send(body, version)
        return self.receive()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""A pytest plugin (entry point ``pytest11``: loaded wherever kafkawire is installed): Kafka brokers in
the test process, on free ports with temporary data, with faults on command.

Fixtures, each a ``KafkaTestCluster``:

- ``kafka_broker``: one broker, new for each test; ``kafka_broker_session``: one for the whole session.
- ``kafka_cluster``: ``--kafka-brokers`` brokers (default 3), new for each test; ``kafka_cluster_session``:
  one for the whole session.

A ``KafkaTestCluster`` has ``bootstrap`` (for ``bootstrap.servers``), ``topic(partitions=1, ...)`` (a new
topic with a unique name, created now), and the faults of ``kafkawire.broker.ClusterThread``:
``move_leader``, ``stop_broker`` / ``start_broker``, ``fail_next`` / ``drop_next`` /
``push_request_errors``, ``set_latency``, ``set_throttle``, ``set_isr``. A session-scoped fixture is shared:
clear what you inject (``clear_faults``) and give each test its own topics.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from ..broker.cluster import ClusterThread

__all__ = ["KafkaTestCluster"]

_names = itertools.count(1)


class KafkaTestCluster(ClusterThread):
    """A ClusterThread with a topic factory."""

    def topic(self, partitions: int = 1, *, name: str | None = None, replication_factor: int = -1,
              configs: dict[str, str] | None = None) -> str:
        """Create a topic (a unique name unless ``name`` is given) and return its name."""
        name = name if name is not None else f"test-topic-{next(_names)}"
        self.create_topic(name, partitions, replication_factor, configs)
        return name


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafkawire", "Kafka brokers in process (kafkawire)")
    group.addoption("--kafka-brokers", type=int, default=None,
                    help="brokers of the kafka_cluster fixtures (default 3; ini: kafka_brokers)")
    parser.addini("kafka_brokers", "brokers of the kafka_cluster fixtures (default 3)", default="3")


def _brokers(config: pytest.Config) -> int:
    option = config.getoption("--kafka-brokers")
    return int(option) if option is not None else int(str(config.getini("kafka_brokers")))


def _running(factory: pytest.TempPathFactory, brokers: int) -> Iterator[KafkaTestCluster]:
    # groups rebalance at once: a test does not wait out group.initial.rebalance.delay.ms
    cluster = KafkaTestCluster(brokers, factory.mktemp("kafka"), group_initial_rebalance_delay_ms=0)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    """One broker for this test."""
    yield from _running(tmp_path_factory, 1)


@pytest.fixture(scope="session")
def kafka_broker_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    """One broker shared by the session's tests."""
    yield from _running(tmp_path_factory, 1)


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    """``--kafka-brokers`` brokers for this test."""
    yield from _running(tmp_path_factory, _brokers(request.config))


@pytest.fixture(scope="session")
def kafka_cluster_session(request: pytest.FixtureRequest,
                          tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    """``--kafka-brokers`` brokers shared by the session's tests."""
    yield from _running(tmp_path_factory, _brokers(request.config))

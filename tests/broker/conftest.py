"""Fixtures shared by the broker tests."""
from __future__ import annotations

import pytest

from support.broker_harness import BrokerThread
from kafkawire.broker.topics import Topic

# Kafka's default max.broker.partitions, as 50 topics of 200 partitions each
LOADED_TOPICS, LOADED_PARTITIONS = 50, 200


@pytest.fixture(scope="session")
def loaded_broker(tmp_path_factory):
    """A broker hosting 10,000 partitions (``LOADED_TOPICS`` topics ``load-0`` ... of
    ``LOADED_PARTITIONS``), created once per session; tests must leave its topics as they found them."""
    running = BrokerThread(data_dir=tmp_path_factory.mktemp("loaded-broker"), auto_create_topics=False,
                           freeze_heap=True).start()  # as the kafkawire broker process
    try:
        async def create():
            topics = running.broker.topics
            results = await topics.create([topics.plan(f"load-{i}", LOADED_PARTITIONS) for i in range(LOADED_TOPICS)])
            assert all(isinstance(result, Topic) for result in results), results
        running.call(create(), timeout=600)
        yield running
    finally:
        running.call(running.broker.close(), timeout=600)  # closing 10,000 logs: more than stop's own wait
        running.stop()

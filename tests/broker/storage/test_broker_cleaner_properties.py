"""The log cleaner's static broker properties (issue 23): ``log.cleaner.*`` in the broker's property
file or ``--override`` are the broker-wide defaults of the topics' cleaner configs (their topic-level
names' synonyms, described as STATIC_BROKER_CONFIG), obeyed by the cleaner; bad values stop the
broker with the key named; ``log.cleaner.io.max.bytes.per.second`` throttles cleaning as Kafka's
Throttler does."""
from __future__ import annotations

import subprocess
import threading

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType

from support.broker_harness import RawClient
from support.broker_process import KAFKAWIRE
from kafkawire import messages as m
from kafkawire.broker.storage.cleaner.throttler import Throttler

from support.fake_clock import FakeClock

TIMEOUT = 15
PROPERTIES = """\
log.cleaner.min.cleanable.ratio=0.05
log.cleaner.delete.retention.ms=1000
log.cleaner.min.compaction.lag.ms=10
log.cleaner.threads=2
log.cleaner.io.max.bytes.per.second=50000000
log.cleaner.backoff.ms=200
"""


def _described(admin, resource_type, name):
    resource = ConfigResource(resource_type, name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def test_cleaner_properties_are_the_topics_defaults(tmp_path, processes):
    config = tmp_path / "server.properties"
    config.write_text(PROPERTIES)
    broker = processes(tmp_path / "data", "--config", str(config),
                       "--override", "log.cleaner.max.compaction.lag.ms=3600000")
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
    admin.create_topics([NewTopic("table", 1, 1, config={"cleanup.policy": "compact",
                                                         "delete.retention.ms": "5000"})])["table"].result(TIMEOUT)
    topic = _described(admin, ResourceType.TOPIC, "table")
    static = ConfigSource.STATIC_BROKER_CONFIG.value
    for name, value in [("min.cleanable.dirty.ratio", "0.05"), ("min.compaction.lag.ms", "10"),
                        ("max.compaction.lag.ms", "3600000")]:
        assert (topic[name].value, topic[name].source) == (value, static), name
    own = topic["delete.retention.ms"]  # the topic's own value wins over the broker default
    assert (own.value, own.source) == ("5000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    # the synonyms in Kafka's order (confluent-kafka keeps one per name, so read them off the wire)
    request = m.DescribeConfigsRequest(include_synonyms=True, resources=[
        m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="table",
                                                         configuration_keys=["delete.retention.ms"])])
    with RawClient(broker.port) as client:
        (result,) = client.request(request, 4).results
    (entry,) = result.configs
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("delete.retention.ms", "5000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.cleaner.delete.retention.ms", "1000", static),
        ("log.cleaner.delete.retention.ms", "86400000", ConfigSource.DEFAULT_CONFIG.value)]

    brokers = _described(admin, ResourceType.BROKER, "0")
    for name, value in [("log.cleaner.min.cleanable.ratio", "0.05"), ("log.cleaner.threads", "2"),
                        ("log.cleaner.backoff.ms", "200"), ("log.cleaner.delete.retention.ms", "1000")]:
        assert (brokers[name].value, brokers[name].source) == (value, static), name
    assert brokers["log.cleaner.dedupe.buffer.size"].source == ConfigSource.DEFAULT_CONFIG.value
    assert brokers["log.cleaner.threads"].is_read_only


@pytest.mark.parametrize("override, message", [
    ("log.cleaner.min.cleanable.ratio=1.5", "log.cleaner.min.cleanable.ratio"),
    ("log.cleaner.delete.retention.ms=-1", "log.cleaner.delete.retention.ms"),
    ("log.cleaner.threads=-1", "log.cleaner.threads"),
    ("log.cleaner.max.compaction.lag.ms=soon", "log.cleaner.max.compaction.lag.ms")])
def test_bad_cleaner_properties_stop_the_broker_with_the_key_named(tmp_path, override, message):
    result = subprocess.run([str(KAFKAWIRE), "broker", "--data-dir", str(tmp_path), "--port", "0",
                             "--override", override], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and message in result.stdout + result.stderr


def test_the_cleaner_obeys_the_broker_defaults(tmp_path):
    from kafkawire.broker.background import BrokerThread
    from kafkawire.broker.config.broker_config import BrokerConfig
    config = BrokerConfig.from_properties({"log.cleaner.min.cleanable.ratio": "0.05",
                                           "log.cleaner.delete.retention.ms": "0",
                                           "log.cleaner.io.max.bytes.per.second": "1000000"},
                                          data_dir=tmp_path, port=0)
    with BrokerThread(config) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic("t", 1, 1, config={"cleanup.policy": "compact"})])["t"].result(TIMEOUT)
        log_config = running.broker.topics.log("t", 0).config  # what the cleaner reads each round
        assert (log_config.min_cleanable_dirty_ratio, log_config.delete_retention_ms) == (0.05, 0)
        assert running.broker.cleaner.cleaner.throttler.bytes_per_second == 1_000_000


def test_the_throttler_keeps_the_average_rate_at_the_limit():
    clock = FakeClock(0.0)
    throttler = Throttler(1000, clock=clock)
    stop = threading.Event()
    waits = []
    stop.wait = lambda seconds: waits.append(seconds) or False  # the worker thread's sleep
    throttler.maybe_throttle(500, stop)
    assert waits == []  # within the check interval
    clock.now = 0.5
    throttler.maybe_throttle(1500, stop)  # 2000 bytes in 0.5 s at 1000 bytes/s: 1.5 s more
    assert waits == [pytest.approx(1.5)]
    clock.now = 2.5
    throttler.maybe_throttle(100, stop)  # under the limit: no wait
    assert waits == [pytest.approx(1.5)] and throttler.slept_s == pytest.approx(1.5)
    with pytest.raises(ValueError):
        Throttler(0)

"""The pytest plugin (kafkawire.testing.pytest_plugin, entry point pytest11): a test file using its
fixtures, run by pytest in a subprocess, as a user's suite runs it."""
from __future__ import annotations

import tomllib

from support.paths import REPO
from support.plugin_runs import run_pytest

USER_TESTS = '''
import confluent_kafka
import pytest


def test_broker_fixture_produces_and_consumes(kafka_broker):
    topic = kafka_broker.topic(partitions=2)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap})
    producer.produce(topic, b"hello", partition=1)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "g",
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    message = None
    while message is None or message.error():
        message = consumer.poll(1)
    consumer.close()
    assert message.value() == b"hello"


def test_cluster_fixture_has_the_asked_brokers_and_faults(kafka_cluster):
    assert len(kafka_cluster.bootstrap.split(",")) == 2
    topic = kafka_cluster.topic(partitions=1)
    leader = kafka_cluster.leader(topic, 0)
    kafka_cluster.fail_next(leader, "Produce", "TOPIC_AUTHORIZATION_FAILED")
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_cluster.bootstrap})
    errors = []
    producer.produce(topic, b"x", on_delivery=lambda error, message: errors.append(error))
    producer.flush(10)
    assert errors[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert kafka_cluster.move_leader(topic, 0) != leader


def test_session_fixture_is_shared(kafka_broker_session):
    assert kafka_broker_session.bootstrap


@pytest.mark.parametrize("round", [1, 2])
def test_function_fixtures_are_new_each_test(kafka_broker, kafka_broker_session, round):
    bootstraps = pytest.bootstraps = getattr(pytest, "bootstraps", [])
    bootstraps.append((kafka_broker.bootstrap, kafka_broker_session.bootstrap))
    if round == 2:
        (broker_1, session_1), (broker_2, session_2) = bootstraps
        assert session_1 == session_2 and broker_1 != broker_2
'''


def test_entry_point_names_the_plugin():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"kafkawire": "kafkawire.testing.pytest_plugin"}


def test_fixtures_in_a_users_test_file(tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    done = run_pytest(tmp_path, "--kafka-brokers", "2", "test_user.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "5 passed" in done.stdout, done.stdout[-3000:]

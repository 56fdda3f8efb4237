"""Metadata answered from the metadata cache (kafkawire/broker/metadata_cache.py): the assembled bytes are
exactly the codec's at every served version, and each change to a topic (a leader or ISR move, a stopped
broker, partitions added, a topic deleted and created again) shows in the next answer."""
from __future__ import annotations

import pytest

from support.broker_harness import BrokerThread, RawClient
from kafkawire import messages as m
from kafkawire.broker import ClusterThread
from kafkawire.broker.dispatch.versions import SUPPORTED_VERSIONS
from kafkawire.broker.security.acls import TOPIC_OPERATIONS
from kafkawire.error_codes import ErrorCode

_FIRST, _LAST = SUPPORTED_VERSIONS[m.ApiKey.METADATA]
_NO_OPERATIONS = -(1 << 31)


def _named(*names):
    return [m.MetadataRequest.MetadataRequestTopic(name=name) for name in names]


def _request(version: int, topics, operations: bool = False) -> m.MetadataRequest:
    request = m.MetadataRequest(topics=topics)
    if version >= 4:
        request.allow_auto_topic_creation = False
    if 8 <= version <= 10:
        request.include_cluster_authorized_operations = False
    if version >= 8:
        request.include_topic_authorized_operations = operations
    return request


def _raw_answer(client: RawClient, body, version: int) -> tuple[bytes, m.MetadataResponse]:
    """The response body's bytes as the broker sent them, and their decoding."""
    client.send(body, version)
    while (frame := client.frames.next_frame()) is None:
        client.frames.feed(client.sock.recv(1 << 16))
    _, header, response = client.correlator.response(frame)
    header_size = 4 if version < 9 else 5  # correlation id (and an empty tag section from v9)
    return bytes(frame[header_size:]), response


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("metadata-cache"), auto_create_topics=False) as running:
        async def create():
            topics = running.broker.topics
            await topics.create([topics.plan("alpha", 3), topics.plan("beta", 1), topics.plan("__internal", 2)])
        running.call(create())
        yield running


@pytest.mark.parametrize("version", range(_FIRST, _LAST + 1))
def test_assembled_answers_are_the_codecs_bytes_at_every_version(broker, version):
    with RawClient(broker.port) as client:
        for topics in (None, _named("beta", "missing", "alpha")) if version else (_named("beta", "missing"),):
            for _ in range(2):  # a cold cache, then a warm one
                raw, response = _raw_answer(client, _request(version, topics), version)
                assert response.encode(version) == raw
        names = [t.name for t in response.topics]
        assert names == ["beta", "missing", "alpha"] if version else ["beta", "missing"]
        by_name = {t.name: t for t in response.topics}
        assert by_name["missing"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert [p.partition_index for p in by_name["beta"].partitions] == [0]
        if version:
            assert [p.partition_index for p in by_name["alpha"].partitions] == [0, 1, 2]
        if version >= 1:
            everything = client.request(_request(version, None), version)
            assert {t.name: t.is_internal for t in everything.topics} == {
                "alpha": False, "beta": False, "__internal": True}
        if version >= 10:
            ids = {t.name: t.topic_id for t in client.request(_request(version, None), version).topics}
            assert ids["alpha"] == broker.broker.topics.get("alpha").topic_id


@pytest.mark.parametrize("version", [8, 9, 12, _LAST])
def test_topic_authorized_operations_only_when_asked(broker, version):
    everything = sum(1 << operation for operation in TOPIC_OPERATIONS)  # no authorizer: every operation
    with RawClient(broker.port) as client:
        raw, asked = _raw_answer(client, _request(version, _named("alpha", "missing"), operations=True), version)
        assert asked.encode(version) == raw
        plain = client.request(_request(version, _named("alpha", "missing")), version)
    assert [t.topic_authorized_operations for t in asked.topics] == [everything, everything]
    assert [t.topic_authorized_operations for t in plain.topics] == [_NO_OPERATIONS, _NO_OPERATIONS]


def test_each_change_to_a_topic_shows_in_the_next_answer(tmp_path):
    with ClusterThread(brokers=3, data_dir=tmp_path, group_initial_rebalance_delay_ms=0) as cluster:
        cluster.create_topic("moving", partitions=2)
        def partitions(name="moving"):
            with RawClient(cluster.cluster.broker(cluster.leader("moving", 0)).port) as client:
                topic = client.request(_request(12, None), 12).topics
            return {p.partition_index: p for t in topic if t.name == name for p in t.partitions}

        before = partitions()[0]
        leader = cluster.move_leader("moving", 0)
        after = partitions()[0]
        assert (after.leader_id, after.leader_epoch) == (leader, before.leader_epoch + 1) and leader != before.leader_id

        follower = next(n for n in after.replica_nodes if n != leader)
        cluster.set_isr("moving", 0, [leader])
        assert list(partitions()[0].isr_nodes) == [leader]
        cluster.set_isr("moving", 0, None)

        cluster.stop_broker(follower)
        assert follower in partitions()[0].offline_replicas
        cluster.start_broker(follower)
        assert list(partitions()[0].offline_replicas) == []

        with RawClient(cluster.cluster.broker(1).port) as client:
            grown = client.request(m.CreatePartitionsRequest(topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(
                name="moving", count=5, assignments=None)], timeout_ms=5000, validate_only=False), 3)
            assert grown.results[0].error_code == 0
            assert sorted(partitions()) == [0, 1, 2, 3, 4]
            old_id = client.request(_request(12, _named("moving")), 12).topics[0].topic_id
            deleted = client.request(m.DeleteTopicsRequest(topic_names=["moving"], timeout_ms=5000), 5)
            assert deleted.responses[0].error_code == 0
            assert client.request(_request(12, _named("moving")), 12).topics[0].error_code == \
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            cluster.create_topic("moving", partitions=1)
            again = client.request(_request(12, _named("moving")), 12).topics[0]
        assert again.error_code == 0 and again.topic_id != old_id and len(again.partitions) == 1

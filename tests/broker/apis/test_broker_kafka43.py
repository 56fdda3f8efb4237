"""The broker at Kafka 4.3's newest versions, each with its semantics, over a socket: Produce v13 by topic
id (UNKNOWN_TOPIC_ID), Metadata v13, OffsetCommit/OffsetFetch v10 by topic id, ListOffsets v11's
EARLIEST_PENDING_UPLOAD, DescribeGroups v6's GROUP_ID_NOT_FOUND; a Fetch v18 written by kio (that is,
by a Kafka 4.3 client) answered correctly; Fetch v19 (KIP-1178) by default and exactly Kafka 4.3's
ranges with ``upstream_versions`` (``kafkawire broker --upstream-versions``)."""
from __future__ import annotations

import io
import json
import socket
import struct
import time
import uuid

import pytest

from support.broker_harness import BrokerThread, RawClient, own_broker
from kafkawire import messages as m
from kafkawire.broker.dispatch.versions import SERVED_APIS, SUPPORTED_VERSIONS, UPSTREAM_VERSIONS
from kafkawire.codec.primitives import ZERO_UUID
from kafkawire.error_codes import ErrorCode
from kafkawire.records import RecordBatchBuilder, iter_records

from support.paths import UPSTREAM_SPECS
UNKNOWN_ID = uuid.UUID(int=0xDEAD)


broker = own_broker(auto_create_topics=False)


@pytest.fixture(scope="module")
def client(broker):
    with RawClient(broker.port) as raw:
        yield raw


@pytest.fixture(scope="module")
def topic(broker, client):
    """A topic "t43" of two partitions with three records in partition 0; its id."""
    request = m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name="t43", num_partitions=2, replication_factor=1)], timeout_ms=5000)
    (result,) = client.request(request, 7).topics
    assert result.error_code == 0
    produce = _produce(result.topic_id, 0, [b"a", b"b", b"c"])
    (answer,) = client.request(produce, 13).responses
    assert answer.partition_responses[0].error_code == 0
    return result.topic_id


def _produce(topic_id, partition: int, values) -> m.ProduceRequest:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(value, timestamp=int(time.time() * 1000))
    return m.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[m.ProduceRequest.TopicProduceData(
        topic_id=topic_id, partition_data=[m.ProduceRequest.PartitionProduceData(index=partition,
                                                                                 records=builder.build())])])


def test_produce_v13_names_topics_by_id(client, topic):
    (answer,) = client.request(_produce(topic, 1, [b"x"]), 13).responses
    assert answer.topic_id == topic and answer.name == ""  # the response names the topic by id too
    partition = answer.partition_responses[0]
    assert (partition.index, partition.error_code, partition.base_offset) == (1, 0, 0)
    (unknown,) = client.request(_produce(UNKNOWN_ID, 0, [b"y"]), 13).responses
    assert unknown.topic_id == UNKNOWN_ID
    assert unknown.partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    # v12 still names topics: the same append by name
    request = _produce(ZERO_UUID, 1, [b"z"])
    request.topic_data[0].name = "t43"
    (named,) = client.request(request, 12).responses
    assert named.name == "t43" and named.partition_responses[0].base_offset == 1


def test_metadata_v13_has_a_top_level_error_code_and_finds_topics_by_id(client, topic):
    response = client.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(
        name=None, topic_id=topic)]), 13)
    assert response.error_code == 0
    (found,) = response.topics
    assert (found.name, found.topic_id, len(found.partitions)) == ("t43", topic, 2)


def test_offset_commit_and_fetch_v10_by_topic_id(client, topic):
    commit = m.OffsetCommitRequest(group_id="g43", generation_id_or_member_epoch=-1, member_id="", topics=[
        m.OffsetCommitRequest.OffsetCommitRequestTopic(topic_id=topic, partitions=[
            m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=2,
                                                              committed_metadata="m")]),
        m.OffsetCommitRequest.OffsetCommitRequestTopic(topic_id=UNKNOWN_ID, partitions=[
            m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])
    response = client.request(commit, 10)
    by_id = {t.topic_id: [(p.partition_index, p.error_code) for p in t.partitions] for t in response.topics}
    assert by_id == {topic: [(0, 0)], UNKNOWN_ID: [(0, ErrorCode.UNKNOWN_TOPIC_ID)]}

    Group, Topics = m.OffsetFetchRequest.OffsetFetchRequestGroup, m.OffsetFetchRequest.OffsetFetchRequestTopics
    fetch = m.OffsetFetchRequest(groups=[Group(group_id="g43", topics=[
        Topics(topic_id=topic, partition_indexes=[0, 1]), Topics(topic_id=UNKNOWN_ID, partition_indexes=[0])])])
    (group,) = client.request(fetch, 10).groups
    got = {(t.topic_id, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
           for t in group.topics for p in t.partitions}
    assert got == {(topic, 0): (2, "m", 0), (topic, 1): (-1, "", 0), (UNKNOWN_ID, 0): (-1, "", ErrorCode.UNKNOWN_TOPIC_ID)}
    # every committed topic (a null list): by id
    (group,) = client.request(m.OffsetFetchRequest(groups=[Group(group_id="g43", topics=None)]), 10).groups
    assert [(t.topic_id, [p.committed_offset for p in t.partitions]) for t in group.topics] == [(topic, [2])]
    # v9 still by name
    old = m.OffsetFetchRequest(groups=[Group(group_id="g43", topics=[
        m.OffsetFetchRequest.OffsetFetchRequestTopics(name="t43", partition_indexes=[0])])])
    (group,) = client.request(old, 9).groups
    assert [(t.name, t.partitions[0].committed_offset) for t in group.topics] == [("t43", 2)]


def test_list_offsets_v11_earliest_pending_upload(client, topic):
    def offset(timestamp, version=11):
        request = m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
            name="t43", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0,
                                                                             timestamp=timestamp)])])
        (result,) = client.request(request, version).topics[0].partitions
        assert result.error_code == 0
        return result.offset

    assert offset(-1) == 3 and offset(-2) == 0
    assert offset(-6) == -1  # no remote tier on this topic: nothing is pending upload, as in Kafka


def test_earliest_pending_upload_on_a_tiered_log(tmp_path):
    with BrokerThread(data_dir=tmp_path / "data", remote_dir=tmp_path / "remote", auto_create_topics=False,
                      segment_bytes=400) as tiered, RawClient(tiered.port) as client:
        request = m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name="r", num_partitions=1, replication_factor=1, configs=[
                m.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in
                {"remote.storage.enable": "true", "local.retention.bytes": "1"}.items()])], timeout_ms=5000)
        (created,) = client.request(request, 7).topics
        log = tiered.broker.topics.log("r", 0)

        def pending():
            request = m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
                name="r", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-6)])])
            return client.request(request, 11).topics[0].partitions[0].offset

        assert pending() == 0  # nothing uploaded yet: everything from the log start is pending
        for _ in range(4):
            client.request(_produce(created.topic_id, 0, [b"v" * 300]), 13)
        tiered.loop.call_soon_threadsafe(lambda: log.apply_retention(int(time.time() * 1000)))
        deadline = time.monotonic() + 5
        while log.highest_offset_in_remote_storage < 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert log.highest_offset_in_remote_storage >= 0
        assert pending() == log.highest_offset_in_remote_storage + 1


def test_describe_groups_v6_says_group_id_not_found(client):
    (group,) = client.request(m.DescribeGroupsRequest(groups=["no-such-group"]), 6).groups
    assert (group.error_code, group.group_state) == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead")
    assert group.error_message == "Group no-such-group not found."
    (group,) = client.request(m.DescribeGroupsRequest(groups=["no-such-group"]), 5).groups
    assert (group.error_code, group.group_state) == (0, "Dead")


def _kio_fetch_v18(topic_id, partition_max_bytes: int) -> bytes:
    """A Fetch v18 request frame whose header and body kio 0.6.5 (generated from Kafka 4.3.1) wrote."""
    import datetime

    from kio.schema.fetch.v18 import request as kio_fetch
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_writer
    from kio.static.primitive import i8, i16, i32, i64

    body = kio_fetch.FetchRequest(
        cluster_id=None, replica_state=kio_fetch.ReplicaState(replica_id=i32(-1), replica_epoch=i64(-1)),
        max_wait=datetime.timedelta(milliseconds=0), min_bytes=i32(1), max_bytes=i32(1 << 20),
        isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(kio_fetch.FetchTopic(topic_id=topic_id, partitions=(kio_fetch.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(1), last_fetched_epoch=i32(-1),
            log_start_offset=i64(-1), partition_max_bytes=i32(partition_max_bytes), replica_directory_id=None,
            high_watermark=i64(-1)),)),),  # a non-default HighWatermark: KIP-1166's tag 1 is on the wire
        forgotten_topics_data=(), rack_id="")
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, RequestHeader(request_api_key=i16(1), request_api_version=i16(18),
                                                       correlation_id=i32(99), client_id="kio"))
    entity_writer(kio_fetch.FetchRequest)(buffer, body)
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


def _read_frame(sock) -> bytes:
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data
    return exactly(struct.unpack(">i", exactly(4))[0])


def test_fetch_v18_written_by_kio_is_answered(broker, topic):
    pytest.importorskip("kio")
    frame = _kio_fetch_v18(topic, 1 << 20)
    # the bytes really are upstream's v18: kafkawire reads them with KIP-1166's HighWatermark, not KIP-1178's field
    body = m.FetchRequest.decode(frame[4 + 14:], 18, exact=True)  # after the size and the v2 header
    assert body.topics[0].partitions[0].high_watermark == -1
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(frame)
        data = _read_frame(sock)
    assert struct.unpack_from(">i", data)[0] == 99
    response = m.FetchResponse.decode(data[5:], 18, exact=True)  # response header v1: id and empty tags
    assert response.error_code == 0
    (answer,) = response.responses
    assert answer.topic_id == topic
    (partition,) = answer.partitions
    assert (partition.error_code, partition.high_watermark) == (0, 3)
    assert [r.value for r in iter_records(partition.records)] == [b"a", b"b", b"c"]  # the batch holding offset 1


def test_default_and_upstream_versions():
    assert SUPPORTED_VERSIONS[1] == (4, 19) and UPSTREAM_VERSIONS[1] == (4, 18)
    assert {k: v for k, v in SUPPORTED_VERSIONS.items() if k != 1} == {
        k: v for k, v in UPSTREAM_VERSIONS.items() if k != 1}
    assert SUPPORTED_VERSIONS[0] == (3, 13) and SUPPORTED_VERSIONS[3] == (0, 13)
    assert SUPPORTED_VERSIONS[22] == (0, 5)  # InitProducerId v6 is unstable in 4.3: not advertised


@pytest.mark.skipif(not UPSTREAM_SPECS.is_dir(), reason=f"no upstream specs at {UPSTREAM_SPECS}")
def test_upstream_versions_are_kafka_43s_ranges(tmp_path):
    """``upstream_versions``: each served API advertised at exactly the range a Kafka 4.3 broker advertises
    (the request spec's validVersions, its latest held back where the spec marks it unstable)."""
    from codegen.parse import strip_comments

    expected = {}
    for path in UPSTREAM_SPECS.glob("*Request.json"):
        spec = json.loads(strip_comments(path.read_text()))
        if spec.get("apiKey") in SERVED_APIS:
            low, _, high = spec["validVersions"].partition("-")
            high = int(high or low) - (1 if spec.get("latestVersionUnstable") else 0)
            expected[spec["apiKey"]] = (int(low), high)
    with BrokerThread(data_dir=tmp_path / "data", upstream_versions=True) as upstream, \
            RawClient(upstream.port) as client:
        advertised = client.request(m.ApiVersionsRequest(), 3).api_keys
        assert {k.api_key: (k.min_version, k.max_version) for k in advertised} == expected
        # and a v19 Fetch is refused there, as Kafka 4.3 would
        with pytest.raises(ConnectionError):
            client.request(m.FetchRequest(max_wait_ms=0), 19)


def test_default_broker_advertises_fetch_v19(broker, client):
    advertised = {k.api_key: (k.min_version, k.max_version) for k in client.request(m.ApiVersionsRequest(), 4).api_keys}
    assert advertised == SUPPORTED_VERSIONS and advertised[1] == (4, 19)


def test_cli_broker_upstream_versions_flag(tmp_path):
    """``kafkawire broker --upstream-versions`` advertises Kafka 4.3's ranges; without it, Fetch v19."""
    import subprocess
    import sys

    for flag, fetch in (["--upstream-versions"], (4, 18)), ([], (4, 19)):
        command = [sys.executable, "-m", "kafkawire.cli", "broker", "--data-dir", str(tmp_path / f"d{len(flag)}"),
                   "--port", "0", *flag]
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
            try:
                line = process.stdout.readline()  # "kafkawire broker on HOST:PORT (data in DIR)"
                port = int(line.split()[3].rsplit(":", 1)[1])
                with RawClient(port) as client:
                    advertised = {k.api_key: (k.min_version, k.max_version)
                                  for k in client.request(m.ApiVersionsRequest(), 3).api_keys}
                assert advertised[1] == fetch
                assert advertised == (UPSTREAM_VERSIONS if flag else SUPPORTED_VERSIONS)
            finally:
                process.terminate()


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_v10_v11_refuse_topic_ids_and_null_names(client, topic, version):
    """Those versions have the fields but not the feature: INVALID_REQUEST on every topic, as Kafka answers."""
    Topic = m.MetadataRequest.MetadataRequestTopic
    response = client.request(m.MetadataRequest(topics=[Topic(name=None), Topic(name="t43", topic_id=topic)]),
                              version)
    assert [(t.error_code, t.name) for t in response.topics] == [(ErrorCode.INVALID_REQUEST, ""),
                                                                 (ErrorCode.INVALID_REQUEST, "t43")]
    (found,) = client.request(m.MetadataRequest(topics=[Topic(name="t43")]), version).topics
    assert (found.error_code, found.topic_id) == (0, topic)

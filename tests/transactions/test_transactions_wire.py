"""The transaction APIs on the wire, request by request, against a running broker: what Kafka answers
for transactional produce (KIP-890 verification and implicit adds), the last stable offset and the
aborted transactions a read_committed fetch gets, transactional offsets, markers, the describe and
list APIs, and the features ApiVersions announces."""
from __future__ import annotations

import itertools
import time

import pytest

from kafkawire import messages as m
from kafkawire.error_codes import ErrorCode as E
from kafkawire.records import RecordBatchBuilder

from support.broker_harness import BrokerThread, RawClient
from support.broker_wire import create_topic

_names = itertools.count()


@pytest.fixture
def client(shared_broker):
    with RawClient(shared_broker.port) as raw:
        yield raw


@pytest.fixture
def topic(client):
    name = f"txn-{next(_names)}"
    create_topic(client, name, 2)
    return name


def batch(values, producer_id=-1, epoch=-1, sequence=-1, transactional=False) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                 transactional=transactional)
    now = time.time_ns() // 1_000_000
    for value in values:
        builder.append(value, timestamp=now)
    return builder.build()


def produce(client, topic, partition, records, version=9, transactional_id=None):
    request = m.ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
            m.ProduceRequest.PartitionProduceData(index=partition, records=records)])])
    return client.request(request, version).responses[0].partition_responses[0]


def fetch(client, topic, partition, offset=0, isolation_level=1):
    request = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                             isolation_level=isolation_level, session_id=0, session_epoch=-1, topics=[
                                 m.FetchRequest.FetchTopic(topic=topic, partitions=[m.FetchRequest.FetchPartition(
                                     partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20,
                                     current_leader_epoch=-1, log_start_offset=-1)])],
                             forgotten_topics_data=[], rack_id="")
    return client.request(request, 12).responses[0].partitions[0]


def init(client, transactional_id, timeout_ms=60_000):
    response = client.request(m.InitProducerIdRequest(transactional_id=transactional_id,
                                                      transaction_timeout_ms=timeout_ms, producer_id=-1,
                                                      producer_epoch=-1), 4)
    assert response.error_code == E.NONE, response
    return response.producer_id, response.producer_epoch


def add_partitions(client, transactional_id, pid, epoch, topic, partitions, version=3):
    request = m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
            m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))])
    response = client.request(request, version)
    return {r.partition_index: r.partition_error_code for t in response.results_by_topic_v3_and_below
            for r in t.results_by_partition}


def end(client, transactional_id, pid, epoch, commit, version=4):
    return client.request(m.EndTxnRequest(transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch,
                                          committed=commit), version)


def list_offset(client, topic, partition, isolation_level):
    request = m.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        m.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            m.ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=-1)])])
    return client.request(request, 7).topics[0].partitions[0].offset


def test_a_transactional_id_with_plain_batches_is_accepted(client, topic):
    # kio's integration test does this; Kafka accepts it (only transactional batches need the id)
    response = produce(client, topic, 0, batch([b"plain"]), transactional_id="kio-style")
    assert response.error_code == E.NONE


def test_transactional_batches_without_a_transactional_id_are_refused(client, topic):
    pid, epoch = init(client, f"no-id-{topic}")
    response = produce(client, topic, 0, batch([b"x"], pid, epoch, 0, transactional=True))
    assert response.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@pytest.mark.parametrize("version, error", [(9, E.INVALID_TXN_STATE), (11, E.TRANSACTION_ABORTABLE)])
def test_writes_to_a_partition_not_in_the_transaction_are_refused(client, topic, version, error):
    tid = f"unadded-{topic}"
    pid, epoch = init(client, tid)
    assert add_partitions(client, tid, pid, epoch, topic, [0]) == {0: E.NONE}
    assert produce(client, topic, 0, batch([b"in"], pid, epoch, 0, True), version, tid).error_code == E.NONE
    response = produce(client, topic, 1, batch([b"out"], pid, epoch, 0, True), version, tid)
    assert response.error_code == error
    assert fetch(client, topic, 1, isolation_level=0).high_watermark == 0  # nothing was written


def test_commit_the_lso_and_read_committed(client, topic):
    tid = f"commit-{topic}"
    pid, epoch = init(client, tid)
    produce(client, topic, 0, batch([b"before"]))
    add_partitions(client, tid, pid, epoch, topic, [0])
    assert produce(client, topic, 0, batch([b"t1", b"t2"], pid, epoch, 0, True), 9, tid).error_code == E.NONE
    open_read = fetch(client, topic, 0)
    assert (open_read.high_watermark, open_read.last_stable_offset) == (3, 1)
    assert list_offset(client, topic, 0, 1) == 1 and list_offset(client, topic, 0, 0) == 3
    assert end(client, tid, pid, epoch, True).error_code == E.NONE
    done = fetch(client, topic, 0)
    assert (done.high_watermark, done.last_stable_offset) == (4, 4)  # the marker takes offset 3
    assert not done.aborted_transactions


def test_abort_lists_the_aborted_transaction_for_read_committed(client, topic):
    tid = f"abort-{topic}"
    pid, epoch = init(client, tid)
    add_partitions(client, tid, pid, epoch, topic, [0])
    produce(client, topic, 0, batch([b"a1", b"a2"], pid, epoch, 0, True), 9, tid)
    assert end(client, tid, pid, epoch, False).error_code == E.NONE
    produce(client, topic, 0, batch([b"after"]))
    committed = fetch(client, topic, 0, isolation_level=1)
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(pid, 0)]
    assert committed.last_stable_offset == committed.high_watermark == 4
    uncommitted = fetch(client, topic, 0, isolation_level=0)
    assert uncommitted.aborted_transactions is None or list(uncommitted.aborted_transactions) == []


def test_transaction_version_2_adds_partitions_and_bumps_the_epoch(client, topic):
    tid = f"tv2-{topic}"
    pid, epoch = init(client, tid)
    # Produce v12: no AddPartitionsToTxn, the write adds the partition
    assert produce(client, topic, 1, batch([b"v2"], pid, epoch, 0, True), 12, tid).error_code == E.NONE
    described = client.request(m.DescribeTransactionsRequest(transactional_ids=[tid]), 0).transaction_states[0]
    assert (described.transaction_state, [(t.topic, list(t.partitions)) for t in described.topics]) == \
        ("Ongoing", [(topic, [1])])
    response = end(client, tid, pid, epoch, True, version=5)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (E.NONE, pid, epoch + 1)
    # the old epoch is fenced; the new one starts at sequence 0
    assert produce(client, topic, 1, batch([b"zombie"], pid, epoch, 1, True), 12, tid).error_code == \
        E.INVALID_PRODUCER_EPOCH
    assert produce(client, topic, 1, batch([b"next"], pid, epoch + 1, 0, True), 12, tid).error_code == E.NONE


def test_transactional_offsets_are_visible_only_after_commit(client, topic):
    tid, group = f"offsets-{topic}", f"group-{topic}"
    pid, epoch = init(client, tid)

    def txn_commit(offset, version=3):
        request = m.TxnOffsetCommitRequest(
            transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=-1,
            member_id="", group_instance_id=None, topics=[m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                name=topic, partitions=[m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                    committed_metadata="")])])
        return client.request(request, version).topics[0].partitions[0].error_code

    def committed(require_stable=False):
        request = m.OffsetFetchRequest(group_id=group, topics=[m.OffsetFetchRequest.OffsetFetchRequestTopic(
            name=topic, partition_indexes=[0])], require_stable=require_stable)
        partition = client.request(request, 7).topics[0].partitions[0]
        return partition.committed_offset, partition.error_code

    # without AddOffsetsToTxn the group's offsets partition is not in the transaction
    assert txn_commit(5) == E.INVALID_TXN_STATE
    add = client.request(m.AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                  group_id=group), 3)
    assert add.error_code == E.NONE
    assert txn_commit(5) == E.NONE
    assert committed() == (-1, E.NONE)
    assert committed(require_stable=True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    assert end(client, tid, pid, epoch, True).error_code == E.NONE
    assert committed(require_stable=True) == (5, E.NONE)
    # an aborted transaction's offsets go
    client.request(m.AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                            group_id=group), 3)
    assert txn_commit(9) == E.NONE
    assert end(client, tid, pid, epoch, False).error_code == E.NONE
    assert committed() == (5, E.NONE)


def test_describe_producers_and_list_transactions(client, topic):
    tid = f"described-{topic}"
    pid, epoch = init(client, tid)
    add_partitions(client, tid, pid, epoch, topic, [0])
    produce(client, topic, 0, batch([b"a", b"b"], pid, epoch, 0, True), 9, tid)
    producers = client.request(m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(
        name=topic, partition_indexes=[0, 7])]), 0).topics[0].partitions
    assert producers[1].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    (state,) = [p for p in producers[0].active_producers if p.producer_id == pid]
    assert (state.producer_epoch, state.last_sequence, state.current_txn_start_offset) == (epoch, 1, 0)
    listed = client.request(m.ListTransactionsRequest(state_filters=["Ongoing", "Bogus"], producer_id_filters=[pid],
                                                      duration_filter=-1), 1)
    assert list(listed.unknown_state_filters) == ["Bogus"]
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [(tid, "Ongoing")]
    missing = client.request(m.DescribeTransactionsRequest(transactional_ids=["never-seen"]), 0)
    assert missing.transaction_states[0].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    end(client, tid, pid, epoch, False)


def test_write_txn_markers_ends_a_producers_transaction(client, topic):
    tid = f"markers-{topic}"
    pid, epoch = init(client, tid)
    add_partitions(client, tid, pid, epoch, topic, [1])
    produce(client, topic, 1, batch([b"m"], pid, epoch, 0, True), 9, tid)
    assert fetch(client, topic, 1).last_stable_offset == 0
    request = m.WriteTxnMarkersRequest(markers=[m.WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=1000,
        topics=[m.WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=[1])])])
    result = client.request(request, 1).markers[0].topics[0].partitions[0]
    assert result.error_code == E.NONE
    after = fetch(client, topic, 1)
    assert after.last_stable_offset == after.high_watermark == 2
    assert [a.producer_id for a in after.aborted_transactions] == [pid]


def test_verify_only_add_partitions(client, topic):
    tid = f"verify-{topic}"
    pid, epoch = init(client, tid)
    add_partitions(client, tid, pid, epoch, topic, [0])
    Txn = m.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    request = m.AddPartitionsToTxnRequest(transactions=[Txn(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=True, topics=[
            m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0, 1])])])
    response = client.request(request, 5)
    results = {r.partition_index: r.partition_error_code
               for r in response.results_by_transaction[0].topic_results[0].results_by_partition}
    assert (response.error_code, results) == (E.NONE, {0: E.NONE, 1: E.TRANSACTION_ABORTABLE})
    end(client, tid, pid, epoch, False)


def test_find_coordinator_for_a_transactional_id(client, shared_broker):
    response = client.request(m.FindCoordinatorRequest(key="any-transactional-id", key_type=1), 3)
    assert (response.error_code, response.port) == (E.NONE, shared_broker.port)


def test_api_versions_announce_transaction_version_2(client):
    response = client.request(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    features = {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features}
    assert features["transaction.version"] == (2, 2)
    versions = {k.api_key: k.max_version for k in response.api_keys}
    assert versions[26] == 5 and versions[0] >= 12


def test_transaction_version_1_caps_the_kip_890_versions(tmp_path):
    with BrokerThread(data_dir=tmp_path, transaction_version=1) as old, RawClient(old.port) as raw:
        response = raw.request(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        versions = {k.api_key: k.max_version for k in response.api_keys}
        assert (versions[0], versions[26], versions[28]) == (11, 4, 4)
        assert {f.name: f.max_version_level for f in response.finalized_features}["transaction.version"] == 1

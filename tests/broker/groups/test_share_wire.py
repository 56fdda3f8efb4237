"""Share groups over the wire, request by request: share sessions and their errors, MaxRecords and
BatchSize, forgotten partitions, acknowledgements by the wrong member, the share groups in
ListGroups and ShareGroupDescribe, and DescribeShareGroupOffsets' start offsets and lags."""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from support.broker_harness import BrokerThread, RawClient
from support.broker_wire import create_topic, produce
from kafkawire import messages as m
from kafkawire.error_codes import ErrorCode
from kafkawire.records import RecordBatchBuilder, iter_batches

FETCH_V = 2  # ShareFetch and ShareAcknowledge v2: ShareAcquireMode, IsRenewAck
RECORD_LIMIT = 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("share-wire") / "data",
                      share_auto_offset_reset="earliest") as running:
        yield running


@pytest.fixture
def client(broker):
    with RawClient(broker.port) as raw:
        yield raw


_topics = iter(range(1000))


def _topic(broker, client, records: int) -> uuid.UUID:
    name = f"wire-{next(_topics)}"
    create_topic(client, name, 1)
    for i in range(records):  # one record a batch
        builder = RecordBatchBuilder()
        builder.append(f"v{i}".encode())
        assert produce(client, name, 0, builder.build()).error_code == 0
    return broker.broker.topics.get(name).topic_id


def _fetch(client, member, epoch, topic_id=None, *, acks=None, forgotten=None, max_records=500, batch_size=500,
           mode=0, group="wire", max_wait_ms=0):
    Request = m.ShareFetchRequest
    topics = []
    if topic_id is not None:
        batches = [Request.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=t)
                   for f, l, t in acks or ()]
        topics = [Request.FetchTopic(topic_id=topic_id, partitions=[
            Request.FetchPartition(partition_index=0, acknowledgement_batches=batches)])]
    request = Request(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
                      max_bytes=1 << 20, max_records=max_records, batch_size=batch_size, share_acquire_mode=mode,
                      topics=topics, forgotten_topics_data=[
                          Request.ForgottenTopic(topic_id=forgotten, partitions=[0])] if forgotten else [])
    return client.request(request, FETCH_V)


def _acquired(response) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in response.responses for p in t.partitions for a in p.acquired_records]


def test_share_session_epochs(broker, client):
    topic_id = _topic(broker, client, 2)
    assert _fetch(client, "m1", 1, topic_id).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    opened = _fetch(client, "m1", 0, topic_id, acks=[(0, 0, [1])])
    assert opened.error_code == ErrorCode.INVALID_REQUEST  # no acknowledgements when a session opens
    assert _acquired(_fetch(client, "m1", 0, topic_id)) == [(0, 1, 1)]
    assert _fetch(client, "m1", 5).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    acked = _fetch(client, "m1", 1, topic_id, acks=[(0, 1, [1])])
    assert acked.error_code == 0
    assert [p.acknowledge_error_code for t in acked.responses for p in t.partitions] == [0]
    acknowledge = m.ShareAcknowledgeRequest(group_id="wire", member_id="m1", share_session_epoch=0)
    assert client.request(acknowledge, FETCH_V).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    acknowledge.share_session_epoch = -1  # closes the session
    assert client.request(acknowledge, FETCH_V).error_code == 0
    assert _fetch(client, "m1", 2).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_max_records_and_batch_size(broker, client):
    topic_id = _topic(broker, client, 10)
    limited = _fetch(client, "m2", 0, topic_id, max_records=3, batch_size=2, mode=RECORD_LIMIT, group="limits")
    assert _acquired(limited) == [(0, 1, 1), (2, 2, 1)]
    (records,) = [p.records for t in limited.responses for p in t.partitions]
    assert records  # the log batches holding the acquired records
    rest = _fetch(client, "m2", 1, max_records=100, batch_size=4, group="limits")
    assert _acquired(rest) == [(3, 6, 1), (7, 9, 1)]


def test_share_fetch_sends_its_records_as_a_slice_of_the_log(broker, client, monkeypatch):
    """As the classic Fetch: the acquired records' batches go out as a file slice (sendfile), not bytes
    read and written again, and exactly the batches holding the acquired records."""
    from kafkawire.broker.network.connection import Connection
    from kafkawire.broker.storage.file_records import FileRecords

    topic_id = _topic(broker, client, 6)
    pieces: list = []
    respond = Connection.respond

    async def recording(self, frame):
        response = await respond(self, frame)
        if isinstance(response, list):
            pieces.append([p for p in response if isinstance(p, FileRecords)])
        return response
    monkeypatch.setattr(Connection, "respond", recording)
    fetched = _fetch(client, "m9", 0, topic_id, max_records=2, batch_size=2, mode=RECORD_LIMIT, group="slices")
    assert _acquired(fetched) == [(0, 1, 1)]
    (records,) = [p.records for t in fetched.responses for p in t.partitions]
    (slices,) = [found for found in pieces if found]
    assert len(slices) == 1 and len(slices[0]) == len(records)  # (sent and closed: only its size is left)
    assert [batch.base_offset for batch in iter_batches(records)] == [0, 1]  # one record a batch


def test_a_member_acknowledges_only_what_it_holds_and_forgets_partitions(broker, client):
    topic_id = _topic(broker, client, 3)
    assert _acquired(_fetch(client, "holder", 0, topic_id, group="owners")) == [(0, 2, 1)]
    _fetch(client, "other", 0, topic_id, group="owners")
    wrong = _fetch(client, "other", 1, topic_id, acks=[(0, 0, [1])], group="owners")
    assert [p.acknowledge_error_code for t in wrong.responses for p in t.partitions] == [
        ErrorCode.INVALID_RECORD_STATE]
    # the holder releases 1 (a ShareFetch would acquire it again at once); a fetch that forgets the
    # partition gets nothing from it
    Ack = m.ShareAcknowledgeRequest
    released = client.request(Ack(group_id="owners", member_id="holder", share_session_epoch=1, topics=[
        Ack.AcknowledgeTopic(topic_id=topic_id, partitions=[Ack.AcknowledgePartition(
            partition_index=0, acknowledgement_batches=[Ack.AcknowledgementBatch(
                first_offset=1, last_offset=1, acknowledge_types=[2])])])]), FETCH_V)
    assert [p.error_code for t in released.responses for p in t.partitions] == [0]
    assert _acquired(_fetch(client, "other", 2, forgotten=topic_id, group="owners")) == []
    assert _acquired(_fetch(client, "other", 3, topic_id, group="owners")) == [(1, 1, 2)]


def test_share_groups_are_listed_and_described(broker, client):
    name = f"wire-{next(_topics)}"
    create_topic(client, name, 2)
    joined = client.request(m.ShareGroupHeartbeatRequest(group_id="described", member_id="mx", member_epoch=0,
                                                         subscribed_topic_names=[name]), 1)
    assert (joined.error_code, joined.member_epoch) == (0, 1)
    assert [sorted(t.partitions) for t in joined.assignment.topic_partitions] == [[0, 1]]
    listed = client.request(m.ListGroupsRequest(types_filter=["share"]), 5)
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [("described", "share", "Stable")]
    (described,) = client.request(m.ShareGroupDescribeRequest(group_ids=["described"]), 1).groups
    assert (described.error_code, described.group_epoch, described.assignor_name) == (0, 1, "simple")
    assert [(mb.member_id, mb.subscribed_topic_names) for mb in described.members] == [("mx", (name,))]
    # a second member moves the group epoch past mx's: Kafka's share groups have no reconciling state
    client.request(m.ShareGroupHeartbeatRequest(group_id="described", member_id="my", member_epoch=0,
                                                subscribed_topic_names=[name]), 1)
    (both,) = client.request(m.ShareGroupDescribeRequest(group_ids=["described"]), 1).groups
    assert (both.group_state, both.group_epoch) == ("Stable", 2)
    client.request(m.ShareGroupHeartbeatRequest(group_id="described", member_id="my", member_epoch=-1), 1)
    fenced = client.request(m.ShareGroupHeartbeatRequest(group_id="described", member_id="mx", member_epoch=7), 1)
    assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    left = client.request(m.ShareGroupHeartbeatRequest(group_id="described", member_id="mx", member_epoch=-1), 1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    (unknown,) = client.request(m.ShareGroupDescribeRequest(group_ids=["nobody"]), 1).groups
    assert unknown.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_waiting_fetch_answers_at_max_wait_or_when_a_record_arrives(broker, client):
    topic_id = _topic(broker, client, 0)
    name = broker.broker.topics.by_id[topic_id].name
    started = time.monotonic()
    assert _acquired(_fetch(client, "w", 0, topic_id, group="waiters", max_wait_ms=300)) == []
    assert time.monotonic() - started >= 0.3
    answer: dict = {}

    def wait_for_a_record():
        with RawClient(broker.port) as waiting:
            answer["response"] = _fetch(waiting, "w", 1, group="waiters", max_wait_ms=60_000)

    waiter = threading.Thread(target=wait_for_a_record)
    waiter.start()
    deadline = time.monotonic() + 10
    while not len(broker.broker.handlers.purgatory) and time.monotonic() < deadline:
        time.sleep(0.01)  # until the fetch is parked
    builder = RecordBatchBuilder()
    builder.append(b"late")
    assert produce(client, name, 0, builder.build()).error_code == 0
    waiter.join(30)
    assert _acquired(answer["response"]) == [(0, 0, 1)]  # woken by the append, long before MaxWaitMs


def _release(client, group, member, epoch, topic_id, first, last):
    Ack = m.ShareAcknowledgeRequest
    released = client.request(Ack(group_id=group, member_id=member, share_session_epoch=epoch, topics=[
        Ack.AcknowledgeTopic(topic_id=topic_id, partitions=[Ack.AcknowledgePartition(
            partition_index=0, acknowledgement_batches=[Ack.AcknowledgementBatch(
                first_offset=first, last_offset=last, acknowledge_types=[2])])])]), FETCH_V)
    assert [p.error_code for t in released.responses for p in t.partitions] == [0]


def _offsets(response) -> dict[int, int]:
    return {offset: count for first, last, count in _acquired(response) for offset in range(first, last + 1)}


def test_a_fetch_woken_with_another_waits_on_when_the_other_takes_the_records(broker, client):
    """Two parked fetches are woken by one release; the one that finds the records taken does not answer
    empty at once (its client would only ask again) but waits on, as Kafka's DelayedShareFetch does."""
    topic_id = _topic(broker, client, 3)
    assert _offsets(_fetch(client, "holder", 0, topic_id, group="wakers")) == {0: 1, 1: 1, 2: 1}
    answers: dict[str, object] = {}
    clients = {name: RawClient(broker.port) for name in ("b", "c")}

    def wait(name):
        answers[name] = _fetch(clients[name], name, 0, topic_id, group="wakers", max_wait_ms=60_000)

    waiters = {name: threading.Thread(target=wait, args=(name,)) for name in clients}
    try:
        for waiter in waiters.values():
            waiter.start()
        deadline = time.monotonic() + 10
        while len(broker.broker.handlers.purgatory) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # until both fetches are parked
        _release(client, "wakers", "holder", 1, topic_id, 0, 2)
        while not answers and time.monotonic() < deadline:
            time.sleep(0.01)
        (winner,) = answers
        loser = "c" if winner == "b" else "b"
        assert _offsets(answers[winner]) == {0: 2, 1: 2, 2: 2}
        while len(broker.broker.handlers.purgatory) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert loser not in answers  # still waiting (before, it was answered with nothing)
        _release(clients[winner], "wakers", winner, 1, topic_id, 0, 2)
        waiters[loser].join(30)
        assert _offsets(answers[loser]) == {0: 3, 1: 3, 2: 3}
    finally:
        for raw in clients.values():
            raw.close()


def test_share_group_offsets_give_the_start_offset_and_the_lag(broker, client):
    topic_id = _topic(broker, client, 6)
    name = broker.broker.topics.by_id[topic_id].name
    assert _acquired(_fetch(client, "lagging", 0, topic_id, group="offsets", max_records=5,
                            mode=RECORD_LIMIT)) == [(0, 4, 1)]
    # 0 and 1 accepted, 3 rejected: the start moves to 2, one record past it is done
    _fetch(client, "lagging", 1, topic_id, acks=[(0, 1, [1]), (3, 3, [3])], group="offsets", max_records=1,
           mode=RECORD_LIMIT)
    Request = m.DescribeShareGroupOffsetsRequest
    asked = Request(groups=[Request.DescribeShareGroupOffsetsRequestGroup(group_id="offsets", topics=[
        Request.DescribeShareGroupOffsetsRequestTopic(topic_name=name, partitions=[0]),
        Request.DescribeShareGroupOffsetsRequestTopic(topic_name="no-such-topic", partitions=[0])])])
    (group,) = client.request(asked, 1).groups
    described = [(t.topic_name, t.topic_id, [(p.partition_index, p.start_offset, p.lag, p.error_code)
                                             for p in t.partitions]) for t in group.topics]
    assert described == [(name, topic_id, [(0, 2, 6 - 2 - 1, 0)]),
                         ("no-such-topic", uuid.UUID(int=0), [(0, -1, -1, 0)])]
    every = Request(groups=[Request.DescribeShareGroupOffsetsRequestGroup(group_id="offsets", topics=None),
                            Request.DescribeShareGroupOffsetsRequestGroup(group_id="no-such-group", topics=None)])
    known, unknown = client.request(every, 1).groups
    assert [(t.topic_name, [p.start_offset for p in t.partitions]) for t in known.topics] == [(name, [2])]
    assert unknown.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_share_group_offsets_are_altered_and_deleted_in_an_empty_group(broker, client):
    topic_id = _topic(broker, client, 5)
    name = broker.broker.topics.by_id[topic_id].name
    _fetch(client, "r", 0, topic_id, group="resets")
    _fetch(client, "r", 1, topic_id, acks=[(0, 4, [1])], group="resets")  # all accepted: the start is 5
    Alter, Delete = m.AlterShareGroupOffsetsRequest, m.DeleteShareGroupOffsetsRequest
    alter = Alter(group_id="resets", topics=[Alter.AlterShareGroupOffsetsRequestTopic(topic_name=name, partitions=[
        Alter.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=1),
        Alter.AlterShareGroupOffsetsRequestPartition(partition_index=9, start_offset=1)])])
    altered = client.request(alter, 0)
    assert altered.error_code == 0
    assert [(p.partition_index, p.error_code) for t in altered.responses for p in t.partitions] == [
        (0, 0), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    # the partition starts afresh at 1: its records are delivered again, as first deliveries
    assert _acquired(_fetch(client, "r2", 0, topic_id, group="resets")) == [(1, 4, 1)]
    delete = Delete(group_id="resets", topics=[Delete.DeleteShareGroupOffsetsRequestTopic(topic_name=name),
                                               Delete.DeleteShareGroupOffsetsRequestTopic(topic_name="no-such")])
    deleted = client.request(delete, 0)
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        (name, 0), ("no-such", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    again = client.request(delete, 0)
    assert [(t.error_code, t.error_message) for t in again.responses][0] == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")
    joined = client.request(m.ShareGroupHeartbeatRequest(group_id="resets", member_id="in", member_epoch=0,
                                                         subscribed_topic_names=[name]), 1)
    assert joined.error_code == 0
    assert client.request(alter, 0).error_code == ErrorCode.NON_EMPTY_GROUP
    assert client.request(delete, 0).error_code == ErrorCode.NON_EMPTY_GROUP
    missing = Delete(group_id="never-seen", topics=[Delete.DeleteShareGroupOffsetsRequestTopic(topic_name=name)])
    assert client.request(missing, 0).error_code == ErrorCode.GROUP_ID_NOT_FOUND

"""The share consumer's sans-IO core (``kafkawire.client.core.share``), request by request with made-up
answers: acknowledgement batches, share session epochs, the ShareGroupHeartbeat member, acquired records
with their delivery counts and gaps, and the ShareFetcher's requests, polls, commits and close."""
from __future__ import annotations

import uuid

import pytest

from kafkawire import messages as m
from kafkawire.client.core.share.acknowledgements import Acknowledgements
from kafkawire.client.core.share.completed_fetch import ShareCompletedFetch
from kafkawire.client.core.share.config import ShareConsumerConfig
from kafkawire.client.core.share.fetcher import ShareFetcher
from kafkawire.client.core.share.membership import LEAVE_EPOCH, ShareMember
from kafkawire.client.core.share.record import GAP, AcknowledgeType
from kafkawire.client.core.share.session import ShareSession
from kafkawire.client.core.consumer.memory import Lease, MemoryPool
from kafkawire.client.core.topic_partition import TopicPartition
from kafkawire.client.errors import ConfigError
from kafkawire.error_codes import ErrorCode
from kafkawire.records import RecordBatchBuilder

TOPIC_ID = uuid.uuid4()
TP = TopicPartition("jobs", 0)
ACCEPT, RELEASE, REJECT, RENEW = (int(t) for t in AcknowledgeType)


def _batch(base: int, count: int, *, control: bool = False) -> bytes:
    builder = RecordBatchBuilder(base_offset=base, control=control)
    for i in range(count):
        builder.append(f"v{base + i}".encode())
    return builder.build()


def _lease() -> Lease:
    return Lease(MemoryPool(1 << 20), 0)


# ---- acknowledgements -----------------------------------------------------------------------------

def test_acknowledgements_merge_runs_of_one_type_and_the_latest_type_wins():
    acks = Acknowledgements()
    acks.add_range(0, 2, ACCEPT)
    acks.add(3, ACCEPT)
    acks.add(4, RELEASE)
    acks.add(6, REJECT)
    assert acks.batches() == [(0, 3, [ACCEPT]), (4, 4, [RELEASE]), (6, 6, [REJECT])]
    acks.add(1, REJECT)  # acknowledged again before sending: the later one counts
    assert acks.batches() == [(0, 0, [ACCEPT]), (1, 1, [REJECT]), (2, 3, [ACCEPT]), (4, 4, [RELEASE]),
                              (6, 6, [REJECT])]
    assert acks.acknowledged_offsets() == {0, 1, 2, 3, 4, 6}
    gaps = Acknowledgements()
    gaps.add_range(7, 8, GAP)
    acks.extend(gaps)
    assert acks.acknowledged_offsets() == {0, 1, 2, 3, 4, 6}  # gaps are not the application's


# ---- sessions ---------------------------------------------------------------------------------------

def test_a_session_opens_with_every_partition_then_names_only_changes_and_wraps_its_epoch():
    session = ShareSession(1)
    other = TopicPartition("jobs", 1)
    assert session.changes({TP: TOPIC_ID}) == ({TP: TOPIC_ID}, {})
    session.fetched({TP: TOPIC_ID})
    assert session.epoch == 1 and session.is_open
    assert session.changes({TP: TOPIC_ID}) == ({}, {})
    assert session.changes({other: TOPIC_ID}) == ({other: TOPIC_ID}, {TP: TOPIC_ID})
    session.epoch = 2**31 - 1
    session.advance()
    assert session.epoch == 1
    session.reset()
    assert (session.epoch, session.partitions) == (0, {})


# ---- membership -------------------------------------------------------------------------------------

def _joined(member: ShareMember) -> None:
    assert member.next_request(0) == "find"
    member.handle_find_coordinator(m.FindCoordinatorResponse(coordinators=[m.FindCoordinatorResponse.Coordinator(
        key="workers", node_id=3, host="h", port=9092)]), 4, 0)
    assert member.coordinator is not None and member.coordinator.node_id == 3


def test_the_member_joins_heartbeats_takes_its_assignment_and_leaves():
    member = ShareMember("workers", retry_backoff_ms=100)
    assert member.next_request(0) is None  # nothing to do before a subscription
    member.subscribe(("jobs",), 0)
    _joined(member)
    assert member.next_request(0) == "heartbeat"
    join = member.heartbeat_request()
    assert (join.member_epoch, list(join.subscribed_topic_names), join.member_id) == (0, ["jobs"], member.member_id)
    Response = m.ShareGroupHeartbeatResponse
    member.handle_heartbeat(join, Response(member_id=member.member_id, member_epoch=5, heartbeat_interval_ms=2000,
                                           assignment=Response.Assignment(topic_partitions=[
                                               Response.TopicPartitions(topic_id=TOPIC_ID, partitions=[1, 0])])), 0)
    assert (member.epoch, member.assignment, member.assignment_changed) == (5, {TOPIC_ID: (0, 1)}, True)
    assert member.next_request(1999) is None and member.timeout_ms(1000) == 1000
    assert member.next_request(2000) == "heartbeat"
    beat = member.heartbeat_request()
    assert (beat.member_epoch, beat.subscribed_topic_names) == (5, None)  # the subscription was taken
    member.handle_heartbeat(beat, Response(error_code=ErrorCode.FENCED_MEMBER_EPOCH), 2000)
    assert (member.epoch, member.assignment) == (0, {})  # joins again, with the same id
    assert member.next_request(2000) == "heartbeat"
    rejoin = member.heartbeat_request()
    assert (rejoin.member_epoch, rejoin.member_id) == (0, member.member_id)
    member.handle_heartbeat(rejoin, Response(member_id=member.member_id, member_epoch=7), 2000)
    member.leave(2100)
    assert member.assignment == {} and not member.left
    assert member.next_request(2100) == "heartbeat"
    leave = member.heartbeat_request()
    assert leave.member_epoch == LEAVE_EPOCH
    member.handle_heartbeat(leave, Response(member_epoch=LEAVE_EPOCH), 2100)
    assert member.left and not member.active


def test_coordinator_errors_find_it_again_and_authorization_is_fatal():
    member = ShareMember("workers")
    member.subscribe(("jobs",), 0)
    _joined(member)
    member.next_request(0)
    member.handle_heartbeat(member.heartbeat_request(),
                            m.ShareGroupHeartbeatResponse(error_code=ErrorCode.NOT_COORDINATOR), 0)
    assert member.coordinator is None and member.next_request(100) == "find"
    member.handle_find_coordinator(m.FindCoordinatorResponse(coordinators=[m.FindCoordinatorResponse.Coordinator(
        key="workers", node_id=1, host="h", port=1)]), 4, 100)
    member.next_request(100)
    member.handle_heartbeat(member.heartbeat_request(),
                            m.ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED), 100)
    assert [type(error).__name__ for error in member.errors] == ["GroupAuthorizationException"]


# ---- acquired records ---------------------------------------------------------------------------------

def test_only_acquired_records_are_handed_out_with_their_delivery_counts_and_the_rest_are_gaps():
    records = _batch(0, 4) + _batch(4, 1, control=True) + _batch(5, 3)
    fetch = ShareCompletedFetch(TP, records, [(1, 2, 1), (3, 6, 2), (9, 9, 1)], _lease())
    first = fetch.take(2)
    assert [(r.offset, r.value, r.delivery_count) for r in first] == [(1, b"v1", 1), (2, b"v2", 1)]
    rest = fetch.take(100)
    assert [(r.offset, r.delivery_count) for r in rest] == [(3, 2), (5, 2), (6, 2)]
    assert fetch.drained
    # the control record (4) and an offset no batch holds (9) are acknowledged as gaps
    assert fetch.automatic.batches() == [(4, 4, [GAP]), (9, 9, [GAP])]


def test_ranges_the_broker_split_at_batch_size_are_read_as_one():
    """Each range is read from its batch's start: consecutive ranges of one delivery count are merged,
    so that a batch is read once, not once a range."""
    fetch = ShareCompletedFetch(TP, _batch(0, 6), [(4, 4, 2), (0, 1, 1), (2, 3, 1), (5, 5, 2)], _lease())
    assert fetch.acquired == [(0, 3, 1), (4, 5, 2)]
    assert [(r.offset, r.delivery_count) for r in fetch.take(10)] == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 2), (5, 2)]


def test_a_corrupt_batch_stops_the_records_and_releases_what_it_held():
    good, bad = _batch(0, 2), bytearray(_batch(2, 2))
    bad[-1] ^= 0xFF  # the CRC no longer matches
    fetch = ShareCompletedFetch(TP, good + bytes(bad), [(0, 3, 1)], _lease())
    assert [r.offset for r in fetch.take(10)] == [0, 1]
    assert fetch.failure is not None and fetch.drained
    assert fetch.automatic.batches() == [(2, 3, [RELEASE])]


# ---- the fetcher ----------------------------------------------------------------------------------------

def _fetcher(**settings) -> ShareFetcher:
    fetcher = ShareFetcher(ShareConsumerConfig(bootstrap_servers=("b:9092",), group_id="workers", **settings), "me")
    fetcher.set_topic_ids({"jobs": TOPIC_ID})
    fetcher.set_assignment({TOPIC_ID: (0,)})
    fetcher.update_leaders({TP: 1})
    return fetcher


def _answer(fetcher: ShareFetcher, request, acquired=(), records: bytes = b"", **errors) -> None:
    Response = m.ShareFetchResponse
    fetcher.handle_fetch_response(request, Response(responses=[Response.ShareFetchableTopicResponse(
        topic_id=TOPIC_ID, partitions=[Response.PartitionData(
            partition_index=0, records=records, **errors,
            acquired_records=[Response.AcquiredRecords(first_offset=f, last_offset=l, delivery_count=d)
                              for f, l, d in acquired])])]))


def _acks(request) -> list:
    return [(b.first_offset, b.last_offset, list(b.acknowledge_types))
            for t in request.body.topics for p in t.partitions for b in p.acknowledgement_batches]


def test_implicit_mode_accepts_the_last_poll_on_the_next_fetch():
    fetcher = _fetcher(max_poll_records=3)
    (opening,) = fetcher.prepare_requests()
    body = opening.body
    assert (body.share_session_epoch, body.max_records, body.batch_size, _acks(opening)) == (0, 3, 3, [])
    assert fetcher.prepare_requests() == []  # one request at a time per broker
    _answer(fetcher, opening, [(0, 2, 1)], _batch(0, 3))
    assert fetcher.prepare_requests() == []  # records wait in the buffer: no fetch
    assert [r.offset for r in fetcher.poll(10)] == [0, 1, 2]
    # handed out, not accepted before the next poll: a fetch now would find their record locks still
    # taken, so it waits for that poll and carries their acknowledgements
    assert fetcher.prepare_requests() == []
    assert fetcher.poll(10) == []
    (second,) = fetcher.prepare_requests()
    assert second.body.share_session_epoch == 1 and _acks(second) == [(0, 2, [ACCEPT])]
    _answer(fetcher, second, [(3, 3, 1)], _batch(3, 1))
    assert [r.offset for r in fetcher.poll(10)] == [3]
    assert fetcher.prepare_requests() == []
    assert fetcher.poll(10) == []  # accepts 3
    (third,) = fetcher.prepare_requests()
    assert third.is_fetch and third.body.share_session_epoch == 2 and _acks(third) == [(3, 3, [ACCEPT])]
    # nothing of this member's holds the partition's locks when it fetches: the broker may wait for records
    assert {opening.body.max_wait_ms, second.body.max_wait_ms, third.body.max_wait_ms} == {500}
    _answer(fetcher, third)
    (waiting,) = fetcher.prepare_requests()
    assert waiting.body.max_wait_ms == 500 and _acks(waiting) == [] and waiting.body.topics == []


def test_explicit_mode_needs_every_record_acknowledged_and_renew_goes_alone():
    fetcher = _fetcher(share_acknowledgement_mode="explicit")
    (opening,) = fetcher.prepare_requests()
    _answer(fetcher, opening, [(0, 2, 1)], _batch(0, 3))
    records = fetcher.poll(10)
    with pytest.raises(RuntimeError, match="not acknowledged"):
        fetcher.poll(10)
    with pytest.raises(RuntimeError, match="not waiting"):
        fetcher.acknowledge(TP, 7, ACCEPT)
    fetcher.acknowledge(TP, 0, AcknowledgeType.ACCEPT)
    fetcher.acknowledge(TP, 1, AcknowledgeType.REJECT)
    fetcher.acknowledge(TP, 2, AcknowledgeType.RENEW)  # still held: it may be acknowledged again later
    assert fetcher.poll(10) == [] and records
    (renewing,) = fetcher.prepare_requests()
    assert not renewing.is_fetch and renewing.body.is_renew_ack
    assert _acks(renewing) == [(0, 0, [ACCEPT]), (1, 1, [REJECT]), (2, 2, [RENEW])]
    fetcher.acknowledge(TP, 2, AcknowledgeType.RELEASE)


def test_commit_sends_a_share_acknowledge_and_collects_each_partitions_outcome():
    fetcher = _fetcher()
    (opening,) = fetcher.prepare_requests()
    _answer(fetcher, opening, [(0, 1, 1)], _batch(0, 2))
    fetcher.poll(10)
    commit = fetcher.commit()
    assert not commit.done
    (acknowledge,) = fetcher.prepare_requests()
    assert not acknowledge.is_fetch and _acks(acknowledge) == [(0, 1, [ACCEPT])]
    Response = m.ShareAcknowledgeResponse
    fetcher.handle_acknowledge_response(acknowledge, Response(responses=[Response.ShareAcknowledgeTopicResponse(
        topic_id=TOPIC_ID, partitions=[Response.PartitionData(partition_index=0,
                                                              error_code=ErrorCode.INVALID_RECORD_STATE)])]))
    assert commit.done and isinstance(commit.results[TP], Exception)
    ((offsets, error),) = fetcher.completed
    assert offsets == {TP: {0, 1}} and error is not None
    assert fetcher.commit().done  # nothing left to send


def test_a_session_error_opens_a_new_session_and_sends_the_acknowledgements_again():
    fetcher = _fetcher()
    (opening,) = fetcher.prepare_requests()
    _answer(fetcher, opening, [(0, 0, 1)], _batch(0, 1))
    fetcher.poll(10)
    fetcher.poll(10)  # accepts 0
    (carrying,) = fetcher.prepare_requests()
    assert _acks(carrying) == [(0, 0, [ACCEPT])]
    fetcher.handle_fetch_response(carrying, m.ShareFetchResponse(error_code=ErrorCode.SHARE_SESSION_NOT_FOUND))
    (reopening,) = fetcher.prepare_requests()
    assert reopening.body.share_session_epoch == 0 and _acks(reopening) == []  # none on an opening request
    _answer(fetcher, reopening)
    (again,) = fetcher.prepare_requests()
    assert again.body.share_session_epoch == 1 and _acks(again) == [(0, 0, [ACCEPT])]


def test_close_accepts_the_last_poll_and_releases_what_was_never_handed_out():
    fetcher = _fetcher(max_poll_records=2)
    (opening,) = fetcher.prepare_requests()
    _answer(fetcher, opening, [(0, 4, 1)], _batch(0, 5))
    assert [r.offset for r in fetcher.poll(2)] == [0, 1]
    (final,) = fetcher.close_requests()
    assert final.body.share_session_epoch == -1 and not final.is_fetch
    assert _acks(final) == [(0, 1, [ACCEPT]), (2, 4, [RELEASE])]
    assert fetcher.prepare_requests() == []


def test_a_partition_taken_away_gives_back_its_buffered_records():
    fetcher = _fetcher()
    (opening,) = fetcher.prepare_requests()
    _answer(fetcher, opening, [(0, 2, 1)], _batch(0, 3))
    fetcher.set_assignment({})
    assert fetcher.poll(10) == []
    (acknowledge,) = fetcher.prepare_requests()
    assert not acknowledge.is_fetch and _acks(acknowledge) == [(0, 2, [RELEASE])]


def test_the_config_insists_on_a_group_and_kafkas_modes():
    with pytest.raises(ConfigError, match="group.id"):
        ShareConsumerConfig(bootstrap_servers=("b:9092",))
    with pytest.raises(ConfigError):
        ShareConsumerConfig.from_properties({"group.id": "g", "share.acknowledgement.mode": "sometimes"})
    config = ShareConsumerConfig.from_properties({"group.id": "g", "share.acknowledgement.mode": "EXPLICIT",
                                                  "share.acquire.mode": "record_limit"})
    assert config.explicit and config.acquire_mode_code == 1


def test_a_commit_waits_for_a_new_session_to_send_its_acknowledgements():
    fetcher = _fetcher()
    (opening,) = fetcher.prepare_requests()
    _answer(fetcher, opening, [(0, 1, 1)], _batch(0, 2))
    fetcher.poll(10)
    assert fetcher.poll(10) == []  # accepts 0-1, for the next fetch
    (lost,) = fetcher.prepare_requests()  # the broker lost the session: the acknowledgements are kept
    fetcher.handle_fetch_response(lost, m.ShareFetchResponse(error_code=ErrorCode.SHARE_SESSION_NOT_FOUND))
    commit = fetcher.commit()
    (reopening,) = fetcher.prepare_requests()  # acknowledgements cannot open a session
    assert reopening.is_fetch and reopening.body.share_session_epoch == 0 and not commit.done
    assert _acks(reopening) == []
    _answer(fetcher, reopening)
    (acknowledge,) = fetcher.prepare_requests()
    assert not acknowledge.is_fetch and _acks(acknowledge) == [(0, 1, [ACCEPT])]
    fetcher.handle_acknowledge_response(acknowledge, m.ShareAcknowledgeResponse())
    assert commit.done and commit.results == {TP: None}


def test_the_driver_connects_to_the_subscribed_topics_leaders_before_the_assignment():
    """Joining: the fetch connection to the leaders of the subscribed topics opens while the group is
    still to assign them, so that the first ShareFetch does not wait for it once the assignment comes."""
    import asyncio

    from kafkawire.client.aio.connection import FETCH_ROLE
    from kafkawire.client.aio.share_driver import ShareDriver
    from kafkawire.client.core.cluster_metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
    from kafkawire.client.errors import KafkaConnectionError

    class Connections:
        def __init__(self) -> None:
            self.opened: list[tuple[int, str]] = []

        def get_ready(self, node: int, role: str) -> None:
            return None

        async def connection(self, node: int, role: str) -> None:
            self.opened.append((node, role))
            raise KafkaConnectionError("not in this test")

    class Metadata:
        def request_update(self) -> None:
            pass

    async def run() -> list[tuple[int, str]]:
        cluster = ClusterMetadata()
        cluster.brokers = {7: BrokerInfo(7, "localhost", 1, None), 8: BrokerInfo(8, "localhost", 2, None)}
        cluster.topics = {"jobs": TopicInfo("jobs", TOPIC_ID, {0: PartitionInfo("jobs", 0, 7)}),
                          "other": TopicInfo("other", uuid.uuid4(), {0: PartitionInfo("other", 0, 8)})}
        config = ShareConsumerConfig(bootstrap_servers=("unused:9092",), group_id="g")
        member = ShareMember("g")
        member.subscribe(("jobs",), 0)
        connections = Connections()
        tasks: list[asyncio.Task[None]] = []

        def spawn(coroutine):
            tasks.append(asyncio.get_running_loop().create_task(coroutine))
            return tasks[-1]

        driver = ShareDriver(config, member, ShareFetcher(config, member.member_id), connections,  # type: ignore[arg-type]
                             Metadata(), {}, spawn=spawn, wake=lambda: None)  # type: ignore[arg-type]
        driver.update_leaders(cluster)  # no assignment yet
        await asyncio.gather(*tasks)
        return connections.opened
    assert asyncio.run(run()) == [(7, FETCH_ROLE)]  # the subscribed topic's leader only


def test_acknowledged_offsets_are_reported_only_while_someone_listens_and_failures_always():
    """As Kafka's ShareConsumeRequestManager: the offsets of successful acknowledgements are listed for the
    acknowledgement commit callback only while one is registered (listing them costs a set entry each)."""
    fetcher = _fetcher(max_poll_records=3)
    fetcher.report_acknowledged = False
    (opening,) = fetcher.prepare_requests()
    _answer(fetcher, opening, [(0, 2, 1)], _batch(0, 3))
    assert len(fetcher.poll(10)) == 3 and fetcher.poll(10) == []
    (second,) = fetcher.prepare_requests()
    _answer(fetcher, second, [(3, 4, 1)], _batch(3, 2))
    assert fetcher.completed == []  # accepted, and no callback to tell
    assert len(fetcher.poll(10)) == 2
    commit = fetcher.commit()
    (acknowledge,) = fetcher.prepare_requests()
    Response = m.ShareAcknowledgeResponse
    fetcher.handle_acknowledge_response(acknowledge, Response(responses=[Response.ShareAcknowledgeTopicResponse(
        topic_id=TOPIC_ID, partitions=[Response.PartitionData(partition_index=0,
                                                              error_code=ErrorCode.INVALID_RECORD_STATE)])]))
    assert commit.done
    ((offsets, error),) = fetcher.completed  # a failure is reported all the same (logged without a callback)
    assert offsets == {TP: {3, 4}} and error is not None


def test_the_share_consumer_lists_acknowledged_offsets_only_with_a_callback():
    import asyncio

    from kafkawire.client import AsyncShareConsumer

    async def run() -> None:
        consumer = AsyncShareConsumer(bootstrap_servers="localhost:9", group_id="workers")
        assert consumer.fetcher.report_acknowledged is False
        consumer.set_acknowledgement_commit_callback(lambda offsets, error: None)
        assert consumer.fetcher.report_acknowledged is True
        consumer.set_acknowledgement_commit_callback(None)
        assert consumer.fetcher.report_acknowledged is False
        await consumer.close()
    asyncio.run(run())

"""The sans-IO group membership (kafkawire.client.core.group.classic, run in a GroupMember) driven by
hand-built responses, every request encoded and every response decoded at the request's version: finding
the coordinator, joining, syncing, the leader's assignment, heartbeats, rebalances, each error, timeouts.
"""
from __future__ import annotations

import pytest

from kafkawire import messages as m
from kafkawire.client.core.group.assignors import (
    Subscription, decode_assignment, decode_subscription, encode_assignment, encode_subscription,
)
from kafkawire.client.core.consumer.config import ConsumerConfig
from kafkawire.client.core.group.member import GroupMember
from kafkawire.client.core.group.protocol import (
    CommitCompleted, CommittedOffsets, Coordinator, GroupFailure, MemberState, OffsetAndMetadata,
    PartitionsAssigned, PartitionsLost, PartitionsRevoked,
)
from kafkawire.client.core.topic_partition import TopicPartition as TP
from kafkawire.error_codes import ErrorCode as E

from support.group_helpers import (
    ASSIGNED, GROUP, Sim, commit_response, fetch_response, find_error, find_ok, join_error, join_ok, joined,
    make_config, reference_assign, sync_ok,
)


def test_a_follower_joins_syncs_and_fetches_its_committed_offsets():
    sim = Sim()
    assert sim.m.state is MemberState.UNJOINED and sim.poll() == []
    sim.m.subscribe(["beta", "alpha", "alpha"], sim.now)
    assert sim.m.state is MemberState.FINDING_COORDINATOR
    find = sim.expect(m.FindCoordinatorRequest)
    assert find.destination is None and find.version == 6 and list(find.body.coordinator_keys) == [GROUP]
    assert sim.poll() == []  # one lookup at a time
    sim.reply(find, find_ok(node=3))
    assert sim.m.coordinator == Coordinator(3, "coord", 9092)

    join = sim.expect(m.JoinGroupRequest)
    body = join.body
    assert join.destination == Coordinator(3, "coord", 9092) and join.version == 9
    assert (body.group_id, body.member_id, body.protocol_type) == (GROUP, "", "consumer")
    assert (body.session_timeout_ms, body.rebalance_timeout_ms) == (10_000, 60_000)
    assert join.timeout_ms == 65_000  # parked for up to the rebalance timeout, plus Java's 5 s lapse
    (protocol,) = body.protocols
    assert protocol.name == "range"
    assert decode_subscription(protocol.metadata) == Subscription(("alpha", "beta"), version=3)
    assert sim.m.state is MemberState.JOINING

    sim.reply(join, join_error(E.MEMBER_ID_REQUIRED, "me-42"))  # KIP-394: again at once, with the id
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == "me-42"
    sim.reply(join, join_ok("me-42", generation=5))
    assert sim.m.state is MemberState.SYNCING and not sim.m.leader
    sync = sim.expect(m.SyncGroupRequest)
    assert (sync.body.generation_id, sync.body.member_id, list(sync.body.assignments)) == (5, "me-42", [])
    assert (sync.body.protocol_type, sync.body.protocol_name) == ("consumer", "range")
    assert sim.poll() == []  # no heartbeats while SyncGroup is parked

    sim.reply(sync, sync_ok([TP("beta", 2), TP("alpha", 0)]))
    assert sim.m.state is MemberState.STABLE
    assert sim.m.assignment == (TP("alpha", 0), TP("beta", 2))
    assert sim.take() == [PartitionsAssigned((TP("alpha", 0), TP("beta", 2)), 5, "me-42", False)]
    fetch = sim.expect(m.OffsetFetchRequest)
    (group,) = fetch.body.groups
    assert sorted((t.name, list(t.partition_indexes)) for t in group.topics) == [("alpha", [0]), ("beta", [2])]
    sim.reply(fetch, fetch_response(fetch, {TP("alpha", 0): 17}))
    assert sim.take() == [CommittedOffsets(None, {TP("alpha", 0): OffsetAndMetadata(17, "md", 4),
                                                  TP("beta", 2): None})]


@pytest.mark.parametrize("protocol", ["range", "roundrobin"])
def test_the_leader_assigns_everyone_with_the_chosen_assignor(protocol):
    sim = Sim(partition_assignment_strategy=("range", "roundrobin"))
    sim.m.subscribe(["alpha"], sim.now)
    sim.m.update_metadata({"alpha": 5, "beta": 3, "gamma": 2}, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    assert [p.name for p in join.body.protocols] == ["range", "roundrobin"]
    subscriptions = {"me-1": ["alpha"], "other-1": ["alpha", "beta"], "old-1": ["beta", "gamma"]}
    members = [("me-1", None, join.body.protocols[0].metadata),
               ("other-1", "static-a", encode_subscription(subscriptions["other-1"])),
               ("old-1", None, encode_subscription(subscriptions["old-1"], version=0))]
    sim.reply(join, join_ok("me-1", 3, leader="me-1", protocol=protocol, members=members))
    assert sim.m.leader and sim.m.metadata_topics == {"alpha", "beta", "gamma"}
    sync = sim.expect(m.SyncGroupRequest)
    sent = {a.member_id: a.assignment for a in sync.body.assignments}
    expected = reference_assign(protocol, {"alpha": 5, "beta": 3, "gamma": 2}, subscriptions,
                                {"other-1": "static-a"})
    assert {member: list(decode_assignment(data).partitions) for member, data in sent.items()} == expected
    assert bytes(sent["old-1"][:2]) == b"\x00\x00"  # answered in the version it subscribed with
    sim.reply(sync, sync_ok(expected["me-1"], protocol))
    assert sim.m.assignment == tuple(expected["me-1"])
    assert sim.take(PartitionsAssigned)[0].leader


def test_a_leader_gives_nothing_to_a_member_whose_subscription_does_not_decode():
    sim = Sim()
    sim.m.subscribe(["alpha"], sim.now)
    sim.m.update_metadata({"alpha": 2}, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    members = [("me-1", None, join.body.protocols[0].metadata), ("bad-1", None, b"\x00")]
    sim.reply(join, join_ok("me-1", 1, leader="me-1", members=members))
    sync = sim.expect(m.SyncGroupRequest)
    sent = {a.member_id: decode_assignment(a.assignment).partitions for a in sync.body.assignments}
    assert sent == {"me-1": (TP("alpha", 0), TP("alpha", 1)), "bad-1": ()}
    (failure,) = sim.take(GroupFailure)
    assert not failure.fatal and "bad-1" in str(failure.error)


def test_a_static_leader_told_to_skip_the_assignment_sends_none():
    sim = Sim(GroupMember(make_config(), group_instance_id="host-1"))
    sim.m.subscribe(["alpha"], sim.now)
    sim.m.update_metadata({"alpha": 2}, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.group_instance_id == "host-1"
    response = join_ok("me-1", 3, leader="me-1", members=[("me-1", "host-1", join.body.protocols[0].metadata)])
    response.skip_assignment = True  # KIP-814: a static leader rejoining keeps the current assignment
    sim.reply(join, response)
    sync = sim.expect(m.SyncGroupRequest)
    assert list(sync.body.assignments) == [] and sync.body.group_instance_id == "host-1"
    sim.reply(sync, sync_ok([TP("alpha", 0), TP("alpha", 1)]))
    assert sim.m.state is MemberState.STABLE and sim.m.leader


def test_a_leader_rejoins_when_the_group_topics_change():
    sim = Sim()
    sim.m.subscribe(["alpha"], sim.now)
    sim.m.update_metadata({"alpha": 2}, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    members = [("me-1", None, join.body.protocols[0].metadata), ("o-1", None, encode_subscription(["beta"]))]
    sim.reply(join, join_ok("me-1", 1, leader="me-1", members=members))
    sync = sim.expect(m.SyncGroupRequest)
    assert {a.member_id: decode_assignment(a.assignment).partitions for a in sync.body.assignments}["o-1"] == ()
    sim.reply(sync, sync_ok([TP("alpha", 0), TP("alpha", 1)]))
    sim.reply(sim.expect(m.OffsetFetchRequest), m.OffsetFetchResponse(groups=[
        m.OffsetFetchResponse.OffsetFetchResponseGroup(group_id=GROUP, topics=[])]))
    assert sim.m.metadata_topics == {"alpha", "beta"}  # the driver must look beta up
    sim.m.update_metadata({"alpha": 2}, sim.now)
    assert sim.m.state is MemberState.STABLE  # nothing changed
    sim.m.update_metadata({"alpha": None}, sim.now)
    assert sim.m.state is MemberState.STABLE  # a topic missing from one metadata answer is no reason
    sim.m.update_metadata({"beta": 4}, sim.now)  # now beta can be assigned: rebalance
    assert sim.m.state is MemberState.REBALANCING
    assert sim.take(PartitionsRevoked) == [PartitionsRevoked((TP("alpha", 0), TP("alpha", 1)))]
    assert type(sim.poll()[0].body) is m.JoinGroupRequest


def test_request_versions_follow_the_brokers_ranges():
    sim = Sim()
    sim.m.set_api_versions({10: (0, 2), 11: (0, 4), 14: (0, 2), 12: (0, 2), 13: (0, 1), 8: (2, 6), 9: (1, 5)})
    sim.m.subscribe(["alpha"], sim.now)
    find = sim.expect(m.FindCoordinatorRequest)
    assert (find.version, find.body.key, find.body.key_type) == (2, GROUP, 0)
    sim.reply(find, find_ok())
    join = sim.expect(m.JoinGroupRequest)
    assert join.version == 4
    sim.reply(join, join_ok("me-1", 1))
    sync = sim.expect(m.SyncGroupRequest)
    assert sync.version == 2
    sim.reply(sync, m.SyncGroupResponse(error_code=0, assignment=encode_assignment([TP("alpha", 0)])))
    fetch = sim.expect(m.OffsetFetchRequest)
    assert fetch.version == 5 and fetch.body.group_id == GROUP
    sim.reply(fetch, fetch_response(fetch, {TP("alpha", 0): 3}))
    assert sim.take(CommittedOffsets)[0].offsets == {TP("alpha", 0): OffsetAndMetadata(3, "md", 4)}
    sim.m.commit({TP("alpha", 0): OffsetAndMetadata(9, "x", 2)}, sim.now)
    commit = sim.expect(m.OffsetCommitRequest)
    assert commit.version == 6 and commit.body.retention_time_ms == -1
    assert commit.body.topics[0].partitions[0].committed_leader_epoch == 2
    sim.advance(1_000)
    assert type(sim.poll()[0].body) is m.HeartbeatRequest
    sim.m.close(sim.now)
    sim.reply(commit, commit_response(commit))
    (leave,) = [r for r in sim.poll() if isinstance(r.body, m.LeaveGroupRequest)]
    assert (leave.version, leave.body.member_id) == (1, "me-1")


def test_no_usable_version_is_a_fatal_group_failure():
    sim = Sim()
    sim.m.set_api_versions({10: (0, 6), 14: (0, 5), 12: (0, 4), 13: (0, 5), 8: (2, 9), 9: (1, 9)})  # no JoinGroup
    sim.m.subscribe(["alpha"], sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    assert sim.poll() == []
    (failure,) = sim.take(GroupFailure)
    assert failure.fatal and failure.error.error_code == E.UNSUPPORTED_VERSION
    assert sim.m.state is MemberState.UNJOINED and sim.poll() == []
    # static membership needs JoinGroup v5
    static = Sim(GroupMember(make_config(), group_instance_id="host-1", api_versions={10: 6, 11: 4}))
    static.m.subscribe(["alpha"], static.now)
    static.reply(static.expect(m.FindCoordinatorRequest), find_ok())
    assert static.poll() == [] and "static membership" in str(static.take(GroupFailure)[0].error)


def test_heartbeats_follow_the_interval_and_back_off_after_errors():
    sim = joined(Sim())
    assert sim.m.timeout_ms(sim.now) == 1_000
    sim.advance(999)
    assert sim.poll() == []
    sim.advance(1)
    beat = sim.expect(m.HeartbeatRequest)
    assert (beat.body.generation_id, beat.body.member_id, beat.version) == (1, "me-1", 4)
    sim.advance(2_000)
    assert sim.poll() == []  # one heartbeat in flight at a time
    sim.reply(beat, m.HeartbeatResponse(error_code=0))
    assert type(sim.poll()[0].body) is m.HeartbeatRequest  # overdue: at once
    beat = sim.m.protocol._heartbeat_request
    sim.reply(beat, m.HeartbeatResponse(error_code=E.COORDINATOR_LOAD_IN_PROGRESS))
    assert sim.m.timeout_ms(sim.now) == 100  # retry.backoff.ms
    sim.advance(100)
    assert type(sim.poll()[0].body) is m.HeartbeatRequest


@pytest.mark.parametrize("auto_commit", [False, True])
def test_rebalance_in_progress_revokes_then_rejoins_with_the_same_member_id(auto_commit):
    sim = joined(Sim(enable_auto_commit=auto_commit))
    sim.positions = {TP("alpha", 0): 11, TP("alpha", 1): 12, TP("beta", 0): 13, TP("gamma", 0): 99}
    sim.advance(1_000)
    beat = sim.expect(m.HeartbeatRequest)
    sim.m.handle_response(beat, m.HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS), sim.now)
    assert sim.m.state is MemberState.REBALANCING and sim.m.assignment == ()
    if auto_commit:  # the positions of the owned partitions are committed before giving them up
        commit = sim.poll_no_drain()[0]
        assert isinstance(commit.body, m.OffsetCommitRequest)
        assert {(t.name, p.partition_index, p.committed_offset) for t in commit.body.topics for p in t.partitions} \
            == {("alpha", 0, 11), ("alpha", 1, 12), ("beta", 0, 13)}
        assert (commit.body.generation_id_or_member_epoch, commit.body.member_id) == (1, "me-1")
    else:
        assert sim.poll_no_drain() == []  # JoinGroup waits for the revocation to be taken
    events = sim.m.drain_events()
    assert events == [PartitionsRevoked(ASSIGNED)]
    # the application commits in its revocation handler: JoinGroup waits for that too
    mine = sim.m.commit({TP("alpha", 0): 11}, sim.now, timeout_ms=1_000)
    requests = sim.poll()
    assert [type(r.body) for r in requests] == [m.OffsetCommitRequest]
    if auto_commit:
        sim.reply(commit, commit_response(commit))
        assert sim.poll() == []
    sim.reply(requests[0], commit_response(requests[0]))
    assert [e.request_id for e in sim.take(CommitCompleted) if e.error is None][-1] == mine
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == "me-1"
    assert decode_subscription(join.body.protocols[0].metadata).generation_id == 1
    assert join.body.reason == "the group is rebalancing"


@pytest.mark.parametrize("code, member_id_after", [(E.UNKNOWN_MEMBER_ID, ""), (E.ILLEGAL_GENERATION, "me-1")])
def test_heartbeat_fencing_errors_lose_the_partitions_and_rejoin(code, member_id_after):
    sim = joined(Sim(enable_auto_commit=True))
    sim.positions = {TP("alpha", 0): 5}
    sim.advance(1_000)
    sim.reply(sim.expect(m.HeartbeatRequest), m.HeartbeatResponse(error_code=code))
    assert sim.take() == [PartitionsLost(ASSIGNED)]
    join = sim.expect(m.JoinGroupRequest)  # no commit: the generation is gone
    assert join.body.member_id == member_id_after
    assert decode_subscription(join.body.protocols[0].metadata).generation_id == -1


def test_a_heartbeat_error_about_an_older_generation_is_ignored():
    sim = joined(Sim())
    sim.advance(1_000)
    old_beat = sim.expect(m.HeartbeatRequest)  # generation 1, answered only at the end
    sim.m.commit({TP("alpha", 0): 1}, sim.now)
    commit = sim.expect(m.OffsetCommitRequest)
    sim.reply(commit, commit_response(commit, E.REBALANCE_IN_PROGRESS))
    sim.take()
    sim.reply(sim.expect(m.JoinGroupRequest), join_ok("me-1", 2))
    sim.reply(sim.expect(m.SyncGroupRequest), sync_ok(ASSIGNED))
    sim.take()
    sim.reply(old_beat, m.HeartbeatResponse(error_code=E.ILLEGAL_GENERATION))
    assert sim.m.state is MemberState.STABLE and sim.m.generation.generation_id == 2 and not sim.take()
    sim.advance(1_000)
    assert m.HeartbeatRequest in [type(r.body) for r in sim.poll()]  # and heartbeats go on


def test_coordinator_errors_send_the_member_back_to_findcoordinator():
    sim = joined(Sim())
    sim.advance(1_000)
    sim.reply(sim.expect(m.HeartbeatRequest), m.HeartbeatResponse(error_code=E.NOT_COORDINATOR))
    assert sim.m.coordinator is None and sim.m.state is MemberState.STABLE  # keeps its partitions meanwhile
    find = sim.expect(m.FindCoordinatorRequest)
    sim.reply(find, find_error(E.COORDINATOR_NOT_AVAILABLE))
    assert sim.poll() == [] and sim.m.timeout_ms(sim.now) == 100
    sim.advance(100)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok(node=2))
    assert sim.m.coordinator.node_id == 2
    assert type(sim.poll()[0].body) is m.HeartbeatRequest  # overdue after the lookup
    # JoinGroup answered COORDINATOR_NOT_AVAILABLE: find it, then join again
    other = Sim()
    other.m.subscribe(["alpha"], other.now)
    other.reply(other.expect(m.FindCoordinatorRequest), find_ok())
    other.reply(other.expect(m.JoinGroupRequest), join_error(E.COORDINATOR_NOT_AVAILABLE))
    assert other.m.state is MemberState.FINDING_COORDINATOR
    other.reply(other.expect(m.FindCoordinatorRequest), find_ok())
    assert type(other.poll()[0].body) is m.JoinGroupRequest
    # a lost connection does the same, and a late answer to the lost request is ignored
    join = other.m.protocol._join_request
    other.m.handle_failure(join, other.now)
    assert other.m.coordinator is None
    other.m.handle_response(join, join_ok("me-1"), other.now)
    assert other.m.state is MemberState.FINDING_COORDINATOR
    # a fatal FindCoordinator error
    denied = Sim()
    denied.m.subscribe(["alpha"], denied.now)
    denied.reply(denied.expect(m.FindCoordinatorRequest), find_error(E.GROUP_AUTHORIZATION_FAILED))
    assert denied.take(GroupFailure)[0].fatal and denied.poll() == []


def test_join_group_errors():
    def fresh():
        sim = Sim()
        sim.m.subscribe(["alpha"], sim.now)
        sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
        sim.reply(sim.expect(m.JoinGroupRequest), join_error(E.MEMBER_ID_REQUIRED, "me-1"))
        return sim, sim.expect(m.JoinGroupRequest)

    sim, join = fresh()
    sim.reply(join, join_error(E.UNKNOWN_MEMBER_ID))
    assert sim.expect(m.JoinGroupRequest).body.member_id == ""
    sim, join = fresh()
    sim.reply(join, join_error(E.ILLEGAL_GENERATION))
    assert sim.expect(m.JoinGroupRequest).body.member_id == "me-1"
    sim, join = fresh()
    sim.reply(join, join_error(E.REBALANCE_IN_PROGRESS))
    assert sim.expect(m.JoinGroupRequest).body.member_id == "me-1"
    sim, join = fresh()
    sim.reply(join, join_error(E.COORDINATOR_LOAD_IN_PROGRESS))
    assert sim.poll() == []
    sim.advance(100)
    assert sim.expect(m.JoinGroupRequest).body.member_id == "me-1"
    for fatal in (E.INCONSISTENT_GROUP_PROTOCOL, E.GROUP_AUTHORIZATION_FAILED, E.FENCED_INSTANCE_ID,
                  E.INVALID_SESSION_TIMEOUT, E.GROUP_MAX_SIZE_REACHED):
        sim, join = fresh()
        sim.reply(join, join_error(fatal))
        (failure,) = sim.take(GroupFailure)
        assert failure.fatal and failure.error.error_code == fatal and fatal.name in str(failure.error)
        assert sim.m.state is MemberState.UNJOINED and sim.poll() == []
        sim.m.record_poll(sim.now)  # the next application poll tries again
        assert type(sim.poll()[0].body) is m.JoinGroupRequest
    # the coordinator picked a protocol we never offered
    sim, join = fresh()
    sim.reply(join, join_ok("me-1", protocol="roundrobin"))
    assert sim.take(GroupFailure)[0].error.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_sync_group_errors():
    def syncing():
        sim = Sim()
        sim.m.subscribe(["alpha"], sim.now)
        sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
        sim.reply(sim.expect(m.JoinGroupRequest), join_ok("me-1", 4))
        return sim, sim.expect(m.SyncGroupRequest)

    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=E.REBALANCE_IN_PROGRESS))
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == "me-1" and decode_subscription(join.body.protocols[0].metadata).generation_id == 4
    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=E.UNKNOWN_MEMBER_ID))
    assert sim.expect(m.JoinGroupRequest).body.member_id == ""
    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=E.ILLEGAL_GENERATION))
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == "me-1" and decode_subscription(join.body.protocols[0].metadata).generation_id == -1
    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=E.NOT_COORDINATOR))
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    assert sim.expect(m.JoinGroupRequest).body.member_id == "me-1"
    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=E.GROUP_AUTHORIZATION_FAILED))
    assert sim.take(GroupFailure)[0].fatal and sim.poll() == []
    sim, sync = syncing()
    sim.reply(sync, m.SyncGroupResponse(error_code=0, protocol_type="consumer", protocol_name="range",
                                        assignment=b"\x00\x00\x00"))
    assert "does not decode" in str(sim.take(GroupFailure)[0].error)
    # an assignment of topics the member does not subscribe to: refused, and the member rejoins
    sim, sync = syncing()
    sim.reply(sync, sync_ok([TP("beta", 0)]))
    assert sim.m.assignment == () and not sim.take(PartitionsAssigned)
    sim.advance(100)
    assert type(sim.poll()[0].body) is m.JoinGroupRequest


def test_the_session_timeout_without_heartbeat_answers_means_finding_the_coordinator_again():
    sim = joined(Sim())
    while sim.now < 13_000:  # the coordinator keeps answering "retry later"
        sim.advance(sim.m.timeout_ms(sim.now))
        requests = sim.poll()
        for request in requests:
            if isinstance(request.body, m.HeartbeatRequest):
                sim.reply(request, m.HeartbeatResponse(error_code=E.COORDINATOR_LOAD_IN_PROGRESS))
        if sim.m.coordinator is None:
            break
    assert sim.m.coordinator is None and sim.now - 1_000 == 10_000  # session.timeout.ms after the sync
    assert sim.m.assignment == ASSIGNED and [type(r.body) for r in requests] == [m.FindCoordinatorRequest]


def test_requests_that_get_no_answer_expire():
    sim = Sim()
    sim.m.subscribe(["alpha"], sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    assert sim.m.timeout_ms(sim.now) == 65_000
    sim.advance(65_000)
    assert type(sim.poll()[0].body) is m.FindCoordinatorRequest  # expired: coordinator presumed gone
    sim.m.handle_response(join, join_ok("me-1"), sim.now)  # a late answer changes nothing
    assert sim.m.state is MemberState.FINDING_COORDINATOR


@pytest.mark.parametrize("static", [False, True])
def test_missing_max_poll_interval_leaves_the_group_and_the_next_poll_rejoins(static):
    member = GroupMember(make_config(max_poll_interval_ms=5_000), group_instance_id="host-1" if static else None)
    sim = joined(Sim(member))
    for _ in range(4):
        sim.advance(1_000)
        beat = sim.expect(m.HeartbeatRequest)
        sim.reply(beat, m.HeartbeatResponse(error_code=0))
    sim.advance(1_001)
    requests = sim.poll()
    if static:  # a static member keeps its place until its session times out
        assert requests == []
    else:
        (leave,) = requests
        assert [(x.member_id, x.reason) for x in leave.body.members] == [("me-1", "consumer poll timeout has expired")]
        sim.reply(leave, m.LeaveGroupResponse(error_code=0, members=[]))
    events = sim.take()
    assert events[0] == PartitionsLost(ASSIGNED) and isinstance(events[1], GroupFailure) and not events[1].fatal
    assert sim.m.state is MemberState.UNJOINED
    sim.advance(10_000)
    assert sim.poll() == []
    sim.m.record_poll(sim.now)
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == "" and (join.body.group_instance_id == ("host-1" if static else None))


def test_changing_the_subscription_rejoins_with_the_new_topics():
    sim = joined(Sim())
    sim.m.subscribe(["alpha", "gamma"], sim.now)
    assert sim.m.state is MemberState.REBALANCING
    sim.take()
    join = sim.expect(m.JoinGroupRequest)
    assert decode_subscription(join.body.protocols[0].metadata).topics == ("alpha", "gamma")
    assert join.body.reason == "subscription changed"
    with pytest.raises(TypeError):
        sim.m.subscribe("alpha", sim.now)
    sim.m.unsubscribe(sim.now)
    assert sim.m.state is MemberState.UNJOINED and sim.m.subscription is None


def test_group_member_needs_a_group_id_and_positions_for_auto_commit():
    with pytest.raises(ValueError, match="group.id"):
        GroupMember(ConsumerConfig())
    with pytest.raises(ValueError, match="positions"):
        GroupMember(ConsumerConfig(group_id="g"))
    with pytest.raises(ValueError, match="group.instance.id"):
        GroupMember(make_config(), group_instance_id="")

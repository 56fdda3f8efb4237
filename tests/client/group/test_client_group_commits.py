"""The sans-IO group member's offsets (kafkawire.client.core.group.member): commits with the generation,
their outcomes and retries, commits during a rebalance and outside any group, auto-commit, the commits
of close, committed-offset fetches; every request encoded and every response decoded at its version.
"""
from __future__ import annotations

import pytest

from kafkawire import messages as m
from kafkawire.client.core.group.member import GroupMember
from kafkawire.client.core.group.protocol import (
    CommitCompleted, CommittedOffsets, MemberState, OffsetAndMetadata, PartitionsLost, PartitionsRevoked,
)
from kafkawire.client.core.topic_partition import TopicPartition as TP
from kafkawire.client.errors import CommitFailedError, RebalanceInProgressError
from kafkawire.error_codes import ErrorCode as E

from support.group_helpers import (
    ASSIGNED, GROUP, TOPICS, Sim, commit_response, fetch_response, find_ok, join_ok, joined, make_config, sync_ok,
)


def test_commits_carry_the_generation_and_report_their_outcome():
    sim = joined(Sim())
    rid = sim.m.commit({TP("alpha", 0): OffsetAndMetadata(10, "meta", 3), TP("beta", 0): 4}, sim.now)
    commit = sim.expect(m.OffsetCommitRequest)
    body = commit.body
    assert (body.group_id, body.generation_id_or_member_epoch, body.member_id, commit.version) == (GROUP, 1, "me-1", 9)
    assert {(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
            for t in body.topics for p in t.partitions} == {("alpha", 0, 10, 3, "meta"), ("beta", 0, 4, -1, "")}
    sim.reply(commit, commit_response(commit))
    (done,) = sim.take(CommitCompleted)
    assert done.request_id == rid and done.error is None and not done.auto
    assert done.offsets[TP("beta", 0)] == OffsetAndMetadata(4)
    # commitAsync: one attempt, a coordinator error fails it
    rid = sim.m.commit({TP("alpha", 0): 11}, sim.now)
    commit = sim.expect(m.OffsetCommitRequest)
    sim.reply(commit, commit_response(commit, E.NOT_COORDINATOR))
    (done,) = sim.take(CommitCompleted)
    assert done.error.error_code == E.NOT_COORDINATOR and done.error.retriable
    # commitSync: retried once the coordinator is found again
    rid = sim.m.commit({TP("alpha", 0): 12}, sim.now, timeout_ms=2_000)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    commit = sim.expect(m.OffsetCommitRequest)
    sim.reply(commit, commit_response(commit, E.COORDINATOR_LOAD_IN_PROGRESS))
    assert sim.poll() == []
    sim.advance(100)
    commit = sim.expect(m.OffsetCommitRequest)
    sim.reply(commit, commit_response(commit))
    assert [(e.request_id, e.error) for e in sim.take(CommitCompleted)] == [(rid, None)]
    # ... until its timeout
    rid = sim.m.commit({TP("alpha", 0): 13}, sim.now, timeout_ms=150)
    sim.expect(m.OffsetCommitRequest)
    sim.advance(150)
    sim.poll()
    (done,) = sim.take(CommitCompleted)
    assert done.request_id == rid and done.error.error_code == E.REQUEST_TIMED_OUT
    # an empty commit completes at once
    rid = sim.m.commit({}, sim.now)
    assert sim.take(CommitCompleted) == [CommitCompleted(rid, {})]
    with pytest.raises(ValueError):
        sim.m.commit({TP("alpha", 0): -1}, sim.now)
    with pytest.raises(TypeError):
        sim.m.commit({TP("alpha", 0): "7"}, sim.now)


@pytest.mark.parametrize("code", [E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.REBALANCE_IN_PROGRESS])
def test_a_commit_refused_for_the_generation_fails_and_the_member_rejoins(code):
    sim = joined(Sim())
    sim.m.commit({TP("alpha", 0): 1}, sim.now)
    commit = sim.expect(m.OffsetCommitRequest)
    sim.reply(commit, commit_response(commit, code))
    events = sim.take()
    expected_error = RebalanceInProgressError if code == E.REBALANCE_IN_PROGRESS else CommitFailedError
    assert isinstance(events[0], CommitCompleted) and isinstance(events[0].error, expected_error)
    lost_or_revoked = PartitionsRevoked if code == E.REBALANCE_IN_PROGRESS else PartitionsLost
    assert events[1:] == [lost_or_revoked(ASSIGNED)]
    join = sim.expect(m.JoinGroupRequest)
    assert join.body.member_id == ("" if code == E.UNKNOWN_MEMBER_ID else "me-1")


def test_commits_during_a_rebalance_and_outside_any_group():
    sim = Sim()
    sim.m.subscribe(["alpha"], sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    sim.expect(m.JoinGroupRequest)
    sim.m.commit({TP("alpha", 0): 1}, sim.now)
    assert sim.poll() == []
    assert isinstance(sim.take(CommitCompleted)[0].error, RebalanceInProgressError)
    # no subscription (manual assignment): a plain commit for the group id
    solo = Sim()
    rid = solo.m.commit({TP("alpha", 0): 8}, solo.now)
    solo.reply(solo.expect(m.FindCoordinatorRequest), find_ok())
    commit = solo.expect(m.OffsetCommitRequest)
    assert (commit.body.generation_id_or_member_epoch, commit.body.member_id) == (-1, "")
    solo.reply(commit, commit_response(commit))
    assert solo.take(CommitCompleted) == [CommitCompleted(rid, {TP("alpha", 0): OffsetAndMetadata(8)})]
    rid = solo.m.fetch_committed([TP("alpha", 0), TP("alpha", 1)], solo.now)
    fetch = solo.expect(m.OffsetFetchRequest)
    solo.reply(fetch, fetch_response(fetch, {}, code=E.UNSTABLE_OFFSET_COMMIT))
    assert solo.poll() == []  # retried after the backoff
    solo.advance(100)
    fetch = solo.expect(m.OffsetFetchRequest)
    solo.reply(fetch, fetch_response(fetch, {TP("alpha", 0): 8}))
    assert solo.take(CommittedOffsets) == [CommittedOffsets(rid, {TP("alpha", 0): OffsetAndMetadata(8, "md", 4),
                                                                  TP("alpha", 1): None})]
    rid = solo.m.fetch_committed([TP("alpha", 0)], solo.now)
    fetch = solo.expect(m.OffsetFetchRequest)
    solo.reply(fetch, fetch_response(fetch, {}, code=E.TOPIC_AUTHORIZATION_FAILED))
    assert solo.take(CommittedOffsets)[0].error.error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_auto_commit_every_interval_while_stable():
    sim = joined(Sim(enable_auto_commit=True, auto_commit_interval_ms=2_500))
    sim.positions = {TP("alpha", 0): 100, TP("beta", 0): 7, TP("zeta", 9): 1}
    commits = []
    for _ in range(6):
        sim.advance(1_000)
        for request in sim.poll():
            if isinstance(request.body, m.OffsetCommitRequest):
                commits.append((sim.now, {(t.name, p.partition_index): p.committed_offset
                                          for t in request.body.topics for p in t.partitions}))
                sim.reply(request, commit_response(request))
            else:
                sim.reply(request, m.HeartbeatResponse(error_code=0))
    first = commits[0][0]
    assert [t - first for t, _ in commits] == [0, 3_000]  # due at 2.5 s, seen on the 1 s ticks
    assert commits[0][1] == {("alpha", 0): 100, ("beta", 0): 7}  # only what the member owns
    assert all(e.auto and e.error is None for e in sim.take(CommitCompleted))


def test_close_commits_revokes_and_leaves():
    sim = joined(Sim(enable_auto_commit=True))
    sim.positions = {TP("alpha", 1): 40}
    sim.m.close(sim.now)
    assert sim.m.state is MemberState.LEAVING
    commit = sim.poll_no_drain()[0]
    assert isinstance(commit.body, m.OffsetCommitRequest)
    assert sim.m.drain_events() == [PartitionsRevoked(ASSIGNED)]
    assert sim.poll() == []  # LeaveGroup after the final commit
    sim.reply(commit, commit_response(commit))
    leave = sim.expect(m.LeaveGroupRequest)
    assert [(x.member_id, x.group_instance_id, x.reason) for x in leave.body.members] == [
        ("me-1", None, "the consumer is being closed")]
    sim.reply(leave, m.LeaveGroupResponse(error_code=0, members=[
        m.LeaveGroupResponse.MemberResponse(member_id="me-1", error_code=0)]))
    assert sim.m.closed and sim.poll() == []
    with pytest.raises(Exception, match="closed"):
        sim.m.commit({TP("alpha", 0): 1}, sim.now)
    # a static member does not leave; a close that cannot finish ends at its timeout
    static = joined(Sim(GroupMember(make_config(), group_instance_id="host-1")))
    static.m.close(static.now)
    assert static.poll() == [] and static.poll() == []  # revocation taken, then done
    assert static.m.closed
    stuck = joined(Sim())
    stuck.m.commit({TP("alpha", 0): 1}, stuck.now, timeout_ms=60_000)
    stuck.m.close(stuck.now, timeout_ms=2_000)
    assert [type(r.body) for r in stuck.poll()] == [m.OffsetCommitRequest]
    stuck.advance(2_000)
    stuck.poll()
    assert stuck.m.closed and stuck.take(CommitCompleted)[0].error is not None


def test_an_offset_fetch_for_an_assignment_already_gone_is_dropped():
    sim = Sim()
    sim.m.subscribe(TOPICS, sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    sim.reply(sim.expect(m.JoinGroupRequest), join_ok("me-1"))
    sim.reply(sim.expect(m.SyncGroupRequest), sync_ok(ASSIGNED))
    fetch = sim.expect(m.OffsetFetchRequest)
    sim.reply(fetch, fetch_response(fetch, {}, top_code=E.NOT_COORDINATOR))
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    sim.advance(100)
    fetch = sim.expect(m.OffsetFetchRequest)  # retried after finding the coordinator
    sim.advance(1_000)
    beat = [r for r in sim.poll() if isinstance(r.body, m.HeartbeatRequest)][0]
    sim.reply(beat, m.HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS))
    sim.reply(fetch, fetch_response(fetch, {TP("alpha", 0): 3}))
    assert not sim.take(CommittedOffsets)
    with pytest.raises(TypeError):
        sim.m.handle_response(fetch, m.HeartbeatResponse(error_code=0), sim.now)

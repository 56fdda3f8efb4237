"""KIP-429 in the sans-IO classic group member (kafkawire.client.core.group.member with
``partition.assignment.strategy=cooperative-sticky``), driven by hand-built responses through the codec:
partitions kept through a rebalance, only revoked ones revoked, a rejoin at once after a revocation, only
added ones announced and looked up; and the eager ``sticky`` assignor's user data.
"""
from __future__ import annotations

from kafkawire import messages as m
from kafkawire.client.core.group.assignors import decode_assignment, decode_subscription, encode_subscription, Subscription
from kafkawire.client.core.group.protocol import (
    CommitCompleted, MemberState, PartitionsAssigned, PartitionsLost, PartitionsRevoked,
)
from kafkawire.client.core.group.sticky_assignor import decode_cooperative_user_data, decode_sticky_user_data
from kafkawire.client.core.topic_partition import TopicPartition as TP
from kafkawire.error_codes import ErrorCode as E

from support.group_helpers import Sim, commit_response, fetch_response, find_ok, join_error, join_ok, sync_ok

COOP = "cooperative-sticky"
A0, A1, A2, B0 = TP("alpha", 0), TP("alpha", 1), TP("alpha", 2), TP("beta", 0)


def cooperative(partitions=(A0, A1, B0), generation=1, **config) -> Sim:
    """A cooperative follower that joined generation ``generation`` with ``partitions``."""
    sim = Sim(partition_assignment_strategy=(COOP,), **config)
    assert sim.m.rebalance_protocol == "NONE"
    sim.m.subscribe(["alpha", "beta"], sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    sim.reply(sim.expect(m.JoinGroupRequest), join_error(E.MEMBER_ID_REQUIRED, "me-1"))
    sim.reply(sim.expect(m.JoinGroupRequest), join_ok("me-1", generation, protocol=COOP))
    sim.reply(sim.expect(m.SyncGroupRequest), sync_ok(partitions, COOP))
    fetch = sim.expect(m.OffsetFetchRequest)
    sim.reply(fetch, fetch_response(fetch, {}))
    sim.take()
    assert sim.m.rebalance_protocol == "COOPERATIVE"
    return sim


def rebalance(sim: Sim) -> m.JoinGroupRequest:
    """The coordinator says the group rebalances: the member rejoins; its JoinGroup is returned."""
    sim.advance(1_000)
    (heartbeat,) = sim.poll()
    sim.reply(heartbeat, m.HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS))
    return sim.expect(m.JoinGroupRequest)


def test_a_rebalance_keeps_the_partitions_and_reports_them_owned():
    sim = cooperative()
    join = rebalance(sim)
    assert sim.take() == []  # nothing revoked before joining: the partitions keep flowing
    assert sim.m.assignment == (A0, A1, B0) and sim.m.state is MemberState.JOINING
    (protocol,) = join.body.protocols
    subscription = decode_subscription(protocol.metadata)
    assert protocol.name == COOP and subscription.version == 3
    assert set(subscription.owned_partitions) == {A0, A1, B0} and subscription.generation_id == 1
    assert decode_cooperative_user_data(subscription.user_data) == 1  # Java's CooperativeStickyAssignor's
    # the same assignment again (generation 2): nothing revoked, nothing added, no lookup
    sim.reply(join, join_ok("me-1", 2, protocol=COOP))
    sim.reply(sim.expect(m.SyncGroupRequest), sync_ok([A0, A1, B0], COOP))
    assert sim.take() == [PartitionsAssigned((A0, A1, B0), 2, "me-1", False, added=())]
    assert sim.m.state is MemberState.STABLE and sim.poll() == []


def test_partitions_moved_away_are_revoked_alone_then_the_member_rejoins_at_once():
    sim = cooperative(enable_auto_commit=True)
    sim.positions.update({A0: 10, A1: 11, B0: 12})
    join = rebalance(sim)
    sim.reply(join, join_ok("me-1", 2, protocol=COOP))
    sim.reply(sim.expect(m.SyncGroupRequest), sync_ok([A0, A2], COOP))
    # revoked first (A1 and B0 go to others), committed with auto-commit before they go; A2 is added
    events = sim.take()
    assert events == [PartitionsRevoked((A1, B0)), PartitionsAssigned((A0, A2), 2, "me-1", False, added=(A2,))]
    assert sim.m.assignment == (A0, A2) and sim.m.state is MemberState.REBALANCING
    commit, fetch = sim.poll()
    assert isinstance(commit.body, m.OffsetCommitRequest) and commit.body.generation_id_or_member_epoch == 2
    assert {(t.name, p.partition_index, p.committed_offset) for t in commit.body.topics for p in t.partitions} == {
        ("alpha", 0, 10), ("alpha", 1, 11), ("beta", 0, 12)}
    (group,) = fetch.body.groups
    assert [(t.name, list(t.partition_indexes)) for t in group.topics] == [("alpha", [2])]  # the added one only
    assert sim.poll() == []  # JoinGroup waits for the commit of the revoked partitions
    sim.reply(commit, commit_response(commit))
    assert any(isinstance(e, CommitCompleted) and e.error is None for e in sim.take())
    rejoin = sim.expect(m.JoinGroupRequest)
    assert set(decode_subscription(rejoin.body.protocols[0].metadata).owned_partitions) == {A0, A2}
    assert "revoked" in rejoin.body.reason
    # the committed offset of the added partition still arrives while the member rejoins
    sim.reply(fetch, fetch_response(fetch, {A2: 40}))
    (offsets,) = [e for e in sim.take() if hasattr(e, "offsets")]
    assert offsets.offsets[A2].offset == 40


def test_a_subscription_change_revokes_only_the_topics_dropped():
    sim = cooperative()
    sim.m.subscribe(["alpha"], sim.now)
    assert sim.take() == [PartitionsRevoked((B0,))]
    join = sim.expect(m.JoinGroupRequest)
    assert set(decode_subscription(join.body.protocols[0].metadata).owned_partitions) == {A0, A1}
    assert sim.m.assignment == (A0, A1)


def test_losing_the_generation_loses_everything_even_when_cooperative():
    sim = cooperative()
    sim.advance(1_000)
    (heartbeat,) = sim.poll()
    sim.reply(heartbeat, m.HeartbeatResponse(error_code=E.ILLEGAL_GENERATION))
    assert sim.take() == [PartitionsLost((A0, A1, B0))]
    join = sim.expect(m.JoinGroupRequest)
    assert decode_subscription(join.body.protocols[0].metadata).owned_partitions == ()


def test_a_cooperative_leader_never_hands_over_a_partition_its_owner_still_holds():
    sim = cooperative(partitions=(A0, A1, A2, B0))
    sim.m.update_metadata({"alpha": 3, "beta": 1}, sim.now)
    join = rebalance(sim)
    newcomer = encode_subscription(Subscription(("alpha", "beta")))  # owns nothing yet
    sim.reply(join, join_ok("me-1", 2, leader="me-1", protocol=COOP,
                            members=[("me-1", None, join.body.protocols[0].metadata), ("new-1", None, newcomer)]))
    sync = sim.expect(m.SyncGroupRequest)
    sent = {a.member_id: decode_assignment(a.assignment).partitions for a in sync.body.assignments}
    # the balanced target is 2 and 2, but the two partitions moving are first only taken from the leader
    assert len(sent["me-1"]) == 2 and sent["new-1"] == ()
    sim.reply(sync, sync_ok(sent["me-1"], COOP))
    (revoked,) = sim.take(PartitionsRevoked)
    assert set(revoked.partitions) | set(sent["me-1"]) == {A0, A1, A2, B0}
    # second round: nobody owns the revoked two, so the newcomer gets them
    join = sim.expect(m.JoinGroupRequest)
    newcomer = encode_subscription(Subscription(("alpha", "beta"), generation_id=2))
    sim.reply(join, join_ok("me-1", 3, leader="me-1", protocol=COOP,
                            members=[("me-1", None, join.body.protocols[0].metadata), ("new-1", None, newcomer)]))
    sync = sim.expect(m.SyncGroupRequest)
    again = {a.member_id: decode_assignment(a.assignment).partitions for a in sync.body.assignments}
    assert again["me-1"] == sent["me-1"] and set(again["new-1"]) == set(revoked.partitions)


def test_eager_sticky_revokes_everything_and_sends_its_previous_assignment_as_user_data():
    sim = Sim(partition_assignment_strategy=("sticky",))
    sim.m.subscribe(["alpha", "beta"], sim.now)
    sim.reply(sim.expect(m.FindCoordinatorRequest), find_ok())
    join = sim.expect(m.JoinGroupRequest)
    assert decode_subscription(join.body.protocols[0].metadata).user_data is None  # nothing assigned yet
    sim.reply(join, join_ok("me-1", 4, protocol="sticky"))
    sim.reply(sim.expect(m.SyncGroupRequest), sync_ok([A1, B0], "sticky"))
    assert sim.m.rebalance_protocol == "EAGER"
    fetch = sim.expect(m.OffsetFetchRequest)
    sim.reply(fetch, fetch_response(fetch, {}))
    sim.take()
    join = rebalance(sim)
    assert sim.take() == [PartitionsRevoked((A1, B0))]
    subscription = decode_subscription(join.body.protocols[0].metadata)
    assert subscription.owned_partitions == () and subscription.generation_id == 4
    assert decode_sticky_user_data(subscription.user_data) == ((A1, B0), 4)

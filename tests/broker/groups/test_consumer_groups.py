"""KIP-848 consumer groups in the broker, without the network: the assignors, reconciliation as a
property (members that follow the protocol never own a partition at the same time, and settle on
the target), and the coordinator's answers (Kafka's error codes, static members, timeouts, offsets)."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from kafkawire import messages as m
from kafkawire.broker.groups.consumer_assignors import range_assignor, uniform
from kafkawire.broker.groups.consumer import ConsumerGroupCoordinator
from kafkawire.error_codes import ErrorCode as E

from support.fake_clock import FakeClock

TOPICS = {"orders": (uuid.uuid4(), 6), "payments": (uuid.uuid4(), 3), "other": (uuid.uuid4(), 2)}


def partitions_of(assignment):
    return {(t, p) for t, ps in assignment.items() for p in ps}


# ---- assignors ------------------------------------------------------------------------------------

def test_uniform_balances_and_keeps_partitions_where_they_are():
    subs = {m: frozenset({"orders"}) for m in ("a", "b", "c")}
    first = uniform(subs, {"orders": 6}, {})
    assert sorted(len(partitions_of(a)) for a in first.values()) == [2, 2, 2]
    assert set().union(*(partitions_of(a) for a in first.values())) == {("orders", p) for p in range(6)}
    subs["d"] = frozenset({"orders"})
    second = uniform(subs, {"orders": 6}, first)
    assert sorted(len(partitions_of(a)) for a in second.values()) == [1, 1, 2, 2]
    moved = sum(len(partitions_of(first[m]) - partitions_of(second[m])) for m in first)
    assert moved == 1  # only what the new member needs moves


def test_uniform_with_different_subscriptions_gives_each_topic_to_its_subscribers():
    subs = {"a": frozenset({"orders", "payments"}), "b": frozenset({"orders"}), "c": frozenset({"payments"})}
    result = uniform(subs, {"orders": 6, "payments": 3}, {})
    assert all(t in subs[m] for m, a in result.items() for t in a)
    counts = sorted(len(partitions_of(a)) for a in result.values())
    assert counts == [3, 3, 3]


def test_range_splits_each_topic_in_ranges():
    subs = {"a": frozenset({"orders", "payments"}), "b": frozenset({"orders", "payments"})}
    result = range_assignor(subs, {"orders": 5, "payments": 2}, {})
    assert result["a"] == {"orders": {0, 1, 2}, "payments": {0}}
    assert result["b"] == {"orders": {3, 4}, "payments": {1}}


# ---- the coordinator, through its requests --------------------------------------------------------

class Member:
    """A client following the protocol: it owns what it was last given, and gives up partitions as soon
    as an assignment no longer has them."""

    def __init__(self, coordinator, member_id, topics=("orders",), instance_id=None, regex=None, assignor=None):
        self.coordinator = coordinator
        self.member_id = member_id
        self.topics = list(topics) if topics is not None else None
        self.regex = regex
        self.instance_id = instance_id
        self.assignor = assignor
        self.epoch = 0
        self.owned: dict = {}

    def heartbeat(self, group="g", epoch=None, topics=None):
        epoch = self.epoch if epoch is None else epoch
        joining = epoch == 0
        request = m.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=self.member_id, member_epoch=epoch, instance_id=self.instance_id,
            rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_names=(topics if topics is not None else self.topics) if joining or topics else None,
            subscribed_topic_regex=self.regex if joining else None, server_assignor=self.assignor,
            topic_partitions=[] if joining else [m.ConsumerGroupHeartbeatRequest.TopicPartitions(
                topic_id=self.coordinator.topics()[t][0], partitions=sorted(ps)) for t, ps in self.owned.items()])
        result = self.coordinator.heartbeat(request, 1, "client", "/127.0.0.1")
        if result.error == E.NONE:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = {t: set(ps) for t, ps in result.assignment.items() if ps}
        return result

    def leave(self, epoch=-1):
        request = m.ConsumerGroupHeartbeatRequest(group_id="g", member_id=self.member_id, member_epoch=epoch,
                                                  instance_id=self.instance_id)
        return self.coordinator.heartbeat(request, 1, "client", "/127.0.0.1")


@pytest.fixture
def clock():
    return FakeClock(100.0)


@pytest.fixture
def coordinator(clock):
    return ConsumerGroupCoordinator(lambda: dict(TOPICS), session_timeout_ms=45_000, heartbeat_interval_ms=5_000,
                                    assignors=("uniform", "range"), clock=clock)


def settle(members, rounds=6):
    for _ in range(rounds):
        for member in members:
            assert member.heartbeat().error == E.NONE


def owned_everywhere(members):
    return [(t, p) for member in members for t, ps in member.owned.items() for p in ps]


def test_members_share_the_partitions_once_settled(coordinator):
    members = [Member(coordinator, f"m{i}") for i in range(3)]
    for member in members:
        assert member.heartbeat().error == E.NONE
    settle(members)
    owned = owned_everywhere(members)
    assert sorted(owned) == [("orders", p) for p in range(6)]
    group = coordinator.groups["g"]
    assert group.state == "Stable" and all(m.epoch == group.assignment_epoch for m in members)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "beat"]), st.integers(0, 4)), min_size=1, max_size=40))
def test_no_partition_is_ever_owned_twice(steps):
    coordinator = ConsumerGroupCoordinator(lambda: dict(TOPICS), session_timeout_ms=45_000, heartbeat_interval_ms=1,
                                           assignors=("uniform",), clock=FakeClock())
    members: dict[int, Member] = {}
    for action, index in steps:
        if action == "join" and index not in members:
            members[index] = Member(coordinator, f"m{index}", topics=("orders", "payments"))
            assert members[index].heartbeat().error == E.NONE
        elif action == "leave" and index in members:
            assert members.pop(index).leave().error == E.NONE
        elif action == "beat" and index in members:
            assert members[index].heartbeat().error == E.NONE
        owned = owned_everywhere(members.values())
        assert len(owned) == len(set(owned)), "a partition is owned by two members"
    settle(list(members.values()), rounds=4)
    owned = owned_everywhere(members.values())
    if members:
        assert sorted(owned) == sorted([("orders", p) for p in range(6)] + [("payments", p) for p in range(3)])


def test_join_validation(coordinator):
    def beat(**fields):
        base = dict(group_id="g", member_id="x", member_epoch=0, rebalance_timeout_ms=1000,
                    subscribed_topic_names=["orders"], topic_partitions=[])
        base.update(fields)
        return coordinator.heartbeat(m.ConsumerGroupHeartbeatRequest(**base), 1, "c", "h").error
    assert beat(group_id="") == E.INVALID_REQUEST
    assert beat(member_id="") == E.INVALID_REQUEST  # v1: the client makes its member id (KIP-1082)
    assert beat(rebalance_timeout_ms=-1) == E.INVALID_REQUEST
    assert beat(topic_partitions=None) == E.INVALID_REQUEST
    assert beat(subscribed_topic_names=None) == E.INVALID_REQUEST
    assert beat(member_epoch=-3) == E.INVALID_REQUEST
    assert beat(server_assignor="sticky") == E.UNSUPPORTED_ASSIGNOR
    assert beat(subscribed_topic_names=None, subscribed_topic_regex="orders[") == E.INVALID_REGULAR_EXPRESSION
    assert beat(member_epoch=3) == E.GROUP_ID_NOT_FOUND


def test_epochs_fence_a_member_that_is_behind(coordinator):
    a, b = Member(coordinator, "a"), Member(coordinator, "b")
    a.heartbeat()
    b.heartbeat()
    settle([a, b])
    assert a.heartbeat(epoch=a.epoch + 1).error == E.FENCED_MEMBER_EPOCH
    assert Member(coordinator, "ghost").heartbeat(epoch=4).error == E.UNKNOWN_MEMBER_ID
    # fenced, it rejoins with epoch 0 and the same member id
    a.epoch, a.owned = 0, {}
    assert a.heartbeat().error == E.NONE
    settle([a, b])
    assert sorted(owned_everywhere([a, b])) == [("orders", p) for p in range(6)]


def test_a_static_member_restarting_gets_its_partitions_back_without_a_rebalance(coordinator):
    a = Member(coordinator, "a1", instance_id="host-a")
    b = Member(coordinator, "b1", instance_id="host-b")
    a.heartbeat()
    b.heartbeat()
    settle([a, b])
    group = coordinator.groups["g"]
    epoch, before = group.group_epoch, dict(a.owned)
    assert a.leave(epoch=-2).member_epoch == -2
    # while it is away, another instance with its id is refused only if the id is still held
    restarted = Member(coordinator, "a2", instance_id="host-a")
    assert restarted.heartbeat().error == E.NONE
    assert restarted.owned == before and group.group_epoch == epoch
    assert Member(coordinator, "a3", instance_id="host-a").heartbeat().error == E.UNRELEASED_INSTANCE_ID
    assert a.heartbeat(epoch=5).error == E.FENCED_INSTANCE_ID


def test_session_timeout_fences_and_the_others_take_over(coordinator, clock):
    a, b = Member(coordinator, "a"), Member(coordinator, "b")
    a.heartbeat()
    b.heartbeat()
    settle([a, b])
    clock.now += 30
    b.heartbeat()
    clock.now += 20  # a is silent for 50 s, past the 45 s session timeout
    assert coordinator.expire() == [("g", "a")]
    settle([b])
    assert sorted(owned_everywhere([b])) == [("orders", p) for p in range(6)]


def test_a_member_that_does_not_revoke_in_time_is_fenced(coordinator, clock):
    a = Member(coordinator, "a")
    a.heartbeat()
    settle([a])
    b = Member(coordinator, "b")
    b.heartbeat()
    result = coordinator.heartbeat(m.ConsumerGroupHeartbeatRequest(  # a keeps claiming everything
        group_id="g", member_id="a", member_epoch=a.epoch, topic_partitions=[
            m.ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=TOPICS["orders"][0], partitions=list(range(6)))]),
        1, "c", "h")
    assert result.error == E.NONE
    clock.now += 31  # its rebalance timeout is 30 s
    assert ("g", "a") in coordinator.expire()


def test_regex_subscriptions_follow_new_topics(coordinator):
    topics = dict(TOPICS)
    coordinator.topics = lambda: topics
    a = Member(coordinator, "a", topics=None, regex="pay.*")
    a.heartbeat()
    settle([a])
    assert set(a.owned) == {"payments"}
    topics["payouts"] = (uuid.uuid4(), 2)  # created later: the next heartbeat sees it
    settle([a])
    assert a.owned == {"payments": {0, 1, 2}, "payouts": {0, 1}}


def test_offset_commits_check_the_member_epoch(coordinator):
    a = Member(coordinator, "a")
    a.heartbeat()
    settle([a])
    group = coordinator.groups["g"]
    assert coordinator.validate_offset_commit(group, "a", a.epoch, 9) is None
    assert coordinator.validate_offset_commit(group, "a", a.epoch - 1, 9) == E.STALE_MEMBER_EPOCH
    assert coordinator.validate_offset_commit(group, "zz", 1, 9) == E.UNKNOWN_MEMBER_ID
    assert coordinator.validate_offset_commit(group, "", -1, 9) == E.UNKNOWN_MEMBER_ID  # the group has members
    assert coordinator.validate_offset_fetch(group, "a", a.epoch) is None
    assert coordinator.validate_offset_fetch(group, "a", a.epoch + 1) == E.STALE_MEMBER_EPOCH
    a.leave()
    assert coordinator.validate_offset_commit(group, "", -1, 9) is None  # empty: admin tools may commit


def test_classic_and_consumer_groups_do_not_share_an_id(clock):
    busy = {"classic"}
    coordinator = ConsumerGroupCoordinator(lambda: dict(TOPICS), session_timeout_ms=45_000, heartbeat_interval_ms=1,
                                           assignors=("uniform",), clock=clock,
                                           classic_in_use=lambda group: group in busy)
    assert Member(coordinator, "a").heartbeat(group="classic").error == E.INCONSISTENT_GROUP_PROTOCOL

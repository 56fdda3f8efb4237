"""KIP-848 group state survives a coordinator restart (``ConsumerGroupStore``): members carry on with
their member ids, epochs and assignments, no new group epoch; a torn last line is dropped; a failed
write undoes the change and answers NOT_COORDINATOR; deleted groups stay deleted; the file compacts."""
from __future__ import annotations

import json

import pytest

from kafkawire import messages as m
from kafkawire.broker.groups.consumer_store import CONSUMER_GROUPS_FILE_NAME, ConsumerGroupStore
from kafkawire.broker.groups.consumer import ConsumerGroupCoordinator
from kafkawire.error_codes import ErrorCode as E

from support.fake_clock import FakeClock
from test_consumer_groups import TOPICS, Member, owned_everywhere, settle


def coordinator_on(path, clock, **store_options):
    coordinator = ConsumerGroupCoordinator(lambda: dict(TOPICS), session_timeout_ms=45_000,
                                           heartbeat_interval_ms=5_000, assignors=("uniform", "range"), clock=clock,
                                           store=ConsumerGroupStore(path, **store_options))
    coordinator.load()
    return coordinator


def restarted(members, coordinator):
    for member in members:
        member.coordinator = coordinator
    return members


def test_members_carry_on_after_a_restart_with_their_epochs_and_assignments(tmp_path):
    clock = FakeClock(100.0)
    first = coordinator_on(tmp_path, clock)
    members = [Member(first, f"m{i}", topics=("orders", "payments")) for i in range(3)]
    static = Member(first, "s1", instance_id="host-s")
    for member in [*members, static]:
        assert member.heartbeat().error == E.NONE
    settle([*members, static])
    group = first.groups["g"]
    before = (group.group_epoch, group.assignment_epoch, group.assignor, group.state)
    epochs = {member.member_id: (member.epoch, {t: set(p) for t, p in member.owned.items()})
              for member in [*members, static]}
    first.close()

    clock.now += 1000  # long past every session timeout: they restart from the load
    second = coordinator_on(tmp_path, clock)
    group = second.groups["g"]
    assert (group.group_epoch, group.assignment_epoch, group.assignor, group.state) == before
    assert second.expire() == []
    for member in restarted([*members, static], second):
        result = member.heartbeat()
        assert result.error == E.NONE and result.member_epoch == epochs[member.member_id][0]
        assert member.owned == epochs[member.member_id][1]
    assert group.group_epoch == before[0]
    assert sorted(owned_everywhere([*members, static])) == sorted(
        [("orders", p) for p in range(6)] + [("payments", p) for p in range(3)])
    clock.now += 46
    assert sorted(second.expire()) == [("g", m.member_id) for m in [*members, static]]


def test_a_reconciliation_in_progress_carries_on_after_a_restart(tmp_path):
    clock = FakeClock(100.0)
    first = coordinator_on(tmp_path, clock)
    a = Member(first, "a")
    a.heartbeat()
    settle([a])
    b = Member(first, "b")
    b.heartbeat()
    a.heartbeat()  # a is told to revoke half of its partitions, and has not said it did yet
    assert first.groups["g"].members["a"].state.value == "unrevoked_partitions"
    first.close()

    second = coordinator_on(tmp_path, clock)
    assert second.groups["g"].members["a"] == first.groups["g"].members["a"]
    assert second.groups["g"].rebalance_deadlines["a"] == clock.now + 30  # its rebalance timeout, from now
    settle(restarted([a, b], second))
    assert sorted(owned_everywhere([a, b])) == [("orders", p) for p in range(6)]
    assert len(a.owned["orders"]) == len(b.owned["orders"]) == 3


def test_a_static_member_that_left_for_now_gets_its_partitions_back_after_a_restart(tmp_path):
    clock = FakeClock(100.0)
    first = coordinator_on(tmp_path, clock)
    a, b = Member(first, "a1", instance_id="host-a"), Member(first, "b1", instance_id="host-b")
    a.heartbeat()
    b.heartbeat()
    settle([a, b])
    owned, epoch = dict(a.owned), first.groups["g"].group_epoch
    assert a.leave(epoch=-2).error == E.NONE
    first.close()

    second = coordinator_on(tmp_path, clock)
    again = Member(second, "a2", instance_id="host-a")
    assert again.heartbeat().error == E.NONE
    assert again.owned == owned and second.groups["g"].group_epoch == epoch


def test_a_torn_last_line_is_dropped_and_the_rest_replayed(tmp_path):
    clock = FakeClock(100.0)
    first = coordinator_on(tmp_path, clock)
    a = Member(first, "a")
    a.heartbeat()
    settle([a])
    epoch = a.epoch
    first.close()
    with open(tmp_path / CONSUMER_GROUPS_FILE_NAME, "ab") as file:
        file.write(b'{"g":"g","m":{"a":{"i":nu')  # killed in the middle of a write
    second = coordinator_on(tmp_path, clock)
    assert second.groups["g"].members["a"].member_epoch == epoch
    assert restarted([a], second)[0].heartbeat().error == E.NONE and a.epoch == epoch


def test_a_failed_write_undoes_the_change_and_answers_not_coordinator(tmp_path, monkeypatch):
    clock = FakeClock(100.0)
    coordinator = coordinator_on(tmp_path, clock)
    a = Member(coordinator, "a")
    a.heartbeat()
    settle([a])
    group_epoch = coordinator.groups["g"].group_epoch

    def fail(record):
        raise OSError("disk full")
    monkeypatch.setattr(coordinator.store._journal, "append", fail)
    b = Member(coordinator, "b")
    assert b.heartbeat().error == E.NOT_COORDINATOR
    assert set(coordinator.groups["g"].members) == {"a"} and coordinator.groups["g"].group_epoch == group_epoch
    assert Member(coordinator, "c").heartbeat(group="new").error == E.NOT_COORDINATOR
    assert "new" not in coordinator.groups
    monkeypatch.undo()
    assert b.heartbeat().error == E.NONE  # the client retries once the coordinator can write again
    assert set(coordinator.groups["g"].members) == {"a", "b"}


def test_a_deleted_group_stays_deleted_and_the_file_compacts(tmp_path):
    clock = FakeClock(100.0)
    coordinator = coordinator_on(tmp_path, clock, compact_min_bytes=2000)
    members = [Member(coordinator, f"m{i}") for i in range(2)]
    for member in members:
        member.heartbeat()
    for _ in range(20):  # members joining and leaving: many lines
        settle(members)
        assert members[1].leave().error == E.NONE
        members[1].epoch, members[1].owned = 0, {}
        members[1].heartbeat()
    size = (tmp_path / CONSUMER_GROUPS_FILE_NAME).stat().st_size
    assert size < 8000  # compacted along the way
    other = Member(coordinator, "x")
    other.heartbeat(group="gone")
    assert coordinator.heartbeat(m.ConsumerGroupHeartbeatRequest(
        group_id="gone", member_id="x", member_epoch=-1), 1, "c", "h").error == E.NONE
    coordinator.forget("gone")
    coordinator.close()

    again = coordinator_on(tmp_path, clock)
    assert set(again.groups) == {"g"}
    assert set(again.groups["g"].members) == {"m0", "m1"}
    lines = [json.loads(line) for line in (tmp_path / CONSUMER_GROUPS_FILE_NAME).read_text().splitlines()]
    assert [line["g"] for line in lines] == ["g"]  # loading compacts to one line a group


@pytest.mark.parametrize("unreadable", [b'{"g":"h","m":{"a":{}}}\n', b'{"g":7}\n', b'[1,2]\n'])
def test_unreadable_lines_are_skipped(tmp_path, unreadable):
    clock = FakeClock(100.0)
    first = coordinator_on(tmp_path, clock)
    Member(first, "a").heartbeat()
    first.close()
    with open(tmp_path / CONSUMER_GROUPS_FILE_NAME, "ab") as file:
        file.write(unreadable)
    assert set(coordinator_on(tmp_path, clock).groups) == {"g"}


def test_a_refused_first_heartbeat_leaves_no_group_behind(tmp_path):
    clock = FakeClock(100.0)
    coordinator = coordinator_on(tmp_path, clock)
    request = m.ConsumerGroupHeartbeatRequest(group_id="denied", member_id="a", member_epoch=0,
                                              rebalance_timeout_ms=1000, subscribed_topic_names=["orders"],
                                              topic_partitions=[])
    result = coordinator.heartbeat(request, 1, "c", "h", may_describe=lambda topic: False)
    assert result.error == E.TOPIC_AUTHORIZATION_FAILED
    assert "denied" not in coordinator.groups
    coordinator.close()
    assert coordinator_on(tmp_path, clock).groups == {}

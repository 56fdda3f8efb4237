"""Streams groups (KIP-1071) without the network: the task assignor's invariants as a property, the
coordinator's reconciliation as a property (members following the protocol never hold a task active at
once, and settle on the target), topology configuration, timeouts and the state kept over a restart."""
from __future__ import annotations

import uuid

from hypothesis import given, settings, strategies as st

from kafkawire.broker.groups.streams import StreamsGroupCoordinator, StreamsGroupStore
from kafkawire.broker.groups.streams.assignor import MemberSpec, assign
from kafkawire.broker.groups.streams.topology import Status, Subtopology, TopicInfo, Topology, configure
from kafkawire.error_codes import ErrorCode

from support.fake_clock import FakeClock
from support.streams_member import StreamsMember, topology

TOPICS = {"in": (uuid.uuid4(), 6), "app-0-changelog": (uuid.uuid4(), 6)}


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdef"), st.sampled_from("xyz"), min_size=1),
       st.dictionaries(st.sampled_from(["s0", "s1", "s2"]), st.integers(0, 7), min_size=1),
       st.integers(0, 3), st.randoms(use_true_random=False))
def test_assignor_places_every_active_task_once_and_never_beside_its_standby(process_of, tasks, standbys, rnd):
    every = {(s, p) for s, n in tasks.items() for p in range(n)}
    previous = {m: MemberSpec(proc, frozenset(t for t in every if rnd.random() < 0.3)) for m, proc in process_of.items()}
    result = assign(previous, tasks, set(tasks), standbys)
    actives = [t for active, _ in result.values() for t in active]
    assert sorted(actives) == sorted(every)  # each exactly once
    for member, (active, standby) in result.items():
        assert not active & standby
    share = -(-len(every) // len(process_of))
    assert all(len(active) <= share for active, _ in result.values())  # no member above its share
    for task in every:  # copies of a task sit on distinct processes, as many as there are processes
        holders = [process_of[m] for m, (active, standby) in result.items() if task in active | standby]
        assert len(holders) == len(set(holders)) == min(1 + standbys, len(set(process_of.values())))


def test_assignor_is_balanced_and_sticky():
    members = {m: MemberSpec(m) for m in "abc"}
    first = assign(members, {"s": 6}, set(), 0)
    assert sorted(len(a) for a, _ in first.values()) == [2, 2, 2]
    members = {m: MemberSpec(m, frozenset(first[m][0])) for m in "abc"} | {"d": MemberSpec("d")}
    second = assign(members, {"s": 6}, set(), 0)
    assert sorted(len(a) for a, _ in second.values()) == [1, 1, 2, 2]
    assert sum(len(first[m][0] - second[m][0]) for m in "abc") == 1  # only what d needs moves


def test_configure_decides_repartition_and_changelog_counts():
    shape = Topology(1, (Subtopology("0", ("in",), ("rep",), (TopicInfo("log-0"),)),
                         Subtopology("1", (), (), (TopicInfo("log-1"),), (TopicInfo("rep"),))))
    configured = configure(shape, {"in": 6})
    assert configured.status[0] == Status.MISSING_INTERNAL_TOPICS
    assert {t.name: t.partitions for t in configured.to_create} == {"rep": 6, "log-0": 6, "log-1": 6}
    assert configure(shape, {"in": 6, "rep": 6, "log-0": 6, "log-1": 6}).tasks == {"0": 6, "1": 6}
    wrong = configure(shape, {"in": 6, "rep": 6, "log-0": 3, "log-1": 6})
    assert wrong.status[0] == Status.INCORRECTLY_PARTITIONED_TOPICS and wrong.tasks == {}
    assert configure(shape, {}).status == (Status.MISSING_SOURCE_TOPICS, "Source topics in are missing.")


def _coordinator(tmp_path=None, clock=None, standbys=1, warmups=0):
    store = StreamsGroupStore(tmp_path) if tmp_path is not None else None
    coordinator = StreamsGroupCoordinator(lambda: dict(TOPICS), session_timeout_ms=45_000, heartbeat_interval_ms=5_000,
                                          num_standby_replicas=standbys, clock=clock or FakeClock(), store=store,
                                          num_warmup_replicas=warmups)
    coordinator.load()
    return coordinator


def _beat(coordinator, member, leave=False):
    result = coordinator.heartbeat(member.heartbeat(leave), "client", "host")
    assert result.error == 0, result
    member.epoch = result.member_epoch
    if result.assignment is not None:
        member.active, member.standby = set(result.assignment.active), set(result.assignment.standby)
        member.warmup = set(result.assignment.warmup)
    return result


SHAPE = topology({"id": "0", "sources": ["in"], "changelogs": ["app-0-changelog"]})
STATELESS = topology({"id": "0", "sources": ["in"]})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from(["beat", "beat", "join", "leave"])), max_size=40))
def test_members_following_the_protocol_never_share_an_active_task_and_settle(steps):
    """Members a and b share a process, c and d another; one standby of each task, warm-ups on."""
    coordinator = _coordinator(standbys=1, warmups=2)
    members: dict[str, StreamsMember] = {}
    for name, action in steps:
        member = members.get(name)
        if action == "leave":
            if member is not None and member.epoch > 0:
                _beat(coordinator, member, leave=True)
                del members[name]
            continue
        if member is None or action == "join":  # (a rejoin under the same id starts afresh)
            member = members[name] = StreamsMember("g", name, SHAPE, process_id="p1" if name in "ab" else "p2")
        _beat(coordinator, member)
        actives = [t for m in members.values() for t in m.active]
        assert len(actives) == len(set(actives))
        for process in ("p1", "p2"):  # never the active and a standby of a task in one process
            here = [m for m in members.values() if m.process_id == process]
            assert not {t for m in here for t in m.active} & {t for m in here for t in m.standby | m.warmup}
    for _ in range(4):  # then everyone heartbeats: the group settles on the target, every task placed
        for member in members.values():
            _beat(coordinator, member)
    if members:
        group = coordinator.groups["g"]
        assert group.state == "Stable"
        assert sorted(t for m in members.values() for t in m.active) == [("0", p) for p in range(6)]


def test_a_silent_member_is_fenced_and_its_tasks_move(tmp_path):
    clock = FakeClock()
    coordinator = _coordinator(clock=clock, standbys=0)
    a, b = StreamsMember("g", "a", STATELESS), StreamsMember("g", "b", STATELESS)
    for _ in range(3):
        _beat(coordinator, a)
        _beat(coordinator, b)
    assert len(a.active) == len(b.active) == 3
    clock.now += 30
    _beat(coordinator, a)
    clock.now += 20  # b has been silent for 50 s: past its session timeout
    assert coordinator.expire() == [("g", "b")]
    _beat(coordinator, a)
    assert len(a.active) == 6


def test_groups_carry_on_after_a_restart(tmp_path):
    coordinator = _coordinator(tmp_path)
    a, b = StreamsMember("g", "a", SHAPE), StreamsMember("g", "b", SHAPE)
    for _ in range(3):
        _beat(coordinator, a)
        _beat(coordinator, b)
    assert a.standby == b.active and a.active
    coordinator.close()
    restarted = _coordinator(tmp_path)
    group = restarted.groups["g"]
    assert group.topology is not None and group.topology.subtopologies[0].source_topics == ("in",)
    for member in (a, b):
        stored = group.members[member.member_id]
        assert (stored.member_epoch, set(stored.assigned.active), set(stored.assigned.standby)) == \
            (member.epoch, member.active, member.standby)
    before = (a.epoch, set(a.active))
    _beat(restarted, a)
    assert (a.epoch, set(a.active)) == before  # no rebalance
    restarted.close()


def test_a_failed_write_undoes_the_change_and_keeps_the_deadlines(tmp_path, monkeypatch):
    clock = FakeClock()
    coordinator = _coordinator(tmp_path, clock, standbys=0)
    a = StreamsMember("g", "a", STATELESS)
    for _ in range(2):
        _beat(coordinator, a)
    group = coordinator.groups["g"]
    epoch, deadlines = group.group_epoch, dict(group.session_deadlines)

    def fail(record):
        raise OSError("disk full")
    monkeypatch.setattr(coordinator.store._journal, "append", fail)
    b = StreamsMember("g", "b", STATELESS)
    assert coordinator.heartbeat(b.heartbeat(False), "client", "host").error == ErrorCode.NOT_COORDINATOR
    group = coordinator.groups["g"]
    assert set(group.members) == {a.member_id} and group.group_epoch == epoch
    assert group.session_deadlines == deadlines  # a stays on its session, not a fresh one
    new = StreamsMember("new", "c", STATELESS)
    assert coordinator.heartbeat(new.heartbeat(False), "client", "host").error == ErrorCode.NOT_COORDINATOR
    assert "new" not in coordinator.groups
    monkeypatch.undo()
    _beat(coordinator, b)  # the member retries once the coordinator can write again
    assert set(coordinator.groups["g"].members) == {a.member_id, b.member_id}
    coordinator.close()


def test_a_shutdown_request_reaches_every_member():
    coordinator = _coordinator(standbys=0)
    a, b = StreamsMember("g", "a", STATELESS), StreamsMember("g", "b", STATELESS)
    _beat(coordinator, a)
    _beat(coordinator, b)
    request = a.heartbeat()
    request.shutdown_application = True
    coordinator.heartbeat(request, "client", "host")
    assert [code for code, _ in _beat(coordinator, b).status] == [Status.SHUTDOWN_APPLICATION]


def test_an_existing_repartition_topic_keeps_its_count():
    shape = Topology(1, (Subtopology("0", ("in",), ("rep",)), Subtopology("1", (), (), (), (TopicInfo("rep"),))))
    assert configure(shape, {"in": 6, "rep": 3}).tasks == {"0": 6, "1": 3}


def test_a_stateful_task_moves_only_once_its_warm_up_has_caught_up():
    coordinator = _coordinator(standbys=0, warmups=2)
    a, b = StreamsMember("g", "a", SHAPE), StreamsMember("g", "b", SHAPE)
    _beat(coordinator, a)
    a.end_offsets = {("0", p): 1000 for p in range(6)}
    for _ in range(2):
        _beat(coordinator, a)
        _beat(coordinator, b)
    assert len(a.active) == 6 and b.active == set()  # the three moving to b keep running on a...
    assert len(b.warmup) == 2  # ...while b restores two of them (the warm-up budget)
    b.offsets = {task: 995 for task in b.warmup}  # within the acceptable recovery lag
    for _ in range(3):
        _beat(coordinator, b)
        _beat(coordinator, a)
    assert len(b.active) == 2 and len(b.warmup) == 1 and len(a.active) == 4
    b.offsets |= {task: 1000 for task in b.warmup}
    for _ in range(3):
        _beat(coordinator, b)
        _beat(coordinator, a)
    assert len(a.active) == len(b.active) == 3 and b.warmup == set()


def test_topology_epochs():
    coordinator = _coordinator(standbys=0)
    _beat(coordinator, StreamsMember("g", "a", STATELESS))
    different = topology({"id": "0", "sources": ["in"], "changelogs": ["app-0-changelog"]})
    refused = coordinator.heartbeat(StreamsMember("g", "b", different).heartbeat(), "client", "host")
    assert refused.error == ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH
    newer = StreamsMember("g", "c", topology({"id": "0", "sources": ["in"], "changelogs": ["app-0-changelog"]},
                                             epoch=2))
    _beat(coordinator, newer)
    assert coordinator.groups["g"].topology.epoch == 2
    stale = StreamsMember("g", "d", STATELESS)
    assert [code for code, _ in _beat(coordinator, stale).status] == [Status.STALE_TOPOLOGY]

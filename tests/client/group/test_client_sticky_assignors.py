"""The sticky assignors (kafkawire.client.core.group.sticky_assignor): balance, stickiness and the cooperative
rule as Hypothesis properties over random groups and reassignments, Java's documented examples, the
generation rules, and the user data bytes against kafka-python's codecs and the message specs.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire.client.core.group.assignors import ASSIGNORS, Subscription, decode_subscription, encode_subscription
from kafkawire.client.core.group.sticky_assignor import (
    CooperativeStickyAssignor, StickyAssignor, decode_cooperative_user_data, decode_sticky_user_data,
    encode_cooperative_user_data, encode_sticky_user_data,
)
from kafkawire.client.core.topic_partition import TopicPartition as TP

# kafka-python loads its schemas through a deprecated importlib API
pytestmark = pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")

STICKY, COOPERATIVE = StickyAssignor(), CooperativeStickyAssignor()
MEMBERS = st.lists(st.text(alphabet="abcdxyz0123", min_size=1, max_size=4), min_size=1, max_size=8, unique=True)
COUNTS = st.dictionaries(st.sampled_from(["t0", "t1", "orders", "z"]), st.integers(0, 12), min_size=1)


def everything(counts, topics=None):
    return {TP(t, p) for t, n in counts.items() if topics is None or t in topics for p in range(n)}


def check_exactly_once(assignment, counts, topics_of):
    handed_out = [tp for partitions in assignment.values() for tp in partitions]
    assert len(handed_out) == len(set(handed_out))
    wanted = {tp for topics in topics_of.values() for tp in everything(counts, topics)}
    assert set(handed_out) == wanted
    for member, partitions in assignment.items():
        assert {tp.topic for tp in partitions} <= set(topics_of[member])


def sticky_round(assignor, counts, members, previous, generation):
    """One rebalance: each member reports what it owned in ``generation`` (as its assignor reads it)."""
    subscriptions = {}
    for member in members:
        owned = tuple(previous.get(member, ()))
        if isinstance(assignor, CooperativeStickyAssignor):
            subscriptions[member] = Subscription(tuple(counts), owned_partitions=owned, generation_id=generation)
        else:
            subscriptions[member] = Subscription(tuple(counts), user_data=assignor.user_data(owned, generation))
    return assignor.assign_subscriptions(counts, subscriptions)


@settings(max_examples=150, deadline=None)
@given(counts=COUNTS, before=MEMBERS, after=MEMBERS, kind=st.sampled_from(["sticky", "cooperative-sticky"]))
def test_equal_subscriptions_are_balanced_exactly_once_and_sticky(counts, before, after, kind):
    assignor = ASSIGNORS[kind]
    topics_of = {member: tuple(counts) for member in after}
    first = assignor.assign(counts, {member: tuple(counts) for member in before})
    check_exactly_once(first, counts, {member: tuple(counts) for member in before})
    total = len(everything(counts))
    second = sticky_round(assignor, counts, after, first, generation=1)
    if kind == "cooperative-sticky":  # partitions moving between members wait for their owner to revoke them
        moved = {tp for member, parts in second.items() for tp in parts if tp not in first.get(member, ())}
        owned_elsewhere = {tp for member in after for tp in first.get(member, ())}
        assert not moved & owned_elsewhere
        kept = {member: [tp for tp in first.get(member, ()) if tp in second[member]] for member in after}
        second = sticky_round(assignor, counts, after, kept, generation=2)
    check_exactly_once(second, counts, topics_of)
    sizes = sorted(len(parts) for parts in second.values())
    assert sizes[-1] - sizes[0] <= 1
    # sticky: each member that stays keeps as many of its partitions as its quota allows
    quota = total // len(after)
    for member in set(before) & set(after):
        assert len(set(first[member]) & set(second[member])) >= min(len(first[member]), quota)


@st.composite
def unequal_groups(draw):
    counts = draw(COUNTS)
    members = draw(MEMBERS)
    topics_of = {member: tuple(draw(st.lists(st.sampled_from(sorted(counts)), min_size=1, unique=True)))
                 for member in members}
    return counts, topics_of


@settings(max_examples=150, deadline=None)
@given(group=unequal_groups(), again=unequal_groups(), kind=st.sampled_from(["sticky", "cooperative-sticky"]))
def test_unequal_subscriptions_are_exactly_once_and_no_single_move_evens_them(group, again, kind):
    counts, topics_of = group
    assignor = ASSIGNORS[kind]
    first = assignor.assign(counts, topics_of)
    check_exactly_once(first, counts, topics_of)
    for member, partitions in first.items():  # no partition can go to a member with two fewer
        for tp in partitions:
            for other, topics in topics_of.items():
                if tp.topic in topics:
                    assert len(partitions) <= len(first[other]) + 1
    # a reassignment with other subscriptions still hands every partition out once
    _, new_topics = again
    members = list(new_topics)
    subscriptions = {member: Subscription(new_topics[member], owned_partitions=tuple(first.get(member, ())),
                                          generation_id=1, user_data=STICKY.user_data(first.get(member, ()), 1))
                     for member in members}
    result = assignor.assign_subscriptions(counts, subscriptions)
    if kind == "sticky":
        check_exactly_once(result, counts, new_topics)
    else:  # nothing goes to a member while another still owns it
        for member, partitions in result.items():
            for tp in partitions:
                assert all(tp not in first.get(other, ()) for other in members if other != member)


def test_javas_documented_examples():
    # StickyAssignor's javadoc, example 1: after C1 leaves, C0 and C2 keep all they had
    counts = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    first = STICKY.assign(counts, {c: list(counts) for c in ("C0", "C1", "C2")})
    assert sorted(len(p) for p in first.values()) == [2, 3, 3]
    second = sticky_round(STICKY, counts, ["C0", "C2"], first, generation=1)
    assert set(first["C0"]) <= set(second["C0"]) and set(first["C2"]) <= set(second["C2"])
    assert sorted(len(p) for p in second.values()) == [4, 4]
    # example 2: unequal subscriptions, then C0 leaves; sticky keeps five of six where round robin keeps three
    subscriptions = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    counts = {"t0": 1, "t1": 2, "t2": 3}
    first = STICKY.assign(counts, subscriptions)
    assert first == {"C0": [TP("t0", 0)], "C1": [TP("t1", 0), TP("t1", 1)],
                     "C2": [TP("t2", 0), TP("t2", 1), TP("t2", 2)]}
    left = {member: Subscription(tuple(subscriptions[member]), user_data=STICKY.user_data(first[member], 1))
            for member in ("C1", "C2")}
    assert STICKY.assign_subscriptions(counts, left) == {
        "C1": [TP("t0", 0), TP("t1", 0), TP("t1", 1)], "C2": [TP("t2", 0), TP("t2", 1), TP("t2", 2)]}


def test_generations_decide_between_claims():
    counts = {"t": 4}
    # a newer generation's claim wins; the member still at generation 2 keeps nothing of its stale view
    subscriptions = {
        "a": Subscription(("t",), owned_partitions=(TP("t", 0), TP("t", 1)), generation_id=3),
        "b": Subscription(("t",), owned_partitions=(TP("t", 0), TP("t", 1), TP("t", 2), TP("t", 3)), generation_id=2)}
    result = STICKY.assign_subscriptions(counts, {m: Subscription(("t",), user_data=STICKY.user_data(
        s.owned_partitions, s.generation_id)) for m, s in subscriptions.items()})
    assert result == {"a": [TP("t", 0), TP("t", 1)], "b": [TP("t", 2), TP("t", 3)]}
    # claimed twice in one generation: nobody keeps it, and under cooperative nobody gets it this round
    twice = {"a": Subscription(("t",), owned_partitions=(TP("t", 0), TP("t", 1)), generation_id=5),
             "b": Subscription(("t",), owned_partitions=(TP("t", 1), TP("t", 2)), generation_id=5)}
    result = COOPERATIVE.assign_subscriptions(counts, twice)
    assert TP("t", 1) not in result["a"] + result["b"]
    assert TP("t", 0) in result["a"] and TP("t", 2) in result["b"]
    # partitions of topics that are gone, or beyond the topic's count, are not kept
    ghost = {"a": Subscription(("t",), owned_partitions=(TP("t", 9), TP("gone", 0)), generation_id=1)}
    assert COOPERATIVE.assign_subscriptions(counts, ghost) == {"a": [TP("t", p) for p in range(4)]}


# ---- bytes ---------------------------------------------------------------------------------------------------

@settings(max_examples=100, deadline=None)
@given(owned=st.lists(st.tuples(st.sampled_from(["a", "orders", "\u00e9t\u00e9"]), st.integers(0, 2 ** 31 - 1)),
                      unique=True, max_size=12),
       generation=st.integers(-1, 2 ** 31 - 1))
def test_sticky_user_data_is_kafka_pythons_struct_and_javas_layout(owned, generation):
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
    partitions = [TP(t, p) for t, p in owned]
    ours = encode_sticky_user_data(partitions, generation)
    by_topic = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    # Java's StickyAssignor writes the bare struct (kafka-python's ApiData adds a version header unless told not to)
    theirs = StickyAssignorUserData(version=1, previous_assignment=sorted(by_topic.items()), generation=generation)
    assert ours == theirs.encode(header=False)
    back = StickyAssignorUserData.decode(ours, version=1, header=False)
    assert {TP(t.topic, p) for t in back.previous_assignment for p in t.partitions} == set(partitions)
    assert decode_sticky_user_data(ours) == (tuple(TP(t, p) for t, ps in sorted(by_topic.items()) for p in ps),
                                             generation)
    v0 = StickyAssignorUserData(version=0, previous_assignment=sorted(by_topic.items())).encode(header=False)
    assert v0 == encode_sticky_user_data(partitions, None)
    assert decode_sticky_user_data(v0)[1] is None  # v0: no generation


def test_user_data_that_does_not_read():
    assert decode_sticky_user_data(None) == ((), None) and decode_sticky_user_data(b"") == ((), None)
    for bad in (b"\x00", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x01\xff\xff", b"\x00\x00\x00\x01\x00\x05ab",
                b"\x00\x00\x00\x01\x00\x01a\x7f\xff\xff\xff", b"\x00\x00\x00\x01\x00\x01\xff\x00\x00\x00\x00"):
        assert decode_sticky_user_data(bad) == ((), -1)  # Java ignores a previous assignment it cannot read
    assert encode_cooperative_user_data(7) == struct.pack(">i", 7)
    assert (decode_cooperative_user_data(b"\x00\x00\x00\x07"), decode_cooperative_user_data(None),
            decode_cooperative_user_data(b"")) == (7, None, -1)


def test_what_kafka_pythons_sticky_assignors_read_from_our_subscriptions_and_we_from_theirs():
    from kafka import TopicPartition as KpTP
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor as KpCooperative
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor as KpSticky
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription
    owned = (TP("a", 1), TP("b", 0))
    # cooperative: owned partitions and generation in the subscription's own fields, read by kafka-python
    ours = encode_subscription(Subscription(("a", "b"), user_data=COOPERATIVE.user_data(owned, 6),
                                            owned_partitions=owned, generation_id=6))
    parsed = KpCooperative.parse_member_metadata(KpSubscription.decode(ours))
    assert set(parsed.partitions) == {KpTP("a", 1), KpTP("b", 0)} and parsed.generation == 6
    # theirs (subscription v1, empty user data): owned partitions, generation unknown (-1, as Java reads it)
    assignor = KpCooperative()
    assignor.member_assignment = [KpTP("a", 1)]
    theirs = decode_subscription(assignor.metadata(["a", "b"]).encode())
    assert COOPERATIVE.member_data(theirs) == ((TP("a", 1),), -1)
    # eager sticky: the previous assignment and generation in the user data
    ours = encode_subscription(Subscription(("a", "b"), user_data=STICKY.user_data(owned, 4)), version=0)
    decoded = KpSubscription.decode(ours)
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
    data = StickyAssignorUserData.decode(bytes(decoded.user_data), version=1, header=False)
    assert ([(t.topic, list(t.partitions)) for t in data.previous_assignment], data.generation) == (
        [("a", [1]), ("b", [0])], 4)
    assert KpSticky.parse_member_metadata(KpSubscription(0, ["a"], b"").decode(
        KpSubscription(0, ["a"], b"").encode())).partitions == []

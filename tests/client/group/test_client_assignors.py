"""The consumer protocol's assignors and payloads (kafkawire.client.core.group.assignors): against kafka-python's
RangePartitionAssignor / RoundRobinPartitionAssignor (and aiokafka's round-robin) for random groups
(Hypothesis), Java's documented examples, Java's string order; the subscription and assignment bytes
against kafka-python's codec in both directions.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire.client.core.group.assignors import (
    ASSIGNORS, Assignment, RangeAssignor, RoundRobinAssignor, Subscription, decode_assignment,
    decode_subscription, encode_assignment, encode_subscription, get_assignor,
)
from kafkawire.client.core.topic_partition import TopicPartition as TP
from kafkawire.errors import DecodeError

from support.group_helpers import reference_assign

# kafka-python loads its schemas through a deprecated importlib API
pytestmark = pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")


TOPIC_NAMES = st.sampled_from(["a", "b", "c", "orders", "t0", "t1", "zz"])
MEMBER_NAMES = st.text(alphabet="abcxyz-0123456789", min_size=1, max_size=6)


@st.composite
def groups(draw):
    topics = draw(st.lists(TOPIC_NAMES, min_size=1, max_size=5, unique=True))
    counts = {t: draw(st.integers(0, 9)) for t in topics}
    if draw(st.booleans()):  # a topic the leader has no metadata for
        counts.pop(topics[0])
    members = draw(st.lists(MEMBER_NAMES, min_size=1, max_size=6, unique=True))
    subscriptions = {member: draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)) for member in members}
    instance_ids = {member: (f"instance-{draw(st.integers(0, 99))}-{member}" if draw(st.booleans()) else None)
                    for member in members}
    return counts, subscriptions, instance_ids


@pytest.mark.parametrize("kind", ["range", "roundrobin"])
@settings(max_examples=200, deadline=None)
@given(group=groups())
def test_assignors_agree_with_kafka_python(kind, group):
    counts, subscriptions, instance_ids = group
    ours = get_assignor(kind).assign(counts, subscriptions, instance_ids)
    assert ours == reference_assign(kind, counts, subscriptions, instance_ids)
    # every partition of every subscribed topic with metadata goes to exactly one subscriber
    handed_out = [tp for partitions in ours.values() for tp in partitions]
    assert len(handed_out) == len(set(handed_out))
    wanted = {TP(t, p) for topics in subscriptions.values() for t in topics for p in range(counts.get(t, 0))}
    assert set(handed_out) == wanted
    for member, partitions in ours.items():
        assert {tp.topic for tp in partitions} <= set(subscriptions[member])
        # our bytes are kafka-python's bytes (v0, empty user data), and each side reads the other's
        from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
        grouped = {}
        for tp in partitions:
            grouped.setdefault(tp.topic, []).append(tp.partition)
        their_bytes = KpAssignment(0, sorted(grouped.items()), b"").encode()
        assert encode_assignment(partitions, user_data=b"", version=0) == their_bytes
        assert decode_assignment(their_bytes).partitions == tuple(partitions)


def test_range_and_roundrobin_match_javas_documented_examples():
    two_by_three = {"t0": 3, "t1": 3}
    both = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    assert RangeAssignor().assign(two_by_three, both) == {
        "C0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)], "C1": [TP("t0", 2), TP("t1", 2)]}
    assert RoundRobinAssignor().assign(two_by_three, both) == {
        "C0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)], "C1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)]}
    # RoundRobinAssignor's javadoc: unequal subscriptions skip members not subscribed to a topic
    uneven = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3},
                                         {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]})
    assert uneven == {"C0": [TP("t0", 0)], "C1": [TP("t1", 0)],
                      "C2": [TP("t1", 1), TP("t2", 0), TP("t2", 1), TP("t2", 2)]}


def test_member_order_is_javas_static_first_then_utf16_code_units():
    # Java's String.compareTo puts U+10000 (surrogates D800 DC00) before U+FFFF; code points say otherwise.
    assert RangeAssignor().assign({"t": 1}, {"\uffff": ["t"], "\U00010000": ["t"]}) == {
        "\uffff": [], "\U00010000": [TP("t", 0)]}
    # static members (by instance id) come before dynamic ones, whatever their member ids
    result = RangeAssignor().assign({"t": 3}, {"a": ["t"], "b": ["t"], "z": ["t"]}, {"z": "i1", "b": "i2"})
    assert result == {"z": [TP("t", 0)], "b": [TP("t", 1)], "a": [TP("t", 2)]}
    # a member listing a topic twice counts once (Java keys members by id)
    assert RangeAssignor().assign({"t": 2}, {"a": ["t", "t"], "b": ["t"]}) == {"a": [TP("t", 0)], "b": [TP("t", 1)]}
    assert set(ASSIGNORS) == {"range", "roundrobin", "sticky", "cooperative-sticky"}
    with pytest.raises(ValueError, match="unknown partition assignor 'uniform'"):
        get_assignor("uniform")
    with pytest.raises(ValueError, match="non-negative"):
        RangeAssignor().assign({"t": -1}, {"a": ["t"]})


def test_subscription_bytes_are_read_by_kafka_python_and_theirs_by_us():
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription
    ours = Subscription(("orders", "audit"), user_data=b"\x01\x02", owned_partitions=(TP("orders", 3), TP("audit", 0)),
                        generation_id=7, rack_id="rack-a")
    for version in range(4):
        data = encode_subscription(ours, version)
        theirs = KpSubscription.decode(data)
        assert theirs.version == version and list(theirs.topics) == ["orders", "audit"]
        assert bytes(theirs.user_data) == b"\x01\x02"
        back = decode_subscription(data)
        assert back.topics == ours.topics and back.version == version
        if version >= 1:
            assert sorted((tp.topic, tp.partitions) for tp in theirs.owned_partitions) == [("audit", [0]), ("orders", [3])]
            assert set(back.owned_partitions) == set(ours.owned_partitions)
        if version >= 2:
            assert theirs.generation_id == back.generation_id == 7
        if version == 3:
            assert theirs.rack_id == back.rack_id == "rack-a"
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
    for version in range(4):
        data = encode_assignment([TP("b", 1), TP("a", 2), TP("a", 0)], user_data=b"u", version=version)
        theirs = KpAssignment.decode(data)
        assert theirs.version == version and bytes(theirs.user_data) == b"u"
        assert [(t.topic, list(t.partitions)) for t in theirs.assigned_partitions] == [("a", [0, 2]), ("b", [1])]
        assert decode_assignment(KpAssignment(version, [("a", [0, 2]), ("b", [1])], b"u").encode()) == Assignment(
            (TP("a", 0), TP("a", 2), TP("b", 1)), b"u", version)
    # what kafka-python's assignors send in JoinGroup
    assert decode_subscription(KpSubscription(0, ["x", "y"], b"").encode()).topics == ("x", "y")
    assert encode_subscription(["x", "y"], 0) == KpSubscription(0, ["x", "y"], None).encode()


def test_payloads_of_newer_versions_and_bad_bytes():
    # a future version appends fields: read as v3, the rest ignored (Java's rule)
    future = b"\x00\x07" + encode_subscription(Subscription(("t",), generation_id=3, rack_id="r"))[2:] + b"\xde\xad"
    sub = decode_subscription(future)
    assert (sub.topics, sub.generation_id, sub.rack_id, sub.version) == (("t",), 3, "r", 7)
    future_assignment = b"\x00\x09" + encode_assignment([TP("t", 1)])[2:] + b"more"
    assert decode_assignment(future_assignment) == Assignment((TP("t", 1),), None, 9)
    assert decode_assignment(b"") == Assignment(())  # the coordinator's answer to a member the leader skipped
    for bad in (b"\x00", b"\xff\xff\x00\x00\x00\x00", encode_subscription(["topic"])[:-3]):
        with pytest.raises(DecodeError):
            decode_subscription(bad)
    with pytest.raises(DecodeError):
        decode_assignment(b"\x00\x00\x7f\xff\xff\xff")  # a count far beyond the bytes: refused, not allocated
    with pytest.raises(ValueError):
        encode_subscription(["t"], version=4)

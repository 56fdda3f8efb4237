"""A real capture of share groups (KIP-932) for the capture's share tests: tcpdump on loopback while
confluent-kafka's ``ShareConsumer`` consumes from kafkawire's broker in two groups, and what the test
did, which is the oracle (``ShareWorkload``):

- ``acks`` (explicit acknowledgement): one member reads four records and acknowledges offset 0 ACCEPT,
  1 RELEASE, 2 REJECT and 3 RELEASE; offset 1 comes back (delivery count 2) and is accepted, offset 3
  comes back and is released each time until the broker's delivery limit archives it;
- ``quiet``: one member (explicit mode) acquires three records and never acknowledges them; a second
  member gets them once their acquisition lock expires (delivery count 2) and accepts them (implicit
  mode: its commit accepts what it polled).

The members' ids are the broker's ShareGroupDescribe answers, asked after each member joined.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkawire import messages as m

from .broker_harness import BrokerThread, RawClient
from .loopback_capture import served_ports, start_tcpdump, stop_tcpdump, wait_for_ends, wait_until

DELIVERY_LIMIT = 3
LOCK_MS = 4000  # the acquisition lock: long enough for a loaded machine to acknowledge in time
ACKS_TOPIC, QUIET_TOPIC = "share-acks", "share-quiet"
ACKS_GROUP, QUIET_GROUP = "acks", "quiet"
TOPICS = {ACKS_GROUP: ACKS_TOPIC, QUIET_GROUP: QUIET_TOPIC}


@dataclass
class ShareWorkload:
    capture: Path
    port: int
    members: dict[str, list[str]] = field(default_factory=dict)   # group -> member ids in joining order
    deliveries: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # (group, offset) -> counts seen
    acknowledged: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # (group, offset) -> types sent


def _produce(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(15) == 0


def _consumer(bootstrap: str, group: str, topic: str, explicit: bool):
    from confluent_kafka import ShareConsumer
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"{group}-member",
                              **({"share.acknowledgement.mode": "explicit"} if explicit else {})})
    consumer.subscribe([topic])
    return consumer


def _poll(consumer) -> list:
    messages = list(consumer.poll(1.0))
    assert all(message.error() is None for message in messages), [message.error() for message in messages]
    return messages


def _members(port: int, group: str) -> list[str]:
    client = RawClient(port)
    try:
        (described,) = client.request(m.ShareGroupDescribeRequest(group_ids=[group]), 1).groups
    finally:
        client.close()
    return [member.member_id for member in described.members]


def _joined(workload: ShareWorkload, group: str) -> None:
    """Records the member that joined last (the one the broker did not know before)."""
    known = workload.members.setdefault(group, [])
    new = [member for member in _members(workload.port, group) if member not in known]
    assert len(new) == 1, new
    known.append(new[0])


def _acks(workload: ShareWorkload, bootstrap: str) -> None:
    from confluent_kafka import AcknowledgeType
    types = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.RELEASE, 2: AcknowledgeType.REJECT,
             3: AcknowledgeType.RELEASE}
    consumer = _consumer(bootstrap, ACKS_GROUP, ACKS_TOPIC, explicit=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            messages = _poll(consumer)
            if messages and ACKS_GROUP not in workload.members:
                _joined(workload, ACKS_GROUP)
            for message in messages:
                offset = message.offset()
                seen = workload.deliveries.setdefault((ACKS_GROUP, offset), [])
                seen.append(message.delivery_count())
                kind = types[offset] if len(seen) == 1 else (
                    AcknowledgeType.ACCEPT if offset == 1 else AcknowledgeType.RELEASE)
                consumer.acknowledge(message, kind)
                workload.acknowledged.setdefault((ACKS_GROUP, offset), []).append(kind.name)
            if messages:
                assert all(error is None for error in consumer.commit_sync(15).values())
            elif len(workload.deliveries.get((ACKS_GROUP, 3), ())) >= DELIVERY_LIMIT and \
                    workload.acknowledged.get((ACKS_GROUP, 1), [])[-1:] == ["ACCEPT"]:
                break
    finally:
        consumer.close()


def _quiet(workload: ShareWorkload, bootstrap: str) -> None:
    quiet = _consumer(bootstrap, QUIET_GROUP, QUIET_TOPIC, explicit=True)
    other = None
    try:
        held: list = []
        deadline = time.monotonic() + 30
        while len(held) < 3 and time.monotonic() < deadline:
            held += _poll(quiet)
        _joined(workload, QUIET_GROUP)
        for message in held:
            workload.deliveries.setdefault((QUIET_GROUP, message.offset()), []).append(message.delivery_count())
        other = _consumer(bootstrap, QUIET_GROUP, QUIET_TOPIC, explicit=False)
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < 3 and time.monotonic() < deadline:
            got += _poll(other)
        _joined(workload, QUIET_GROUP)
        for message in got:
            workload.deliveries[QUIET_GROUP, message.offset()].append(message.delivery_count())
            workload.acknowledged.setdefault((QUIET_GROUP, message.offset()), []).append("ACCEPT")
        assert all(error is None for error in other.commit_sync(15).values())  # implicit: accepts them
    finally:
        quiet.close()
        if other is not None:
            other.close()


def capture_shares(folder: Path) -> ShareWorkload:
    """Runs the two groups' consumers under tcpdump; the capture holds every connection's end."""
    path = folder / "shares.pcap"
    with BrokerThread(data_dir=folder / "data", share_auto_offset_reset="earliest",
                      group_share_delivery_count_limit=DELIVERY_LIMIT,
                      group_share_record_lock_duration_ms=LOCK_MS) as broker:
        dump = start_tcpdump(path, [broker.port])
        workload = ShareWorkload(path, broker.port)
        try:
            with served_ports() as clients:
                _produce(broker.bootstrap, ACKS_TOPIC, 4)
                _produce(broker.bootstrap, QUIET_TOPIC, 3)
                _acks(workload, broker.bootstrap)
                _quiet(workload, broker.bootstrap)
                gc.collect()
                wait_until(lambda: not broker.broker._connections, "the clients' connections to close")
            wait_for_ends(path, [broker.port], clients)
        finally:
            stop_tcpdump(dump)
    return workload


def expected_share_records(workload: ShareWorkload) -> list[dict]:
    """The share view's records, from what the test did: the quiet group's records were held by a member
    that never acknowledged them, then acquired by another (one lock expiry each)."""
    expected = []
    for (group, offset), counts in sorted(workload.deliveries.items()):
        kinds = workload.acknowledged.get((group, offset), [])
        archived = "rejected" if kinds[-1:] == ["REJECT"] else (
            "delivery_limit" if kinds[-1:] == ["RELEASE"] and max(counts) >= DELIVERY_LIMIT else None)
        quiet = group == QUIET_GROUP
        expected.append(dict(
            group=group, topic=TOPICS[group], partition=0, offset=offset,
            members=workload.members[group], deliveries=max(counts), acknowledgements=kinds,
            redeliveries=sum(count > 1 for count in counts), lock_expiries=1 if quiet else 0,
            state="archived" if archived else ("acknowledged" if kinds[-1:] == ["ACCEPT"] else "available"),
            archived=archived))
    return expected

"""The classic group coordinator and committed-offset store (kafkawire.broker.groups).

Every request goes through the codec (encoded and decoded at its version, so the coordinator sees what
the server would hand it, memoryview metadata included) and every response is encoded at the request's
version and decoded back.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from kafkawire.broker.groups.coordinator import GroupCoordinator
from kafkawire.broker.groups.offsets_store import OFFSETS_FILE_NAME, CommittedOffset, GroupRecord, OffsetStore
from kafkawire.error_codes import ErrorCode as E
from kafkawire.messages.describe_groups_request import DescribeGroupsRequest
from kafkawire.messages.describe_groups_response import DescribeGroupsResponse
from kafkawire.messages.heartbeat_request import HeartbeatRequest
from kafkawire.messages.heartbeat_response import HeartbeatResponse
from kafkawire.messages.join_group_request import JoinGroupRequest
from kafkawire.messages.join_group_response import JoinGroupResponse
from kafkawire.messages.leave_group_request import LeaveGroupRequest
from kafkawire.messages.leave_group_response import LeaveGroupResponse
from kafkawire.messages.list_groups_request import ListGroupsRequest
from kafkawire.messages.list_groups_response import ListGroupsResponse
from kafkawire.messages.offset_commit_request import OffsetCommitRequest
from kafkawire.messages.offset_commit_response import OffsetCommitResponse
from kafkawire.messages.offset_fetch_request import OffsetFetchRequest
from kafkawire.messages.offset_fetch_response import OffsetFetchResponse
from kafkawire.messages.sync_group_request import SyncGroupRequest
from kafkawire.messages.sync_group_response import SyncGroupResponse

RANGE = [("range", b"range-meta")]


def run(coro, timeout=10):
    async def main():
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(main())


def wire(message, version):
    """The message as the server would decode it from the wire."""
    return type(message).decode(message.encode(version), version, exact=True)


def check(response, cls, version):
    """Encode the response at the request's version (proving it encodable) and decode it back."""
    assert type(response) is cls
    return cls.decode(response.encode(version), version, exact=True)


class Client:
    """Requests to a coordinator, each through the codec at ``version``."""

    def __init__(self, coordinator: GroupCoordinator, client_id: str = "client"):
        self.c = coordinator
        self.client_id = client_id

    async def join(self, group, member_id="", *, version=5, protocols=RANGE, session_ms=10_000,
                   rebalance_ms=5_000, instance_id=None, protocol_type="consumer"):
        request = JoinGroupRequest(
            group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms if version else -1,
            member_id=member_id, group_instance_id=instance_id if version >= 5 else None,
            protocol_type=protocol_type,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols])
        response = await self.c.membership.join_group(wire(request, version), version, self.client_id, "/127.0.0.1")
        return check(response, JoinGroupResponse, version)

    async def join_with_id(self, group, **kw):
        """JoinGroup as a v4+ client does it: MEMBER_ID_REQUIRED first, then again with the id."""
        first = await self.join(group, **kw)
        if first.error_code == E.MEMBER_ID_REQUIRED:
            assert first.member_id.startswith(self.client_id + "-")
            return await self.join(group, first.member_id, **kw)
        return first

    async def sync(self, group, generation, member_id, assignments=None, *, version=3, instance_id=None,
                   protocol_type="consumer", protocol_name="range"):
        request = SyncGroupRequest(
            group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance_id if version >= 3 else None,
            protocol_type=protocol_type if version >= 5 else None,
            protocol_name=protocol_name if version >= 5 else None,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()])
        return check(await self.c.membership.sync_group(wire(request, version), version), SyncGroupResponse, version)

    async def heartbeat(self, group, generation, member_id, *, version=3, instance_id=None):
        request = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                   group_instance_id=instance_id if version >= 3 else None)
        response = await self.c.membership.heartbeat(wire(request, version), version)
        return check(response, HeartbeatResponse, version).error_code

    async def leave(self, group, member_id="", *, version=1, members=None):
        if version <= 2:
            request = LeaveGroupRequest(group_id=group, member_id=member_id)
        else:
            request = LeaveGroupRequest(group_id=group, members=[
                LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i) for m, i in members])
        return check(await self.c.membership.leave_group(wire(request, version), version), LeaveGroupResponse, version)

    async def commit(self, group, offsets, *, generation=-1, member_id="", version=7, metadata="meta",
                     instance_id=None):
        """``offsets``: {(topic, partition): offset}; returns {(topic, partition): error code}."""
        by_topic: dict[str, list] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset,
                committed_leader_epoch=3 if version >= 6 else -1, committed_metadata=metadata))
        request = OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
            group_instance_id=instance_id if version >= 7 else None,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()])
        response = check(await self.c.offsets.offset_commit(wire(request, version), version), OffsetCommitResponse,
                         version)
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    async def fetch(self, group, partitions=None, *, version=5):
        """``partitions``: {topic: [partition]} or None (all); returns (top error, {(t, p): (offset, epoch,
        metadata, error)})."""
        topics = None if partitions is None else [
            OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in partitions.items()]
        request = OffsetFetchRequest(group_id=group, topics=topics)
        response = check(await self.c.offsets.offset_fetch(wire(request, version), version), OffsetFetchResponse, version)
        return response.error_code, {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch,
                                                                    p.metadata, p.error_code)
                                     for t in response.topics for p in t.partitions}

    async def fetch_batched(self, groups, *, version=8):
        """``groups``: {group: {topic: [partition]} or None}; returns {group: (error, {(t, p): ...})}."""
        request = OffsetFetchRequest(groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None if ps is None else [
                OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=p) for t, p in ps.items()])
            for g, ps in groups.items()])
        response = check(await self.c.offsets.offset_fetch(wire(request, version), version), OffsetFetchResponse, version)
        assert not response.topics
        return {g.group_id: (g.error_code, {(t.name, p.partition_index): (p.committed_offset,
                                                                          p.committed_leader_epoch, p.metadata,
                                                                          p.error_code)
                                            for t in g.topics for p in t.partitions})
                for g in response.groups}

    async def describe(self, *groups, version=5):
        request = DescribeGroupsRequest(groups=list(groups), include_authorized_operations=version >= 3)
        response = check(await self.c.describe_groups(wire(request, version), version), DescribeGroupsResponse,
                         version)
        return {g.group_id: g for g in response.groups}

    async def list(self, *, version=4, states=()):
        request = ListGroupsRequest(states_filter=list(states) if version >= 4 else [])
        response = check(await self.c.list_groups(wire(request, version), version), ListGroupsResponse, version)
        assert response.error_code == 0
        return {g.group_id: g for g in response.groups}


def coordinator(tmp_path, **kw):
    kw.setdefault("initial_rebalance_delay_ms", 20)
    kw.setdefault("min_session_timeout_ms", 10)
    return GroupCoordinator(tmp_path / "groups", **kw)


async def form_group(client_a, client_b, group="g", *, version=5, protocols_a=RANGE, protocols_b=RANGE,
                     **join_kw):
    """Two members join and sync; returns (generation, member a, member b)."""
    join_a = asyncio.ensure_future(client_a.join_with_id(group, version=version, protocols=protocols_a, **join_kw))
    # b joins as soon as a is in (not after a fixed sleep), well inside the initial rebalance delay even on
    # a loaded machine, so both land in one generation with a as the leader.
    while client_a.c.group_state(group) != "PreparingRebalance":
        await asyncio.sleep(0)
    join_b = asyncio.ensure_future(client_b.join_with_id(group, version=version, protocols=protocols_b, **join_kw))
    a, b = await asyncio.gather(join_a, join_b)
    assert a.error_code == b.error_code == 0
    assert a.generation_id == b.generation_id
    name = a.protocol_name
    sync_b = asyncio.ensure_future(client_b.sync(group, b.generation_id, b.member_id, protocol_name=name))
    await asyncio.sleep(0.005)
    assert not sync_b.done()  # a follower waits for the leader's assignment
    sa = await client_a.sync(group, a.generation_id, a.member_id,
                             {a.member_id: b"assign-a", b.member_id: b"assign-b"}, protocol_name=name)
    sb = await sync_b
    assert (sa.error_code, bytes(sa.assignment)) == (0, b"assign-a")
    assert (sb.error_code, bytes(sb.assignment)) == (0, b"assign-b")
    return a.generation_id, a.member_id, b.member_id


# -- membership --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6, 7, 9])
def test_two_members_join_sync_heartbeat(tmp_path, version):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b = Client(c, "ca"), Client(c, "cb")
            join_a = asyncio.ensure_future(a.join_with_id("g", version=version, protocols=[("range", b"A")]))
            await asyncio.sleep(0.005)
            join_b = asyncio.ensure_future(b.join_with_id("g", version=version, protocols=[("range", b"B")]))
            ra, rb = await asyncio.gather(join_a, join_b)
            assert ra.error_code == rb.error_code == 0
            assert ra.generation_id == rb.generation_id == 1
            assert ra.leader == rb.leader == ra.member_id  # the first member leads
            assert ra.protocol_name == rb.protocol_name == "range"
            if version >= 7:
                assert ra.protocol_type == "consumer"
            # The leader gets every member's metadata, followers none.
            assert {m.member_id: bytes(m.metadata) for m in ra.members} == {ra.member_id: b"A", rb.member_id: b"B"}
            assert rb.members == ()
            sync_version = min(version, 5)
            sync_b = asyncio.ensure_future(b.sync("g", 1, rb.member_id, version=sync_version))
            await asyncio.sleep(0.005)
            assert not sync_b.done()
            assert await a.heartbeat("g", 1, ra.member_id, version=min(version, 4)) == 0  # CompletingRebalance
            sa = await a.sync("g", 1, ra.member_id, {ra.member_id: b"p0", rb.member_id: b"p1"},
                              version=sync_version)
            sb = await sync_b
            assert (sa.error_code, bytes(sa.assignment)) == (0, b"p0")
            assert (sb.error_code, bytes(sb.assignment)) == (0, b"p1")
            if sync_version >= 5:
                assert (sb.protocol_type, sb.protocol_name) == ("consumer", "range")
            # A follower's SyncGroup after the group is stable is answered at once.
            again = await b.sync("g", 1, rb.member_id, version=sync_version)
            assert bytes(again.assignment) == b"p1"
            for hb_version in range(5):
                assert await a.heartbeat("g", 1, ra.member_id, version=hb_version) == 0
                assert await b.heartbeat("g", 1, rb.member_id, version=hb_version) == 0
            assert await a.heartbeat("g", 0, ra.member_id) == E.ILLEGAL_GENERATION
            assert await a.heartbeat("g", 1, "nobody") == E.UNKNOWN_MEMBER_ID
            assert await a.heartbeat("other", 1, ra.member_id) == E.UNKNOWN_MEMBER_ID
            assert await a.heartbeat("", 1, ra.member_id) == E.INVALID_GROUP_ID
            for describe_version in range(7):
                described = (await a.describe("g", "missing", version=describe_version))
                g = described["g"]
                assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer",
                                                                                          "range")
                assert {m.member_id: (m.client_id, bytes(m.member_metadata), bytes(m.member_assignment))
                        for m in g.members} == {ra.member_id: ("ca", b"A", b"p0"), rb.member_id: ("cb", b"B", b"p1")}
                assert described["missing"].group_state == "Dead"
                # v6 (KIP-1043) says the group was not found; older versions describe it Dead, no error
                assert described["missing"].error_code == (E.GROUP_ID_NOT_FOUND if describe_version >= 6 else 0)
                if describe_version >= 3:
                    assert g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
            for list_version in range(6):
                listed = await a.list(version=list_version)
                assert listed["g"].protocol_type == "consumer"
                if list_version >= 4:
                    assert listed["g"].group_state == "Stable"
            assert await a.list(states=["empty"]) == {}
            assert c.group_state("g") == "Stable"
    run(main())


def test_initial_rebalance_delay(tmp_path):
    async def main():
        async with coordinator(tmp_path, initial_rebalance_delay_ms=600) as c:
            a = Client(c, "ca")
            start = time.monotonic()
            first = await a.join("g", version=3)  # no MEMBER_ID_REQUIRED before v4
            assert first.error_code == 0 and first.generation_id == 1
            assert time.monotonic() - start >= 0.59  # the first rebalance of an empty group waits
            gen, member = first.generation_id, first.member_id
            await a.sync("g", gen, member, {member: b"x"})
            # A later rebalance (the group is not empty) completes as soon as everyone has rejoined.
            start = time.monotonic()
            again = await a.join("g", member, version=3)
            assert again.generation_id == 2
            assert time.monotonic() - start < 0.5  # well short of the delay, even on a loaded machine
    run(main())


def test_third_member_triggers_rebalance(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b, x = Client(c, "ca"), Client(c, "cb"), Client(c, "cx")
            gen, ma, mb = await form_group(a, b)
            join_x = asyncio.ensure_future(x.join_with_id("g"))
            await asyncio.sleep(0.01)
            assert not join_x.done()  # waits for the known members to rejoin
            assert await a.heartbeat("g", gen, ma) == E.REBALANCE_IN_PROGRESS
            assert await b.heartbeat("g", gen, mb) == E.REBALANCE_IN_PROGRESS
            # A SyncGroup of the old generation's during the rebalance is refused.
            assert (await b.sync("g", gen, mb)).error_code == E.REBALANCE_IN_PROGRESS
            # Commits by members are still allowed while the rebalance prepares.
            assert await a.commit("g", {("t", 0): 5}, generation=gen, member_id=ma) == {("t", 0): 0}
            rejoin_a = asyncio.ensure_future(a.join("g", ma))
            await asyncio.sleep(0.01)
            assert not rejoin_a.done()
            rb = await b.join("g", mb)
            ra, rx = await rejoin_a, await join_x
            assert ra.generation_id == rb.generation_id == rx.generation_id == gen + 1
            assert ra.leader == ma and len(ra.members) == 3 and rb.members == rx.members == ()
            # The old generation is fenced.
            assert await a.heartbeat("g", gen, ma) == E.ILLEGAL_GENERATION
            assert await a.commit("g", {("t", 0): 6}, generation=gen, member_id=ma) == {("t", 0): E.ILLEGAL_GENERATION}
    run(main())


def test_rebalance_timeout_removes_members_that_do_not_rejoin(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b = Client(c, "ca"), Client(c, "cb")
            gen, ma, mb = await form_group(a, b, rebalance_ms=200)
            start = time.monotonic()
            ra = await a.join("g", ma, rebalance_ms=200)  # the leader rejoins; b never does
            assert time.monotonic() - start >= 0.15
            assert ra.generation_id == gen + 1 and [m.member_id for m in ra.members] == [ma]
            assert await b.heartbeat("g", gen, mb) == E.UNKNOWN_MEMBER_ID
    run(main())


@pytest.mark.parametrize("version", [0, 2, 3, 5])
def test_leave_triggers_rebalance(tmp_path, version):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b = Client(c, "ca"), Client(c, "cb")
            gen, ma, mb = await form_group(a, b)
            if version <= 2:
                response = await b.leave("g", mb, version=version)
                assert response.error_code == 0
                assert (await b.leave("g", "nobody", version=version)).error_code == E.UNKNOWN_MEMBER_ID
                assert (await b.leave("unknown-group", mb, version=version)).error_code == E.UNKNOWN_MEMBER_ID
            else:
                response = await b.leave("g", version=version, members=[(mb, None), ("nobody", None)])
                assert response.error_code == 0
                assert [(m.member_id, m.error_code) for m in response.members] == [
                    (mb, 0), ("nobody", E.UNKNOWN_MEMBER_ID)]
            assert await a.heartbeat("g", gen, ma) == E.REBALANCE_IN_PROGRESS
            ra = await a.join("g", ma)
            assert ra.generation_id == gen + 1 and [m.member_id for m in ra.members] == [ma]
            assert await b.heartbeat("g", gen + 1, mb) == E.UNKNOWN_MEMBER_ID
            # The last member leaving empties the group.
            await a.sync("g", gen + 1, ma, {ma: b"all"})
            await a.leave("g", ma, version=version, members=[(ma, None)])
            # Nobody is left to rejoin: the rebalance completes at once and the group is empty.
            assert c.group_state("g") == "Empty"
            assert await a.heartbeat("g", gen + 1, ma) == E.UNKNOWN_MEMBER_ID
            assert (await a.describe("g"))["g"].group_state == "Empty"
    run(main())


def test_session_expiry_triggers_rebalance(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b = Client(c, "ca"), Client(c, "cb")
            gen, ma, mb = await form_group(a, b, session_ms=600)  # a, heartbeating, stays on a loaded machine
            deadline = time.monotonic() + 5
            seen = []
            while time.monotonic() < deadline:  # only a heartbeats
                seen.append(await a.heartbeat("g", gen, ma))
                if seen[-1] == E.REBALANCE_IN_PROGRESS:
                    break
                await asyncio.sleep(0.03)
            assert seen[-1] == E.REBALANCE_IN_PROGRESS and set(seen[:-1]) <= {0}
            assert await b.heartbeat("g", gen, mb) == E.UNKNOWN_MEMBER_ID
            ra = await a.join("g", ma, session_ms=300)
            assert ra.generation_id == gen + 1 and [m.member_id for m in ra.members] == [ma]
            await a.sync("g", ra.generation_id, ma, {ma: b"all"})
            # With no heartbeats at all the last member expires too and the group empties.
            await asyncio.sleep(0.7)
            assert c.group_state("g") == "Empty"
            assert await a.heartbeat("g", ra.generation_id, ma) == E.UNKNOWN_MEMBER_ID
    run(main())


def test_pending_sync_expiry(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b = Client(c, "ca"), Client(c, "cb")
            join_a = asyncio.ensure_future(a.join_with_id("g", rebalance_ms=200))
            await asyncio.sleep(0.005)
            rb = await b.join_with_id("g", rebalance_ms=200)
            ra = await join_a
            # The leader syncs, the follower never does (but keeps heartbeating).
            await a.sync("g", ra.generation_id, ra.member_id, {ra.member_id: b"x", rb.member_id: b"y"})
            for _ in range(10):
                await asyncio.sleep(0.03)
                await b.heartbeat("g", rb.generation_id, rb.member_id)
            assert await a.heartbeat("g", ra.generation_id, ra.member_id) == E.REBALANCE_IN_PROGRESS
            assert await b.heartbeat("g", rb.generation_id, rb.member_id) == E.UNKNOWN_MEMBER_ID
    run(main())


def test_member_id_required_flow(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            a = Client(c, "ca")
            first = await a.join("g", version=4, session_ms=100)
            assert first.error_code == E.MEMBER_ID_REQUIRED
            assert first.member_id.startswith("ca-") and first.generation_id == -1 and first.leader == ""
            assert c.group_state("g") == "Empty"  # a pending member does not start a rebalance
            second = await a.join("g", first.member_id, version=4, session_ms=100)
            assert second.error_code == 0 and second.member_id == first.member_id and second.generation_id == 1
            # An id that was never handed out is refused.
            assert (await a.join("g", "made-up", version=4)).error_code == E.UNKNOWN_MEMBER_ID
            assert (await a.join("nogroup", "made-up", version=4)).error_code == E.UNKNOWN_MEMBER_ID
            # A pending id that is not used within the session timeout expires.
            pending = await a.join("h", version=6, session_ms=50)
            assert pending.error_code == E.MEMBER_ID_REQUIRED
            await asyncio.sleep(0.12)
            late = await a.join("h", pending.member_id, version=6, session_ms=50)
            assert late.error_code == E.UNKNOWN_MEMBER_ID
            # Before v4 a member is added at once.
            old = await a.join("k", version=3)
            assert old.error_code == 0 and old.member_id.startswith("ca-")
    run(main())


def test_pending_member_holds_the_rebalance_until_it_rejoins(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b, x = Client(c, "ca"), Client(c, "cb"), Client(c, "cx")
            gen, ma, mb = await form_group(a, b)
            pending = await x.join("g")
            assert pending.error_code == E.MEMBER_ID_REQUIRED
            rejoin = asyncio.gather(a.join("g", ma), b.join("g", mb))
            rejoin = asyncio.ensure_future(rejoin)
            await asyncio.sleep(0.03)
            assert c.group_state("g") == "PreparingRebalance" and not rejoin.done()
            rx = await x.join("g", pending.member_id)
            ra, rb = await rejoin
            assert ra.generation_id == rb.generation_id == rx.generation_id == gen + 1
            assert len(ra.members) == 3
    run(main())


def test_invalid_session_timeout_and_group_id(tmp_path):
    async def main():
        async with coordinator(tmp_path, min_session_timeout_ms=6000, max_session_timeout_ms=30000) as c:
            a = Client(c)
            assert (await a.join("g", session_ms=5999)).error_code == E.INVALID_SESSION_TIMEOUT
            assert (await a.join("g", session_ms=30001)).error_code == E.INVALID_SESSION_TIMEOUT
            assert (await a.join("", session_ms=10000)).error_code == E.INVALID_GROUP_ID
            assert (await a.join("g", session_ms=6000)).error_code == E.MEMBER_ID_REQUIRED
    run(main())


def test_inconsistent_protocol(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b, x = Client(c, "ca"), Client(c, "cb"), Client(c, "cx")
            # An empty group needs a protocol type and at least one protocol.
            assert (await x.join("g", protocols=[])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
            assert (await x.join("g", protocol_type="")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
            gen, ma, mb = await form_group(a, b)
            assert (await x.join("g", protocols=[("roundrobin", b"")])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
            assert (await x.join("g", protocol_type="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
            # A member may not switch to a protocol the others lack.
            assert (await a.join("g", ma, protocols=[("sticky", b"")])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
            # SyncGroup v5 checks the protocol type and name.
            bad = await a.sync("g", gen, ma, version=5, protocol_name="roundrobin")
            assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
            good = await a.sync("g", gen, ma, version=5)
            assert good.error_code == 0 and (good.protocol_type, good.protocol_name) == ("consumer", "range")
    run(main())


def test_protocol_chosen_by_votes(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            clients = [Client(c, f"c{i}") for i in range(3)]
            prefs = [[("range", b"r0"), ("roundrobin", b"rr0"), ("sticky", b"s0")],
                     [("roundrobin", b"rr1"), ("range", b"r1")],
                     [("roundrobin", b"rr2"), ("range", b"r2")]]
            joins = []
            for client, protocols in zip(clients, prefs):
                joins.append(asyncio.ensure_future(client.join_with_id("g", protocols=protocols)))
                await asyncio.sleep(0.003)
            results = await asyncio.gather(*joins)
            assert {r.protocol_name for r in results} == {"roundrobin"}  # two votes to one; sticky not common
            leader = next(r for r in results if r.members)
            assert sorted(bytes(m.metadata) for m in leader.members) == [b"rr0", b"rr1", b"rr2"]
    run(main())


def test_static_membership(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b = Client(c, "ca"), Client(c, "cb")
            join_a = asyncio.ensure_future(a.join("g", version=5, instance_id="ia"))  # no MEMBER_ID_REQUIRED
            await asyncio.sleep(0.005)
            rb = await b.join("g", version=5, instance_id="ib")
            ra = await join_a
            assert ra.error_code == rb.error_code == 0 and ra.member_id.startswith("ia-")
            assert {m.group_instance_id for m in ra.members} == {"ia", "ib"}
            gen = ra.generation_id
            sync_b = asyncio.ensure_future(b.sync("g", gen, rb.member_id, instance_id="ib"))
            await a.sync("g", gen, ra.member_id, {ra.member_id: b"A", rb.member_id: b"B"}, instance_id="ia")
            assert bytes((await sync_b).assignment) == b"B"
            # b restarts: it rejoins with its instance id but no member id, and takes its place without a
            # rebalance.
            rb2 = await b.join("g", version=5, instance_id="ib")
            assert rb2.error_code == 0 and rb2.member_id != rb.member_id and rb2.generation_id == gen
            assert c.group_state("g") == "Stable"
            s = await b.sync("g", gen, rb2.member_id, instance_id="ib")
            assert bytes(s.assignment) == b"B"
            # The old incarnation is fenced.
            assert await b.heartbeat("g", gen, rb.member_id, instance_id="ib") == E.FENCED_INSTANCE_ID
            assert await b.heartbeat("g", gen, rb2.member_id, instance_id="ib") == 0
            # LeaveGroup v3+ by instance id alone.
            left = await a.leave("g", version=4, members=[("", "ib"), ("", "nope")])
            assert [(m.group_instance_id, m.error_code) for m in left.members] == [("ib", 0),
                                                                                    ("nope", E.UNKNOWN_MEMBER_ID)]
            assert await a.heartbeat("g", gen, ra.member_id, instance_id="ia") == E.REBALANCE_IN_PROGRESS
    run(main())


# -- offsets -----------------------------------------------------------------------------------------------

def test_commits_checked_against_generation(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b, s = Client(c, "ca"), Client(c, "cb"), Client(c, "simple")
            # A standalone (simple) commit to a group nobody manages creates it.
            assert await s.commit("solo", {("t", 0): 10, ("t", 1): 11}) == {("t", 0): 0, ("t", 1): 0}
            assert c.committed("solo") == {("t", 0): (10, "meta"), ("t", 1): (11, "meta")}
            # A generation for a group that does not exist is refused.
            assert await s.commit("nogroup", {("t", 0): 1}, generation=3, member_id="m") == {
                ("t", 0): E.ILLEGAL_GENERATION}
            gen, ma, mb = await form_group(a, b)
            assert await a.commit("g", {("t", 0): 5, ("u", 2): 7}, generation=gen, member_id=ma) == {
                ("t", 0): 0, ("u", 2): 0}
            for version in (2, 3, 4, 5, 6, 7, 8, 9):
                assert await a.commit("g", {("t", 0): 100 + version}, generation=gen, member_id=ma,
                                      version=version) == {("t", 0): 0}
            assert c.committed("g")[("t", 0)] == (109, "meta")
            assert await a.commit("g", {("t", 0): 1}, generation=gen - 1, member_id=ma) == {
                ("t", 0): E.ILLEGAL_GENERATION}
            assert await a.commit("g", {("t", 0): 1}, generation=gen, member_id="stranger") == {
                ("t", 0): E.UNKNOWN_MEMBER_ID}
            # Standalone commits are refused while the group has members.
            assert await s.commit("g", {("t", 0): 1}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
            # Metadata over offset.metadata.max.bytes is refused for that partition only.
            assert await a.commit("g", {("t", 0): 1}, generation=gen, member_id=ma, metadata="x" * 4097) == {
                ("t", 0): E.OFFSET_METADATA_TOO_LARGE}
            assert c.committed("g")[("t", 0)] == (109, "meta")
            # Between JoinGroup and SyncGroup (CompletingRebalance) commits get REBALANCE_IN_PROGRESS.
            rejoin_b = asyncio.ensure_future(b.join("g", mb))
            ra = await a.join("g", ma)
            await rejoin_b
            assert c.group_state("g") == "CompletingRebalance"
            assert await a.commit("g", {("t", 0): 1}, generation=ra.generation_id, member_id=ma) == {
                ("t", 0): E.REBALANCE_IN_PROGRESS}
    run(main())


def test_commit_unknown_partition_when_topics_are_known(tmp_path):
    async def main():
        exists = lambda topic, partition: topic == "t" and partition < 2
        async with coordinator(tmp_path, partition_exists=exists) as c:
            s = Client(c)
            assert await s.commit("g", {("t", 0): 1, ("t", 5): 1, ("nope", 0): 1}) == {
                ("t", 0): 0, ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
            assert c.committed("g") == {("t", 0): (1, "meta")}
    run(main())


def test_offset_fetch_single_group(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            s = Client(c)
            assert await s.commit("g", {("t", 0): 10, ("t", 1): 11, ("u", 0): 20}, version=7) == {
                ("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
            for version in range(1, 8):
                error, got = await s.fetch("g", {"t": [0, 1, 9], "v": [0]}, version=version)
                assert error == 0
                epoch = 3 if version >= 5 else -1
                assert got == {("t", 0): (10, epoch, "meta", 0), ("t", 1): (11, epoch, "meta", 0),
                               ("t", 9): (-1, -1, "", 0), ("v", 0): (-1, -1, "", 0)}
            for version in range(2, 8):  # topics null: everything the group committed
                error, got = await s.fetch("g", None, version=version)
                assert set(got) == {("t", 0), ("t", 1), ("u", 0)}
            error, got = await s.fetch("unknown", None, version=5)
            assert (error, got) == (0, {})
            error, got = await s.fetch("unknown", {"t": [0]}, version=1)
            assert got == {("t", 0): (-1, -1, "", 0)}
    run(main())


def test_offset_fetch_batched(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            s = Client(c)
            await s.commit("g1", {("t", 0): 1, ("t", 1): 2})
            await s.commit("g2", {("u", 0): 3})
            for version in (8, 9):
                got = await s.fetch_batched({"g1": None, "g2": {"u": [0, 1]}, "g3": {"t": [0]}}, version=version)
                assert got == {
                    "g1": (0, {("t", 0): (1, 3, "meta", 0), ("t", 1): (2, 3, "meta", 0)}),
                    "g2": (0, {("u", 0): (3, 3, "meta", 0), ("u", 1): (-1, -1, "", 0)}),
                    "g3": (0, {("t", 0): (-1, -1, "", 0)}),
                }
    run(main())


def test_offsets_persist_across_restart(tmp_path):
    members = {}

    async def first_life():
        async with coordinator(tmp_path) as c:
            a, b, s = Client(c, "ca"), Client(c, "cb"), Client(c)
            gen, ma, mb = await form_group(a, b)
            members.update(a=ma, b=mb)
            await a.commit("g", {("t", 0): 5, ("t", 1): 6}, generation=gen, member_id=ma, metadata="first")
            await a.commit("g", {("t", 0): 50}, generation=gen, member_id=ma, metadata=None)
            await s.commit("solo", {("x", 3): 33}, metadata="é unicode ✓")
            return gen

    async def second_life():
        async with coordinator(tmp_path) as c:
            # load() compacted the file: one line per group and kind, no torn tail.
            lines = path.read_bytes().split(b"\n")
            assert lines[-1] == b"" and len(lines) - 1 <= 4
            assert not path.with_name(path.name + ".tmp").exists()
            assert c.committed("g") == {("t", 0): (50, ""), ("t", 1): (6, "first")}
            assert c.committed("solo") == {("x", 3): (33, "é unicode ✓")}
            error, got = await Client(c).fetch("g", None, version=7)
            assert got == {("t", 0): (50, 3, "", 0), ("t", 1): (6, 3, "first", 0)}
            listed = await Client(c).list()
            assert listed["g"].protocol_type == "consumer" and listed["g"].group_state == "Stable"
            assert set(listed) == {"g", "solo"}
            # The members carry on: heartbeats and commits at their generation are accepted.
            a, b = Client(c, "ca"), Client(c, "cb")
            assert await a.heartbeat("g", gen, members["a"]) == 0
            assert await b.heartbeat("g", gen, members["b"]) == 0
            await a.commit("g", {("t", 0): 51}, generation=gen, member_id=members["a"])
            described = (await Client(c).describe("g"))["g"]
            assert {(m.member_id, bytes(m.member_assignment)) for m in described.members} == {
                (members["a"], b"assign-a"), (members["b"], b"assign-b")}
            await a.leave("g", members["a"])
            await b.leave("g", members["b"])
            # The group's generation carries on from where it was.
            r = await Client(c, "cz").join("g", version=3)
            return r.generation_id

    gen = run(first_life())
    path = tmp_path / "groups" / OFFSETS_FILE_NAME
    # A commit torn by a crash (no newline) is dropped; everything before it survives.
    with open(path, "ab") as f:
        f.write(b'{"g":"g","o":[["t",0,999,-1,"",0]')
    assert run(second_life()) > gen


def test_offset_store_compacts_as_it_grows(tmp_path):
    store = OffsetStore(tmp_path, compact_min_bytes=4096)
    store.load()
    for i in range(2000):
        store.commit("g", [(("t", i % 3), CommittedOffset(i, -1, "", 0))])
        store.record_group("g", GroupRecord(i // 100, "consumer"))
    assert (tmp_path / OFFSETS_FILE_NAME).stat().st_size < 4 * 4096
    store.close()
    again = OffsetStore(tmp_path)
    again.load()
    assert again.offsets == {"g": {("t", 0): CommittedOffset(1998, -1, "", 0), ("t", 1): CommittedOffset(1999, -1, "", 0),
                                   ("t", 2): CommittedOffset(1997, -1, "", 0)}}
    assert again.groups == {"g": GroupRecord(19, "consumer")}
    again.close()


def test_close_answers_parked_requests(tmp_path):
    async def main():
        c = coordinator(tmp_path, initial_rebalance_delay_ms=5000)
        await c.start()
        join = asyncio.ensure_future(Client(c).join("g", version=3))
        await asyncio.sleep(0.01)
        await c.close()
        assert (await join).error_code == E.NOT_COORDINATOR
        assert await Client(c).heartbeat("g", 1, "m") == E.COORDINATOR_NOT_AVAILABLE
    run(main())


def test_cancelled_join_does_not_break_the_group(tmp_path):
    async def main():
        async with coordinator(tmp_path) as c:
            a, b = Client(c, "ca"), Client(c, "cb")
            gen, ma, mb = await form_group(a, b, rebalance_ms=300)
            # a's connection dies while its JoinGroup is parked (the server cancels the handler).
            parked = asyncio.ensure_future(a.join("g", ma, rebalance_ms=300))
            await asyncio.sleep(0.01)
            parked.cancel()
            rb = await b.join("g", mb, rebalance_ms=300)  # completes: a counts as rejoined, as in Kafka
            assert rb.generation_id == gen + 1
    run(main())

"""Where AsyncAdminClient sends each request, and how it retries, against a scripted two-broker cluster
(asyncio servers that answer from a script and record what each broker was asked): group requests go to
the coordinator FindCoordinator names and find it again after NOT_COORDINATOR; COORDINATOR_LOAD_IN_PROGRESS
is waited out; ListOffsets goes to each partition's leader and follows a leader that moved; a broker's
configs go to that broker; errors that are not retriable are not retried; retries end at the call's
timeout with the last error."""
from __future__ import annotations

import asyncio
import functools
import struct
import uuid

import pytest

from kafkawire import messages as m
from kafkawire.client.admin import AsyncAdminClient, ConfigResource, OffsetSpec, TopicPartition
from kafkawire.client.errors import KafkaError, KafkaTimeoutError
from kafkawire.error_codes import ErrorCode as E
from kafkawire.framing import encode_response, read_request

SERVED = {18: (0, 4), 3: (1, 12), 10: (0, 6), 15: (0, 6), 2: (1, 9), 32: (1, 4), 65: (0, 0)}


class ScriptedCluster:
    """Two brokers (0 and 1). ``leaders`` says who leads each partition of topic ``t``; ``script`` maps an
    API key to a list of answers given in turn (the last one repeated), each a function of (node, request)
    returning a response body."""

    def __init__(self):
        self.servers: dict[int, asyncio.Server] = {}
        self.ports: dict[int, int] = {}
        self.leaders = {0: 1, 1: 0}
        self.script: dict[int, list] = {}
        self.log: list[tuple[int, int]] = []  # (node, api key) of every request but ApiVersions and Metadata

    async def start(self):
        for node in (0, 1):
            server = await asyncio.start_server(lambda r, w, node=node: self._serve(node, r, w), "127.0.0.1", 0)
            self.servers[node] = server
            self.ports[node] = server.sockets[0].getsockname()[1]
        return self

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.ports[0]}"

    async def close(self):
        for server in self.servers.values():
            server.close()

    async def _serve(self, node, reader, writer):
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                header, body, _ = read_request(await reader.readexactly(size))
                key, version = header.request_api_key, header.request_api_version
                writer.write(encode_response(key, version, header.correlation_id, self._answer(node, key, body)))
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def _answer(self, node, key, body):
        if key == 18:
            return m.ApiVersionsResponse(api_keys=[m.ApiVersionsResponse.ApiVersion(
                api_key=k, min_version=low, max_version=high) for k, (low, high) in SERVED.items()])
        if key == 3:
            R = m.MetadataResponse
            return R(brokers=[R.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=p)
                              for n, p in self.ports.items()], cluster_id="scripted", controller_id=0,
                     topics=[R.MetadataResponseTopic(name="t", topic_id=uuid.UUID(int=7), partitions=[
                         R.MetadataResponsePartition(partition_index=p, leader_id=leader, leader_epoch=1,
                                                     replica_nodes=[leader], isr_nodes=[leader])
                         for p, leader in self.leaders.items()])
                             for t in body.topics or () if t.name == "t"])
        self.log.append((node, key))
        answers = self.script[key]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        return answer(node, body)


@pytest.fixture
def cluster():
    return ScriptedCluster()


def in_loop(test):
    """Run an async test on a fresh event loop (the suite has no asyncio plugin)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return run


def admin_for(cluster, **settings):
    return AsyncAdminClient(bootstrap_servers=cluster.bootstrap, retry_backoff_ms=1, retry_backoff_max_ms=5,
                            **settings)


def coordinator_is(node_id, code=0):
    def answer(node, body):
        R = m.FindCoordinatorResponse
        return R(coordinators=[R.Coordinator(key=k, node_id=node_id if not code else -1, host="127.0.0.1",
                                             port=_ports[node_id] if not code else -1, error_code=code)
                               for k in body.coordinator_keys])
    return answer


_ports: dict[int, int] = {}


def group_answer(code):
    def answer(node, body):
        R = m.DescribeGroupsResponse
        return R(groups=[R.DescribedGroup(error_code=code, group_id=g, group_state="Empty" if not code else "",
                                          protocol_type="consumer" if not code else "", protocol_data="")
                         for g in body.groups])
    return answer


@in_loop
async def test_group_requests_follow_the_coordinator(cluster):
    await cluster.start()
    _ports.update(cluster.ports)
    cluster.script[10] = [coordinator_is(0, E.COORDINATOR_NOT_AVAILABLE), coordinator_is(1), coordinator_is(0)]
    cluster.script[15] = [group_answer(E.NOT_COORDINATOR), group_answer(E.COORDINATOR_LOAD_IN_PROGRESS),
                          group_answer(0)]
    async with admin_for(cluster) as admin:
        described = await admin.describe_consumer_groups(["g"])
    await cluster.close()
    assert described["g"].state.value == "Empty" and described["g"].coordinator.id == 0
    # not available -> found on 1 -> NOT_COORDINATOR there -> found again on 0 -> loading -> answered
    assert cluster.log == [(0, 10), (0, 10), (1, 15), (0, 10), (0, 15), (0, 15)]


@in_loop
async def test_list_offsets_goes_to_each_leader_and_follows_a_move(cluster):
    await cluster.start()

    def offsets(node, body):
        R = m.ListOffsetsResponse
        partitions = []
        for t in body.topics:
            for p in t.partitions:
                moved = node == 1 and p.partition_index == 0 and cluster.leaders[0] == 1
                if moved:
                    cluster.leaders[0] = 0  # the leader moves: the next Metadata says so
                partitions.append(R.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=E.NOT_LEADER_OR_FOLLOWER if moved else 0,
                    offset=100 * node + p.partition_index, timestamp=-1, leader_epoch=1))
        return R(topics=[R.ListOffsetsTopicResponse(name="t", partitions=partitions)])
    cluster.script[2] = [offsets]
    async with admin_for(cluster) as admin:
        found = await admin.list_offsets({TopicPartition("t", 0): OffsetSpec.latest(),
                                          TopicPartition("t", 1): OffsetSpec.latest()})
    await cluster.close()
    assert found[TopicPartition("t", 1)].offset == 1  # from its leader, broker 0
    assert found[TopicPartition("t", 0)].offset == 0  # from broker 0, once it led the partition
    assert sorted(cluster.log) == [(0, 2), (0, 2), (1, 2)]


@in_loop
async def test_a_brokers_configs_go_to_that_broker(cluster):
    await cluster.start()

    def configs(node, body):
        R = m.DescribeConfigsResponse
        entry = R.DescribeConfigsResourceResult(name="node", value=str(node))
        return R(results=[R.DescribeConfigsResult(resource_type=r.resource_type, resource_name=r.resource_name,
                                                  configs=[entry]) for r in body.resources])
    cluster.script[32] = [configs]
    async with admin_for(cluster) as admin:
        found = await admin.describe_configs([ConfigResource("broker", "1"), ConfigResource("topic", "t")])
    await cluster.close()
    assert found[ConfigResource("broker", "1")]["node"].value == "1"
    assert (1, 32) in cluster.log


@in_loop
async def test_errors_that_are_not_retriable_are_not_retried(cluster):
    await cluster.start()
    _ports.update(cluster.ports)
    cluster.script[10] = [coordinator_is(1)]
    cluster.script[15] = [group_answer(E.GROUP_AUTHORIZATION_FAILED)]
    async with admin_for(cluster) as admin:
        described = await admin.describe_consumer_groups(["g"])
    await cluster.close()
    assert isinstance(described["g"], KafkaError) and described["g"].code == E.GROUP_AUTHORIZATION_FAILED
    assert cluster.log == [(0, 10), (1, 15)]


@in_loop
async def test_retries_end_at_the_calls_timeout_with_the_last_error(cluster):
    await cluster.start()
    _ports.update(cluster.ports)
    cluster.script[10] = [coordinator_is(1)]

    def loading(node, body):
        R = m.DescribeTransactionsResponse
        return R(transaction_states=[R.TransactionState(error_code=E.COORDINATOR_LOAD_IN_PROGRESS, transactional_id=t,
                                                        transaction_state="") for t in body.transactional_ids])
    cluster.script[65] = [loading]
    async with admin_for(cluster, request_timeout_ms=1000, default_api_timeout_ms=1000) as admin:
        found = await admin.describe_transactions(["tx"], request_timeout=0.3)
        assert admin.retries > 1
    await cluster.close()
    assert isinstance(found["tx"], KafkaTimeoutError) and "COORDINATOR_LOAD_IN_PROGRESS" in str(found["tx"])

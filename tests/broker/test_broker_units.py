"""The broker's parts without a running server: fetch sessions (KIP-227) as data, and the request
handlers called directly on their shared state (topics, groups, the fetch machinery) in an event loop,
with requests and responses through the codec as the server would pass them."""
from __future__ import annotations

import asyncio

from kafkawire import messages as m
from kafkawire.broker.apis.state import RequestContext
from kafkawire.broker.config.broker_config import BrokerConfig
from kafkawire.broker.encoded_response import EncodedResponse
from kafkawire.broker.fetch.sessions import FetchSessionCache, SessionPartition
from kafkawire.broker.groups.coordinator import GroupCoordinator
from kafkawire.broker.dispatch.handlers import Handlers
from kafkawire.broker.storage.file_records import FileRecords
from kafkawire.broker.topics import TopicManager
from kafkawire.error_codes import ErrorCode
from kafkawire.framing import encode_response_parts, read_response
from kafkawire.records import RecordBatchBuilder, iter_records


# ---- fetch sessions ----------------------------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _parts(*keys, offset=0):
    return [SessionPartition((topic, partition), offset, 1000) for topic, partition in keys]


def test_a_full_fetch_opens_a_session_and_incremental_ones_carry_changes():
    cache = FetchSessionCache(slots=2)
    full = cache.context(0, 0, _parts(("a", 0), ("a", 1), ("b", 0)), [])
    assert full.session is not None and not full.incremental
    session_id = full.response_session_id
    # the partition that returned records moves to the back of the session order
    full.finish([full.partitions[0]])
    assert [p.key for p in cache.sessions[session_id].partitions.values()] == [("a", 1), ("b", 0), ("a", 0)]
    # incremental: an update in place keeps its position, a forgotten partition leaves, a new one joins at the end
    step = cache.context(session_id, 1, [SessionPartition(("b", 0), 42, 500), *_parts(("c", 0))], [("a", 1)])
    assert step.incremental and [p.key for p in step.partitions] == [("b", 0), ("a", 0), ("c", 0)]
    assert step.partitions[0].fetch_offset == 42 and step.partitions[0].partition_max_bytes == 500
    # an incremental response leaves out partitions with nothing new
    assert not step.include(step.partitions[1], 0, -1, -1, 0)
    assert step.include(step.partitions[1], 0, 10, 0, 0)  # its high watermark moved
    assert step.include(step.partitions[2], 5, -1, -1, 0)  # it returned records
    assert cache.context(session_id, 1, [], []).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.context(999, 1, [], []).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    closing = cache.context(session_id, -1, _parts(("a", 0)), [])  # epoch -1: sessionless, closes it
    assert closing.session is None and session_id not in cache.sessions


def test_the_session_cache_is_bounded_and_evicts_stale_or_smaller_sessions():
    clock = Clock()
    cache = FetchSessionCache(slots=2, eviction_ms=1000, clock=clock)
    first = cache.context(0, 0, _parts(("a", 0)), []).response_session_id
    second = cache.context(0, 0, _parts(("a", 0), ("a", 1)), []).response_session_id
    assert cache.context(0, 0, _parts(("b", 0)), []).session is None  # full, nothing stale: no session
    clock.now = 0.5
    cache.context(second, 1, [], [])  # used: not stale
    clock.now = 1.2
    third = cache.context(0, 0, _parts(("c", 0)), [])  # the first is stale and goes
    assert third.session is not None and first not in cache.sessions and second in cache.sessions
    clock.now = 1.4
    fourth = cache.context(0, 0, _parts(("d", 0), ("d", 1), ("d", 2)), [])  # evicts an older, smaller one
    assert fourth.session is not None and len(cache.sessions) == 2


# ---- handlers ----------------------------------------------------------------------------------------------

def _with_handlers(tmp_path, body, **settings):
    async def run():
        config = BrokerConfig(data_dir=tmp_path, port=0, group_initial_rebalance_delay_ms=0, **settings)
        topics = TopicManager(config)
        topics.load()
        groups = GroupCoordinator(tmp_path / "__consumer_offsets", initial_rebalance_delay_ms=0)
        await groups.start()
        handlers = Handlers(config, topics, groups, port=9092)
        try:
            return await body(handlers)
        finally:
            handlers.close()
            await groups.close()
            topics.close()
    return asyncio.run(run())


async def _call(handlers, request, version):
    """The handler's response, passed through the codec as the server would send it."""
    wire = type(request).decode(request.encode(version), version)
    listener = handlers.state.config.listener_list()[0]
    context = RequestContext(listener, 9092, "User:ANONYMOUS", "127.0.0.1", "unit")
    response = await handlers.handle(request.API_KEY, wire, version, context)
    if type(response) is m.FetchResponse:  # its records are file slices: read them as the server sends them
        frame = b"".join(part.read() if type(part) is FileRecords else bytes(part)
                         for part in encode_response_parts(request.API_KEY, version, 7, response))[4:]
        return read_response(frame, request.API_KEY, version).body
    if type(response) is EncodedResponse:  # assembled from bytes: read as a client would
        frame = b"".join(encode_response_parts(request.API_KEY, version, 7, response))[4:]
        return read_response(frame, request.API_KEY, version).body
    return response


def test_handlers_answer_without_a_server(tmp_path):
    async def body(handlers):
        versions = await _call(handlers, m.ApiVersionsRequest(), 3)
        assert {k.api_key for k in versions.api_keys} == set(handlers.versions)
        metadata = await _call(handlers, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(
            name="units")], allow_auto_topic_creation=True), 12)
        (topic,) = metadata.topics
        assert topic.error_code == 0 and len(topic.partitions) == 2 and metadata.brokers[0].port == 9092
        builder = RecordBatchBuilder()
        builder.append(b"value", key=b"key")
        produced = await _call(handlers, m.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
            m.ProduceRequest.TopicProduceData(name="units", partition_data=[
                m.ProduceRequest.PartitionProduceData(index=1, records=builder.build())])]), 9)
        assert produced.responses[0].partition_responses[0].base_offset == 0
        fetched = await _call(handlers, m.FetchRequest(max_wait_ms=0, max_bytes=1 << 20, topics=[
            m.FetchRequest.FetchTopic(topic="units", partitions=[m.FetchRequest.FetchPartition(
                partition=1, fetch_offset=0, partition_max_bytes=1 << 20)])]), 12)
        (partition,) = fetched.responses[0].partitions
        assert [(r.key, r.value) for r in iter_records(partition.records)] == [(b"key", b"value")]
        offsets = await _call(handlers, m.ListOffsetsRequest(topics=[m.ListOffsetsRequest.ListOffsetsTopic(
            name="units", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=1, timestamp=-1)])]),
            7)
        assert offsets.topics[0].partitions[0].offset == 1
        coordinator = await _call(handlers, m.FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]), 4)
        assert coordinator.coordinators[0].node_id == 0
    _with_handlers(tmp_path, body, num_partitions=2)


def test_every_served_api_has_a_handler_registered_by_its_api_key(tmp_path):
    async def body(handlers):
        assert all(type(key) is m.ApiKey for key in handlers.table)
        by_connection = {m.ApiKey.SASL_HANDSHAKE, m.ApiKey.SASL_AUTHENTICATE}  # the connection answers these
        assert set(handlers.table) | by_connection == set(handlers.versions)
    _with_handlers(tmp_path, body)


def test_a_parked_fetch_is_woken_by_a_produce(tmp_path):
    async def body(handlers):
        await _call(handlers, m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name="waits", num_partitions=1, replication_factor=1)], timeout_ms=1000), 7)
        parked = m.FetchRequest(max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, topics=[m.FetchRequest.FetchTopic(
            topic="waits", partitions=[m.FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                                     partition_max_bytes=1 << 20)])])
        fetch = asyncio.ensure_future(_call(handlers, parked, 12))
        await asyncio.sleep(0.05)
        assert not fetch.done() and len(handlers.purgatory) == 1
        builder = RecordBatchBuilder()
        builder.append(b"wake")
        await _call(handlers, m.ProduceRequest(acks=1, timeout_ms=1000, topic_data=[m.ProduceRequest.TopicProduceData(
            name="waits", partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=builder.build())])]), 9)
        response = await asyncio.wait_for(fetch, 2)
        assert [r.value for r in iter_records(response.responses[0].partitions[0].records)] == [b"wake"]
    _with_handlers(tmp_path, body)

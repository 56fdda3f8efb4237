"""``kafkawire demo``: an end-to-end run on embedded defaults.

For now the run is a client and a broker talking over an in-memory byte stream: every request and
response is framed, split into small TCP-like segments, reassembled, decoded and checked. (The broker,
records and capture stages join the demo as they land.)
"""
from __future__ import annotations

import time
import uuid

from .framing import Correlator, FrameBuffer, decode_request, encode_response
from .messages import api


def _conversation():
    from .messages import (ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse, MetadataRequest,
                           MetadataResponse)
    topic_id = uuid.uuid4()
    partitions = list(range(4))
    return [
        (ApiVersionsRequest(client_software_name="kafkawire-demo", client_software_version="0.1.0"), 3,
         lambda req: ApiVersionsResponse(api_keys=[
             ApiVersionsResponse.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
             for a in api_list()])),
        (MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="demo")]), 12,
         lambda req: MetadataResponse(
             brokers=[MetadataResponse.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=9092)],
             cluster_id="demo-cluster", controller_id=0,
             topics=[MetadataResponse.MetadataResponseTopic(
                 name="demo", topic_id=topic_id,
                 partitions=[MetadataResponse.MetadataResponsePartition(
                     partition_index=p, leader_id=0, leader_epoch=0, replica_nodes=[0], isr_nodes=[0])
                     for p in partitions])])),
        (FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, topics=[FetchRequest.FetchTopic(
            topic_id=topic_id, partitions=[FetchRequest.FetchPartition(partition=p, fetch_offset=0,
                                                                      partition_max_bytes=1 << 16)
                                           for p in partitions])]), 17,
         lambda req: FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
             topic_id=topic_id, partitions=[FetchResponse.PartitionData(partition_index=p.partition,
                                                                       high_watermark=0, records=b"")
                                            for p in req.topics[0].partitions])])),
    ]


def api_list():
    from .messages import apis
    return apis()


def run() -> int:
    client = Correlator(client_id="kafkawire-demo")
    to_broker, to_client = FrameBuffer(), FrameBuffer()
    segment = 7  # bytes per simulated TCP segment, so every frame is reassembled from pieces
    started = time.perf_counter()
    print(f"{'api':<12} {'ver':>3} {'request':>8} {'response':>9}  result")
    for request, version, answer in _conversation():
        wire = client.request(request, version)
        for i in range(0, len(wire), segment):
            to_broker.feed(wire[i:i + segment])
        header, decoded = decode_request(to_broker.next_frame())
        assert decoded == request, "the broker side decoded a different request"
        response = answer(decoded)
        reply = encode_response(header.request_api_key, header.request_api_version, header.correlation_id,
                                response)
        for i in range(0, len(reply), segment):
            to_client.feed(reply[i:i + segment])
        pending, _, body = client.response(to_client.next_frame())
        assert body == response, "the client side decoded a different response"
        name = api(pending.api_key).name
        print(f"{name:<12} {version:>3} {len(wire):>8} {len(reply):>9}  ok, correlation id {pending.correlation_id}")
    print(f"all frames round-tripped in {1000 * (time.perf_counter() - started):.1f} ms")
    return 0

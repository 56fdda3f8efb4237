"""kafkawire.framing: frame reassembly, request/response headers, ApiVersions quirks, correlation.

Upstream's rules are in the reference, section 2: int32 size prefix (negative or above the limit is
refused), request header v2 for flexible versions and v1 otherwise (ControlledShutdown v0: v0),
response header v1 for flexible versions and v0 otherwise (ApiVersions: always v0), the ApiVersions
v0 fallback (KIP-511), in-order responses, no response to Produce with acks=0.
"""
from __future__ import annotations

import struct
import uuid

import pytest

from kafkawire import DecodeError
from kafkawire.framing import (
    DEFAULT_MAX_FRAME, REQUEST_HEAD_SIZE, Correlator, FrameBuffer, FrameTooLarge, RequestHead, decode_request,
    decode_response, encode_request, encode_response, encode_response_parts, frame, peek_request,
    peek_request_head, read_request, read_response,
)
from kafkawire.messages import (
    ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, RequestHeader, ResponseHeader, api, apis,
)

# ---------------------------------------------------------------------------------------------------
# FrameBuffer


def _frames(*payloads: bytes) -> bytes:
    return b"".join(frame(p) for p in payloads)


def test_frame_prefix():
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"


def test_feed_one_byte_at_a_time():
    payloads = [b"hello", b"", b"x" * 300, bytes(range(256))]
    stream = _frames(*payloads)
    buffer = FrameBuffer()
    got = []
    for index in range(len(stream)):
        buffer.feed(stream[index:index + 1])
        got.extend(buffer.frames())
    assert got == payloads
    assert len(buffer) == 0
    assert buffer.next_frame() is None


def test_several_frames_in_one_feed():
    payloads = [b"a", b"bb", b"ccc"]
    buffer = FrameBuffer()
    buffer.feed(_frames(*payloads) + b"\x00\x00")  # and the start of a fourth prefix
    assert buffer.next_frame() == b"a"
    assert list(buffer.frames()) == [b"bb", b"ccc"]
    assert buffer.next_frame() is None
    assert len(buffer) == 2
    buffer.feed(b"\x00\x01z")
    assert buffer.next_frame() == b"z"
    assert len(buffer) == 0


def test_feed_accepts_bytearray_and_memoryview():
    buffer = FrameBuffer()
    data = _frames(b"one", b"two")
    buffer.feed(bytearray(data[:5]))
    buffer.feed(memoryview(data)[5:])
    assert list(buffer.frames()) == [b"one", b"two"]


def test_partial_frame_waits():
    buffer = FrameBuffer()
    buffer.feed(b"\x00\x00\x00\x05abc")
    assert buffer.next_frame() is None
    assert len(buffer) == 7
    buffer.feed(b"de")
    assert buffer.next_frame() == b"abcde"


def test_zero_size_frame_is_legal():
    buffer = FrameBuffer(max_frame=0)
    buffer.feed(b"\x00\x00\x00\x00")
    assert buffer.next_frame() == b""


@pytest.mark.parametrize("size", [DEFAULT_MAX_FRAME + 1, 0x7FFFFFFF, -1, -(1 << 31)])
def test_oversized_or_negative_size_from_the_prefix_alone(size):
    buffer = FrameBuffer()
    prefix = struct.pack(">i", size)
    for byte in prefix[:3]:
        buffer.feed(bytes([byte]))
        assert buffer.next_frame() is None
    buffer.feed(prefix[3:])
    with pytest.raises(FrameTooLarge) as info:
        buffer.next_frame()
    assert isinstance(info.value, DecodeError)
    assert info.value.offset == 0
    assert str(size) in str(info.value)
    assert len(buffer) == 4  # nothing of the frame buffered beyond its prefix
    with pytest.raises(FrameTooLarge):  # and it stays refused
        buffer.next_frame()


def test_max_frame_limit_is_inclusive():
    buffer = FrameBuffer(max_frame=10)
    buffer.feed(frame(b"x" * 10))
    assert buffer.next_frame() == b"x" * 10
    buffer.feed(struct.pack(">i", 11))
    with pytest.raises(FrameTooLarge):
        buffer.next_frame()


def test_oversized_after_good_frames_reports_stream_offset():
    buffer = FrameBuffer(max_frame=100)
    stream = _frames(b"abc", b"defgh") + struct.pack(">i", 101)
    for index in range(len(stream)):  # one byte at a time: the buffer compacts along the way
        buffer.feed(stream[index:index + 1])
        if index < len(stream) - 1:
            list(buffer.frames())
    with pytest.raises(FrameTooLarge) as info:
        buffer.next_frame()
    assert info.value.offset == 7 + 9
    # In one feed, without compaction, the same offset.
    buffer = FrameBuffer(max_frame=100)
    buffer.feed(stream)
    assert list(buffer.next_frame() for _ in range(2)) == [b"abc", b"defgh"]
    with pytest.raises(FrameTooLarge) as info:
        buffer.next_frame()
    assert info.value.offset == 16


# ---------------------------------------------------------------------------------------------------
# Requests


def _header(key, version, correlation_id=7, client_id="cli"):
    return RequestHeader(request_api_key=key, request_api_version=version, correlation_id=correlation_id,
                         client_id=client_id)


FETCH = FetchRequest(max_wait_ms=500, min_bytes=1, topics=[FetchRequest.FetchTopic(topic="events", partitions=[
    FetchRequest.FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1 << 20)])])

REQUESTS = [
    # (body, version, expected header version)
    (FETCH, 4, 1),
    (FETCH, 11, 1),
    (FETCH, 12, 2),
    (FetchRequest(max_wait_ms=1, topics=[FetchRequest.FetchTopic(topic_id=uuid.UUID(int=0xABCDEF))]), 13, 2),
    (MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]), 1, 1),
    (MetadataRequest(topics=None), 9, 2),
    (ApiVersionsRequest(), 0, 1),
    (ApiVersionsRequest(client_software_name="kw", client_software_version="1"), 3, 2),
    (ProduceRequest(acks=-1, timeout_ms=100), 3, 1),
    (ProduceRequest(acks=1, timeout_ms=100), 9, 2),
    (ProduceRequest(acks=1, timeout_ms=100, topic_data=[ProduceRequest.TopicProduceData(
        topic_id=uuid.UUID(int=7), partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"")])]), 13, 2),
    (MetadataRequest(topics=None), 13, 2),
]


@pytest.mark.parametrize("body,version,header_version", REQUESTS,
                         ids=[f"{b.NAME}-v{v}" for b, v, _ in REQUESTS])
def test_request_round_trip(body, version, header_version):
    header = _header(body.API_KEY, version)
    data = encode_request(header, body)
    size = struct.unpack_from(">i", data)[0]
    assert size == len(data) - 4
    frame_bytes = data[4:]
    assert peek_request(frame_bytes) == (body.API_KEY, version, 7)
    assert api(body.API_KEY).request_header_version(version) == header_version
    # The header on the wire is exactly the header at that version.
    expected_header = header.encode(header_version)
    assert frame_bytes.startswith(expected_header)
    assert frame_bytes[len(expected_header):] == body.encode(version)
    if header_version == 0:
        assert len(expected_header) == 8  # key, version, correlation id: no client id
    elif header_version == 1:
        assert expected_header[8:] == b"\x00\x03cli"
    else:
        assert expected_header[8:] == b"\x00\x03cli\x00"  # client id keeps its int16 length, then tags

    got_header, got_body = decode_request(frame_bytes)
    assert got_body == body
    assert got_header.request_api_key == body.API_KEY
    assert got_header.request_api_version == version
    assert got_header.correlation_id == 7
    if header_version == 0:
        assert got_header.client_id == ""
    else:
        assert got_header.client_id == "cli"
    # Through a FrameBuffer in small pieces.
    buffer = FrameBuffer()
    for index in range(0, len(data), 3):
        buffer.feed(data[index:index + 3])
    assert decode_request(buffer.next_frame())[1] == body


def test_null_client_id():
    data = encode_request(_header(3, 1, client_id=None), MetadataRequest(topics=[]))
    assert data[4 + 8:4 + 10] == b"\xff\xff"
    header, _ = decode_request(data[4:])
    assert header.client_id is None


def test_unknown_api_key_names_header_field():
    frame_bytes = struct.pack(">hhi", 999, 0, 1) + b"\x00\x00"
    with pytest.raises(DecodeError) as info:
        decode_request(frame_bytes)
    assert info.value.path == ["RequestHeader", "request_api_key"]
    assert info.value.field_path == "RequestHeader.request_api_key"
    assert info.value.offset == 0
    assert "999" in str(info.value)
    frame_bytes = struct.pack(">hhi", -1, 0, 1) + b"\x00\x00"
    with pytest.raises(DecodeError) as info:
        decode_request(frame_bytes)
    assert info.value.field_path == "RequestHeader.request_api_key"


@pytest.mark.parametrize("version", [api("Fetch").max_version + 1, 100, -1])
def test_unsupported_version_names_header_field(version):
    header = struct.pack(">hhi", 1, version, 1) + b"\x00\x00"
    frame_bytes = header + (b"\x00" if version >= 12 else b"") + b"\x00" * 40
    with pytest.raises(DecodeError) as info:
        decode_request(frame_bytes)
    assert info.value.field_path == "RequestHeader.request_api_version"
    assert info.value.offset == 2
    assert str(version) in str(info.value)


def test_short_request_frame():
    with pytest.raises(DecodeError) as info:
        decode_request(b"\x00\x01\x00")
    assert info.value.path[0] == "RequestHeader"


def test_bad_request_body_offset_counts_from_frame_start():
    data = encode_request(_header(1, 12), FETCH)[4:]
    header_length = len(_header(1, 12).encode(2))
    # Cut inside the topic name: the error names the body's field path, offset within the frame.
    cut = data[:header_length + 10 + 4 + 4 + 4 + 4 + 1 + 1 + 3]
    with pytest.raises(DecodeError) as info:
        decode_request(cut)
    assert info.value.path[0] == "FetchRequest"
    assert info.value.offset is not None and header_length <= info.value.offset <= len(cut)
    with pytest.raises(DecodeError) as info:
        decode_request(data + b"\x00")  # exact by default
    assert "trailing" in str(info.value)
    assert info.value.offset == len(data)


def test_read_request_counts_trailing_bytes_as_kafka_ignores_them():
    # librdkafka 2.16's all-topics Metadata request carries 3 bytes after its body; Kafka serves it.
    data = encode_request(_header(3, 12), MetadataRequest(topics=None))[4:]
    header, body, trailing = read_request(data + b"\x00\x00\x00")
    assert trailing == 3 and body.topics is None and header.request_api_key == 3
    assert read_request(data).trailing == 0
    header, body = decode_request(data + b"\x01", exact=False)
    assert body.topics is None


@pytest.mark.parametrize("key, version, client_id, header_version", [
    (3, 12, "cli", 2),         # Metadata v12: flexible, header v2
    (0, 3, "producer-1", 1),   # Produce v3: header v1
    (3, 1, None, 1),           # a null client id
])
def test_peek_request_head_reads_what_decode_request_decodes(key, version, client_id, header_version):
    body = api(key).request_class()
    data = encode_request(_header(key, version, correlation_id=41, client_id=client_id), body)
    head = peek_request_head(data, 0)
    length = -1 if client_id is None else len(client_id)
    assert head == RequestHead(len(data) - 4, key, version, 41, header_version, length)
    header, _ = decode_request(data[4:])
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == head[1:4]
    assert peek_request_head(b"junk" + data, 4) == head  # at an offset
    assert peek_request_head(data, 0, max_frame=len(data) - 5) is None  # the size is above the limit


def test_peek_request_head_refuses_what_cannot_start_a_request():
    good = encode_request(_header(3, 12), MetadataRequest(topics=[]))
    assert peek_request_head(good) is not None

    def changed(fmt: str, at: int, value: int) -> bytes:
        data = bytearray(good)
        struct.pack_into(fmt, data, at, value)
        return bytes(data)

    assert peek_request_head(changed(">i", 0, 7)) is None         # too small for a request header
    assert peek_request_head(changed(">i", 0, -1)) is None        # a negative size
    assert peek_request_head(changed(">h", 4, 999)) is None       # an API key the specs do not define
    assert peek_request_head(changed(">h", 6, 99)) is None        # a version Metadata does not have
    assert peek_request_head(changed(">i", 8, -5)) is None        # a negative correlation id
    assert peek_request_head(changed(">h", 12, 500)) is None      # a client id longer than the frame
    assert peek_request_head(changed(">h", 12, -2)) is None       # a client id length below -1
    size = struct.unpack_from(">i", good)[0]
    assert peek_request_head(changed(">h", 12, size - 10)) is None  # no room left for the tag section
    with pytest.raises(struct.error):
        peek_request_head(good[:REQUEST_HEAD_SIZE - 1])  # the caller makes sure the bytes are there


# ---------------------------------------------------------------------------------------------------
# Responses


def _fetch_response(records=b"r" * 20):
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="events", partitions=[
        FetchResponse.PartitionData(partition_index=0, high_watermark=43, records=records)])])


@pytest.mark.parametrize("version,header_version", [(4, 0), (11, 0), (12, 1), (16, 1)])
def test_fetch_response_header_versions(version, header_version):
    body = _fetch_response()
    if version >= 13:  # topic ids replace names (Topic is ignorable, so a name would be dropped)
        body.responses[0].topic = ""
        body.responses[0].topic_id = uuid.UUID(int=12345)
    data = encode_response(1, version, 99, body)
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    frame_bytes = data[4:]
    assert frame_bytes[:4] == struct.pack(">i", 99)
    header_length = 4 if header_version == 0 else 5
    if header_version == 1:
        assert frame_bytes[4] == 0  # empty tag section
    assert frame_bytes[header_length:] == body.encode(version)
    header, got = decode_response(frame_bytes, 1, version)
    assert header.correlation_id == 99
    assert got == body


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_header_is_always_v0(version):
    assert api(18).response_header_version(version) == 0
    body = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=1, min_version=0, max_version=17)])
    data = encode_response(18, version, 5, body)
    frame_bytes = data[4:]
    assert frame_bytes[:4] == struct.pack(">i", 5)
    assert frame_bytes[4:] == body.encode(version)  # no tag section in the header
    header, got = decode_response(frame_bytes, 18, version)
    assert header.correlation_id == 5
    assert got == body


def test_api_versions_v0_fallback():
    """A broker that does not know the requested version answers with a v0 body (KIP-511)."""
    v0_body = ApiVersionsResponse(error_code=35, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)])
    frame_bytes = encode_response(18, 0, 11, v0_body)[4:]
    with pytest.raises(DecodeError):
        ApiVersionsResponse.decode(frame_bytes[4:], 3, exact=True)  # not a v3 body
    header, got = decode_response(frame_bytes, 18, 3)
    assert header.correlation_id == 11
    assert got.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in got.api_keys] == [(18, 0, 2)]
    # The Correlator goes the same way.
    correlator = Correlator()
    correlator.request(ApiVersionsRequest(client_software_name="kw", client_software_version="1"), 3)
    pending, _, got = correlator.response(struct.pack(">i", 0) + frame_bytes[4:])
    assert pending.api_version == 3 and got.error_code == 35


def test_read_response_says_which_version_was_read():
    v0_body = ApiVersionsResponse(error_code=35, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)])
    frame_bytes = encode_response(18, 0, 11, v0_body)[4:]
    assert read_response(frame_bytes, 18, 3)[2:] == (0, 0)
    body = _fetch_response()
    frame_bytes = encode_response(1, 12, 3, body)[4:]
    header, got, version, trailing = read_response(frame_bytes + b"xy", 1, 12)
    assert (got, version, trailing) == (body, 12, 2)
    with pytest.raises(DecodeError) as info:
        decode_response(frame_bytes + b"xy", 1, 12)
    assert "2 trailing bytes" in str(info.value) and info.value.offset == len(frame_bytes)


def test_no_fallback_for_other_apis():
    body = _fetch_response()
    frame_bytes = encode_response(1, 4, 1, body)[4:]
    with pytest.raises(DecodeError) as info:
        decode_response(frame_bytes, 1, 12)
    assert info.value.path[0] == "FetchResponse"


def test_bad_response_body_path_and_offset():
    body = _fetch_response(records=b"r" * 20)
    frame_bytes = encode_response(1, 12, 3, body)[4:]
    cut = frame_bytes[:-8]
    with pytest.raises(DecodeError) as info:
        decode_response(cut, 1, 12)
    assert info.value.field_path == "FetchResponse.responses[0].partitions[0].records"
    body_bytes = body.encode(12)
    records_prefix = 5 + body_bytes.index(bytes([21]) + b"r" * 20)
    assert info.value.offset in (records_prefix, records_prefix + 1)


def test_header_tags_round_trip():
    data = encode_response(1, 12, 3, _fetch_response(), header_tags={4: b"\x01\x02"})
    header, _ = decode_response(data[4:], 1, 12)
    assert header.unknown_tags == {4: b"\x01\x02"}


# ---------------------------------------------------------------------------------------------------
# Correlator


def _response_frame(correlation_id, api_key, version, body):
    return encode_response(api_key, version, correlation_id, body)[4:]


def test_correlator_pairs_in_order():
    correlator = Correlator(client_id="me", first_correlation_id=100)
    metadata = MetadataRequest(topics=[])
    first = correlator.request(metadata, 9, context="m")
    second = correlator.request(FETCH, 12, context="f")
    assert correlator.pending == 2
    h1, b1 = decode_request(first[4:])
    h2, b2 = decode_request(second[4:])
    assert (h1.correlation_id, h2.correlation_id) == (100, 101)
    assert h1.client_id == h2.client_id == "me"
    assert b1 == metadata and b2 == FETCH

    meta_body = MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=1)])
    pending, header, got = correlator.response(_response_frame(100, 3, 9, meta_body))
    assert (pending.correlation_id, pending.api_key, pending.api_version, pending.context) == (100, 3, 9, "m")
    assert header.correlation_id == 100 and got == meta_body
    assert correlator.pending == 1
    pending, header, got = correlator.response(_response_frame(101, 1, 12, _fetch_response()))
    assert pending.context == "f" and got == _fetch_response()
    assert correlator.pending == 0


def test_correlator_mismatched_correlation_id():
    correlator = Correlator()
    correlator.request(MetadataRequest(topics=[]), 1)
    correlator.request(MetadataRequest(topics=[]), 1)
    with pytest.raises(DecodeError) as info:
        correlator.response(_response_frame(1, 3, 1, MetadataResponse()))  # the second, out of order
    assert info.value.field_path == "ResponseHeader.correlation_id"
    assert correlator.pending == 2


def test_correlator_nothing_pending():
    correlator = Correlator()
    with pytest.raises(DecodeError) as info:
        correlator.response(_response_frame(0, 3, 1, MetadataResponse()))
    assert info.value.field_path == "ResponseHeader.correlation_id"
    with pytest.raises(DecodeError):
        correlator.response(b"\x00\x00")


def test_correlator_acks_zero_produce_not_pending():
    correlator = Correlator()
    data = correlator.request(ProduceRequest(acks=0, timeout_ms=10), 9)
    assert decode_request(data[4:])[1].acks == 0
    assert correlator.pending == 0
    correlator.request(ProduceRequest(acks=1, timeout_ms=10), 9)
    correlator.request(ProduceRequest(acks=-1, timeout_ms=10), 9)
    assert correlator.pending == 2
    # The next correlation id still advances past the acks=0 request.
    data = correlator.request(MetadataRequest(topics=[]), 1)
    assert decode_request(data[4:])[0].correlation_id == 3


def test_correlator_ids_wrap_at_int32():
    correlator = Correlator(first_correlation_id=0x7FFFFFFF)
    a = correlator.request(MetadataRequest(topics=[]), 1)
    b = correlator.request(MetadataRequest(topics=[]), 1)
    assert decode_request(a[4:])[0].correlation_id == 0x7FFFFFFF
    assert decode_request(b[4:])[0].correlation_id == 0


# ---------------------------------------------------------------------------------------------------
# Registry and header versions


def test_registry_lookups():
    fetch = api(1)
    assert api("Fetch") is fetch
    assert api("FetchRequest") is fetch
    assert api("FetchResponse") is fetch
    assert api("fetch") is fetch
    assert fetch.key == 1 and fetch.name == "Fetch"
    assert fetch.request_class is FetchRequest and fetch.response_class is FetchResponse
    assert fetch.valid_versions == (4, 19)  # Kafka 4.3's 4-18, and v19 from the KIP-1178 overlay
    assert fetch.flexible_versions == (12, 32767)
    assert fetch.supports(19) and not fetch.supports(20) and not fetch.supports(3) and not fetch.supports(-1)
    for missing in (999, "Nope", "NopeRequest", -1):
        with pytest.raises(KeyError):
            api(missing)


def test_header_version_functions():
    fetch, api_versions = api("Fetch"), api("ApiVersions")
    assert [fetch.request_header_version(v) for v in (4, 11, 12, 19)] == [1, 1, 2, 2]
    assert [fetch.response_header_version(v) for v in (4, 11, 12, 19)] == [0, 0, 1, 1]
    assert [api_versions.request_header_version(v) for v in (0, 2, 3, 4)] == [1, 1, 2, 2]
    assert [api_versions.response_header_version(v) for v in (0, 2, 3, 4)] == [0, 0, 0, 0]


@pytest.mark.parametrize("name,key", [("ControlledShutdown", 7), ("LeaderAndIsr", 4), ("StopReplica", 5),
                                      ("UpdateMetadata", 6)])
def test_removed_apis_are_known_and_refused(name, key):
    """Kafka 4 removed these (their specs say validVersions none): the registry names them, with no versions,
    and a request frame of one is a DecodeError saying so."""
    info = api(name)
    assert info is api(key) and info.removed and not info.supports(0) and info.min_version > info.max_version
    assert key not in [a.key for a in apis()] and key in [a.key for a in apis(include_removed=True)]
    frame_bytes = struct.pack(">hhih", key, 0, 7, -1)
    with pytest.raises(DecodeError, match=f"{name} \\(API key {key}\\) was removed"):
        decode_request(frame_bytes)


def test_header_versions_follow_flexible_versions_for_every_api():
    for info in apis():
        request_flexible = info.request_class.FLEXIBLE_VERSIONS
        response_flexible = info.response_class.FLEXIBLE_VERSIONS
        for version in range(info.min_version, info.max_version + 1):
            flexible = request_flexible is not None and version >= request_flexible[0]
            expected = 2 if flexible else 1
            assert info.request_header_version(version) == expected, (info.name, version)
            flexible = response_flexible is not None and version >= response_flexible[0]
            expected = 0 if info.key == 18 else (1 if flexible else 0)
            assert info.response_header_version(version) == expected, (info.name, version)


# Valid and flexible-from versions of common APIs in Kafka 4.3 (Fetch: plus kafkawire's v19).
COMMON_APIS = {
    0: ("Produce", 3, 13, 9), 1: ("Fetch", 4, 19, 12), 2: ("ListOffsets", 1, 11, 6), 3: ("Metadata", 0, 13, 9),
    8: ("OffsetCommit", 2, 10, 8), 9: ("OffsetFetch", 1, 10, 6), 10: ("FindCoordinator", 0, 6, 3),
    11: ("JoinGroup", 0, 9, 6), 12: ("Heartbeat", 0, 4, 4), 13: ("LeaveGroup", 0, 5, 4), 14: ("SyncGroup", 0, 5, 4),
    15: ("DescribeGroups", 0, 6, 5), 16: ("ListGroups", 0, 5, 3), 17: ("SaslHandshake", 0, 1, None),
    18: ("ApiVersions", 0, 4, 3), 22: ("InitProducerId", 0, 6, 2), 23: ("OffsetForLeaderEpoch", 2, 4, 4),
    36: ("SaslAuthenticate", 0, 2, 2),
}


@pytest.mark.parametrize("key", sorted(COMMON_APIS))
def test_common_api_versions(key):
    name, low, high, flexible_from = COMMON_APIS[key]
    info = api(key)
    assert info.name == name
    assert info.valid_versions == (low, high)
    assert (info.flexible_versions[0] if info.flexible_versions else None) == flexible_from
    assert (info.response_flexible_versions[0] if info.response_flexible_versions else None) == flexible_from


def test_header_classes():
    assert RequestHeader.VALID_VERSIONS == (1, 2)  # v0 went with ControlledShutdown v0
    assert ResponseHeader.VALID_VERSIONS == (0, 1)
    assert len(apis()) == 89 and len(apis(include_removed=True)) == 93
    assert [a.key for a in apis()] == sorted(a.key for a in apis())


class _Slice:
    """Stands for fetched records kept out of memory (as the broker's file slices are): only len()."""

    def __init__(self, data: bytes):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_response_parts_keep_records_pieces_and_join_to_the_frame(version):
    records = [b"\x00" * 70, b"\x01" * 300]
    body = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", topic_id=uuid.UUID(int=5), partitions=[
            FetchResponse.PartitionData(partition_index=i, high_watermark=9, records=r)
            for i, r in enumerate(records)])])
    whole = encode_response(FetchResponse.API_KEY, version, 41, body)
    parts = encode_response_parts(FetchResponse.API_KEY, version, 41, body)
    assert b"".join(parts) == whole
    assert [p for p in parts if any(p is r for r in records)] == records  # the same objects, not copies
    # The encoder takes only len() of a records value: a slice object works and lands in place.
    slices = [_Slice(r) for r in records]
    for data, piece in zip(body.responses[0].partitions, slices):
        data.records = piece
    parts = encode_response_parts(FetchResponse.API_KEY, version, 41, body)
    assert [p for p in parts if isinstance(p, _Slice)] == slices
    assert b"".join(p.data if isinstance(p, _Slice) else p for p in parts) == whole
    assert struct.unpack_from(">i", parts[0])[0] == len(whole) - 4

"""kafkawire.capture.tcp.tcp_reassembly and the Kafka layer (kafka_connection, kafka_framing, correlation, resync): TCP reassembly, Kafka framing, correlation and resync.

The captures are synthetic but the Kafka bytes are real: requests from ``Correlator``, responses from
``encode_response``, cut into TCP segments with chosen sequence numbers (some near the 2**32 wrap), then
reordered, duplicated, corrupted, cut short or started late.
"""
from __future__ import annotations

import random
import struct
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.capture_talk import BROKER, CLIENT, CONNECTION, WRAP, Message, Segment, Talk, packets, segments
from kafkawire.capture.kafka.kafka_connection import Conversation, decode_connection, detect_broker_ports
from kafkawire.capture.model import (
    ACK, FIN, RST, SYN, ConnectionSummary, KafkaFrame, Problem, StreamData, StreamEnd, StreamGap,
)
from kafkawire.capture.tcp.tcp_reassembly import ConnectionOpen, StreamConflict, TcpReassembler
from kafkawire.framing import frame
from kafkawire.messages import (
    ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse,
)

# ---------------------------------------------------------------------------------------------------
# Building conversations and captures


def _records(size: int, seed: int) -> bytes:
    """Binary filler with plenty of zero bytes, like real record batches."""
    raw = random.Random(seed).randbytes(size)
    return raw.translate(bytes(b if b >= 128 else 0 for b in range(256)))


def _produce(acks: int, records: bytes, transactional_id=None) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=1000, transactional_id=transactional_id, topic_data=[
        ProduceRequest.TopicProduceData(name="events", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records)])])


def _fetch_response(records: bytes) -> FetchResponse:
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="events", partitions=[
        FetchResponse.PartitionData(partition_index=0, high_watermark=43, records=records)])])


FETCH = FetchRequest(max_wait_ms=500, min_bytes=1, topics=[FetchRequest.FetchTopic(topic="events", partitions=[
    FetchRequest.FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1 << 20)])])


def standard_talk(big: int = 60_000, seed: int = 0) -> Talk:
    """ApiVersions, Metadata, Produce (acks=1, acks=0, transactional acks=-1), Fetch, Metadata again."""
    talk = Talk()
    talk.request(ApiVersionsRequest(client_software_name="kw", client_software_version="1"), 3,
                 ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=0, min_version=0,
                                                                              max_version=11)]))
    talk.request(MetadataRequest(topics=None), 12, MetadataResponse())
    talk.request(_produce(1, _records(big, seed)), 9, ProduceResponse())
    talk.request(_produce(0, _records(3000, seed + 1)), 9)  # acks=0: no response
    talk.request(_produce(-1, _records(5000, seed + 2), transactional_id="tx-1"), 3, ProduceResponse())
    talk.request(FETCH, 12, _fetch_response(_records(big, seed + 3)))
    talk.request(MetadataRequest(topics=[]), 1, MetadataResponse())
    return talk


def decode(segs: list[Segment], broker_ports=frozenset({9092}), **options):
    events = list(decode_connection(packets(segs), set(broker_ports), **options))
    frames = [e for e in events if isinstance(e, KafkaFrame)]
    problems = [e for e in events if isinstance(e, Problem)]
    return frames, problems


def summary(frames: list[KafkaFrame]) -> list[tuple]:
    return [(f.direction, f.correlation_id, f.api_key, f.api_version, f.frame) for f in frames]


def expected(messages: list[Message]) -> list[tuple]:
    return [(m.direction, m.correlation_id, m.api_key, m.api_version, m.data[4:]) for m in messages]


def by_direction(rows: list[tuple]) -> tuple[list, list]:
    return [r for r in rows if r[0] == "request"], [r for r in rows if r[0] == "response"]


def assert_frames(frames: list[KafkaFrame], messages: list[Message]) -> None:
    """The same frames in each direction, every response paired with its request."""
    assert by_direction(summary(frames)) == by_direction(expected(messages))
    for f in frames:
        if f.direction == "response":
            assert f.request is not None and f.request.correlation_id == f.correlation_id
            assert f.request.api_key == f.api_key and f.request.api_version == f.api_version


def kinds(problems: list[Problem]) -> list[str]:
    return [p.kind for p in problems]


# ---------------------------------------------------------------------------------------------------
# Clean captures


@pytest.mark.parametrize("client_isn,broker_isn", [(1000, 7_000_000), (WRAP - 5000, WRAP - 70_000),
                                                   (WRAP - 1, WRAP - 2)])
@pytest.mark.parametrize("mss", [1448, 65536, 7])
def test_clean_capture_gives_every_frame(client_isn, broker_isn, mss):
    talk = standard_talk()
    frames, problems = decode(segments(talk.messages, mss, client_isn, broker_isn))
    assert problems == []
    assert_frames(frames, talk.messages)
    # What the frames say about themselves.
    requests = [f for f in frames if f.direction == "request"]
    assert all(f.client_id == "test-client" for f in requests)
    assert all(f.client == "10.0.0.1:50000" and f.broker == "10.0.0.2:9092" for f in frames)
    offset = 0
    for f in requests:
        assert f.offset == offset and f.size == len(f.frame)
        offset += 4 + f.size
    assert all(f.ts_ns <= f.end_ts_ns for f in frames)


def test_roles_from_the_syn_without_broker_ports():
    talk = standard_talk()
    frames, problems = decode(segments(talk.messages), broker_ports=())
    assert problems == []
    assert_frames(frames, talk.messages)


def test_roles_from_request_headers_without_syn_or_ports():
    talk = standard_talk()
    frames, problems = decode(segments(talk.messages, syn=False), broker_ports=())
    # Without a SYN the first bytes are not known to start the stream: both directions say so.
    assert kinds(problems) == ["gap", "gap"]
    assert all("middle of the stream" in p.reason for p in problems)
    assert_frames(frames, talk.messages)


def test_response_header_v1_and_api_versions_header_v0():
    talk = standard_talk()
    frames, _ = decode(segments(talk.messages))
    fetch = next(f for f in frames if f.direction == "response" and f.api_key == 1)
    api_versions = next(f for f in frames if f.direction == "response" and f.api_key == 18)
    assert fetch.frame[4] == 0          # flexible: an empty tag section after the correlation id
    assert api_versions.api_version == 3 and api_versions.frame[4:6] == b"\x00\x00"  # error code right away


def test_acks_zero_produce_expects_no_response():
    talk = Talk()
    for n in range(3):
        talk.request(_produce(0, _records(100, n)), 9)
    talk.request(_produce(0, _records(100, 9), transactional_id="t"), 7)
    talk.request(_produce(0, _records(100, 9)), 3)
    talk.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    frames, problems = decode(segments(talk.messages))
    assert problems == []
    assert_frames(frames, talk.messages)


def test_requests_in_flight_when_the_capture_ends():
    talk = standard_talk()
    talk.request(FETCH, 12)  # a long poll still waiting when tcpdump stopped
    frames, problems = decode(segments(talk.messages, fin=False))
    assert kinds(problems) == ["unanswered_request"]
    assert problems[0].correlation_id == talk.messages[-1].correlation_id
    assert problems[0].reason == "capture ended before the response"


def test_requests_unanswered_when_the_connection_closes():
    talk = standard_talk()
    talk.request(FETCH, 12)
    frames, problems = decode(segments(talk.messages, fin=True))
    assert kinds(problems) == ["unanswered_request"]
    assert problems[0].reason == "connection closed before the response"


def test_a_reset_after_the_clients_fin_ends_the_brokers_direction_too():
    talk = standard_talk()
    talk.request(FETCH, 12)  # sent, then the client closes and resets before the answer
    segs = segments(talk.messages, fin=False)
    client_end = max(seg.seq + len(seg.payload) for seg in segs if seg.sender == CLIENT and seg.payload)
    segs += [Segment(CLIENT, client_end % WRAP, FIN | ACK), Segment(CLIENT, (client_end + 1) % WRAP, RST)]
    frames, problems = decode(segs)
    assert kinds(problems) == ["unanswered_request"]
    assert problems[0].reason == "connection reset before the response"


# ---------------------------------------------------------------------------------------------------
# Reordering, duplication, retransmission


def test_reordered_segments_give_the_same_frames():
    talk = standard_talk()
    segs = segments(talk.messages)
    rng = random.Random(7)
    for i in range(2, len(segs) - 3, 3):  # swap neighbours here and there
        if rng.random() < 0.5:
            segs[i], segs[i + 1] = segs[i + 1], segs[i]
    frames, problems = decode(segs)
    assert problems == []
    assert_frames(frames, talk.messages)


def test_duplicates_and_overlapping_retransmissions_are_dropped():
    talk = standard_talk()
    segs = segments(talk.messages, 1000)
    data_segs = [s for s in segs if s.payload]
    out = list(segs)
    # An exact duplicate, and a retransmission that spans two segments with different boundaries.
    out.insert(10, replace(data_segs[5]))
    a, b = data_segs[20], data_segs[21]
    assert b.seq == (a.seq + len(a.payload)) % WRAP
    out.insert(40, Segment(a.sender, (a.seq + 300) % WRAP, ACK, a.payload[300:] + b.payload[:500]))
    frames, problems = decode(out)
    assert problems == []
    assert_frames(frames, talk.messages)


def test_conflicting_retransmission_is_a_problem_and_the_first_bytes_win():
    talk = standard_talk()
    segs = segments(talk.messages)
    index = next(i for i, s in enumerate(segs) if s.payload and len(s.payload) == 1448 and i > 8)
    original = segs[index]
    forged = bytearray(original.payload)
    forged[100:110] = bytes(10)
    forged[100] ^= 0xFF
    segs.insert(index + 3, replace(original, payload=bytes(forged)))
    frames, problems = decode(segs)
    assert kinds(problems) == ["retransmission_conflict"]
    assert problems[0].direction == ("request" if original.sender == CLIENT else "response")
    assert problems[0].length == 1448
    assert_frames(frames, talk.messages)


def test_response_framed_before_its_request_is_held_and_matched():
    """The request's first segment arrives last: its response is framed before the request."""
    talk = Talk()
    talk.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    segs = segments(talk.messages, 10, fin=False)
    first_request = next(i for i, s in enumerate(segs) if s.payload)
    moved = segs.pop(first_request)
    segs.append(moved)
    frames, problems = decode(segs)
    assert problems == []
    assert_frames(frames, talk.messages)


# ---------------------------------------------------------------------------------------------------
# Loss and resync


def _drop(segs: list[Segment], predicate) -> list[Segment]:
    return [s for s in segs if not predicate(s)]


def test_loss_inside_a_request_truncates_it_and_framing_continues():
    talk = standard_talk(big=60_000)
    segs = segments(talk.messages)
    produce = talk.messages[4]  # the 60 kB Produce request
    start = _stream_offset(talk.messages, 4)
    lost = [s for s in segs if s.sender == CLIENT and s.payload
            and start + 5000 <= _offset(s, 1001) < start + 8000]
    segs = _drop(segs, lambda s: s in lost)
    frames, problems = decode(segs)
    assert kinds(problems) == ["gap", "truncated_frame", "unmatched_response"]
    gap, truncated, unmatched = problems
    assert gap.offset == _offset(lost[0], 1001) and gap.length == sum(len(s.payload) for s in lost)
    assert (truncated.api_key, truncated.api_version, truncated.correlation_id) == (0, 9, produce.correlation_id)
    assert truncated.offset == start and truncated.length == len(produce.data) - 4
    # Its response is recognised as the answer to the cut request, but cannot be decoded.
    assert unmatched.correlation_id == produce.correlation_id and unmatched.api_key == 0
    assert "cut by a capture gap" in unmatched.reason
    kept = [m for m in talk.messages if m is not produce and not (m.sender == BROKER and m.correlation_id ==
                                                                   produce.correlation_id)]
    good = [f for f in frames if f.api_key is not None]
    assert_frames(good, kept)
    assert [f.correlation_id for f in frames if f.api_key is None] == [produce.correlation_id]


def _stream_offset(messages: list[Message], index: int) -> int:
    sender = messages[index].sender
    return sum(len(m.data) for m in messages[:index] if m.sender == sender)


def _offset(seg: Segment, base: int) -> int:
    return (seg.seq - base) % WRAP


def test_loss_across_frame_boundaries_resyncs_requests_within_the_next_frame():
    talk = Talk()
    for n in range(8):
        talk.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=f"t{n}")]), 4,
                     MetadataResponse())
    # The client batches its requests: frames share segments and start inside them.
    requests = [m for m in talk.messages if m.sender == CLIENT]
    batch = [Message(CLIENT, b"".join(m.data for m in requests), -1, -1, -1)]
    segs = segments(batch + [m for m in talk.messages if m.sender == BROKER], 50)
    size = len(requests[0].data)
    assert size % 50 and 100 % size  # so that the gap starts and ends inside frames
    gap_start, gap_end = 100, 200
    segs = _drop(segs, lambda s: s.sender == CLIENT and s.payload and gap_start <= _offset(s, 1001) < gap_end)
    frames, problems = decode(segs)
    cut = gap_start // size
    resumed = -(-gap_end // size)  # the first request that starts after the gap
    got = [f.correlation_id for f in frames if f.direction == "request"]
    assert got == list(range(cut)) + list(range(resumed, 8))
    assert kinds(problems)[:3] == ["gap", "truncated_frame", "resync"]
    gap, truncated, resync = problems[:3]
    assert (gap.offset, gap.length) == (gap_start, gap_end - gap_start)
    assert truncated.correlation_id == cut and truncated.offset == cut * size
    assert (resync.offset, resync.length) == (gap_end, resumed * size - gap_end)
    # Responses: the one to the cut request is recognised, those to the lost ones have no request.
    rest = problems[3:]
    assert [p.kind for p in rest] == ["unmatched_response"] * (resumed - cut)
    assert "cut by a capture gap" in rest[0].reason
    matched = [f.correlation_id for f in frames if f.direction == "response" and f.request is not None]
    assert matched == got


def test_loss_inside_a_response_and_across_responses():
    talk = standard_talk(big=60_000)
    segs = segments(talk.messages)
    fetch_index = next(i for i, m in enumerate(talk.messages) if m.sender == BROKER and m.api_key == 1)
    fetch = talk.messages[fetch_index]
    start = _stream_offset(talk.messages, fetch_index)
    base = 7_000_001
    # Lose a segment in the middle of the Fetch response: its end is known, so nothing else is lost.
    lost = lambda s: s.sender == BROKER and s.payload and start + 20_000 <= _offset(s, base) < start + 21_000
    frames, problems = decode(_drop(segs, lost))
    assert kinds(problems) == ["gap", "truncated_frame"]
    assert (problems[1].api_key, problems[1].api_version, problems[1].correlation_id) == (1, 12, fetch.correlation_id)
    assert_frames(frames, [m for m in talk.messages if m is not fetch])


def test_response_loss_that_swallows_a_whole_response_resyncs_on_the_expected_id():
    talk = Talk()
    ids = [talk.request(MetadataRequest(topics=[]), 4) for _ in range(6)]   # pipelined requests
    for corr in ids:
        talk.respond(3, 4, corr, MetadataResponse(cluster_id=f"cluster-{corr}"))
    responses = b"".join(m.data for m in talk.messages if m.sender == BROKER)
    one = len(talk.messages[6].data)
    batch = [m for m in talk.messages if m.sender == CLIENT] + [Message(BROKER, responses, -1, -1, -1)]
    segs = segments(batch, 16)
    base = 7_000_001
    # Lose from the middle of response 1 to the middle of response 3.
    segs = _drop(segs, lambda s: s.sender == BROKER and s.payload and one + 10 <= _offset(s, base) < 3 * one + 10)
    frames, problems = decode(segs)
    matched = [f.correlation_id for f in frames if f.direction == "response"]
    assert matched == [0, 4, 5]
    assert kinds(problems) == ["gap", "truncated_frame", "resync", "unanswered_request", "unanswered_request"]
    assert problems[1].correlation_id == 1 and problems[1].api_key == 3
    gap, resync = problems[0], problems[2]
    assert resync.offset == gap.offset + gap.length and resync.offset + resync.length == 4 * one
    assert [p.correlation_id for p in problems[3:]] == [2, 3]
    assert "later request 4" in problems[3].reason


def test_mid_stream_start_recovers_from_the_next_frame():
    talk = standard_talk(big=30_000)
    segs = segments(talk.messages, syn=True)
    # The capture starts in the middle of the 30 kB Produce request (no SYN, no earlier segments).
    produce_start = _stream_offset(talk.messages, 4)
    first = next(i for i, s in enumerate(segs) if s.sender == CLIENT and s.payload
                 and _offset(s, 1001) >= produce_start + 10_000)
    frames, problems = decode(segs[first:])
    assert sorted(kinds(problems)) == ["gap", "gap", "resync", "resync"]
    requests = [f.correlation_id for f in frames if f.direction == "request"]
    assert requests == [m.correlation_id for m in talk.messages[6:] if m.sender == CLIENT]
    # The responses before the first captured request are skipped, the rest matched.
    responses = [f for f in frames if f.direction == "response"]
    assert [f.correlation_id for f in responses] == [m.correlation_id for m in talk.messages[7:]
                                                     if m.sender == BROKER]
    assert all(f.request is not None for f in responses)
    assert "unmatched_response" not in kinds(problems)


def test_snap_length_truncates_large_frames_and_keeps_small_ones():
    talk = standard_talk(big=20_000)
    segs = segments(talk.messages, 1448)
    snapped = [replace(s, payload=s.payload[:400], missing=len(s.payload) - 400) if len(s.payload) > 400 else s
               for s in segs]
    frames, problems = decode(snapped)
    gaps = [p for p in problems if p.kind == "gap"]
    assert gaps and all("snap length" in p.reason for p in gaps)
    cut = {(m.direction, m.correlation_id) for m in talk.messages if len(m.data) > 400}
    truncated = {(p.direction, p.correlation_id) for p in problems if p.kind == "truncated_frame"}
    assert truncated == cut
    # Small frames come through; a small response to a cut request is recognised but not decoded.
    cut_requests = {corr for direction, corr in cut if direction == "request"}
    whole = [m for m in talk.messages if len(m.data) <= 400 and m.correlation_id not in cut_requests]
    assert_frames([f for f in frames if f.api_key is not None], whole)
    orphans = [m.correlation_id for m in talk.messages if m.sender == BROKER and m.correlation_id in cut_requests
               and len(m.data) <= 400]
    assert [p.correlation_id for p in problems if p.kind == "unmatched_response"] == orphans
    assert "resync" not in kinds(problems)


def test_oversized_size_prefix_resyncs():
    talk = Talk()
    for _ in range(4):
        talk.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    requests = [m for m in talk.messages if m.sender == CLIENT]
    garbage = Message(CLIENT, b"\x7f\x00\x00\x00" + b"\x01" * 50, -1, -1, -1)
    stream = requests[:2] + [garbage] + requests[2:]
    frames, problems = decode(segments(stream + [m for m in talk.messages if m.sender == BROKER]))
    assert kinds(problems) == ["oversized_frame", "resync"]
    assert problems[1].length == 50
    assert_frames(frames, talk.messages)


# ---------------------------------------------------------------------------------------------------
# Not Kafka (SASL and TLS: test_capture_security.py)


def test_http_on_the_port_is_not_kafka():
    segs = segments([Message(CLIENT, b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n", -1, -1, -1),
                     Message(BROKER, b"HTTP/1.1 400 Bad Request\r\n\r\n", -1, -1, -1)])
    for ports in ({9092}, ()):
        frames, problems = decode(segs, broker_ports=ports)
        assert frames == [] and kinds(problems) == ["not_kafka"]


# ---------------------------------------------------------------------------------------------------
# Connection reuse


def test_four_tuple_reuse_starts_a_new_epoch():
    first, second = standard_talk(seed=1), standard_talk(seed=2)  # correlation ids restart at 0
    segs = segments(first.messages, client_isn=1000, broker_isn=5000, fin=True)
    segs += segments(second.messages, client_isn=900_000_000, broker_isn=3_000_000_000, fin=True)
    frames, problems = decode(segs)
    assert problems == []
    assert_frames(frames, first.messages + second.messages)
    second_requests = [f for f in frames if f.direction == "request"][len(by_direction(expected(first.messages))[0]):]
    assert second_requests[0].offset == 0


def test_reuse_without_fin_ends_the_old_epoch():
    first, second = Talk(), Talk()
    first.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    first.request(FETCH, 12)  # never answered: the client vanished and its port was reused
    second.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    segs = segments(first.messages, fin=False) + segments(second.messages, client_isn=123_456_789,
                                                          broker_isn=987_654_321)
    frames, problems = decode(segs)
    assert kinds(problems) == ["unanswered_request"]
    assert problems[0].correlation_id == 1 and "reused" in problems[0].reason
    assert_frames(frames, first.messages + second.messages)


# ---------------------------------------------------------------------------------------------------
# The reassembler on its own


def _reassemble(segs: list[Segment], **options) -> list:
    reassembler = TcpReassembler(**options)
    events = []
    for packet in packets(segs):
        events += reassembler.feed(packet)
    return events + reassembler.finish()


def _stream(events, sender=CLIENT) -> bytes:
    name = f"{sender[0]}:{sender[1]}"
    return b"".join(bytes(e.data) for e in events if isinstance(e, StreamData) and e.sender == name)


def test_reassembler_unwraps_sequence_numbers_and_passes_payloads_through():
    data = bytes(range(256)) * 40
    segs = segments([Message(CLIENT, data, -1, -1, -1)], 1000, client_isn=WRAP - 2500)
    events = _reassemble(segs)
    assert isinstance(events[0], ConnectionOpen) and events[0].client == "10.0.0.1:50000"
    pieces = [e for e in events if isinstance(e, StreamData)]
    assert [e.offset for e in pieces] == list(range(0, len(data), 1000))
    assert _stream(events) == data
    # In-order payloads are handed on as they are, not copied or joined.
    assert all(p.data is s.payload for p, s in zip(pieces, [s for s in segs if s.payload]))
    ends = [e for e in events if isinstance(e, StreamEnd)]
    assert [(e.reason, e.offset) for e in ends] == [("FIN", len(data)), ("FIN", 0)]


def test_reassembler_gives_up_on_a_hole_at_its_bounds():
    data = bytes(range(256)) * 100
    segs = segments([Message(CLIENT, data, -1, -1, -1)], 1000, fin=False)
    segs = [s for s in segs if not (s.payload and s.seq == 1001 + 3000)]
    events = _reassemble(segs, max_buffer=5000)
    gaps = [e for e in events if isinstance(e, StreamGap)]
    assert [(g.offset, g.length, g.reason) for g in gaps] == [(3000, 1000, "lost segment")]
    # It gave up as soon as more than 5000 bytes waited, not at the end.
    gap_at = events.index(gaps[0])
    assert any(isinstance(e, StreamData) for e in events[gap_at + 1:-1])
    assert _stream(events) == data[:3000] + data[4000:]


def test_reassembler_time_bound():
    data = bytes(range(256)) * 20
    segs = segments([Message(CLIENT, data, -1, -1, -1)], 1000, fin=False)
    segs = [s for s in segs if not (s.payload and s.seq == 1001)]
    events = _reassemble(segs, max_hole_ns=2500)  # packets are 1000 ns apart
    gaps = [e for e in events if isinstance(e, StreamGap)]
    assert [(g.offset, g.length) for g in gaps] == [(0, 1000)]
    assert _stream(events) == data[1000:]


def test_reassembler_reports_conflicts_against_buffered_segments_too():
    segs = [Segment(CLIENT, 1000, SYN), Segment(CLIENT, 1001 + 10, ACK, b"B" * 10),
            Segment(CLIENT, 1001 + 5, ACK, b"c" * 10), Segment(CLIENT, 1001, ACK, b"A" * 10)]
    events = _reassemble(segs)
    conflicts = [e for e in events if isinstance(e, StreamConflict)]
    assert [(c.offset, c.length, c.differing) for c in conflicts] == [(10, 5, 5), (5, 5, 5)]
    assert _stream(events) == b"A" * 5 + b"c" * 5 + b"B" * 10  # in capture order, first wins


def test_reassembler_ignores_keep_alive_probes():
    segs = [Segment(CLIENT, 1000, SYN), Segment(CLIENT, 1001, ACK, b"abc"), Segment(CLIENT, 1003, ACK, b"\x00"),
            Segment(CLIENT, 1004, ACK, b"def")]
    events = _reassemble(segs)
    assert not any(isinstance(e, StreamConflict) for e in events)
    assert _stream(events) == b"abcdef"


def test_reassembler_mid_stream_start_and_data_before_it():
    segs = [Segment(CLIENT, 5000, ACK, b"b" * 10), Segment(CLIENT, 4990, ACK, b"a" * 10),
            Segment(CLIENT, 5010, ACK | FIN, b"c" * 10)]
    events = _reassemble(segs)
    assert isinstance(events[0], StreamGap) and events[0].reason == "mid-stream start"
    assert _stream(events) == b"b" * 10 + b"c" * 10  # bytes before the first seen are not invented
    assert isinstance(events[-1], StreamEnd) and events[-1].offset == 20


def test_reassembler_fin_waits_for_the_hole_and_rst_flushes():
    segs = [Segment(CLIENT, 1000, SYN), Segment(CLIENT, 1011, ACK | FIN, b"b" * 10), Segment(CLIENT, 1001, ACK,
                                                                                              b"a" * 10)]
    events = _reassemble(segs)
    assert [type(e).__name__ for e in events] == ["ConnectionOpen", "StreamData", "StreamData", "StreamEnd"]
    assert events[-1].reason == "FIN" and events[-1].offset == 20
    segs = [Segment(CLIENT, 1000, SYN), Segment(CLIENT, 1011, ACK, b"b" * 10), Segment(CLIENT, 1030, RST)]
    events = _reassemble(segs)
    assert [type(e).__name__ for e in events] == ["ConnectionOpen", "StreamGap", "StreamData", "StreamEnd"]
    assert events[-1].reason == "RST"


def test_reassembler_sequence_jump_is_a_new_epoch():
    segs = [Segment(CLIENT, 1000, SYN), Segment(CLIENT, 1001, ACK, b"a" * 10),
            Segment(CLIENT, 1001 + (1 << 31) + 5, ACK, b"b" * 10)]
    events = _reassemble(segs)
    names = [(type(e).__name__, getattr(e, "reason", None)) for e in events]
    assert names == [("ConnectionOpen", None), ("StreamData", None), ("StreamEnd", "sequence jump"),
                     ("StreamGap", "mid-stream start"), ("StreamData", None), ("StreamEnd", "end of capture")]
    assert events[4].offset == 0


# ---------------------------------------------------------------------------------------------------
# Port detection and the streaming API


def test_detect_broker_ports():
    talk = standard_talk(big=2000)
    sample = packets(segments(talk.messages))
    assert detect_broker_ports(sample) == {9092}
    assert detect_broker_ports(sample[:3]) == set()


def test_conversation_is_streaming():
    """Events go in one at a time; frames come out as soon as they are complete (and the connection's
    summary at the end)."""
    talk = Talk()
    talk.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    reassembler = TcpReassembler()
    conversation = Conversation(CONNECTION, {9092})
    outputs = []
    for packet in packets(segments(talk.messages, 10, fin=False)):
        for event in reassembler.feed(packet):
            outputs.append(conversation.feed(event))
    produced = [out for out in outputs if out]
    assert [[f.direction for f in out] for out in produced] == [["request"], ["response"]]
    [summary] = conversation.finish()
    assert isinstance(summary, ConnectionSummary) and (summary.requests, summary.responses) == (1, 1)
    assert (summary.client, summary.broker, summary.ts_ns) == ("10.0.0.1:50000", "10.0.0.2:9092", 0)
    assert summary.end_ts_ns == packets(segments(talk.messages, 10, fin=False))[-1].ts_ns


# ---------------------------------------------------------------------------------------------------
# Property: any segmentation, reordering within a window and duplication gives the original frames


_TALK = standard_talk(big=5000, seed=11)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), window=st.integers(1, 6), duplicates=st.floats(0, 0.3),
       isn=st.sampled_from([1000, WRAP - 3000, WRAP - 1]))
def test_property_segmentation_reordering_duplication(seed, window, duplicates, isn):
    rng = random.Random(seed)
    segs = segments(_TALK.messages, lambda left: rng.randint(1, min(left, 3000)), isn, (isn * 7) % WRAP)
    head, body = segs[:2], segs[2:]
    # Reorder: each segment may move up to ``window`` places later.
    keys = [i + rng.uniform(0, window) for i in range(len(body))]
    body = [s for _, s in sorted(zip(keys, body), key=lambda pair: pair[0])]
    out = head[:]
    for s in body:
        out.append(s)
        if s.payload and rng.random() < duplicates:
            out.insert(rng.randint(len(out) - min(window, len(out) - 2), len(out)), replace(s))
    frames, problems = decode(out)
    assert problems == []
    assert_frames(frames, _TALK.messages)


# ---------------------------------------------------------------------------------------------------
# Odd but legal traffic, one-sided captures


def test_unknown_api_key_is_still_a_frame_and_correlates():
    talk = Talk()
    talk.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    header = struct.pack(">hhih", 200, 3, 77, 3) + b"cli"
    talk.messages.append(Message(CLIENT, frame(header + b"body"), 77, 200, 3))
    talk.messages.append(Message(BROKER, frame(struct.pack(">i", 77) + b"answer"), 77, 200, 3))
    talk.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    frames, problems = decode(segments(talk.messages))
    assert problems == []
    assert_frames(frames, talk.messages)
    assert next(f for f in frames if f.api_key == 200).client_id == "cli"


def test_responses_without_requests_are_unmatched_within_bounds():
    talk = standard_talk(big=2000)
    broker_only = [s for s in segments(talk.messages) if s.sender == BROKER]
    events = []
    reassembler, conversation = TcpReassembler(), Conversation(CONNECTION, {9092}, max_held=2)
    for packet in packets(broker_only):
        for event in reassembler.feed(packet):
            events.append(conversation.feed(event))
    responses = [m for m in talk.messages if m.sender == BROKER]
    # With at most two held, the others were given up on while the capture was still being read.
    streamed = [e for out in events for e in out if isinstance(e, Problem)]
    assert len(streamed) == len(responses) - 2
    for event in reassembler.finish():
        events.append(conversation.feed(event))
    events.append(conversation.finish())
    everything = [e for out in events for e in out]
    unmatched = [e for e in everything if isinstance(e, Problem)]
    assert kinds(unmatched) == ["unmatched_response"] * len(responses)
    frames = [e for e in everything if isinstance(e, KafkaFrame)]
    assert [f.correlation_id for f in frames] == [m.correlation_id for m in responses]
    assert all(f.api_key is None and f.request is None for f in frames)


def test_requests_without_responses_are_bounded():
    talk = Talk()
    for _ in range(10):
        talk.request(MetadataRequest(topics=[]), 4, MetadataResponse())
    client_only = [s for s in segments(talk.messages) if s.sender == CLIENT]
    events = list(decode_connection(packets(client_only), {9092}, max_outstanding=3))
    problems = [e for e in events if isinstance(e, Problem)]
    assert kinds(problems) == ["unanswered_request"] * 10
    assert [p.correlation_id for p in problems] == list(range(10))
    assert "too many requests outstanding" in problems[0].reason
    assert problems[-1].reason == "capture ended before the response"  # the broker's side never closed


def test_reassembler_options_reach_decode_connection():
    talk = standard_talk(big=30_000)
    segs = segments(talk.messages, 1000, fin=False)
    lost = next(i for i, s in enumerate(segs) if s.sender == CLIENT and len(s.payload) == 1000 and i > 10)
    segs.pop(lost)
    small = list(decode_connection(packets(segs), {9092}, reassembler=TcpReassembler(max_buffer=2000)))
    gaps = [e for e in small if isinstance(e, Problem) and e.kind == "gap"]
    assert len(gaps) == 1
    # The gap was given up on long before the end of the capture, so frames after it came out before it.
    assert small.index(gaps[0]) < len(small) - 5

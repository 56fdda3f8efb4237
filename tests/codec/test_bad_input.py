"""Bad input: every decoder raises only kafkawire.DecodeError, in bounded time and memory.

For every generated message class and every valid version this takes valid encodings (the
default-constructed message, and a "rich" one with every field present at that version set to a
non-default value, arrays holding one element), then checks that every truncation, bit flips, random
bytes and trailing bytes are refused with DecodeError (a ValueError) and nothing else. Hand-made
cases check the field path and byte offset of the error, and the guards against hostile lengths.
Encode errors (UnsupportedVersionError, EncodeError) are checked at the end.
"""
from __future__ import annotations

import random
import re
import struct
import time
import tracemalloc
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkawire
import kafkawire.messages as messages
from codegen.parse import parse_directory
from kafkawire import DecodeError, EncodeError, UnsupportedVersionError

from support.paths import SCHEMAS
SPECS = {spec.name: spec for spec in parse_directory(SCHEMAS)}
PAIRS = [(name, version)
         for name in sorted(messages._MODULES)
         for version in range(messages.message_class(name).VALID_VERSIONS[0],
                              messages.message_class(name).VALID_VERSIONS[1] + 1)]
PAIR_IDS = [f"{name}-v{version}" for name, version in PAIRS]

# ---------------------------------------------------------------------------------------------------
# Building valid messages from the spec model


_VALUES = {
    "bool": True, "int8": 7, "int16": 300, "uint16": 40000, "int32": 70000, "uint32": 3_000_000_000,
    "int64": 1 << 40, "float64": 1.5, "uuid": uuid.UUID("0102030405060708090a0b0c0d0e0f10"),
    "string": "ab\u00e9", "bytes": b"xyz", "records": b"\x00\x01\x02\x03",
}


def _struct_fields(spec, struct_name):
    if struct_name == spec.name:
        return spec.fields
    return spec.structs()[struct_name].fields


def _value(spec, cls, field_type, version):
    kind = field_type.kind
    if kind == "array":
        return (_value(spec, cls, field_type.element, version),)
    if kind == "struct":
        return build(spec, getattr(cls, field_type.struct), field_type.struct, version)
    return _VALUES[kind]


def build(spec, cls, struct_name, version):
    """An instance of ``cls`` with every field present at ``version`` set to a non-default value."""
    kwargs = {}
    for f in _struct_fields(spec, struct_name):
        if version not in f.versions:
            continue
        kwargs[f.snake_name] = _value(spec, _top(spec), f.type, version)
    return cls(**kwargs)


def _top(spec):
    return messages.message_class(spec.name)


def rich(name, version):
    cls = messages.message_class(name)
    return build(SPECS[name], cls, name, version)


def nulls(name, version):
    """Top-level nullable fields set to None (where the version allows null)."""
    spec = SPECS[name]
    cls = messages.message_class(name)
    kwargs = {}
    for f in spec.fields:
        if version in f.versions and version in f.nullable_versions:
            kwargs[f.snake_name] = None
    return cls(**kwargs) if kwargs else None


_ENCODINGS: dict[tuple[str, int], list[bytes]] = {}


def encodings(name, version):
    """Valid encodings of the message at the version (default, rich, nulls), each checked to decode."""
    key = (name, version)
    if key not in _ENCODINGS:
        cls = messages.message_class(name)
        found = [cls().encode(version), rich(name, version).encode(version)]
        with_nulls = nulls(name, version)
        if with_nulls is not None:
            found.append(with_nulls.encode(version))
        _ENCODINGS[key] = found
    return _ENCODINGS[key]


_INTERNAL = re.compile(r"^[A-Z][A-Za-z]*(Error|Exception|Warning)\b")


def assert_not_internal(exc: DecodeError) -> None:
    """The decoder recognised the bad input, not just wrapped an internal failure (TypeError, NameError...)."""
    assert not _INTERNAL.match(exc.reason), f"internal error passed off as DecodeError: {exc}"


def decode_only_decode_error(cls, data, version, exact):
    """Decode; only DecodeError may come out. Returns the message or the error."""
    start = time.thread_time()  # CPU time: a hang spins, while a loaded machine only makes wall time longer
    try:
        result = cls.decode(data, version, exact=exact)
    except DecodeError as exc:
        assert isinstance(exc, ValueError)
        assert str(exc)  # renders
        assert_not_internal(exc)
        result = exc
    except Exception as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{cls.NAME} v{version}: {type(exc).__name__} instead of DecodeError for "
                    f"{bytes(data).hex()}: {exc}")
    elapsed = time.thread_time() - start
    assert elapsed < 1.0, f"{cls.NAME} v{version} took {elapsed:.2f} CPU-s on {bytes(data)[:64].hex()}"
    return result


# ---------------------------------------------------------------------------------------------------
# Every message, every version


@pytest.mark.parametrize("name,version", PAIRS, ids=PAIR_IDS)
def test_valid_encodings_decode(name, version):
    cls = messages.message_class(name)
    for data in encodings(name, version):
        message = cls.decode(data, version, exact=True)
        assert message.encode(version) == data


def _prefix_lengths(n: int) -> list[int]:
    if n <= 160:
        return list(range(n))
    rng = random.Random(n)
    return sorted(set(list(range(64)) + list(range(n - 32, n)) + rng.sample(range(64, n - 32), 64)))


@pytest.mark.parametrize("name,version", PAIRS, ids=PAIR_IDS)
def test_every_truncation_raises_decode_error(name, version):
    cls = messages.message_class(name)
    for data in encodings(name, version):
        for cut in _prefix_lengths(len(data)):
            prefix = data[:cut]
            for exact in (False, True):
                try:
                    cls.decode(prefix, version, exact=exact)
                except DecodeError as exc:
                    assert exc.path and exc.path[0] == name, (cut, exc.path)
                    assert_not_internal(exc)
                    assert exc.offset is None or 0 <= exc.offset <= cut, (cut, exc.offset, str(exc))
                except Exception as exc:  # noqa: BLE001
                    pytest.fail(f"{name} v{version} cut at {cut}/{len(data)}: {type(exc).__name__}: {exc}")
                else:
                    pytest.fail(f"{name} v{version}: a {cut}-byte prefix of a {len(data)}-byte message "
                                f"decoded (exact={exact})")


@pytest.mark.parametrize("name,version", PAIRS, ids=PAIR_IDS)
def test_trailing_bytes_with_exact(name, version):
    cls = messages.message_class(name)
    for data in encodings(name, version):
        for extra in (b"\x00", b"\xff\x00\x01"):
            with pytest.raises(DecodeError, match="trailing") as info:
                cls.decode(data + extra, version, exact=True)
            assert info.value.offset == len(data)
            assert info.value.path == [name]
            # Without exact the message decodes, and decode_from says where it ended.
            _, end = cls.decode_from(data + extra, version)
            assert end == len(data)


@pytest.mark.parametrize("name,version", PAIRS, ids=PAIR_IDS)
def test_bit_flips_only_decode_error(name, version):
    cls = messages.message_class(name)
    rng = random.Random(f"{name}/{version}")
    for data in encodings(name, version):
        if not data:
            continue
        nbits = len(data) * 8
        positions = range(nbits) if nbits <= 256 else rng.sample(range(nbits), 256)
        for bit in positions:
            flipped = bytearray(data)
            flipped[bit // 8] ^= 1 << (bit % 8)
            for exact in (False, True):
                decode_only_decode_error(cls, bytes(flipped), version, exact)
        # Whole bytes set to the nasty values of length prefixes.
        for index in rng.sample(range(len(data)), min(len(data), 24)):
            for nasty in (0x00, 0x7F, 0x80, 0xFF):
                mutated = bytearray(data)
                mutated[index] = nasty
                decode_only_decode_error(cls, bytes(mutated), version, True)


_PAIR_STRATEGY = st.sampled_from(PAIRS)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=_PAIR_STRATEGY, data=st.binary(max_size=96), exact=st.booleans())
def test_random_bytes_only_decode_error(pair, data, exact):
    name, version = pair
    cls = messages.message_class(name)
    decode_only_decode_error(cls, data, version, exact)
    decode_only_decode_error(cls, memoryview(bytearray(data)), version, exact)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=_PAIR_STRATEGY, draw=st.data())
def test_random_mutations_only_decode_error(pair, draw):
    name, version = pair
    cls = messages.message_class(name)
    data = draw.draw(st.sampled_from(encodings(name, version)))
    mutated = bytearray(data)
    for _ in range(draw.draw(st.integers(1, 4))):
        op = draw.draw(st.sampled_from(["flip", "set", "insert", "delete"]))
        if op == "insert" or not mutated:
            at = draw.draw(st.integers(0, len(mutated)))
            mutated[at:at] = draw.draw(st.binary(min_size=1, max_size=6))
            continue
        at = draw.draw(st.integers(0, len(mutated) - 1))
        if op == "flip":
            mutated[at] ^= 1 << draw.draw(st.integers(0, 7))
        elif op == "set":
            mutated[at] = draw.draw(st.integers(0, 255))
        else:
            del mutated[at:at + draw.draw(st.integers(1, 4))]
    decode_only_decode_error(cls, bytes(mutated), version, draw.draw(st.booleans()))


# ---------------------------------------------------------------------------------------------------
# Hand-made cases: field paths, offsets and the guards against hostile lengths


def _fetch_response(records=b"x" * 100):
    R = messages.FetchResponse
    return R(responses=[R.FetchableTopicResponse(topic="t", partitions=[
        R.PartitionData(partition_index=0, records=records)])])


def test_records_running_past_the_end_names_path_and_offset():
    data = _fetch_response().encode(12)
    # v12 layout: throttle(4) error(2) session(4) | responses count(1) | topic(1+1) | partitions count(1)
    # | partition 4+2+8+8+8 | aborted txns(1) | preferred replica(4) | records length uvarint(1) + 100.
    prefix_at = 10 + 1 + 2 + 1 + 30 + 1 + 4
    assert data[prefix_at] == 101
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(data[:-5], 12)
    exc = info.value
    assert exc.field_path == "FetchResponse.responses[0].partitions[0].records"
    assert exc.path == ["FetchResponse", "responses[0]", "partitions[0]", "records"]
    assert exc.offset in (prefix_at, prefix_at + 1)
    assert "runs past the end" in str(exc)
    assert str(exc).startswith("FetchResponse.responses[0].partitions[0].records: ")
    assert f"at byte {exc.offset}" in str(exc)


def test_records_path_in_second_topic_and_partition():
    R = messages.FetchResponse
    message = R(responses=[
        R.FetchableTopicResponse(topic="a", partitions=[R.PartitionData(records=b"1")]),
        R.FetchableTopicResponse(topic="b", partitions=[R.PartitionData(records=b"22"),
                                                        R.PartitionData(partition_index=1, records=b"z" * 50)]),
    ])
    data = message.encode(11)
    # Classic int32 records length: make the last one claim 1000 bytes.
    at = len(data) - 50 - 4
    assert struct.unpack_from(">i", data, at)[0] == 50
    bad = data[:at] + struct.pack(">i", 1000) + data[at + 4:]
    with pytest.raises(DecodeError) as info:
        R.decode(bad, 11)
    assert info.value.field_path == "FetchResponse.responses[1].partitions[1].records"
    assert info.value.offset in (at, at + 4)


def test_truncated_fixed_field_names_that_field():
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(b"\x00" * 5, 12)
    assert info.value.field_path == "FetchResponse.error_code"
    assert info.value.offset == 4
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(b"\x00" * 8, 12)
    assert info.value.field_path == "FetchResponse.session_id"
    assert info.value.offset == 6


def test_negative_length_non_nullable_string():
    data = bytearray(_fetch_response().encode(11))
    # v11: throttle(4) error(2) session(4) responses count(4) then the topic's int16 length.
    assert struct.unpack_from(">h", data, 14)[0] == 1
    for length in (-1, -2, -32768):
        struct.pack_into(">h", data, 14, length)
        with pytest.raises(DecodeError) as info:
            messages.FetchResponse.decode(bytes(data), 11)
        assert info.value.field_path == "FetchResponse.responses[0].topic"
        assert "negative" in info.value.reason
        assert info.value.offset in (14, 16)


def test_negative_length_non_nullable_compact_string():
    data = bytearray(_fetch_response().encode(12))
    assert data[11] == 2  # compact length of "t"
    data[11] = 0  # null
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(bytes(data), 12)
    assert info.value.field_path == "FetchResponse.responses[0].topic"


@pytest.mark.parametrize("count", [-1, -2, -(1 << 31)])
def test_negative_count_non_nullable_array(count):
    data = b"\x00" * 10 + struct.pack(">i", count)
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(data, 11)
    assert info.value.field_path == "FetchResponse.responses"
    assert info.value.offset in (10, 14)


def test_null_compact_non_nullable_array():
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(b"\x00" * 10 + b"\x00\x00", 12)
    assert info.value.field_path == "FetchResponse.responses"


@pytest.mark.parametrize("length", [-1, -2, -(1 << 31)])
def test_negative_length_non_nullable_bytes(length):
    with pytest.raises(DecodeError) as info:
        messages.SaslAuthenticateRequest.decode(struct.pack(">i", length), 0)
    assert info.value.field_path == "SaslAuthenticateRequest.auth_bytes"
    assert info.value.offset in (0, 4)
    with pytest.raises(DecodeError) as info:
        messages.SaslAuthenticateRequest.decode(b"\x00\x00", 2)  # compact null
    assert info.value.field_path == "SaslAuthenticateRequest.auth_bytes"


def _bounded(call):
    """Run ``call`` expecting DecodeError; return (error, peak traced bytes, CPU seconds)."""
    tracemalloc.start()
    start = time.thread_time()  # CPU time, as in decode_only_decode_error
    try:
        with pytest.raises(DecodeError) as info:
            call()
    finally:
        elapsed = time.thread_time() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return info.value, peak, elapsed


HUGE_COUNTS = [
    # (description, class, version, body, the field path the error names)
    ("int32 count 2**31-1 of structs", "FetchResponse", 11, b"\x00" * 10 + struct.pack(">i", (1 << 31) - 1),
     "FetchResponse.responses"),
    ("compact count 2**32-1 of structs", "FetchResponse", 12, b"\x00" * 10 + b"\xff\xff\xff\xff\x0f",
     "FetchResponse.responses"),
    ("compact count 2**32-2 of structs", "FetchResponse", 12, b"\x00" * 10 + b"\xfe\xff\xff\xff\x0f",
     "FetchResponse.responses"),
    ("compact count of []int32", "AlterPartitionReassignmentsRequest", 0,
     struct.pack(">i", 0) + b"\x02" + b"\x02a" + b"\x02" + struct.pack(">i", 0) + b"\xff\xff\xff\xff\x0f",
     "AlterPartitionReassignmentsRequest.topics[0].partitions[0].replicas"),
    ("int32 bytes length 2**31-1", "SaslAuthenticateRequest", 0, struct.pack(">i", (1 << 31) - 1),
     "SaslAuthenticateRequest.auth_bytes"),
    ("compact bytes length 2**32-2", "SaslAuthenticateRequest", 2, b"\xff\xff\xff\xff\x0f",
     "SaslAuthenticateRequest.auth_bytes"),
    ("tag count 2**32-1", "FetchResponse", 12, b"\x00" * 10 + b"\x01" + b"\xff\xff\xff\xff\x0f",
     "FetchResponse.tagged_fields"),
    ("tag size 2**32-1", "FetchResponse", 12, b"\x00" * 10 + b"\x01" + b"\x01\x05\xff\xff\xff\xff\x0f",
     "FetchResponse.tagged_fields"),
]


@pytest.mark.parametrize("what,name,version,body,path", HUGE_COUNTS, ids=[h[0] for h in HUGE_COUNTS])
def test_huge_counts_refused_without_allocation(what, name, version, body, path):
    cls = messages.message_class(name)
    exc, peak, elapsed = _bounded(lambda: cls.decode(body, version))
    assert peak < 4 * 1024 * 1024, f"{what}: peak {peak} bytes"
    assert elapsed < 1.0, f"{what}: {elapsed:.2f}s"
    assert exc.field_path == path
    assert exc.offset is not None and 0 <= exc.offset <= len(body)


def test_huge_count_inside_nested_array_names_path():
    R = messages.FetchResponse
    data = bytearray(R(responses=[R.FetchableTopicResponse(topic="t")]).encode(11))
    # v11: 10 fixed + responses count(4) + topic(2+1) + partitions count(4)
    at = 10 + 4 + 3
    assert struct.unpack_from(">i", data, at)[0] == 0
    struct.pack_into(">i", data, at, (1 << 31) - 1)
    exc, peak, elapsed = _bounded(lambda: R.decode(bytes(data), 11))
    assert exc.field_path == "FetchResponse.responses[0].partitions"
    assert exc.offset in (at, at + 4)
    assert peak < 4 * 1024 * 1024 and elapsed < 1.0


@pytest.mark.parametrize("varint", [b"\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80\x80\x00",
                                    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"])
def test_varint_longer_than_5_bytes(varint):
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(b"\x00" * 10 + varint + b"\x00" * 8, 12)
    assert info.value.field_path == "FetchResponse.responses"
    assert info.value.offset == 10
    assert "5 bytes" in info.value.reason


def test_varint_overflowing_32_bits():
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(b"\x00" * 10 + b"\xff\xff\xff\xff\x7f" + b"\x00" * 8, 12)
    assert info.value.field_path == "FetchResponse.responses"


def test_varint_running_past_the_end():
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(b"\x00" * 10 + b"\xff\xff", 12)
    assert info.value.field_path == "FetchResponse.responses"
    assert info.value.offset == 10


@pytest.mark.parametrize("bad", [b"\xff", b"\xc3\x28", b"a\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])
def test_invalid_utf8_in_string(bad):
    # v11: one topic whose int16-length name is ``bad``, no partitions.
    body = b"\x00" * 10 + struct.pack(">i", 1) + struct.pack(">h", len(bad)) + bad + struct.pack(">i", 0)
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(body, 11)
    assert info.value.field_path == "FetchResponse.responses[0].topic"
    assert info.value.offset in (14, 16)
    assert "UTF-8" in str(info.value)
    # The same in a compact string.
    body = b"\x00" * 10 + b"\x02" + bytes([len(bad) + 1]) + bad + b"\x01\x00" + b"\x00"
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(body, 12)
    assert info.value.field_path == "FetchResponse.responses[0].topic"


def test_string_longer_than_32767_refused():
    body = b"\x00" * 10 + b"\x02" + b"\x81\x80\x02" + b"a" * 0x8000 + b"\x01\x00\x00"
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(body, 12)
    assert info.value.field_path == "FetchResponse.responses[0].topic"


def test_tag_size_mismatch_for_known_tag():
    R = messages.FetchResponse
    message = R(responses=[R.FetchableTopicResponse(topic="t", partitions=[
        R.PartitionData(current_leader=R.LeaderIdAndEpoch(leader_id=1, leader_epoch=2))])])
    data = bytearray(message.encode(12))
    # The partition's tag section: count 1, tag 1, size 9, then 4+4+1 bytes.
    at = data.find(b"\x01\x01\x09\x00\x00\x00\x01\x00\x00\x00\x02\x00")
    assert at > 0
    data[at + 2] = 10  # declares one byte more than the value takes
    with pytest.raises(DecodeError) as info:
        R.decode(bytes(data), 12)
    assert info.value.path[:3] == ["FetchResponse", "responses[0]", "partitions[0]"]


@pytest.mark.parametrize("version", [-1, 3, 20, 100, 32767])
def test_unknown_version_is_decode_error(version):
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(b"\x00" * 64, version)
    assert isinstance(info.value, ValueError)
    assert info.value.path == ["FetchResponse"]
    assert str(version) in str(info.value)


@pytest.mark.parametrize("name", ["RequestHeader", "ResponseHeader", "ApiVersionsRequest", "ConsumerProtocolSubscription"])
def test_unknown_version_for_other_messages(name):
    cls = messages.message_class(name)
    with pytest.raises(DecodeError):
        cls.decode(b"", cls.VALID_VERSIONS[1] + 1)


def test_decode_accepts_bytearray_and_memoryview_slices():
    data = _fetch_response().encode(12)
    padded = b"\xee" * 3 + data + b"\xee"
    view = memoryview(padded)[3:-1]
    assert messages.FetchResponse.decode(view, 12, exact=True) == messages.FetchResponse.decode(data, 12)
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode(bytearray(data[:-5]), 12)
    assert info.value.field_path == "FetchResponse.responses[0].partitions[0].records"


def test_decode_from_reports_offsets_from_buffer_start():
    data = _fetch_response().encode(12)
    buf = b"\x00" * 7 + data[:-5]
    with pytest.raises(DecodeError) as info:
        messages.FetchResponse.decode_from(buf, 12, 7)
    assert info.value.field_path == "FetchResponse.responses[0].partitions[0].records"
    prefix_at = 7 + 10 + 1 + 2 + 1 + 30 + 1 + 4
    assert info.value.offset in (prefix_at, prefix_at + 1)


# ---------------------------------------------------------------------------------------------------
# Encode errors


def test_non_default_field_missing_from_version_raises_unsupported_version():
    F = messages.FetchRequest
    with pytest.raises(UnsupportedVersionError) as info:
        F(replica_state=F.ReplicaState(replica_id=5)).encode(4)
    assert info.value.path == ["FetchRequest", "replica_state"]
    assert isinstance(info.value, EncodeError) and isinstance(info.value, ValueError)
    # Nested, with array indexes in the path.
    R = messages.FetchResponse
    message = R(responses=[R.FetchableTopicResponse(topic="t", partitions=[
        R.PartitionData(), R.PartitionData(preferred_read_replica=5)])])
    with pytest.raises(UnsupportedVersionError) as info:
        message.encode(10)
    assert info.value.field_path == "FetchResponse.responses[0].partitions[1].preferred_read_replica"
    message.encode(11)  # the field exists from v11
    # A non-ignorable int at a version that lacks it (ReplicaId is 0-14; 15+ carries ReplicaState).
    with pytest.raises(UnsupportedVersionError) as info:
        F(replica_id=5).encode(15)
    assert info.value.field_path == "FetchRequest.replica_id"
    F(rack_id="r").encode(10)  # RackId (11+) is ignorable: dropped


def test_default_value_of_missing_field_is_fine():
    F = messages.FetchRequest
    assert F.decode(F(max_wait_ms=3).encode(4), 4) == F(max_wait_ms=3)


def test_ignorable_field_dropped_silently():
    F = messages.FetchRequest
    message = F(cluster_id="c", topics=[F.FetchTopic(topic="t", partitions=[
        F.FetchPartition(partition=1, remote_partition_max_bytes=7)])])
    data = message.encode(11)  # ClusterId (ignorable, 12+) dropped
    again = F.decode(data, 11)
    assert again.cluster_id is None
    data18 = message.encode(18)  # RemotePartitionMaxBytes (ignorable, 19+: KIP-1178's version) dropped
    again = F.decode(data18, 18)
    assert again.topics[0].partitions[0].remote_partition_max_bytes == 0
    assert again.cluster_id == "c"
    assert F.decode(message.encode(19), 19).topics[0].partitions[0].remote_partition_max_bytes == 7


def test_none_on_non_nullable_field_raises_encode_error():
    F = messages.FetchRequest
    with pytest.raises(EncodeError) as info:
        F(topics=None).encode(4)
    assert info.value.field_path == "FetchRequest.topics"
    with pytest.raises(EncodeError) as info:
        F(topics=[F.FetchTopic(topic=None)]).encode(12)
    assert info.value.field_path == "FetchRequest.topics[0].topic"
    # ClusterId is nullable from 12: None is fine there.
    F(cluster_id=None).encode(12)
    with pytest.raises(EncodeError) as info:
        messages.SaslAuthenticateRequest(auth_bytes=None).encode(0)
    assert info.value.field_path == "SaslAuthenticateRequest.auth_bytes"
    # A non-nullable struct, an array element, an int.
    with pytest.raises(EncodeError) as info:
        F(replica_state=None).encode(15)
    assert info.value.path[:2] == ["FetchRequest", "replica_state"]
    with pytest.raises(EncodeError) as info:
        F(topics=[None]).encode(15)
    assert info.value.path[:2] == ["FetchRequest", "topics[0]"]
    with pytest.raises(EncodeError) as info:
        F(max_wait_ms=None).encode(4)
    assert info.value.path[0] == "FetchRequest"


@pytest.mark.parametrize("field,value,version", [
    ("max_wait_ms", 1 << 31, 4),
    ("max_wait_ms", -(1 << 31) - 1, 12),
    ("isolation_level", 128, 4),
    ("session_epoch", 1 << 31, 12),
])
def test_out_of_range_int_names_the_field(field, value, version):
    F = messages.FetchRequest
    with pytest.raises(EncodeError) as info:
        F(**{field: value}).encode(version)
    assert not isinstance(info.value, UnsupportedVersionError)
    assert info.value.path == ["FetchRequest", field], info.value.path
    assert info.value.field_path == f"FetchRequest.{field}"


def test_out_of_range_int_in_nested_struct_names_the_field():
    F = messages.FetchRequest
    message = F(topics=[F.FetchTopic(topic="a", partitions=[F.FetchPartition(partition_max_bytes=1 << 40)])])
    with pytest.raises(EncodeError) as info:
        message.encode(4)
    assert info.value.field_path == "FetchRequest.topics[0].partitions[0].partition_max_bytes"


def test_out_of_range_lone_int_names_the_field():
    with pytest.raises(EncodeError) as info:
        messages.FetchResponse(responses=[messages.FetchResponse.FetchableTopicResponse(
            topic="t", partitions=[messages.FetchResponse.PartitionData(preferred_read_replica=1 << 31)])]).encode(11)
    assert "preferred_read_replica" in info.value.field_path


def test_unknown_tags_on_non_flexible_version_raise():
    F = messages.FetchRequest
    with pytest.raises(UnsupportedVersionError) as info:
        F(unknown_tags={5: b"x"}).encode(11)
    assert info.value.path[0] == "FetchRequest"
    assert "tag" in str(info.value).lower()
    F.decode(F(unknown_tags={5: b"x"}).encode(12), 12)  # fine where flexible
    # Nested.
    message = F(topics=[F.FetchTopic(topic="t", unknown_tags={9: b"\x01"})])
    with pytest.raises(UnsupportedVersionError) as info:
        message.encode(11)
    assert info.value.path[:2] == ["FetchRequest", "topics[0]"]


def test_unknown_tags_error_does_not_blame_an_unrelated_field():
    # The error is about the tag section, not about the last field written before it.
    F = messages.FetchRequest
    with pytest.raises(UnsupportedVersionError) as info:
        F(unknown_tags={5: b"x"}).encode(11)
    assert info.value.field_path in ("FetchRequest", "FetchRequest.unknown_tags",
                                     "FetchRequest.tagged_fields"), info.value.field_path


def test_writing_unknown_version_raises_unsupported_version():
    with pytest.raises(UnsupportedVersionError) as info:
        messages.FetchRequest().encode(20)
    assert info.value.path == ["FetchRequest"]
    with pytest.raises(UnsupportedVersionError):
        messages.FetchRequest().encode(3)  # removed by Kafka 4.0


def test_string_too_long_and_wrong_type_are_encode_errors():
    F = messages.FetchRequest
    with pytest.raises(EncodeError) as info:
        F(topics=[F.FetchTopic(topic="x" * 40000)]).encode(4)
    assert info.value.field_path == "FetchRequest.topics[0].topic"
    with pytest.raises(EncodeError) as info:
        F(topics=[F.FetchTopic(topic=5)]).encode(4)
    assert info.value.field_path == "FetchRequest.topics[0].topic"
    with pytest.raises(EncodeError):
        F(topics=[F.FetchTopic(topic="\ud800")]).encode(4)


def test_all_errors_are_value_errors():
    for cls in (kafkawire.DecodeError, kafkawire.EncodeError, kafkawire.UnsupportedVersionError):
        assert issubclass(cls, ValueError)
        assert issubclass(cls, kafkawire.KafkaWireError)

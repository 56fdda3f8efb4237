"""The native encoder (kafkawire/codec/_encoder.c) against the generated Python writers, its reference.

For every generated message (every API's request and response, the headers) and every valid version:
  - hypothesis-drawn messages (``kafkawire.testing.strategies.messages``: unknown tags, nulls, empty
    arrays, lengths at varint boundaries) encode to the same bytes natively and in Python, natively
    without falling back, and those bytes decode to an equal message;
  - a message drawn at one version and written at every other: the same bytes, or the same refusal
    (a non-default value in a field the version lacks, tags in a version without them);
  - malformed values put into each field (wrong types, ints out of range, strings that are not
    UTF-8-encodable or too long, bad unknown tags) raise the same error natively as in Python, or
    encode to the same bytes, and never crash.
Plus: large arrays and strings (multi-byte varint lengths), records values kept as pieces by
encode_parts, lazily defaulted struct fields, subclasses falling back, and KAFKAWIRE_PURE_PYTHON=1.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
import uuid

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.database import InMemoryExampleDatabase

import kafkawire.messages as messages
from kafkawire.codec import native
from kafkawire.codec.base import Message, Struct
from kafkawire.testing.strategies import messages as message_strategy
from kafkawire.testing.values import MessageValues

pytestmark = pytest.mark.skipif(not native.ENCODER_ACTIVE,
                                reason="native encoder not built, or KAFKAWIRE_PURE_PYTHON=1")

# Messages drawn per class and version (more with KAFKAWIRE_NATIVE_EXAMPLES).
EXAMPLES = int(os.environ.get("KAFKAWIRE_NATIVE_EXAMPLES", "2"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=InMemoryExampleDatabase(),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: the assertions name the message
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.large_base_example],
)

NAMES = sorted(messages._MODULES)


def _versions(cls) -> range:
    low, high = cls.VALID_VERSIONS
    return range(low, high + 1)


def _outcome(encode, message, version):
    """What encoding does: ("bytes", data) or ("error", type, text, path)."""
    try:
        return ("bytes", encode(message, version))
    except Exception as exc:  # noqa: BLE001 - any error must be the same on both paths
        return ("error", type(exc), str(exc), getattr(exc, "path", None))


def _native(message, version):
    return message.encode(version)


def assert_same_outcome(message, version, where: str) -> None:
    native_result = _outcome(_native, message, version)
    python_result = _outcome(native.python_encode, message, version)
    assert native_result == python_result, f"{where} v{version}: {message!r}"


@pytest.mark.parametrize("name", NAMES)
def test_native_writes_the_python_bytes(name):
    cls = messages.message_class(name)
    for version in _versions(cls):
        encoder = cls._ENCODERS[version]

        @SETTINGS
        @given(message_strategy(cls, version))
        def check(message):
            expected = native.python_encode(message, version)
            data = encoder.encode(message)
            assert data is not None, f"{name} v{version}: the native encoder fell back on {message!r}"
            assert data == expected, f"{name} v{version}: {message!r}"
            assert message.encode(version) == expected
            assert b"".join(message.encode_parts(version)) == expected
            assert cls.decode(data, version, exact=True) == message

        check()


@pytest.mark.parametrize("name", NAMES)
def test_other_versions_same_bytes_or_same_refusal(name):
    """A message drawn at one version, written at every other: the refusals of fields a version lacks."""
    cls = messages.message_class(name)
    versions = list(_versions(cls))
    rng = random.Random(name)
    for drawn_at in versions:
        message = MessageValues(rng, unknown_tags=0.5).message(cls, drawn_at)
        for version in versions:
            assert_same_outcome(message, version, f"{name} drawn at v{drawn_at}")


# ---------------------------------------------------------------------------------------------------
# Malformed values

_BAD_VALUES = [
    None, True, -1, 2**7, 2**15, -2**15 - 1, 2**16, 2**31, -2**31 - 1, 2**32, 2**63, -2**63 - 1, 1.5,
    float("nan"), "text", "\udc80", "x" * 40000, b"raw", bytearray(b"ra"), memoryview(b"abcd").cast("I"),
    [], [1, 2], (None,), {1: 2}, object(), uuid.UUID(int=2**128 - 1), iter([1]),
]


def _slots(obj: Struct):
    """(owner, attribute) of every field of ``obj`` and of the structs under it (an array's first)."""
    for attr in type(obj)._FIELDS + ("unknown_tags",):
        yield obj, attr
        value = getattr(obj, attr)
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], Struct):
            value = value[0]
        if isinstance(value, Struct):
            yield from _slots(value)


def _bad_values_for(value):
    if isinstance(value, dict) or value is None:
        yield from ({-1: b"x"}, {2**40: b""}, {1: "str"}, {1: 5}, {"a": b""}, [1], {}, {3: memoryview(b"ab")})
    yield from _BAD_VALUES


@pytest.mark.parametrize("name", NAMES)
def test_malformed_values_raise_the_python_errors(name):
    cls = messages.message_class(name)
    rng = random.Random(f"bad {name}")
    versions = list(_versions(cls))
    for version in sorted({versions[0], versions[len(versions) // 2], versions[-1]}):
        message = MessageValues(rng, null=0.0, max_items=1).message(cls, version)
        for owner, attr in list(_slots(message)):
            original = getattr(owner, attr)
            for bad in _bad_values_for(original):
                setattr(owner, attr, bad)
                assert_same_outcome(message, version, f"{name}: {type(owner).__name__}.{attr} = {bad!r:.40}")
            setattr(owner, attr, original)
        assert_same_outcome(message, version, name)


def test_arrays_of_fixed_values_with_bad_elements():
    cls = messages.message_class("ListGroupsRequest")
    for states in (["ok", 5], ["\udc80"], ("a",), [], None, ["a"] * 200):
        assert_same_outcome(cls(states_filter=states), 4, "states_filter")
    offsets = messages.message_class("OffsetForLeaderEpochRequest")
    assert_same_outcome(offsets(), 4, "default")
    describe = messages.message_class("DescribeConfigsRequest")
    resource = describe.DescribeConfigsResource(resource_type=2, resource_name="t",
                                                configuration_keys=None)
    assert_same_outcome(describe(resources=[resource]), 4, "nullable array")
    metadata = messages.message_class("MetadataResponse")
    partition = metadata.MetadataResponsePartition
    for replicas in ([1, 2**31], [1, "2"], [True, False], list(range(300)), (1, None)):
        topic = metadata.MetadataResponseTopic(name="t", partitions=[partition(replica_nodes=replicas)])
        for version in (0, 9, 12):
            assert_same_outcome(metadata(topics=[topic]), version, f"replica_nodes={replicas!r:.30}")


# ---------------------------------------------------------------------------------------------------
# Large values, pieces, lazily built defaults, subclasses


def test_large_arrays_and_strings():
    metadata = messages.message_class("MetadataResponse")
    partition = metadata.MetadataResponsePartition
    for count, length in ((0, 0), (127, 126), (128, 127), (1000, 16383), (3, 16384), (5000, 3)):
        topics = [metadata.MetadataResponseTopic(
            name="é" * (length // 4) if i == 0 else f"t{i}", topic_id=uuid.UUID(int=i),
            partitions=[partition(partition_index=p, replica_nodes=list(range(p))) for p in range(i % 4)])
            for i in range(count)]
        message = metadata(topics=topics, cluster_id="c" * length)
        for version in (1, 9, 12, 13):
            data = metadata._ENCODERS[version].encode(message)
            expected = native.python_encode(message, version)
            assert data is not None and data == expected, (count, length, version)


def test_records_stay_pieces_of_their_own():
    produce = messages.message_class("ProduceRequest")
    records = [b"r" * 100, bytearray(b"s" * 5), memoryview(b"0123456789")[2:7]]
    partitions = [produce.PartitionProduceData(index=i, records=r)
                  for i, r in enumerate(records)]
    request = produce(acks=1, timeout_ms=5, topic_data=[produce.TopicProduceData(name="t", partition_data=partitions)])
    for version in (3, 9, 12):
        parts = request.encode_parts(version)
        assert b"".join(parts) == native.python_encode(request, version)
        assert [part for part in parts if any(part is r for r in records)] == records


class _FileSlice:
    """Stands for a slice of a file: only its length is known (as the broker's FileRecords)."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


def test_records_without_a_buffer_are_pieces_and_fall_back_for_bytes():
    fetch = messages.message_class("FetchResponse")
    piece = _FileSlice(7)
    partition = fetch.PartitionData(partition_index=0, records=piece)
    response = fetch(responses=[fetch.FetchableTopicResponse(topic="t", partitions=[partition])])
    for version in (4, 12, 16):
        native_parts = response.encode_parts(version)
        python_parts = response._python_parts(version)
        assert piece in native_parts
        assert b"".join(p for p in native_parts if p is not piece) == b"".join(
            p for p in python_parts if p is not piece)
        assert_same_outcome(response, version, "a records value that is not a buffer")


def test_lazily_defaulted_struct_is_built_as_the_writer_builds_it():
    cls = messages.message_class("FetchRequest")
    message = cls()
    assert message.__getattribute__("_replica_state") is not None
    expected = native.python_encode(cls(), 15)
    assert cls._ENCODERS[15].encode(message) == expected


def test_subclass_falls_back_to_the_python_writer():
    cls = messages.message_class("ApiVersionsRequest")

    class Mine(cls):
        __slots__ = ()

    message = Mine(client_software_name="x")
    assert cls._ENCODERS[3].encode(message) is None
    assert message.encode(3) == native.python_encode(cls(client_software_name="x"), 3)


def test_every_program_compiles():
    for name in NAMES:
        cls = messages.message_class(name)
        assert sorted(cls._ENCODERS) == list(_versions(cls)), name
        for encoder in cls._ENCODERS.values():
            encoder.compile()


def test_pure_python_turns_the_native_encoder_off():
    code = ("from kafkawire.codec import native; from kafkawire.messages import message_class; "
            "assert not native.ENCODER_ACTIVE and message_class('MetadataResponse')._ENCODERS == {}")
    env = dict(os.environ, KAFKAWIRE_PURE_PYTHON="1")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def test_message_base_class_has_no_encoders():
    assert Message._ENCODERS == {}


# ---------------------------------------------------------------------------------------------------
# encode_into and frames written in one allocation


def test_encode_into_a_callers_buffer():
    cls = messages.message_class("MetadataResponse")
    message = MessageValues(random.Random(7)).message(cls, 12)
    expected = native.python_encode(message, 12)
    buf = bytearray(b"\xee" * (len(expected) + 10))
    assert message.encode_into(buf, 12, 3) == 3 + len(expected)
    assert buf[3:3 + len(expected)] == expected and buf[:3] == b"\xee" * 3 and buf[-7:] == b"\xee" * 7
    view = memoryview(bytearray(len(expected)))
    assert message.encode_into(view, 12) == len(expected) and view.tobytes() == expected
    with pytest.raises(ValueError, match="does not fit"):
        message.encode_into(bytearray(len(expected) - 1), 12)
    with pytest.raises(ValueError, match="does not fit"):
        message.encode_into(bytearray(len(expected) + 5), 12, -1)
    with pytest.raises(TypeError):
        message.encode_into(bytes(len(expected)), 12)


def test_encode_into_falls_back_with_the_python_error():
    cls = messages.message_class("MetadataResponse")
    message = cls(cluster_id="\udc80")
    with pytest.raises(Exception) as python_error:
        native.python_encode(message, 12)
    with pytest.raises(type(python_error.value)) as caught:
        message.encode_into(bytearray(100), 12)
    assert str(caught.value) == str(python_error.value)
    subclass_message = type("Mine", (cls,), {"__slots__": ()})(cluster_id="c")
    buf = bytearray(100)
    end = subclass_message.encode_into(buf, 12, 1)
    assert bytes(buf[1:end]) == native.python_encode(cls(cluster_id="c"), 12)


def _python_frame(header, header_version, body, version) -> bytes:
    payload = native.python_encode(header, header_version) + native.python_encode(body, version)
    return len(payload).to_bytes(4, "big", signed=True) + payload


def test_request_frames_match_the_python_writers():
    from kafkawire.framing import encode_request, request_header_class
    header_class = request_header_class()
    rng = random.Random(3)
    for api in messages.apis():
        for version in (api.min_version, api.max_version):
            body = MessageValues(rng).message(api.request_class, version)
            header = header_class(request_api_key=api.key, request_api_version=version, correlation_id=9,
                                  client_id="client")
            assert encode_request(header, body) == _python_frame(
                header, api.request_header_version(version), body, version), (api.name, version)


def test_response_frames_match_the_python_writers():
    from kafkawire.framing import encode_response, encode_response_parts, response_header_class
    rng = random.Random(4)
    for api in messages.apis():
        for version in (api.min_version, api.max_version):
            body = MessageValues(rng).message(api.response_class, version)
            header_version = api.response_header_version(version)
            tags = {5: b"t"} if header_version >= 1 else None
            header = response_header_class()(correlation_id=11, unknown_tags=tags)
            expected = _python_frame(header, header_version, body, version)
            assert encode_response(api.key, version, 11, body, tags) == expected, (api.name, version)
            parts = encode_response_parts(api.key, version, 11, body, tags)
            assert b"".join(parts) == expected, (api.name, version)


def test_response_parts_keep_file_slices_separate():
    from kafkawire.framing import encode_response, encode_response_parts
    fetch = messages.message_class("FetchResponse")
    slices = [_FileSlice(7), _FileSlice(0)]
    partitions = [fetch.PartitionData(partition_index=i, records=piece) for i, piece in enumerate(slices)]
    response = fetch(responses=[fetch.FetchableTopicResponse(topic="t", partitions=partitions)])
    for version in (4, 12):
        parts = encode_response_parts(1, version, 5, response)
        assert [part for part in parts if isinstance(part, _FileSlice)] == slices
        assert int.from_bytes(parts[0][:4], "big") == sum(map(len, parts)) - 4
        with pytest.raises(TypeError):
            encode_response(1, version, 5, response)  # a file slice cannot be joined into bytes


def test_tagged_structs_left_at_their_default_are_not_written():
    """A tagged struct defaulting to an empty one is written only when it is not empty: the encoder
    checks its fields itself (the writers call _is_default)."""
    fetch = messages.message_class("FetchResponse")
    leader_class = type(fetch.PartitionData().current_leader)
    partition = fetch.PartitionData(partition_index=1, records=b"")
    response = fetch(responses=[fetch.FetchableTopicResponse(topic="t", partitions=[partition])])
    empty = native.python_encode(response, 12)
    partition.current_leader  # builds the default (an empty struct)
    cases = [("leader_id", 5), ("leader_epoch", 0), ("unknown_tags", {7: b"x"}), ("unknown_tags", {}),
             ("leader_id", 2**40), ("leader_id", "x")]
    for attr, value in cases:
        leader = leader_class()
        setattr(leader, attr, value)
        partition.current_leader = leader
        assert_same_outcome(response, 12, f"current_leader.{attr} = {value!r}")
    partition.current_leader = leader_class()
    assert response.encode(12) == empty
    partition.current_leader = type("Mine", (leader_class,), {"__slots__": ()})()
    assert_same_outcome(response, 12, "a subclass")

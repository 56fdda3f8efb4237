"""Round-trip properties of every message at every valid version of schemas/ (Kafka 4.3 and the KIP-1178
overlay; test_codegen_validate checks that upstream's own files generate the same modules).

For each (message, version):
  (a) encode then decode (exact) gives an equal message;
  (b) decode then encode reproduces the bytes exactly, the bytes coming from an independent
      reference encoder written from the spec model (so ``encode`` must also agree with it);
  (c) flexible versions: unknown tagged fields (on the message and nested structs) survive a round
      trip and are written back to identical bytes, and the message decodes from tag sections in any
      order.
Plus hand-made cases: the order in which known and unknown tags are written and read, and lengths,
counts, tag numbers and tag sizes at varint boundaries (which the small random values never reach).
"""
from __future__ import annotations

import importlib
import itertools
import json
import os
import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from support.strategies import (
    MAX_TAG, carried, message_strategy, our_specs, plain, reference_encode, spec_of, struct_class,
)

# Tuned so that this file runs in well under 3 minutes with `pytest -n 2` on two cores: about 3,400
# (message, version, property) cases of 10 examples each (about 110 CPU-seconds in all). For a longer
# hunt, set KAFKAWIRE_ROUNDTRIP_EXAMPLES (e.g. 200).
SETTINGS = settings(
    max_examples=int(os.environ.get("KAFKAWIRE_ROUNDTRIP_EXAMPLES", "10")),
    deadline=None,
    database=InMemoryExampleDatabase(),
    # An explicit, non-None database. Hypothesis' pytest plugin re-wraps a parametrized test's settings
    # once per case (each new settings object's parent is the previous one), and settings.database is
    # only cached when it is not None; with None (which the "ci" profile, loaded whenever $CI is set,
    # makes the default) each lookup walks the whole chain, and after ~1000 cases in one worker that is
    # a RecursionError. An in-memory database caches at every level and keeps CI runs independent.
    # message_class is a function-scoped fixture, but it only looks a class up: nothing to reset.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture],
)

OURS = "kafkawire.messages"


def _cases(flexible_only: bool = False) -> list:
    cases = []
    for spec in our_specs():
        for version in spec.valid_versions:
            if flexible_only and version not in spec.flexible_versions:
                continue
            cases.append(pytest.param(OURS, spec.name, version, id=f"{spec.name}-v{version}"))
    return cases


ALL_CASES = _cases()
FLEXIBLE_CASES = _cases(True)


@pytest.fixture
def message_class(package, name):
    """The generated class for the case."""
    return importlib.import_module(package).message_class(name)


def _draw(data, cls, version: int, unknown_tags: bool = False):
    return data.draw(message_strategy(cls, version, unknown_tags=unknown_tags), label=cls.NAME)


@pytest.mark.parametrize("package, name, version", ALL_CASES)
@SETTINGS
@given(data=st.data())
def test_encode_then_decode(message_class, version, data):
    cls = message_class
    message = _draw(data, cls, version)
    encoded = message.encode(version)
    assert isinstance(encoded, bytes)
    decoded = cls.decode(encoded, version, exact=True)
    assert decoded == message
    assert plain(decoded) == plain(message)
    decoded_from, end = cls.decode_from(b"\x00\x01" + encoded + b"\x02", version, 2)
    assert end == 2 + len(encoded)
    assert decoded_from == message


@pytest.mark.parametrize("package, name, version", ALL_CASES)
@SETTINGS
@given(data=st.data())
def test_decode_then_encode(message_class, version, data):
    cls = message_class
    message = _draw(data, cls, version)
    wire = reference_encode(message, version)
    decoded = cls.decode(wire, version, exact=True)
    assert decoded.encode(version) == wire
    assert plain(decoded) == plain(message)
    assert message.encode(version) == wire  # the generated encoder agrees with the reference one
    assert cls.decode(bytearray(wire), version, exact=True).encode(version) == wire
    assert cls.decode(memoryview(wire), version, exact=True).encode(version) == wire


def _nested_with_tags(value, found: list) -> list:
    """Every nested struct (not ``value`` itself) that carries unknown tags, depth first."""
    for field in type(value)._FIELDS:
        item = getattr(value, field)
        for child in item if isinstance(item, (list, tuple)) else (item,):
            if hasattr(type(child), "_FIELDS"):
                if child.unknown_tags:
                    found.append(child)
                _nested_with_tags(child, found)
    return found


@pytest.mark.parametrize("package, name, version", FLEXIBLE_CASES)
@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_unknown_tags_survive(message_class, version, data, seed):
    cls = message_class
    message = _draw(data, cls, version, unknown_tags=True)
    assert message.unknown_tags  # the strategy always puts some on the message itself
    encoded = message.encode(version)
    assert encoded == reference_encode(message, version)
    decoded = cls.decode(encoded, version, exact=True)
    assert decoded == message
    assert plain(decoded) == plain(message)
    assert {tag: bytes(raw) for tag, raw in decoded.unknown_tags.items()} == message.unknown_tags
    for mine, theirs in zip(_nested_with_tags(message, []), _nested_with_tags(decoded, []), strict=True):
        assert {tag: bytes(raw) for tag, raw in theirs.unknown_tags.items()} == mine.unknown_tags
    assert decoded.encode(version) == encoded
    # Tag sections in any order (at every level) decode to the same message, written back sorted.
    shuffled = reference_encode(message, version, shuffle=random.Random(seed))
    from_shuffled = cls.decode(shuffled, version, exact=True)
    assert plain(from_shuffled) == plain(message)
    assert from_shuffled.encode(version) == encoded


# --------------------------------------------------------------------------------------------------
# Hand-made cases: where known and unknown tags go when written, and reading them in any order.

TAG_ORDER_SPEC = {
    "type": "data",
    "name": "TagOrderData",
    "validVersions": "0-1",
    "flexibleVersions": "1+",
    "fields": [
        {"name": "Plain", "type": "int32", "versions": "0+"},
        # Declared out of tag order on purpose (upstream wants tags contiguous from 0, not sorted).
        {"name": "Two", "type": "int32", "versions": "1+", "taggedVersions": "1+", "tag": 2},
        {"name": "Zero", "type": "string", "versions": "1+", "nullableVersions": "1+",
         "taggedVersions": "1+", "tag": 0, "default": "null"},
        {"name": "Nested", "type": "Inner", "versions": "1+", "taggedVersions": "1+", "tag": 1,
         "fields": [{"name": "X", "type": "int8", "versions": "1+"}]},
    ],
}


@pytest.fixture(scope="module")
def tag_order_data(generated_package, tmp_path_factory):
    specs = tmp_path_factory.mktemp("tag_order_specs")
    (specs / "TagOrderData.json").write_text(json.dumps(TAG_ORDER_SPEC), encoding="utf-8")
    return generated_package(specs, "tag_order_messages").message_class("TagOrderData")


TAG_ORDER_ENTRIES = [  # (tag, size, value) in tag order: known 0-2, then unknown 3, 9 and 200
    (b"\x00", b"\x03", b"\x03ab"),  # Zero = "ab", compact string
    (b"\x01", b"\x02", b"\xff\x00"),  # Nested(X=-1), with its empty tag section
    (b"\x02", b"\x04", b"\x01\x02\x03\x04"),  # Two = 0x01020304
    (b"\x03", b"\x01", b"z"),
    (b"\x09", b"\x00", b""),
    (b"\xc8\x01", b"\x02", b"hi"),  # tag 200, a two-byte varint
]
TAG_ORDER_BYTES = b"\x00\x00\x00\x07" + b"\x06" + b"".join(b"".join(e) for e in TAG_ORDER_ENTRIES)


def _tag_order_message(cls):
    return cls(plain=7, two=0x01020304, zero="ab", nested=cls.Inner(x=-1),
               unknown_tags={200: b"hi", 3: b"z", 9: b""})  # deliberately not in tag order


def test_known_and_unknown_tags_are_written_in_tag_order(tag_order_data):
    cls = tag_order_data
    assert _tag_order_message(cls).encode(1) == TAG_ORDER_BYTES
    # Tagged fields at their defaults are not written; unknown ones still are, in tag order.
    assert cls(plain=7, two=5, unknown_tags={9: b"b", 3: b"a"}).encode(1) == (
        b"\x00\x00\x00\x07\x03" + b"\x02\x04\x00\x00\x00\x05" + b"\x03\x01a" + b"\x09\x01b")
    assert cls(plain=7).encode(1) == b"\x00\x00\x00\x07\x00"
    assert cls(plain=7).encode(0) == b"\x00\x00\x00\x07"


def test_tags_in_any_order_are_read(tag_order_data):
    cls = tag_order_data
    expected = _tag_order_message(cls)
    for order in itertools.permutations(TAG_ORDER_ENTRIES):
        wire = b"\x00\x00\x00\x07" + b"\x06" + b"".join(b"".join(e) for e in order)
        decoded = cls.decode(wire, 1, exact=True)
        assert decoded == expected, order
        assert plain(decoded) == plain(expected), order
        assert decoded.encode(1) == TAG_ORDER_BYTES, order


def test_api_versions_response_tag_order():
    """A real message: ApiVersionsResponse v3 with known tags 1 and 3 set and unknown tags 4 and 70."""
    from kafkawire.messages import ApiVersionsResponse

    message = ApiVersionsResponse(finalized_features_epoch=5, zk_migration_ready=True,
                                  unknown_tags={70: b"\x01", 4: b"\x02\x03"})
    body = (b"\x00\x00"  # error_code
            b"\x01"  # api_keys: empty compact array
            b"\x00\x00\x00\x00"  # throttle_time_ms
            b"\x04"  # four tagged fields
            b"\x01\x08\x00\x00\x00\x00\x00\x00\x00\x05"  # tag 1 finalized_features_epoch
            b"\x03\x01\x01"  # tag 3 zk_migration_ready
            b"\x04\x02\x02\x03"  # unknown tag 4
            b"\x46\x01\x01")  # unknown tag 70
    assert message.encode(3) == body
    assert message.encode(3) == reference_encode(message, 3)
    head, entries = body[:8], [body[8:18], body[18:21], body[21:25], body[25:28]]
    for order in itertools.permutations(entries):
        decoded = ApiVersionsResponse.decode(head + b"".join(order), 3, exact=True)
        assert decoded == message
        assert decoded.encode(3) == body


# --------------------------------------------------------------------------------------------------
# Lengths, counts and tags at varint boundaries (1-, 2-, 3- and 4-byte varints), for one field of each
# wire shape (string, bytes, records, arrays of each element kind; nullable or not; compact or classic;
# tagged or not) found in our specs. The random cases above keep values small.

STRING_LENGTHS = (126, 127, 16382, 16383, 32767)  # compact lengths are written as n + 1
BYTES_LENGTHS = (126, 127, 16382, 16383, 2097150, 2097151)
ARRAY_COUNTS = (126, 127, 16382, 16383)
STRUCT_ARRAY_COUNTS = (126, 127, 16383)  # 16k structs are slow to build and compare: one large count
ELEMENTS = {"bool": True, "int8": 7, "int16": 7, "uint16": 7, "int32": 7, "uint32": 7, "int64": 7, "float64": 1.5,
            "uuid": uuid.UUID(int=1), "string": "s", "bytes": b"b", "records": b"r"}


def _field_paths(spec, version: int):
    """(path of struct-typed fields from the message down, field, how it is carried) for every field
    carried at ``version``."""
    structs = spec.structs()

    def walk(struct_name, path, seen):
        for f in structs[struct_name].fields:
            how = carried(spec, f, version)
            if how is None:
                continue
            yield path, f, how
            child = f.type.struct_name
            if child and child not in seen:
                yield from walk(child, path + [f], seen | {child})

    yield from walk(spec.name, [], {spec.name})


def _boundary_cases() -> list:
    seen, cases = set(), []
    for spec in our_specs():
        for version in spec.valid_versions:
            for path, f, how in _field_paths(spec, version):
                kind = f.type.kind
                if kind not in ("string", "bytes", "records", "array"):
                    continue
                if kind == "array":
                    element = f.type.element.kind
                    desc = f"[]{'struct' if element == 'struct' else element}"
                    sizes = STRUCT_ARRAY_COUNTS if element == "struct" else ARRAY_COUNTS
                else:
                    desc, sizes = kind, STRING_LENGTHS if kind == "string" else BYTES_LENGTHS
                flexible = version in (f.flexible_versions or spec.flexible_versions)
                key = (desc, version in f.nullable_versions, flexible, how)
                if key in seen:
                    continue
                seen.add(key)
                label = ".".join(p.name for p in path + [f])
                for size in sizes:
                    cases.append(pytest.param(spec.name, version, [p.name for p in path], f.name, size,
                                              id=f"{spec.name}-v{version}-{label}-{desc}-{size}"))
    return cases


def _element(cls, spec, t):
    return struct_class(cls, spec, t.struct)() if t.kind == "struct" else ELEMENTS[t.kind]


def _message_with(cls, spec, version, path_names, field_name, size):
    """The message with one field (reached through one element of each array on the way) set to a value
    of ``size`` bytes or elements."""
    structs = spec.structs()

    def build(struct_name, remaining):
        fields = {f.name: f for f in structs[struct_name].fields}
        if not remaining:
            f = fields[field_name]
            if f.type.kind == "string":
                value = "x" * size
            elif f.type.kind in ("bytes", "records"):
                value = bytes(range(256)) * (size // 256) + bytes(size % 256)
            else:
                value = [_element(cls, spec, f.type.element)] * size
            return struct_class(cls, spec, struct_name)(**{f.snake_name: value})
        f = fields[remaining[0]]
        child = build(f.type.struct_name, remaining[1:])
        return struct_class(cls, spec, struct_name)(**{f.snake_name: [child] if f.type.kind == "array" else child})

    return build(spec.name, list(path_names))


@pytest.mark.parametrize("name, version, path, field_name, size", _boundary_cases())
def test_lengths_and_counts_at_varint_boundaries(name, version, path, field_name, size):
    cls = importlib.import_module(OURS).message_class(name)
    spec = spec_of(cls)
    message = _message_with(cls, spec, version, path, field_name, size)
    encoded = message.encode(version)
    assert encoded == reference_encode(message, version)
    decoded = cls.decode(encoded, version, exact=True)
    assert decoded == message
    assert decoded.encode(version) == encoded


def test_string_length_limit():
    from kafkawire import EncodeError
    from kafkawire.messages import ApiVersionsRequest, FindCoordinatorRequest

    for cls, version, field in ((ApiVersionsRequest, 3, "client_software_name"), (FindCoordinatorRequest, 0, "key")):
        ok = cls(**{field: "é" * (32767 // 2) + "x"})  # 32767 UTF-8 bytes
        assert cls.decode(ok.encode(version), version, exact=True) == ok
        with pytest.raises(EncodeError):
            cls(**{field: "é" * (32768 // 2)}).encode(version)  # 32768 bytes


TAG_NUMBERS = (0, 127, 128, 16383, 16384, 2097151, 2097152, 268435455, 268435456, MAX_TAG)
TAG_SIZES = (0, 127, 128, 16383, 16384)


@pytest.mark.parametrize("size", TAG_SIZES)
def test_unknown_tags_at_varint_boundaries(size):
    from kafkawire.messages import ApiVersionsResponse

    nested = {tag: bytes([tag & 0xFF]) * size for tag in TAG_NUMBERS}
    top = {tag: b"t" * size for tag in TAG_NUMBERS if tag > 3}  # 0-3 are known at the top level
    message = ApiVersionsResponse(finalized_features_epoch=9, unknown_tags=top, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=1, unknown_tags=nested)])
    for version in (3, 4):
        encoded = message.encode(version)
        assert encoded == reference_encode(message, version)
        decoded = ApiVersionsResponse.decode(encoded, version, exact=True)
        assert decoded == message and plain(decoded) == plain(message)
        assert decoded.encode(version) == encoded


@pytest.mark.parametrize("count", (126, 127, 128, 16384))
def test_many_unknown_tags(count):
    """Tag sections whose entry count takes more than one varint byte."""
    from kafkawire.messages import ApiVersionsResponse

    message = ApiVersionsResponse(unknown_tags={tag: b"" for tag in range(4, 4 + count)}, api_keys=[
        ApiVersionsResponse.ApiVersion(unknown_tags={tag: b"v" for tag in range(count)})])
    encoded = message.encode(3)
    assert encoded == reference_encode(message, 3)
    decoded = ApiVersionsResponse.decode(encoded, 3, exact=True)
    assert plain(decoded) == plain(message)
    assert decoded.encode(3) == encoded

"""The native decoder (kafkawire/codec/_decoder.c) against the generated Python readers, its reference.

For every message and valid version of schemas/ (Kafka 4.3's specs and the KIP-1178 overlay), hypothesis
draws messages (with unknown tags where the version is
flexible), the Python encoder writes them, and:
  - the native read builds the same objects as the Python reader: equal, the same types to the
    leaves (tuples, memoryviews for bytes and records, bytes in unknown_tags, the ABSENT sentinel of
    lazily defaulted struct fields), ending at the same position, from bytes, bytearray and
    memoryview input and at an offset;
  - truncations, bit flips and random bytes: the native read refuses exactly the inputs the Python
    reader refuses (and reads the rest identically), and decode raises the same DecodeError (reason,
    field path, offset) as the Python reader.
Plus: every program compiles, the decode entry point defers to Message.decode for what it does not
take (memoryviews, large bodies, unknown versions, trailing bytes, subclasses), a program that does
not compile leaves the Python reader in charge, hostile counts allocate nothing, and
KAFKAWIRE_PURE_PYTHON=1 turns the native path off.
"""
from __future__ import annotations

import importlib
import os
import random
import subprocess
import sys
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

import kafkawire.messages as messages
from kafkawire import DecodeError
from kafkawire.codec import base, native
from kafkawire.codec.primitives import ABSENT
from support.strategies import message_strategy, our_specs

pytestmark = pytest.mark.skipif(not native.ACTIVE, reason="native decoder not built, or KAFKAWIRE_PURE_PYTHON=1")

OURS = "kafkawire.messages"

# Each hypothesis example draws one message per valid version of a message, so every
# (message, version) pair gets EXAMPLES messages (about 30 s for both spec sets; more with
# KAFKAWIRE_NATIVE_EXAMPLES).
EXAMPLES = int(os.environ.get("KAFKAWIRE_NATIVE_EXAMPLES", "2"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=InMemoryExampleDatabase(),  # see test_roundtrip.py: a None database recurses under pytest
    # No shrinking: an example spans every version of a message, and shrinking that takes minutes;
    # the assertion messages name the version and the input's bytes instead.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture],
)


CASES = [pytest.param(OURS, spec.name, id=spec.name) for spec in sorted(our_specs(), key=lambda s: s.name)]


@pytest.fixture
def message_class(package, name):
    return importlib.import_module(package).message_class(name)


def _versions(cls) -> range:
    low, high = cls.VALID_VERSIONS
    return range(low, high + 1)


# --------------------------------------------------------------------------------------------------
# Comparing what the two readers built


def assert_same(a, b, where: str = "") -> None:
    """``a`` and ``b`` are equal and of the same type at every level (slots read directly, so the
    ABSENT sentinel of a lazily defaulted struct field is compared too)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    slots = getattr(type(a), "__slots__", None)
    if slots is not None and hasattr(type(a), "_FIELDS"):
        for slot in (slots,) if isinstance(slots, str) else slots:
            assert_same(getattr(a, slot), getattr(b, slot), f"{where}.{slot}")
    elif isinstance(a, tuple):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} != {list(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key}]")
    elif isinstance(a, memoryview):
        assert a.format == b.format and a.readonly == b.readonly and a.tobytes() == b.tobytes(), where
        assert a.obj is b.obj, f"{where}: slices of different objects"
    elif a is ABSENT or a is None:
        assert a is b, where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def outcome(read, data, pos=0, view=None):
    """What a reader makes of ``data``: ("ok", object, end) or ("error", reason, path, offset)."""
    try:
        obj, end = read(data, pos, view)
    except DecodeError as exc:
        return ("error", exc.reason, list(exc.path), exc.offset)
    return ("ok", obj, end)


def check_input(cls, version: int, data) -> None:
    """The native read takes ``data`` iff the Python reader does, and reads or refuses it identically."""
    reader = native.native_reader(cls, version)
    python = outcome(reader.fallback, data)
    got = reader.try_native(data, 0, None)
    where = f"{cls.NAME} v{version}, input {bytes(data).hex()}"
    if python[0] == "error":
        assert got is None, f"native read accepted what the Python reader refuses ({python}): {where}"
        with pytest.raises(DecodeError) as caught:
            cls.decode(data, version)
        assert (caught.value.reason, caught.value.path, caught.value.offset) == (
            python[1], [cls.NAME] + python[2], python[3])
    else:
        assert got is not None, f"native read refused what the Python reader reads: {where}"
        assert got[1] == python[2], where
        assert_same(got[0], python[1], where)


def mutations(wire: bytes, rng: random.Random) -> list[bytes]:
    """Truncations (all of a short input, a sample of a long one), bit flips, byte swaps, random bytes."""
    cuts = range(len(wire)) if len(wire) <= 48 else sorted(rng.sample(range(len(wire)), 48))
    found = [wire[:cut] for cut in cuts]
    for _ in range(12):
        if wire:
            flipped = bytearray(wire)
            index = rng.randrange(len(wire))
            flipped[index] ^= 1 << rng.randrange(8)
            found.append(bytes(flipped))
            swapped = bytearray(wire)
            swapped[rng.randrange(len(wire))] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF))
            found.append(bytes(swapped))
    found += [rng.randbytes(rng.randrange(64)) for _ in range(4)]
    return found


# --------------------------------------------------------------------------------------------------
# Property tests over every message and version


@pytest.mark.parametrize("package, name", CASES)
@SETTINGS
@given(data=st.data())
def test_native_reads_like_python(message_class, data):
    cls = message_class
    for version in _versions(cls):
        flexible = cls.FLEXIBLE_VERSIONS is not None and version >= cls.FLEXIBLE_VERSIONS[0]
        message = data.draw(message_strategy(cls, version, unknown_tags=flexible), label=f"v{version}")
        wire = message.encode(version)
        reader = native.native_reader(cls, version)
        assert reader is not None and reader.compile()
        got = reader.try_native(wire, 0, None)
        assert got is not None, f"v{version}: native read refused a valid encoding"
        expected = reader.fallback(wire, 0, None)
        assert got[1] == expected[1] == len(wire)
        assert_same(got[0], expected[0], f"v{version}")
        assert got[0] == message
        # Every input type and an offset, through the public entry points.
        padded = b"\x07\x07" + wire + b"\x01"
        for buf in (wire, bytearray(wire), memoryview(wire)):
            assert_same(cls.decode(buf, version, exact=True), reader.fallback(buf, 0, None)[0])
        decoded, end = cls.decode_from(padded, version, 2)
        assert end == 2 + len(wire)
        view = memoryview(padded)
        assert_same(decoded, reader.fallback(padded, 2, view)[0])
        assert_same(reader.try_native(padded, 2, view), reader.fallback(padded, 2, view))


@pytest.mark.parametrize("package, name", CASES)
@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_native_refuses_like_python(message_class, data, seed):
    cls = message_class
    rng = random.Random(seed)
    for version in _versions(cls):
        message = data.draw(message_strategy(cls, version), label=f"v{version}")
        for mutated in mutations(message.encode(version), rng):
            check_input(cls, version, mutated)


# --------------------------------------------------------------------------------------------------
# Hand-made cases


def test_every_program_compiles():
    for name in sorted(messages._MODULES):
        cls = messages.message_class(name)
        for version in _versions(cls):
            reader = native.native_reader(cls, version)
            assert reader is not None, (name, version)
            assert reader.compile() is True
            assert cls._READERS[version] is reader and native.python_reader(cls, version) is reader.fallback


def test_decode_defers_to_message_decode():
    from kafkawire.messages import FetchResponse, MetadataResponse
    assert type(vars(MetadataResponse)["decode"]).__name__ == "Decode"
    message = MetadataResponse(throttle_time_ms=5, cluster_id="c", topics=[
        MetadataResponse.MetadataResponseTopic(name="t", partitions=[
            MetadataResponse.MetadataResponsePartition(partition_index=i, replica_nodes=[1, 2, 3])
            for i in range(4000)])])
    wire = message.encode(12)
    assert len(wire) > 64 * 1024  # the GC-pausing path of Message.decode
    assert MetadataResponse.decode(wire, 12) == message
    assert MetadataResponse.decode(memoryview(wire), 12, exact=True) == message
    small = MetadataResponse(throttle_time_ms=1).encode(12)
    assert MetadataResponse.decode(small, 12, True) == MetadataResponse(throttle_time_ms=1)
    with pytest.raises(DecodeError, match="1 trailing bytes") as caught:
        MetadataResponse.decode(small + b"\x00", 12, exact=True)
    assert caught.value.path == ["MetadataResponse"] and caught.value.offset == len(small)
    assert MetadataResponse.decode(small + b"\x00", 12, exact=False).throttle_time_ms == 1
    with pytest.raises(DecodeError, match="unknown version 99"):
        MetadataResponse.decode(small, 99)
    with pytest.raises(TypeError):
        MetadataResponse.decode(small)
    with pytest.raises(TypeError):
        MetadataResponse.decode(small, 12, bogus=True)

    class Sub(MetadataResponse):
        __slots__ = ()
    assert Sub.decode(small, 12) == MetadataResponse(throttle_time_ms=1)  # Message.decode, bound to Sub

    records = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=0, records=b"abc")])]).encode(12)
    for buf in (records, bytearray(records)):
        part = FetchResponse.decode(buf, 12).responses[0].partitions[0]
        assert type(part.records) is memoryview and part.records.obj is buf and bytes(part.records) == b"abc"
        assert part.records.readonly is isinstance(buf, bytes)
        assert part._diverging_epoch is ABSENT  # lazily defaulted, as the Python reader leaves it


def test_decode_follows_pause_gc_above(monkeypatch):
    from kafkawire.messages import ApiVersionsRequest
    calls = []

    class RecordingGC:
        isenabled = staticmethod(lambda: True)
        disable = staticmethod(lambda: calls.append("disable"))
        enable = staticmethod(lambda: calls.append("enable"))

    wire = ApiVersionsRequest(client_software_name="a" * 20).encode(3)
    before = base._PAUSE_GC_ABOVE
    monkeypatch.setattr(base, "gc", RecordingGC)
    try:
        base.pause_gc_above(10)
        assert ApiVersionsRequest.decode(wire, 3).client_software_name == "a" * 20
        assert calls == ["disable", "enable"]  # Message.decode's GC-pausing path took it
        base.pause_gc_above(None)
        ApiVersionsRequest.decode(wire, 3)
        assert calls == ["disable", "enable"]
    finally:
        base.pause_gc_above(before)


def test_a_program_that_does_not_compile_leaves_the_python_reader_in_charge():
    from kafkawire.codec import _decoder
    from kafkawire.messages import ApiVersionsRequest

    def fallback(buf, pos, view):
        return ("python", pos)

    for program in [("not", "a", "program"),
                    (ApiVersionsRequest, True, (("client_software_name", ("varint", 0)),), (), ()),
                    (ApiVersionsRequest, True, (("client_software_name", ("string", 1)),), (), ()),  # a slot unset
                    (ApiVersionsRequest, True, (("no_such_slot", ("string", 1)),), (), ())]:
        reader = _decoder.Reader(program, fallback)
        assert reader(b"\x00", 0, None) == ("python", 0)
        with pytest.raises((TypeError, ValueError)):
            reader.compile()
        assert reader(b"\x00", 0, None) == ("python", 0)


def test_hostile_counts_allocate_nothing():
    from kafkawire.messages import MetadataResponse
    # v12: throttle time, then a compact array count of 2**32 - 2 brokers in a 10-byte body.
    hostile = b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00"
    reader = native.native_reader(MetadataResponse, 12)
    tracemalloc.start()
    try:
        started = time.perf_counter()
        assert reader.try_native(hostile, 0, None) is None
        with pytest.raises(DecodeError, match="elements need at least"):
            MetadataResponse.decode(hostile, 12)
        assert time.perf_counter() - started < 0.5
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()


def test_deep_and_varint_edge_cases_agree():
    from kafkawire.messages import ApiVersionsRequest
    # Lengths as redundant varints, null markers, a 5-byte varint overflowing 32 bits.
    for body in [b"\x80\x00\x01\x00", b"\x81\x00\x00\x00", b"\x01\x01\x00", b"\x00\x01\x00",
                 b"\x01\x01\x01\x00\x00", b"\x01\x01\x01\x01\x00\x00", b"\x01\x01\xff\xff\xff\xff\x7f",
                 b"\x01\x01\x02\x01\x00\x00\x02\x00\x00", b"\x01\x01\x02\x05\x01\x41\x05\x01\x42"]:
        for version in (3, 4):
            check_input(ApiVersionsRequest, version, body)
    # A string of invalid UTF-8.
    check_input(ApiVersionsRequest, 3, b"\x03\xff\xfe\x01\x00")


def test_pure_python_mode_turns_the_native_path_off():
    code = ("from kafkawire.codec import native; from kafkawire.messages import FetchResponse as F; "
            "import types; print(native.ACTIVE, isinstance(F._READERS[12], types.FunctionType), "
            "'decode' in vars(F))")
    env = dict(os.environ, KAFKAWIRE_PURE_PYTHON="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "False"]
    assert base.Message.__dict__["decode"].__func__ is native._PYTHON_DECODE

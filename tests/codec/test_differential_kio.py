"""Differential tests against kio 0.6.5 (Aiven-Open/kio): an independent generated codec.

For every entity kio ships (requests, responses, headers and data records, every version) that
kafkawire also has at that version, Hypothesis draws random kio entities (our own strategies built
from kio's dataclass fields; kio's ``from_type`` can't build ``Records`` and makes huge arrays) and:

1. kio encodes the entity;
2. kafkawire decodes those bytes (``exact=True``) into a message whose field values equal the kio
   entity's, converted field by field (timedelta -> ms, ErrorCode -> int, None uuid -> zero, ...);
3. kafkawire re-encodes the decoded message, and separately encodes a message built from the
   converted values: both must be byte-identical to kio's bytes;
4. kio decodes kafkawire's bytes back to an entity equal to the original, consuming every byte.

Before drawing anything, each case compares kio's layout of the version (field order, types, tags,
nullability) with our spec's. Layouts that differ fail the case, except the divergences listed in
``DIVERGENT``, where the differing struct is kept out of the drawn entities (arrays of it stay
empty) and the rest of the message is still compared.
"""
from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import os
import types
import typing
from dataclasses import MISSING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kio.schema.errors import ErrorCode
from kio.schema.index import schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.static.primitive import TZAware, _timedelta_survives_roundtrip, i32Timedelta

from support import peers
from support.peers import Field

# Examples per (message, version); raise it for a deeper run: KAFKAWIRE_DIFF_EXAMPLES=500.
MAX_EXAMPLES = int(os.environ.get("KAFKAWIRE_DIFF_EXAMPLES", "20"))

# kio's kafka_type for fields it maps to Python types, and the wire type underneath.
KIO_WIRE_TYPES = {"timedelta_i32": "int32", "timedelta_i64": "int64", "datetime_i64": "int64",
                  "error_code": "int16"}

# Field renames between our spec and kio's newer one that do not change the wire.
RENAMES = {
    # Upstream renamed VoteRequest's Candidate* fields to Replica* when it added v2 (KIP-996 pre-vote);
    # v0-1 keep their position, type and versions.
    ("candidateepoch", "replicaepoch"),
    ("candidateid", "replicaid"),
    ("candidatedirectoryid", "replicadirectoryid"),
}

# Layout divergences between kio 0.6.5 (generated from Kafka 4.3.1's specs) and our schemas: (message,
# version) -> (struct paths kept out of the drawn entities, why). None since schemas/ became Kafka 4.3;
# kept so that a future divergence is explained here rather than skipped.
DIVERGENT: dict[tuple[str, int], tuple[set[str], str]] = {}


# ---------------------------------------------------------------------------------------------
# kio entities: layout, strategies, conversion to kafkawire


def _unoptional(t):
    if typing.get_origin(t) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        assert len(args) == 1, t
        return args[0], True
    return t, False


def _kio_field(f: dataclasses.Field):
    """(wire type as in the spec, element class or None, array?, nullable?) of a kio field."""
    t, nullable = _unoptional(f.type)
    array = typing.get_origin(t) is tuple
    if array:
        t, _ = _unoptional(typing.get_args(t)[0])
    if dataclasses.is_dataclass(t):
        return t.__name__, t, array, nullable
    kafka_type = f.metadata["kafka_type"]
    if kafka_type == "datetime_i64":
        nullable = False  # kio's None stands for the int64 -1 sentinel, not a wire null
    return KIO_WIRE_TYPES.get(kafka_type, kafka_type), None, array, nullable


def kio_layout(cls) -> tuple[Field, ...]:
    out = []
    for f in dataclasses.fields(cls):
        wire, entity, array, nullable = _kio_field(f)
        tag = f.metadata.get("tag")
        out.append(Field(name=f.name, type=("[]" if array else "") + wire,
                         tag=None if tag is None else int(tag), nullable=nullable,
                         fields=None if entity is None else kio_layout(entity)))
    return tuple(out)


def names_match(ours: str, theirs: str) -> bool:
    a, b = ours.replace("_", "").lower(), theirs.replace("_", "").lower()
    # kio drops the unit of fields it turns into timedelta/datetime: MaxWaitMs -> max_wait
    return a == b or a == b + "ms" or (a, b) in RENAMES


def _tagged_default(f: dataclasses.Field):
    return f.default if f.default is not MISSING else get_tagged_field_default(f)


def _nonzero_uuids():
    return st.uuids().filter(lambda u: u.int != 0)  # kio reads the zero uuid as None


def _kio_primitive(kafka_type: str):
    if kafka_type in peers.INT_RANGES:
        return peers.primitive_strategy(kafka_type)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False, allow_infinity=False),
        "string": peers.primitive_strategy("string"),
        "bytes": peers.binary(),
        "records": peers.binary(),
        "uuid": st.one_of(st.none(), _nonzero_uuids()),
        "error_code": st.sampled_from(list(ErrorCode)),
        "timedelta_i32": st.from_type(i32Timedelta),
        # kio's own i64Timedelta strategy spans all of timedelta, but its Rust reader raises
        # "timedelta milliseconds overflow" past about 2**63 microseconds: stay within 2**53 ms, and
        # (as kio's strategy does) skip values its float-based writer can't write exactly.
        "timedelta_i64": st.one_of(st.integers(-(2**40), 2**40), st.integers(-(2**53), 2**53)).map(
            lambda ms: datetime.timedelta(milliseconds=ms)).filter(_timedelta_survives_roundtrip),
        "datetime_i64": st.from_type(TZAware),
    }[kafka_type]


def kio_strategy(cls, ours: tuple[Field, ...] | None, exclude=frozenset(), path: str = "", depth: int = 0):
    """Random kio entities of ``cls``; ``ours`` is our layout aligned with it, for the paths."""
    ours_by_kio = {}
    if ours is not None:
        theirs = {f.name: f for f in kio_layout(cls)}
        by_id = {id(b): a for a, b in peers.align(ours, tuple(theirs.values())) if b is not None}
        ours_by_kio = {name: by_id.get(id(f)) for name, f in theirs.items()}
    max_items = 2 if depth < 2 else 1
    kwargs = {}
    for f in dataclasses.fields(cls):
        wire, entity, array, nullable = _kio_field(f)
        our = ours_by_kio.get(f.name)
        where = path + (our.name if our is not None else f.name)
        tagged = "tag" in f.metadata
        if entity is not None:
            if where in exclude:
                assert array, f"can't keep the lone struct {where} out"
                kwargs[f.name] = st.just(())
                continue
            s = kio_strategy(entity, our.fields if our is not None else None, exclude, where + ".", depth + 1)
        else:
            kafka_type = f.metadata["kafka_type"]
            s = _kio_primitive(kafka_type)
            if kafka_type == "datetime_i64" and typing.get_origin(f.type) in (types.UnionType, typing.Union):
                s = st.one_of(st.none(), s)
        if array:
            s = peers.lists(s, max_size=max_items, long_ok=entity is None)
        if nullable and wire != "uuid":
            s = st.one_of(st.none(), s)
        if tagged:
            s = st.one_of(st.just(_tagged_default(f)), s)
        kwargs[f.name] = s
    return st.builds(cls, **kwargs)


def _ms(value) -> int:
    # As kio writes them (kio.serial.writers.write_timedelta_i32 / write_datetime_i64).
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return round(value.timestamp() * 1000)


def _kio_to_kw_value(our: Field, value, kafka_type: str | None):
    if value is None:
        if kafka_type == "datetime_i64":
            return -1
        if our.inner == "uuid":
            return peers.ZERO_UUID
        return None
    if kafka_type in ("timedelta_i32", "timedelta_i64", "datetime_i64"):
        return _ms(value)
    if kafka_type == "error_code":
        return int(value.value)
    if our.inner in ("bytes", "records"):
        return bytes(value)
    if our.inner == "string":
        return str(value)
    if our.inner == "bool":
        return bool(value)
    if our.inner == "float64":
        return float(value)
    if our.inner == "uuid":
        return value
    return int(value)


def kio_to_kw(entity, top_name: str, kw_cls, ours: tuple[Field, ...]):
    """The kafkawire object holding ``entity``'s values (layouts must agree where non-empty)."""
    theirs = kio_layout(type(entity))
    kio_fields = {f.name: f for f in dataclasses.fields(type(entity))}
    kwargs = {}
    for a, b in peers.align(ours, theirs):
        if a is None or b is None:
            continue  # a divergent struct, drawn empty
        value = getattr(entity, b.name)
        if a.is_struct:
            inner_cls = peers.kw_struct_class(top_name, a)
            if value is None:
                kwargs[a.attr] = None
            elif a.is_array:
                kwargs[a.attr] = [kio_to_kw(v, top_name, inner_cls, a.fields) for v in value]
            else:
                kwargs[a.attr] = kio_to_kw(value, top_name, inner_cls, a.fields)
            continue
        kafka_type = kio_fields[b.name].metadata.get("kafka_type")
        if a.is_array:
            kwargs[a.attr] = None if value is None else [_kio_to_kw_value(a, v, kafka_type) for v in value]
        else:
            kwargs[a.attr] = _kio_to_kw_value(a, value, kafka_type)
    return kw_cls(**kwargs)


# ---------------------------------------------------------------------------------------------
# Cases


def _kio_entries():
    for api, versions in schema_name_map.items():
        for version, kinds in sorted(versions.items()):
            for kind, path in kinds.items():
                module, name = path.split(":")
                yield name, version, module


def _cases():
    cases = []
    for name, version, module in _kio_entries():
        ours = peers.our_versions(name)
        marks = []
        if ours is None:
            marks.append(pytest.mark.skip(reason=f"kio has {name}; kafkawire's schemas have no such message"))
        elif not ours[0] <= version <= ours[1]:
            marks.append(pytest.mark.skip(
                reason=f"kio has {name} v{version}; kafkawire's schemas have v{ours[0]}-{ours[1]}"))
        cases.append(pytest.param(name, version, module, marks=marks, id=f"{name}-v{version}"))
    return cases


CASES = _cases()


def _kio_class(module: str, name: str):
    return getattr(importlib.import_module(module), name)


def kio_encode(cls, entity) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    return buf.getvalue()


def check_layouts(name: str, version: int, kio_cls) -> set[str]:
    """The struct paths to keep empty; fails on any layout difference not explained in DIVERGENT."""
    diffs = peers.diff_layouts(peers.our_fields(name, version), kio_layout(kio_cls), names_match=names_match)
    exclude, _why = DIVERGENT.get((name, version), (set(), ""))
    unexplained = [d for d in diffs if not any(d.startswith(p + ".") for p in exclude)]
    assert not unexplained, f"{name} v{version}: kio's layout differs from ours:\n  " + "\n  ".join(unexplained)
    if exclude:
        assert diffs, f"{name} v{version}: listed in DIVERGENT but the layouts now agree"
    return exclude


@pytest.mark.parametrize(("name", "version", "module"), CASES)
def test_kio_roundtrip(name: str, version: int, module: str):
    kio_cls = _kio_class(module, name)
    exclude = check_layouts(name, version, kio_cls)
    kw_cls = peers.kw_class(name)
    ours = peers.our_fields(name, version)
    read_kio = entity_reader(kio_cls)

    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(kio_strategy(kio_cls, ours, frozenset(exclude)))
    def run(entity):
        kio_bytes = kio_encode(kio_cls, entity)
        # kio must round-trip its own entity, or the comparison below means nothing
        again, size = read_kio(kio_bytes, 0)
        assert (again, size) == (entity, len(kio_bytes)), "kio does not round-trip this entity"

        decoded = kw_cls.decode(kio_bytes, version, exact=True)
        expected = kio_to_kw(entity, name, kw_cls, ours)
        assert decoded == expected, f"decoded {decoded!r}\n   expected {expected!r}\n   from {kio_bytes.hex()}"

        # the same bytes inside a larger bytearray, read from an offset (zero-copy slices must be
        # taken relative to the buffer, and the end position reported)
        framed = bytearray(b"\xa5" * 3 + kio_bytes + b"\x5a" * 2)
        inner, end = kw_cls.decode_from(framed, version, 3)
        assert end == 3 + len(kio_bytes)
        assert inner == expected

        assert decoded.encode(version).hex() == kio_bytes.hex(), "re-encoding kio's bytes changed them"
        assert expected.encode(version).hex() == kio_bytes.hex(), "encoding the same values differs from kio"

        ours_bytes = decoded.encode(version)
        back, size = read_kio(ours_bytes, 0)
        assert size == len(ours_bytes)
        assert back == entity

    run()


def test_kio_coverage():
    """Every entity kio ships, at every version, is exercised: none skipped for its version or absence."""
    skipped = [c.id for c in CASES if c.marks]
    assert skipped == []
    assert len(CASES) == sum(1 for _ in _kio_entries()) >= 600

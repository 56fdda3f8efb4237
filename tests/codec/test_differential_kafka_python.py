"""Differential tests against kafka-python 3.0.12's protocol layer (``kafka.protocol``).

kafka-python 3 builds its message classes at run time from the Kafka 4.3 JSON specs it bundles.
For every message it has (52 APIs' requests and responses, the request and response headers, and
the consumer-protocol subscription and assignment records) and every version it accepts that we
also have, Hypothesis draws random kafkawire messages of that version (from our specs,
``peers.kw_strategy``) and:

1. kafkawire encodes the message;
2. kafka-python decodes those bytes, and its field values equal ours (converted: its ``None`` uuid is
   the zero uuid, its bit-field sets are our int32 ``*AuthorizedOperations``, an absent tagged struct
   is the default struct);
3. kafka-python re-encodes what it decoded: byte-identical;
4. kafka-python encodes a message built from our values: byte-identical, and it decodes in kafkawire
   (``exact=True``) to the original.

Known kafka-python bugs kept out of the way (``/work/shared/reference/peers.md``):

* ``decoded.encode(version=N)`` raises ``AttributeError: '_header'`` (decode bypasses ``__init__``):
  step 3 calls ``encode()`` with no version, which uses the decoded version.
* it drops unknown tagged fields on re-encode: the drawn messages carry no unknown tags.
* a non-empty tag section copies the rest of the buffer (quadratic, but correct): not a concern at
  these sizes.

Before drawing anything, each case compares kafka-python's layout of the version with ours; a
version kafka-python accepts but lays out differently is skipped (see ``layout_skip``) or, inside
the spec versions kafka-python's JSON declares, fails unless it is listed in ``DIVERGENT``.
"""
from __future__ import annotations

import importlib
import os
import io
import pkgutil

import warnings

import pytest
from hypothesis import HealthCheck, given, settings

with warnings.catch_warnings():
    # kafka-python reads its bundled specs with the deprecated importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol
    from kafka.protocol.api_data import ApiData
    from kafka.protocol.api_header import RequestHeader as KpRequestHeader
    from kafka.protocol.api_header import ResponseHeader as KpResponseHeader
    from kafka.protocol.api_message import ApiMessage

from support import peers
from support.peers import Field

# Examples per (message, version); raise it for a deeper run: KAFKAWIRE_DIFF_EXAMPLES=500.
MAX_EXAMPLES = int(os.environ.get("KAFKAWIRE_DIFF_EXAMPLES", "20"))
INT32_MIN = -(2**31)

# Layout divergences inside the versions kafka-python's specs declare: (message, version) ->
# (struct paths kept empty in the drawn messages, why).
DIVERGENT: dict[tuple[str, int], tuple[set[str], str]] = {}  # none since schemas/ became Kafka 4.3


# ---------------------------------------------------------------------------------------------
# kafka-python classes and layouts


def _kp_classes() -> dict[str, type]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
            if ".old" not in info.name and "generate_stubs" not in info.name:
                importlib.import_module(info.name)
    found: dict[str, type] = {}

    def walk(base):
        for sub in base.__subclasses__():
            # versioned wrappers (FetchRequest[12]) carry _class_version; keep the primary classes
            if getattr(sub, "_class_version", None) is None and "_json" in sub.__dict__:
                found.setdefault(sub.__name__, sub)
            walk(sub)

    for base in (ApiMessage, ApiData):
        walk(base)
    found["RequestHeader"] = KpRequestHeader
    found["ResponseHeader"] = KpResponseHeader
    return found


KP_CLASSES = _kp_classes()


def kp_kind(cls) -> str:
    if issubclass(cls, ApiMessage):
        return "message"
    if issubclass(cls, ApiData):
        return "data"
    return "header"


def kp_versions(cls) -> tuple[int, int]:
    """The versions kafka-python accepts: messages and data from 0 (it forces every minimum to 0);
    headers only the two it can write (it picks the version from the flexible flag)."""
    low, high = peers.parse_versions(cls._json["validVersions"])
    if kp_kind(cls) == "header":
        return low, high
    return 0, high


def kp_spec_versions(cls) -> tuple[int, int]:
    """The versions the bundled (Kafka 4.3) spec declares."""
    return peers.parse_versions(cls._json["validVersions"])


def kp_children(struct, version: int) -> list[tuple[Field, object]]:
    """kafka-python's fields of a struct at ``version`` as (layout Field, its BaseField)."""
    out = []
    # A struct array's own _fields are a second parse of the JSON; its element StructField
    # (array_of) holds the fields that carry the data classes.
    struct = getattr(struct, "array_of", struct)
    for f in struct._fields:
        if not f.for_version_q(version):
            continue
        nested = None
        if f._fields is not None and (f.is_struct() or f.is_struct_array()):
            nested = tuple(field for field, _ in kp_children(f, version))
        wire_type = f._type_str.replace("bitfield", "int32")  # its patched *AuthorizedOperations
        out.append((Field(name=f.name, type=wire_type, tag=f.tag if f.tagged_field_q(version) else None,
                          nullable=f.nullable_for_version_q(version), fields=nested, attr=f.name), f))
    return out


def kp_layout(cls, version: int) -> tuple[Field, ...]:
    return tuple(field for field, _ in kp_children(cls._struct, version))


def names_match(ours: str, theirs: str) -> bool:
    a, b = ours.replace("_", "").lower(), theirs.replace("_", "").lower()
    # kafka-python renames {Cluster,Topic}AuthorizedOperations to authorized_operations
    return a == b or (a.endswith("authorizedoperations") and b == "authorizedoperations")


# ---------------------------------------------------------------------------------------------
# Conversion between kafkawire objects and kafka-python data containers


def _pairs(ours: tuple[Field, ...], struct, version: int):
    theirs = kp_children(struct, version)
    by_id = {id(field): base for field, base in theirs}
    for a, b in peers.align(ours, tuple(field for field, _ in theirs)):
        if a is not None and b is not None:
            yield a, b, by_id[id(b)]


def _bits(value: int) -> set[int] | None:
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits  # kafka-python's BitField: {31} (INT32_MIN) is None


def _from_bits(bits) -> int:
    if bits is None:
        return INT32_MIN
    value = sum(1 << i for i in bits)
    return value - (1 << 32) if value >= 1 << 31 else value


def kw_to_kp(obj, ours, struct, data_class, version: int, top_name: str):
    kwargs = {}
    for a, b, base in _pairs(ours, struct, version):
        value = getattr(obj, a.attr)
        if a.is_struct:
            if value is None:
                pass
            elif a.is_array:
                value = [kw_to_kp(v, a.fields, base, base.data_class, version, top_name) for v in value]
            elif a.tag is not None and value == peers.kw_struct_class(top_name, a)():
                continue  # a tagged struct at its default is not on the wire
            else:
                value = kw_to_kp(value, a.fields, base, base.data_class, version, top_name)
        elif base._type_str == "bitfield":
            value = _bits(value)
        elif a.inner == "uuid" and not a.is_array and value == peers.ZERO_UUID:
            # kafka-python's zero uuid is None (its default, and what it decodes); an explicit
            # UUID(int=0) in a tagged field differs from that default, so it would write the tag
            # where Kafka's Java code (and kafkawire) leave a default-valued tag out.
            value = None
        elif a.inner in ("bytes", "records") and value is not None:
            value = [bytes(v) for v in value] if a.is_array else bytes(value)
        elif a.is_array and value is not None:
            value = list(value)
        kwargs[b.name] = value
    return data_class(version=version, **kwargs)


def kp_to_kw(kobj, ours, struct, kw_cls, version: int, top_name: str):
    kwargs = {}
    for a, b, base in _pairs(ours, struct, version):
        value = getattr(kobj, b.name)
        if a.is_struct:
            inner_cls = peers.kw_struct_class(top_name, a)
            if value is None:
                # an absent tagged struct decodes as None in kafka-python
                value = inner_cls() if a.tag is not None and not a.nullable else None
            elif a.is_array:
                value = [kp_to_kw(v, a.fields, base, inner_cls, version, top_name) for v in value]
            else:
                value = kp_to_kw(value, a.fields, base, inner_cls, version, top_name)
        elif base._type_str == "bitfield":
            value = _from_bits(value)
        elif a.inner == "uuid":
            fix = lambda u: peers.ZERO_UUID if u is None else u  # noqa: E731
            value = [fix(u) for u in value] if a.is_array and value is not None else fix(value)
        elif a.inner in ("bytes", "records") and value is not None:
            value = [bytes(v) for v in value] if a.is_array else bytes(value)
        kwargs[a.attr] = value
    return kw_cls(**kwargs)


# ---------------------------------------------------------------------------------------------
# Encoding and decoding with kafka-python, per kind


def kp_decode(cls, data: bytes, version: int):
    kind = kp_kind(cls)
    if kind == "message":
        # ApiMessage.decode, not ApiVersionsResponse's override: that one reads any body whose
        # error code is non-zero as v0 (its KIP-511 fallback), a policy rather than the codec.
        return ApiMessage.decode.__func__(cls, data, version=version)
    if kind == "data":
        return cls.decode(data, version=version, header=False)
    buf = io.BytesIO(data)
    decoded = cls.decode(buf, flexible=version == cls._flexible_versions[0])
    assert buf.tell() == len(data), f"kafka-python's {cls.__name__} left {len(data) - buf.tell()} bytes"
    return decoded


def kp_encode(obj, version: int, decoded: bool) -> bytes:
    kind = kp_kind(type(obj))
    if kind == "message":
        if decoded:
            # decoded.encode(version=N) raises AttributeError '_header' (kafka-python bug: decode
            # bypasses __init__, and the API_VERSION setter touches _header). Plain encode() avoids
            # it, except where a subclass override passes the version on (DeleteTopicsRequest's
            # does, always): call ApiMessage.encode itself, which writes the decoded version.
            return bytes(ApiMessage.encode(obj))
        return bytes(obj.encode(version=version))
    if kind == "data":
        return bytes(obj.encode(version=version, header=False))
    return bytes(obj.encode(flexible=version == type(obj)._flexible_versions[0]))


# ---------------------------------------------------------------------------------------------
# Cases


def layout_skip(name: str, version: int, cls) -> str | None:
    """Why (name, version) can't be compared, or None; fails on unexplained layout differences."""
    diffs = peers.diff_layouts(peers.our_fields(name, version), kp_layout(cls, version), names_match=names_match)
    exclude, _why = DIVERGENT.get((name, version), (set(), ""))
    unexplained = [d for d in diffs if not any(d.startswith(p + ".") for p in exclude)]
    if not unexplained:
        if exclude:
            assert diffs, f"{name} v{version}: listed in DIVERGENT but the layouts now agree"
        return None
    low, _high = kp_spec_versions(cls)
    if version < low:
        return (f"kafka-python bug: it accepts {name} v{version} (it forces every minimum version to 0) "
                f"but lays it out from Kafka 4.3's spec, which dropped v0-{low - 1}; its v{version} "
                f"differs from the real one: " + "; ".join(unexplained))
    pytest.fail(f"{name} v{version}: kafka-python's layout differs from ours:\n  " + "\n  ".join(unexplained))


def _cases():
    cases = []
    for name, cls in sorted(KP_CLASSES.items()):
        low, high = kp_versions(cls)
        ours = peers.our_versions(name)
        for version in range(low, high + 1):
            marks = []
            if ours is None:
                marks.append(pytest.mark.skip(reason=f"kafka-python has {name}; kafkawire's schemas have no such message"))
            elif not ours[0] <= version <= ours[1]:
                marks.append(pytest.mark.skip(
                    reason=f"kafka-python has {name} v{version}; kafkawire's schemas have v{ours[0]}-{ours[1]}"))
            cases.append(pytest.param(name, version, marks=marks, id=f"{name}-v{version}"))
    return cases


CASES = _cases()


@pytest.mark.parametrize(("name", "version"), CASES)
def test_kafka_python_roundtrip(name: str, version: int):
    cls = KP_CLASSES[name]
    skip = layout_skip(name, version, cls)
    if skip:
        pytest.skip(skip)
    exclude = frozenset(DIVERGENT.get((name, version), (set(), ""))[0])
    kw_cls = peers.kw_class(name)
    ours = peers.our_fields(name, version)

    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(peers.kw_strategy(name, version, exclude=exclude))
    def run(message):
        data = message.encode(version)

        decoded = kp_decode(cls, data, version)
        assert kp_to_kw(decoded, ours, cls._struct, kw_cls, version, name) == message, (
            f"kafka-python decoded {decoded!r} from {data.hex()}")
        assert kp_encode(decoded, version, decoded=True).hex() == data.hex(), (
            "kafka-python's re-encoding of our bytes differs")

        built = kw_to_kp(message, ours, cls._struct, cls, version, name)
        theirs = kp_encode(built, version, decoded=False)
        assert theirs.hex() == data.hex(), f"kafka-python encodes {built!r} differently"
        assert kw_cls.decode(theirs, version, exact=True) == message

    run()


def test_kafka_python_coverage():
    assert len(KP_CLASSES) >= 108, sorted(KP_CLASSES)
    runnable = [c for c in CASES if not c.marks]
    assert len(runnable) >= 400, len(runnable)

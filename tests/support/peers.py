"""Shared machinery for the differential tests against independent codecs (kio, kafka-python).

Three parts:

* our side: the specs in ``schemas/`` read directly (not through ``codegen``), reduced to the fields
  present at one version (``fields_at``), and bound to the generated kafkawire classes;
* a structural comparison (``diff_layouts``) between our layout at a version and a peer's, so a
  differential test only runs where both sides describe the same bytes, and says exactly where not;
* a Hypothesis strategy for kafkawire messages of one version (``kw_strategy``), built from the specs.

Peers have their own converters in their test modules; this module knows nothing about them.
"""
from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from functools import lru_cache

from hypothesis import strategies as st

from kafkawire import messages as kw_messages

from support.paths import SCHEMAS
ZERO_UUID = uuid.UUID(int=0)
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
PRIMITIVES = frozenset(INT_RANGES) | {"bool", "float64", "string", "bytes", "records", "uuid"}
_COMMENTS = re.compile(r"^\s*//.*$", re.M)


# ---------------------------------------------------------------------------------------------
# Specs


def parse_versions(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    text = text.strip()
    if text in ("", "none"):
        return None
    if text.endswith("+"):
        return int(text[:-1]), 32767
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def in_versions(version: int, text: str | None) -> bool:
    span = parse_versions(text)
    return span is not None and span[0] <= version <= span[1]


def load_json_spec(text: str) -> dict:
    """An upstream-format spec (comments allowed) with commonStructs resolved into the fields."""
    spec = json.loads(_COMMENTS.sub("", text))
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}

    def resolve(fields):
        for f in fields:
            inner = f["type"].removeprefix("[]")
            if "fields" not in f and inner in common:
                f["fields"] = common[inner]
            if "fields" in f:
                resolve(f["fields"])

    resolve(spec.get("fields", []))
    return spec


@lru_cache(maxsize=None)
def our_spec(name: str) -> dict:
    """The spec kafkawire.messages was generated from: schemas/, or its KIP-1178 overlay for Fetch."""
    overlay = SCHEMAS / "kip-1178" / f"{name}.json"
    return load_json_spec((overlay if overlay.exists() else SCHEMAS / f"{name}.json").read_text())


def valid_versions(spec: dict) -> tuple[int, int]:
    return parse_versions(spec["validVersions"])


def is_flexible(spec: dict, version: int) -> bool:
    return in_versions(version, spec.get("flexibleVersions"))


@dataclass(frozen=True)
class Field:
    """One field as laid out on the wire at one version."""

    name: str  # spec name, "PartitionMaxBytes"
    type: str  # "int32", "[]int32", "string", "[]FetchPartition", "ReplicaState"
    tag: int | None  # set only when the field is tagged at this version
    nullable: bool
    fields: tuple["Field", ...] | None  # struct or struct array
    default: object = None  # the spec's raw "default"
    attr: str | None = None  # kafkawire attribute name (our side only)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def inner(self) -> str:
        return self.type.removeprefix("[]")

    @property
    def is_struct(self) -> bool:
        return self.fields is not None

    @property
    def struct_name(self) -> str | None:
        return self.inner if self.fields is not None else None


def fields_at(json_fields: list[dict], version: int, attrs: dict | None = None) -> tuple[Field, ...]:
    """The fields of a spec struct present at ``version``, in spec order (tagged ones included)."""
    out = []
    for f in json_fields:
        if not in_versions(version, f["versions"]):
            continue
        tagged = in_versions(version, f.get("taggedVersions"))
        nested = None
        if "fields" in f:
            nested = fields_at(f["fields"], version, attrs)
        out.append(Field(
            name=f["name"], type=f["type"], tag=int(f["tag"]) if tagged else None,
            nullable=in_versions(version, f.get("nullableVersions")), fields=nested,
            default=f.get("default"),
            attr=None if attrs is None else attrs.get(id(f)),
        ))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# kafkawire binding


@lru_cache(maxsize=None)
def kw_class(name: str):
    return getattr(kw_messages, name)


def _bind_attrs(cls, json_fields: list[dict], attrs: dict, top) -> None:
    """Map each spec field (by id) to the kafkawire attribute, aligning spec order with _FIELDS."""
    if len(cls._FIELDS) != len(json_fields):
        raise AssertionError(f"{cls.__qualname__}: _FIELDS {cls._FIELDS} vs spec "
                             f"{[f['name'] for f in json_fields]}")
    for attr, f in zip(cls._FIELDS, json_fields):
        if attr.replace("_", "") != f["name"].lower():
            raise AssertionError(f"{cls.__qualname__}: attribute {attr} vs spec field {f['name']}")
        attrs[id(f)] = attr
        if "fields" in f:
            _bind_attrs(getattr(top, f["type"].removeprefix("[]")), f["fields"], attrs, top)


@lru_cache(maxsize=None)
def _our_attrs(name: str) -> dict:
    attrs: dict = {}
    cls = kw_class(name)
    _bind_attrs(cls, our_spec(name)["fields"], attrs, cls)
    return attrs


@lru_cache(maxsize=None)
def our_fields(name: str, version: int) -> tuple[Field, ...]:
    """Our layout of message ``name`` at ``version``, each field bound to its kafkawire attribute."""
    return fields_at(our_spec(name)["fields"], version, _our_attrs(name))


def kw_struct_class(top_name: str, field: Field):
    return getattr(kw_class(top_name), field.struct_name)


def our_versions(name: str) -> tuple[int, int] | None:
    if name not in kw_messages._MODULES:
        return None
    return valid_versions(our_spec(name))


# ---------------------------------------------------------------------------------------------
# Structural comparison


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


def align(ours: tuple[Field, ...], theirs: tuple[Field, ...]) -> list[tuple[Field | None, Field | None]]:
    """Pair our fields with a peer's: untagged ones by position, tagged ones by tag number."""
    ours_plain = [f for f in ours if f.tag is None]
    theirs_plain = [f for f in theirs if f.tag is None]
    pairs = [(ours_plain[i] if i < len(ours_plain) else None,
              theirs_plain[i] if i < len(theirs_plain) else None)
             for i in range(max(len(ours_plain), len(theirs_plain)))]
    ours_tags = {f.tag: f for f in ours if f.tag is not None}
    theirs_tags = {f.tag: f for f in theirs if f.tag is not None}
    pairs += [(ours_tags.get(tag), theirs_tags.get(tag)) for tag in sorted(set(ours_tags) | set(theirs_tags))]
    return pairs


def diff_layouts(ours: tuple[Field, ...], theirs: tuple[Field, ...], path: str = "",
                 names_match=None) -> list[str]:
    """Where two layouts of one struct at one version describe different bytes.

    ``theirs`` is the peer's layout normalised to the same ``Field`` shape (type names as in the
    spec, struct names free). Each difference is reported as ``Path.To.Field: what differs``, the
    path in our spec's names. Field names are compared through ``names_match(ours, theirs)``: they
    do not reach the wire, but a mismatch there usually means the two sides disagree on order.
    """
    out = []
    names_match = names_match or (lambda a, b: _norm(a) == _norm(b))
    for a, b in align(ours, theirs):
        if a is None:
            what = f"tagged field {b.name} (tag {b.tag}, {b.type})" if b.tag is not None else f"field {b.name} ({b.type})"
            out.append(f"{path}{b.name}: only the peer has {what}")
        elif b is None:
            what = f"tagged field {a.name} (tag {a.tag}, {a.type})" if a.tag is not None else f"field {a.name} ({a.type})"
            out.append(f"{path}{a.name}: only kafkawire has {what}")
        elif not names_match(a.name, b.name):
            out.append(f"{path}{a.name}: {a.name} ({a.type}) here, {b.name} ({b.type}) in the peer")
        else:
            out.extend(_diff_field(a, b, f"{path}{a.name}", names_match))
    return out


def _diff_field(a: Field, b: Field, where: str, names_match) -> list[str]:
    if a.is_array != b.is_array or a.is_struct != b.is_struct:
        return [f"{where}: {a.type} here, {b.type} in the peer"]
    if not a.is_struct and a.inner != b.inner:
        return [f"{where}: {a.type} here, {b.type} in the peer"]
    out = []
    # kio and kafka-python both type every uuid as optional (None is their zero uuid); no uuid is
    # nullable on the wire.
    if a.nullable != b.nullable and a.inner != "uuid":
        out.append(f"{where}: nullable={a.nullable} here, {b.nullable} in the peer")
    if a.is_struct:
        out.extend(diff_layouts(a.fields, b.fields, f"{where}.", names_match))
    return out


# ---------------------------------------------------------------------------------------------
# Strategy for kafkawire messages of one version


def _rarely(common, rare, one_in: int = 8):
    """``common``, or about one time in ``one_in`` ``rare`` (long values cost generation time)."""
    return st.integers(1, one_in).flatmap(lambda n: rare if n == 1 else common)


def _text(max_size: int):
    # Mostly short ASCII, sometimes multi-byte UTF-8 (byte and character lengths differ), rarely
    # past 127 bytes so compact lengths and tagged-field sizes take two-byte varints.
    return _rarely(st.one_of(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=max_size),
                             st.text(max_size=max_size)),
                   st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=126, max_size=300))


def binary():
    return _rarely(st.binary(max_size=12), st.binary(min_size=126, max_size=300))


def lists(elements, max_size: int, long_ok: bool = False):
    """Short lists; with ``long_ok`` (cheap elements) rarely 127-130 items, a two-byte count."""
    short = st.lists(elements, max_size=max_size)
    return (_rarely(short, st.lists(elements, min_size=127, max_size=130)) if long_ok else short).map(tuple)


def primitive_strategy(type_name: str, nullable: bool = False):
    if type_name in INT_RANGES:
        low, high = INT_RANGES[type_name]
        base = st.one_of(st.integers(low, high), st.sampled_from([low, high, -1, 0]).filter(
            lambda v: low <= v <= high))
    elif type_name == "bool":
        base = st.booleans()
    elif type_name == "float64":
        base = st.floats(allow_nan=False, allow_infinity=False)
    elif type_name == "string":
        base = _text(8)
    elif type_name in ("bytes", "records"):
        base = binary()
    elif type_name == "uuid":
        base = st.one_of(st.just(ZERO_UUID), st.uuids())
    else:
        raise AssertionError(f"unknown primitive {type_name}")
    return st.one_of(st.none(), base) if nullable else base


def default_value(field: Field, struct_cls=None):
    """Our decoded value for a field left at its spec default (tagged fields not on the wire)."""
    raw = field.default
    if field.is_array:
        return None if raw == "null" else ()
    if field.is_struct:
        return None if raw == "null" else struct_cls()
    t = field.inner
    if raw == "null":
        return None
    if t in INT_RANGES:
        if raw in (None, ""):
            return 0
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if t == "bool":
        return raw in (True, "true")
    if t == "float64":
        return float(raw) if raw not in (None, "") else 0.0
    if t == "string":
        return raw or ""
    if t in ("bytes", "records"):
        return b""
    if t == "uuid":
        return uuid.UUID(raw) if raw else ZERO_UUID
    raise AssertionError(t)


def kw_strategy(top_name: str, version: int, cls=None, fields=None, depth: int = 0,
                max_items: int = 2, exclude=frozenset(), path: str = ""):
    """Random kafkawire objects of ``top_name`` holding only fields present at ``version``.

    ``exclude`` names dotted struct paths whose arrays must stay empty (or, for a lone struct,
    at its default), for layouts a peer describes differently.
    """
    if cls is None:
        cls = kw_class(top_name)
        fields = our_fields(top_name, version)
    kwargs = {}
    for f in fields:
        where = path + f.name
        if f.is_struct:
            inner_cls = kw_struct_class(top_name, f)
            if where in exclude:
                if f.is_array:
                    kwargs[f.attr] = st.just(()) if not f.nullable else st.sampled_from([(), None])
                continue
            item = kw_strategy(top_name, version, inner_cls, f.fields, depth + 1,
                               max_items=1 if depth >= 1 else max_items, exclude=exclude,
                               path=where + ".")
            s = lists(item, max_size=max_items if depth < 2 else 1) if f.is_array else item
        elif f.is_array:
            s = lists(primitive_strategy(f.inner), max_size=3, long_ok=True)
        else:
            s = primitive_strategy(f.inner)
        if f.nullable:
            s = st.one_of(st.none(), s)
        if f.tag is not None:
            s = st.one_of(st.just(default_value(f, kw_struct_class(top_name, f) if f.is_struct else None)), s)
        kwargs[f.attr] = s
    return st.builds(cls, **kwargs)

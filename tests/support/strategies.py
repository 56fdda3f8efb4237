"""Hypothesis strategies for generated messages, derived from the spec model (``codegen.model``).

``message_strategy(cls_or_spec, version)`` draws a message that is valid at ``version``: only the
fields the version carries get random values (the others keep their defaults, which is the only
value a non-ignorable absent field may hold), null only where ``nullableVersions`` has the version,
integers within their type's range, finite floats, uuids, strings and bytes (mostly short, sometimes a
few hundred bytes), arrays of 0-3 elements (arrays of primitives sometimes of 128-200, so that counts
take two varint bytes), nested structs recursively.

``reference_encode`` is an independent encoder written from the wire rules (not from the generated
code): the oracle for the byte-level properties, and a way to write tag sections in any order.
``plain`` turns a message into nested plain data, for comparisons that do not rely on ``__eq__``.
"""
from __future__ import annotations

import importlib
import random
import struct as _struct
from functools import lru_cache
from pathlib import Path

from hypothesis import strategies as st

from codegen.defaults import NULL, parse_default
from codegen.generate import DEFAULT_OVERLAYS
from codegen.model import INTEGER_RANGES, MessageSpec, StructSpec
from codegen.parse import parse_directory

from support.paths import SCHEMAS

# Size limits: small, so that thousands of message-versions run quickly.
MAX_ARRAY = 3
MAX_TEXT_CHARS = 12  # at most 48 UTF-8 bytes
MAX_BYTES = 16
MAX_LONG_BYTES = 300  # the occasional long string or bytes value, for two-byte varint lengths
MAX_LONG_ARRAY = 200  # the occasional long array of primitives, for two-byte varint counts
MAX_TAG = (1 << 31) - 1  # tags are unsigned varints read into a Java int
MAX_UNKNOWN_TAGS = 3

# Package of generated codecs -> the directory of specs it was generated from, and its overlays.
_SPEC_DIRS: dict[str, tuple[Path, tuple[Path, ...]]] = {"kafkawire.messages": (SCHEMAS, DEFAULT_OVERLAYS)}


def register_specs(package: str, specs_dir: Path, overlays: tuple[Path, ...] = ()) -> None:
    """Tell ``spec_of`` where the specs of a generated package are."""
    _SPEC_DIRS[package] = (Path(specs_dir), tuple(overlays))


@lru_cache(maxsize=None)
def load_specs(specs_dir: Path, overlays: tuple[Path, ...] = ()) -> dict[str, MessageSpec]:
    """Every spec with versions in ``specs_dir`` (with ``overlays``) by message name (removed APIs left out:
    they generate no class)."""
    return {spec.name: spec for spec in parse_directory(Path(specs_dir), overlays) if not spec.removed}


def our_specs() -> list[MessageSpec]:
    """The specs kafkawire.messages is generated from: schemas/ with its overlays, removed APIs left out."""
    return list(load_specs(SCHEMAS, DEFAULT_OVERLAYS).values())


def spec_of(cls) -> MessageSpec:
    """The spec a generated message class was made from."""
    package = cls.__module__.rpartition(".")[0]
    if package not in _SPEC_DIRS:
        raise LookupError(f"no specs registered for package {package!r} (see register_specs)")
    return load_specs(*_SPEC_DIRS[package])[cls.NAME]


def class_of(spec: MessageSpec, package: str = "kafkawire.messages"):
    """The generated class for ``spec`` in ``package``."""
    return importlib.import_module(package).message_class(spec.name)


def _resolve(cls_or_spec, package: str):
    if isinstance(cls_or_spec, MessageSpec):
        return cls_or_spec, class_of(cls_or_spec, package)
    return spec_of(cls_or_spec), cls_or_spec


def struct_class(cls, spec: MessageSpec, name: str):
    """The generated class of struct ``name`` of ``spec`` (the message class for the message itself)."""
    return cls if name == spec.name else getattr(cls, name)


def carried(spec: MessageSpec, field, version: int) -> str | None:
    """How ``field`` is carried at ``version``: "tagged", "plain", or None when absent."""
    if version not in field.versions:
        return None
    if version in field.tagged_versions:
        # Tagged fields exist only in flexible versions (the tag section).
        return "tagged" if version in spec.flexible_versions else None
    return "plain"


# --------------------------------------------------------------------------------------------------
# Strategies


def _repeat_text(text: str, times: int) -> str:
    per = max(len(text.encode("utf-8")), 1)
    return text * min(times, MAX_LONG_BYTES // per)


def _repeat_bytes(raw: bytes, times: int) -> bytes:
    return raw * min(times, MAX_LONG_BYTES // max(len(raw), 1))


def text_strategy() -> st.SearchStrategy[str]:
    """Any code point UTF-8 can encode (no lone surrogates): mostly short, sometimes a few hundred
    bytes (built by repetition, which is cheap to draw) so that lengths need a two-byte varint."""
    short = st.text(st.characters(codec="utf-8"), max_size=MAX_TEXT_CHARS)
    long = st.builds(_repeat_text, st.text(st.characters(codec="utf-8"), min_size=1, max_size=4),
                     st.integers(16, MAX_LONG_BYTES))
    return st.one_of(short, short, short, long)


def bytes_strategy(max_size: int = MAX_BYTES) -> st.SearchStrategy[bytes]:
    """Small bytes, sometimes a few hundred (by repetition)."""
    short = st.binary(max_size=max_size)
    long = st.builds(_repeat_bytes, st.binary(min_size=1, max_size=4), st.integers(64, MAX_LONG_BYTES))
    return st.one_of(short, short, short, long)


def array_strategy(element: st.SearchStrategy, long: bool) -> st.SearchStrategy[list]:
    """0-3 elements; with ``long`` (arrays of primitives), sometimes 128-200 elements (a short list
    repeated) so that counts need a two-byte varint."""
    short = st.lists(element, max_size=MAX_ARRAY)
    if not long:
        return short
    repeated = st.builds(lambda items, n: (items * n)[:n], st.lists(element, min_size=1, max_size=2),
                         st.integers(128, MAX_LONG_ARRAY))
    return st.one_of(short, short, short, short, short, repeated)


def unknown_tags_strategy(struct: StructSpec, min_size: int = 0) -> st.SearchStrategy[dict]:
    """Tags the struct's spec never uses (in any version; known tags are contiguous from 0, so these
    are all above them), with random raw values."""
    known = {f.tag for f in struct.fields if f.tag is not None}
    top = max(known, default=-1)
    tags = st.one_of(st.integers(top + 1, top + 3), st.integers(top + 1, MAX_TAG))
    return st.dictionaries(tags, bytes_strategy(8), min_size=min_size, max_size=MAX_UNKNOWN_TAGS)


class _Builder:
    def __init__(self, spec: MessageSpec, cls, version: int, unknown_tags: bool):
        self.spec, self.cls, self.version = spec, cls, version
        self.flexible = version in spec.flexible_versions
        self.unknown_tags = unknown_tags and self.flexible
        self.structs = spec.structs()
        self.cache: dict[str, st.SearchStrategy] = {}

    def struct(self, name: str, top: bool = False) -> st.SearchStrategy:
        if name in self.cache:
            return self.cache[name]
        struct = self.structs[name]
        kwargs = {}
        for f in struct.fields:
            if carried(self.spec, f, self.version) is not None:
                kwargs[f.snake_name] = self.field(f)
        if self.unknown_tags:
            if top:  # always some on the message itself
                kwargs["unknown_tags"] = unknown_tags_strategy(struct, min_size=1)
            else:  # on nested structs: none (None) or some
                kwargs["unknown_tags"] = st.none() | unknown_tags_strategy(struct, min_size=1)
        strategy = st.builds(struct_class(self.cls, self.spec, name), **kwargs)
        self.cache[name] = strategy
        return strategy

    def field(self, f) -> st.SearchStrategy:
        strategy = self.value(f.type)
        if self.version in f.nullable_versions:
            strategy = st.none() | strategy
        return strategy

    def value(self, t) -> st.SearchStrategy:
        kind = t.kind
        if kind in INTEGER_RANGES:
            low, high = INTEGER_RANGES[kind]
            return st.integers(low, high)
        if kind == "bool":
            return st.booleans()
        if kind == "float64":
            return st.floats(allow_nan=False, allow_infinity=False)
        if kind == "uuid":
            return st.uuids(allow_nil=True)
        if kind == "string":
            return text_strategy()
        if kind in ("bytes", "records"):
            return bytes_strategy()
        if kind == "array":
            return array_strategy(self.value(t.element), long=t.element.kind != "struct")
        if kind == "struct":
            return self.struct(t.struct)
        raise AssertionError(f"unknown type {t}")


_STRATEGIES: dict[tuple, tuple[MessageSpec, st.SearchStrategy]] = {}


def message_strategy(cls_or_spec, version: int, *, unknown_tags: bool = False,
                     package: str = "kafkawire.messages") -> st.SearchStrategy:
    """Messages valid at ``version``, for a generated class or a ``MessageSpec`` (class from ``package``).

    With ``unknown_tags`` (flexible versions only), the message always carries unknown tagged fields
    and each nested struct may: tags the struct's spec does not use, with random raw values.
    """
    spec, cls = _resolve(cls_or_spec, package)
    low, high = cls.VALID_VERSIONS
    if not low <= version <= high:
        raise ValueError(f"{cls.NAME} has no version {version}")
    key = (id(spec), cls, version, unknown_tags)  # MessageSpec is unhashable; the entry keeps it alive
    if key not in _STRATEGIES:
        _STRATEGIES[key] = (spec, _Builder(spec, cls, version, unknown_tags).struct(spec.name, top=True))
    return _STRATEGIES[key][1]


# --------------------------------------------------------------------------------------------------
# Reference encoder


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_FIXED = {"bool": ">?", "int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I",
          "int64": ">q", "float64": ">d"}


def _is_default(field, value) -> bool:
    default = parse_default(field)
    if default is NULL:
        return value is None
    if value is None:
        return False
    if default == "struct":
        return plain(value) == plain(type(value)())
    kind = field.type.kind
    if kind == "array":
        return len(value) == 0
    if kind in ("bytes", "records"):
        return bytes(value) == b""
    return value == default


def reference_encode(message, version: int, *, spec: MessageSpec | None = None,
                     shuffle: random.Random | None = None) -> bytes:
    """``message`` written at ``version`` from the spec's wire rules.

    Tag sections are sorted by tag, or put in the order ``shuffle`` picks (valid, not canonical).
    Assumes the message is valid at that version (as ``message_strategy`` draws them).
    """
    spec = spec or spec_of(type(message))
    structs = spec.structs()
    flexible = version in spec.flexible_versions

    def write_struct(out: bytearray, name: str, value) -> None:
        tags: list[tuple[int, bytes]] = []
        for f in structs[name].fields:
            how = carried(spec, f, version)
            if how is None:
                continue
            item = getattr(value, f.snake_name)
            nullable = version in f.nullable_versions
            compact = flexible if f.flexible_versions is None else version in f.flexible_versions
            if how == "tagged":
                if not _is_default(f, item):
                    data = bytearray()
                    write_value(data, f.type, item, compact, nullable)
                    tags.append((f.tag, bytes(data)))
            else:
                write_value(out, f.type, item, compact, nullable)
        if flexible:
            tags += [(tag, bytes(data)) for tag, data in (value.unknown_tags or {}).items()]
            tags.sort()
            if shuffle is not None:
                shuffle.shuffle(tags)
            out += _uvarint(len(tags))
            for tag, data in tags:
                out += _uvarint(tag) + _uvarint(len(data)) + data
        elif value.unknown_tags:
            raise ValueError(f"unknown tags in {name} at non-flexible version {version}")

    def length(out: bytearray, n: int | None, compact: bool, classic_format: str) -> None:
        if compact:
            out += _uvarint(0 if n is None else n + 1)
        else:
            out += _struct.pack(classic_format, -1 if n is None else n)

    def write_value(out: bytearray, t, item, compact: bool, nullable: bool) -> None:
        kind = t.kind
        if item is None and kind in ("string", "bytes", "records", "array", "struct") and not nullable:
            raise ValueError(f"null in a non-nullable {t}")
        if kind in _FIXED:
            out += _struct.pack(_FIXED[kind], item)
        elif kind == "uuid":
            out += item.bytes
        elif kind == "string":
            raw = None if item is None else item.encode("utf-8")
            length(out, None if raw is None else len(raw), compact, ">h")
            out += raw or b""
        elif kind in ("bytes", "records"):
            raw = None if item is None else bytes(item)
            length(out, None if raw is None else len(raw), compact, ">i")
            out += raw or b""
        elif kind == "array":
            length(out, None if item is None else len(item), compact, ">i")
            for element in item or ():
                write_value(out, t.element, element, compact, False)
        elif kind == "struct":
            if nullable:
                out += b"\xff" if item is None else b"\x01"
            if item is not None:
                write_struct(out, t.struct, item)
        else:
            raise AssertionError(f"unknown type {t}")

    out = bytearray()
    write_struct(out, spec.name, message)
    return bytes(out)


# --------------------------------------------------------------------------------------------------
# Comparison


def plain(value):
    """A message or struct as nested plain data: dicts of fields (with ``unknown_tags`` as a dict of
    bytes), lists for arrays, bytes for bytes-like values."""
    fields = getattr(type(value), "_FIELDS", None)
    if fields is not None:
        data = {name: plain(getattr(value, name)) for name in fields}
        data["unknown_tags"] = {tag: bytes(raw) for tag, raw in (value.unknown_tags or {}).items()}
        return data
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value

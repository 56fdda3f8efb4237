"""Decoded message bodies as row values: Arrow struct values, JSON text and error codes.

The shapes come from ``kafkawire.messages.message_schemas.SCHEMAS`` (generated with the codecs): a message
is the union of its fields over all versions, and a field the decoded version does not carry is null.
For each (message, version) the converters are compiled once into plain Python functions, one per
struct of the message, so converting a message costs attribute reads and tuple building, with no
walk over the schema.

- ``to_value(message, version)``: a tuple per struct (in schema order), lists for arrays, ``bytes``
  for bytes and records, text for uuids; what ``pyarrow.array(..., type=arrow_type(name))`` takes.
- ``to_json(message, version)``: JSON text of the fields the version carries; records as
  ``{"records_bytes": N}``, bytes as base64, uuids as text.
- ``arrow_type(name)``, ``error_codes(message)``, ``top_error_code(message, version)``.
"""
from __future__ import annotations

import base64
import json
import keyword
import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kafkawire.codec.primitives import ABSENT
from kafkawire.messages import message_class
from kafkawire.messages.message_schemas import SCHEMAS, FieldSchema, MessageSchema

if TYPE_CHECKING:  # Arrow is imported where Arrow types are made: `kafkawire show` never needs it
    import pyarrow as pa

__all__ = ["SCHEMAS", "Converter", "converter", "to_value", "to_json", "arrow_type", "error_codes",
           "top_error_code", "field_present", "field_versions", "has_field", "versions_contain"]

UNKNOWN_TAGS = "unknown_tags"
TAGGED_FIELDS = "tagged fields"  # the type of unknown_tags
_ERROR_CODE_TYPE = "int16"


def versions_contain(text: str, version: int) -> bool:
    """Whether a spec version range ("3+", "0-12", "5", "none") contains ``version``."""
    if text.endswith("+"):
        return version >= int(text[:-1])
    if "-" in text:
        low, high = text.split("-", 1)
        return int(low) <= version <= int(high)
    return text != "none" and version == int(text)


def field_present(field: FieldSchema, version: int) -> bool:
    """Whether a schema field is on the wire at ``version`` (its ``versions``)."""
    return versions_contain(field["versions"], version)


@lru_cache(maxsize=None)
def field_versions(name: str, path: tuple[str, ...]) -> str | None:
    """The versions text of the field at ``path`` (attribute names, through structs and arrays of
    structs) in message ``name``, None when the message has no such field:
    ``field_versions("FetchRequest", ("topics", "topic_id")) == "13+"``."""
    node: MessageSchema | FieldSchema = _schema(name)
    for depth, part in enumerate(path):
        found = next((f for f in node["fields"] if f["name"] == part), None)
        if found is None:
            return None
        if depth == len(path) - 1:
            return found["versions"]
        if "fields" not in found:  # not a struct, nor an array of structs
            return None
        node = found
    raise ValueError("an empty field path")


def has_field(name: str, path: tuple[str, ...], version: int) -> bool:
    """Whether message ``name`` at ``version`` carries the field at ``path`` (see field_versions)."""
    versions = field_versions(name, path)
    return versions is not None and versions_contain(versions, version)


# ---- Arrow types ----------------------------------------------------------------------------------

# Kafka type -> pyarrow's type factory (unsigned types widened to the next signed one, uuids as text)
_ARROW_ATOMS = {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint16": "int32",
                "uint32": "int64", "float64": "float64", "bool": "bool_", "string": "string", "uuid": "string",
                "bytes": "binary", "records": "binary"}


def _arrow_struct(fields: list[FieldSchema]) -> pa.DataType:
    """The Arrow struct of a schema's fields, every one nullable (null: not in the decoded version)."""
    import pyarrow as pa

    return pa.struct([pa.field(f["name"], _arrow_field_type(f)) for f in fields])


def _arrow_field_type(f: FieldSchema) -> pa.DataType:
    import pyarrow as pa

    kafka_type = f["type"]
    if kafka_type == TAGGED_FIELDS:
        return pa.map_(pa.int32(), pa.binary())
    array = kafka_type.startswith("[]")
    if "fields" in f:
        element = _arrow_struct(f["fields"])
    else:
        try:
            element = getattr(pa, _ARROW_ATOMS[kafka_type[2:] if array else kafka_type])()
        except KeyError:
            raise ValueError(f"no Arrow type for Kafka type {kafka_type!r}") from None
    return pa.list_(pa.field("element", element)) if array else element


@lru_cache(maxsize=None)
def arrow_type(name: str) -> pa.DataType:
    """The Arrow struct type of message ``name`` (what ``to_value`` produces values for)."""
    return _arrow_struct(_schema(name)["fields"])


def _schema(name: str) -> MessageSchema:
    try:
        return SCHEMAS[name]
    except KeyError:
        raise KeyError(f"no schema for message {name!r}") from None


# ---- converters -----------------------------------------------------------------------------------

class Converter:
    """The compiled converters of one message at one version."""

    __slots__ = ("name", "version", "value", "json")

    def __init__(self, name: str, version: int, value, json_text):
        self.name = name
        self.version = version
        self.value = value      # message -> tuple
        self.json = json_text   # message -> JSON text


_CONVERTERS: dict[tuple[str, int], Converter] = {}


def converter(name: str, version: int) -> Converter:
    """The converter of message ``name`` at ``version``, compiled on first use."""
    key = (name, version)
    found = _CONVERTERS.get(key)
    if found is None:
        low, high = message_class(name).VALID_VERSIONS
        if not low <= version <= high:
            raise ValueError(f"{name} has no version {version} (valid: {low}-{high})")
        found = _CONVERTERS[key] = _Compiler(name, version).compile()
    return found


def to_value(message, version: int) -> tuple:
    return converter(message.NAME, version).value(message)


def to_json(message, version: int) -> str:
    return converter(message.NAME, version).json(message)


# Helpers the compiled JSON writers call. They write JSON text directly (no dict per struct, no
# json.dumps over the whole tree), which is much faster for large messages (docs/performance.md).
_json_string = json.encoder.encode_basestring  # quoted and escaped, non-ASCII kept


def _json_bytes(data) -> str:
    return '"' + base64.b64encode(data).decode("ascii") + '"'


def _json_float(value: float) -> str:
    """JSON has no NaN or infinities: those become their text."""
    return float.__repr__(value) if math.isfinite(value) else f'"{value}"'


def _json_bool(value) -> str:
    return "true" if value else "false"


def _json_uuid(value) -> str:
    return f'"{value}"'


def _json_records(data) -> str:
    """A records field is summarised by its size: the batches go to their own tables."""
    return f'{{"records_bytes":{len(data)}}}'


def _json_tags(tags: dict) -> str:
    return "{" + ",".join(f'"{tag}":{_json_bytes(raw)}' for tag, raw in sorted(tags.items())) + "}"


_JSON_HELPERS = {"_json_string": _json_string, "_json_bytes": _json_bytes, "_json_float": _json_float,
                 "_json_bool": _json_bool, "_json_uuid": _json_uuid, "_json_records": _json_records,
                 "_json_tags": _json_tags}


class _Compiler:
    """Writes the source of one (message, version)'s converters: for each struct of the message a
    ``_vN(o)`` returning its tuple and a ``_jN(o)`` returning its JSON text.

    A struct-typed field left at its default holds ABSENT in a private slot until read (reading it
    builds an empty struct): the converters read the slot and use the default's value, computed once.
    """

    def __init__(self, name: str, version: int):
        self.name = name
        self.version = version
        self.top = message_class(name)
        schema = _schema(name)
        tags = next((f for f in schema["fields"] if f["name"] == UNKNOWN_TAGS), None)
        self.flexible = tags is not None and field_present(tags, version)
        self.functions: list[str] = []
        self.defaults: list[tuple[str, type, str, str]] = []  # (name, struct class, value fn, json fn)
        self.count = 0

    def compile(self) -> Converter:
        value_fn, json_fn = self.struct(_schema(self.name), self.top)
        source = "\n\n".join(self.functions)
        namespace: dict[str, Any] = dict(_JSON_HELPERS, _ABSENT=ABSENT)  # exec's: helpers in, functions out
        exec(compile(source, f"<converters {self.name} v{self.version}>", "exec"), namespace)
        for name, cls, value_child, json_child in self.defaults:
            namespace[f"{name}v"] = namespace[value_child](cls())
            namespace[f"{name}j"] = namespace[json_child](cls())
        return Converter(self.name, self.version, namespace[value_fn], namespace[json_fn])

    def struct(self, schema: MessageSchema | FieldSchema, cls) -> tuple[str, str]:
        number = self.count
        self.count += 1
        value_fn, json_fn = f"_v{number}", f"_j{number}"
        loads: list[str] = []
        values: list[str] = []
        json_lines: list[str] = []
        json_parts: list[str] = []
        for index, f in enumerate(schema["fields"]):
            name = f["name"]
            if name == UNKNOWN_TAGS:
                values.append("o.unknown_tags" if self.flexible else "None")
                continue
            if not field_present(f, self.version):
                values.append("None")
                continue
            local = f"x{index}"
            slot = _lazy_slot(cls, name)
            loads.append(f"{local} = {_attribute('o', slot or name)}")
            value_expr, json_expr = self.field(f, local, cls, slot is not None)
            values.append(value_expr)
            if json_expr == f"{{{local}}}":
                json_parts.append(f'"{name}":{json_expr}')
            else:  # f-string parts must not hold quotes: compute the text first
                json_lines.append(f"j{index} = {json_expr}")
                json_parts.append(f'"{name}":{{j{index}}}')
        loaded = "".join(f"    {line}\n" for line in loads)
        returned = f"({', '.join(values)},)" if values else "()"
        self.functions.append(f"def {value_fn}(o):\n{loaded}    return {returned}")
        text = "f'{{" + ",".join(json_parts) + "}}'"
        tags = ""
        if self.flexible:
            tags = ("    t = o.unknown_tags\n    if t:\n"
                    + ("        s = s[:-1] + ',\"unknown_tags\":' + _json_tags(t) + '}'\n" if json_parts
                       else "        s = '{\"unknown_tags\":' + _json_tags(t) + '}'\n"))
        computed = "".join(f"    {line}\n" for line in json_lines)
        self.functions.append(f"def {json_fn}(o):\n{loaded}{computed}    s = {text}\n{tags}    return s")
        return value_fn, json_fn

    def field(self, f: FieldSchema, x: str, cls, lazy: bool) -> tuple[str, str]:
        """(value expression, JSON text expression) of a field held in local ``x``; the JSON expression
        ``{x}`` (an integer, whose str() is its JSON) goes into the f-string as it is."""
        kafka_type = f["type"]
        if kafka_type.startswith("[]"):
            if "fields" in f:  # struct elements
                value_fn, json_fn = self.struct(f, getattr(self.top, kafka_type[2:], None))
                return (f"None if {x} is None else list(map({value_fn}, {x}))",
                        f"'null' if {x} is None else '[' + ','.join(map({json_fn}, {x})) + ']'")
            convert, helper = _ATOMS[kafka_type[2:]]
            # tuples of numbers or text are already what Arrow takes
            value = x if convert is None else f"None if {x} is None else [{convert}(e) for e in {x}]"
            if helper is None:  # integers: the list's str() is JSON (with a space after each comma)
                return value, f"'null' if {x} is None else str(list({x}))"
            return value, f"'null' if {x} is None else '[' + ','.join(map({helper}, {x})) + ']'"
        if "fields" in f:  # a struct
            struct_cls = getattr(self.top, kafka_type, None)
            value_fn, json_fn = self.struct(f, struct_cls)
            value = f"None if {x} is None else {value_fn}({x})"
            json_text = f"'null' if {x} is None else {json_fn}({x})"
            if lazy and struct_cls is not None:  # lazy: a generated struct class, for its defaults
                default = f"_D{len(self.defaults)}"
                self.defaults.append((default, struct_cls, value_fn, json_fn))
                value = f"{default}v if {x} is _ABSENT else {value}"
                json_text = f"{default}j if {x} is _ABSENT else {json_text}"
            return value, json_text
        convert, helper = _ATOMS[kafka_type]
        value = x if convert is None else f"None if {x} is None else {convert}({x})"
        return value, f"{{{x}}}" if helper is None else f"'null' if {x} is None else {helper}({x})"


def _lazy_slot(cls, name: str) -> str | None:
    """The private slot behind a struct field's property (see codec.primitives.struct_field)."""
    if cls is None or not isinstance(cls.__dict__.get(name), property):
        return None
    slot = f"_{name}"
    return slot if slot in cls.__slots__ else None


# Kafka type -> (conversion to the Arrow value or None, JSON text helper or None when str() is the JSON).
_INTEGER = (None, None)
_ATOMS = {
    "int8": _INTEGER, "int16": _INTEGER, "int32": _INTEGER, "int64": _INTEGER, "uint16": _INTEGER,
    "uint32": _INTEGER,
    "bool": (None, "_json_bool"),
    "string": (None, "_json_string"),
    "float64": (None, "_json_float"),
    "uuid": ("str", "_json_uuid"),
    "bytes": ("bytes", "_json_bytes"),
    "records": ("bytes", "_json_records"),
}


def _attribute(obj: str, name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"field name {name!r} is not an identifier")
    return f"getattr({obj}, {name!r})" if keyword.iskeyword(name) else f"{obj}.{name}"


# ---- error codes ----------------------------------------------------------------------------------

def _is_error_code(f: FieldSchema) -> bool:
    name = f["name"]
    return (name == "error_code" or name.endswith("_error_code")) and f["type"] == _ERROR_CODE_TYPE


def _error_plan(schema: MessageSchema | FieldSchema):
    """(error-code field names, [(field, is_array, child plan)]) for a struct, keeping only the
    children that hold error codes somewhere below; None when nothing does."""
    names = tuple(f["name"] for f in schema["fields"] if _is_error_code(f))
    children = []
    for f in schema["fields"]:
        if "fields" in f:  # a struct, or an array of structs
            plan = _error_plan(f)
            if plan is not None:
                children.append((f["name"], f["type"].startswith("[]"), plan))
    if not names and not children:
        return None
    return names, tuple(children)


@lru_cache(maxsize=None)
def _error_plan_of(name: str):
    return _error_plan(_schema(name))


def _collect(obj, plan, found: set) -> None:
    names, children = plan
    for name in names:
        code = getattr(obj, name)
        if code:
            found.add(code)
    for name, is_array, child in children:
        value = getattr(obj, name)
        if value is None:
            continue
        if is_array:
            for item in value:
                _collect(item, child, found)
        else:
            _collect(value, child, found)


def error_codes(message) -> list[int]:
    """Every distinct non-zero error code anywhere in ``message`` (int16 fields named ``error_code`` or
    ``*_error_code``), sorted."""
    plan = _error_plan_of(message.NAME)
    if plan is None:
        return []
    found: set = set()
    _collect(message, plan, found)
    return sorted(found)


@lru_cache(maxsize=None)
def _top_error_field(name: str) -> FieldSchema | None:
    return next((f for f in _schema(name)["fields"] if f["name"] == "error_code" and _is_error_code(f)), None)


def top_error_code(message, version: int) -> int | None:
    """The message's own ``error_code`` when its version carries one, else None."""
    f = _top_error_field(message.NAME)
    if f is None or not field_present(f, version):
        return None
    return message.error_code

"""Spark schemas of the messages, as data: what ``StructType.jsonValue()`` gives for each message.

A message's schema is the union of its fields over every valid version, named as the generated
classes' attributes, every field nullable (null in a row means "not in this message's version").
Structs expand inline, common structs included. Each field's metadata carries the spec's type text
and versions, so readers can tell which versions a field exists in without the spec.
"""
from __future__ import annotations

from .model import FieldSpec, FieldType, MessageSpec, StructSpec
from .parse import SpecError

SPARK_TYPES = {
    "int8": "byte",
    "int16": "short",
    "int32": "integer",
    "int64": "long",
    "uint16": "integer",
    "uint32": "long",
    "float64": "double",
    "bool": "boolean",
    "string": "string",
    "uuid": "string",
    "bytes": "binary",
    "records": "binary",
}
UNKNOWN_TAGS = "unknown_tags"
UNKNOWN_TAGS_TYPE = {"type": "map", "keyType": "integer", "valueType": "binary", "valueContainsNull": True}


def message_schema(spec: MessageSpec) -> dict:
    """The JSON form of the Spark StructType for ``spec``'s message."""
    return _Builder(spec).struct(spec.name, ())


class _Builder:
    def __init__(self, spec: MessageSpec):
        self.spec = spec
        self.structs: dict[str, StructSpec] = spec.structs()

    def struct(self, name: str, enclosing: tuple[str, ...]) -> dict:
        if name in enclosing:
            # A struct inside itself has no finite Spark type.
            raise SpecError(self.spec.source, " -> ".join(enclosing + (name,)), "recursive struct")
        struct = self.structs.get(name)
        if struct is None:
            raise SpecError(self.spec.source, name, f"struct {name} is not defined")
        fields = [self.field(f, enclosing + (name,)) for f in struct.fields]
        names = {f.snake_name for f in struct.fields}
        if len(names) != len(struct.fields) or UNKNOWN_TAGS in names:
            raise SpecError(self.spec.source, struct.path or name, "field names collide once in snake_case")
        if not self.spec.flexible_versions.empty:
            fields.append(_field(UNKNOWN_TAGS, UNKNOWN_TAGS_TYPE,
                                 {"kafka_type": "tagged fields", "versions": str(self.spec.flexible_versions)}))
        return {"type": "struct", "fields": fields}

    def field(self, f: FieldSpec, enclosing: tuple[str, ...]) -> dict:
        metadata = {"kafka_type": str(f.type), "versions": str(f.versions)}
        if not f.nullable_versions.empty:
            metadata["nullable_versions"] = str(f.nullable_versions)
        if not f.tagged_versions.empty:
            metadata["tagged_versions"] = str(f.tagged_versions)
            metadata["tag"] = f.tag
        return _field(f.snake_name, self.type(f.type, enclosing), metadata)

    def type(self, t: FieldType, enclosing: tuple[str, ...]):
        if t.kind == "array":
            return {"type": "array", "elementType": self.type(t.element, enclosing), "containsNull": True}
        if t.kind == "struct":
            return self.struct(t.struct, enclosing)
        return SPARK_TYPES[t.kind]


def _field(name: str, spark_type, metadata: dict) -> dict:
    return {"name": name, "type": spark_type, "nullable": True, "metadata": metadata}


def python_literal(value) -> str:
    """Compact Python source for JSON-like data (dicts, lists, strings, numbers, booleans, None)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{python_literal(k)}:{python_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(python_literal(item) for item in value) + "]"
    if isinstance(value, (str, bool, int, float)) or value is None:
        return repr(value)
    raise TypeError(f"not JSON-like data: {value!r}")

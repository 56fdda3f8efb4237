"""The messages' shapes as plain data, in the specs' own terms: each field's name (the generated
classes' attribute), Kafka type, versions, nullable and tagged versions, and a struct's fields inline.

A message's schema is the union of its fields over every valid version. Structs expand inline, common
structs included; flexible messages end with an ``unknown_tags`` field (type ``tagged fields``) over
their flexible versions. Readers derive what they need from it: the capture's Arrow types and row
converters (``kafkawire.capture.tables.bodies``), the Spark types (``kafkawire.capture_spark``), the
test kit's field layouts (``kafkawire.testing.layout``).
"""
from __future__ import annotations

from .model import FieldSpec, MessageSpec, StructSpec
from .parse import SpecError

UNKNOWN_TAGS = "unknown_tags"
TAGGED_FIELDS = "tagged fields"  # the type of ``unknown_tags``: tag -> raw bytes


def message_schema(spec: MessageSpec) -> dict:
    """``{"fields": [...]}`` for ``spec``'s message (see the module docstring)."""
    return _Builder(spec).struct(spec.name, ())


class _Builder:
    def __init__(self, spec: MessageSpec):
        self.spec = spec
        self.structs: dict[str, StructSpec] = spec.structs()

    def struct(self, name: str, enclosing: tuple[str, ...]) -> dict:
        if name in enclosing:
            # A struct inside itself has no finite shape.
            raise SpecError(self.spec.source, " -> ".join(enclosing + (name,)), "recursive struct")
        struct = self.structs.get(name)
        if struct is None:
            raise SpecError(self.spec.source, name, f"struct {name} is not defined")
        fields = [self.field(f, enclosing + (name,)) for f in struct.fields]
        names = {f.snake_name for f in struct.fields}
        if len(names) != len(struct.fields) or UNKNOWN_TAGS in names:
            raise SpecError(self.spec.source, struct.path or name, "field names collide once in snake_case")
        if not self.spec.flexible_versions.empty:
            fields.append({"name": UNKNOWN_TAGS, "type": TAGGED_FIELDS,
                           "versions": str(self.spec.flexible_versions)})
        return {"fields": fields}

    def field(self, f: FieldSpec, enclosing: tuple[str, ...]) -> dict:
        out: dict = {"name": f.snake_name, "type": str(f.type), "versions": str(f.versions)}
        if not f.nullable_versions.empty:
            out["nullable_versions"] = str(f.nullable_versions)
        if not f.tagged_versions.empty:
            out["tagged_versions"] = str(f.tagged_versions)
            out["tag"] = f.tag
        element = f.type.element if f.type.kind == "array" else f.type
        if element is not None and element.kind == "struct" and element.struct is not None:
            out["fields"] = self.struct(element.struct, enclosing)["fields"]
        return out


def python_literal(value) -> str:
    """Compact Python source for JSON-like data (dicts, lists, strings, numbers, booleans, None)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{python_literal(k)}:{python_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(python_literal(item) for item in value) + "]"
    if isinstance(value, (str, bool, int, float)) or value is None:
        return repr(value)
    raise TypeError(f"not JSON-like data: {value!r}")

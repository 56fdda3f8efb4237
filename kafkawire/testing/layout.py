"""What a generated message holds at one version, read from the generated package itself.

``kafkawire.messages.message_schemas`` describes every field of every message over all its versions: the
spec's type text, versions, nullable and tagged versions and tag. ``fields_at(cls, version)`` turns
that into the fields a version carries, each with the generated class of its struct, so the value
generators (``kafkawire.testing.values``) need neither the specs nor codegen at run time.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kafkawire.codec.base import Message

if TYPE_CHECKING:
    from kafkawire.messages.message_schemas import FieldSchema

__all__ = ["FieldLayout", "fields_at", "known_tags", "in_versions", "message_fields"]


def in_versions(version: int, text: str | None) -> bool:
    """``version`` in a spec range: "3+", "0-12", "7", or none (None, "none")."""
    if text is None or text == "none":
        return False
    if text.endswith("+"):
        return version >= int(text[:-1])
    low, _, high = text.partition("-")
    return int(low) <= version <= int(high or low)


@dataclass(frozen=True)
class FieldLayout:
    """One field as a version carries it."""

    attr: str  # the attribute of the generated class, "partition_max_bytes"
    kind: str  # a primitive ("int32", "string", "records", ...) or "struct"
    array: bool
    nullable: bool
    tagged: bool  # in the version's tag section
    struct: Any  # the generated class of a struct (or of an array's elements), None for primitives
    children: tuple[FieldSchema, ...] = ()  # the struct's schema fields, for the next level down


def _struct_class(top: type[Message], name: str) -> Any:
    return top if name == top.NAME else getattr(top, name)


def message_fields(cls: type[Message]) -> tuple[FieldSchema, ...]:
    """The schema fields of a message class (every version's: ``kafkawire.messages.message_schemas``)."""
    return _message_fields(cls.NAME)


@lru_cache(maxsize=None)
def _message_fields(name: str) -> tuple[FieldSchema, ...]:
    from kafkawire.messages.message_schemas import SCHEMAS
    return tuple(SCHEMAS[name]["fields"])


def fields_at(cls: Any, version: int, top: type[Message] | None = None,
              schema_fields: tuple[FieldSchema, ...] | None = None) -> list[FieldLayout]:
    """The fields ``cls`` (a message class, or with ``top`` and ``schema_fields`` one of its structs)
    carries at ``version``, in wire order (tagged fields among them, marked)."""
    top = top or cls
    flexible = top.FLEXIBLE_VERSIONS is not None and version >= top.FLEXIBLE_VERSIONS[0]
    out = []
    for schema_field in schema_fields if schema_fields is not None else message_fields(cls):
        text = schema_field["type"]
        if text == "tagged fields" or not in_versions(version, schema_field["versions"]):
            continue
        tagged = in_versions(version, schema_field.get("tagged_versions"))
        if tagged and not flexible:
            continue  # a tagged field exists only in flexible versions' tag sections
        array = text.startswith("[]")
        element = text[2:] if array else text
        is_struct = "fields" in schema_field
        out.append(FieldLayout(
            attr=schema_field["name"], kind="struct" if is_struct else element, array=array,
            nullable=in_versions(version, schema_field.get("nullable_versions")), tagged=tagged,
            struct=_struct_class(top, element) if is_struct else None,
            children=tuple(schema_field["fields"]) if is_struct else ()))
    return out


def known_tags(schema_fields) -> set[int]:
    """The tags a struct's spec uses, in any version (unknown tags must avoid them)."""
    return {f["tag"] for f in schema_fields if "tag" in f}

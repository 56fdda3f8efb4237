"""Layout step: what each struct looks like on the wire at one version.

For a (struct, version) pair this decides, field by field, the encoding the renderer writes code for:
fixed-width runs fused into one struct format, compact or classic lengths, nullability, the tag
section, and the fields absent at that version. Nothing here produces Python source.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from .defaults import NULL, parse_default
from .model import FIXED_FORMATS, FIXED_SIZES, FieldSpec, FieldType, MessageSpec, StructSpec

STRUCT_CODES = {name: code for name, code in FIXED_FORMATS.items()}


@dataclass
class ValueType:
    """How one value is encoded at one version."""

    kind: str  # fixed, uuid, string, bytes, records, array, struct
    compact: bool = False
    nullable: bool = False
    code: str = ""  # struct code, for fixed
    size: int = 0  # bytes, for fixed and uuid
    element: "ValueType | None" = None  # for array
    struct: str = ""  # struct class name, for struct
    child: str = ""  # the struct's reader version suffix, e.g. "v12", filled in by render
    child_write: str = ""  # the struct's writer version suffix
    version: int = 0  # the version this struct value is read at
    min_size: int = 1  # the fewest bytes one element can take (array allocation guard)
    inline: "StructLayout | None" = None  # for an array's struct element: read in the loop, no call


def slot_name(spec_field: FieldSpec) -> str:
    """Where the field's value lives: struct-typed fields with an empty-struct default sit in a private
    slot behind a property, so a default struct is only built when user code reads it."""
    return f"_{spec_field.snake_name}" if parse_default(spec_field) == "struct" else spec_field.snake_name


class _Slotted:
    """A laid-out field knows which slot holds its value (see slot_name)."""

    spec: FieldSpec

    @property
    def slot(self) -> str:
        return slot_name(self.spec)


@dataclass
class FieldLayout(_Slotted):
    spec: FieldSpec
    name: str  # snake_case attribute
    value: ValueType


@dataclass
class Run:
    """Consecutive fixed-width fields read and written with one struct format."""

    fields: list[FieldLayout]

    @property
    def format(self) -> str:
        return "".join(f.value.code for f in self.fields)

    @property
    def size(self) -> int:
        return sum(f.value.size for f in self.fields)


@dataclass
class Absent(_Slotted):
    """A field the version does not carry: read sets its default, write refuses a non-default value."""

    spec: FieldSpec
    name: str
    default: object  # Python value, NULL, or "struct"
    checked: bool  # write raises when the value is not the default (not ignorable)


@dataclass
class Tagged(_Slotted):
    spec: FieldSpec
    name: str
    tag: int
    value: ValueType
    default: object


@dataclass
class StructLayout:
    struct: StructSpec
    version: int
    flexible: bool
    items: list = field(default_factory=list)  # Run | FieldLayout, in wire order
    tagged: list[Tagged] = field(default_factory=list)
    absent: list[Absent] = field(default_factory=list)

    def min_size(self) -> int:
        """The fewest bytes this struct takes at this version (children's sizes must be filled in)."""
        total = 1 if self.flexible else 0
        for item in self.items:
            total += item.size if isinstance(item, Run) else item.value.min_size
        return total

    def uses_view(self) -> bool:
        """Whether this layout slices the memoryview itself (bytes or records fields)."""
        values = [f.value for f in self.items if not isinstance(f, Run)] + [t.value for t in self.tagged]
        for value in values:
            while value.kind == "array":
                value = value.element
            if value.kind in ("bytes", "records"):
                return True
        return False

    def children(self) -> list[ValueType]:
        """The struct values this layout reads, to lay out first."""
        found: list[ValueType] = []
        values = [f.value for item in self.items for f in (item.fields if isinstance(item, Run) else [item])]
        values += [t.value for t in self.tagged]
        for value in values:
            while value.kind == "array":
                value = value.element
            if value.kind == "struct":
                found.append(value)
        return found


def value_type(spec: MessageSpec, f: FieldSpec, version: int, force_flexible: bool = False) -> ValueType:
    flexible = force_flexible or version in spec.flexible_versions
    if f.flexible_versions is not None:
        flexible = version in f.flexible_versions
    nullable = version in f.nullable_versions
    return _value(f.type, flexible, nullable, version)


def _value(t: FieldType, flexible: bool, nullable: bool, version: int) -> ValueType:
    kind = t.kind
    if kind == "uuid":
        return ValueType("uuid", code="16s", size=16, min_size=16)
    if kind in FIXED_FORMATS:
        return ValueType("fixed", code=STRUCT_CODES[kind], size=FIXED_SIZES[kind], min_size=FIXED_SIZES[kind])
    if kind in ("string", "bytes", "records"):
        min_size = 1 if flexible else (2 if kind == "string" else 4)
        return ValueType(kind, compact=flexible, nullable=nullable, min_size=min_size)
    if kind == "array":
        element = _value(t.element, flexible, False, version)
        return ValueType("array", compact=flexible, nullable=nullable, element=element,
                         min_size=1 if flexible else 4)
    # A struct's own minimum is filled in by the renderer once the struct is laid out.
    return ValueType("struct", nullable=nullable, struct=t.struct, version=version, min_size=1)


def layout(spec: MessageSpec, struct: StructSpec, version: int) -> StructLayout:
    flexible = version in spec.flexible_versions
    result = StructLayout(struct, version, flexible)
    run: list[FieldLayout] = []
    for f in struct.fields:
        name = f.snake_name
        present = version in f.versions
        tagged = present and flexible and version in f.tagged_versions
        if not present or (version in f.tagged_versions and not flexible):
            result.absent.append(Absent(f, name, parse_default(f), checked=not f.ignorable))
            continue
        if tagged:
            result.tagged.append(Tagged(f, name, f.tag, value_type(spec, f, version, force_flexible=True),
                                        parse_default(f)))
            continue
        value = value_type(spec, f, version)
        item = FieldLayout(f, name, value)
        if value.kind in ("fixed", "uuid"):
            run.append(item)
            continue
        if run:
            result.items.append(Run(run))
            run = []
        result.items.append(item)
    if run:
        result.items.append(Run(run))
    result.tagged.sort(key=lambda t: t.tag)
    return result


def python_literal(value, kind: str) -> str:
    """Source text for a default value (not for NULL or struct defaults)."""
    if value is NULL:
        return "None"
    if isinstance(value, uuid.UUID):
        return "ZERO_UUID" if value.int == 0 else f"_uuid({str(value)!r})"
    if kind == "array":
        return "()"
    return repr(value)

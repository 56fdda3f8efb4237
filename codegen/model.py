"""The typed spec model: what a Kafka JSON message spec says, with no wire layout decided yet."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

MAX_VERSION = 0x7FFF  # upstream's Short.MAX_VALUE: "N+" means N..32767


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``low > high`` is the empty range ("none")."""

    low: int
    high: int

    NONE: ClassVar["Versions"]  # the empty range, set below

    @classmethod
    def parse(cls, text: str) -> "Versions":
        text = text.strip()
        if text == "none":
            return cls.NONE
        if text.endswith("+"):
            low = _version_number(text[:-1])
            return cls(low, MAX_VERSION)
        if "-" in text:
            low_text, high_text = text.split("-", 1)
            low, high = _version_number(low_text), _version_number(high_text)
            if low > high:
                raise ValueError(f"invalid version range {text!r}: low end above high end")
            return cls(low, high)
        number = _version_number(text)
        return cls(number, number)

    @property
    def empty(self) -> bool:
        return self.low > self.high

    @property
    def open_ended(self) -> bool:
        return not self.empty and self.high == MAX_VERSION

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    def intersect(self, other: "Versions") -> "Versions":
        low, high = max(self.low, other.low), min(self.high, other.high)
        return Versions(low, high) if low <= high else Versions.NONE

    def is_subset_of(self, other: "Versions") -> bool:
        return self.empty or (other.low <= self.low and self.high <= other.high)

    def __iter__(self):
        return iter(range(self.low, self.high + 1))

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high == MAX_VERSION:
            return f"{self.low}+"
        if self.low == self.high:
            return str(self.low)
        return f"{self.low}-{self.high}"


Versions.NONE = Versions(1, 0)


def _version_number(text: str) -> int:
    text = text.strip()
    if not text.isdigit():
        raise ValueError(f"invalid version {text!r}")
    number = int(text)
    if number > MAX_VERSION:
        raise ValueError(f"version {number} above {MAX_VERSION}")
    return number


# Fixed-width primitive types and their struct format characters.
FIXED_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
    "uuid": "16s",
}
FIXED_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
               "int64": 8, "float64": 8, "uuid": 16}
INTEGER_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}
# The Python type of each primitive's value, as the generated stubs (*.pyi) write it: they import UUID,
# Sequence and kafkawire.codec.base.Bytes (bytes, bytearray or memoryview; decode gives memoryview slices)
# under these underscore names, which no spec's struct can take.
PYTHON_TYPES = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "uuid": "_UUID",
    "string": "str",
    "bytes": "_Bytes",
    "records": "_Bytes",
}
VARIABLE_TYPES = ("string", "bytes", "records")
PRIMITIVE_TYPES = tuple(FIXED_FORMATS) + VARIABLE_TYPES
NULLABLE_KINDS = ("string", "bytes", "records", "array", "struct")
STRUCT_NAME = re.compile(r"[A-Z][A-Za-z0-9]*\Z")


@dataclass(frozen=True, slots=True)
class FieldType:
    """A field's type: a primitive, a struct name, or an array of either."""

    kind: str  # a primitive name, "array" or "struct"
    struct: str | None = None  # the struct's name, for kind "struct"
    element: "FieldType | None" = None  # for kind "array"

    @classmethod
    def parse(cls, text: str) -> "FieldType":
        text = text.strip()
        if text.startswith("[]"):
            element = cls.parse(text[2:])
            if element.kind == "array":
                raise ValueError(f"arrays of arrays are not supported: {text!r}")
            return cls("array", element=element)
        if text in PRIMITIVE_TYPES:
            return cls(text)
        if STRUCT_NAME.match(text):
            return cls("struct", struct=text)
        raise ValueError(f"unknown type {text!r}")

    @property
    def is_fixed(self) -> bool:
        return self.kind in FIXED_FORMATS

    @property
    def is_struct_like(self) -> bool:
        """A struct, or an array of structs: the types that may carry child fields."""
        return self.kind == "struct" or (self.kind == "array" and self.element.kind == "struct")

    @property
    def struct_name(self) -> str | None:
        if self.kind == "struct":
            return self.struct
        if self.kind == "array" and self.element.kind == "struct":
            return self.element.struct
        return None

    def __str__(self) -> str:
        if self.kind == "array":
            return f"[]{self.element}"
        return self.struct if self.kind == "struct" else self.kind


@dataclass(slots=True)
class FieldSpec:
    name: str
    type: FieldType
    versions: Versions
    nullable_versions: Versions = Versions.NONE
    tagged_versions: Versions = Versions.NONE
    tag: int | None = None
    default: str | None = None  # the spec's literal, or None for the type's built-in default
    ignorable: bool = False
    map_key: bool = False
    entity_type: str = "unknown"
    zero_copy: bool = False
    flexible_versions: Versions | None = None  # per-field override (string/bytes only)
    fields: list["FieldSpec"] | None = None  # inline struct definition
    path: str = ""  # "Message.Field.Child", for error messages

    @property
    def snake_name(self) -> str:
        return snake_case(self.name)


@dataclass(slots=True)
class StructSpec:
    name: str
    versions: Versions
    fields: list[FieldSpec]
    path: str = ""


@dataclass(slots=True)
class MessageSpec:
    """One spec file."""

    name: str
    type: str  # request, response, header, metadata, data
    valid_versions: Versions
    flexible_versions: Versions
    fields: list[FieldSpec]
    api_key: int | None = None
    deprecated_versions: Versions = Versions.NONE
    listeners: tuple[str, ...] = ()
    latest_version_unstable: bool = False
    common_structs: list[StructSpec] = field(default_factory=list)
    source: str = ""  # the file it came from
    unknown_keys: list[tuple[str, str]] = field(default_factory=list)  # (path, key) for validate

    @property
    def module_name(self) -> str:
        return snake_case(self.name)

    @property
    def removed(self) -> bool:
        """A removed API's spec (``"validVersions": "none"``): nothing to generate but its registry entry."""
        return self.valid_versions.empty

    def structs(self) -> dict[str, StructSpec]:
        """Every struct of the spec by name: the message itself, inline structs and common structs."""
        found: dict[str, StructSpec] = {self.name: StructSpec(self.name, self.valid_versions, self.fields, self.name)}
        for common in self.common_structs:
            found[common.name] = common

        def visit(fields: list[FieldSpec], parent_versions: Versions) -> None:
            for spec_field in fields:
                if spec_field.fields is not None and spec_field.type.struct_name:
                    versions = spec_field.versions.intersect(parent_versions)
                    found.setdefault(spec_field.type.struct_name,
                                     StructSpec(spec_field.type.struct_name, versions, spec_field.fields, spec_field.path))
                    visit(spec_field.fields, versions)

        visit(self.fields, self.valid_versions)
        for common in self.common_structs:
            visit(common.fields, common.versions)
        return found


def snake_case(name: str) -> str:
    """Upstream's CamelCase field name as a Python attribute: ``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    name = name.replace("KRaft", "Kraft")
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return name.lower()

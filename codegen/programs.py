"""Decode programs: each (struct, version) layout as plain Python data for the optional native decoder.

The generated readers are straight-line Python; kafkawire/codec/_decoder.c instead interprets one
program per (struct, version), built here from the same layouts the reader templates use, so the two
cannot drift apart. A program is a tuple

    (class, flexible, fields, defaults, tagged)

- ``fields``: ``(slot, value)`` in wire order;
- ``defaults``: ``(slot, constant)`` for the fields the version lacks and the tagged fields, stored
  before the tag section is read (exactly what the Python reader stores);
- ``tagged``: ``(tag, slot, value)`` sorted by tag;

and a value is ``(kind, flags)`` for a primitive, ``("array", flags, min_element_size, element)`` or
``("struct", flags, program)``. Flags are COMPACT, NULLABLE and TAG_NULL (a nullable struct in a tag
section, where a 0 marker byte also means null). Nothing here is evaluated: render writes the text
into the generated module, where the names resolve to its classes and earlier programs.
"""
from __future__ import annotations

from .defaults import NULL
from .layout import Run, StructLayout, ValueType, python_literal

COMPACT, NULLABLE, TAG_NULL = 1, 2, 4

# struct format code -> the program's kind name (the C side reads the same names).
_FIXED_KINDS = {"?": "bool", "b": "int8", "h": "int16", "H": "uint16", "i": "int32", "I": "uint32",
                "q": "int64", "d": "float64"}


def _flags(v: ValueType, tagged_struct: bool = False) -> int:
    flags = (COMPACT if v.compact else 0) | (NULLABLE if v.nullable else 0)
    if tagged_struct and v.kind == "struct" and v.nullable:
        flags |= TAG_NULL
    return flags


class ProgramWriter:
    """Writes the programs of one module; identical programs of a struct share one name."""

    PREFIX = "_P"

    def __init__(self, layouts: dict[tuple[str, int], StructLayout]):
        self.layouts = layouts
        self.names: dict[tuple[str, int], str] = {}
        self._by_text: dict[tuple[str, str], str] = {}
        self.lines: list[str] = []

    def name(self, struct: str, version: int) -> str:
        """The program variable of ``struct`` at ``version``, writing it (children first) if new."""
        key = (struct, version)
        if key in self.names:
            return self.names[key]
        text = self._program(self.layouts[key])
        name = self._by_text.get((struct, text))
        if name is None:
            name = f"{self.PREFIX}_{struct}_v{version}"
            self._by_text[(struct, text)] = name
            self.lines.append(f"{name} = {text}")
        self.names[key] = name
        return name

    def _program(self, laid: StructLayout) -> str:
        fields = []
        for item in laid.items:
            for f in item.fields if isinstance(item, Run) else [item]:
                fields.append(f"({f.slot!r}, {self._value(f.value)})")
        defaults = [f"({a.slot!r}, {_constant(a.default, a.spec.type.kind)})" for a in laid.absent]
        tagged = []
        if laid.flexible:
            defaults += [f"({t.slot!r}, {_constant(t.default, t.spec.type.kind)})" for t in laid.tagged]
            tagged = [f"({t.tag}, {t.slot!r}, {self._value(t.value, tagged_struct=True)})" for t in laid.tagged]
        parts = [f"    {laid.struct.name}, {laid.flexible}", block(fields), block(defaults), block(tagged)]
        return "(\n" + ",\n".join(parts) + ",\n)"

    def _value(self, v: ValueType, tagged_struct: bool = False) -> str:
        flags = _flags(v, tagged_struct)
        if v.kind == "fixed":
            return f"({_FIXED_KINDS[v.code]!r}, {flags})"
        if v.kind in ("uuid", "string", "bytes", "records"):
            return f"({v.kind!r}, {flags})"
        if v.kind == "array":
            return f"('array', {flags}, {max(v.element.min_size, 1)}, {self._value(v.element)})"
        if v.kind == "struct":
            return f"('struct', {flags}, {self.name(v.struct, v.version)})"
        raise ValueError(f"no program op for a {v.kind} value")


def _constant(default, kind: str) -> str:
    if default == "struct":
        return "_ABSENT"
    return "None" if default is NULL else python_literal(default, kind)


def block(items: list[str]) -> str:
    """A tuple literal, one item a line, indented inside the program's parentheses."""
    if not items:
        return "    ()"
    return "    (\n" + "".join(f"        {item},\n" for item in items) + "    )"


def render_programs(layouts: dict[tuple[str, int], StructLayout], message: str,
                    versions) -> tuple[list[str], list[tuple[int, str]]]:
    """The program assignments of a module (children before parents) and the message's program per
    version."""
    writer = ProgramWriter(layouts)
    top = [(version, writer.name(message, version)) for version in versions]
    return writer.lines, top

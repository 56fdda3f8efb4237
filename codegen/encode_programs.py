"""Encode programs: each (struct, version) layout as plain Python data for the optional native encoder.

kafkawire/codec/_encoder.c interprets one program per (struct, version), built here from the layouts
the writer templates use (and the decode programs beside them), so the encoders cannot drift apart.
A program is a tuple

    (class, flexible, fields, checks, tagged)

- ``fields``: ``(slot, value)`` in wire order, ``(slot, value, attribute)`` for a struct kept in a
  private slot behind a property (the writer reads the property, which builds the default struct);
- ``checks``: ``(slot, how, default)`` for the fields the version lacks whose non-default value the
  writer refuses;
- ``tagged``: ``(tag, slot, value, how, default)`` sorted by tag, written when the value differs from
  the default (for a struct defaulting to an empty one, ``default`` holds the ``(slot, how, default)``
  checks of the struct class's ``_is_default``);

with values as in the decode programs (codegen/programs.py), a struct value naming its encode
program. ``how`` says how the writer decides that a value differs from its default
(codegen/render.py's ``differs``): ``"null"`` (the default is null), ``"struct"`` (an empty struct),
``"empty"`` (arrays and bytes: null or not empty) or ``"eq"`` (compared with ``default``).
"""
from __future__ import annotations

from .defaults import NULL, parse_default
from .layout import Run, StructLayout, Tagged, python_literal, slot_name
from .model import FieldSpec
from .programs import ProgramWriter, block


def _how(spec_field: FieldSpec, default) -> str:
    if default is NULL:
        return "null"
    if default == "struct":
        return "struct"
    if spec_field.type.kind in ("array", "bytes"):
        return "empty"
    return "eq"


def _default(spec_field: FieldSpec, default) -> str:
    if default is NULL or default == "struct" or spec_field.type.kind in ("array", "bytes"):
        return "None"
    return python_literal(default, spec_field.type.kind)


class EncodeProgramWriter(ProgramWriter):
    """Writes the encode programs of one module (``_E_`` names)."""

    PREFIX = "_E"

    def _program(self, laid: StructLayout) -> str:
        fields = []
        for item in laid.items:
            for f in item.fields if isinstance(item, Run) else [item]:
                lazy = f", {f.name!r}" if f.slot != f.name else ""
                fields.append(f"({f.slot!r}, {self._value(f.value)}{lazy})")
        checks = [f"({a.slot!r}, {_how(a.spec, a.default)!r}, {_default(a.spec, a.default)})"
                  for a in laid.absent if a.checked]
        tagged = []
        if laid.flexible:
            tagged = [f"({t.tag}, {t.slot!r}, {self._value(t.value, tagged_struct=True)}, "
                      f"{_how(t.spec, t.default)!r}, {self._tag_default(t)})" for t in laid.tagged]
        parts = [f"    {laid.struct.name}, {laid.flexible}", block(fields), block(checks), block(tagged)]
        return "(\n" + ",\n".join(parts) + ",\n)"

    def _tag_default(self, t: Tagged) -> str:
        """A tagged struct's default is an empty struct: the checks of its class's ``_is_default``, for
        the encoder to run without calling it."""
        if t.default != "struct":
            return _default(t.spec, t.default)
        spec = self.layouts[(t.value.struct, t.value.version)].struct
        checks = [f"({slot_name(f)!r}, {_how(f, parse_default(f))!r}, {_default(f, parse_default(f))})"
                  for f in spec.fields]
        return "(" + "".join(f"{check}, " for check in checks) + ")"


def render_encode_programs(layouts: dict[tuple[str, int], StructLayout], message: str,
                           versions) -> tuple[list[str], list[tuple[int, str]]]:
    """The encode program assignments of a module (children before parents) and the message's program
    per version."""
    writer = EncodeProgramWriter(layouts)
    top = [(version, writer.name(message, version)) for version in versions]
    return writer.lines, top

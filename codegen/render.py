"""Render step: Jinja2 templates turn laid-out specs into Python modules.

Readers and writers are rendered per (struct, version); versions whose rendered code is identical
share one function, named after the lowest such version. Output is deterministic.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from .defaults import NULL, parse_default
from .layout import layout, python_literal, slot_name
from .model import PYTHON_TYPES, FieldSpec, FieldType, MessageSpec, StructSpec, snake_case
from .encode_programs import render_encode_programs
from .programs import render_programs
from .message_schema import message_schema, python_literal as schema_literal

TEMPLATES = Path(__file__).parent / "templates"
_PLACEHOLDER = "__FUNCTION__"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.filters["fmtname"] = format_name
    env.filters["run_target"] = lambda f, obj="self": f"u_{f.name}" if f.value.kind == "uuid" else f"{obj}.{f.name}"
    env.filters["write_arg"] = lambda f: f"self.{f.name}.bytes" if f.value.kind == "uuid" else f"self.{f.name}"
    env.filters["literal"] = python_literal
    env.filters["run_label"] = lambda run: " ".join(f"{f.name}:{f.value.code}" for f in run.fields)
    env.filters["differs"] = lambda item: differs(item.spec, item.default, f"self.{item.slot}")
    return env


def format_name(fmt: str) -> str:
    """A struct format as an identifier suffix ('?' for bool becomes '_'; the mapping is reversible)."""
    return fmt.replace("?", "_")


def differs(spec_field: FieldSpec, default, expr: str) -> str:
    """A Python expression that is true when ``expr`` is not the field's default."""
    kind = spec_field.type.kind
    if default is NULL:
        return f"{expr} is not None"
    if default == "struct":  # expr is the private slot, which holds ABSENT until a struct is set
        return f"({expr} is not _ABSENT and ({expr} is None or not {expr}._is_default()))"
    if kind in ("array", "bytes"):
        return f"({expr} is None or len({expr}) != 0)"
    return f"{expr} != {python_literal(default, kind)}"


def python_type(field_type: FieldType, owner: str) -> str:
    """The type a stub declares for a value of ``field_type`` (not None: see ``annotation``). Every struct
    of a module is an attribute of its message class ``owner``, as at run time."""
    if field_type.kind == "array":
        return f"_Sequence[{python_type(field_type.element, owner)}]"
    if field_type.kind == "struct":
        return f"{owner}.{field_type.struct}"
    return PYTHON_TYPES[field_type.kind]


def annotation(spec_field: FieldSpec, owner: str) -> str:
    """A field's type in the stub: ``| None`` if a version where the field exists lets it be null, or if
    it defaults to None (a ``records`` field does, as upstream's, even where it is not nullable)."""
    text = python_type(spec_field.type, owner)
    nullable = not spec_field.nullable_versions.intersect(spec_field.versions).empty
    return f"{text} | None" if nullable or parse_default(spec_field) is NULL else text


_STUB_LITERAL = re.compile(r"-?[0-9][0-9.e+-]*|True|False|None|b?'[^'\\]*'")


def stub_default(init_default: str) -> str:
    """The constructor default as a stub shows it: plain literals as they are, anything else ``...``."""
    return init_default if _STUB_LITERAL.fullmatch(init_default) else "..."


@dataclass
class ClassField:
    name: str
    slot: str
    init_default: str
    lazy: bool
    struct: str
    differs: str
    type: str  # the annotation in the stub

    @property
    def stub_default(self) -> str:
        return stub_default(self.init_default)


@dataclass
class ClassInfo:
    name: str
    qualname: str
    top: bool
    versions: str
    fields: list[ClassField]

    @property
    def doc(self) -> str:
        return f"{self.qualname}, versions {self.versions}."


class ModuleRenderer:
    """Renders one spec into one module's source."""

    def __init__(self, env: jinja2.Environment, spec: MessageSpec):
        self.env = env
        self.spec = spec
        self.structs = spec.structs()
        self.reader_template = env.get_template("reader.py.j2")
        self.writer_template = env.get_template("writer.py.j2")
        self.functions: list[str] = []
        self._readers: dict[tuple[str, int], str] = {}
        self._writers: dict[tuple[str, int], str] = {}
        self._min_sizes: dict[tuple[str, int], int] = {}
        self._layouts: dict[tuple[str, int], object] = {}
        self._views: dict[tuple[str, int], bool] = {}
        self._array_names: dict[tuple[str, int], set[str]] = {}  # arrays read in a reader's own code
        self._reader_texts: dict[tuple[str, str], str] = {}
        self._writer_texts: dict[tuple[str, str], str] = {}

    def resolve(self, struct_name: str, version: int) -> tuple[str, str]:
        """The (reader, writer) version suffixes for a struct at a version, rendering them if new."""
        key = (struct_name, version)
        if key in self._readers:
            return self._readers[key], self._writers[key]
        struct = self.structs[struct_name]
        laid = layout(self.spec, struct, version)
        uses_view = laid.uses_view()
        for child in laid.children():
            child.child, child.child_write = self.resolve(child.struct, child.version)
            child_key = (child.struct, child.version)
            if not child.nullable:
                child.min_size = self._min_sizes[child_key]
            uses_view = uses_view or self._views[child_key]
        # Arrays of structs read each element in their own loop, with no call (to any depth), unless
        # an array of the same name is read inline inside: both loops would count in i_{name}, which
        # error messages read.
        names = {name for name, _ in _array_elements(laid)}
        for name, value in _array_elements(laid):
            child_key = (value.struct, value.version)
            if value.kind == "struct" and name not in self._array_names[child_key]:
                value.inline = self._layouts[child_key]
                names |= self._array_names[child_key]
        self._array_names[key] = names
        self._min_sizes[key] = laid.min_size()
        self._layouts[key] = laid
        self._views[key] = uses_view
        # The message's own reader is called by Message.decode with view=None for bytes input; it
        # makes the memoryview only if some field of the version slices it.
        make_view = uses_view and struct_name == self.spec.name
        reader = self.reader_template.render(L=laid, function=_PLACEHOLDER, cls=struct_name,
                                             make_view=make_view)
        writer = self.writer_template.render(L=laid, function=_PLACEHOLDER, cls=struct_name)
        self._readers[key] = self._dedupe(self._reader_texts, "_read", struct_name, version, reader)
        self._writers[key] = self._dedupe(self._writer_texts, "_write", struct_name, version, writer)
        return self._readers[key], self._writers[key]

    def _dedupe(self, seen: dict, prefix: str, struct_name: str, version: int, text: str) -> str:
        existing = seen.get((struct_name, text))
        if existing is not None:
            return existing
        suffix = f"v{version}"
        seen[(struct_name, text)] = suffix
        text = "\n".join(line for line in text.splitlines() if line.strip())  # macros leave blank lines
        self.functions.append(text.replace(_PLACEHOLDER, f"{prefix}_{struct_name}_{suffix}"))
        return suffix

    def render(self) -> str:
        spec = self.spec
        readers, writers = [], []
        for version in spec.valid_versions:
            read_suffix, write_suffix = self.resolve(spec.name, version)
            readers.append((version, read_suffix))
            writers.append((version, write_suffix))
        used = {name for name, _ in self._readers}
        classes = [self._class_info(self.structs[name], name == spec.name)
                   for name in self.structs if name in used]
        top_readers = {f"_read_{spec.name}_{suffix}" for _, suffix in readers}
        self.functions = _referenced(self.functions, top_readers)
        source = "\n\n".join(self.functions)
        formats = sorted(set(re.findall(r"\b_[RW]_(\w+)\(", source)) | {"h", "i"})
        arrays = sorted(set(re.findall(r"\b_ARRAYW?_(\w+)\[", source)))
        compact_arrays = sorted(set(re.findall(r"\b_ARRAYC_(\w+)\[", source)))
        self.classes = classes  # for render_stub
        program_lines, programs = render_programs(self._layouts, spec.name, spec.valid_versions)
        encode_lines, encode_programs = render_encode_programs(self._layouts, spec.name, spec.valid_versions)
        module = self.env.get_template("module.py.j2").render(
            spec=spec,
            classes=classes,
            functions=self.functions,
            formats=[(name, name.replace("_", "?")) for name in formats],
            arrays=[(name, name.replace("_", "?")) for name in arrays],
            compact_arrays=[(name, name.replace("_", "?")) for name in compact_arrays],
            readers=readers,
            writers=writers,
            program_lines=program_lines,
            programs=programs,
            encode_lines=encode_lines,
            encode_programs=encode_programs,
        )
        return add_field_lines(module)

    def render_stub(self) -> str:
        """The module's stub (``.pyi``): typed constructors and attributes of the classes ``render`` made,
        for type checkers only, so the module itself runs exactly as it would untyped."""
        types = " ".join(f.type for c in self.classes for f in c.fields)
        imports = [(module, name) for module, name, used in (
            ("collections.abc", "Sequence", "_Sequence[" in types),
            ("uuid", "UUID", "_UUID" in types),
            ("kafkawire.codec.base", "Bytes", "_Bytes" in types),
        ) if used]
        return self.env.get_template("module.pyi.j2").render(spec=self.spec, classes=self.classes,
                                                             imports=imports)

    def _class_info(self, struct: StructSpec, top: bool) -> ClassInfo:
        fields = []
        for f in struct.fields:
            default = parse_default(f)
            lazy = default == "struct"
            init_default = "_ABSENT" if lazy else python_literal(default, f.type.kind)
            fields.append(ClassField(f.snake_name, slot_name(f), init_default, lazy, f.type.struct_name or "",
                                     differs(f, default, f"self.{slot_name(f)}"), annotation(f, self.spec.name)))
        qualname = struct.name if top else f"{self.spec.name}.{struct.name}"
        return ClassInfo(struct.name, qualname, top, str(struct.versions), fields)


def _array_elements(laid) -> list:
    """(name, element type) of the layout's arrays (tagged ones aside: an inlined struct's variables would
    overwrite those of the tag loop around it)."""
    fields = [f for item in laid.items for f in (item.fields if hasattr(item, "fields") else [item])]
    found = []
    for f in fields:
        value = f.value
        while value.kind == "array":
            value = value.element
            found.append((f.name, value))
    return found


_DEF = re.compile(r"^def (_read_\w+)\(")


def _referenced(functions: list[str], roots: set[str]) -> list[str]:
    """Drop the readers nothing calls (a struct read only inline, in its parent's loop)."""
    while True:
        kept = []
        for text in functions:
            match = _DEF.match(text)
            if match and match.group(1) not in roots and not any(
                    match.group(1) + "(" in other for other in functions if other is not text):
                continue
            kept.append(text)
        if len(kept) == len(functions):
            return kept
        functions = kept


_MARKER = re.compile(r"^\s*# field: (.+?)\s*$")


def add_field_lines(module: str) -> str:
    """Append the table failures.py reads: the line where each field's code starts, and each def."""
    entries = []
    for number, line in enumerate(module.splitlines(), start=1):
        if line.startswith("def "):
            entries.append(f"{number}:-")
            continue
        match = _MARKER.match(line)
        if match:
            # A fused run's marker lists "name:code" per field; failures.py finds the one that broke.
            entries.append(f"{number}:{match.group(1).replace(' ', '/')}")
    table = " ".join(entries)
    return module + f'\n_FIELDS_AT = _FieldLines(\n    "{table}"\n)\n'


def api_entries(specs: list[MessageSpec]) -> list[dict]:
    """One entry per API key, in key order: its name ("Fetch"), its ``ApiKey`` constant ("FETCH", as
    Java's ``ApiKeys`` names it), and its request and response specs."""
    requests = {s.api_key: s for s in specs if s.type == "request"}
    responses = {s.api_key: s for s in specs if s.type == "response"}
    apis = []
    for key in sorted(requests):
        request = requests[key]
        response = responses.get(key)
        name = request.name[:-len("Request")] if request.name.endswith("Request") else request.name
        apis.append(dict(key=key, name=name, constant=snake_case(name).upper(), request=request, response=response))
    return apis


def render_registry(env: jinja2.Environment, specs: list[MessageSpec]) -> str:
    others = [s for s in specs if s.type not in ("request", "response")]
    return env.get_template("registry.py.j2").render(apis=api_entries(specs), specs=sorted(specs, key=lambda s: s.name),
                                                     others=others)


def render_registry_stub(env: jinja2.Environment, specs: list[MessageSpec]) -> str:
    """The package's ``__init__.pyi``: every message class as if imported (they load lazily at run time)."""
    return env.get_template("registry.pyi.j2").render(apis=api_entries(specs), specs=sorted(specs, key=lambda s: s.name))


def render_message_schemas(env: jinja2.Environment, specs: list[MessageSpec]) -> str:
    """The module of the messages' schemas as data (``SCHEMAS``), one message per line, sorted by name."""
    schemas = [(spec.name, schema_literal(message_schema(spec))) for spec in sorted(specs, key=lambda s: s.name)]
    return env.get_template("message_schemas.py.j2").render(schemas=schemas)

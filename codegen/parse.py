"""Parse step: JSON spec files (comments allowed, as upstream's Jackson reader allows) into the model.

Parsing is strict about shape (a value of the wrong JSON type is an error here); the rules upstream's
generator enforces between keys are checked by ``codegen.validate``.
"""
from __future__ import annotations

import json
from pathlib import Path

from .model import FieldSpec, FieldType, MessageSpec, StructSpec, Versions


class SpecError(ValueError):
    """A spec that upstream's generator would refuse: names the file, the field path and the reason."""

    def __init__(self, source: str, path: str, reason: str):
        super().__init__(f"{source}: {path}: {reason}" if path else f"{source}: {reason}")
        self.source, self.path, self.reason = source, path, reason


MESSAGE_KEYS = {"apiKey", "type", "listeners", "name", "validVersions", "deprecatedVersions",
                "flexibleVersions", "latestVersionUnstable", "fields", "commonStructs"}
FIELD_KEYS = {"name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default",
              "ignorable", "mapKey", "entityType", "zeroCopy", "about", "fields", "flexibleVersions"}
STRUCT_KEYS = {"name", "versions", "fields"}
MESSAGE_TYPES = ("request", "response", "header", "metadata", "data")


def strip_comments(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments outside JSON strings."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ValueError("unterminated /* comment")
            out.append(" ")
            i = j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_file(path: Path) -> MessageSpec:
    source = path.name
    try:
        raw = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError(source, "", f"not valid JSON: {exc}") from None
    return parse_spec(raw, source)


def parse_directory(directory: Path, overlays: tuple[Path, ...] = ()) -> list[MessageSpec]:
    """The specs of ``directory``, each overlay's files replacing the spec files of the same name (an
    overlay changes specs, it adds none)."""
    files = {path.name: path for path in sorted(directory.glob("*.json"))}
    if not files:
        raise SpecError(str(directory), "", "no *.json spec files")
    for overlay in overlays:
        replacements = sorted(overlay.glob("*.json"))
        if not replacements:
            raise SpecError(str(overlay), "", "no *.json spec files in the overlay")
        for path in replacements:
            if path.name not in files:
                raise SpecError(f"{overlay.name}/{path.name}", "", f"the overlay replaces no spec of {directory}")
            files[path.name] = path
    return [parse_file(files[name]) for name in sorted(files)]


def parse_spec(raw: object, source: str) -> MessageSpec:
    if not isinstance(raw, dict):
        raise SpecError(source, "", "a spec must be a JSON object")
    name = _string(raw, "name", source, "", required=True)
    reader = _Reader(source)
    for key in raw:
        if key not in MESSAGE_KEYS:
            reader.unknown.append((name, key))
    spec_type = _string(raw, "type", source, name, required=True)
    if spec_type not in MESSAGE_TYPES:
        raise SpecError(source, name, f"unknown spec type {spec_type!r}")
    api_key = raw.get("apiKey")
    if api_key is not None and (not isinstance(api_key, int) or isinstance(api_key, bool)):
        raise SpecError(source, name, "apiKey must be an integer")
    listeners = raw.get("listeners", [])
    if isinstance(listeners, str):  # Jackson's ACCEPT_SINGLE_VALUE_AS_ARRAY
        listeners = [listeners]
    if not isinstance(listeners, list) or not all(isinstance(x, str) for x in listeners):
        raise SpecError(source, name, "listeners must be a list of strings")
    valid_versions = reader.versions(raw, "validVersions", name, required=True)
    removed = valid_versions.empty
    # A removed API ("validVersions": "none", as Kafka 4 keeps ControlledShutdown and others so that
    # their keys are not reused) is an empty spec to upstream: its flexible versions, listeners and
    # unstable flag are not read.
    if "flexibleVersions" not in raw and not removed:
        raise SpecError(source, name, "flexibleVersions must be specified")
    spec = MessageSpec(
        name=name,
        type=spec_type,
        api_key=api_key,
        valid_versions=valid_versions,
        flexible_versions=Versions.NONE if removed else reader.versions(raw, "flexibleVersions", name, required=True),
        deprecated_versions=reader.versions(raw, "deprecatedVersions", name),
        listeners=() if removed else tuple(listeners),
        latest_version_unstable=False if removed else reader.boolean(raw, "latestVersionUnstable", name),
        fields=reader.fields(raw.get("fields", []), name),
        source=source,
    )
    common = raw.get("commonStructs", [])
    if not isinstance(common, list):
        raise SpecError(source, name, "commonStructs must be a list")
    for struct_raw in common:
        if not isinstance(struct_raw, dict):
            raise SpecError(source, name, "a common struct must be an object")
        struct_name = _string(struct_raw, "name", source, name, required=True)
        path = f"{name}:{struct_name}"
        for key in struct_raw:
            if key not in STRUCT_KEYS:
                reader.unknown.append((path, key))
        spec.common_structs.append(StructSpec(
            name=struct_name,
            versions=reader.versions(struct_raw, "versions", path, required=True),
            fields=reader.fields(struct_raw.get("fields", []), path),
            path=path,
        ))
    spec.unknown_keys = reader.unknown
    return spec


class _Reader:
    def __init__(self, source: str):
        self.source = source
        self.unknown: list[tuple[str, str]] = []

    def versions(self, raw: dict, key: str, path: str, required: bool = False) -> Versions:
        value = raw.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                raise SpecError(self.source, path, f"{key} must be specified")
            return Versions.NONE
        if not isinstance(value, str):
            raise SpecError(self.source, path, f"{key} must be a string")
        try:
            return Versions.parse(value)
        except ValueError as exc:
            raise SpecError(self.source, path, f"{key}: {exc}") from None

    def boolean(self, raw: dict, key: str, path: str) -> bool:
        value = raw.get(key, False)
        if not isinstance(value, bool):
            raise SpecError(self.source, path, f"{key} must be true or false")
        return value

    def fields(self, raw_fields: object, parent: str) -> list[FieldSpec]:
        if not isinstance(raw_fields, list):
            raise SpecError(self.source, parent, "fields must be a list")
        return [self.field(raw, parent) for raw in raw_fields]

    def field(self, raw: object, parent: str) -> FieldSpec:
        if not isinstance(raw, dict):
            raise SpecError(self.source, parent, "a field must be an object")
        name = _string(raw, "name", self.source, parent, required=True)
        path = f"{parent}.{name}"
        for key in raw:
            if key not in FIELD_KEYS:
                self.unknown.append((path, key))
        type_text = _string(raw, "type", self.source, path, required=True)
        try:
            field_type = FieldType.parse(type_text)
        except ValueError as exc:
            raise SpecError(self.source, path, str(exc)) from None
        tagged = self.versions(raw, "taggedVersions", path)
        if raw.get("versions") is None and not tagged.empty:
            versions = tagged  # upstream: versions default to taggedVersions
        else:
            versions = self.versions(raw, "versions", path, required=True)
        tag = raw.get("tag")
        if isinstance(tag, str) and tag.strip().lstrip("-").isdigit():
            tag = int(tag)  # Jackson coerces a numeric string to the int it expects
        if tag is not None and (not isinstance(tag, int) or isinstance(tag, bool)):
            raise SpecError(self.source, path, "tag must be an integer")
        default = raw.get("default")
        if isinstance(default, bool):  # Jackson coerces scalars to the string it expects
            default = "true" if default else "false"
        elif isinstance(default, (int, float)):
            default = str(default)
        elif default is not None and not isinstance(default, str):
            raise SpecError(self.source, path, "default must be a string")
        entity = raw.get("entityType", "unknown")
        if not isinstance(entity, str):
            raise SpecError(self.source, path, "entityType must be a string")
        children = raw.get("fields")
        return FieldSpec(
            name=name,
            type=field_type,
            versions=versions,
            nullable_versions=self.versions(raw, "nullableVersions", path),
            tagged_versions=tagged,
            tag=tag,
            default=default,
            ignorable=self.boolean(raw, "ignorable", path),
            map_key=self.boolean(raw, "mapKey", path),
            entity_type=entity,
            zero_copy=self.boolean(raw, "zeroCopy", path),
            flexible_versions=(self.versions(raw, "flexibleVersions", path)
                               if raw.get("flexibleVersions") is not None else None),
            fields=None if children is None else self.fields(children, path),
            path=path,
        )


def _string(raw: dict, key: str, source: str, path: str, required: bool = False) -> str:
    value = raw.get(key)
    if value is None:
        if required:
            raise SpecError(source, path, f"{key} must be specified")
        return ""
    if not isinstance(value, str):
        raise SpecError(source, path, f"{key} must be a string")
    return value

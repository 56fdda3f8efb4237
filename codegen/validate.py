"""Validate step: refuse what upstream's generator refuses, naming the file, the field path and the reason."""
from __future__ import annotations

import re

from .defaults import NULL, parse_default
from .model import MessageSpec, NULLABLE_KINDS, FieldSpec, StructSpec, Versions
from .parse import SpecError

FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
ENTITY_TYPES = {"unknown": None, "transactionalId": "string", "producerId": "int64", "groupId": "string",
                "topicName": "string", "brokerId": "int32"}
LISTENERS = {"zkBroker", "broker", "controller"}


def validate(spec: MessageSpec) -> None:
    """Raise SpecError for the first problem found in ``spec``."""
    _Validator(spec).run()


def validate_all(specs: list[MessageSpec]) -> None:
    for spec in specs:
        validate(spec)
    seen: dict[tuple[str, int], str] = {}
    for spec in specs:
        if spec.api_key is not None and spec.type in ("request", "response"):
            key = (spec.type, spec.api_key)
            if key in seen:
                raise SpecError(spec.source, spec.name, f"apiKey {spec.api_key} is also used by {seen[key]}")
            seen[key] = spec.name


class _Validator:
    def __init__(self, spec: MessageSpec):
        self.spec = spec
        self.defined: set[str] = set()

    def fail(self, path: str, reason: str) -> SpecError:
        return SpecError(self.spec.source, path, reason)

    def run(self) -> None:
        spec = self.spec
        if spec.unknown_keys:
            path, key = spec.unknown_keys[0]
            raise self.fail(path, f"unknown key {key!r}")
        flexible = spec.flexible_versions
        if not flexible.empty and not flexible.open_ended:
            raise self.fail(spec.name, f"flexibleVersions must be open-ended (N+) or none, not {flexible}")
        if spec.listeners and spec.type != "request":
            raise self.fail(spec.name, "listeners are only allowed on requests")
        for listener in spec.listeners:
            if listener not in LISTENERS:
                raise self.fail(spec.name, f"unknown listener {listener!r}")
        if spec.latest_version_unstable and spec.type != "request":
            raise self.fail(spec.name, "latestVersionUnstable is only allowed on requests")
        if spec.type in ("request", "response") and spec.api_key is None:
            raise self.fail(spec.name, "requests and responses need an apiKey")
        if spec.api_key is not None and not 0 <= spec.api_key <= 0x7FFF:
            raise self.fail(spec.name, f"apiKey {spec.api_key} is not an int16")
        common_names = set()
        for common in spec.common_structs:
            if not re.match(r"[A-Z]", common.name) or not FIELD_NAME.match(common.name):
                raise self.fail(common.path, "common struct names must be capitalised identifiers")
            if common.name in common_names:
                raise self.fail(common.path, f"common struct {common.name} is specified twice")
            common_names.add(common.name)
        self.common = common_names
        self.defined = set(common_names)
        self.fields(spec.fields, spec.valid_versions, spec.name)
        for common in spec.common_structs:
            self.fields(common.fields, common.versions, common.path)

    def fields(self, fields: list[FieldSpec], parent_versions: Versions, parent_path: str) -> None:
        names: set[str] = set()
        tags: dict[int, str] = {}
        for spec_field in fields:
            self.field(spec_field, parent_versions)
            if spec_field.name in names:
                raise self.fail(spec_field.path, "duplicate field name")
            names.add(spec_field.name)
            if spec_field.tag is not None:
                if spec_field.tag in tags:
                    raise self.fail(spec_field.path, f"tag {spec_field.tag} is also used by {tags[spec_field.tag]}")
                tags[spec_field.tag] = spec_field.name
        if tags and sorted(tags) != list(range(len(tags))):
            missing = min(set(range(max(tags) + 1)) - set(tags))
            raise self.fail(parent_path, f"tags must be contiguous from 0; tag {missing} is missing")

    def field(self, f: FieldSpec, parent_versions: Versions) -> None:
        spec = self.spec
        kind = f.type.kind
        if not FIELD_NAME.match(f.name):
            raise self.fail(f.path, "field names must match [A-Za-z][A-Za-z0-9]*")
        if f.versions.empty:
            raise self.fail(f.path, "versions must not be none")
        if not f.nullable_versions.empty and kind not in NULLABLE_KINDS:
            raise self.fail(f.path, f"nullableVersions set on a {f.type} field, which cannot be null")
        # Tagged fields.
        if f.tag is not None and f.tagged_versions.empty:
            raise self.fail(f.path, "a tag is set but taggedVersions is not")
        if not f.tagged_versions.empty:
            if f.tag is None:
                raise self.fail(f.path, "taggedVersions is set but no tag")
            if f.tag < 0:
                raise self.fail(f.path, "tags must be non-negative")
            if not f.tagged_versions.open_ended:
                raise self.fail(f.path, f"taggedVersions must be open-ended, not {f.tagged_versions}")
            if not f.tagged_versions.is_subset_of(f.versions):
                raise self.fail(f.path, f"taggedVersions {f.tagged_versions} outside versions {f.versions}")
            if not f.tagged_versions.is_subset_of(spec.flexible_versions):
                raise self.fail(f.path, f"taggedVersions {f.tagged_versions} outside flexibleVersions "
                                        f"{spec.flexible_versions}")
            if f.map_key:
                raise self.fail(f.path, "a tagged field cannot be a mapKey")
            if kind == "records":
                raise self.fail(f.path, "records fields cannot be tagged")
            nullable_part = f.tagged_versions.intersect(f.nullable_versions)
            if not nullable_part.empty and nullable_part != f.tagged_versions:
                raise self.fail(f.path, "either all tagged versions must be nullable or none")
        if f.zero_copy and kind != "bytes":
            raise self.fail(f.path, "zeroCopy is only allowed on bytes fields")
        if f.flexible_versions is not None:
            if kind not in ("string", "bytes"):
                raise self.fail(f.path, "a field-level flexibleVersions is only allowed on string and bytes")
            if not f.flexible_versions.is_subset_of(spec.flexible_versions):
                raise self.fail(f.path, f"flexibleVersions {f.flexible_versions} outside the message's "
                                        f"{spec.flexible_versions}")
        expected = ENTITY_TYPES.get(f.entity_type, "?")
        if expected == "?":
            raise self.fail(f.path, f"unknown entityType {f.entity_type!r}")
        element_kind = f.type.element.kind if kind == "array" else kind
        if expected is not None and element_kind != expected:
            raise self.fail(f.path, f"entityType {f.entity_type} needs a {expected} field, not {f.type}")
        # Defaults.
        try:
            default = parse_default(f)
        except ValueError as exc:
            raise self.fail(f.path, str(exc)) from None
        if f.default == "null" and not f.versions.is_subset_of(f.nullable_versions):
            raise self.fail(f.path, f"a null default needs nullableVersions covering {f.versions}")
        # Struct definitions.
        struct_name = f.type.struct_name
        if f.fields is not None:
            if struct_name is None:
                raise self.fail(f.path, f"child fields on a {f.type} field")
            if struct_name in self.common:
                raise self.fail(f.path, f"can't re-specify the common struct {struct_name}")
            if struct_name in self.defined:
                raise self.fail(f.path, f"struct {struct_name} is specified twice")
            self.defined.add(struct_name)
            self.fields(f.fields, f.versions.intersect(parent_versions), f.path)
        elif struct_name is not None and struct_name not in self.common:
            raise self.fail(f.path, f"struct type {struct_name} has no fields and is not a common struct")

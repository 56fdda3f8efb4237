"""The generator refuses what upstream's generator refuses, naming the file, the field path and the reason.

Specs are written as small JSON files (with ``//`` and ``/* */`` comments, as upstream's Jackson reader
allows) and run through ``codegen.parse.parse_file`` and ``codegen.validate.validate``. The end of
the file checks whole-directory generation: every spec in ``schemas/`` and in upstream's specs
generates (upstream Kafka 4.3's own files, comments and removed APIs included, to the very modules
schemas/ gives), output is deterministic, ``python -m codegen --check`` catches a stale package, and
``--specs`` turns a directory of upstream specs into an importable package.
"""
from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codegen.generate import DEFAULT_OVERLAYS, generate
from codegen.parse import SpecError, parse_directory, parse_file, strip_comments
from codegen.validate import validate, validate_all

from support.paths import REPO as ROOT
from support.paths import UPSTREAM_SPECS
SCHEMAS = ROOT / "schemas"
MESSAGES = ROOT / "kafkawire" / "messages"
UPSTREAM = UPSTREAM_SPECS

needs_upstream = pytest.mark.skipif(not UPSTREAM.is_dir(), reason="no upstream specs in /work/shared")

HEADER = """// Licensed to nobody: a test spec.
/* A block comment
   over two lines, with "quotes" and // slashes inside. */
"""


def write_spec(tmp_path: Path, spec: dict, name: str | None = None) -> Path:
    """Write ``spec`` as JSON with comments around and inside it; returns the path."""
    name = name or f"{spec['name']}.json"
    body = json.dumps(spec, indent=2)
    # A comment after the first "{" and one before the last "}", as upstream files have.
    body = body.replace("{", "{\n  // the spec\n  /* inline */", 1)
    body = body[:body.rfind("}")] + "  // end\n}"
    path = tmp_path / name
    path.write_text(HEADER + body + "\n/* trailing */\n", encoding="utf-8")
    return path


def request(fields, **top):
    spec = {"apiKey": 1000, "type": "request", "listeners": ["broker"], "name": "TestRequest",
            "validVersions": "0-3", "flexibleVersions": "2+", "fields": fields}
    spec.update(top)
    return spec


def response(fields, **top):
    spec = {"apiKey": 1000, "type": "response", "name": "TestResponse",
            "validVersions": "0-3", "flexibleVersions": "2+", "fields": fields}
    spec.update(top)
    return spec


def check(tmp_path, spec):
    """Parse and validate ``spec`` written to a file; returns the parsed spec."""
    parsed = parse_file(write_spec(tmp_path, spec))
    validate(parsed)
    return parsed


def refused(tmp_path, spec, path, *words):
    """Assert ``spec`` is refused with a SpecError naming the file, ``path`` and each of ``words``."""
    file = write_spec(tmp_path, spec)
    with pytest.raises(SpecError) as info:
        validate(parse_file(file))
    exc = info.value
    assert isinstance(exc, ValueError)
    assert exc.source == file.name, exc
    assert exc.path == path, f"path {exc.path!r}, expected {path!r}: {exc}"
    text = str(exc)
    assert file.name in text and path in text, text
    for word in words:
        assert word.lower() in exc.reason.lower(), f"{word!r} not in reason {exc.reason!r}"
    return exc


TOPICS = {"name": "Topics", "type": "[]Topic", "versions": "0+", "fields": [
    {"name": "Name", "type": "string", "versions": "0+", "entityType": "topicName"},
    {"name": "Partitions", "type": "[]int32", "versions": "0+"},
]}


# ---------------------------------------------------------------------------------------------------
# A valid spec passes, comments and all


def test_valid_spec_with_comments_passes(tmp_path):
    spec = request([
        {"name": "TimeoutMs", "type": "int32", "versions": "0+", "default": "60000",
         "about": "a // not-a-comment and /* not a comment */ inside a string, and an escaped \" quote"},
        TOPICS,
        {"name": "Extra", "type": "string", "versions": "2+", "taggedVersions": "2+", "tag": 0,
         "nullableVersions": "2+", "default": "null"},
        {"name": "Count", "type": "int8", "versions": "2+", "taggedVersions": "2+", "tag": 1, "default": "0x7f"},
    ])
    parsed = check(tmp_path, spec)
    assert [f.name for f in parsed.fields] == ["TimeoutMs", "Topics", "Extra", "Count"]
    assert parsed.listeners == ("broker",)
    assert str(parsed.flexible_versions) == "2+"


def test_strip_comments_keeps_strings():
    text = '{"a": "x // y", /* c */ "b": "/* z */", // d\n "c": "q\\"//"}'
    assert json.loads(strip_comments(text)) == {"a": "x // y", "b": "/* z */", "c": 'q"//'}


def test_invalid_json_names_file(tmp_path):
    path = tmp_path / "BrokenRequest.json"
    path.write_text('{"name": "BrokenRequest", /* unterminated', encoding="utf-8")
    with pytest.raises(SpecError) as info:
        parse_file(path)
    assert info.value.source == "BrokenRequest.json"
    path.write_text('{"name": "BrokenRequest",}', encoding="utf-8")
    with pytest.raises(SpecError) as info:
        parse_file(path)
    assert info.value.source == "BrokenRequest.json"


# ---------------------------------------------------------------------------------------------------
# The refusals the brief lists


def test_unknown_top_level_key(tmp_path):
    refused(tmp_path, request([TOPICS], flexibelVersions="2+"), "TestRequest", "unknown", "flexibelVersions")


def test_unknown_field_level_key(tmp_path):
    fields = [{"name": "TimeoutMs", "type": "int32", "versions": "0+", "nulableVersions": "0+"}]
    refused(tmp_path, request(fields), "TestRequest.TimeoutMs", "unknown", "nulableVersions")


def test_unknown_nested_field_key(tmp_path):
    topics = json.loads(json.dumps(TOPICS))
    topics["fields"][1]["mapkey"] = True
    refused(tmp_path, request([topics]), "TestRequest.Topics.Partitions", "unknown", "mapkey")


def test_unknown_common_struct_key(tmp_path):
    spec = request([{"name": "Topics", "type": "[]Common", "versions": "0+"}],
                   commonStructs=[{"name": "Common", "versions": "0+", "about": "x", "fields": [
                       {"name": "Name", "type": "string", "versions": "0+"}]}])
    exc = refused(tmp_path, spec, "TestRequest:Common", "unknown")
    assert "about" in exc.reason


def test_closed_flexible_versions(tmp_path):
    refused(tmp_path, request([TOPICS], flexibleVersions="0-3"), "TestRequest", "flexibleVersions", "0-3")


def test_missing_flexible_versions(tmp_path):
    spec = request([TOPICS])
    del spec["flexibleVersions"]
    refused(tmp_path, spec, "TestRequest", "flexibleVersions")


def test_duplicate_tags(tmp_path):
    fields = [
        {"name": "A", "type": "int32", "versions": "2+", "taggedVersions": "2+", "tag": 0},
        {"name": "B", "type": "int32", "versions": "2+", "taggedVersions": "2+", "tag": 0},
    ]
    exc = refused(tmp_path, request(fields), "TestRequest.B", "tag 0")
    assert "A" in exc.reason


def test_duplicate_tags_in_nested_struct(tmp_path):
    fields = [{"name": "Topics", "type": "[]Topic", "versions": "0+", "fields": [
        {"name": "A", "type": "int32", "versions": "2+", "taggedVersions": "2+", "tag": 0},
        {"name": "B", "type": "string", "versions": "2+", "taggedVersions": "2+", "tag": 0},
    ]}]
    refused(tmp_path, request(fields), "TestRequest.Topics.B", "tag 0")


def test_non_contiguous_tags(tmp_path):
    fields = [
        {"name": "A", "type": "int32", "versions": "2+", "taggedVersions": "2+", "tag": 0},
        {"name": "B", "type": "int32", "versions": "2+", "taggedVersions": "2+", "tag": 2},
    ]
    refused(tmp_path, request(fields), "TestRequest", "contiguous", "1")


def test_tags_not_starting_at_zero(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "2+", "taggedVersions": "2+", "tag": 1}]
    refused(tmp_path, request(fields), "TestRequest", "contiguous", "0")


def test_tagged_versions_outside_flexible_versions(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "0+", "taggedVersions": "1+", "tag": 0}]
    refused(tmp_path, request(fields), "TestRequest.A", "taggedVersions", "flexibleVersions")


def test_tagged_versions_on_non_flexible_message(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "0+", "taggedVersions": "0+", "tag": 0}]
    refused(tmp_path, request(fields, flexibleVersions="none"), "TestRequest.A", "flexibleVersions")


def test_tagged_versions_not_open_ended(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "2+", "taggedVersions": "2-3", "tag": 0}]
    refused(tmp_path, request(fields), "TestRequest.A", "open-ended")


def test_tagged_versions_outside_versions(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "3", "taggedVersions": "2+", "tag": 0}]
    exc = refused(tmp_path, request(fields), "TestRequest.A", "taggedVersions")
    assert "versions" in exc.reason


def test_tag_without_tagged_versions(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "2+", "tag": 0}]
    refused(tmp_path, request(fields), "TestRequest.A", "taggedVersions")


def test_tagged_versions_without_tag(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "2+", "taggedVersions": "2+"}]
    refused(tmp_path, request(fields), "TestRequest.A", "tag")


def test_negative_tag(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "2+", "taggedVersions": "2+", "tag": -1}]
    refused(tmp_path, request(fields), "TestRequest.A", "negative")


def test_nullable_versions_on_int32(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "0+", "nullableVersions": "0+"}]
    refused(tmp_path, request(fields), "TestRequest.A", "nullableVersions", "int32")


def test_nullable_versions_on_uuid(tmp_path):
    # Upstream's generator cannot make a uuid nullable (its README notwithstanding).
    fields = [{"name": "A", "type": "uuid", "versions": "0+", "nullableVersions": "0+"}]
    refused(tmp_path, request(fields), "TestRequest.A", "nullableVersions", "uuid")


@pytest.mark.parametrize("field_type,default,words", [
    ("int8", "200", ["range", "int8"]),
    ("int8", "-129", ["range", "int8"]),
    ("int16", "0x8000", ["range", "int16"]),
    ("uint16", "-1", ["range", "uint16"]),
    ("uint16", "65536", ["range", "uint16"]),
    ("int32", "2147483648", ["range", "int32"]),
    ("int64", "9223372036854775808", ["range", "int64"]),
    ("int32", "ten", ["int32", "ten"]),
    ("bool", "maybe", ["bool", "maybe"]),
    ("float64", "fast", ["float64"]),
    ("uuid", "not-a-uuid!", ["uuid"]),
    ("[]int32", "[1, 2]", ["[1, 2]"]),
    ("[]int32", "x", ["x"]),
    ("bytes", "abc", ["abc"]),
])
def test_bad_defaults(tmp_path, field_type, default, words):
    fields = [{"name": "A", "type": field_type, "versions": "0+", "default": default}]
    refused(tmp_path, request(fields), "TestRequest.A", *words)


@pytest.mark.parametrize("field_type,default", [
    # Upstream (FieldSpec.fieldDefault) strips a literal "0x" prefix only, then calls
    # Byte/Short/Integer/Long.valueOf(text, base): no sign before "0x", no "0X", no whitespace, no "_".
    ("int8", "-0x7f"),
    ("int32", "0X10"),
    ("int32", " 5"),
    ("int32", "5 "),
    ("int64", "1_000"),
    ("uint16", "0x_ff"),
])
def test_integer_default_literals_upstream_refuses(tmp_path, field_type, default):
    fields = [{"name": "A", "type": field_type, "versions": "0+", "default": default}]
    refused(tmp_path, request(fields), "TestRequest.A", field_type)


@pytest.mark.parametrize("default,value", [("True", True), ("FALSE", False), ("tRuE", True)])
def test_bool_default_is_case_insensitive_as_upstream(tmp_path, default, value):
    # Upstream: "true".equalsIgnoreCase(default) / "false".equalsIgnoreCase(default).
    from codegen.defaults import parse_default
    parsed = check(tmp_path, request([{"name": "A", "type": "bool", "versions": "0+", "default": default}]))
    assert parse_default(parsed.fields[0]) is value


def test_non_null_default_on_struct_array(tmp_path):
    topics = dict(TOPICS, default="[]")
    refused(tmp_path, request([topics]), "TestRequest.Topics", "[]")


@pytest.mark.parametrize("field", [
    {"name": "A", "type": "string", "versions": "0+", "default": "null"},
    {"name": "A", "type": "string", "versions": "0+", "nullableVersions": "1+", "default": "null"},
    {"name": "A", "type": "[]int32", "versions": "0+", "default": "null"},
    {"name": "A", "type": "bytes", "versions": "0+", "nullableVersions": "2+", "default": "null"},
])
def test_null_default_without_nullable(tmp_path, field):
    refused(tmp_path, request([field]), "TestRequest.A", "null")


def test_null_default_on_int(tmp_path):
    refused(tmp_path, request([{"name": "A", "type": "int32", "versions": "0+", "default": "null"}]),
            "TestRequest.A", "null")


def test_good_defaults_pass(tmp_path):
    fields = [
        {"name": "A", "type": "int8", "versions": "0+", "default": "-128"},
        {"name": "B", "type": "int16", "versions": "0+", "default": "0x7fff"},
        {"name": "C", "type": "uint16", "versions": "0+", "default": "65535"},
        {"name": "D", "type": "bool", "versions": "0+", "default": "true"},
        {"name": "E", "type": "int64", "versions": "0+", "default": "-9223372036854775808"},
        {"name": "F", "type": "float64", "versions": "0+", "default": "1.5"},
        {"name": "G", "type": "string", "versions": "0+", "default": "hello"},
        {"name": "H", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null"},
        {"name": "I", "type": "[]int32", "versions": "0+", "nullableVersions": "0+", "default": "null"},
        {"name": "J", "type": "uuid", "versions": "0+", "default": "AAAAAAAAAAAAAAAAAAAAAA"},
        {"name": "K", "type": "int32", "versions": "0+", "default": 5},  # a JSON number, as Jackson coerces
        {"name": "L", "type": "bool", "versions": "0+", "default": False},
    ]
    check(tmp_path, request(fields))


def test_duplicate_field_names(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "0+"}, {"name": "A", "type": "int64", "versions": "0+"}]
    refused(tmp_path, request(fields), "TestRequest.A", "duplicate")


def test_duplicate_field_names_in_nested_struct(tmp_path):
    fields = [{"name": "Topics", "type": "[]Topic", "versions": "0+", "fields": [
        {"name": "Name", "type": "string", "versions": "0+"},
        {"name": "Name", "type": "string", "versions": "1+"},
    ]}]
    refused(tmp_path, request(fields), "TestRequest.Topics.Name", "duplicate")


def test_struct_specified_twice(tmp_path):
    fields = [
        {"name": "Topics", "type": "[]Topic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"}]},
        {"name": "MoreTopics", "type": "[]Topic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"}]},
    ]
    refused(tmp_path, request(fields), "TestRequest.MoreTopics", "Topic", "twice")


def test_struct_specified_twice_nested(tmp_path):
    fields = [{"name": "Outer", "type": "Topic", "versions": "0+", "fields": [
        {"name": "Inner", "type": "[]Topic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"}]}]}]
    refused(tmp_path, request(fields), "TestRequest.Outer.Inner", "twice")


def test_common_struct_re_specified(tmp_path):
    spec = request([{"name": "Topics", "type": "[]Common", "versions": "0+", "fields": [
        {"name": "Name", "type": "string", "versions": "0+"}]}],
        commonStructs=[{"name": "Common", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"}]}])
    refused(tmp_path, spec, "TestRequest.Topics", "Common")


def test_common_struct_specified_twice(tmp_path):
    common = {"name": "Common", "versions": "0+", "fields": [{"name": "Name", "type": "string", "versions": "0+"}]}
    spec = request([{"name": "Topics", "type": "[]Common", "versions": "0+"}], commonStructs=[common, common])
    refused(tmp_path, spec, "TestRequest:Common", "twice")


def test_struct_type_without_definition(tmp_path):
    refused(tmp_path, request([{"name": "Topics", "type": "[]Nowhere", "versions": "0+"}]),
            "TestRequest.Topics", "Nowhere")


def test_zero_copy_on_non_bytes(tmp_path):
    fields = [{"name": "A", "type": "string", "versions": "0+", "zeroCopy": True}]
    refused(tmp_path, request(fields), "TestRequest.A", "zeroCopy", "bytes")
    check(tmp_path, request([{"name": "A", "type": "bytes", "versions": "0+", "zeroCopy": True}]))


def test_listeners_on_response(tmp_path):
    refused(tmp_path, response([TOPICS], listeners=["broker"]), "TestResponse", "listeners")


def test_unknown_listener(tmp_path):
    refused(tmp_path, request([TOPICS], listeners=["broker", "toaster"]), "TestRequest", "toaster")


def test_latest_version_unstable_on_response(tmp_path):
    refused(tmp_path, response([TOPICS], latestVersionUnstable=True), "TestResponse", "latestVersionUnstable")


# ---------------------------------------------------------------------------------------------------
# More of upstream's checks (reference section 1.4 and 1.11)


def test_field_flexible_versions_on_int(tmp_path):
    fields = [{"name": "A", "type": "int32", "versions": "0+", "flexibleVersions": "none"}]
    refused(tmp_path, request(fields), "TestRequest.A", "flexibleVersions")


def test_field_flexible_versions_outside_message(tmp_path):
    fields = [{"name": "A", "type": "string", "versions": "0+", "flexibleVersions": "1+"}]
    refused(tmp_path, request(fields), "TestRequest.A", "flexibleVersions")
    check(tmp_path, request([{"name": "A", "type": "string", "versions": "0+", "flexibleVersions": "none"}]))


def test_tagged_map_key(tmp_path):
    fields = [{"name": "Topics", "type": "[]Topic", "versions": "0+", "fields": [
        {"name": "Name", "type": "string", "versions": "2+", "taggedVersions": "2+", "tag": 0, "mapKey": True}]}]
    refused(tmp_path, request(fields), "TestRequest.Topics.Name", "mapKey")


def test_tagged_records(tmp_path):
    fields = [{"name": "R", "type": "records", "versions": "2+", "taggedVersions": "2+", "tag": 0,
               "nullableVersions": "2+"}]
    refused(tmp_path, request(fields), "TestRequest.R", "records")


def test_partly_nullable_tagged_field(tmp_path):
    fields = [{"name": "A", "type": "string", "versions": "2+", "taggedVersions": "2+", "tag": 0,
               "nullableVersions": "3+"}]
    refused(tmp_path, request(fields), "TestRequest.A", "nullable")


@pytest.mark.parametrize("field_type,entity", [("int32", "topicName"), ("string", "brokerId"),
                                               ("[]int64", "brokerId"), ("string", "clusterId")])
def test_entity_type_mismatch(tmp_path, field_type, entity):
    fields = [{"name": "A", "type": field_type, "versions": "0+", "entityType": entity}]
    refused(tmp_path, request(fields), "TestRequest.A", entity)


def test_entity_type_checked_by_array_element(tmp_path):
    check(tmp_path, request([{"name": "A", "type": "[]int32", "versions": "0+", "entityType": "brokerId"}]))


@pytest.mark.parametrize("field_type", ["[][]int32", "int128", "String", "[]"])
def test_bad_types(tmp_path, field_type):
    fields = [{"name": "A", "type": field_type, "versions": "0+"}]
    with pytest.raises(SpecError) as info:
        validate(parse_file(write_spec(tmp_path, request(fields))))
    assert info.value.source == "TestRequest.json"
    assert info.value.path == "TestRequest.A"


@pytest.mark.parametrize("name", ["1A", "A_B", "A-B", ""])
def test_bad_field_names(tmp_path, name):
    fields = [{"name": name, "type": "int32", "versions": "0+"}]
    with pytest.raises(SpecError) as info:
        validate(parse_file(write_spec(tmp_path, request(fields))))
    assert info.value.source == "TestRequest.json"


@pytest.mark.parametrize("versions", ["-1+", "3-1", "abc", "1.5", "40000"])
def test_bad_version_ranges(tmp_path, versions):
    fields = [{"name": "A", "type": "int32", "versions": versions}]
    refused(tmp_path, request(fields), "TestRequest.A", "versions")


def test_missing_field_versions(tmp_path):
    refused(tmp_path, request([{"name": "A", "type": "int32"}]), "TestRequest.A", "versions")


def test_versions_default_to_tagged_versions(tmp_path):
    parsed = check(tmp_path, request([{"name": "A", "type": "int32", "taggedVersions": "2+", "tag": 0}]))
    assert str(parsed.fields[0].versions) == "2+"


def test_missing_valid_versions(tmp_path):
    spec = request([TOPICS])
    del spec["validVersions"]
    refused(tmp_path, spec, "TestRequest", "validVersions")
    refused(tmp_path, request([TOPICS], validVersions=" "), "TestRequest", "validVersions")


def test_removed_api_is_accepted_as_upstream_accepts_it(tmp_path):
    """Kafka 4 keeps removed APIs as ``"validVersions": "none"`` with nothing else: no flexible versions
    needed, listeners and the unstable flag not read, and nothing to generate but a registry entry."""
    removed = {"apiKey": 1000, "type": "request", "name": "TestRequest", "validVersions": "none"}
    spec = check(tmp_path, removed)
    assert spec.removed and spec.valid_versions.empty and spec.flexible_versions.empty
    spec = check(tmp_path, dict(removed, listeners=["broker"], latestVersionUnstable=True, flexibleVersions="0+"))
    assert spec.removed and spec.listeners == () and not spec.latest_version_unstable
    refused(tmp_path, request([TOPICS], flexibleVersions=None), "TestRequest", "flexibleVersions")

    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, removed)
    write_spec(specs, {"apiKey": 1000, "type": "response", "name": "TestResponse", "validVersions": "none"})
    write_spec(specs, request([TOPICS], apiKey=1001, name="KeptRequest"))
    write_spec(specs, response([], apiKey=1001, name="KeptResponse"))
    files = generate(specs)
    assert sorted(files) == ["__init__.py", "__init__.pyi", "kept_request.py", "kept_request.pyi", "kept_response.py",
                             "kept_response.pyi"]
    namespace: dict = {}
    exec(compile(files["__init__.py"], "<registry>", "exec"), namespace)
    gone = namespace["api"]("Test")
    assert gone.removed and gone.valid_versions == (0, -1) and not gone.supports(0)
    assert list(range(gone.min_version, gone.max_version + 1)) == []
    assert "was removed" in gone.unsupported(0)
    with pytest.raises(AttributeError, match="removed"):
        gone.request_class
    assert [a.name for a in namespace["apis"]()] == ["Kept"]
    assert [a.name for a in namespace["apis"](include_removed=True)] == ["Test", "Kept"]


def test_request_without_api_key(tmp_path):
    spec = request([TOPICS])
    del spec["apiKey"]
    refused(tmp_path, spec, "TestRequest", "apiKey")


def test_unknown_spec_type(tmp_path):
    refused(tmp_path, request([TOPICS], type="requets"), "TestRequest", "requets")


def test_duplicate_api_key_across_files(tmp_path):
    a = parse_file(write_spec(tmp_path, request([TOPICS])))
    b = parse_file(write_spec(tmp_path, request([TOPICS], name="OtherRequest")))
    with pytest.raises(SpecError) as info:
        validate_all([a, b])
    assert info.value.source == "OtherRequest.json"
    assert "1000" in info.value.reason


def test_empty_spec_directory(tmp_path):
    with pytest.raises(SpecError):
        parse_directory(tmp_path)


# ---------------------------------------------------------------------------------------------------
# Whole-directory generation


@pytest.fixture(scope="module")
def ours():
    return generate(SCHEMAS, overlays=DEFAULT_OVERLAYS)


def test_generation_over_schemas(ours):
    specs = [json.loads(p.read_text()) for p in SCHEMAS.glob("*.json")]
    removed = [s["name"] for s in specs if s["validVersions"] == "none"]
    assert sorted(removed) == ["ControlledShutdownRequest", "ControlledShutdownResponse", "LeaderAndIsrRequest",
                               "LeaderAndIsrResponse", "StopReplicaRequest", "StopReplicaResponse",
                               "UpdateMetadataRequest", "UpdateMetadataResponse"]
    modules = [name for name in ours if name.endswith(".py")]
    assert len(modules) == len(specs) - len(removed) + 1
    assert "__init__.py" in ours
    # Each module has its stub (the types), the package's __init__ too.
    assert sorted(name for name in ours if name.endswith(".pyi")) == sorted(name + "i" for name in modules)
    for text in ours.values():
        compile(text, "<generated>", "exec")


def test_generation_is_deterministic(ours):
    again = generate(SCHEMAS, overlays=DEFAULT_OVERLAYS)
    assert list(again) == list(ours)
    assert again == ours


@needs_upstream
def test_upstream_files_generate_the_modules_schemas_gives():
    """Kafka 4.3's own spec files (comments, prose and removed APIs) generate exactly the modules that
    schemas/ (their wire facts) generates: every message and version tested on ours is upstream's."""
    assert generate(UPSTREAM, message_schemas=True) == generate(SCHEMAS, message_schemas=True)


def test_overlay_replaces_only_existing_specs(tmp_path):
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    write_spec(overlay, request([TOPICS], name="NotInSchemasRequest", apiKey=1000))
    with pytest.raises(SpecError, match="replaces no spec"):
        generate(SCHEMAS, overlays=(overlay,))


def test_generated_package_matches_committed(ours):
    for name, text in ours.items():
        assert (MESSAGES / name).read_text(encoding="utf-8") == text, name


@needs_upstream
def test_generation_over_upstream_specs():
    files = generate(UPSTREAM)
    specs = [p for p in UPSTREAM.glob("*.json") if '"validVersions": "none"' not in p.read_text()]
    assert len(files) == 2 * (len(specs) + 1)  # modules and their stubs
    assert generate(UPSTREAM) == files
    for text in files.values():
        compile(text, "<generated>", "exec")


def _codegen(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "codegen", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_check_passes_on_the_repo():
    result = _codegen("--check")
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout


def test_check_fails_after_tampering(tmp_path):
    """A changed, a missing and a stale module are each named (one run: --check reports every drift)."""
    out = tmp_path / "messages"
    shutil.copytree(MESSAGES, out, ignore=shutil.ignore_patterns("__pycache__"))
    assert _codegen("--check", "--out", str(out)).returncode == 0

    target = out / "fetch_request.py"
    target.write_text(target.read_text(encoding="utf-8") + "# tampered\n", encoding="utf-8")
    (out / "metadata_response.py").unlink()
    (out / "stale_module.py").write_text("# Generated by `python -m codegen` from Old.json; do not edit.\n")
    result = _codegen("--check", "--out", str(out))
    assert result.returncode != 0
    stale = [line for line in result.stderr.splitlines() if "stale:" in line]
    assert [line.split("stale: ")[1] for line in stale] == [
        "fetch_request.py: differs", "metadata_response.py: missing", "stale_module.py: no longer generated"]
    assert target.read_text(encoding="utf-8").endswith("# tampered\n")  # --check writes nothing
    assert not (out / "metadata_response.py").exists()


def test_bad_spec_directory_exit_code(tmp_path):
    write_spec(tmp_path, request([TOPICS], flexibleVersions="0-3"))
    result = _codegen("--specs", str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.returncode not in (0, None)
    assert "TestRequest.json" in result.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@needs_upstream
def test_specs_option_writes_importable_package(tmp_path, monkeypatch):
    specs = tmp_path / "specs"
    specs.mkdir()
    for path in UPSTREAM.glob("*.json"):
        shutil.copy(path, specs / path.name)
    package = tmp_path / "site" / "upstream_kafka_messages"
    result = _codegen("--specs", str(specs), "--out", str(package))
    assert result.returncode == 0, result.stderr
    assert (package / "__init__.py").exists()

    # Running again changes nothing; --check agrees.
    again = _codegen("--specs", str(specs), "--out", str(package))
    assert again.returncode == 0 and "0 changed" in again.stdout
    assert _codegen("--specs", str(specs), "--out", str(package), "--check").returncode == 0

    monkeypatch.syspath_prepend(str(package.parent))
    upstream = importlib.import_module("upstream_kafka_messages")
    try:
        info = upstream.api("Fetch")
        assert info.valid_versions == (4, 18)
        assert info.request_header_version(12) == 2
        Fetch = upstream.FetchRequest
        request = Fetch(max_wait_ms=500, min_bytes=1, topics=[Fetch.FetchTopic(topic="events", partitions=[
            Fetch.FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1 << 20)])])
        body = request.encode(12)
        assert Fetch.decode(body, 12, exact=True) == request
        # The same bytes as our own package at a version both have.
        from kafkawire.messages import FetchRequest as Ours
        ours = Ours(max_wait_ms=500, min_bytes=1, topics=[Ours.FetchTopic(topic="events", partitions=[
            Ours.FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1 << 20)])])
        assert ours.encode(12) == body
        with pytest.raises(Exception):
            request.encode(19)  # upstream stops at 18; v19 is kafkawire's KIP-1178 overlay
        Meta = upstream.MetadataResponse
        response = Meta(brokers=[Meta.MetadataResponseBroker(node_id=1, host="h", port=9092)])
        assert Meta.decode(response.encode(12), 12, exact=True) == response
    finally:
        for name in [m for m in sys.modules if m == "upstream_kafka_messages" or
                     m.startswith("upstream_kafka_messages.")]:
            del sys.modules[name]

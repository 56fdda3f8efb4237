"""codegen's schemas as data (kafkawire/messages/message_schemas.py): every message's fields in the specs'
own terms, each matching its generated class, field by field, at every depth."""
from __future__ import annotations

import json

import pytest

from codegen.generate import DEFAULT_OVERLAYS, generate
from codegen.message_schema import message_schema
from codegen.parse import SpecError, parse_directory, strip_comments
from kafkawire.messages import message_class
from kafkawire.messages.message_schemas import SCHEMAS

from support.paths import REPO as ROOT
from support.paths import UPSTREAM_SPECS
SPECS = ROOT / "schemas"
UPSTREAM = UPSTREAM_SPECS
needs_upstream = pytest.mark.skipif(not UPSTREAM.is_dir(), reason=f"no upstream specs at {UPSTREAM}")
PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "string", "uuid", "bytes",
              "records"}


def spec_files():
    """The spec files kafkawire.messages comes from (overlays in place), removed APIs left out."""
    files = {p.name: p for p in SPECS.glob("*.json")}
    files.update({p.name: p for overlay in DEFAULT_OVERLAYS for p in overlay.glob("*.json")})
    raw = {name: json.loads(strip_comments(path.read_text())) for name, path in files.items()}
    return [spec for spec in raw.values() if spec["validVersions"] != "none"]


def test_every_spec_has_a_schema():
    assert sorted(SCHEMAS) == sorted(spec["name"] for spec in spec_files())


def check_struct(cls, schema: dict, flexible: bool, where: str) -> None:
    names = [f["name"] for f in schema["fields"]]
    expected = list(cls._FIELDS) + (["unknown_tags"] if flexible else [])
    assert names == expected, where
    top = where.split(".")[0]
    for f in schema["fields"]:
        if f["name"] == "unknown_tags":
            assert f["type"] == "tagged fields" and "fields" not in f
            continue
        kafka_type = f["type"]
        element = kafka_type[2:] if kafka_type.startswith("[]") else kafka_type
        if element in PRIMITIVES:
            assert "fields" not in f, f"{where}.{f['name']}"
        else:
            # common structs and inline structs are all attributes of the message's class
            check_struct(getattr(message_class(top), element), f, flexible, f"{where}.{f['name']}")


def test_schemas_match_the_generated_classes():
    for name, schema in SCHEMAS.items():
        cls = message_class(name)
        check_struct(cls, schema, cls.FLEXIBLE_VERSIONS is not None, name)


def test_fields_carry_spec_type_and_versions():
    def field(message, *path):
        node = SCHEMAS[message]
        for part in path:
            node = next(f for f in node["fields"] if f["name"] == part)
        return {key: value for key, value in node.items() if key != "fields"}

    assert field("FetchRequest", "max_bytes") == {"name": "max_bytes", "type": "int32", "versions": "3+"}
    assert field("FetchRequest", "topics")["type"] == "[]FetchTopic"
    assert field("FetchRequest", "topics", "topic")["versions"] == "0-12"
    assert field("FetchRequest", "topics", "partitions", "remote_partition_max_bytes")["versions"] == "19+"
    assert field("FetchRequest", "cluster_id") == {
        "name": "cluster_id", "type": "string", "versions": "12+", "nullable_versions": "12+",
        "tagged_versions": "12+", "tag": 0}
    assert field("FetchRequest", "unknown_tags") == {"name": "unknown_tags", "type": "tagged fields",
                                                    "versions": "12+"}
    assert "unknown_tags" not in [f["name"] for f in SCHEMAS["ConsumerProtocolAssignment"]["fields"]]


def test_top_level_versions_match_the_spec_files():
    for raw in spec_files():
        fields = {f["name"]: f["versions"] for f in SCHEMAS[raw["name"]]["fields"]}
        for spec_field in raw["fields"]:
            snake = message_class(raw["name"])._FIELDS[[f["name"] for f in raw["fields"]].index(spec_field["name"])]
            assert fields[snake] == spec_field["versions"].strip(), f"{raw['name']}.{spec_field['name']}"


def test_module_is_plain_data():
    text = (ROOT / "kafkawire" / "messages" / "message_schemas.py").read_text()
    imports = [line for line in text.split('"""')[-1].splitlines() if "import" in line]
    assert imports == ["from __future__ import annotations", "from typing import Required, TypedDict"]  # types only
    entries = text.split("SCHEMAS: dict[str, MessageSchema] = {\n", 1)[1]
    assert len(entries.splitlines()) == len(SCHEMAS) + 1  # one message per line, then the closing brace
    assert "spark" not in text.lower()  # the specs' terms: Spark's types are derived in capture_spark


def test_generation_includes_message_schemas_only_when_asked():
    files = generate(SPECS, overlays=DEFAULT_OVERLAYS, message_schemas=True)
    assert files["message_schemas.py"] == (ROOT / "kafkawire" / "messages" / "message_schemas.py").read_text()
    assert "message_schemas.py" not in generate(SPECS)


@needs_upstream
def test_upstream_specs_generate_schemas():
    text = generate(UPSTREAM, message_schemas=True)["message_schemas.py"]
    namespace: dict = {}
    exec(compile(text, "message_schemas.py", "exec"), namespace)
    schemas = namespace["SCHEMAS"]
    removed = [p for p in UPSTREAM.glob("*.json") if '"validVersions": "none"' in p.read_text()]
    assert len(schemas) == len(list(UPSTREAM.glob("*.json"))) - len(removed) == 190


def test_recursive_struct_is_refused(tmp_path):
    spec = {
        "apiKey": 1000, "type": "request", "name": "LoopRequest", "validVersions": "0", "flexibleVersions": "none",
        "fields": [{"name": "Node", "type": "Node", "versions": "0+"}],
        "commonStructs": [{"name": "Node", "versions": "0+", "fields": [
            {"name": "Children", "type": "[]Node", "versions": "0+"}]}],
    }
    (tmp_path / "LoopRequest.json").write_text(json.dumps(spec))
    response = dict(spec, type="response", name="LoopResponse", fields=[], commonStructs=[])
    (tmp_path / "LoopResponse.json").write_text(json.dumps(response))
    (loop,) = [s for s in parse_directory(tmp_path) if s.name == "LoopRequest"]
    with pytest.raises(SpecError, match="recursive struct"):
        message_schema(loop)

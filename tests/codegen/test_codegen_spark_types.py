"""codegen's Spark schemas (kafkawire/messages/spark_types.py): pyspark loads every entry without a
JVM, and each matches its generated class, field by field, at every depth."""
from __future__ import annotations

import json

import pytest
from pyspark.sql.types import StructType

from codegen.generate import DEFAULT_OVERLAYS, generate
from codegen.parse import SpecError, parse_directory, strip_comments
from codegen.spark_schema import message_schema
from kafkawire.messages import message_class
from kafkawire.messages.spark_types import SCHEMAS

from paths import REPO as ROOT
from paths import UPSTREAM_SPECS
SPECS = ROOT / "schemas"
UPSTREAM = UPSTREAM_SPECS
needs_upstream = pytest.mark.skipif(not UPSTREAM.is_dir(), reason=f"no upstream specs at {UPSTREAM}")


def spec_files():
    """The spec files kafkawire.messages comes from (overlays in place), removed APIs left out."""
    files = {p.name: p for p in SPECS.glob("*.json")}
    files.update({p.name: p for overlay in DEFAULT_OVERLAYS for p in overlay.glob("*.json")})
    raw = {name: json.loads(strip_comments(path.read_text())) for name, path in files.items()}
    return [spec for spec in raw.values() if spec["validVersions"] != "none"]

SPARK = {"int8": "byte", "int16": "short", "int32": "integer", "int64": "long", "uint16": "integer",
         "uint32": "long", "float64": "double", "bool": "boolean", "string": "string", "uuid": "string",
         "bytes": "binary", "records": "binary"}


def test_every_spec_has_a_schema_that_pyspark_loads():
    assert sorted(SCHEMAS) == sorted(spec["name"] for spec in spec_files())
    for name, schema in SCHEMAS.items():
        loaded = StructType.fromJson(schema)
        assert loaded.jsonValue() == schema, name  # exactly jsonValue()'s form


def check_struct(cls, schema: dict, flexible: bool, where: str) -> None:
    names = [f["name"] for f in schema["fields"]]
    expected = list(cls._FIELDS) + (["unknown_tags"] if flexible else [])
    assert names == expected, where
    top = where.split(".")[0]
    for f in schema["fields"]:
        assert f["nullable"] is True, f"{where}.{f['name']}"
        if f["name"] == "unknown_tags":
            assert f["type"] == {"type": "map", "keyType": "integer", "valueType": "binary",
                                 "valueContainsNull": True}
            continue
        kafka_type = f["metadata"]["kafka_type"]
        spark_type = f["type"]
        element = kafka_type[2:] if kafka_type.startswith("[]") else kafka_type
        if kafka_type.startswith("[]"):
            assert spark_type["type"] == "array", f"{where}.{f['name']}"
            spark_type = spark_type["elementType"]
        if element in SPARK:
            assert spark_type == SPARK[element], f"{where}.{f['name']}"
        else:
            # common structs and inline structs are all attributes of the message's class
            check_struct(getattr(message_class(top), element), spark_type, flexible, f"{where}.{f['name']}")


def test_schemas_match_the_generated_classes():
    for name, schema in SCHEMAS.items():
        cls = message_class(name)
        check_struct(cls, schema, cls.FLEXIBLE_VERSIONS is not None, name)


def test_metadata_carries_spec_type_and_versions():
    def field(message, *path):
        node = SCHEMAS[message]
        for part in path:
            f = next(f for f in node["fields"] if f["name"] == part)
            node = f["type"]["elementType"] if isinstance(f["type"], dict) and f["type"]["type"] == "array" \
                else f["type"]
        return f

    assert field("FetchRequest", "max_bytes")["metadata"] == {"kafka_type": "int32", "versions": "3+"}
    assert field("FetchRequest", "topics")["metadata"]["kafka_type"] == "[]FetchTopic"
    assert field("FetchRequest", "topics", "topic")["metadata"]["versions"] == "0-12"
    assert field("FetchRequest", "topics", "partitions", "remote_partition_max_bytes")["metadata"]["versions"] == "19+"
    assert field("FetchRequest", "cluster_id")["metadata"] == {
        "kafka_type": "string", "versions": "12+", "nullable_versions": "12+", "tagged_versions": "12+", "tag": 0}
    assert field("FetchRequest", "unknown_tags")["metadata"] == {"kafka_type": "tagged fields", "versions": "12+"}
    assert "unknown_tags" not in [f["name"] for f in SCHEMAS["ConsumerProtocolAssignment"]["fields"]]


def test_top_level_versions_match_the_spec_files():
    for raw in spec_files():
        fields = {f["name"]: f["metadata"]["versions"] for f in SCHEMAS[raw["name"]]["fields"]}
        for spec_field in raw["fields"]:
            snake = message_class(raw["name"])._FIELDS[[f["name"] for f in raw["fields"]].index(spec_field["name"])]
            assert fields[snake] == spec_field["versions"].strip(), f"{raw['name']}.{spec_field['name']}"


def test_module_is_plain_data():
    text = (ROOT / "kafkawire" / "messages" / "spark_types.py").read_text()
    assert "import" not in text.split('"""')[-1]  # nothing imported after the docstring
    assert len(text.splitlines()) < len(SCHEMAS) + 20  # one message per line


def test_generation_includes_spark_types_only_when_asked():
    files = generate(SPECS, overlays=DEFAULT_OVERLAYS, spark_types=True)
    assert files["spark_types.py"] == (ROOT / "kafkawire" / "messages" / "spark_types.py").read_text()
    assert "spark_types.py" not in generate(SPECS)


@needs_upstream
def test_upstream_specs_generate_loadable_schemas():
    text = generate(UPSTREAM, spark_types=True)["spark_types.py"]
    namespace: dict = {}
    exec(compile(text, "spark_types.py", "exec"), namespace)
    schemas = namespace["SCHEMAS"]
    removed = [p for p in UPSTREAM.glob("*.json") if '"validVersions": "none"' in p.read_text()]
    assert len(schemas) == len(list(UPSTREAM.glob("*.json"))) - len(removed) == 190
    for name, schema in schemas.items():
        assert StructType.fromJson(schema).jsonValue() == schema, name


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

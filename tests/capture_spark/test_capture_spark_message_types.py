"""The Spark types of the typed bodies (kafkawire.capture_spark.message_types), derived from the
generated schemas: one per message, built without a JVM, the Spark side of the capture's Arrow types,
with the spec's facts in each field's metadata."""
from __future__ import annotations

import pytest
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, MapType, StructType

from kafkawire.capture.tables.bodies import arrow_type
from kafkawire.capture_spark.message_types import spark_type
from kafkawire.messages.message_schemas import SCHEMAS


def test_every_message_has_a_spark_type_that_survives_its_json_form():
    for name in SCHEMAS:
        found = spark_type(name)
        assert StructType.fromJson(found.jsonValue()) == found, name


def test_spark_types_are_the_spark_side_of_the_arrow_types():
    for name in SCHEMAS:
        assert to_arrow_type(spark_type(name)) == arrow_type(name), name


def test_fields_are_nullable_and_carry_the_spec_facts():
    fetch = spark_type("FetchRequest")
    assert all(field.nullable for field in fetch.fields)
    assert fetch["max_bytes"].metadata == {"kafka_type": "int32", "versions": "3+"}
    assert fetch["cluster_id"].metadata == {"kafka_type": "string", "versions": "12+", "nullable_versions": "12+",
                                            "tagged_versions": "12+", "tag": 0}
    topics = fetch["topics"].dataType
    assert isinstance(topics, ArrayType) and topics.containsNull
    assert topics.elementType["topic"].metadata["versions"] == "0-12"
    assert fetch["unknown_tags"].dataType == MapType(IntegerType(), BinaryType(), valueContainsNull=True)


def test_unknown_message_is_refused():
    with pytest.raises(KeyError, match="NoSuchMessage"):
        spark_type("NoSuchMessage")

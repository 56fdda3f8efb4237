"""The Spark types of the messages' typed bodies, derived from the generated schemas
(``kafkawire.messages.message_schemas``): the Spark side of the capture's Arrow types
(``capture.tables.bodies.arrow_type``), for reading the ``bodies/<message>`` tables with Spark.

Every field is nullable (null: not in the decoded version), and its metadata keeps the spec's facts:
``kafka_type`` and ``versions``, and where they apply ``nullable_versions``, ``tagged_versions`` and
``tag``. A flexible message's ``unknown_tags`` is a map of tag to raw bytes.
"""
from __future__ import annotations

from functools import lru_cache

from pyspark.sql.types import (
    ArrayType, BinaryType, BooleanType, ByteType, DataType, DoubleType, IntegerType, LongType, MapType, ShortType,
    StringType, StructField, StructType,
)

from kafkawire.messages.message_schemas import SCHEMAS, FieldSchema

TAGGED_FIELDS = "tagged fields"  # the type of unknown_tags
# Kafka type -> Spark type (unsigned types widened to the next signed one, uuids as text)
_ATOMS: dict[str, type[DataType]] = {
    "int8": ByteType, "int16": ShortType, "int32": IntegerType, "int64": LongType, "uint16": IntegerType,
    "uint32": LongType, "float64": DoubleType, "bool": BooleanType, "string": StringType, "uuid": StringType,
    "bytes": BinaryType, "records": BinaryType,
}


@lru_cache(maxsize=None)
def spark_type(name: str) -> StructType:
    """The Spark struct type of message ``name``'s typed bodies."""
    try:
        fields = SCHEMAS[name]["fields"]
    except KeyError:
        raise KeyError(f"no schema for message {name!r}") from None
    return _struct(fields)


def _struct(fields: list[FieldSchema]) -> StructType:
    return StructType([StructField(f["name"], _field_type(f), nullable=True, metadata=_metadata(f)) for f in fields])


def _metadata(f: FieldSchema) -> dict[str, str | int]:
    """The spec's facts of a field: its Kafka type and versions, and the rest where they apply."""
    metadata: dict[str, str | int] = {"kafka_type": f["type"], "versions": f["versions"]}
    if "nullable_versions" in f:
        metadata["nullable_versions"] = f["nullable_versions"]
    if "tagged_versions" in f:
        metadata["tagged_versions"] = f["tagged_versions"]
    if "tag" in f:
        metadata["tag"] = f["tag"]
    return metadata


def _field_type(f: FieldSchema) -> DataType:
    kafka_type = f["type"]
    if kafka_type == TAGGED_FIELDS:
        return MapType(IntegerType(), BinaryType(), valueContainsNull=True)
    array = kafka_type.startswith("[]")
    element = _struct(f["fields"]) if "fields" in f else _ATOMS[kafka_type[2:] if array else kafka_type]()
    return ArrayType(element, containsNull=True) if array else element

"""Where message bodies name topics, and the topic names that responses pair with topic ids.

Topics are found through the message schemas (``bodies.SCHEMAS``), for every API alike: a struct in an
array whose elements name a topic (a ``topic``, ``topic_name`` or ``topic_id`` field, or ``name`` in an
array called ``*topic*``), with its partitions (an array of structs with a partition number, or an
array of int32 partition numbers). A field counts only at the versions that carry it: Fetch v13+ has a
``topic`` attribute too (empty), but names its topics by id.

``TopicNames`` learns the (topic id, name) pairs of every response that carries both (Metadata v10+,
CreateTopics v7+, DeleteTopics v6+, DescribeTopicPartitions, ConsumerGroupDescribe...), for the requests
and responses that name topics by id only (Produce v13+, Fetch v13+...). Its own module, free of Arrow,
so that ``kafkawire show`` starts without pyarrow.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterator, NamedTuple

from kafkawire.codec.primitives import ABSENT

from kafkawire.messages.message_schemas import FieldSchema, MessageSchema

from .bodies import SCHEMAS, versions_contain

__all__ = ["TopicNames", "TopicStruct", "topic_structs", "topic_label", "names_ids"]

_TOPIC_FIELDS = ("topic", "topic_name")
_PARTITION_FIELDS = ("partition_index", "partition", "index", "partition_id")
_PARTITION_LISTS = ("partitions", "partition_indexes", "partition_ids")


class TopicStruct(NamedTuple):
    """A struct of a body that names a topic: its name and id (as text) where the version carries them
    (None otherwise, and for an empty name or the zero id), and where its partitions are."""
    name: str | None
    topic_id: str | None
    partitions: tuple[str, str | None] | None  # (list field, number field; None: a list of int32)
    item: object


class _Spec(NamedTuple):
    topic_field: str | None
    topic_versions: str
    id_field: str | None
    id_versions: str
    partitions: tuple[str, str | None] | None


# ((field, is array, topic spec or None, child plan), ...): where a struct's fields hold topics
_Plan = tuple[tuple[str, bool, "_Spec | None", "_Plan"], ...]


def topic_label(name: str | None, topic_id: str | None) -> str:
    """How a topic reads in a line: its name, or its id where no name for it was seen."""
    if name is not None:
        return name
    return f"(unknown topic id {topic_id})" if topic_id is not None else "(no topic)"


class TopicNames:
    """Topic names by topic id (as text), from the responses seen so far that pair them. Bounded: the
    oldest ids are forgotten first."""

    def __init__(self, limit: int = 100_000):
        self.limit = limit
        self.names: dict[str, str] = {}

    def learn(self, body, version: int) -> None:
        """The pairs of a response body, read at ``version`` (a request's are the client's say-so)."""
        if not _pairs_names(body.NAME, version):
            return
        for struct in topic_structs(body, version):
            if struct.name is not None and struct.topic_id is not None:
                self.names.pop(struct.topic_id, None)
                self.names[struct.topic_id] = struct.name
        while len(self.names) > self.limit:
            del self.names[next(iter(self.names))]

    def get(self, topic_id: str | None) -> str | None:
        return self.names.get(topic_id) if topic_id is not None else None


def topic_structs(body, version: int) -> Iterator[TopicStruct]:
    """The structs of ``body`` (read at ``version``) that name a topic, in body order."""
    for spec, item in _walk(body, _plan(body.NAME)):
        topic_field, id_field = _fields_at(spec, version)
        name = topic_id = None
        if topic_field is not None:
            name = getattr(item, topic_field, None)
            name = name if _present(name) and name != "" else None
        if id_field is not None:
            value = getattr(item, id_field, None)
            topic_id = str(value) if value is not None and _present(value) and value.int else None  # zero: no id
        yield TopicStruct(name, topic_id, spec.partitions, item)


@lru_cache(maxsize=None)
def _fields_at(spec: _Spec, version: int) -> tuple[str | None, str | None]:
    """The spec's name and id fields that ``version`` carries."""
    return (spec.topic_field if spec.topic_field and versions_contain(spec.topic_versions, version) else None,
            spec.id_field if spec.id_field and versions_contain(spec.id_versions, version) else None)


def names_ids(api_key: int | None, version: int | None) -> bool:
    """Whether the responses of API ``api_key`` at ``version`` pair topic ids with names."""
    from kafkawire.messages import api

    if api_key is None or version is None:
        return False
    try:
        info = api(api_key)
    except KeyError:
        return False
    return _pairs_names(info.response, version)


def _present(value) -> bool:
    return value is not None and value is not ABSENT


@lru_cache(maxsize=None)
def _pairs_names(message: str, version: int) -> bool:
    """Whether ``message`` at ``version`` has a struct with both a topic's name and its id."""
    if not message.endswith("Response"):
        return False
    return any(None not in _fields_at(spec, version) for spec in _specs(_plan(message)))


def _specs(plan) -> Iterator[_Spec]:
    for _, _, spec, child in plan:
        if spec is not None:
            yield spec
        else:
            yield from _specs(child)


def _walk(obj, plan):
    """(topic spec, topic struct) for each topic struct below ``obj``, following the plan."""
    for field, is_array, spec, child in plan:
        value = getattr(obj, field, None)
        if not _present(value):
            continue
        for item in value if is_array else (value,):
            if spec is not None:
                yield spec, item
            else:
                yield from _walk(item, child)


@lru_cache(maxsize=None)
def _plan(message: str) -> tuple:
    return _struct_plan(SCHEMAS[message], 0)


def _struct_plan(schema: MessageSchema | FieldSchema, depth: int) -> _Plan:
    """((field, is array, topic spec or None, child plan), ...) of the fields of a struct that hold topics."""
    plan: list[tuple[str, bool, _Spec | None, _Plan]] = []
    for f in schema["fields"]:
        element, is_array = _element(f)
        if element is None or depth > 3:
            continue
        spec = _topic_spec(f["name"], element)
        if spec is not None:
            plan.append((f["name"], is_array, spec, ()))
            continue
        child = _struct_plan(element, depth + 1)
        if child:
            plan.append((f["name"], is_array, None, child))
    return tuple(plan)


def _element(field: FieldSchema) -> tuple[FieldSchema | None, bool]:
    """(struct schema, is array) of a struct or array-of-struct field; (None, False) otherwise."""
    if "fields" in field:  # the field is the struct's schema (its fields inline)
        return field, field["type"].startswith("[]")
    return None, False


def _topic_spec(field_name: str, element: FieldSchema) -> _Spec | None:
    """Where a struct names its topic and its partitions, when the struct is a topic's; None otherwise."""
    kinds = {f["name"]: f["type"] for f in element["fields"]}
    versions = {f["name"]: f["versions"] for f in element["fields"]}
    partitions: tuple[str, str | None] | None = None
    for f in element["fields"]:
        inner, _ = _element(f)
        if inner is not None:
            numbers = {g["name"]: g["type"] for g in inner["fields"]}
            number = next((name for name in _PARTITION_FIELDS if numbers.get(name) == "int32"), None)
            if number is not None and "partition" in f["name"]:
                partitions = (f["name"], number)
                break
        elif f["name"] in _PARTITION_LISTS and f["type"] == "[]int32":
            partitions = (f["name"], None)
            break
    id_field = "topic_id" if kinds.get("topic_id") == "uuid" else None
    topic_field = next((name for name in _TOPIC_FIELDS if kinds.get(name) == "string"), None)
    if topic_field is None and kinds.get("name") == "string" and (
            "topic" in field_name or id_field is not None or partitions is not None):
        topic_field = "name"  # a topic's name where the struct is plainly a topic's
    if topic_field is None and id_field is None:
        return None
    return _Spec(topic_field, versions.get(topic_field, "none") if topic_field else "none",
                 id_field, versions.get(id_field, "none") if id_field else "none", partitions)

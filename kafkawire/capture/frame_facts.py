"""What one decoded frame says at a glance: its topics and partitions, error codes, records, and the
problems its decoding found, for ``kafkawire show``'s one line per frame.

Topics are found through the message schemas (``bodies.SCHEMAS``), for every API alike: a struct in an
array whose elements name a topic (a ``topic``, ``topic_name`` or ``topic_id`` field, or ``name`` in an
array called ``*topic*``), with its partitions (an array of structs with a partition number, or an
array of int32 partition numbers). Records blobs (Produce requests, Fetch responses) are read by batch
header, as the capture job's joins read them, and a blob that does not read is the same problem.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from kafkawire.codec.primitives import ABSENT

from .bodies import SCHEMAS, error_codes, top_error_code
from .frame_decoding import Decoded, decode_frame, decode_problem, summarize_records
from .model import KafkaFrame, Problem
from .topic_names import TopicNames

__all__ = ["FrameFacts", "frame_facts", "TopicNames"]

_TOPIC_FIELDS = ("topic", "topic_name")
_PARTITION_FIELDS = ("partition_index", "partition", "index", "partition_id")
_PARTITION_LISTS = ("partitions", "partition_indexes", "partition_ids")
_NAMING_RESPONSES = (3, 19)  # Metadata and CreateTopics responses pair topic names with topic ids
_PRODUCE, _FETCH = 0, 1


class Topic(NamedTuple):
    name: str | None
    topic_id: str | None
    partitions: list


class FrameFacts(NamedTuple):
    decoded: Decoded
    topics: list[Topic]
    error_code: int | None       # the response's own error_code, where its version has one
    error_codes: list[int]       # every distinct non-zero error code in the body
    records: int | None          # records in the body's record batches (None: the body carries none)
    problems: list[Problem]      # what decoding found (as the capture job's problems table lists them)


def frame_facts(frame: KafkaFrame, names: TopicNames) -> FrameFacts:
    """Decodes ``frame`` and reads what the one-line summary shows; ``names`` learns the topic ids that
    Metadata and CreateTopics responses resolve, and names topics given by id only."""
    decoded = decode_frame(frame)
    problems = []
    problem = decode_problem(frame, decoded)
    if problem is not None:
        problems.append(problem)
    body = decoded.body
    if body is None:
        return FrameFacts(decoded, [], None, [], None, problems)
    if frame.api_key in _NAMING_RESPONSES and frame.direction == "response":
        names.learn(body)
    topics, records = _topics(frame, body, names, problems)
    code = codes = None
    if frame.direction == "response":
        code, codes = top_error_code(body, decoded.version), error_codes(body)
    return FrameFacts(decoded, topics, code, codes or [], records, problems)


def _present(value) -> bool:
    return value is not None and value is not ABSENT


def _topics(frame: KafkaFrame, body, names: TopicNames, problems: list) -> tuple[list[Topic], int | None]:
    # record blobs are read (and their problems reported) where the capture job's joins read them
    blobs = (frame.api_key == _PRODUCE and frame.direction == "request"
             or frame.api_key == _FETCH and frame.direction == "response")
    found: list[Topic] = []
    records = 0 if blobs else None
    for struct in _walk(body, _plan(body.NAME)):
        topic_field, id_field, partitions = struct[0]
        item = struct[1]
        name = getattr(item, topic_field, None) if topic_field else None
        topic_id = getattr(item, id_field, None) if id_field else None
        topic_id = str(topic_id) if _present(topic_id) and topic_id.int else None  # zero: no id
        name = name if _present(name) else names.get(topic_id)
        numbers: list = []
        if partitions is not None:
            list_field, number_field = partitions
            values = getattr(item, list_field, None)
            for value in values if _present(values) else ():
                if number_field is None:
                    numbers.append(value)
                    continue
                numbers.append(getattr(value, number_field, None))
                if blobs:
                    blob = getattr(value, "records", None)
                    if _present(blob):
                        summary = summarize_records(blob)
                        records += summary.record_count
                        if summary.error is not None:
                            problems.append(_records_problem(frame, name, topic_id, numbers[-1], summary.error))
        found.append(Topic(name, topic_id, numbers))
    return found, records


def _records_problem(frame: KafkaFrame, name, topic_id, partition, reason: str) -> Problem:
    where = f"{name if name is not None else topic_id}-{partition}"
    return Problem(frame.connection, frame.direction, frame.end_ts_ns, "undecodable",
                   f"records of {where}: {reason}", frame.offset, frame.size + 4, frame.api_key,
                   frame.api_version, frame.correlation_id)


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


def _struct_plan(schema: dict, depth: int) -> tuple:
    """((field, is array, topic spec or None, child plan), ...) of the fields of a struct that hold topics."""
    plan = []
    for f in schema["fields"]:
        element, is_array = _element(f["type"])
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


def _element(spark_type):
    """(struct schema, is array) of a struct or array-of-struct field; (None, False) otherwise."""
    is_array = isinstance(spark_type, dict) and spark_type["type"] == "array"
    inner = spark_type["elementType"] if is_array else spark_type
    if isinstance(inner, dict) and inner["type"] == "struct":
        return inner, is_array
    return None, False


def _topic_spec(field_name: str, element: dict):
    """(topic name field, topic id field, (partitions field, number field or None)) when the struct is
    a topic's; None otherwise."""
    kinds = {f["name"]: f["metadata"]["kafka_type"] for f in element["fields"]}
    partitions = None
    for f in element["fields"]:
        inner, _ = _element(f["type"])
        if inner is not None:
            numbers = {g["name"]: g["metadata"]["kafka_type"] for g in inner["fields"]}
            number = next((name for name in _PARTITION_FIELDS if numbers.get(name) == "int32"), None)
            if number is not None and "partition" in f["name"]:
                partitions = (f["name"], number)
                break
        elif f["name"] in _PARTITION_LISTS and f["metadata"]["kafka_type"] == "[]int32":
            partitions = (f["name"], None)
            break
    id_field = "topic_id" if kinds.get("topic_id") == "uuid" else None
    topic_field = next((name for name in _TOPIC_FIELDS if kinds.get(name) == "string"), None)
    if topic_field is None and kinds.get("name") == "string" and (
            "topic" in field_name or id_field is not None or partitions is not None):
        topic_field = "name"  # a topic's name where the struct is plainly a topic's
    if topic_field is None and id_field is None:
        return None
    return topic_field, id_field, partitions

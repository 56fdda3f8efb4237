"""What one decoded frame says at a glance: its topics and partitions, error codes, records, and the
problems its decoding found, for ``kafkawire show``'s one line per frame.

Topics are found through the message schemas, for every API alike (``topic_names.topic_structs``); a
topic named by id only gets the name the responses read so far paired with that id. Records blobs
(Produce requests, Fetch responses) are read by batch header, as the capture job's joins read them,
and a blob that does not read is the same problem.
"""
from __future__ import annotations

from typing import NamedTuple

from kafkawire.codec.primitives import ABSENT

from ..tables.bodies import error_codes, top_error_code
from ..tables.frame_decoding import Decoded, decode_frame, decode_problem, summarize_records
from ..model import KafkaFrame, Problem
from ..tables.topic_names import TopicNames, topic_structs

__all__ = ["FrameFacts", "frame_facts", "TopicNames"]

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
    responses pair with names (Metadata, CreateTopics...), and names topics given by id only."""
    decoded = decode_frame(frame)
    problems = []
    problem = decode_problem(frame, decoded)
    if problem is not None:
        problems.append(problem)
    body, version = decoded.body, decoded.version
    if body is None or version is None:  # (a body comes with its version)
        return FrameFacts(decoded, [], None, [], None, problems)
    if frame.direction == "response":
        names.learn(body, version)
    topics, records = _topics(frame, body, version, names, problems)
    code = codes = None
    if frame.direction == "response":
        code, codes = top_error_code(body, version), error_codes(body)
    return FrameFacts(decoded, topics, code, codes or [], records, problems)


def _topics(frame: KafkaFrame, body, version: int, names: TopicNames,
            problems: list) -> tuple[list[Topic], int | None]:
    # record blobs are read (and their problems reported) where the capture job's joins read them
    blobs = (frame.api_key == _PRODUCE and frame.direction == "request"
             or frame.api_key == _FETCH and frame.direction == "response")
    found: list[Topic] = []
    records = 0 if blobs else None
    for struct in topic_structs(body, version):
        topic_id = struct.topic_id
        name = struct.name if struct.name is not None else names.get(topic_id)
        numbers: list = []
        if struct.partitions is not None:
            list_field, number_field = struct.partitions
            values = getattr(struct.item, list_field, None)
            for value in values if values is not None and values is not ABSENT else ():
                if number_field is None:
                    numbers.append(value)
                    continue
                numbers.append(getattr(value, number_field, None))
                if blobs:
                    blob = getattr(value, "records", None)
                    if blob is not None and blob is not ABSENT:
                        summary = summarize_records(blob)
                        records = (records or 0) + summary.record_count  # (an int with blobs)
                        if summary.error is not None:
                            problems.append(_records_problem(frame, name, topic_id, numbers[-1], summary.error))
        found.append(Topic(name, topic_id, numbers))
    return found, records


def _records_problem(frame: KafkaFrame, name, topic_id, partition, reason: str) -> Problem:
    where = f"{name if name is not None else topic_id}-{partition}"  # as the job's problems table says it
    return Problem(frame.connection, frame.direction, frame.end_ts_ns, "undecodable",
                   f"records of {where}: {reason}", frame.offset, frame.size + 4, frame.api_key,
                   frame.api_version, frame.correlation_id)

"""Fetch and Produce requests joined with their responses, one row per partition (``fetches``,
``produces``), and the partitions' records into the records table.

``TableBatcher`` (``rows``) runs a join for each request and its response (either may be missing);
``TopicNames`` remembers the topic names that responses pair with topic ids, for requests that name
topics by id only.
"""
from __future__ import annotations

from kafkawire.errors import DecodeError
from kafkawire.messages import api

from .frame_decoding import BlobSummary, summarize_records
from .bodies import has_field
from ..model import KafkaFrame
from .record_table import RecordRows
from .topic_names import TopicNames
from .table_schemas import latency_ms, micros

__all__ = ["FetchJoin", "ProduceJoin", "Join", "TopicNames", "topic_items"]


class Join:
    """A request and its response (either may be missing), flattened to partitions by (topic name,
    topic id, partition): the response's partitions in its order, then request partitions it lacks."""

    REQUEST: str
    RESPONSE: str

    def __init__(self, batcher, request: KafkaFrame, request_body, request_version,
                 response: KafkaFrame | None, response_body, response_version):
        self.batcher = batcher
        self.request = request
        self.request_body = request_body
        self.request_version = request_version
        self.response = response
        self.response_body = response_body
        self.response_version = response_version
        self.ts = micros((response or request).end_ts_ns)
        self.latency_ms = latency_ms(response, request) if response is not None else None

    def run(self) -> None:
        """The rows of this request and response."""
        raise NotImplementedError

    def request_has(self, *path: str) -> bool:
        return self.request_body is not None and has_field(self.REQUEST, path, self.request_version)

    def response_has(self, *path: str) -> bool:
        return self.response_body is not None and has_field(self.RESPONSE, path, self.response_version)

    def pairs(self, request_partitions: list, response_partitions: list):
        """(request item or None, response item or None) per partition; items are
        (topic, topic_id, partition number, partition struct, index)."""
        by_key: dict[tuple[object, ...], tuple[object, ...]] = {}
        for item in request_partitions:
            by_key.setdefault(item[:3], item)
        matched = set()
        for item in response_partitions:
            found = by_key.get(item[:3])
            if found is not None and item[:3] not in matched:
                matched.add(item[:3])
                yield found, item
            else:
                yield None, item
        for item in request_partitions:
            if item[:3] not in matched:
                matched.add(item[:3])
                yield item, None

    def problem(self, frame: KafkaFrame, topic, topic_id, partition, reason: str) -> None:
        where = f"{topic if topic is not None else topic_id}-{partition}"
        name = api(frame.api_key).name if frame.api_key is not None else None  # (a Fetch or Produce: known)
        self.batcher._add_problem(frame.connection, frame.direction, frame.end_ts_ns, "undecodable",
                                  f"records of {where}: {reason}", frame.offset, frame.size + 4, frame.api_key,
                                  name, frame.api_version, frame.correlation_id)

    def records(self, source: str, frame: KafkaFrame, topic, topic_id, partition, summary: BlobSummary,
                first_offset: int | None) -> None:
        """The partition's records into the records table, and a problem for a batch that does not read."""
        if summary.error is not None:
            self.problem(frame, topic, topic_id, partition, summary.error)
        table = self.batcher.records
        if table is None or not summary.batches:
            return
        rows = RecordRows(table, source, frame.connection, frame.correlation_id, micros(frame.end_ts_ns), topic,
                           topic_id, partition, first_offset)
        for batch in summary.batches:
            try:
                rows.add(batch)
            except DecodeError as error:
                self.problem(frame, topic, topic_id, partition, str(error))
                return


def topic_items(topics, topic_field: str | None, id_field: str | None, partitions_field: str,
                 partition_field: str, names: TopicNames) -> list:
    items = []
    index = 0
    for topic in topics:
        topic_id = str(getattr(topic, id_field)) if id_field else None
        name = getattr(topic, topic_field) if topic_field else names.get(topic_id)
        for partition in getattr(topic, partitions_field):
            items.append((name, topic_id, getattr(partition, partition_field), partition, index))
            index += 1
    return items


class FetchJoin(Join):
    REQUEST, RESPONSE = "FetchRequest", "FetchResponse"

    def run(self) -> None:
        request, response = self.request_body, self.response_body
        request_items = response_items = []
        if request is not None:
            request_items = topic_items(request.topics, "topic" if self.request_has("topics", "topic") else None,
                                         "topic_id" if self.request_has("topics", "topic_id") else None,
                                         "partitions", "partition", self.batcher.topic_names)
            top = request
            head: tuple[object, ...] = (top.max_wait_ms, top.min_bytes,
                    top.max_bytes if self.request_has("max_bytes") else None,
                    top.isolation_level if self.request_has("isolation_level") else None,
                    top.session_id if self.request_has("session_id") else None,
                    top.session_epoch if self.request_has("session_epoch") else None)
            has_log_start = self.request_has("topics", "partitions", "log_start_offset")
            has_remote = self.request_has("topics", "partitions", "remote_partition_max_bytes")
        else:
            head = (None,) * 6
        response_frame = self.response
        if response is not None and response_frame is not None:  # a body comes with its frame
            response_items = topic_items(
                response.responses, "topic" if self.response_has("responses", "topic") else None,
                "topic_id" if self.response_has("responses", "topic_id") else None, "partitions", "partition_index",
                self.batcher.topic_names)
            tail: tuple[object, ...] = (response.error_code if self.response_has("error_code") else None,
                    response.session_id if self.response_has("session_id") else None,
                    response.throttle_time_ms if self.response_has("throttle_time_ms") else None)
            has_lso = self.response_has("responses", "partitions", "last_stable_offset")
            has_log_start_response = self.response_has("responses", "partitions", "log_start_offset")
            has_replica = self.response_has("responses", "partitions", "preferred_read_replica")
            response_size: int | None = response_frame.size
        else:
            tail = (None,) * 3
            response_size = None
        table = self.batcher.tables.get("fetches")
        where = (self.ts, self.request.connection, self.request.client, self.request.broker,
                 self.request.client_id, self.request.correlation_id, self.request.api_version)
        for asked, got in self.pairs(request_items, response_items):
            topic, topic_id, partition = (asked or got)[:3]
            if asked is not None:
                p = asked[3]
                request_part: tuple[object, ...] = (asked[4], p.fetch_offset, p.partition_max_bytes,
                                p.remote_partition_max_bytes if has_remote else None,
                                p.log_start_offset if has_log_start else None)
            else:
                request_part = (None,) * 5
            if got is not None:
                p = got[3]
                summary = summarize_records(p.records)
                response_part: tuple[object, ...] = (
                    p.error_code, p.high_watermark, p.last_stable_offset if has_lso else None,
                    p.log_start_offset if has_log_start_response else None,
                    p.preferred_read_replica if has_replica else None,
                    summary.records_bytes, summary.first_batch_bytes, summary.batch_count,
                    summary.record_count, summary.first_offset, summary.last_offset, response_size,
                    self.latency_ms)
                assert response_frame is not None  # a partition it answered
                self.records("fetch", response_frame, topic, topic_id, partition, summary, None)
            else:
                response_part = (None,) * 13
            if table is not None:
                table.append(where + head + (topic, topic_id, partition) + request_part + tail + response_part,
                              256)


class ProduceJoin(Join):
    REQUEST, RESPONSE = "ProduceRequest", "ProduceResponse"

    def run(self) -> None:
        request, response = self.request_body, self.response_body
        request_items = response_items = []
        head: tuple[object, ...] = (None,) * 3
        if request is not None:
            request_items = topic_items(request.topic_data, "name" if self.request_has("topic_data", "name") else None,
                                         "topic_id" if self.request_has("topic_data", "topic_id") else None,
                                         "partition_data", "index", self.batcher.topic_names)
            head = (request.acks, request.timeout_ms,
                    request.transactional_id if self.request_has("transactional_id") else None)
        throttle = None
        if response is not None:
            response_items = topic_items(
                response.responses, "name" if self.response_has("responses", "name") else None,
                "topic_id" if self.response_has("responses", "topic_id") else None, "partition_responses", "index",
                self.batcher.topic_names)
            throttle = response.throttle_time_ms if self.response_has("throttle_time_ms") else None
            has_message = self.response_has("responses", "partition_responses", "error_message")
            has_append_time = self.response_has("responses", "partition_responses", "log_append_time_ms")
            has_log_start = self.response_has("responses", "partition_responses", "log_start_offset")
        table = self.batcher.tables.get("produces")
        where = (self.ts, self.request.connection, self.request.client, self.request.broker,
                 self.request.client_id, self.request.correlation_id, self.request.api_version)
        for asked, got in self.pairs(request_items, response_items):
            topic, topic_id, partition = (asked or got)[:3]
            base_offset = None
            if got is not None:
                p = got[3]
                base_offset = p.base_offset
                response_part: tuple[object, ...] = (
                    p.error_code, p.error_message if has_message else None, p.base_offset,
                    p.log_append_time_ms if has_append_time else None,
                    p.log_start_offset if has_log_start else None, throttle, self.latency_ms)
            else:
                response_part = (None,) * 7
            if asked is not None:
                summary = summarize_records(asked[3].records)
                request_part: tuple[object, ...] = (summary.records_bytes, summary.batch_count, summary.record_count,
                                summary.compression, summary.producer_id, summary.producer_epoch,
                                summary.base_sequence, summary.is_transactional)
                assigned = base_offset if base_offset is not None and base_offset >= 0 else None
                self.records("produce", self.request, topic, topic_id, partition, summary, assigned)
            else:
                request_part = (None,) * 8
            if table is not None:
                table.append(where + head + (topic, topic_id, partition) + request_part + response_part, 256)

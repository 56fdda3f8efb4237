"""ShareFetch and ShareAcknowledge requests (KIP-932 share groups) joined with their responses: the
ranges of records a ShareFetch response acquired (``share_acquisitions``), the acknowledgements the
requests carried (``share_acknowledgements``, one row per run of one acknowledge type) and the records
the response carries (``records``, source ``share_fetch``).

Both APIs name topics by id only; ``TopicNames`` gives the names responses of the capture paired with
them. The group and member of a row are the request's (a response carries neither).
"""
from __future__ import annotations

from .joins import Join, topic_items
from .frame_decoding import summarize_records
from .table_schemas import micros

__all__ = ["ShareFetchJoin", "ShareAcknowledgeJoin", "ACKNOWLEDGE_TYPES", "acknowledgement_runs"]

# The AcknowledgeTypes of the wire (Kafka's AcknowledgeType, and 0 for an offset with no record).
ACKNOWLEDGE_TYPES = {0: "GAP", 1: "ACCEPT", 2: "RELEASE", 3: "REJECT", 4: "RENEW"}


def acknowledgement_runs(first_offset: int, last_offset: int, types) -> list[tuple[int, int, str | None]]:
    """An AcknowledgementBatch as (first, last, type) runs: one type applies to the whole range, as
    many types as offsets give one each (runs of equal ones merged); any other count is invalid (Kafka
    answers INVALID_REQUEST) and gives the whole range with a null type."""
    count = last_offset - first_offset + 1
    if len(types) == 1 or (types and len(set(types)) == 1 and len(types) == count):
        return [(first_offset, last_offset, _type_name(types[0]))]
    if count <= 0 or len(types) != count:
        return [(first_offset, last_offset, None)]
    runs: list[tuple[int, int, str | None]] = []
    start = 0
    for i in range(1, count + 1):
        if i == count or types[i] != types[start]:
            runs.append((first_offset + start, first_offset + i - 1, _type_name(types[start])))
            start = i
    return runs


def _type_name(code: int) -> str:
    return ACKNOWLEDGE_TYPES.get(code, "UNKNOWN")


class _ShareJoin(Join):
    """The request's who (header, group, member, session epoch) and its acknowledgements, by partition."""

    API_NAME: str

    def who(self) -> tuple:
        request, body = self.request, self.request_body
        group = member = epoch = None
        if body is not None:
            group, member, epoch = body.group_id, body.member_id, body.share_session_epoch
        return (request.connection, request.client, request.broker, request.client_id, request.correlation_id,
                request.api_version, group, member, epoch)

    def partitions(self) -> tuple[list, list]:
        """The request's and the response's partition items (``topic_items``: both name topics by id)."""
        names = self.batcher.topic_names
        request_items = response_items = []
        if self.request_body is not None:
            request_items = topic_items(self.request_body.topics, None, "topic_id", "partitions", "partition_index",
                                        names)
        if self.response_body is not None and self.response is not None:
            response_items = topic_items(self.response_body.responses, None, "topic_id", "partitions",
                                         "partition_index", names)
        return request_items, response_items

    def acknowledgements(self, request_items: list, response_items: list, error_of) -> None:
        """A row per acknowledgement run of each request partition; ``error_of(partition struct)`` is the
        response partition's acknowledgement error code."""
        table = self.batcher.tables.get("share_acknowledgements")
        if table is None or self.request_body is None:
            return
        answered = {item[:3]: item[3] for item in response_items}
        renew = self.request_body.is_renew_ack if self.request_has("is_renew_ack") else None
        top = self.response_body.error_code if self.response_body is not None else None
        who = self.who()
        ts = micros(self.request.end_ts_ns)  # when the acknowledgements were sent
        for topic, topic_id, partition, struct, _ in request_items:
            got = answered.get((topic, topic_id, partition))
            error = error_of(got) if got is not None else None
            for batch in struct.acknowledgement_batches:
                for first, last, kind in acknowledgement_runs(batch.first_offset, batch.last_offset,
                                                              batch.acknowledge_types):
                    table.append((ts, *who, topic, topic_id, partition, self.API_NAME, renew, first, last, kind,
                                  error, top, self.latency_ms), 256)


class ShareFetchJoin(_ShareJoin):
    REQUEST, RESPONSE, API_NAME = "ShareFetchRequest", "ShareFetchResponse", "ShareFetch"

    def run(self) -> None:
        request_items, response_items = self.partitions()
        self.acknowledgements(request_items, response_items, lambda p: p.acknowledge_error_code)
        response, frame = self.response_body, self.response
        if response is None or frame is None:
            return
        table = self.batcher.tables.get("share_acquisitions")
        lock_ms = response.acquisition_lock_timeout_ms if self.response_has("acquisition_lock_timeout_ms") else None
        who = self.who()
        for topic, topic_id, partition, p, _ in response_items:
            if table is not None:
                for acquired in p.acquired_records:
                    table.append((self.ts, *who, topic, topic_id, partition, acquired.first_offset,
                                  acquired.last_offset, acquired.delivery_count, p.error_code, response.error_code,
                                  lock_ms), 256)
            self.records("share_fetch", frame, topic, topic_id, partition, summarize_records(p.records), None)


class ShareAcknowledgeJoin(_ShareJoin):
    REQUEST, RESPONSE, API_NAME = "ShareAcknowledgeRequest", "ShareAcknowledgeResponse", "ShareAcknowledge"

    def run(self) -> None:
        self.acknowledgements(*self.partitions(), lambda p: p.error_code)

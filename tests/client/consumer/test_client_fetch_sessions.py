"""The client side of KIP-227 fetch sessions (kafkawire.client.core.consumer.fetch_session): a full request, then
incremental ones that send only what changed and forget what left; errors back to full requests; epochs
wrapping to 1; topic ids on Fetch v13+, replaced ones, and v12 at most without them.
"""
from __future__ import annotations

import uuid

from kafkawire.client.core.consumer.fetch_session import (
    FINAL_EPOCH, INITIAL_EPOCH, ZERO_UUID, FetchSessionHandler, PartitionFetchData, next_epoch,
)
from kafkawire.client.core.topic_partition import TopicPartition
from kafkawire.error_codes import ErrorCode
from kafkawire.messages import FetchRequest, FetchResponse

NODE = 1
T = "events"


def tp(partition: int, topic: str = T) -> TopicPartition:
    return TopicPartition(topic, partition)


def fetch_data(offset: int, topic_id=ZERO_UUID, max_bytes: int = 1024) -> PartitionFetchData:
    return PartitionFetchData(topic_id, offset, -1, max_bytes, max_bytes)


def session_response(data, session_id: int, returned=None, error_code: int = 0) -> FetchResponse:
    names = data.session_partitions if returned is None else returned
    topics = []
    for p in names:
        topics.append(FetchResponse.FetchableTopicResponse(
            topic=p.topic, topic_id=data.session_partitions.get(p, fetch_data(0)).topic_id,
            partitions=[FetchResponse.PartitionData(partition_index=p.partition, records=b"")]))
    return FetchResponse(session_id=session_id, error_code=error_code, responses=topics)


def test_session_full_then_incremental_with_forget_and_re_add():
    handler = FetchSessionHandler(NODE)
    a, b, c = tp(0), tp(1), tp(2)
    full = handler.build({a: fetch_data(0), b: fetch_data(0), c: fetch_data(0)}, 12)
    assert full.is_full and (full.session_id, full.epoch) == (0, INITIAL_EPOCH)
    assert list(full.to_send) == [a, b, c] and full.to_forget == []
    assert handler.handle_response(full, session_response(full, 77))
    assert (handler.session_id, handler.epoch) == (77, 1)

    same = handler.build({a: fetch_data(0), b: fetch_data(0), c: fetch_data(0)}, 12)
    assert not same.is_full and (same.session_id, same.epoch) == (77, 1)
    assert same.to_send == {} and same.to_forget == []  # nothing changed: an empty incremental request
    assert handler.handle_response(same, session_response(same, 77, returned=[]))
    assert handler.epoch == 2

    # a has buffered records (left out: forgotten), b moved on
    moved = handler.build({b: fetch_data(5), c: fetch_data(0)}, 12)
    assert list(moved.to_send) == [b] and moved.to_forget == [(a, ZERO_UUID)]
    request = moved.to_request(max_wait_ms=500, min_bytes=1, max_bytes=1000)
    assert [(t.topic, list(t.partitions)) for t in request.forgotten_topics_data] == [(T, [0])]
    assert (request.session_id, request.session_epoch) == (77, 2)
    FetchRequest.decode(request.encode(12), 12, exact=True)
    assert handler.handle_response(moved, session_response(moved, 77, returned=[b]))

    back = handler.build({b: fetch_data(5), c: fetch_data(0), a: fetch_data(9)}, 12)
    assert list(back.to_send) == [a] and list(back.session_partitions) == [b, c, a]  # re-added at the end
    assert handler.handle_response(back, session_response(back, 77, returned=[]))
    assert handler.epoch == 4


def test_session_errors_reset_to_full_requests():
    handler = FetchSessionHandler(NODE)
    a = tp(0)
    data = handler.build({a: fetch_data(0)}, 12)
    handler.handle_response(data, session_response(data, 5))
    data = handler.build({a: fetch_data(0)}, 12)
    assert not handler.handle_response(data, session_response(data, 0, [],
                                                              ErrorCode.INVALID_FETCH_SESSION_EPOCH))
    again = handler.build({a: fetch_data(0)}, 12)
    assert again.is_full and (again.session_id, again.epoch) == (5, 0)  # names the session: closes it
    handler.handle_response(again, session_response(again, 6))
    data = handler.build({a: fetch_data(0)}, 12)
    assert not handler.handle_response(data, session_response(data, 0, [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
    again = handler.build({a: fetch_data(0)}, 12)
    assert again.is_full and (again.session_id, again.epoch) == (0, 0)  # starts over without an id
    # a full response that leaves a partition out does not match the session: ignored, closed
    b = tp(1)
    data = handler.build({a: fetch_data(0), b: fetch_data(0)}, 12)
    assert not handler.handle_response(data, session_response(data, 8, returned=[a]))
    assert handler.build({a: fetch_data(0)}, 12).is_full
    # the broker may close the session in an incremental response
    data = handler.build({a: fetch_data(0)}, 12)
    handler.handle_response(data, session_response(data, 9))
    data = handler.build({a: fetch_data(0)}, 12)
    assert handler.handle_response(data, session_response(data, 0, returned=[]))
    assert (handler.session_id, handler.epoch) == (0, INITIAL_EPOCH)
    # an incremental response naming a partition outside the session
    data = handler.build({a: fetch_data(0)}, 12)
    handler.handle_response(data, session_response(data, 10))
    data = handler.build({a: fetch_data(0)}, 12)
    assert not handler.handle_response(data, session_response(data, 10, returned=[tp(7)]))
    # a failed request: its outcome is unknown
    handler.handle_response(handler.build({a: fetch_data(0)}, 12), session_response(data, 11))
    handler.handle_error()
    assert handler.build({a: fetch_data(0)}, 12).is_full


def test_session_epochs_wrap_to_one():
    assert next_epoch(5) == 6 and next_epoch(0x7FFFFFFF) == 1 and next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_session_topic_ids_v13_replace_and_cap_at_v12_without_ids():
    handler = FetchSessionHandler(NODE)
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    a = tp(0)
    data = handler.build({a: fetch_data(0, old_id)}, 17)
    assert data.version == 17 and data.topic_names == {old_id: T}
    handler.handle_response(data, session_response(data, 3))
    replaced = handler.build({a: fetch_data(0, new_id)}, 17)  # the topic was re-created
    assert replaced.to_replace == [(a, old_id)] and list(replaced.to_send) == [a]
    request = replaced.to_request(max_wait_ms=1, min_bytes=1, max_bytes=1)
    assert [(t.topic_id, list(t.partitions)) for t in request.forgotten_topics_data] == [(old_id, [0])]
    assert request.topics[0].topic_id == new_id
    FetchRequest.decode(request.encode(17), 17, exact=True)
    # a partition without a topic id caps the version at 12 (and starts a new session: no mixing)
    handler.handle_response(replaced, session_response(replaced, 3, returned=[]))
    named = handler.build({a: fetch_data(0, new_id), tp(1): fetch_data(0)}, 17)
    assert named.version == 12 and named.is_full and named.session_id == 3

"""A failing handler answers with UNKNOWN_SERVER_ERROR: for every API and version the broker serves,
``error_response`` builds a response that encodes at that version and carries the error wherever the
request named something (each topic, partition, group or resource), as Kafka's getErrorResponse does."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire import messages as m
from kafkawire.broker.dispatch.error_responses import error_response
from kafkawire.broker.dispatch.versions import SUPPORTED_VERSIONS
from support.strategies import message_strategy

CODE = -1  # UNKNOWN_SERVER_ERROR


def _error_codes(value):
    """Every error_code in a decoded message, depth first."""
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _error_codes(item)
    elif hasattr(value, "_FIELDS"):
        for name in value._FIELDS:
            if name in ("error_code", "partition_error_code"):
                yield getattr(value, name)
            else:
                yield from _error_codes(getattr(value, name))


CASES = [(key, version) for key, (low, high) in sorted(SUPPORTED_VERSIONS.items()) for version in range(low, high + 1)]


@pytest.mark.parametrize("key,version", CASES, ids=[f"{m.api(k).name}-v{v}" for k, v in CASES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_error_response_encodes_and_carries_the_error(key, version, data):
    info = m.api(key)
    request = data.draw(message_strategy(info.request_class, version))
    response = error_response(key, request, version, CODE, "handler failed")
    assert response is not None, f"{info.name} has no error response"
    decoded = info.response_class.decode(response.encode(version), version, exact=True)
    codes = [code for code in _error_codes(decoded) if code != 0]  # 0: a field this version lacks
    assert set(codes) <= {CODE}
    assert len(codes) == _expected_errors(key, version, request)


def _count(items, attribute=None) -> int:
    items = items or ()
    return len(items) if attribute is None else sum(len(getattr(item, attribute) or ()) for item in items)


def _expected_errors(key: int, version: int, request) -> int:
    """One error per thing the request named; one at the top for APIs with a top-level error."""
    if key == 0:
        return _count(request.topic_data, "partition_data")
    if key == 1:
        return 1 if version >= 7 else _count(request.topics, "partitions")
    if key in (2, 8):
        return _count(request.topics, "partitions")
    if key in (3, 19, 32):
        return _count(request.topics if key != 32 else request.resources)
    if key == 9:
        return _count(request.groups) if version >= 8 else 1 if version >= 2 else _count(request.topics,
                                                                                          "partition_indexes")
    if key == 10:
        return _count(request.coordinator_keys) if version >= 4 else 1
    if key == 15:
        return _count(request.groups)
    if key == 20:
        return _count(request.topics) if version >= 6 else _count(request.topic_names)
    if key == 30:
        return _count(request.creations)
    if key == 31:
        return _count(request.filters)
    if key == 51:
        return len(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
    if key == 24:
        return 1 if version >= 4 else _count(request.v3_and_below_topics, "partitions")
    if key == 27:
        return sum(_count(marker.topics, "partition_indexes") for marker in request.markers)
    if key in (28, 61):
        return _count(request.topics, "partitions" if key == 28 else "partition_indexes")
    if key == 65:
        return _count(request.transactional_ids)
    if key in (21, 23):
        return _count(request.topics, "partitions")
    if key in (33, 44):
        return _count(request.resources)
    if key == 37:
        return _count(request.topics)
    if key == 42:
        return _count(request.groups_names)
    if key == 43:
        return (1 if version >= 1 else 0) + _count(request.topic_partitions, "partitions")
    if key == 34:  # AlterReplicaLogDirs: each partition of each directory
        return sum(_count(d.topics, "partitions") for d in request.dirs)
    if key == 49:  # AlterClientQuotas: each entry
        return _count(request.entries)
    if key == 45:  # AlterPartitionReassignments: at the top and for each partition, as Kafka's
        return 1 + _count(request.topics, "partitions")
    if key == 75:
        return _count(request.topics)
    if key in (69, 77, 89):  # ConsumerGroupDescribe, ShareGroupDescribe, StreamsGroupDescribe
        return _count(request.group_ids)
    if key == 90:  # DescribeShareGroupOffsets
        return _count(request.groups)
    return 1

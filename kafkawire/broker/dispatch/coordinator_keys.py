"""Which coordinator a request is for: the group or transactional ids of the group and transaction APIs
(Kafka sends each to the coordinator FindCoordinator named, and answers NOT_COORDINATOR elsewhere)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...messages import ApiKey
from ..node_view import GROUP, TRANSACTION

__all__ = ["coordinator_keys"]


def _group(request, version):
    return [(GROUP, request.group_id)]


def _offset_fetch(request, version):
    if version >= 8:
        return [(GROUP, group.group_id) for group in request.groups]
    return [(GROUP, request.group_id)]


def _transaction(request, version):
    return [(TRANSACTION, request.transactional_id)]


def _init_producer_id(request, version):
    # an idempotent producer (no transactional id) may ask any broker
    return [(TRANSACTION, request.transactional_id)] if request.transactional_id is not None else []


def _add_partitions(request, version):
    if version >= 4:  # the broker-to-broker form, batched by transaction
        return [(TRANSACTION, t.transactional_id) for t in request.transactions]
    return [(TRANSACTION, request.v3_and_below_transactional_id)]


_KEYS: dict[int, Callable[[Any, int], list[tuple[int, str]]]] = {
    ApiKey.OFFSET_COMMIT: _group,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.JOIN_GROUP: _group,
    ApiKey.HEARTBEAT: _group,
    ApiKey.LEAVE_GROUP: _group,
    ApiKey.SYNC_GROUP: _group,
    ApiKey.DESCRIBE_GROUPS: lambda request, version: [(GROUP, group) for group in request.groups],
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions,
    ApiKey.ADD_OFFSETS_TO_TXN: _transaction,
    ApiKey.END_TXN: _transaction,
    ApiKey.TXN_OFFSET_COMMIT: _group,  # goes to the group's coordinator
    ApiKey.DESCRIBE_TRANSACTIONS: lambda request, version: [(TRANSACTION, tid) for tid in request.transactional_ids],
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _group,
    ApiKey.CONSUMER_GROUP_DESCRIBE: lambda request, version: [(GROUP, group) for group in request.group_ids],
    ApiKey.STREAMS_GROUP_HEARTBEAT: _group,
    ApiKey.STREAMS_GROUP_DESCRIBE: lambda request, version: [(GROUP, group) for group in request.group_ids],
    # share groups: membership and offsets at the group's coordinator (ShareFetch and ShareAcknowledge go
    # to the partitions' leaders)
    ApiKey.SHARE_GROUP_HEARTBEAT: _group,
    ApiKey.SHARE_GROUP_DESCRIBE: lambda request, version: [(GROUP, group) for group in request.group_ids],
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: lambda request, version: [(GROUP, group.group_id)
                                                                   for group in request.groups],
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _group,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _group,
}


def coordinator_keys(api_key: int, request, version: int) -> list[tuple[int, str]]:
    """(key type, key) of every group or transactional id the request is for; [] for other APIs."""
    keys = _KEYS.get(api_key)
    return keys(request, version) if keys is not None else []

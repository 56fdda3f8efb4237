"""The FetchResponse the broker answers with, built from the partition reads.

It is encoded like every other response (``framing.encode_response_parts`` through the generated
encoder), with each partition's records, a ``FileRecords`` slice or remote bytes, kept as a piece of
its own so the server sends log bytes with sendfile(2) rather than copying them.

Only what this broker puts in a response is set: no diverging epoch or snapshot id (their tagged
fields stay absent), the current leader and node endpoints only beside NOT_LEADER_OR_FOLLOWER (a node
of an in-process cluster), preferred read replica -1, and aborted transactions null (read_uncommitted)
or those the read found (read_committed). Fields a version lacks keep their defaults, which the codec
refuses to drop otherwise.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import cast

from ... import messages as m
from ...codec.base import Bytes
from ..node_view import NodeAddress
from .reads import PartitionRead

__all__ = ["fetch_response"]

_PartitionData = m.FetchResponse.PartitionData
_Topic = m.FetchResponse.FetchableTopicResponse
_Aborted = m.FetchResponse.AbortedTransaction
_Leader = m.FetchResponse.LeaderIdAndEpoch


def fetch_response(version: int, session_id: int, topics: list[tuple[str, uuid.UUID, list[PartitionRead]]],
                   read_committed: bool, node_endpoints: Sequence[NodeAddress] | None = None) -> m.FetchResponse:
    """The response for ``topics``: (name, topic id, the reads to answer for it) in response order. The
    top-level error code is 0: the fetch-session errors are answered on their own.
    ``node_endpoints`` (v16+): the leaders the reads' ``current_leader`` name."""
    with_log_start = version >= 5
    flexible = version >= 12
    by_id = version >= 13
    no_aborted: list[m.FetchResponse.AbortedTransaction] | None = [] if read_committed else None
    responses = []
    for name, topic_id, reads in topics:
        partitions = []
        for read in reads:
            aborted = read.aborted
            data = _PartitionData(
                partition_index=read.partition, error_code=read.error, high_watermark=read.high_watermark,
                last_stable_offset=read.last_stable_offset,
                log_start_offset=read.log_start_offset if with_log_start else -1,
                aborted_transactions=([_Aborted(producer_id=txn.producer_id, first_offset=txn.first_offset)
                                       for txn in aborted] if aborted and read_committed else no_aborted),
                records=cast(Bytes, read.records))  # a FileRecords slice: encode_parts only takes its len()
            if read.current_leader is not None and flexible:
                data.current_leader = _Leader(leader_id=read.current_leader[0], leader_epoch=read.current_leader[1])
            partitions.append(data)
        responses.append(_Topic(topic_id=topic_id, partitions=partitions) if by_id
                         else _Topic(topic=name, partitions=partitions))
    endpoints = []
    if node_endpoints and version >= 16:
        endpoints = [m.FetchResponse.NodeEndpoint(node_id=node.node_id, host=node.host, port=node.port)
                     for node in node_endpoints]
    return m.FetchResponse(error_code=0, session_id=session_id if version >= 7 else 0, responses=responses,
                           node_endpoints=endpoints)

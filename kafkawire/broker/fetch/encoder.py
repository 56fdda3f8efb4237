"""The Fetch response written straight from the partition reads, for every version the broker serves.

The generated codec would need a ``PartitionData`` object per partition and a topic object per topic,
then walk them with one small write per field: a large share of the Python time between reading a
Fetch request and sending its first byte. Here each partition's header is one struct pack into a
growing buffer, so the body comes out as a few runs of header bytes with the records (``FileRecords``
slices or remote bytes) between them as pieces of their own, as ``FetchResponse.encode_parts`` keeps
them. The bytes are those the generated codec writes for the same values; the tests compare the two
at every version served.

Only what this broker puts in a response is written: no diverging epoch or snapshot id (their tagged
fields stay absent), the current leader and node endpoints only beside NOT_LEADER_OR_FOLLOWER (a node
of an in-process cluster), preferred read replica -1, and aborted transactions null (read_uncommitted)
or those the read found (read_committed).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from struct import Struct
from typing import NamedTuple

from ...codec.primitives import uvarint
from ...messages import ApiKey
from .reads import PartitionRead
from ..dispatch.versions import SUPPORTED_VERSIONS

__all__ = ["EncodedFetchResponse", "encode_fetch_response"]

_INT16 = Struct(">h").pack
_INT32 = Struct(">i").pack
_TOP_V4 = Struct(">i")  # throttle_time_ms
_TOP_V7 = Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PARTITION_V4 = Struct(">ihqq")  # partition_index, error_code, high_watermark, last_stable_offset
_PARTITION_V5 = Struct(">ihqqq")  # ... and log_start_offset
_ABORTED = Struct(">qq").pack  # producer_id, first_offset
_CURRENT_LEADER = Struct(">BBBiiB").pack  # one tagged field: tag 1, size 9, leader id, epoch, its own tags
_SIZE_CORRELATION = Struct(">ii")  # the frame's size prefix and the response header's correlation id
_MAX_STRING = 0x7FFF


def _compact_length(n: int) -> bytes:
    """A compact length: n + 1 as an unsigned varint."""
    return uvarint(n + 1)


class _Layout(NamedTuple):
    """How one version lays out the parts that differ between versions."""

    flexible: bool  # v12+: compact lengths and a tag section after each struct
    topic_ids: bool  # v13+: topics by id instead of by name
    session_fields: bool  # v7+: error_code and session_id at the top
    log_start_offset: bool  # v5+
    middle: bytes  # aborted transactions (null or empty) and, v11+, preferred_read_replica -1
    length: Callable[[int], bytes]  # writes an array's or the records' length: int32, compact (+1 varint) from v12
    replica: bytes  # v11+: preferred_read_replica -1 (what follows a non-empty aborted list)

    @property
    def tags(self) -> bytes:
        return b"\x00" if self.flexible else b""


def _layout(version: int, read_committed: bool) -> _Layout:
    flexible = version >= 12
    if flexible:
        aborted = b"\x01" if read_committed else b"\x00"  # compact array: length + 1, 0 for null
    else:
        aborted = b"\x00\x00\x00\x00" if read_committed else b"\xff\xff\xff\xff"
    preferred_read_replica = b"\xff\xff\xff\xff" if version >= 11 else b""
    return _Layout(flexible, version >= 13, version >= 7, version >= 5, aborted + preferred_read_replica,
                   _compact_length if flexible else _INT32, preferred_read_replica)


_LAYOUTS = {(version, committed): _layout(version, committed)
            for version in range(SUPPORTED_VERSIONS[ApiKey.FETCH][0], SUPPORTED_VERSIONS[ApiKey.FETCH][1] + 1)
            for committed in (False, True)}


class EncodedFetchResponse:
    """A Fetch response body already written at ``version``, as pieces (``size`` bytes in all).

    ``frame`` gives the whole response frame; ``encode_parts`` lets it stand in for the FetchResponse
    message wherever a body is framed the generic way (``framing.encode_response_parts``)."""

    __slots__ = ("version", "parts", "size")
    API_KEY = ApiKey.FETCH
    NAME = "FetchResponse"

    def __init__(self, version: int, parts: list, size: int):
        self.version = version
        self.parts = parts
        self.size = size

    def encode_parts(self, version: int) -> list:
        if version != self.version:
            raise ValueError(f"this Fetch response was written at version {self.version}, not {version}")
        return list(self.parts)  # a copy: the framing inserts its header into the list it gets

    def frame(self, correlation_id: int) -> list:
        """The response frame's pieces: size prefix and response header joined to the first run of bytes
        (response header v1, with its empty tag section, from Fetch v12 on; v0 before)."""
        if self.version >= 12:
            head = _SIZE_CORRELATION.pack(self.size + 5, correlation_id) + b"\x00"
        else:
            head = _SIZE_CORRELATION.pack(self.size + 4, correlation_id)
        parts = list(self.parts)
        parts[0] = head + parts[0]
        return parts


def encode_fetch_response(version: int, session_id: int, topics: list[tuple[str, uuid.UUID, list[PartitionRead]]],
                          read_committed: bool, node_endpoints=None) -> EncodedFetchResponse:
    """The body for ``topics``: (name, topic id, the reads to answer for it) in response order. The
    top-level error code is 0: the fetch-session errors are answered with the generated message.
    ``node_endpoints`` (v16+): (node id, host, port) of the leaders the reads' ``current_leader`` name."""
    layout = _LAYOUTS.get((version, read_committed))
    if layout is None:
        raise ValueError(f"Fetch version {version} is not served")
    length, middle, tags = layout.length, layout.middle, layout.tags
    replica = layout.replica
    with_log_start = layout.log_start_offset
    partition_head = _PARTITION_V5.pack if with_log_start else _PARTITION_V4.pack
    parts: list = []
    total = 0  # bytes in ``parts``
    run = bytearray(_TOP_V7.pack(0, 0, session_id) if layout.session_fields else _TOP_V4.pack(0))
    run += length(len(topics))
    for name, topic_id, reads in topics:
        if layout.topic_ids:
            run += topic_id.bytes
        else:
            raw = name.encode()
            if len(raw) > _MAX_STRING:
                raise ValueError(f"topic name of {len(raw)} bytes is too long for an int16 length")
            run += _compact_length(len(raw)) if layout.flexible else _INT16(len(raw))
            run += raw
        run += length(len(reads))
        for read in reads:
            if with_log_start:
                run += partition_head(read.partition, read.error, read.high_watermark, read.last_stable_offset,
                                      read.log_start_offset)
            else:
                run += partition_head(read.partition, read.error, read.high_watermark, read.last_stable_offset)
            aborted = read.aborted
            if aborted and read_committed:
                run += length(len(aborted))
                for txn in aborted:
                    run += _ABORTED(txn.producer_id, txn.first_offset)
                    run += tags
                run += replica
            else:
                run += middle
            records = read.records
            size = len(records)
            run += length(size)
            if size:
                total += len(run) + size
                parts.append(bytes(run))
                parts.append(records)
                run.clear()
            if read.current_leader is not None and layout.flexible:
                run += _CURRENT_LEADER(1, 1, 9, read.current_leader[0], read.current_leader[1], 0)
            else:
                run += tags  # the partition's (empty) tag section
        run += tags  # the topic's
    if node_endpoints and version >= 16:
        run += _node_endpoints(node_endpoints)
    else:
        run += tags  # the response's
    parts.append(bytes(run))
    return EncodedFetchResponse(version, parts, total + len(run))


def _node_endpoints(nodes) -> bytes:
    """The response's tag section with NodeEndpoints (tag 0): each node's id, host, port, null rack."""
    field = bytearray(_compact_length(len(nodes)))
    for node_id, host, port in nodes:
        raw = host.encode()
        field += _INT32(node_id) + _compact_length(len(raw)) + raw + _INT32(port) + b"\x00\x00"  # null rack, tags
    return b"\x01\x00" + uvarint(len(field)) + bytes(field)

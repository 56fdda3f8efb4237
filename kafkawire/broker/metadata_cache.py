"""The broker's metadata cache, as Kafka's ``MetadataCache``: each topic's Metadata entry (its id,
partitions, leaders, replicas, ISR) kept encoded, per response version, until the topic changes.

A Metadata answer is then assembled from bytes (``EncodedMetadataResponse``): the response written with
no topics, its topic array's length, the cached pieces, and the bytes after the array. An all-topics
answer at thousands of partitions costs a join of cached pieces instead of tens of thousands of objects
built and written one field at a time on the event loop.

The pieces are the generated codec's own bytes: a topic is written inside a one-topic response and cut
out where a no-topic response's array begins and ends (``_Splice``), so every version's layout is the
codec's. What changes a topic's entry calls ``changed``: topic creation and deletion and partitions
added (``TopicManager``), leader, ISR and broker moves (the cluster's ``Controller``). Pieces are filled
lazily, yielding to the event loop between topics once ``_FILL_BUDGET_S`` of encoding has passed, so a
cold cache does not hold the loop for a whole answer either.
"""
from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from .. import messages as m
from ..codec.primitives import uvarint
from ..error_codes import ErrorCode
from .node_view import PartitionInfo

if TYPE_CHECKING:
    from ..codec.base import Bytes
    from .topics import Topic

__all__ = ["MetadataCache", "EncodedMetadataResponse", "NO_OPERATIONS", "encode_topic", "with_operations"]

NO_OPERATIONS = -(1 << 31)  # topic_authorized_operations not computed
_FILL_BUDGET_S = 0.005  # encoding between two yields to the loop while pieces are filled
_INT32 = struct.Struct(">i").pack
_Topic = m.MetadataResponse.MetadataResponseTopic
_Partition = m.MetadataResponse.MetadataResponsePartition


class _Splice(NamedTuple):
    """Where one version's topic array sits in a MetadataResponse body."""

    flexible: bool  # compact array length (uvarint n + 1) and a tag section closing each topic
    start: int  # offset just after the array's length in a body with no brokers and no topics
    tail: int  # bytes after the topic array (cluster_authorized_operations, tag section)
    operations: bool  # whether topics carry topic_authorized_operations (v8+)

    def length(self, count: int) -> bytes:
        return uvarint(count + 1) if self.flexible else _INT32(count)

    @property
    def length_size(self) -> int:
        """The size of an empty array's length."""
        return 1 if self.flexible else 4


def _measure(version: int) -> _Splice:
    """The splice points of ``version`` from the codec's own bytes: a no-topic body and a one-topic body
    agree up to the last byte of the array's length, and again after the topic."""
    empty = m.MetadataResponse(topics=[]).encode(version)
    probe = m.MetadataResponse(topics=[_Topic(name="p", partitions=[])]).encode(version)
    start = next(i for i, (a, b) in enumerate(zip(empty, probe)) if a != b) + 1
    flexible_versions = m.MetadataResponse.FLEXIBLE_VERSIONS
    flexible = flexible_versions is not None and flexible_versions[0] <= version <= flexible_versions[1]
    return _Splice(flexible, start, len(empty) - start, version >= 8)


_SPLICES: dict[int, _Splice] = {}


def _splice(version: int) -> _Splice:
    found = _SPLICES.get(version)
    if found is None:
        found = _SPLICES[version] = _measure(version)
    return found


def encode_topic(topic: m.MetadataResponse.MetadataResponseTopic, version: int) -> bytes:
    """One topic's entry as ``version`` writes it inside a MetadataResponse."""
    at = _splice(version)
    body = m.MetadataResponse(topics=[topic]).encode(version)
    return body[at.start:len(body) - at.tail]


def with_operations(piece: bytes, version: int, operations: int) -> bytes:
    """A cached topic piece (v8+, written with no unknown tags) with its topic_authorized_operations set:
    the int32 that closes the topic, before its empty tag section in flexible versions."""
    end = len(piece) - (1 if _splice(version).flexible else 0)
    return piece[:end - 4] + _INT32(operations) + piece[end:]


def topic_entry(topic: Topic, partition: Callable[[str, int], PartitionInfo]) -> m.MetadataResponse.MetadataResponseTopic:
    """The Metadata entry of a hosted topic: each partition as the node view describes it,
    LEADER_NOT_AVAILABLE while no replica is live."""
    name = topic.name
    partitions = []
    for index in range(len(topic.partitions)):
        info = partition(name, index)
        partitions.append(_Partition(
            error_code=ErrorCode.LEADER_NOT_AVAILABLE if info.leader < 0 else 0, partition_index=index,
            leader_id=info.leader, leader_epoch=info.leader_epoch, replica_nodes=info.replicas, isr_nodes=info.isr,
            offline_replicas=info.offline))
    return _Topic(error_code=0, name=name, topic_id=topic.topic_id, is_internal=topic.is_internal,
                  partitions=partitions, topic_authorized_operations=NO_OPERATIONS)


class _Entry:
    __slots__ = ("topic", "pieces")

    def __init__(self, topic: Topic):
        self.topic = topic  # the topic the pieces describe (a topic deleted and created again is another)
        self.pieces: dict[int, bytes] = {}  # by response version


class MetadataCache:
    """Each hosted topic's encoded Metadata entry by response version. Not thread-safe: the event loop
    owns it."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def changed(self, name: str | None = None) -> None:
        """The topic's entry (every topic's, with None) no longer holds: encode it again when asked."""
        if name is None:
            self._entries.clear()
        else:
            self._entries.pop(name, None)

    async def pieces(self, topics: list[Topic], version: int, partition: Callable[[str, int], PartitionInfo],
                     hosted: Callable[[str], Topic | None]) -> list[bytes]:
        """The encoded entries of ``topics`` at ``version``, those not cached encoded and kept while
        ``hosted`` (the topic by name) still says the topic is hosted."""
        entries = self._entries
        found: list[bytes] = []
        started = None
        for topic in topics:
            entry = entries.get(topic.name)
            piece = entry.pieces.get(version) if entry is not None and entry.topic is topic else None
            if piece is None:
                if started is None:
                    started = time.perf_counter()
                elif time.perf_counter() - started > _FILL_BUDGET_S:
                    await asyncio.sleep(0)  # other connections between topics
                    started = time.perf_counter()
                    entry = entries.get(topic.name)  # (a change meanwhile may have dropped it)
                if entry is None or entry.topic is not topic:
                    entry = _Entry(topic)
                    if hosted(topic.name) is topic:  # (not one deleted while this answer is assembled)
                        entries[topic.name] = entry
                piece = entry.pieces.get(version)
                if piece is None:
                    piece = entry.pieces[version] = encode_topic(topic_entry(topic, partition), version)
            found.append(piece)
        return found


class EncodedMetadataResponse:
    """A MetadataResponse assembled from bytes: ``head`` (the response with no topics) with the topic
    pieces spliced into its topic array. It stands in for the message where a body is framed
    (``framing.encode_response_parts`` asks for ``encode_parts``)."""

    __slots__ = ("version", "head", "pieces")
    API_KEY = m.ApiKey.METADATA
    NAME = "MetadataResponse"

    def __init__(self, version: int, head: m.MetadataResponse, pieces: list[bytes]):
        self.version = version
        self.head = head
        self.pieces = pieces

    def encode_parts(self, version: int) -> list[Bytes]:
        if version != self.version:
            raise ValueError(f"this Metadata response was assembled at version {self.version}, not {version}")
        at = _splice(version)
        body = self.head.encode(version)
        before = len(body) - at.tail - at.length_size
        return [body[:before] + at.length(len(self.pieces)), *self.pieces, body[len(body) - at.tail:]]

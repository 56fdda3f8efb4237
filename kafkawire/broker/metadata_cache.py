"""The broker's metadata cache, as Kafka's ``MetadataCache``: each topic's Metadata entry (its id,
partitions, leaders, replicas, ISR) kept encoded, per response version, until the topic changes.

A Metadata answer is then assembled from bytes (``encoded_response``): the response written with no
topics, its topic array's length, the cached pieces, and the bytes after the array. An all-topics
answer at thousands of partitions costs a join of cached pieces instead of tens of thousands of objects
built and written one field at a time on the event loop.

What changes a topic's entry calls ``changed``: topic creation and deletion and partitions added
(``TopicManager``), leader, ISR and broker moves (the cluster's ``Controller``). Pieces are filled
lazily, in slices of the loop's time (``loop_slices``) between topics, so a cold cache does not hold
the loop for a whole answer either.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import messages as m
from ..error_codes import ErrorCode
from .encoded_response import ArrayItems, EncodedResponse, array_items
from .loop_slices import Slices
from .node_view import PartitionInfo

if TYPE_CHECKING:
    from .topics import Topic

__all__ = ["MetadataCache", "NO_OPERATIONS", "encode_topic", "metadata_response", "with_operations"]

NO_OPERATIONS = -(1 << 31)  # topic_authorized_operations not computed
_INT32 = struct.Struct(">i").pack


def _topics(version: int) -> ArrayItems:
    response = m.MetadataResponse  # (loaded on the first Metadata request, not when the broker starts)
    return array_items(response, "topics", version, response.MetadataResponseTopic(name="p", partitions=[]))


def encode_topic(topic: m.MetadataResponse.MetadataResponseTopic, version: int) -> bytes:
    """One topic's entry as ``version`` writes it inside a MetadataResponse."""
    return _topics(version).encode(topic)


def metadata_response(version: int, head: m.MetadataResponse, pieces: list[bytes]) -> EncodedResponse:
    """``head`` (the response with no topics) with the topic pieces as its topics."""
    return _topics(version).response(head, pieces)


def with_operations(piece: bytes, version: int, operations: int) -> bytes:
    """A cached topic piece (v8+, written with no unknown tags) with its topic_authorized_operations set:
    the int32 that closes the topic, before its empty tag section in flexible versions."""
    end = len(piece) - (1 if _topics(version).splice.flexible else 0)
    return piece[:end - 4] + _INT32(operations) + piece[end:]


def topic_entry(topic: Topic,
                partition: Callable[[str, int], PartitionInfo]) -> m.MetadataResponse.MetadataResponseTopic:
    """The Metadata entry of a hosted topic: each partition as the node view describes it,
    LEADER_NOT_AVAILABLE while no replica is live."""
    name = topic.name
    response = m.MetadataResponse
    entry, partition_entry = response.MetadataResponseTopic, response.MetadataResponsePartition
    partitions = []
    for index in range(len(topic.partitions)):
        info = partition(name, index)
        partitions.append(partition_entry(
            error_code=ErrorCode.LEADER_NOT_AVAILABLE if info.leader < 0 else 0, partition_index=index,
            leader_id=info.leader, leader_epoch=info.leader_epoch, replica_nodes=info.replicas, isr_nodes=info.isr,
            offline_replicas=info.offline))
    return entry(error_code=0, name=name, topic_id=topic.topic_id, is_internal=topic.is_internal,
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
        slices = Slices()
        for topic in topics:
            entry = entries.get(topic.name)
            piece = entry.pieces.get(version) if entry is not None and entry.topic is topic else None
            if piece is None:
                if slices.due():
                    await slices.pause()  # other connections between topics
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

"""ConsumerRecord: a record as ``poll`` hands it to the application."""
from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any

from kafkawire.records import Header, TimestampType

from ..topic_partition import TopicPartition

_new_tuple = tuple.__new__

__all__ = ["ConsumerRecord", "record_offset"]


class ConsumerRecord(tuple):
    """A record as the application sees it. ``leader_epoch`` is None when the batch has none;
    serialized sizes are -1 for a null key or value (as Kafka's ConsumerRecord).

    Immutable, like Kafka's. It is a tuple underneath, laid out as ``RecordBatch.rows`` builds it with
    the partition's fields in front (see ``_FIELDS``), so that the fetcher makes one per record with
    ``tuple.__new__`` while reading the batch, without a Python-level constructor call. Use the
    attributes: the tuple's order is not the constructor's.
    """

    __slots__ = ()
    _FIELDS = ("topic", "partition", "timestamp_type", "leader_epoch", "offset", "timestamp", "key", "value",
               "headers", "serialized_key_size", "serialized_value_size")

    def __new__(cls, topic: str, partition: int, offset: int, timestamp: int, timestamp_type: TimestampType,
                key: bytes | None, value: bytes | None, headers: tuple[Header, ...] = (),
                leader_epoch: int | None = None, serialized_key_size: int = -1,
                serialized_value_size: int = -1) -> ConsumerRecord:
        return tuple.__new__(cls, (topic, partition, timestamp_type, leader_epoch, offset, timestamp, key, value,
                                   headers, serialized_key_size, serialized_value_size))

    if TYPE_CHECKING:  # the properties (itemgetters, below), as type checkers see them
        @property
        def topic(self) -> str: ...
        @property
        def partition(self) -> int: ...
        @property
        def timestamp_type(self) -> TimestampType: ...
        @property
        def leader_epoch(self) -> int | None: ...
        @property
        def offset(self) -> int: ...
        @property
        def timestamp(self) -> int: ...
        @property
        def key(self) -> bytes | None: ...
        @property
        def value(self) -> bytes | None: ...
        @property
        def headers(self) -> tuple[Header, ...]: ...
        @property
        def serialized_key_size(self) -> int: ...
        @property
        def serialized_value_size(self) -> int: ...
    else:
        topic = property(itemgetter(0), doc="The topic's name.")
        partition = property(itemgetter(1), doc="The partition's index.")
        timestamp_type = property(itemgetter(2), doc="What the timestamp means (a TimestampType).")
        leader_epoch = property(itemgetter(3), doc="The batch's partition leader epoch, or None.")
        offset = property(itemgetter(4), doc="The record's offset.")
        timestamp = property(itemgetter(5), doc="Milliseconds since the epoch.")
        key = property(itemgetter(6), doc="bytes, or None.")
        value = property(itemgetter(7), doc="bytes, or None.")
        headers = property(itemgetter(8), doc="A tuple of Header (key, value).")
        serialized_key_size = property(itemgetter(9), doc="Bytes of the key, -1 for none.")
        serialized_value_size = property(itemgetter(10), doc="Bytes of the value, -1 for none.")

    @property
    def topic_partition(self) -> TopicPartition:
        return _new_tuple(TopicPartition, (self[0], self[1]))  # (NamedTuple's own __new__ is Python code)

    def _fields(self) -> tuple[Any, ...]:
        """The fields in the constructor's order."""
        return (self.topic, self.partition, self.offset, self.timestamp, self.timestamp_type, self.key, self.value,
                self.headers, self.leader_epoch, self.serialized_key_size, self.serialized_value_size)

    def __getnewargs__(self) -> tuple[Any, ...]:  # copy and pickle go through __new__
        return self._fields()

    # Equal to another ConsumerRecord with the same fields only: never to a plain tuple (which would
    # otherwise compare itself item by item with the tuple underneath).
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumerRecord):
            return False if isinstance(other, tuple) else NotImplemented
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, ConsumerRecord):
            return True if isinstance(other, tuple) else NotImplemented
        return tuple.__ne__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
                f"timestamp={self.timestamp}, key={self.key!r}, value={_short(self.value)}, "
                f"headers={list(self.headers)!r}, leader_epoch={self.leader_epoch})")


record_offset = itemgetter(4)  # a ConsumerRecord's offset, for bisect and sorting


def _short(value: bytes | None, limit: int = 40) -> str:
    if value is None or len(value) <= limit:
        return repr(value)
    return f"{bytes(value[:limit])!r}...({len(value)} bytes)"

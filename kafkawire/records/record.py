"""One record as a reader hands it out, whatever format it came from."""
from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["TimestampType", "Header", "Record"]


class TimestampType(enum.IntEnum):
    """What a record's timestamp means (``TimestampType.java``); magic 0 has none."""

    NO_TIMESTAMP = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class Header(NamedTuple):
    key: str
    value: bytes | None


class Record:
    """A record: offset, timestamp and its type, key, value (bytes or None) and headers."""

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")

    def __init__(self, offset: int, timestamp: int, timestamp_type: TimestampType, key: bytes | None,
                 value: bytes | None, headers: tuple[Header, ...] = ()):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (self.offset, self.timestamp, self.timestamp_type, self.key, self.value, self.headers) == (
            other.offset, other.timestamp, other.timestamp_type, other.key, other.value, other.headers)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the batches it comes from

    def __repr__(self) -> str:
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, "
                f"timestamp_type={self.timestamp_type.name}, key={self.key!r}, value={_short(self.value)}, "
                f"headers={list(self.headers)!r})")


def _short(value: bytes | None, limit: int = 40) -> str:
    if value is None or len(value) <= limit:
        return repr(value)
    return f"{bytes(value[:limit])!r}...({len(value)} bytes)"

"""A batch's records as columns: the bulk path that makes no Python object per record.

Keys, values and header fields stay in the batch's (decompressed) record bytes; the columns hold
their start positions and lengths (-1 for null) in ``array`` buffers, next to the offsets and
timestamps. Consumers that need objects ask for them (``values()``, ``records()``); bulk consumers
(the capture pipeline, Arrow conversion) read the arrays and slice ``data`` themselves.
"""
from __future__ import annotations

from array import array

from .record import Header, Record, TimestampType

__all__ = ["RecordColumns"]


class RecordColumns:
    """Columns of one batch's records. ``headers_at[i]:headers_at[i + 1]`` indexes record i's headers."""

    __slots__ = ("data", "timestamp_type", "offsets", "timestamps", "key_starts", "key_lengths",
                 "value_starts", "value_lengths", "headers_at", "header_key_starts", "header_key_lengths",
                 "header_value_starts", "header_value_lengths")

    def __init__(self, data: bytes, timestamp_type: TimestampType):
        self.data = data
        self.timestamp_type = timestamp_type
        self.offsets = array("q")
        self.timestamps = array("q")
        self.key_starts = array("i")
        self.key_lengths = array("i")
        self.value_starts = array("i")
        self.value_lengths = array("i")
        self.headers_at = array("i", (0,))
        self.header_key_starts = array("i")
        self.header_key_lengths = array("i")
        self.header_value_starts = array("i")
        self.header_value_lengths = array("i")

    def __len__(self) -> int:
        return len(self.offsets)

    def _slices(self, starts: array[int], lengths: array[int]) -> list[bytes | None]:
        data = self.data
        return [None if length < 0 else data[start:start + length] for start, length in zip(starts, lengths)]

    def keys(self) -> list[bytes | None]:
        return self._slices(self.key_starts, self.key_lengths)

    def values(self) -> list[bytes | None]:
        return self._slices(self.value_starts, self.value_lengths)

    def headers(self, index: int) -> tuple[Header, ...]:
        """Record ``index``'s headers."""
        first, last = self.headers_at[index], self.headers_at[index + 1]
        if first == last:
            return ()
        data = self.data
        found = []
        for h in range(first, last):
            key_start = self.header_key_starts[h]
            key = str(data[key_start:key_start + self.header_key_lengths[h]], "utf-8", "replace")
            length = self.header_value_lengths[h]
            start = self.header_value_starts[h]
            found.append(Header(key, None if length < 0 else data[start:start + length]))
        return tuple(found)

    def all_headers(self) -> list[tuple[Header, ...]]:
        """Every record's headers (``headers(i)`` for each i), read in one pass over the header arrays."""
        headers_at = self.headers_at
        count = len(self.offsets)
        if headers_at[count] == 0:
            return [()] * count
        data = self.data
        make = tuple.__new__
        found = [make(Header, (str(data[key_start:key_start + key_length], "utf-8", "replace"),
                               None if value_length < 0 else data[value_start:value_start + value_length]))
                 for key_start, key_length, value_start, value_length in zip(
                     self.header_key_starts, self.header_key_lengths, self.header_value_starts,
                     self.header_value_lengths)]
        return [tuple(found[first:last]) if first != last else () for first, last in zip(headers_at, headers_at[1:])]

    def records(self) -> list[Record]:
        timestamp_type = self.timestamp_type
        return [Record(offset, timestamp, timestamp_type, key, value, headers)
                for offset, timestamp, key, value, headers in zip(
                    self.offsets, self.timestamps, self.keys(), self.values(), self.all_headers())]

"""RecordAppender: the records section of a magic-2 batch, written one record at a time.

One ``append`` call lays out a whole record (Kafka's ``DefaultRecord.writeTo``): the length varint,
attributes, timestamp and offset deltas, key, value and headers, and keeps the running state the
batch header needs (count, last offset delta, base and max timestamp). With ``limit`` it writes
nothing and answers -1 when the record would take the section past ``limit`` bytes, so a producer
checks a batch's room and appends in the same call.

``kafkawire/records/_append.c`` is the same class in C (the producer's per-record path); this one is
the fallback and the reference: both write the same bytes and refuse the same input with the same
exception types (``tests/test_records_appender.py``).
"""
from __future__ import annotations

from collections.abc import Sequence

from ..accelerators import load
from .compression import Buffer

__all__ = ["RecordAppender", "PyRecordAppender", "NATIVE", "HeaderPair"]

HeaderPair = tuple[str, "Buffer | None"]  # a header as append takes it (records.Header is one)

_INT32_MAX = 0x7FFFFFFF
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_WRAP = 1 << 64


def _wrap_int64(value: int) -> int:
    # the timestamp delta wraps as Java's long subtraction does
    value &= _WRAP - 1
    return value - _WRAP if value > _INT64_MAX else value


def _blob(data: object, what: str) -> Buffer | None:
    """``data`` as something with a byte length, or None; TypeError for anything not bytes-like."""
    if data is None or isinstance(data, bytes):
        return data
    try:
        view = memoryview(data)  # type: ignore[arg-type]  # any buffer; TypeError otherwise
    except TypeError:
        raise TypeError(f"record {what} must be bytes-like or None, not {type(data).__name__}") from None
    if not view.contiguous:
        raise TypeError(f"record {what} must be a contiguous buffer")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def _zigzag(out: bytearray, value: int) -> None:
    """``value`` (an int64; int32s zigzag the same) as a zigzag varint."""
    raw = (value << 1) ^ (value >> 63)
    if raw < 0x80:
        out.append(raw)
        return
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _sized(out: bytearray, data: Buffer | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        _zigzag(out, len(data))
        out += data


def _header(header: object) -> tuple[bytes, Buffer | None]:
    if not isinstance(header, (tuple, list)) or len(header) != 2:
        raise TypeError(f"a record header must be a (key, value) pair, not {header!r}")
    header_key, header_value = header
    if header_key is None:
        raise ValueError("a header key cannot be null")
    if not isinstance(header_key, str):
        raise TypeError(f"a header key must be a str, not {type(header_key).__name__}")
    return header_key.encode("utf-8"), _blob(header_value, "header value")


class PyRecordAppender:
    """A batch's records section (see the module docstring). ``base_timestamp`` None: the first
    record's timestamp becomes the base (a delete horizon sets it up front)."""

    __slots__ = ("records", "count", "last_offset_delta", "base_timestamp", "max_timestamp")

    def __init__(self, base_timestamp: int | None = None):
        if base_timestamp is not None:
            _check_timestamp(base_timestamp, "base timestamp")
        self.records = bytearray()
        self.count = 0
        self.last_offset_delta = -1
        self.base_timestamp = base_timestamp
        self.max_timestamp = -1

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return len(self.records)

    def append(self, key: Buffer | None, value: Buffer | None, headers: Sequence[HeaderPair], timestamp: int,
               offset_delta: int | None = None, limit: int = -1) -> int:
        """Write one record; returns the bytes it took, or -1 (writing nothing) when ``limit`` >= 0 and
        the section would grow past it. ``headers``: a tuple or list of (str, bytes-like or None);
        ``offset_delta`` None: one past the last."""
        if type(timestamp) is not int or not _INT64_MIN <= timestamp <= _INT64_MAX:
            _check_timestamp(timestamp, "timestamp")
        if offset_delta is None:
            offset_delta = self.last_offset_delta + 1
        else:
            if not isinstance(offset_delta, int):
                raise TypeError(f"offset delta must be an int, not {type(offset_delta).__name__}")
            if offset_delta <= self.last_offset_delta:
                raise ValueError(f"offset delta {offset_delta} does not follow {self.last_offset_delta}")
            if offset_delta > _INT32_MAX:
                raise ValueError(f"offset delta {offset_delta} is out of the int32 range")
        if key is not None and type(key) is not bytes:
            key = _blob(key, "key")
        if value is not None and type(value) is not bytes:
            value = _blob(value, "value")
        if type(headers) is not tuple and type(headers) is not list:
            if not isinstance(headers, (tuple, list)):
                raise TypeError(f"record headers must be a tuple or list, not {type(headers).__name__}")
        encoded = [_header(header) for header in headers] if headers else ()
        if (key is not None and len(key) > _INT32_MAX) or (value is not None and len(value) > _INT32_MAX) or any(
                len(k) > _INT32_MAX or (v is not None and len(v) > _INT32_MAX) for k, v in encoded):
            raise ValueError("a record field exceeds the int32 length limit")
        base = self.base_timestamp if self.base_timestamp is not None else timestamp
        body = bytearray(b"\x00")  # attributes: unused in v2 records
        _zigzag(body, _wrap_int64(timestamp - base))
        _zigzag(body, offset_delta)
        _sized(body, key)
        _sized(body, value)
        _zigzag(body, len(encoded))
        for header_key, header_value in encoded:
            _sized(body, header_key)
            _sized(body, header_value)
        if len(body) > _INT32_MAX:
            raise ValueError(f"a record of {len(body)} bytes exceeds the int32 length limit")
        record = bytearray()
        _zigzag(record, len(body))
        size = len(record) + len(body)
        records = self.records
        if 0 <= limit < len(records) + size:
            return -1
        records += record
        records += body
        self.base_timestamp = base
        self.count += 1
        self.last_offset_delta = offset_delta
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        return size

    def __repr__(self) -> str:
        return f"RecordAppender(count={self.count}, size={self.size})"


def _check_timestamp(timestamp: object, what: str) -> None:
    if not isinstance(timestamp, int):
        raise TypeError(f"{what} must be an int, not {type(timestamp).__name__}")
    if not _INT64_MIN <= timestamp <= _INT64_MAX:
        raise OverflowError(f"{what} {timestamp} is out of the int64 range")


_native = load("kafkawire.records._append")
NATIVE = _native is not None  # whether RecordAppender is the C one
RecordAppender: type[PyRecordAppender] = _native.RecordAppender if _native is not None else PyRecordAppender

"""Legacy message sets (magic 0 and 1): one top-level message, possibly a compressed wrapper.

A wrapper's value is a compressed message set of inner messages. With magic 1 (KIP-31) the inner
offsets are relative (0..n-1) and the wrapper carries the absolute offset of the last one; with
magic 0 they are absolute. Inner messages must not themselves be compressed.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterator
from struct import Struct

from ..errors import CompressionError, CorruptRecordError, RecordsError
from .compression import DEFAULT_DECOMPRESSED_LIMIT, Codec, codec_name, codec_of, decompress
from .layouts import LEGACY_HEADER_V0_FORMAT, LEGACY_HEADER_V1_FORMAT, LOG_OVERHEAD, MAGIC_OFFSET
from .record import Record, TimestampType

__all__ = ["LegacyBatch", "LEGACY_CODEC_MASK", "LEGACY_TIMESTAMP_TYPE_FLAG", "legacy_header_size"]

LEGACY_CODEC_MASK = 0x07
LEGACY_TIMESTAMP_TYPE_FLAG = 0x08  # magic 1 only

_HEADERS = {0: LEGACY_HEADER_V0_FORMAT, 1: LEGACY_HEADER_V1_FORMAT}
_LENGTH = Struct(">i")


def legacy_header_size(magic: int) -> int:
    """Bytes before the key length: log prefix, CRC, magic, attributes and (v1) timestamp."""
    return _HEADERS[magic].size


class LegacyBatch:
    """One top-level legacy message over ``buffer`` (a memoryview of exactly its bytes).

    Uncompressed, it holds one record; compressed, it wraps the records of its inner message set.
    """

    __slots__ = ("buffer", "offset", "size_field", "crc", "magic", "attributes", "timestamp", "key", "value",
                 "position", "decompressed_limit")
    # The header's fields (unpacked in one call, which a type checker cannot follow).
    offset: int
    size_field: int
    crc: int
    magic: int
    attributes: int
    timestamp: int

    def __init__(self, buffer: memoryview, position: int = 0,
                 decompressed_limit: int = DEFAULT_DECOMPRESSED_LIMIT):
        self.buffer = buffer
        self.position = position
        self.decompressed_limit = decompressed_limit
        magic = buffer[MAGIC_OFFSET] if len(buffer) > MAGIC_OFFSET else -1
        if magic not in _HEADERS:
            raise RecordsError(f"not a legacy message (magic {magic})", position + MAGIC_OFFSET)
        header = _HEADERS[magic]
        if len(buffer) < header.size + 8:
            raise RecordsError(f"a magic-{magic} message needs at least {header.size + 8} bytes, got {len(buffer)}",
                               position)
        if magic == 0:
            self.offset, self.size_field, self.crc, self.magic, self.attributes = header.unpack_from(buffer)
            self.timestamp = -1
        else:
            (self.offset, self.size_field, self.crc, self.magic, self.attributes,
             self.timestamp) = header.unpack_from(buffer)
        pos = header.size
        self.key, pos = self._bytes(pos, "key")
        self.value, pos = self._bytes(pos, "value")
        if pos != len(buffer):
            raise RecordsError(f"message size {self.size_field} disagrees with its fields ({pos - len(buffer):+d} bytes)",
                               position, self.offset)

    def _bytes(self, pos: int, name: str) -> tuple[memoryview | None, int]:
        buffer = self.buffer
        if pos + 4 > len(buffer):
            raise RecordsError(f"{name} length runs past the end of the message", self.position + pos, self.offset)
        (length,) = _LENGTH.unpack_from(buffer, pos)
        pos += 4
        if length == -1:
            return None, pos
        if length < 0 or pos + length > len(buffer):
            raise RecordsError(f"{name} length {length} does not fit the {len(buffer) - pos} bytes left",
                               self.position + pos - 4, self.offset)
        return buffer[pos:pos + length], pos + length

    # ---- metadata -------------------------------------------------------------------------------
    @property
    def compression(self) -> Codec:
        try:
            return codec_of(self.attributes & LEGACY_CODEC_MASK)
        except CompressionError as error:
            raise CompressionError(error.reason, self.position + MAGIC_OFFSET + 1, self.offset) from None

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP
        return TimestampType.LOG_APPEND_TIME if self.attributes & LEGACY_TIMESTAMP_TYPE_FLAG else TimestampType.CREATE_TIME

    @property
    def is_compressed(self) -> bool:
        return bool(self.attributes & LEGACY_CODEC_MASK)

    @property
    def last_offset(self) -> int:
        """The offset of the last record: a wrapper carries its last inner message's offset."""
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        """The first record's offset (reads a compressed wrapper's inner messages to find it)."""
        if not self.is_compressed:
            return self.offset
        inner = self.records()
        return inner[0].offset if inner else self.offset

    @property
    def size(self) -> int:
        return len(self.buffer)

    @property
    def is_transactional(self) -> bool:
        return False

    @property
    def is_control(self) -> bool:
        return False

    def __repr__(self) -> str:
        return (f"LegacyBatch(magic={self.magic}, offset={self.offset}, size={self.size}, "
                f"compression={codec_name(self.attributes & LEGACY_CODEC_MASK)}, timestamp_type={self.timestamp_type.name})")

    # ---- integrity ------------------------------------------------------------------------------
    def computed_crc(self) -> int:
        return zlib.crc32(self.buffer[MAGIC_OFFSET:])

    def is_valid(self) -> bool:
        return self.computed_crc() == self.crc

    def verify(self) -> None:
        computed = self.computed_crc()
        if computed != self.crc:
            raise CorruptRecordError(f"CRC mismatch: stored 0x{self.crc:08x}, computed 0x{computed:08x}",
                                     self.position + LOG_OVERHEAD, self.offset)

    # ---- records --------------------------------------------------------------------------------
    def records(self, verify_crc: bool = True) -> list[Record]:
        if not self.is_compressed:
            return [Record(self.offset, self.timestamp, self.timestamp_type, _bytes_or_none(self.key),
                           _bytes_or_none(self.value))]
        return self._inner_records(verify_crc)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def _inner_records(self, verify_crc: bool) -> list[Record]:
        codec = self.compression
        if self.value is None:
            raise RecordsError("compressed wrapper message has a null value", self.position, self.offset)
        try:
            data = memoryview(decompress(codec, self.value, self.decompressed_limit, legacy_lz4=self.magic == 0))
        except CompressionError as error:
            raise type(error)(error.reason, self.position, self.offset) from None
        inner: list[LegacyBatch] = []
        pos = 0
        while len(data) - pos >= LOG_OVERHEAD:
            (size,) = _LENGTH.unpack_from(data, pos + 8)
            end = pos + LOG_OVERHEAD + size
            if size < 0 or end > len(data):
                break  # a partial trailing inner message, ignored as Kafka's iterator does
            try:
                message = LegacyBatch(data[pos:end], pos, self.decompressed_limit)
                if verify_crc:
                    message.verify()
            except RecordsError as error:
                raise type(error)(f"{error.reason} (inner message at byte {error.offset} of the decompressed set)",
                                  self.position, self.offset) from None
            if message.is_compressed:
                raise RecordsError(f"inner messages must not be compressed (inner message at byte {pos} of the "
                                   "decompressed set)", self.position, self.offset)
            inner.append(message)
            pos = end
        if not inner:
            return []
        timestamp_type = self.timestamp_type
        if self.magic == 0 or self.offset == 0:
            # magic 0: inner offsets are absolute; so are they under a magic-1 wrapper with offset 0,
            # which some librdkafka versions write (AbstractLegacyRecordBatch accepts it)
            first = 0
        else:
            last_inner = inner[-1].offset  # magic 1: relative, and the wrapper holds the last one
            if self.offset < last_inner:
                raise RecordsError(f"wrapper offset {self.offset} is below its last inner offset {last_inner}",
                                   self.position, self.offset)
            first = self.offset - last_inner
        records = []
        for message in inner:
            if self.magic == 1 and timestamp_type is TimestampType.LOG_APPEND_TIME:
                timestamp = self.timestamp
            else:
                timestamp = message.timestamp
            records.append(Record(first + message.offset, timestamp,
                                  timestamp_type if message.magic == 1 else message.timestamp_type,
                                  _bytes_or_none(message.key), _bytes_or_none(message.value)))
        return records


def _bytes_or_none(view: memoryview | None) -> bytes | None:
    return None if view is None else bytes(view)

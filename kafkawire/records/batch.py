"""RecordBatch (magic 2): a zero-copy view of one batch, and the record reader behind it.

The header is unpacked on construction (one ``struct`` call); the records are read only when asked
for, after the CRC-32C check and decompression, straight into ``RecordColumns``.
"""
from __future__ import annotations

from crc32c import crc32c

from ..errors import CompressionError, CorruptRecordError, RecordsError
from .columns import RecordColumns
from .compression import DEFAULT_DECOMPRESSED_LIMIT, Codec, codec_name, codec_of, decompress
from .layouts import ATTRIBUTES_OFFSET, BATCH_HEADER, BATCH_HEADER_SIZE, packed
from .record import Record, TimestampType
from .varints import read_varint, read_varlong

__all__ = ["RecordBatch", "CODEC_MASK", "TIMESTAMP_TYPE_FLAG", "TRANSACTIONAL_FLAG", "CONTROL_FLAG",
           "DELETE_HORIZON_FLAG", "NO_PRODUCER_ID", "NO_SEQUENCE", "wrap_int64", "increment_sequence"]

CODEC_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = packed(BATCH_HEADER)
# The smallest record: length, attributes, timestamp delta, offset delta, key and value lengths and
# a header count, one byte each.
_MIN_RECORD_SIZE = 7


class RecordBatch:
    """One magic-2 batch over ``buffer`` (a memoryview of exactly the batch's bytes)."""

    __slots__ = ("buffer", "base_offset", "length", "partition_leader_epoch", "magic", "crc", "attributes",
                 "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                 "base_sequence", "count", "position", "decompressed_limit")

    def __init__(self, buffer: memoryview, position: int = 0,
                 decompressed_limit: int = DEFAULT_DECOMPRESSED_LIMIT):
        if len(buffer) < BATCH_HEADER_SIZE:
            raise RecordsError(f"a record batch needs {BATCH_HEADER_SIZE} bytes, got {len(buffer)}", position)
        (self.base_offset, self.length, self.partition_leader_epoch, self.magic, self.crc, self.attributes,
         self.last_offset_delta, self.base_timestamp, self.max_timestamp, self.producer_id,
         self.producer_epoch, self.base_sequence, self.count) = _HEADER.unpack_from(buffer)
        self.buffer = buffer
        self.position = position  # where the batch starts in the blob it came from, for errors
        self.decompressed_limit = decompressed_limit
        if self.count < 0:
            raise RecordsError(f"negative record count {self.count}", position + 57, self.base_offset)

    # ---- metadata -------------------------------------------------------------------------------
    @property
    def compression(self) -> Codec:
        try:
            return codec_of(self.attributes & CODEC_MASK)
        except CompressionError as error:
            raise CompressionError(error.reason, self.position + 21, self.base_offset) from None

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_FLAG else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size(self) -> int:
        return len(self.buffer)

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record (wrapping at int32 as Kafka's DefaultRecordBatch does)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, count={self.count}, size={self.size}, "
                f"compression={codec_name(self.attributes & CODEC_MASK)}, timestamp_type={self.timestamp_type.name}, "
                f"producer_id={self.producer_id}, transactional={self.is_transactional}, "
                f"control={self.is_control})")

    # ---- integrity ------------------------------------------------------------------------------
    def computed_crc(self) -> int:
        return crc32c(self.buffer[ATTRIBUTES_OFFSET:])

    def is_valid(self) -> bool:
        return self.computed_crc() == self.crc

    def verify(self) -> None:
        """Raise CorruptRecordError unless the stored CRC-32C matches the batch's bytes."""
        computed = self.computed_crc()
        if computed != self.crc:
            raise CorruptRecordError(
                f"CRC mismatch: stored 0x{self.crc:08x}, computed 0x{computed:08x}", self.position + 17,
                self.base_offset)

    # ---- records --------------------------------------------------------------------------------
    def records_data(self) -> bytes:
        """The records' bytes, decompressed when the batch is compressed."""
        body = self.buffer[BATCH_HEADER_SIZE:]
        codec = self.attributes & CODEC_MASK
        if codec == 0:
            return bytes(body)
        try:
            return decompress(codec, body, self.decompressed_limit)
        except CompressionError as error:
            raise type(error)(error.reason, self.position + BATCH_HEADER_SIZE, self.base_offset) from None

    def columns(self) -> RecordColumns:
        """The records as columns (see RecordColumns); no Python object per record."""
        data = self.records_data()
        timestamp_type = self.timestamp_type
        columns = RecordColumns(data, timestamp_type)
        fixed_timestamp = self.max_timestamp if timestamp_type is TimestampType.LOG_APPEND_TIME else None
        try:
            _read_records(data, self.count, self.base_offset, self.base_timestamp, fixed_timestamp, columns)
        except RecordsError as error:
            raise self._located(error) from None
        return columns

    def records(self) -> list[Record]:
        return self.columns().records()

    def __iter__(self):
        return iter(self.records())

    def _located(self, error: RecordsError) -> RecordsError:
        """``error`` (positioned within the records' bytes) placed in the blob and the batch."""
        reason, offset = error.reason, error.offset
        if self.attributes & CODEC_MASK:
            # a position in the decompressed bytes means nothing in the blob: say it in the reason
            if offset is not None:
                reason = f"{reason} (at byte {offset} of the decompressed records)"
            offset = self.position + BATCH_HEADER_SIZE
        elif offset is not None:
            offset += self.position + BATCH_HEADER_SIZE
        return type(error)(reason, offset, self.base_offset, error.path)


def _read_records(data: bytes, count: int, base_offset: int, base_timestamp: int, fixed_timestamp: int | None,
                  columns: RecordColumns) -> None:
    """Read ``count`` records from ``data`` (exactly the records' bytes) into ``columns``.

    The varints are inlined for their common one- and two-byte forms; anything longer goes through
    read_varint / read_varlong. Lengths are checked against the record's declared length, so a lie
    anywhere shows up as a mismatch at the end of that record.
    """
    size = len(data)
    if count > size // _MIN_RECORD_SIZE:
        raise RecordsError(f"record count {count} cannot fit in {size} bytes of records", 0)
    add_offset = columns.offsets.append
    add_timestamp = columns.timestamps.append
    add_key_start = columns.key_starts.append
    add_key_length = columns.key_lengths.append
    add_value_start = columns.value_starts.append
    add_value_length = columns.value_lengths.append
    add_headers_at = columns.headers_at.append
    headers_seen = 0
    pos = 0
    index = 0
    try:
        for index in range(count):
            start = pos
            # length (varint)
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            end = pos + length
            if length < _MIN_RECORD_SIZE - 1 or end > size:
                raise RecordsError(f"record length {length} does not fit the {size - pos} bytes left", start)
            # attributes (unused), then timestamp delta (varlong)
            b = data[pos + 1]
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                timestamp_delta, pos = read_varlong(data, pos + 1)
            # offset delta (varint)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                offset_delta = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                offset_delta, pos = read_varint(data, pos)
            # key
            b = data[pos]
            if b < 0x80:
                key_length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                key_length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                key_length, pos = read_varint(data, pos)
            add_key_start(pos)
            add_key_length(key_length)
            if key_length > 0:
                pos += key_length
            elif key_length < -1:
                raise RecordsError(f"negative key length {key_length}", pos - 1, path=[f"records[{index}]"])
            # value
            b = data[pos]
            if b < 0x80:
                value_length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                value_length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                value_length, pos = read_varint(data, pos)
            add_value_start(pos)
            add_value_length(value_length)
            if value_length > 0:
                pos += value_length
            elif value_length < -1:
                raise RecordsError(f"negative value length {value_length}", pos - 1, path=[f"records[{index}]"])
            # headers
            b = data[pos]
            if b == 0:
                pos += 1
            else:
                pos, found = _read_headers(data, pos, end, columns, index)
                headers_seen += found
            add_headers_at(headers_seen)
            if pos != end:
                raise RecordsError(f"record length {length} disagrees with its fields ({pos - end:+d} bytes)",
                                   start, path=[f"records[{index}]"])
            try:
                add_offset(base_offset + offset_delta)
                add_timestamp(base_timestamp + timestamp_delta if fixed_timestamp is None else fixed_timestamp)
            except OverflowError:  # Java's long arithmetic wraps; a crafted batch can get here
                del columns.offsets[index:]
                add_offset(wrap_int64(base_offset + offset_delta))
                add_timestamp(wrap_int64(base_timestamp + timestamp_delta) if fixed_timestamp is None
                              else fixed_timestamp)
        if pos != size:
            raise RecordsError(f"{size - pos} bytes left after the batch's {count} records", pos)
    except IndexError:
        raise RecordsError(f"record {index} runs past the end of the records", pos,
                           path=[f"records[{index}]"]) from None
    except RecordsError as error:
        if not error.path and error.offset is not None and error.offset < size:
            error.path = [f"records[{index}]"]
        raise


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past the int32 maximum to 0 as Kafka's sequences do."""
    if sequence > 0x7FFFFFFF - increment:
        return increment - (0x7FFFFFFF - sequence) - 1
    return sequence + increment


def wrap_int64(value: int) -> int:
    """``value`` wrapped to a signed 64-bit integer, as Java's long arithmetic would leave it."""
    return ((value + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000


def _read_headers(data: bytes, pos: int, end: int, columns: RecordColumns, index: int) -> tuple[int, int]:
    count, pos = read_varint(data, pos)
    if count < 0:
        raise RecordsError(f"negative header count {count}", pos - 1, path=[f"records[{index}]"])
    if count > (end - pos) // 2:  # each header takes at least two bytes
        raise RecordsError(f"header count {count} cannot fit in the record", pos - 1, path=[f"records[{index}]"])
    for h in range(count):
        key_length, pos = read_varint(data, pos)
        if key_length < 0:
            raise RecordsError(f"header key length {key_length} (a header key cannot be null)", pos - 1,
                               path=[f"records[{index}]", f"headers[{h}]"])
        columns.header_key_starts.append(pos)
        columns.header_key_lengths.append(key_length)
        pos += key_length
        value_length, pos = read_varint(data, pos)
        if value_length < -1:
            raise RecordsError(f"negative header value length {value_length}", pos - 1,
                               path=[f"records[{index}]", f"headers[{h}]"])
        columns.header_value_starts.append(pos)
        columns.header_value_lengths.append(value_length)
        if value_length > 0:
            pos += value_length
        if pos > end:
            raise RecordsError("header runs past the end of its record", pos,
                               path=[f"records[{index}]", f"headers[{h}]"])
    return pos, count

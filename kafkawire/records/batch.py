"""RecordBatch (magic 2): a zero-copy view of one batch, and the record reader behind it.

The header is unpacked on construction (one ``struct`` call); the records are read only when asked
for, after the CRC-32C check and decompression: straight into ``RecordColumns`` (no object per
record), or into one tuple per record (``rows``, the consumer's path; ``records()`` builds on it).
"""
from __future__ import annotations

import gc
from array import array
from collections.abc import Iterator
from functools import cache
from typing import Any

from ..accelerators import load
from ..errors import CompressionError, CorruptRecordError, RecordsError
from .checksums import crc32c
from .columns import RecordColumns
from .compression import DEFAULT_DECOMPRESSED_LIMIT, Buffer, Codec, codec_name, codec_of, decompress
from .layouts import ATTRIBUTES_OFFSET, BATCH_HEADER_FORMAT, BATCH_HEADER_SIZE
from .record import Header, Record, TimestampType
from .varints import read_varint, read_varlong

_native = load("kafkawire.records._rows")  # the C twins of _read_rows and _read_records, when built
if _native is not None:
    _native.set_header_type(Header)

__all__ = ["RecordBatch", "CODEC_MASK", "TIMESTAMP_TYPE_FLAG", "TRANSACTIONAL_FLAG", "CONTROL_FLAG",
           "DELETE_HORIZON_FLAG", "NO_PRODUCER_ID", "NO_SEQUENCE", "wrap_int64", "increment_sequence"]

CODEC_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = BATCH_HEADER_FORMAT
# The smallest record: length, attributes, timestamp delta, offset delta, key and value lengths and
# a header count, one byte each.
_MIN_RECORD_SIZE = 7
# Building this many row objects at once pauses the cyclic GC, which would otherwise scan them again
# and again while they are made (they all survive until poll hands them out).
_PAUSE_GC_ABOVE = 2_000
_INT64_MIN = -0x8000000000000000
_INT64_MAX = 0x7FFFFFFFFFFFFFFF
# A one- or two-byte varint never moves a base further than this.
_SHORT_VARINT_MAX = 0x2000
# The RecordColumns arrays _native.read_columns returns the buffers of, in its order.
_NATIVE_COLUMNS = (("offsets", "q"), ("timestamps", "q"), ("key_starts", "i"), ("key_lengths", "i"),
                   ("value_starts", "i"), ("value_lengths", "i"), ("headers_at", "i"), ("header_key_starts", "i"),
                   ("header_key_lengths", "i"), ("header_value_starts", "i"), ("header_value_lengths", "i"))


@cache
def _zigzag_table() -> tuple[int, ...]:
    """Decoded zigzag values of every one- and two-byte varint, for the readers to look up rather
    than compute: index ``b`` for a one-byte varint (b < 0x80), ``(b << 7) | c`` for a two-byte one
    (b >= 0x80 > c), which lands in 0x4000..0x7FFF. Entries in between are never read. Built on first
    use: only the pure-Python readers below look it up (an import that reads no records, e.g.
    ``kafkawire show``'s, does not pay for it)."""
    table = [0] * 0x8000
    for raw in range(0x4000):
        value = (raw >> 1) ^ -(raw & 1)
        if raw < 0x80:
            table[raw] = value
        table[((raw & 0x7F) | 0x80) << 7 | raw >> 7] = value
    return tuple(table)



class RecordBatch:
    """One magic-2 batch over ``buffer`` (a memoryview of exactly the batch's bytes)."""

    __slots__ = ("buffer", "base_offset", "length", "partition_leader_epoch", "magic", "crc", "attributes",
                 "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                 "base_sequence", "count", "position", "decompressed_limit")
    # The header's fields (unpacked in one call, which a type checker cannot follow).
    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int

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

    def columns(self, data: bytes | None = None) -> RecordColumns:
        """The records as columns (see RecordColumns); no Python object per record. ``data``: the records'
        bytes when the caller has them already (decompressed), else they are read from the batch."""
        if data is None:
            data = self.records_data()
        timestamp_type = self.timestamp_type
        columns = RecordColumns(data, timestamp_type)
        fixed_timestamp = self.max_timestamp if timestamp_type is TimestampType.LOG_APPEND_TIME else None
        if _native is not None:
            buffers = _native.read_columns(data, self.count, self.base_offset, self.base_timestamp, fixed_timestamp)
            if buffers is not None:
                for (name, typecode), raw in zip(_NATIVE_COLUMNS, buffers):
                    column = array(typecode)
                    column.frombytes(raw)
                    setattr(columns, name, column)
                return columns
            # malformed: the Python reader reads it again and raises the error with its path and offset
        try:
            _read_records(data, self.count, self.base_offset, self.base_timestamp, fixed_timestamp, columns)
        except RecordsError as error:
            raise self._located(error) from None
        return columns

    def rows(self, context: tuple[Any, Any, Any, Any] = (None, None, None, None),
             row_type: type[tuple[Any, ...]] = tuple, tail: tuple[Any, ...] = (),
             first: int | None = None, last: int | None = None) -> list[tuple[Any, ...]]:
        """The records as rows, one ``row_type`` (``tuple`` or a subclass of it) per record, holding
        ``context + (offset, timestamp, key, value, headers, key_size, value_size) + tail``: ``context`` is
        four values every row starts with (a consumer's topic, partition, timestamp type and leader epoch),
        key and value are bytes or None, headers a tuple of Header, sizes -1 for null, ``tail`` values every
        row ends with (a share consumer's delivery count). The fast path to one object per record: each
        row is built with ``tuple.__new__`` as its record is read. ``first``/``last``: only the records
        with offsets in that range become rows (the others are stepped over, only their framing read)."""
        if first is not None or last is not None or tail:
            low = _INT64_MIN if first is None else first
            high = _INT64_MAX if last is None else last
            if _native is None:
                return [tuple.__new__(row_type, (*row, *tail)) for row in self.rows(context) if low <= row[4] <= high]
            return self._rows(context, row_type, (tail, low, high))
        return self._rows(context, row_type, ())

    def _rows(self, context: tuple[Any, Any, Any, Any], row_type: type[tuple[Any, ...]],
              bounds: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if len(context) != 4:
            raise ValueError(f"rows() takes a context of four values, not {len(context)}")
        # the native reader copies each key and value out, so it can read an uncompressed batch in place
        in_place = _native is not None and not self.attributes & CODEC_MASK
        data: bytes | memoryview = memoryview(self.buffer)[BATCH_HEADER_SIZE:] if in_place else self.records_data()
        fixed_timestamp = self.max_timestamp if self.attributes & TIMESTAMP_TYPE_FLAG else None
        pause = self.count > _PAUSE_GC_ABOVE and gc.isenabled()
        if pause:
            gc.disable()
        try:
            if _native is not None:
                rows: list[tuple[Any, ...]] | None = _native.read_rows(
                    data, self.count, self.base_offset, self.base_timestamp, fixed_timestamp, context, row_type,
                    *bounds)
                if rows is not None:
                    return rows
                # malformed: the Python reader reads it again and raises the error with its path and offset
            raw = bytes(data) if isinstance(data, memoryview) else data
            if _native is not None and bounds:
                tail, low, high = bounds
                return [tuple.__new__(row_type, (*row, *tail)) for row in _read_rows(
                    raw, self.count, self.base_offset, self.base_timestamp, fixed_timestamp, context, tuple)
                    if low <= row[4] <= high]
            return _read_rows(raw, self.count, self.base_offset, self.base_timestamp, fixed_timestamp, context,
                              row_type)
        except RecordsError as error:
            raise self._located(error) from None
        finally:
            if pause:
                gc.enable()

    def records(self) -> list[Record]:
        timestamp_type = self.timestamp_type
        return [Record(offset, timestamp, timestamp_type, key, value, headers)
                for _, _, _, _, offset, timestamp, key, value, headers, _, _ in self.rows()]

    def __iter__(self) -> Iterator[Record]:
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


def check_records(data: Buffer, count: int, base_timestamp: int) -> tuple[int, int, bool, bool] | None:
    """A batch's (decompressed) records read in one pass that keeps nothing per record: (lowest and highest
    timestamp, base_timestamp + delta; whether any key is null; whether the offset deltas run 0..count-1).
    None when the C reader is not built or the records are malformed (``columns`` then reads them and
    says why)."""
    return _native.check_records(data, count, base_timestamp) if _native is not None else None


def _read_records(data: bytes, count: int, base_offset: int, base_timestamp: int, fixed_timestamp: int | None,
                  columns: RecordColumns) -> None:
    """Read ``count`` records from ``data`` (exactly the records' bytes) into ``columns``.

    One- and two-byte varints are looked up in _zigzag_table(); anything longer goes through read_varint /
    read_varlong. Lengths are checked against the record's declared length, so a lie anywhere shows
    up as a mismatch at the end of that record. Values are gathered in lists and turned into the
    columns' arrays at the end (one C loop each, cheaper than appending to arrays record by record).
    """
    size = len(data)
    if count > size // _MIN_RECORD_SIZE:
        raise RecordsError(f"record count {count} cannot fit in {size} bytes of records", 0)
    zigzag = _zigzag_table()
    min_length = _MIN_RECORD_SIZE - 1
    offset_deltas: list[int] = []
    timestamp_deltas: list[int] = []
    key_starts: list[int] = []
    key_lengths: list[int] = []
    value_starts: list[int] = []
    value_lengths: list[int] = []
    headers_at: list[int] = []
    add_offset_delta = offset_deltas.append
    add_timestamp_delta = timestamp_deltas.append
    add_key_start = key_starts.append
    add_key_length = key_lengths.append
    add_value_start = value_starts.append
    add_value_length = value_lengths.append
    add_headers_at = headers_at.append
    headers_seen = 0
    pos = 0
    index = 0
    try:
        for index in range(count):
            start = pos
            # length (varint)
            b = data[pos]
            if b < 0x80:
                length = zigzag[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                length = zigzag[b << 7 | c]
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            end = pos + length
            if length < min_length or end > size:
                raise RecordsError(f"record length {length} does not fit the {size - pos} bytes left", start)
            # attributes (unused), then timestamp delta (varlong)
            b = data[pos + 1]
            if b < 0x80:
                add_timestamp_delta(zigzag[b])
                pos += 2
            elif (c := data[pos + 2]) < 0x80:
                add_timestamp_delta(zigzag[b << 7 | c])
                pos += 3
            else:
                delta, pos = read_varlong(data, pos + 1)
                add_timestamp_delta(delta)
            # offset delta (varint)
            b = data[pos]
            if b < 0x80:
                add_offset_delta(zigzag[b])
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                add_offset_delta(zigzag[b << 7 | c])
                pos += 2
            else:
                delta, pos = read_varint(data, pos)
                add_offset_delta(delta)
            # key
            b = data[pos]
            if b < 0x80:
                key_length = zigzag[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                key_length = zigzag[b << 7 | c]
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
                value_length = zigzag[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                value_length = zigzag[b << 7 | c]
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
            if data[pos] == 0:
                pos += 1
            else:
                pos, found = _read_headers(data, pos, end, index)
                headers_seen += len(found)
                for key_start, key_length, value_start, value_length in found:
                    columns.header_key_starts.append(key_start)
                    columns.header_key_lengths.append(key_length)
                    columns.header_value_starts.append(value_start)
                    columns.header_value_lengths.append(value_length)
            add_headers_at(headers_seen)
            if pos != end:
                raise RecordsError(f"record length {length} disagrees with its fields ({pos - end:+d} bytes)",
                                   start, path=[f"records[{index}]"])
        if pos != size:
            raise RecordsError(f"{size - pos} bytes left after the batch's {count} records", pos)
    except IndexError:
        raise RecordsError(f"record {index} runs past the end of the records", pos,
                           path=[f"records[{index}]"]) from None
    except RecordsError as error:
        if not error.path and error.offset is not None and error.offset < size:
            error.path = [f"records[{index}]"]
        raise
    columns.offsets = _int64_array([base_offset + delta for delta in offset_deltas])
    if fixed_timestamp is None:
        columns.timestamps = _int64_array([base_timestamp + delta for delta in timestamp_deltas])
    else:
        columns.timestamps = array("q", (fixed_timestamp,)) * count
    columns.key_starts = array("i", key_starts)
    columns.key_lengths = array("i", key_lengths)
    columns.value_starts = array("i", value_starts)
    columns.value_lengths = array("i", value_lengths)
    columns.headers_at.extend(headers_at)


def _int64_array(values: list[int]) -> array[int]:
    try:
        return array("q", values)
    except OverflowError:  # Java's long arithmetic wraps; a crafted batch can get here
        return array("q", map(wrap_int64, values))


def _read_rows(data: bytes, count: int, base_offset: int, base_timestamp: int, fixed_timestamp: int | None,
               context: tuple[Any, Any, Any, Any], row_type: type[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Read ``count`` records from ``data`` into rows (see RecordBatch.rows).

    The same reading and the same checks as _read_records, with each record made into its row on
    the spot: this is the consumer's hot loop, so it keeps to local variables and inline varints.
    """
    size = len(data)
    if count > size // _MIN_RECORD_SIZE:
        raise RecordsError(f"record count {count} cannot fit in {size} bytes of records", 0)
    zigzag = _zigzag_table()
    min_length = _MIN_RECORD_SIZE - 1
    make = tuple.__new__
    rows: list[tuple[Any, ...]] = []
    add_row = rows.append
    # Deltas of one or two bytes cannot take a base past int64 unless it sits near a limit; longer
    # ones may (crafted batches), and then the rows are fixed up afterwards.
    wrap = not (_INT64_MIN + _SHORT_VARINT_MAX < base_offset < _INT64_MAX - _SHORT_VARINT_MAX
                and _INT64_MIN + _SHORT_VARINT_MAX < base_timestamp < _INT64_MAX - _SHORT_VARINT_MAX)
    first, second, third, fourth = context  # locals: the row is built in one step
    pos = 0
    index = 0
    try:
        for index in range(count):
            start = pos
            # length (varint)
            b = data[pos]
            if b < 0x80:
                length = zigzag[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                length = zigzag[b << 7 | c]
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            end = pos + length
            if length < min_length or end > size:
                raise RecordsError(f"record length {length} does not fit the {size - pos} bytes left", start)
            # attributes (unused), then timestamp delta (varlong)
            b = data[pos + 1]
            if b < 0x80:
                timestamp = base_timestamp + zigzag[b]
                pos += 2
            elif (c := data[pos + 2]) < 0x80:
                timestamp = base_timestamp + zigzag[b << 7 | c]
                pos += 3
            else:
                delta, pos = read_varlong(data, pos + 1)
                timestamp = base_timestamp + delta
                wrap = True
            # offset delta (varint)
            b = data[pos]
            if b < 0x80:
                offset = base_offset + zigzag[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                offset = base_offset + zigzag[b << 7 | c]
                pos += 2
            else:
                delta, pos = read_varint(data, pos)
                offset = base_offset + delta
                wrap = True
            # key
            b = data[pos]
            if b < 0x80:
                key_length = zigzag[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                key_length = zigzag[b << 7 | c]
                pos += 2
            else:
                key_length, pos = read_varint(data, pos)
            if key_length >= 0:
                key = data[pos:pos + key_length]
                pos += key_length
            elif key_length == -1:
                key = None
            else:
                raise RecordsError(f"negative key length {key_length}", pos - 1, path=[f"records[{index}]"])
            # value
            b = data[pos]
            if b < 0x80:
                value_length = zigzag[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                value_length = zigzag[b << 7 | c]
                pos += 2
            else:
                value_length, pos = read_varint(data, pos)
            if value_length >= 0:
                value = data[pos:pos + value_length]
                pos += value_length
            elif value_length == -1:
                value = None
            else:
                raise RecordsError(f"negative value length {value_length}", pos - 1, path=[f"records[{index}]"])
            # headers
            headers: tuple[Header, ...]  # (a bare annotation: no code at run time)
            if data[pos] == 0:
                pos += 1
                headers = ()
            else:
                pos, found = _read_headers(data, pos, end, index)
                headers = tuple(Header(str(data[ks:ks + kl], "utf-8", "replace"), None if vl < 0 else data[vs:vs + vl])
                                for ks, kl, vs, vl in found)
            if pos != end:
                raise RecordsError(f"record length {length} disagrees with its fields ({pos - end:+d} bytes)",
                                   start, path=[f"records[{index}]"])
            add_row(make(row_type, (first, second, third, fourth, offset, timestamp, key, value, headers, key_length,
                                    value_length)))
        if pos != size:
            raise RecordsError(f"{size - pos} bytes left after the batch's {count} records", pos)
    except IndexError:
        raise RecordsError(f"record {index} runs past the end of the records", pos,
                           path=[f"records[{index}]"]) from None
    except RecordsError as error:
        if not error.path and error.offset is not None and error.offset < size:
            error.path = [f"records[{index}]"]
        raise
    if wrap or fixed_timestamp is not None:
        rows = _fix_rows(rows, fixed_timestamp, row_type)
    return rows


def _fix_rows(rows: list[tuple[Any, ...]], fixed_timestamp: int | None,
              row_type: type[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows with offsets and timestamps wrapped to int64 (as Java's long arithmetic leaves them), and
    every timestamp replaced by ``fixed_timestamp`` when given (LogAppendTime batches)."""
    fixed: list[tuple[Any, ...]] = []
    for row in rows:
        values = list(row)
        values[4] = wrap_int64(values[4])
        values[5] = wrap_int64(values[5]) if fixed_timestamp is None else fixed_timestamp
        fixed.append(tuple.__new__(row_type, values))
    return fixed


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past the int32 maximum to 0 as Kafka's sequences do."""
    if sequence > 0x7FFFFFFF - increment:
        return increment - (0x7FFFFFFF - sequence) - 1
    return sequence + increment


def wrap_int64(value: int) -> int:
    """``value`` wrapped to a signed 64-bit integer, as Java's long arithmetic would leave it."""
    return ((value + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000


def _read_headers(data: bytes, pos: int, end: int, index: int) -> tuple[int, list[tuple[int, int, int, int]]]:
    """Record ``index``'s headers at ``pos``: the position after them, and (key start, key length,
    value start, value length) for each (value length -1 for a null value)."""
    count, pos = read_varint(data, pos)
    if count < 0:
        raise RecordsError(f"negative header count {count}", pos - 1, path=[f"records[{index}]"])
    if count > (end - pos) // 2:  # each header takes at least two bytes
        raise RecordsError(f"header count {count} cannot fit in the record", pos - 1, path=[f"records[{index}]"])
    found: list[tuple[int, int, int, int]] = []
    for h in range(count):
        key_length, pos = read_varint(data, pos)
        if key_length < 0:
            raise RecordsError(f"header key length {key_length} (a header key cannot be null)", pos - 1,
                               path=[f"records[{index}]", f"headers[{h}]"])
        key_start = pos
        pos += key_length
        value_length, pos = read_varint(data, pos)
        if value_length < -1:
            raise RecordsError(f"negative header value length {value_length}", pos - 1,
                               path=[f"records[{index}]", f"headers[{h}]"])
        found.append((key_start, key_length, pos, value_length))
        if value_length > 0:
            pos += value_length
        if pos > end:
            raise RecordsError("header runs past the end of its record", pos,
                               path=[f"records[{index}]", f"headers[{h}]"])
    return pos, found

"""Wire primitives for the generated code: varints, cached struct formats, uuids, tag sections.

The generated readers inline the one-byte cases; these functions take the rest.
"""
from __future__ import annotations

import struct
import uuid
from struct import Struct

__all__ = [
    "Invalid", "read_uvarint", "uvarint", "fixed_array_reader", "fixed_array_writer", "compact_array_reader",
    "uuid_from_bytes", "read_unknown_tags",
    "ZERO_UUID", "SMALL_UVARINTS", "write_tags", "bad_count", "bad_length", "ABSENT", "struct_field", "UVARINT2", "UVARINT3",
]


class Invalid(Exception):
    """Raised by a reader for input it recognises as wrong; ``failures`` adds the field path."""

    def __init__(self, reason: str, offset: int):
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


def read_uvarint(buf, pos: int, max_bytes: int = 5, bits: int = 32, what: str = "varint") -> tuple[int, int]:
    """An unsigned varint at ``pos`` of at most ``max_bytes`` bytes and ``bits`` bits: (value, position
    after it). The defaults read a uint32, as Kafka's ByteUtils.readUnsignedVarint; the records' zigzag
    varints and varlongs (records.varints) read theirs through here too. Raises Invalid."""
    start = pos
    value = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise Invalid(f"{what} runs past the end of the buffer", start)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift >= 7 * max_bytes:
            raise Invalid(f"{what} is longer than {max_bytes} bytes", start)
    if value >> bits:  # the last byte carries more bits than the type has
        raise Invalid(f"{what} overflows {bits} bits", start)
    return value, pos


def read_unknown_tags(buf, pos: int) -> tuple[dict | None, int]:
    """A tag section at ``pos`` whose tags are all unknown: their raw values by tag (None if empty)."""
    count, pos = read_uvarint(buf, pos)
    end = len(buf)
    if count * 2 > end - pos:
        raise bad_count(count, 2, pos, end)
    unknown = None
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if pos + size > end:
            raise bad_length(size, pos, end, "tagged field")
        if unknown is None:
            unknown = {}
        unknown[tag] = bytes(buf[pos:pos + size])
        pos += size
    return unknown, pos


SMALL_UVARINTS = tuple(bytes((n,)) for n in range(0x80))
UVARINT2 = Struct("BB").pack  # writers inline the 2- and 3-byte varints with these
UVARINT3 = Struct("BBB").pack


def uvarint(value: int) -> bytes:
    """Encode an unsigned varint (value must fit 32 bits)."""
    if value < 0x80:
        return SMALL_UVARINTS[value]
    if value > 0xFFFFFFFF or value < 0:
        raise struct.error(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _FormatCache(dict):
    """Compiled ``>{n}{code}`` Structs by count; counts above the cap are compiled and not kept."""

    CAP = 512

    def __init__(self, code: str, method: str):
        super().__init__()
        self.code, self.method = code, method

    def __missing__(self, count: int):
        function = getattr(Struct(f">{count}{self.code}"), self.method)
        if count <= self.CAP:
            self[count] = function
        return function


_ARRAY_READERS: dict[str, _FormatCache] = {}
_ARRAY_WRITERS: dict[str, _FormatCache] = {}


def fixed_array_reader(code: str) -> _FormatCache:
    """``reader[n](buf, pos)`` unpacks n big-endian values of struct code ``code`` as a tuple."""
    if code not in _ARRAY_READERS:
        _ARRAY_READERS[code] = _FormatCache(code, "unpack_from")
    return _ARRAY_READERS[code]


_COMPACT_READERS: dict[str, list] = {}


def compact_array_reader(code: str) -> list:
    """``reader[b](buf, pos)`` unpacks the ``b - 1`` values of a compact array whose count is the one
    byte ``b`` (below 0x80), starting at ``pos`` (just after that byte); ``b == 0``, a null, is refused.

    A list indexed by the count byte, so that the generated code finds the unpacker without arithmetic
    or hashing; each entry is compiled on first use.
    """
    readers = _COMPACT_READERS.get(code)
    if readers is None:
        readers = [_null_array] + [_compile_on_first_call(code, count) for count in range(127)]
        _COMPACT_READERS[code] = readers
    return readers


def _null_array(buf, pos: int):
    raise Invalid("negative length -1 for a non-nullable array", pos)


def _compile_on_first_call(code: str, count: int):
    def first_call(buf, pos: int):
        function = fixed_array_reader(code)[count]
        _COMPACT_READERS[code][count + 1] = function
        return function(buf, pos)
    return first_call


def fixed_array_writer(code: str) -> _FormatCache:
    """``writer[n](*values)`` packs n big-endian values of struct code ``code``."""
    if code not in _ARRAY_WRITERS:
        _ARRAY_WRITERS[code] = _FormatCache(code, "pack")
    return _ARRAY_WRITERS[code]


ZERO_UUID = uuid.UUID(int=0)
_new_uuid = object.__new__
_set_uuid_int = uuid.UUID.int.__set__  # type: ignore[attr-defined,misc]  # the slot descriptors:
_set_uuid_is_safe = uuid.UUID.is_safe.__set__  # type: ignore[attr-defined,misc]  # UUID.__setattr__ refuses all writes
_UNKNOWN_SAFETY = uuid.SafeUUID.unknown
_int_from_bytes = int.from_bytes


def uuid_from_bytes(raw) -> uuid.UUID:
    """A UUID from 16 big-endian bytes, without uuid.UUID.__init__'s argument checking."""
    value = _int_from_bytes(raw, "big")
    if not value:
        return ZERO_UUID
    result = _new_uuid(uuid.UUID)
    _set_uuid_int(result, value)
    _set_uuid_is_safe(result, _UNKNOWN_SAFETY)
    return result


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


# Stored in the slot of a struct-typed field left at its default (an empty struct): readers and
# writers test for it by identity, and the struct is only built if user code reads the field.
ABSENT = _Absent()


def struct_field(slot: str, struct_class) -> property:
    """The public attribute of a struct-typed field kept in ``slot``, building the default on first read."""
    def get(self):
        value = getattr(self, slot)
        if value is ABSENT:
            value = struct_class()
            setattr(self, slot, value)
        return value

    def set(self, value) -> None:
        setattr(self, slot, value)

    return property(get, set, doc=f"{struct_class.__qualname__} (default: an empty one)")


def bad_count(count: int, element_size: int, pos: int, end: int) -> Invalid:
    """The error for an array count that is negative or cannot fit in the bytes left.

    Readers check a count against the bytes left before building anything, so a hostile count never
    turns into an allocation.
    """
    if count < 0:
        return Invalid(f"negative length {count} for a non-nullable array", pos)
    return Invalid(f"{count} elements need at least {count * element_size} bytes, only {end - pos} left", pos)


def bad_length(length: int, pos: int, end: int, what: str) -> Invalid:
    """The error for a length prefix that is negative or runs past the end of the buffer."""
    if length < 0:
        return Invalid(f"negative length {length} for a non-nullable {what}", pos)
    if what == "string" and length > 0x7FFF:
        return Invalid(f"string length {length} exceeds 32767", pos)
    return Invalid(f"{what} of {length} bytes runs past the end of the buffer ({end - pos} left)", pos)


def write_tags(w, known: list, unknown: dict | None) -> None:
    """Write a tag section: known (tag, value bytes) pairs merged with preserved unknown ones, by tag."""
    if unknown:
        known = known + [(tag, bytes(value)) for tag, value in unknown.items()]
        known.sort(key=_first)
    w(uvarint(len(known)))
    for tag, value in known:
        w(uvarint(tag))
        w(uvarint(len(value)))
        w(value)


def _first(pair):
    return pair[0]

"""Zigzag varints as records use them (``ByteUtils.readVarint`` / ``readVarlong``).

Record fields are signed: ``(n << 1) ^ (n >> 31)`` for a varint (int32, at most 5 bytes) and the
64-bit form for a varlong (at most 10 bytes). The record readers inline the one- and two-byte
cases; these functions take the rest and the writers.
"""
from __future__ import annotations

from ..codec.primitives import Invalid, read_uvarint
from ..errors import RecordsError
from .compression import Buffer

__all__ = ["read_varint", "read_varlong", "write_varint", "write_varlong", "varint_size"]


def _read_unsigned(buf: Buffer, pos: int, max_bytes: int, bits: int, what: str) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos, max_bytes, bits, what)
    except Invalid as error:  # the records' own error, at the same position
        raise RecordsError(error.reason.replace("the buffer", "the records"), error.offset) from None


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag varint (int32) at ``pos``: (value, position after it)."""
    raw, pos = _read_unsigned(buf, pos, 5, 32, "varint")
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag varlong (int64) at ``pos``: (value, position after it)."""
    raw, pos = _read_unsigned(buf, pos, 10, 64, "varlong")
    return (raw >> 1) ^ -(raw & 1), pos


_ONE_BYTE = tuple(bytes((n,)) for n in range(0x80))


def _write_unsigned(out: bytearray, raw: int) -> None:
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (an int32) as a zigzag varint."""
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise ValueError(f"varint out of the int32 range: {value}")
    raw = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    if raw < 0x80:
        out += _ONE_BYTE[raw]
    else:
        _write_unsigned(out, raw)


def write_varlong(out: bytearray, value: int) -> None:
    """Append ``value`` (an int64) as a zigzag varlong."""
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"varlong out of the int64 range: {value}")
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    if raw < 0x80:
        out += _ONE_BYTE[raw]
    else:
        _write_unsigned(out, raw)


def varint_size(value: int) -> int:
    """Bytes that ``value`` takes as a zigzag varint or varlong."""
    raw = (value << 1) ^ (value >> 63)
    raw &= 0xFFFFFFFFFFFFFFFF
    size = 1
    while raw >= 0x80:
        raw >>= 7
        size += 1
    return size

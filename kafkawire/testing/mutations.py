"""Byte-level mutators: valid encodings made slightly wrong, the inputs that find decoders' bugs.

Each mutator takes the bytes and a ``random.Random`` and returns new bytes: a flipped bit, a byte set
to a value that matters to varints and lengths (0x00, 0x7F, 0x80, 0xFF), an int32 overwritten with a
length that lies (-1, -2, zero, the remaining size plus one, 2**31 - 1), varint continuation bytes
where a compact length was, a cut, bytes appended, a span deleted or repeated. ``mutate`` applies one
to three of them; ``MUTATORS`` names them all.
"""
from __future__ import annotations

import random
import struct

__all__ = ["MUTATORS", "mutate"]

_INT32 = struct.Struct(">i")


def _spot(data: bytes, rng: random.Random, width: int = 1) -> int:
    return rng.randint(0, max(len(data) - width, 0))


def flip_bit(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return b"\x01"
    at = _spot(data, rng)
    return data[:at] + bytes([data[at] ^ (1 << rng.randint(0, 7))]) + data[at + 1:]


def set_byte(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return b"\xff"
    at = _spot(data, rng)
    return data[:at] + bytes([rng.choice((0x00, 0x7F, 0x80, 0xFF))]) + data[at + 1:]


def lying_int32(data: bytes, rng: random.Random) -> bytes:
    """An int32 (an array count or a length, wherever it lands) that promises the wrong size."""
    if len(data) < 4:
        return data + _INT32.pack(-1)
    at = _spot(data, rng, 4)
    value = rng.choice((-1, -2, 0, len(data) - at - 3, 0x7FFFFFFF, -(1 << 31)))
    return data[:at] + _INT32.pack(value) + data[at + 4:]


def long_varint(data: bytes, rng: random.Random) -> bytes:
    """Continuation bytes where a compact length or count was: a varint too long or too large."""
    at = _spot(data, rng)
    return data[:at] + b"\xff" * rng.choice((4, 5, 6, 10)) + b"\x0f" + data[at + 1:]


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randint(0, max(len(data) - 1, 0))]


def append(data: bytes, rng: random.Random) -> bytes:
    size = rng.randint(1, 16)
    return data + rng.getrandbits(8 * size).to_bytes(size, "big")


def delete_span(data: bytes, rng: random.Random) -> bytes:
    if len(data) < 2:
        return b""
    start = _spot(data, rng)
    return data[:start] + data[start + rng.randint(1, min(8, len(data) - start)):]


def repeat_span(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return b"\x00"
    start = _spot(data, rng)
    end = start + rng.randint(1, min(8, len(data) - start))
    return data[:end] + data[start:end] + data[end:]


MUTATORS = {f.__name__: f for f in (flip_bit, set_byte, lying_int32, long_varint, truncate, append, delete_span,
                                     repeat_span)}


def mutate(data: bytes, rng: random.Random, rounds: int | None = None) -> tuple[bytes, list[str]]:
    """``data`` after one to three mutators (or ``rounds``); returns the bytes and the mutators' names."""
    applied = []
    for _ in range(rounds if rounds is not None else rng.randint(1, 3)):
        name = rng.choice(sorted(MUTATORS))
        data = MUTATORS[name](data, rng)
        applied.append(name)
    return data, applied

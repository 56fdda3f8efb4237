"""Random messages and record batches from a ``random.Random``: the one generator behind both the
Hypothesis strategies (``kafkawire.testing.strategies``, which hand it Hypothesis' own Random, so
examples shrink and replay) and ``kafkawire fuzz`` (a seeded Random, no Hypothesis needed).

Values are valid for the version: every field it carries gets a value of its type (integers at
their bounds and around zero as often as anywhere in the range, finite floats, nil and random uuids,
ASCII and multi-byte strings), null only where the version allows, tagged fields present or left
out, unknown tagged fields on flexible structs (tags above the spec's), and now and then lengths and
counts at the varint boundaries (127/128 bytes or elements, 16383/16384 bytes) that small random
values never reach. ``records`` fields hold real record batches of every magic and codec (control
batches included) more often than raw bytes.
"""
from __future__ import annotations

import random
import uuid

from typing import Any

from kafkawire.codec.base import Message
from kafkawire.records import Codec, LegacyMessageSetBuilder, RecordBatchBuilder, transaction_marker_batch

from .layout import FieldLayout, fields_at, known_tags, message_fields

__all__ = ["MessageValues", "record_batches", "INT_RANGES"]

INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}
BOUNDARY_BYTES = (126, 127, 128, 16383, 16384)  # where compact lengths (n + 1) take one more varint byte
BOUNDARY_COUNTS = (126, 127, 128)
MAX_STRING_BYTES = 0x7FFF  # an int16 length: the longest string every version can carry
_ASCII = "abcdefghijklmnopqrstuvwxyz0123456789-._"
_WIDE = "é€𝄞ß中"  # two-, three- and four-byte UTF-8 characters: byte and character counts differ


class MessageValues:
    """Draws messages of any generated class and version.

    ``boundary``: how often a string, bytes value or array takes a boundary length or count;
    ``unknown_tags``: how often a flexible struct carries unknown tagged fields; ``max_items``: the
    longest ordinary array; ``records``: how often a ``records`` field holds real batches.
    """

    def __init__(self, rng: random.Random, *, boundary: float = 0.03, unknown_tags: float = 0.3,
                 max_items: int = 3, records: float = 0.7, null: float = 0.15):
        self.rng = rng
        self.boundary = boundary
        self.unknown_tags = unknown_tags
        self.max_items = max_items
        self.records = records
        self.null = null

    def message(self, cls: type[Message], version: int) -> Any:
        low, high = cls.VALID_VERSIONS
        if not low <= version <= high:
            raise ValueError(f"{cls.NAME} has no version {version} (versions {low}-{high})")
        flexible = cls.FLEXIBLE_VERSIONS is not None and version >= cls.FLEXIBLE_VERSIONS[0]
        return self._struct(cls, cls, version, message_fields(cls), flexible, depth=0)

    # ---- structs and fields -------------------------------------------------------------------------
    def _struct(self, cls: Any, top: type[Message], version: int, schema_fields, flexible: bool, depth: int):
        kwargs = {}
        for f in fields_at(cls, version, top, schema_fields):
            if f.tagged and self.rng.random() < 0.5:
                continue  # left at its default: not on the wire
            kwargs[f.attr] = self._field(f, top, version, flexible, depth)
        if flexible and self.rng.random() < self.unknown_tags:
            kwargs["unknown_tags"] = self._unknown_tags(known_tags(schema_fields))
        return cls(**kwargs)

    def _field(self, f: FieldLayout, top: type, version: int, flexible: bool, depth: int):
        if f.nullable and self.rng.random() < self.null:
            return None
        if f.array:
            if f.kind == "struct":
                count = self.rng.randint(0, self.max_items if depth < 2 else 1)
            else:
                count = self._count()
            return [self._value(f, top, version, flexible, depth) for _ in range(count)]
        return self._value(f, top, version, flexible, depth)

    def _value(self, f: FieldLayout, top: type, version: int, flexible: bool, depth: int):
        if f.kind == "struct":
            return self._struct(f.struct, top, version, f.children, flexible, depth + 1)
        if f.kind == "records":
            return self.records_value()
        return self.primitive(f.kind)

    def _count(self) -> int:
        if self.rng.random() < self.boundary:
            return self.rng.choice(BOUNDARY_COUNTS)
        return self.rng.randint(0, self.max_items)

    def _unknown_tags(self, known: set[int]) -> dict[int, bytes]:
        first = max(known, default=-1) + 1
        tags = {}
        for _ in range(self.rng.randint(1, 2)):
            tag = first + self.rng.choice((0, 1, 2, 127, 128, 16384))  # varint widths of the tag number
            tags[tag] = self.binary()
        return tags

    # ---- primitives -----------------------------------------------------------------------------------
    def primitive(self, kind: str):
        rng = self.rng
        if kind in INT_RANGES:
            low, high = INT_RANGES[kind]
            pick = rng.random()
            if pick < 0.3:
                return rng.choice((low, high, 0, max(low, -1), min(high, 1)))
            if pick < 0.6:
                return max(low, min(high, rng.randint(-100, 100)))
            return rng.randint(low, high)
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "float64":
            return rng.choice((0.0, 1.5, -2.25, 1e300, -1e-300, rng.uniform(-1e9, 1e9)))
        if kind == "uuid":
            return uuid.UUID(int=0) if rng.random() < 0.2 else uuid.UUID(int=rng.getrandbits(128))
        if kind == "string":
            return self.text()
        if kind == "bytes":
            return self.binary()
        raise ValueError(f"no values for type {kind!r}")

    def text(self) -> str:
        rng = self.rng
        if rng.random() < self.boundary:
            size = rng.choice(BOUNDARY_BYTES)
            return "x" * min(size, MAX_STRING_BYTES)
        alphabet = _ASCII if rng.random() < 0.8 else _ASCII + _WIDE
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))

    def binary(self) -> bytes:
        rng = self.rng
        size = rng.choice(BOUNDARY_BYTES) if rng.random() < self.boundary else rng.randint(0, 16)
        return rng.getrandbits(8 * size).to_bytes(size, "big") if size else b""

    def records_value(self) -> bytes:
        if self.rng.random() < self.records:
            return record_batches(self.rng)
        return self.binary()


def record_batches(rng: random.Random, *, magic: int | None = None, codec: Codec | None = None,
                   control: bool | None = None, batches: int | None = None) -> bytes:
    """One or more record batches (a ``records`` value): magic 0, 1 or 2, any codec the magic allows
    (zstd needs magic 2), with keys, values and (magic 2) headers; with ``control`` (magic 2), a
    transaction marker batch. Arguments left None are drawn."""
    out = bytearray()
    offset = rng.randint(0, 1000)
    for _ in range(batches if batches is not None else rng.choice((1, 1, 1, 2, 3))):
        batch_magic = magic if magic is not None else rng.choice((0, 1, 2, 2, 2))
        is_control = control if control is not None else (batch_magic == 2 and rng.random() < 0.15)
        if is_control:
            if batch_magic != 2:
                raise ValueError("control batches need magic 2")
            out += transaction_marker_batch(rng.random() < 0.5, producer_id=rng.randint(0, 1 << 40),
                                            producer_epoch=rng.randint(0, 0x7FFF),
                                            coordinator_epoch=rng.randint(0, 100), base_offset=offset)
            offset += 1
            continue
        codecs = list(Codec) if batch_magic == 2 else [c for c in Codec if c != Codec.ZSTD]
        batch_codec = codec if codec is not None else rng.choice(codecs)
        count = rng.randint(1, 5)
        if batch_magic == 2:
            batch = RecordBatchBuilder(base_offset=offset, compression=batch_codec)
            for _ in range(count):
                batch.append(_maybe(rng, _blob(rng)), key=_maybe(rng, _blob(rng)),
                             headers=[(f"h{n}", _maybe(rng, _blob(rng))) for n in range(rng.randint(0, 2))])
            out += batch.build()
        else:
            legacy = LegacyMessageSetBuilder(batch_magic, base_offset=offset, compression=batch_codec)
            for _ in range(count):
                legacy.append(_maybe(rng, _blob(rng)), key=_maybe(rng, _blob(rng)))
            out += legacy.build()
        offset += count
    return bytes(out)


def _blob(rng: random.Random) -> bytes:
    size = rng.randint(0, 40)
    return rng.getrandbits(8 * size).to_bytes(size, "big") if size else b""


def _maybe(rng: random.Random, value: bytes) -> bytes | None:
    return None if rng.random() < 0.15 else value

"""Responses assembled from bytes: a top-level array's items written one at a time as they are ready
(or kept encoded, as the metadata cache keeps topics), and spliced into the response written without
them. A handler of thousands of items then holds no tree of thousands of objects across the slices it
runs in (objects that would live long enough to reach the collector's oldest generation and make its
full collections long), and a cached item costs a join.

The items are the generated codec's own bytes: an item is written inside a one-item response and cut
out where a no-item response's array begins and ends (``_Splice``), so every version's layout is the
codec's; the tests compare assembled answers with the codec's encoding of the same values.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, NamedTuple

from ..codec.primitives import uvarint

if TYPE_CHECKING:
    from ..codec.base import Bytes, Message

__all__ = ["ArrayItems", "EncodedResponse", "array_items"]

_INT32 = struct.Struct(">i").pack


class _Splice(NamedTuple):
    """Where one version's array sits in a response body."""

    flexible: bool  # compact array length (uvarint n + 1) and a tag section closing each item
    start: int  # offset just after the array's length in the probe body with no items
    tail: int  # bytes after the array

    def length(self, count: int) -> bytes:
        return uvarint(count + 1) if self.flexible else _INT32(count)

    @property
    def length_size(self) -> int:
        """The size of an empty array's length."""
        return 1 if self.flexible else 4


class ArrayItems:
    """The items of array ``field`` of ``message_class`` (the top-level response), written at ``version``.
    ``probe`` is an item to measure the layout with (any valid one)."""

    def __init__(self, message_class: type[Message], field: str, version: int, probe: Any):
        self.message_class, self.field, self.version = message_class, field, version
        empty = message_class(**{field: []}).encode(version)
        one = message_class(**{field: [probe]}).encode(version)
        start = next(i for i, (a, b) in enumerate(zip(empty, one)) if a != b) + 1  # the length's last byte
        flexible = message_class.FLEXIBLE_VERSIONS
        self.splice = _Splice(flexible is not None and flexible[0] <= version <= flexible[1], start,
                              len(empty) - start)

    def encode(self, item: Any) -> bytes:
        """One item as the response writes it."""
        body = self.message_class(**{self.field: [item]}).encode(self.version)
        return body[self.splice.start:len(body) - self.splice.tail]

    def response(self, head: Message, pieces: list[bytes]) -> EncodedResponse:
        """``head`` (the response with the array empty) with ``pieces`` for the array."""
        return EncodedResponse(self, head, pieces)


_MEASURED: dict[tuple[type, str, int], ArrayItems] = {}


def array_items(message_class: type[Message], field: str, version: int, probe: Any) -> ArrayItems:
    """``ArrayItems`` of the array at ``version``, measured once."""
    key = (message_class, field, version)
    found = _MEASURED.get(key)
    if found is None:
        found = _MEASURED[key] = ArrayItems(message_class, field, version, probe)
    return found


class EncodedResponse:
    """A response assembled from bytes; it stands in for the message where a body is framed
    (``framing.encode_response_parts`` asks for ``encode_parts``)."""

    __slots__ = ("items", "head", "pieces")

    def __init__(self, items: ArrayItems, head: Message, pieces: list[bytes]):
        self.items = items
        self.head = head
        self.pieces = pieces

    @property
    def error_code(self) -> int | None:  # the top-level error, for the request metrics
        return getattr(self.head, "error_code", None)

    def encode_parts(self, version: int) -> list[Bytes]:
        items = self.items
        if version != items.version:
            raise ValueError(f"this response was assembled at version {items.version}, not {version}")
        at = items.splice
        body = self.head.encode(version)
        before = len(body) - at.tail - at.length_size
        return [body[:before] + at.length(len(self.pieces)), *self.pieces, body[len(body) - at.tail:]]

"""Base classes of the generated message and struct classes: equality, repr, to_dict, decode, encode.

The generated classes carry their per-version readers and writers; nothing here walks a schema on
the encode or decode path. Equality, repr and to_dict walk ``_FIELDS``, which is not hot. Each generated
module has a stub (``.pyi``) beside it that types its classes' fields and constructors for type checkers.
"""
from __future__ import annotations

import base64
import gc
import uuid

from ..errors import DecodeError, EncodeError, UnsupportedVersionError

TYPE_CHECKING = False  # what typing.TYPE_CHECKING is, without importing typing where codecs load
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol, Self

    class NativeEncoder(Protocol):
        """A version's native encoder (kafkawire/codec/_encoder.c); None: the Python writer's turn."""

        def encode(self, message: Message, /) -> bytes | None: ...
        def encode_parts(self, message: Message, /) -> list[Bytes] | None: ...
        def encode_into(self, message: Message, buf: bytearray | memoryview, offset: int, /) -> int | None: ...

# A ``bytes`` or ``records`` field's value: what the constructor takes and encode writes. Decode gives
# memoryview slices of its input.
Bytes = bytes | bytearray | memoryview


# Messages larger than this many bytes are decoded with the cyclic GC paused; see pause_gc_above().
_PAUSE_GC_ABOVE: float = 64 * 1024


class Struct:
    """A generated struct: slots named as the spec's fields in snake_case, plus ``unknown_tags``.

    ``unknown_tags`` maps tag numbers the spec does not know to their raw value bytes; they are written
    back on encode. A struct-typed field left at its default is created on first access (its slot holds
    ``ABSENT`` until then, behind a property of the field's name).
    """

    __slots__ = ()
    _FIELDS: tuple[str, ...] = ()
    unknown_tags: dict[int, bytes] | None  # a slot of every generated class

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for name in self._FIELDS:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is theirs:
                continue
            if isinstance(mine, (list, tuple)) and isinstance(theirs, (list, tuple)):
                if tuple(mine) != tuple(theirs):
                    return False
            elif mine != theirs:
                return False
        return (self.unknown_tags or None) == (other.unknown_tags or None)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = [f"{name}={_short_repr(getattr(self, name))}" for name in self._FIELDS]
        if self.unknown_tags:
            parts.append(f"unknown_tags={self.unknown_tags!r}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe data: bytes and records as base64 text, uuids as text, arrays as lists."""
        data = {name: _to_json(getattr(self, name)) for name in self._FIELDS}
        if self.unknown_tags:
            data["unknown_tags"] = {str(tag): base64.b64encode(value).decode("ascii")
                                    for tag, value in sorted(self.unknown_tags.items())}
        return data


class Message(Struct):
    """A top-level message (request, response, header or data): adds versioned decode and encode."""

    __slots__ = ()
    NAME: str = ""
    API_KEY: int | None = None
    VALID_VERSIONS: tuple[int, int] = (0, 0)
    FLEXIBLE_VERSIONS: tuple[int, int] | None = None
    _READERS: dict[int, Callable[..., tuple[Any, int]]] = {}
    _WRITERS: dict[int, Callable[..., None]] = {}
    _ENCODERS: dict[int, NativeEncoder] = {}  # the native encoders by version (codec/native.py), if built

    @classmethod
    def decode(cls, buf: Bytes, version: int, exact: bool = False) -> Self:
        """Decode a body of ``version`` from bytes, bytearray or memoryview.

        ``bytes`` and ``records`` fields come back as memoryview slices of ``buf`` (no copy). With
        ``exact``, bytes left after the message are an error.
        """
        message: Self  # (a bare annotation: no code at run time)
        if type(buf) is not memoryview and len(buf) <= _PAUSE_GC_ABOVE:
            try:  # small bytes or bytearray: the short path (the reader makes a memoryview if it needs one)
                message, end = cls._READERS[version](buf, 0, None)
            except DecodeError as exc:
                exc.path.insert(0, cls.NAME)
                raise
            except KeyError:  # readers raise only DecodeError: this is an unknown version
                message, end = _decode(cls, buf, version, 0)
        else:
            message, end = _decode(cls, buf, version, 0)  # the general path
        if exact and end != len(buf):
            raise DecodeError(f"{len(buf) - end} trailing bytes after the message", end, [cls.NAME])
        return message

    @classmethod
    def decode_from(cls, buf: Bytes, version: int, pos: int = 0) -> tuple[Self, int]:
        """Decode a body of ``version`` starting at ``pos``; returns ``(message, end position)``."""
        return _decode(cls, buf, version, pos)

    def encode(self, version: int) -> bytes:
        """The body of this message written at ``version``."""
        encoder = self._ENCODERS.get(version)
        if encoder is not None:
            data = encoder.encode(self)
            if data is not None:
                return data
        return b"".join(self._python_parts(version))

    def encode_parts(self, version: int) -> list[Bytes]:
        """The body written at ``version`` as the list of pieces ``encode`` joins, in order.

        ``records`` values are pieces of their own, exactly the objects the message holds (only their
        ``len()`` is taken), so a caller can send a large one without copying it: vectored writes, or
        ``sendfile`` for an object that stands for a slice of a file. (The Python writers keep
        ``bytes`` values as pieces too; the native encoder copies them into the pieces around them.)
        """
        encoder = self._ENCODERS.get(version)
        if encoder is not None:
            parts = encoder.encode_parts(self)
            if parts is not None:
                return parts
        return self._python_parts(version)

    def encode_into(self, buf: bytearray | memoryview, version: int, offset: int = 0) -> int:
        """Write the body at ``version`` into the writable buffer ``buf`` at ``offset``; returns the
        offset just after it. ValueError if it does not fit (the buffer is never grown)."""
        encoder = self._ENCODERS.get(version)
        if encoder is not None:
            end = encoder.encode_into(self, buf, offset)
            if end is not None:
                return end
        data = self.encode(version)  # raises as the writers do; else the body did not fit
        target = memoryview(buf)
        end = offset + len(data)
        if offset < 0 or end > target.nbytes:
            raise ValueError(f"a body of {len(data)} bytes does not fit at offset {offset} of a "
                             f"{target.nbytes}-byte buffer")
        target.cast("B")[offset:end] = data
        return end

    def _python_parts(self, version: int) -> list[Bytes]:
        """encode_parts by the generated Python writer (the native encoder's fallback and reference)."""
        writer = self._WRITERS.get(version)
        if writer is None:
            raise UnsupportedVersionError(
                f"can't write version {version} of {self.NAME} (valid: {_range_text(self.VALID_VERSIONS)})",
                [self.NAME])
        out: list[Bytes] = []
        try:
            writer(self, out.append)
        except EncodeError as exc:
            exc.path.insert(0, self.NAME)
            exc.reason = f"{exc.reason} (writing version {version})"
            raise
        return out


def _decode(cls: type[Any], buf: Bytes, version: int, pos: int) -> tuple[Any, int]:
    reader = cls._READERS.get(version)
    if reader is None:
        raise DecodeError(f"unknown version {version} (valid: {_range_text(cls.VALID_VERSIONS)})", pos,
                          [cls.NAME]) from None  # (decode's short path comes here from a KeyError)
    if type(buf) is memoryview:
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        view = buf
    else:
        view = memoryview(buf)
    # A large message allocates tens of thousands of objects that all survive the decode; letting the
    # cyclic GC scan them again and again while they are being built costs a third of the decode
    # time. Pause it and let one ordinary collection see them afterwards.
    if len(buf) - pos > _PAUSE_GC_ABOVE and gc.isenabled():
        gc.disable()
        try:
            return _read(cls, reader, buf, pos, view)
        finally:
            gc.enable()
    return _read(cls, reader, buf, pos, view)


def _read(cls: type[Any], reader: Callable[..., tuple[Any, int]], buf: Bytes, pos: int,
          view: memoryview) -> tuple[Any, int]:
    try:
        return reader(buf, pos, view)
    except DecodeError as exc:
        exc.path.insert(0, cls.NAME)
        raise


def pause_gc_above(size: int | None) -> None:
    """Decode messages larger than ``size`` bytes with the cyclic GC paused (None: never pause)."""
    global _PAUSE_GC_ABOVE
    _PAUSE_GC_ABOVE = float("inf") if size is None else size
    for listener in PAUSE_GC_LISTENERS:
        listener(_PAUSE_GC_ABOVE)


# Called with the new size by pause_gc_above(): the native decode entry point (codec/native.py) keeps
# its own copy rather than look this module's global up on every decode.
PAUSE_GC_LISTENERS: list[Callable[[float], object]] = []


def _range_text(versions: tuple[int, int]) -> str:
    low, high = versions
    return str(low) if low == high else f"{low}-{high}"


def _to_json(value: object) -> object:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_to_json(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _short_repr(value: object) -> str:
    if isinstance(value, memoryview):
        raw = bytes(value[:32])
        return f"<{len(value)} bytes {raw!r}{'...' if len(value) > 32 else ''}>"
    if isinstance(value, tuple) and len(value) > 8:
        head = ", ".join(_short_repr(item) for item in value[:8])
        return f"({head}, ... {len(value)} items)"
    return repr(value)

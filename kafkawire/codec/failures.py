"""Turning a failed read or write into an error that names the field path.

The generated readers and writers do no bookkeeping on their fast path. Each one ends with
``except Exception as exc: raise decode_failure(exc, _FIELDS_AT) from None``; only then is the line
the exception passed through looked up in the module's table of field lines (written by the
generator from the ``# field:`` comments above each field's code), and the loop counter of an array
field read from the frame, to name ``topics[3].partitions[0].records``.
"""
from __future__ import annotations

import bisect
import struct

from ..errors import DecodeError, EncodeError, UnsupportedVersionError
from .primitives import Invalid


class FieldLines:
    """A module's map from source line to the field whose code starts at or above it.

    ``table`` is the generator's text: ``"line:field line:field[] line:-"`` (``[]`` marks arrays,
    ``-`` a function start); it is parsed on the first failure only.
    """

    __slots__ = ("_table", "_lines", "_labels")

    def __init__(self, table: str):
        self._table = table
        self._lines: list[int] | None = None
        self._labels: list[str] = []

    def label_at(self, line: int) -> str | None:
        if self._lines is None:
            pairs = [entry.split(":", 1) for entry in self._table.split()]
            self._lines = [int(number) for number, _ in pairs]
            self._labels = [label for _, label in pairs]
        index = bisect.bisect_right(self._lines, line) - 1
        if index < 0 or self._labels[index] == "-":
            return None
        return self._labels[index]


def _locate(exc: BaseException, lines: FieldLines) -> tuple[str | None, dict]:
    tb = exc.__traceback__
    if tb is None:
        return None, {}
    label = lines.label_at(tb.tb_lineno)
    return label, tb.tb_frame.f_locals


def _segment(label: str | None, frame_locals: dict) -> str | None:
    if label is None:
        return None
    if ":" in label:  # a fused run of fixed-width fields: "name:code/name:code"
        return "/".join(part.split(":")[0] for part in label.split("/"))
    if label.endswith("[]"):
        name = label[:-2]
        index = frame_locals.get(f"i_{name}")
        return f"{name}[{index}]" if index is not None else name
    return label


def decode_failure(exc: BaseException, lines: FieldLines) -> DecodeError:
    """Called in a reader's ``except`` clause: the DecodeError to raise, with this level's path segments."""
    label, frame_locals = _locate(exc, lines)
    # A struct read inline in its parent's array loop labels its fields "array[]>field".
    arrays: list[str] = []
    if label is not None:
        *arrays, label = label.split(">")
    segments = [found for array in arrays if (found := _segment(array, frame_locals)) is not None]
    segment = _segment(label, frame_locals)
    if isinstance(exc, DecodeError):  # from a nested struct's reader: add our part of the path
        if segment is not None:
            exc.path[:0] = segments + [segment]
        return exc
    offset: int | None
    if isinstance(exc, Invalid):
        reason, offset = exc.reason, exc.offset
    else:
        reason, offset = _describe_read_error(exc), frame_locals.get("pos")
        if label is not None and ":" in label and offset is not None:
            segment, offset = _truncated_run_field(label, offset, frame_locals.get("buf"))
    return DecodeError(reason, offset, segments + [segment] if segment is not None else segments)


def _truncated_run_field(label: str, offset: int, buf) -> tuple[str, int]:
    """In a fused run that hit the end of the buffer, the field the buffer ends in and its offset."""
    available = len(buf) if buf is not None else 0
    name = label
    for name, code in _run_fields(label):
        size = struct.calcsize(">" + code)
        if offset + size > available:
            return name, offset
        offset += size
    return name, offset


def _run_fields(label: str) -> list[tuple[str, str]]:
    return [(name, code) for name, _, code in (part.partition(":") for part in label.split("/"))]


def _bad_run_value(label: str, frame_locals: dict) -> str | None:
    """In a fused run that failed to pack, the first field whose value does not pack alone."""
    self = frame_locals.get("self")
    for name, code in _run_fields(label):
        try:
            value = getattr(self, name)
            struct.pack(">" + code, value.bytes if code == "16s" else value)
        except Exception:
            return name
    return None


def _describe_read_error(exc: BaseException) -> str:
    if isinstance(exc, (struct.error, IndexError)):
        return "truncated: the buffer ends inside this field"
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 in a string ({exc.reason} at string byte {exc.start})"
    if isinstance(exc, RecursionError):
        return "structure nested too deeply"
    return f"{type(exc).__name__}: {exc}"


def encode_failure(exc: BaseException, lines: FieldLines) -> EncodeError:
    """Called in a writer's ``except`` clause: the EncodeError to raise, with this level's path segment."""
    label, frame_locals = _locate(exc, lines)
    segment = _segment(label, frame_locals)
    if label is not None and ":" in label and not isinstance(exc, EncodeError):
        segment = _bad_run_value(label, frame_locals) or segment
    if isinstance(exc, EncodeError):
        if segment is not None:
            exc.path.insert(0, segment)
        return exc
    if isinstance(exc, struct.error):
        reason = f"value out of range for its type ({exc})"
    elif isinstance(exc, UnicodeEncodeError):
        reason = f"string is not encodable as UTF-8 ({exc.reason})"
    elif isinstance(exc, (TypeError, AttributeError)):
        reason = f"wrong type ({exc})"
    else:
        reason = f"{type(exc).__name__}: {exc}"
    return EncodeError(reason, [segment] if segment is not None else [])


def not_in_version(struct_name: str, field: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(f"has a non-default value, but {struct_name}.{field} is not in this version")


def tags_not_supported(struct_name: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(f"tagged fields were set in {struct_name}, but the version does not "
                                   f"support them")


def null_not_allowed(field: str) -> EncodeError:
    return EncodeError(f"null is not allowed for {field} at this version")


def string_too_long(length: int) -> EncodeError:
    return EncodeError(f"string of {length} UTF-8 bytes exceeds the 32767-byte limit")

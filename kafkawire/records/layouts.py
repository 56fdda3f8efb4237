"""The fixed binary layouts of Kafka's record formats, declared once as named fields.

Each declaration gives two things: the ``struct`` format the hot paths read and write with
(``BATCH_HEADER_FORMAT``...), and, on first use, the construct layout that tests and tools parse with
(``BATCH_HEADER``...): construct is imported only then, so that a broker or client never pays for it.
Offsets and names follow ``DefaultRecordBatch.java`` and ``LegacyRecord.java``.
"""
from __future__ import annotations

from struct import Struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from construct import Struct as Layout

__all__ = [
    "BATCH_HEADER", "BATCH_HEADER_SIZE", "LOG_OVERHEAD", "MAGIC_OFFSET", "CRC_OFFSET", "ATTRIBUTES_OFFSET",
    "LEGACY_HEADER_V0", "LEGACY_HEADER_V1", "CONTROL_KEY", "END_TXN_MARKER", "ENTRY_PREFIX", "packed",
    "BATCH_HEADER_FORMAT", "LEGACY_HEADER_V0_FORMAT", "LEGACY_HEADER_V1_FORMAT", "CONTROL_KEY_FORMAT",
    "END_TXN_MARKER_FORMAT",
]

# construct's big-endian integer fields and their struct codes
_CODES = {"Int8sb": "b", "Int16sb": "h", "Int32sb": "i", "Int32ub": "I", "Int64sb": "q"}

_DECLARED: dict[str, tuple[tuple[str, str], ...]] = {
    # Every entry in a records blob, batch or legacy message, starts with these 12 bytes.
    "ENTRY_PREFIX": (
        ("base_offset", "Int64sb"),
        ("length", "Int32sb"),  # bytes after this field
    ),
    # RecordBatch (magic 2), 61 bytes before the records.
    "BATCH_HEADER": (
        ("base_offset", "Int64sb"),
        ("length", "Int32sb"),
        ("partition_leader_epoch", "Int32sb"),
        ("magic", "Int8sb"),
        ("crc", "Int32ub"),  # CRC-32C of everything from attributes to the end of the batch
        ("attributes", "Int16sb"),
        ("last_offset_delta", "Int32sb"),
        ("base_timestamp", "Int64sb"),
        ("max_timestamp", "Int64sb"),
        ("producer_id", "Int64sb"),
        ("producer_epoch", "Int16sb"),
        ("base_sequence", "Int32sb"),
        ("records_count", "Int32sb"),
    ),
    # Legacy messages: the log prefix, then a header that differs only in v1's timestamp.
    "LEGACY_HEADER_V0": (
        ("offset", "Int64sb"),
        ("size", "Int32sb"),
        ("crc", "Int32ub"),  # CRC-32 (zlib) of everything from magic to the end of the message
        ("magic", "Int8sb"),
        ("attributes", "Int8sb"),
    ),
    "LEGACY_HEADER_V1": (
        ("offset", "Int64sb"),
        ("size", "Int32sb"),
        ("crc", "Int32ub"),
        ("magic", "Int8sb"),
        ("attributes", "Int8sb"),
        ("timestamp", "Int64sb"),
    ),
    # The key of a control record, and the value of a commit or abort marker.
    "CONTROL_KEY": (
        ("version", "Int16sb"),
        ("type", "Int16sb"),
    ),
    "END_TXN_MARKER": (
        ("version", "Int16sb"),
        ("coordinator_epoch", "Int32sb"),
    ),
}


def _format(fields: tuple[tuple[str, str], ...]) -> Struct:
    return Struct(">" + "".join(_CODES[kind] for _, kind in fields))


def _offset_of(name: str, field: str) -> int:
    fields = _DECLARED[name]
    return _format(fields[:[declared for declared, _ in fields].index(field)]).size


ENTRY_PREFIX_FORMAT = _format(_DECLARED["ENTRY_PREFIX"])
BATCH_HEADER_FORMAT = _format(_DECLARED["BATCH_HEADER"])
LEGACY_HEADER_V0_FORMAT = _format(_DECLARED["LEGACY_HEADER_V0"])
LEGACY_HEADER_V1_FORMAT = _format(_DECLARED["LEGACY_HEADER_V1"])
CONTROL_KEY_FORMAT = _format(_DECLARED["CONTROL_KEY"])
END_TXN_MARKER_FORMAT = _format(_DECLARED["END_TXN_MARKER"])

LOG_OVERHEAD = ENTRY_PREFIX_FORMAT.size  # 12
BATCH_HEADER_SIZE = BATCH_HEADER_FORMAT.size  # 61
MAGIC_OFFSET = _offset_of("BATCH_HEADER", "magic")  # 16, the same byte in every format
CRC_OFFSET = _offset_of("BATCH_HEADER", "crc")  # 17
ATTRIBUTES_OFFSET = _offset_of("BATCH_HEADER", "attributes")  # 21, where the CRC-32C coverage starts


def packed(layout: Layout) -> Struct:
    """The ``struct.Struct`` that reads and writes a construct layout's fields in order."""
    from ..layout_formats import packed as from_construct
    return from_construct(layout)


def __getattr__(name: str) -> Layout:
    """The construct layouts (``BATCH_HEADER``...), made from the declarations on first use."""
    fields = _DECLARED.get(name)
    if fields is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import construct
    layout = construct.Struct(*(field / getattr(construct, kind) for field, kind in fields))
    globals()[name] = layout
    return layout

"""Control records: transaction markers and the KRaft records that live in control batches.

A control batch (attribute bit 5) carries records whose key is ``version:int16, type:int16``. Commit
and abort values are ``version:int16, coordinator_epoch:int32``; the KRaft types' values are
flexible-version data messages from the specs (LeaderChangeMessage, SnapshotHeaderRecord, ...),
each starting with its own int16 version.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from struct import Struct
from typing import TYPE_CHECKING

from ..errors import DecodeError, RecordsError
from .layouts import CONTROL_KEY_FORMAT, END_TXN_MARKER_FORMAT
from .record import Record

if TYPE_CHECKING:
    from ..codec.base import Message

__all__ = ["ControlType", "ControlRecord", "control_record", "control_key", "end_txn_marker_value"]

_KEY = CONTROL_KEY_FORMAT
_MARKER = END_TXN_MARKER_FORMAT
_VERSION = Struct(">h")


class ControlType(enum.IntEnum):
    """``ControlRecordType.java``; types this version does not know read as UNKNOWN."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


# The data message that each KRaft control type's value holds.
_KRAFT_MESSAGES = {
    ControlType.LEADER_CHANGE: "LeaderChangeMessage",
    ControlType.SNAPSHOT_HEADER: "SnapshotHeaderRecord",
    ControlType.SNAPSHOT_FOOTER: "SnapshotFooterRecord",
    ControlType.KRAFT_VERSION: "KRaftVersionRecord",
    ControlType.KRAFT_VOTERS: "VotersRecord",
}


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """What a control record says. ``coordinator_epoch`` is set for commit and abort markers,
    ``message`` (a decoded kafkawire.messages object) for the KRaft types."""

    offset: int
    type: ControlType
    version: int
    type_id: int
    coordinator_epoch: int | None = None
    message: Message | None = None

    @property
    def is_transaction_marker(self) -> bool:
        return self.type in (ControlType.ABORT, ControlType.COMMIT)


def control_record(record: Record) -> ControlRecord:
    """Interpret a record from a control batch. Raises RecordsError for a malformed key or value."""
    key = record.key
    if key is None or len(key) < _KEY.size:
        raise RecordsError(f"control record key needs {_KEY.size} bytes, got {0 if key is None else len(key)}",
                           base_offset=record.offset)
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise RecordsError(f"control record key has negative version {version}", base_offset=record.offset)
    try:
        kind = ControlType(type_id)
    except ValueError:
        kind = ControlType.UNKNOWN
    if kind in (ControlType.ABORT, ControlType.COMMIT):
        value = record.value
        if value is None or len(value) < _MARKER.size:
            raise RecordsError(f"transaction marker value needs {_MARKER.size} bytes", base_offset=record.offset)
        _, epoch = _MARKER.unpack_from(value)
        return ControlRecord(record.offset, kind, version, type_id, coordinator_epoch=epoch)
    if kind in _KRAFT_MESSAGES:
        return ControlRecord(record.offset, kind, version, type_id, message=_kraft_message(kind, record))
    return ControlRecord(record.offset, kind, version, type_id)


def _kraft_message(kind: ControlType, record: Record) -> Message:
    from .. import messages  # loaded on first use: most readers never meet a KRaft control record

    cls = messages.message_class(_KRAFT_MESSAGES[kind])
    value = record.value
    if value is None or len(value) < _VERSION.size:
        raise RecordsError(f"{cls.NAME} value is missing", base_offset=record.offset)
    (version,) = _VERSION.unpack_from(value)
    # The message's own Version field names the schema version it was written with; a newer one
    # than we know reads with our newest (flexible messages are forward compatible through tags).
    newest = cls.VALID_VERSIONS[1]
    try:
        return cls.decode(value, min(max(version, 0), newest))
    except DecodeError as error:
        raise RecordsError(f"{cls.NAME}: {error}", base_offset=record.offset) from None


def control_key(kind: ControlType, version: int = 0) -> bytes:
    return _KEY.pack(version, kind)


def end_txn_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    return _MARKER.pack(version, coordinator_epoch)

"""Writing records: RecordBatchBuilder (magic 2) and LegacyMessageSetBuilder (magic 0 and 1).

The output is what Kafka's MemoryRecordsBuilder writes: base timestamp = the first record's,
max timestamp over the records (or the log-append time), deltas against both bases, the CRC over
the right span, one compressed stream for the records.
"""
from __future__ import annotations

import time
import zlib
from collections.abc import Iterable
from struct import Struct

from .appender import RecordAppender
from .batch import CONTROL_FLAG, DELETE_HORIZON_FLAG, TIMESTAMP_TYPE_FLAG, TRANSACTIONAL_FLAG
from .checksums import crc32c
from .compression import Buffer, Codec, compress
from .control import ControlType, control_key, end_txn_marker_value
from .layouts import ATTRIBUTES_OFFSET, BATCH_HEADER_FORMAT, CRC_OFFSET
from .legacy import LEGACY_TIMESTAMP_TYPE_FLAG
from .record import Header, TimestampType

__all__ = ["RecordBatchBuilder", "LegacyMessageSetBuilder", "HeaderLike", "transaction_marker_batch"]

HeaderLike = Header | tuple[str, "bytes | None"]

_HEADER = BATCH_HEADER_FORMAT
_CRC = Struct(">I")
_LEGACY_PREFIX = Struct(">qiI")  # offset, size, crc
_INT32 = Struct(">i")
_INT64 = Struct(">q")
_NO_TIMESTAMP = -1
_INT32_MAX = 0x7FFFFFFF


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_bytes(value: Buffer | None, name: str) -> None:
    if value is not None and len(value) > _INT32_MAX:
        raise ValueError(f"{name} of {len(value)} bytes exceeds the int32 length limit")


class RecordBatchBuilder:
    """Accumulates records and writes one magic-2 batch.

    >>> builder = RecordBatchBuilder(compression=Codec.ZSTD)
    >>> builder.append(b"value", key=b"key", headers=[("trace", b"1")])
    0
    >>> batch_bytes = builder.build()
    """

    def __init__(self, *, base_offset: int = 0, compression: Codec | int = Codec.NONE,
                 compression_level: int | None = None, timestamp_type: TimestampType = TimestampType.CREATE_TIME,
                 log_append_time: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, transactional: bool = False, control: bool = False,
                 partition_leader_epoch: int = -1, delete_horizon: int | None = None):
        if timestamp_type not in (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME):
            raise ValueError("magic 2 batches have CreateTime or LogAppendTime timestamps")
        self.base_offset = base_offset
        self.compression = Codec(compression)
        self.compression_level = compression_level
        self.timestamp_type = timestamp_type
        self.log_append_time = log_append_time
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.transactional = transactional
        self.control = control
        self.partition_leader_epoch = partition_leader_epoch
        self.delete_horizon = delete_horizon
        # the records so far, written by the C appender when it is built (the producer appends
        # through it directly: one call per record, room checked in the same call)
        self.appender = RecordAppender(delete_horizon)

    def __len__(self) -> int:
        return self.appender.count

    @property
    def records_size(self) -> int:
        """Bytes of the (uncompressed) records appended so far."""
        return self.appender.size

    def append(self, value: Buffer | None, key: Buffer | None = None, headers: Iterable[HeaderLike] = (),
               timestamp: int | None = None, offset_delta: int | None = None) -> int:
        """Add a record; returns its offset delta. Timestamps default to now (milliseconds)."""
        if timestamp is None:
            timestamp = _now_ms()
        elif timestamp < _NO_TIMESTAMP:
            raise ValueError(f"invalid negative timestamp {timestamp}")  # as Kafka's builder refuses it
        if not isinstance(headers, (tuple, list)):
            headers = tuple(headers)
        appender = self.appender
        appender.append(key, value, headers, timestamp, offset_delta)
        return appender.last_offset_delta

    def build(self) -> bytes:
        appender = self.appender
        records: Buffer = appender.records
        if self.compression != Codec.NONE:
            records = compress(self.compression, records, self.compression_level)
        attributes = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_FLAG
        if self.transactional:
            attributes |= TRANSACTIONAL_FLAG
        if self.control:
            attributes |= CONTROL_FLAG
        if self.delete_horizon is not None:
            attributes |= DELETE_HORIZON_FLAG
        base_timestamp = appender.base_timestamp
        if base_timestamp is None:
            base_timestamp = _NO_TIMESTAMP
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME and self.log_append_time is not None:
            max_timestamp = self.log_append_time
        else:
            max_timestamp = appender.max_timestamp
        total = _HEADER.size + len(records)
        if total - 12 > _INT32_MAX:
            raise ValueError(f"batch of {total} bytes exceeds the int32 length limit")
        header = bytearray(_HEADER.size)
        _HEADER.pack_into(header, 0, self.base_offset, total - 12, self.partition_leader_epoch, 2, 0, attributes,
                          max(appender.last_offset_delta, 0), base_timestamp, max_timestamp, self.producer_id,
                          self.producer_epoch, self.base_sequence, appender.count)
        crc = crc32c(records, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
        _CRC.pack_into(header, CRC_OFFSET, crc)
        return b"".join((header, records))


class LegacyMessageSetBuilder:
    """Accumulates records and writes a magic-0 or magic-1 message set; compressed, one wrapper
    message whose value is the compressed inner set (relative inner offsets with magic 1)."""

    def __init__(self, magic: int, *, base_offset: int = 0, compression: Codec | int = Codec.NONE,
                 compression_level: int | None = None,
                 timestamp_type: TimestampType = TimestampType.CREATE_TIME, log_append_time: int | None = None):
        if magic not in (0, 1):
            raise ValueError(f"legacy message sets have magic 0 or 1, not {magic}")
        if Codec(compression) == Codec.ZSTD:
            raise ValueError("zstd needs magic 2 (Kafka refuses it in legacy message sets)")
        if magic == 0:
            timestamp_type = TimestampType.NO_TIMESTAMP
        elif timestamp_type == TimestampType.NO_TIMESTAMP:
            raise ValueError("magic 1 messages have a CreateTime or LogAppendTime timestamp")
        self.magic = magic
        self.base_offset = base_offset
        self.compression = Codec(compression)
        self.compression_level = compression_level
        self.timestamp_type = timestamp_type
        self.log_append_time = log_append_time
        self._messages: list[tuple[int, int, Buffer | None, Buffer | None]] = []

    def __len__(self) -> int:
        return len(self._messages)

    def append(self, value: Buffer | None, key: Buffer | None = None, timestamp: int | None = None,
               offset: int | None = None) -> int:
        """Add a record; returns its absolute offset."""
        if offset is None:
            offset = self._messages[-1][0] + 1 if self._messages else self.base_offset
        elif self._messages and offset <= self._messages[-1][0]:
            raise ValueError(f"offset {offset} does not follow {self._messages[-1][0]}")
        if self.magic == 0:
            timestamp = _NO_TIMESTAMP
        elif self.timestamp_type == TimestampType.LOG_APPEND_TIME and self.log_append_time is not None:
            timestamp = self.log_append_time  # Java writes the append time into every message
        elif timestamp is None:
            timestamp = _now_ms()
        elif timestamp < _NO_TIMESTAMP:
            raise ValueError(f"invalid negative timestamp {timestamp}")
        _check_bytes(key, "key")
        _check_bytes(value, "value")
        self._messages.append((offset, timestamp, key, value))
        return offset

    def build(self) -> bytes:
        log_append = self.timestamp_type == TimestampType.LOG_APPEND_TIME
        flags = LEGACY_TIMESTAMP_TYPE_FLAG if log_append else 0
        if self.compression == Codec.NONE:
            return b"".join(self._message(offset, timestamp, flags, key, value)
                            for offset, timestamp, key, value in self._messages)
        if not self._messages:
            return b""
        first = self._messages[0][0]
        inner = b"".join(
            # magic 1 writes inner offsets relative to the first; magic 0 writes them absolute
            self._message(offset - first if self.magic == 1 else offset, timestamp, 0, key, value)
            for offset, timestamp, key, value in self._messages)
        wrapped = compress(self.compression, inner, self.compression_level, legacy_lz4=self.magic == 0)
        last_offset = self._messages[-1][0]
        if log_append and self.log_append_time is not None:
            wrapper_timestamp = self.log_append_time
        else:
            wrapper_timestamp = max(timestamp for _, timestamp, _, _ in self._messages)
        return self._message(last_offset, wrapper_timestamp, flags | self.compression, None, wrapped)

    def _message(self, offset: int, timestamp: int, attributes: int, key: Buffer | None,
                 value: Buffer | None) -> bytes:
        body = bytearray((self.magic, attributes))
        if self.magic == 1:
            body += _INT64.pack(timestamp)
        for data in (key, value):
            if data is None:
                body += _INT32.pack(-1)
            else:
                body += _INT32.pack(len(data))
                body += data
        return _LEGACY_PREFIX.pack(offset, len(body) + 4, zlib.crc32(body)) + body


def transaction_marker_batch(commit: bool, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                             base_offset: int = 0, timestamp: int | None = None,
                             partition_leader_epoch: int = -1) -> bytes:
    """A control batch holding one COMMIT or ABORT marker, as a transaction coordinator writes it."""
    builder = RecordBatchBuilder(base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
                                 transactional=True, control=True, partition_leader_epoch=partition_leader_epoch)
    builder.append(end_txn_marker_value(coordinator_epoch),
                   key=control_key(ControlType.COMMIT if commit else ControlType.ABORT), timestamp=timestamp)
    return builder.build()

"""Checking a Produce request's records for one partition before anything is appended.

The checks, their order and their error codes follow Kafka 4.0 (apache/kafka 1eb76443):

1. ``ProduceRequest.validateRecords`` (v3+), iterating with ``ByteBufferLogInputStream.nextBatchSize``:
   an entry size below 14 or a magic outside 0..2 -> CORRUPT_MESSAGE (2); no complete batch ->
   INVALID_RECORD (87); magic != 2 -> INVALID_RECORD (87) ("only allowed to contain record batches with
   magic version 2"; Kafka 4 refuses magic 0/1 this way, not with UNSUPPORTED_FOR_MESSAGE_FORMAT, which
   is left for idempotent/transactional batches converted to an older format); a second complete batch ->
   INVALID_RECORD (87) ("exactly one record batch per partition"). Trailing bytes shorter than a batch
   are dropped, as ``UnifiedLog.trimInvalidBytes`` drops them.
2. ``UnifiedLog.analyzeAndValidateRecords``: base offset != 0 -> INVALID_RECORD; batch size >
   max.message.bytes -> MESSAGE_TOO_LARGE (10); bad CRC-32C (or a batch shorter than its header) ->
   CORRUPT_MESSAGE (2); an unknown codec (5-7) -> UNKNOWN_SERVER_ERROR (-1), as ``CompressionType.forId``
   throws a non-API exception there.
3. ``LogValidator.validateBatch``: last offset delta + 1 <= 0, records count <= 0, or the two disagreeing
   -> INVALID_RECORD; a control batch from a client -> INVALID_RECORD; a producer id with a negative
   base sequence -> INVALID_RECORD.
4. ``LogValidator.validateRecord`` / ``validateTimestamp`` (when ``LogConfig.validate_records``): records
   that do not decode -> INVALID_RECORD; timestamps outside message.timestamp.before/after.max.ms, or a
   batch claiming LogAppendTime on a LogAppendTime topic (or with no timestamp) -> INVALID_TIMESTAMP (32),
   with per-record errors. The batch MaxTimestamp is recomputed from the records (CreateTime). The
   records are read once in C (``records.batch.check_records``), keeping nothing per record, as
   LogValidator keeps nothing either; only a batch that check does not clear is read into columns,
   which name the records at fault.
5. ``LogValidator``'s compressed path: a topic whose compression.type names a codec other than the
   batch's gets the batch's records recompressed in it (MESSAGE_TOO_LARGE if that outgrows
   max.message.bytes); ``producer`` keeps the batch as sent.

Transactional batches are checked at the append (``PartitionLog.append_batch``): one goes in only as
part of a transaction open in the partition or verified with the coordinator.

Decompression draws on a DecompressionBudget, one per Produce request (``produce.max.decompressed.bytes``,
kafkawire's own): each batch may expand to what is left of it (and at most the records layer's 64 MiB),
and is charged what it expanded to whether it is then accepted or refused, so that a request of
compression bombs is refused, with INVALID_RECORD, after bounded work.
"""
from __future__ import annotations

import struct
from array import array

from ...error_codes import ErrorCode
from ...errors import RecordsError
from ...records.batch import CODEC_MASK, CONTROL_FLAG, TIMESTAMP_TYPE_FLAG, RecordBatch, check_records
from ...records.checksums import crc32c
from ...records.columns import RecordColumns
from ...records.compression import DEFAULT_DECOMPRESSED_LIMIT, compress, decompress
from ...records.layouts import ATTRIBUTES_OFFSET, BATCH_HEADER_SIZE, CRC_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET
from .config import LogConfig
from .errors import LogAppendError
from .segment import HEADER

__all__ = ["DecompressionBudget", "ValidatedBatch", "validate_produce_records"]

_INT16, _INT32, _UINT32 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">I")
_MIN_ENTRY_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0
_INT32_MAX = 0x7FFFFFFF


class ValidatedBatch:
    """The one batch of a produce, checked: its bytes and the header fields the log needs."""

    __slots__ = ("view", "size", "attributes", "last_offset_delta", "max_timestamp", "producer_id", "producer_epoch",
                 "base_sequence", "count", "new_max_timestamp", "new_attributes")
    view: memoryview
    size: int
    attributes: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int
    new_max_timestamp: int
    new_attributes: int

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & _INT32_MAX


class DecompressionBudget:
    """The bytes a request's compressed batches may still expand to, charged as each one is expanded."""

    __slots__ = ("total", "left")

    def __init__(self, total: int):
        self.total = total
        self.left = total

    def batch_limit(self, partition: str) -> int:
        """What the next batch may expand to; INVALID_RECORD once the request has used it all up."""
        if self.left <= 0:
            raise LogAppendError(ErrorCode.INVALID_RECORD,
                                 f"The request's batches expand to more than {self.total} bytes "
                                 f"(produce.max.decompressed.bytes); the batch for {partition} was not read")
        return min(DEFAULT_DECOMPRESSED_LIMIT, self.left)

    def charge(self, size: int) -> None:
        self.left -= size


def _entry_size(view: memoryview, position: int) -> int | None:
    """``ByteBufferLogInputStream.nextBatchSize`` + ``nextBatch``: the size of the entry at ``position``,
    None when the bytes left hold no complete entry; CORRUPT_MESSAGE for an impossible size or magic."""
    remaining = len(view) - position
    if remaining < LOG_OVERHEAD:
        return None
    size = int.from_bytes(view[position + 8:position + 12], "big", signed=True)
    if size < _MIN_ENTRY_SIZE:
        raise LogAppendError(ErrorCode.CORRUPT_MESSAGE,
                             f"Record size {size} is less than the minimum record overhead ({_MIN_ENTRY_SIZE})")
    if remaining < MAGIC_OFFSET + 1:
        return None
    magic = view[position + MAGIC_OFFSET]
    if magic > 2:  # a signed byte: 128..255 are negative
        raise LogAppendError(ErrorCode.CORRUPT_MESSAGE,
                             f"Invalid magic found in record: {magic - 256 if magic > 127 else magic}")
    if remaining < size + LOG_OVERHEAD:
        return None
    return size + LOG_OVERHEAD


def validate_produce_records(records, config: LogConfig, now_ms: int, partition: str = "",
                             budget: DecompressionBudget | None = None) -> ValidatedBatch:
    """Check one partition's records as Kafka does (see the module docstring); a compressed batch's
    expansion is charged to ``budget`` (a batch's own by default). Raises LogAppendError."""
    if budget is None:
        budget = DecompressionBudget(DEFAULT_DECOMPRESSED_LIMIT)
    view = records if isinstance(records, memoryview) else memoryview(records)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    # 1. ProduceRequest.validateRecords
    size = _entry_size(view, 0)
    if size is None:
        raise LogAppendError(ErrorCode.INVALID_RECORD,
                             "Produce requests must have at least one record batch per partition")
    if view[MAGIC_OFFSET] != 2:
        raise LogAppendError(ErrorCode.INVALID_RECORD,
                             "Produce requests are only allowed to contain record batches with magic version 2")
    if _entry_size(view, size) is not None:
        raise LogAppendError(ErrorCode.INVALID_RECORD,
                             "Produce requests are only allowed to contain exactly one record batch per partition")
    view = view[:size]  # trimInvalidBytes: a trailing partial entry is dropped

    # 2. UnifiedLog.analyzeAndValidateRecords
    base_offset = int.from_bytes(view[0:8], "big", signed=True)
    if base_offset != 0:
        raise LogAppendError(ErrorCode.INVALID_RECORD, f"The baseOffset of the record batch in the append to "
                                                       f"{partition} should be 0, but it is {base_offset}")
    if size > config.max_message_bytes:
        raise LogAppendError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"The record batch size in the append to {partition} is {size} bytes which exceeds "
                             f"the maximum configured value of {config.max_message_bytes}.")
    if size < BATCH_HEADER_SIZE:
        raise LogAppendError(ErrorCode.CORRUPT_MESSAGE,
                             f"Record batch is corrupt (the size {size} is smaller than the minimum allowed "
                             f"overhead {BATCH_HEADER_SIZE})")
    (_, _, _, _, crc, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
     base_sequence, count) = HEADER.unpack_from(view)
    if crc32c(view[21:]) != crc:
        raise LogAppendError(ErrorCode.CORRUPT_MESSAGE,
                             f"Record is corrupt (stored crc = {crc}) in topic partition {partition}.")
    codec = attributes & CODEC_MASK
    if codec > 4:
        raise LogAppendError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {codec}")

    # 3. LogValidator.validateBatch (origin CLIENT)
    count_from_offsets = last_offset_delta + 1
    if count_from_offsets <= 0:
        raise LogAppendError(ErrorCode.INVALID_RECORD,
                             f"Batch has an invalid offset range: [0, {last_offset_delta}] in topic partition "
                             f"{partition}")
    if count <= 0:
        raise LogAppendError(ErrorCode.INVALID_RECORD,
                             f"Invalid reported count for record batch: {count} in topic partition {partition}")
    if count_from_offsets != count:
        raise LogAppendError(ErrorCode.INVALID_RECORD,
                             f"Inconsistent batch offset range [0, {last_offset_delta}] and count of records "
                             f"{count} in topic partition {partition}")
    if attributes & CONTROL_FLAG:
        raise LogAppendError(ErrorCode.INVALID_RECORD,
                             f"Clients are not allowed to write control records in topic partition {partition}")
    if producer_id >= 0 and base_sequence < 0:
        raise LogAppendError(ErrorCode.INVALID_RECORD,
                             f"Invalid sequence number {base_sequence} in record batch with producerId "
                             f"{producer_id} in topic partition {partition}")

    # 4. records and timestamps
    log_append_time = config.log_append_time
    batch_says_log_append_time = bool(attributes & TIMESTAMP_TYPE_FLAG)
    new_max_timestamp = max_timestamp
    records_data: bytes | memoryview | None = None  # the records' bytes, once decompressed
    if config.validate_records:
        records_data = _decompress(view, codec, budget, partition)
        checked = None if batch_says_log_append_time else check_records(records_data, count, base_timestamp)
        if checked is not None and _plainly_valid(checked, config, now_ms, codec):
            new_max_timestamp = checked[1]
        else:  # malformed, refused, or no C reader: the records in columns, which say what is wrong
            columns = _read_columns(view, codec, partition, records_data)
            new_max_timestamp = _validate_records(columns, config, now_ms, count, codec,
                                                  batch_says_log_append_time, partition)
    elif batch_says_log_append_time and (log_append_time or max_timestamp == -1):
        raise LogAppendError(ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid "
                                                          "timestamp", [(0, "Producer should not set timestamp "
                                                                            "type to LogAppendTime.")])
    if log_append_time:
        new_max_timestamp = now_ms

    batch = ValidatedBatch()
    batch.view = view
    batch.size = size
    batch.attributes = attributes
    batch.last_offset_delta = last_offset_delta
    batch.max_timestamp = max_timestamp
    batch.producer_id = producer_id
    batch.producer_epoch = producer_epoch
    batch.base_sequence = base_sequence
    batch.count = count
    batch.new_max_timestamp = new_max_timestamp
    batch.new_attributes = (attributes | TIMESTAMP_TYPE_FLAG) if log_append_time else (attributes & ~TIMESTAMP_TYPE_FLAG)
    target = config.target_codec
    if target is not None and target != codec:
        if records_data is None:
            records_data = _decompress(view, codec, budget, partition)
        _recompress(batch, records_data, target, config, partition)
    return batch


def _read_columns(view: memoryview, codec: int, partition: str, records_data: bytes | memoryview) -> RecordColumns:
    """The batch's records (``records_data``, decompressed) decoded into columns, as ``LogValidator``
    iterates them; INVALID_RECORD if they do not decode."""
    batch = RecordBatch(view)
    try:
        if codec:  # already expanded (and charged): read the records from those bytes
            return batch.columns(records_data if isinstance(records_data, bytes) else bytes(records_data))
        return batch.columns()
    except RecordsError as error:
        raise _invalid_structure(error) from None


def _plainly_valid(checked: tuple[int, int, bool, bool], config: LogConfig, now_ms: int, codec: int) -> bool:
    """Whether ``check_records``' summary clears the records outright (CreateTime, timestamps within
    bounds, no null key on a compacted topic, a compressed batch's offsets in order); anything else is
    looked at record by record (``_validate_records``)."""
    lowest, highest, null_keys, in_order = checked
    if (config.compact and null_keys) or (codec and not in_order):
        return False
    return config.log_append_time or (lowest >= 0 and now_ms - lowest <= config.message_timestamp_before_max_ms
                                      and highest - now_ms <= config.message_timestamp_after_max_ms)


def _decompress(view: memoryview, codec: int, budget: DecompressionBudget, partition: str) -> bytes | memoryview:
    """The batch's records' bytes: a view of them when uncompressed, else expanded and charged to ``budget``."""
    body = view[BATCH_HEADER_SIZE:]
    if not codec:
        return body
    limit = budget.batch_limit(partition)
    try:
        data = decompress(codec, body, limit)
    except RecordsError as error:
        budget.charge(limit)
        raise _invalid_structure(error) from None
    budget.charge(len(data))
    return data


def _invalid_structure(error: Exception) -> LogAppendError:
    return LogAppendError(ErrorCode.INVALID_RECORD, f"Found invalid record structure: {error}")


def _recompress(batch: ValidatedBatch, records: bytes | memoryview, target: int, config: LogConfig,
                partition: str) -> None:
    """The topic's compression.type differs from the producer's: the batch's records (``records``,
    decompressed), unchanged, in the topic's codec (``LogValidator.validateMessagesAndAssignOffsetsCompressed``
    rebuilds the batch; its header, producer fields and offsets stay). MESSAGE_TOO_LARGE if it outgrows
    max.message.bytes."""
    view = batch.view
    try:
        packed = compress(target, records, config.compression_level) if target else bytes(records)
    except (RecordsError, ValueError) as error:
        raise _invalid_structure(error) from None
    data = bytearray(view[:BATCH_HEADER_SIZE])
    data += packed
    size = len(data)
    if size > config.max_message_bytes:
        raise LogAppendError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"Message batch size is {size} bytes in append to partition {partition} which exceeds "
                             f"the maximum configured size of {config.max_message_bytes}.")
    _INT32.pack_into(data, 8, size - LOG_OVERHEAD)  # batchLength
    batch.attributes = (batch.attributes & ~CODEC_MASK) | target
    batch.new_attributes = (batch.new_attributes & ~CODEC_MASK) | target
    _INT16.pack_into(data, ATTRIBUTES_OFFSET, batch.attributes)
    _UINT32.pack_into(data, CRC_OFFSET, crc32c(memoryview(data)[ATTRIBUTES_OFFSET:]))
    batch.view = memoryview(bytes(data))
    batch.size = size


def _validate_records(columns: RecordColumns, config: LogConfig, now_ms: int, count: int, codec: int,
                      batch_says_log_append_time: bool, partition: str = "") -> int:
    """Check the records as LogValidator does; return the batch's true max timestamp."""
    if config.compact and -1 in columns.key_lengths:  # LogValidator.validateKey
        raise LogAppendError(ErrorCode.INVALID_RECORD, "One or more records have been rejected",
                             [(index, f"Compacted topic cannot accept message without key in topic partition "
                                      f"{partition}.") for index, length in enumerate(columns.key_lengths)
                              if length < 0])
    offsets, timestamps = columns.offsets, columns.timestamps
    if codec and offsets != array("q", range(count)):  # the base offset is 0: offsets are the deltas
        # LogValidator would rebuild (recompress) a compressed batch whose inner offsets are not 0..n-1
        # (old clients' bug); this broker refuses it instead.
        raise LogAppendError(ErrorCode.INVALID_RECORD, f"Inner record offsets must be 0..{count - 1}")
    log_append_time = config.log_append_time
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    lowest, highest = min(timestamps), max(timestamps)
    if not batch_says_log_append_time and (
            log_append_time or (lowest >= 0 and now_ms - lowest <= before and highest - now_ms <= after)):
        return highest  # the common case, checked without a loop in Python
    errors = []
    for index, (offset, timestamp) in enumerate(zip(offsets, timestamps)):
        if not log_append_time and timestamp != -1:
            if now_ms - timestamp > before or timestamp - now_ms > after:
                errors.append((index, f"Timestamp {timestamp} of message with offset {offset} is out of range. "
                                      f"The timestamp should be within [{now_ms - before}, {now_ms + after}]"))
        elif batch_says_log_append_time:
            errors.append((index, "Invalid timestamp type in message. Producer should not set timestamp type to "
                                  "LogAppendTime."))
    if errors:
        raise LogAppendError(ErrorCode.INVALID_TIMESTAMP,
                             "One or more records have been rejected due to invalid timestamp", errors)
    return max(highest, -1)

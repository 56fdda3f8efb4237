"""One partition's batch of records on its way to the broker.

A ProducerBatch holds a pool Buffer (its accounted capacity, ``memory``), a RecordBatchBuilder
(the bytes, written by its RecordAppender) and the BatchResult its records' futures read (``delivery``).
Its size is estimated the way upstream's MemoryRecordsBuilder estimates it: the 61-byte batch header
plus the uncompressed records, scaled when compression is on by the topic's estimated compression
ratio and a 5% safety margin. Without compression the estimate is exact. With compression the
builder keeps the uncompressed bytes until the batch is built at drain time, so the Python process
can briefly hold up to 1/ratio more than the pool accounts for (upstream compresses as it writes).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from kafkawire.records import Codec, RecordBatchBuilder
from kafkawire.records.batch import NO_PRODUCER_ID, NO_SEQUENCE
from kafkawire.records.layouts import BATCH_HEADER_SIZE

from ..topic_partition import TopicPartition
from .delivery import BatchResult, LoopWaiter, RecordFuture
from .memory import Buffer

__all__ = ["ProducerBatch", "CompressionRatioEstimator", "record_size_upper_bound", "size_factor",
           "BATCH_OVERHEAD"]

BATCH_OVERHEAD = BATCH_HEADER_SIZE
# Per-record framing at its widest: length (varint 5), attributes (1), timestamp delta (varlong 10),
# offset delta (varint 5), key length (5), value length (5), header count (5).
_RECORD_FRAMING_MAX = 5 + 1 + 10 + 5 + 5 + 5 + 5
_HEADER_FRAMING_MAX = 5 + 5
# Upstream's COMPRESSION_RATE_ESTIMATION_FACTOR: estimates run 5% over the observed ratio.
_ESTIMATION_MARGIN = 1.05


class CompressionRatioEstimator:
    """Per topic, the expected compressed/uncompressed ratio: starts at 1, rises at once to a worse
    observation (a batch must not outgrow its buffer), falls slowly after better ones."""

    RISE_STEP = 0.05
    FALL_STEP = 0.005

    def __init__(self):
        self._ratios: dict[str, float] = {}

    def estimate(self, topic: str) -> float:
        return self._ratios.get(topic, 1.0)

    def observe(self, topic: str, observed: float) -> None:
        current = self.estimate(topic)
        if observed > current:
            self._ratios[topic] = max(current + self.RISE_STEP, observed)
        elif observed < current:
            self._ratios[topic] = max(current - self.FALL_STEP, observed)


def size_factor(codec: Codec, compression_ratio: float) -> float:
    """What one uncompressed byte is expected to cost in the finished batch."""
    return 1.0 if codec == Codec.NONE else compression_ratio * _ESTIMATION_MARGIN


def record_size_upper_bound(key: bytes | None, value: bytes | None, headers: Sequence) -> int:
    """The most bytes one record can take inside a v2 batch (before compression)."""
    size = _RECORD_FRAMING_MAX + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    for header_key, header_value in headers:
        size += _HEADER_FRAMING_MAX + len(header_key.encode("utf-8"))
        if header_value is not None:
            size += len(header_value)
    return size


class ProducerBatch:
    """Records for one partition, open for appends until closed (by the accumulator, or at drain).

    ``records_limit`` is how many uncompressed record bytes the buffer's capacity holds by the size
    estimate, so an append can check its room in the appender's own call (``try_append``);
    ``full_at`` is the records size at which the batch reaches ``batch_size`` (ready to send)."""

    def __init__(self, tp: TopicPartition, buffer: Buffer, created_ms: float, *, batch_size: int,
                 codec: Codec = Codec.NONE, compression_level: int | None = None, compression_ratio: float = 1.0,
                 waitable: int | None = None,
                 loop_waiter: LoopWaiter | None = None):
        self.tp = tp
        self.created_ms = created_ms
        self.last_attempt_ms = created_ms
        self.drained_ms: float | None = None
        self.attempts = 0  # sends that failed and were retried
        self.in_flight = False  # drained and awaiting the broker's answer
        self.closed = False  # no more appends
        self.codec = Codec(codec)
        self.size_factor = size_factor(self.codec, compression_ratio)
        self.builder = RecordBatchBuilder(compression=self.codec, compression_level=compression_level)
        self.appender = self.builder.appender
        self.result = BatchResult(tp.topic, tp.partition, waitable, loop_waiter)
        self.full_at = _records_at_least(batch_size, self.size_factor)
        self.full_signalled = False  # try_append has reported the batch full once
        self.records_limit = 0
        self.buffer = buffer
        self._built: bytes | None = None
        self._built_for: tuple[int, int, int] | None = None
        self.compressed_ratio: float | None = None  # observed at build, for the estimator
        self.done = False

    # ---- appends ---------------------------------------------------------------------------------
    @property
    def buffer(self) -> Buffer | None:
        return self._buffer

    @buffer.setter
    def buffer(self, buffer: Buffer | None) -> None:
        self._buffer = buffer
        self.records_limit = _records_within(buffer.capacity, self.size_factor) if buffer is not None else 0

    @property
    def capacity(self) -> int:
        return self._buffer.capacity if self._buffer is not None else 0

    @property
    def record_count(self) -> int:
        return self.appender.count

    def estimated_size(self, extra_record_bytes: int = 0) -> int:
        """Estimated bytes of the finished batch, with ``extra_record_bytes`` more uncompressed data."""
        return _estimate(self.appender.size + extra_record_bytes, self.size_factor)

    def append(self, key: bytes | None, value: bytes | None, headers: Sequence, timestamp_ms: int) -> tuple[
            RecordFuture, int]:
        """Add a record unconditionally (room is the accumulator's business); returns its future and
        the uncompressed bytes it added."""
        if self.closed:
            raise RuntimeError(f"batch for {self.tp} is closed for appends")
        appender = self.appender
        size = appender.append(key, value, headers if isinstance(headers, (tuple, list)) else tuple(headers),
                               timestamp_ms)
        return RecordFuture(self.result, appender.count - 1, timestamp_ms, len(key) if key is not None else -1,
                            len(value) if value is not None else -1), size

    def try_append(self, key, value, headers, timestamp_ms: int) -> tuple[RecordFuture, int] | None:
        """``append`` if the record fits the buffer (by the size estimate) and the batch is open;
        None otherwise, or for input ``append`` would refuse (it raises, naming the problem)."""
        if self.closed:
            return None
        appender = self.appender
        try:
            size = appender.append(key, value, headers, timestamp_ms, None, self.records_limit)
        except (TypeError, ValueError, OverflowError):
            return None
        if size < 0:
            return None
        return RecordFuture(self.result, appender.count - 1, timestamp_ms, len(key) if key is not None else -1,
                            len(value) if value is not None else -1), size

    def close(self) -> None:
        self.closed = True

    def is_full(self, batch_size: int) -> bool:
        """Ready to send on size alone: at ``batch.size``, or closed for appends."""
        return self.closed or self.estimated_size() >= batch_size

    # ---- sending ---------------------------------------------------------------------------------
    @property
    def producer_id(self) -> int:
        return self.builder.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.builder.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.builder.base_sequence

    @property
    def has_sequence(self) -> bool:
        return self.builder.base_sequence != NO_SEQUENCE

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        self.builder.producer_id = producer_id
        self.builder.producer_epoch = producer_epoch
        self.builder.base_sequence = base_sequence

    def clear_producer_state(self) -> None:
        self.set_producer_state(NO_PRODUCER_ID, -1, NO_SEQUENCE)

    def build(self) -> bytes:
        """The batch's bytes (closing it); rebuilt only if the producer state changed since."""
        self.closed = True
        state = (self.builder.producer_id, self.builder.producer_epoch, self.builder.base_sequence)
        if self._built is None or self._built_for != state:
            self._built = self.builder.build()
            self._built_for = state
            uncompressed = self.appender.size
            if self.codec != Codec.NONE and uncompressed:
                self.compressed_ratio = (len(self._built) - BATCH_OVERHEAD) / uncompressed
        return self._built

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the built batch (the estimate until it is built)."""
        return len(self._built) if self._built is not None else self.estimated_size()

    def complete(self, base_offset: int, log_append_time_ms: int = -1) -> None:
        """Resolve every record's future from the broker's answer (base_offset -1 with acks=0)."""
        self.done = True
        self.result.finish(base_offset, log_append_time_ms, None)

    def fail(self, error: BaseException) -> None:
        self.done = True
        self.result.finish(-1, -1, error)

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.tp.topic}-{self.tp.partition}, records={self.record_count}, "
                f"estimated={self.estimated_size()}, capacity={self.capacity}, attempts={self.attempts})")


def _estimate(records_size: int, factor: float) -> int:
    if factor == 1.0:
        return BATCH_OVERHEAD + records_size
    return BATCH_OVERHEAD + math.ceil(records_size * factor)


def _records_within(capacity: int, factor: float) -> int:
    """The most uncompressed record bytes whose estimated batch fits ``capacity``."""
    room = capacity - BATCH_OVERHEAD
    if room <= 0:
        return 0
    records = room if factor == 1.0 else math.floor(room / factor)
    while records > 0 and _estimate(records, factor) > capacity:  # float rounding
        records -= 1
    while _estimate(records + 1, factor) <= capacity:
        records += 1
    return records


def _records_at_least(batch_size: int, factor: float) -> int:
    """The fewest uncompressed record bytes whose estimated batch reaches ``batch_size``."""
    return _records_within(batch_size - 1, factor) + 1 if batch_size > BATCH_OVERHEAD else 0

"""One partition's batch of records on its way to the broker, and the futures its records resolve.

A ProducerBatch holds a pool Buffer (its accounted capacity) and a RecordBatchBuilder (the bytes).
Its size is estimated the way upstream's MemoryRecordsBuilder estimates it: the 61-byte batch header
plus the uncompressed records, scaled when compression is on by the topic's estimated compression
ratio and a 5% safety margin. Without compression the estimate is exact. With compression the
builder keeps the uncompressed bytes until the batch is built at drain time, so the Python process
can briefly hold up to 1/ratio more than the pool accounts for (upstream compresses as it writes).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from kafkawire.records import Codec, RecordBatchBuilder
from kafkawire.records.batch import NO_PRODUCER_ID, NO_SEQUENCE
from kafkawire.records.layouts import BATCH_HEADER_SIZE

from .buffer_pool import Buffer
from .common import TopicPartition

__all__ = ["TopicPartition", "RecordMetadata", "RecordFuture", "ProducerBatch", "DeliveryTimeout",
           "CompressionRatioEstimator", "record_size_upper_bound", "size_factor", "BATCH_OVERHEAD"]

BATCH_OVERHEAD = BATCH_HEADER_SIZE
# Per-record framing at its widest: length (varint 5), attributes (1), timestamp delta (varlong 10),
# offset delta (varint 5), key length (5), value length (5), header count (5).
_RECORD_FRAMING_MAX = 5 + 1 + 10 + 5 + 5 + 5 + 5
_HEADER_FRAMING_MAX = 5 + 5
# Upstream's COMPRESSION_RATE_ESTIMATION_FACTOR: estimates run 5% over the observed ratio.
_ESTIMATION_MARGIN = 1.05


class RecordMetadata(NamedTuple):
    """Where a record landed: offset -1 when unknown (acks=0); timestamp is the log-append time when
    the topic uses it, else the record's create time."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class DeliveryTimeout(TimeoutError):
    """A batch not acknowledged within ``delivery.timeout.ms`` of its creation."""


class RecordFuture:
    """The outcome of one record's send: RecordMetadata or an error. Never blocks: ``result()`` on a
    pending future is a RuntimeError (await it through the asyncio layer instead)."""

    __slots__ = ("_metadata", "_error", "_callbacks")

    def __init__(self):
        self._metadata: RecordMetadata | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[RecordFuture], None]] = []

    def done(self) -> bool:
        return self._metadata is not None or self._error is not None

    def result(self) -> RecordMetadata:
        if self._error is not None:
            raise self._error
        if self._metadata is None:
            raise RuntimeError("the record has not been acknowledged yet")
        return self._metadata

    def exception(self) -> BaseException | None:
        return self._error

    def add_done_callback(self, callback: Callable[[RecordFuture], None]) -> None:
        if self.done():
            callback(self)
        else:
            self._callbacks.append(callback)

    def _finish(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        if self.done():
            raise RuntimeError("a record future is resolved only once")
        self._metadata, self._error = metadata, error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)


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
    """Records for one partition, open for appends until closed (by the accumulator, or at drain)."""

    def __init__(self, tp: TopicPartition, buffer: Buffer, created_ms: float, *, codec: Codec = Codec.NONE,
                 compression_level: int | None = None, compression_ratio: float = 1.0):
        self.tp = tp
        self.buffer: Buffer | None = buffer
        self.created_ms = created_ms
        self.last_attempt_ms = created_ms
        self.drained_ms: float | None = None
        self.attempts = 0  # sends that failed and were retried
        self.in_flight = False  # drained and awaiting the broker's answer
        self.closed = False  # no more appends
        self.codec = Codec(codec)
        self.size_factor = size_factor(self.codec, compression_ratio)
        self.builder = RecordBatchBuilder(compression=self.codec, compression_level=compression_level)
        self._records: list[tuple[RecordFuture, int, int, int]] = []  # future, timestamp, key/value sizes
        self._built: bytes | None = None
        self._built_for: tuple[int, int, int] | None = None
        self.compressed_ratio: float | None = None  # observed at build, for the estimator
        self.done = False

    # ---- appends ---------------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return self.buffer.capacity if self.buffer is not None else 0

    @property
    def record_count(self) -> int:
        return len(self._records)

    def estimated_size(self, extra_record_bytes: int = 0) -> int:
        """Estimated bytes of the finished batch, with ``extra_record_bytes`` more uncompressed data."""
        records = self.builder.records_size + extra_record_bytes
        if self.size_factor == 1.0:
            return BATCH_OVERHEAD + records
        return BATCH_OVERHEAD + math.ceil(records * self.size_factor)

    def append(self, key: bytes | None, value: bytes | None, headers: Sequence, timestamp_ms: int) -> tuple[
            RecordFuture, int]:
        """Add a record unconditionally (room is the accumulator's business); returns its future and
        the uncompressed bytes it added."""
        if self.closed:
            raise RuntimeError(f"batch for {self.tp} is closed for appends")
        before = self.builder.records_size
        self.builder.append(value, key=key, headers=headers, timestamp=timestamp_ms)
        future = RecordFuture()
        self._records.append((future, timestamp_ms, len(key) if key is not None else -1,
                              len(value) if value is not None else -1))
        return future, self.builder.records_size - before

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
            uncompressed = self.builder.records_size
            if self.codec != Codec.NONE and uncompressed:
                self.compressed_ratio = (len(self._built) - BATCH_OVERHEAD) / uncompressed
        return self._built

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the built batch (the estimate until it is built)."""
        return len(self._built) if self._built is not None else self.estimated_size()

    def complete(self, base_offset: int, log_append_time_ms: int = -1) -> None:
        """Resolve every record's future from the broker's answer (base_offset -1 with acks=0)."""
        topic, partition = self.tp
        for index, (future, timestamp, key_size, value_size) in enumerate(self._records):
            offset = base_offset + index if base_offset >= 0 else -1
            when = log_append_time_ms if log_append_time_ms >= 0 else timestamp
            future._finish(RecordMetadata(topic, partition, offset, when, key_size, value_size), None)
        self.done = True

    def fail(self, error: BaseException) -> None:
        for future, *_ in self._records:
            future._finish(None, error)
        self.done = True

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.tp.topic}-{self.tp.partition}, records={self.record_count}, "
                f"estimated={self.estimated_size()}, capacity={self.capacity}, attempts={self.attempts})")

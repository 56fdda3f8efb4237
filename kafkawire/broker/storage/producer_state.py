"""Idempotent producers' state per partition, as Kafka's ``ProducerStateManager`` keeps it.

Per producer id: the epoch and the metadata of its last five batches (first/last sequence and offset,
timestamp). A produced batch is checked against it exactly as ``UnifiedLog.analyzeAndValidateProducerState``
and ``ProducerAppendInfo`` (origin CLIENT) do:

* a batch with the same epoch and the same sequence range as one of the last five is a duplicate: the
  original offsets are returned and nothing is appended;
* an epoch below the current one: INVALID_PRODUCER_EPOCH (47) (``checkProducerEpoch``; since 2.7 the
  broker answers this rather than PRODUCER_FENCED);
* a new epoch must start at sequence 0, unless the producer is unknown: OUT_OF_ORDER_SEQUENCE_NUMBER (45);
* in the same epoch the first sequence must follow the last one (wrapping at int32):
  OUT_OF_ORDER_SEQUENCE_NUMBER (45); an unknown producer (no entry, epoch -1) may start anywhere.

Transactions, as ``ProducerAppendInfo`` tracks them: a producer's first transactional batch opens a
transaction in the partition at its offset (a plain batch while one is open: INVALID_TXN_STATE); its
COMMIT or ABORT marker closes it (a marker from an older coordinator epoch:
TRANSACTION_COORDINATOR_FENCED). The first offset of the oldest open transaction is the partition's
first unstable offset, which bounds the last stable offset.

Snapshots use Kafka's ``<offset>.snapshot`` file format (``ProducerSnapshot`` v1: int16 version, uint32
CRC-32C of what follows, then the entries), so a restart replays only the batches after the latest one.
"""
from __future__ import annotations

from collections import deque
from pathlib import Path
from struct import Struct, error as StructError
from typing import NamedTuple

from ...error_codes import ErrorCode
from ...records.checksums import crc32c
from .errors import LogAppendError

__all__ = ["BatchMetadata", "ProducerStateEntry", "ProducerStateManager", "NUM_BATCHES_TO_RETAIN",
           "CompletedTxn", "write_snapshot", "read_snapshot", "CorruptSnapshot"]

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_INT32_MAX = 0x7FFFFFFF

_CONTROL_FLAG = 0x20
_TRANSACTIONAL_FLAG = 0x10
_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, offset delta, timestamp, coord epoch, txn first
_ENTRIES_OFFSET = 6  # the CRC covers everything after version and crc


class CorruptSnapshot(Exception):
    pass


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence``: sequences wrap from int32 max to 0."""
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class BatchMetadata:
    __slots__ = ("last_seq", "last_offset", "offset_delta", "timestamp")

    def __init__(self, last_seq: int, last_offset: int, offset_delta: int, timestamp: int):
        self.last_seq = last_seq
        self.last_offset = last_offset
        self.offset_delta = offset_delta
        self.timestamp = timestamp

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta

    def __repr__(self) -> str:
        return (f"BatchMetadata(first_seq={self.first_seq}, last_seq={self.last_seq}, "
                f"first_offset={self.first_offset}, last_offset={self.last_offset}, timestamp={self.timestamp})")


class CompletedTxn(NamedTuple):
    """A transaction a marker closed in this partition: [first_offset, last_offset] (the marker's)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class ProducerStateEntry:
    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp", "batches",
                 "current_txn_first_offset")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH, coordinator_epoch: int = -1,
                 last_timestamp: int = -1, current_txn_first_offset: int = -1):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.current_txn_first_offset = current_txn_first_offset  # -1: no transaction open here

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def update_epoch(self, producer_epoch: int) -> None:
        """A new epoch forgets the old one's batches (``maybeUpdateProducerEpoch``)."""
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.update_epoch(producer_epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """``ProducerStateEntry.findDuplicateBatch``."""
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
                f"batches={list(self.batches)})")


class ProducerStateManager:
    """The producers of one partition. ``map_end_offset`` is the log offset the state reflects."""

    def __init__(self, expiration_ms: int):
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: none is open)."""
        return min(self.ongoing.values()) if self.ongoing else None

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        return producer_id in self.ongoing

    def check(self, producer_id: int, producer_epoch: int, first_seq: int, last_seq: int,
              first_offset: int, transactional: bool = False) -> BatchMetadata | None:
        """Validate a client batch; return the duplicate's metadata if it is one, else None (append it).
        Raises LogAppendError with INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_TXN_STATE."""
        entry = self.producers.get(producer_id)
        if entry is not None:
            duplicate = entry.find_duplicate(producer_epoch, first_seq, last_seq)
            if duplicate is not None:
                return duplicate
        current_epoch = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
        if producer_epoch < current_epoch:
            raise LogAppendError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {producer_id} at offset {first_offset} is {producer_epoch}, which is smaller "
                f"than the last seen epoch {current_epoch}")
        if producer_epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise LogAppendError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {producer_id} at offset {first_offset}: "
                    f"{producer_epoch} (request epoch), {first_seq} (seq. number), {current_epoch} "
                    f"(current producer epoch)")
        else:
            current_last_seq = entry.last_seq if entry is not None else NO_SEQUENCE
            if not (current_epoch == NO_PRODUCER_EPOCH or in_sequence(current_last_seq, first_seq)):
                raise LogAppendError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Out of order sequence number for producer {producer_id} at offset {first_offset}: "
                    f"{first_seq} (incoming seq. number), {current_last_seq} (current end sequence number)")
        if not transactional and entry is not None and entry.current_txn_first_offset >= 0:
            raise LogAppendError(ErrorCode.INVALID_TXN_STATE,
                                 f"Expected transactional write from producer {producer_id} at offset {first_offset}")
        return None

    def update(self, producer_id: int, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
               timestamp: int, transactional: bool = False) -> None:
        """Record an appended (or replayed) data batch; a transactional one opens a transaction if none is."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        entry.add_batch(producer_epoch, last_seq, last_offset, offset_delta, timestamp)
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset = last_offset - offset_delta
            self.ongoing[producer_id] = first_offset

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, offset: int) -> None:
        """Validate a COMMIT/ABORT marker about to go at ``offset`` (``appendEndTxnMarker``'s checks)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if entry.coordinator_epoch > coordinator_epoch:
            raise LogAppendError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                                 f"Invalid coordinator epoch for producer {producer_id} at offset {offset}: "
                                 f"{coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)")
        if producer_epoch < entry.producer_epoch:
            raise LogAppendError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                 f"Epoch of producer {producer_id} at offset {offset} is {producer_epoch}, which is "
                                 f"smaller than the last seen epoch {entry.producer_epoch}")

    def complete(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, offset: int, timestamp: int,
                 aborted: bool) -> CompletedTxn | None:
        """Apply a marker appended at ``offset``: the producer's open transaction here (if any) ends."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        entry.update_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.ongoing.pop(producer_id, None)
        return CompletedTxn(producer_id, first, offset, aborted) if first >= 0 else None

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done (``lastStableOffset(completedTxn)``): the start of the oldest
        other open transaction, or the offset after the marker."""
        others = [first for pid, first in self.ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def replay(self, info, marker=None) -> CompletedTxn | None:
        """Apply a batch read back from the log (a BatchInfo), without validation. For a control batch,
        ``marker`` is its (aborted, coordinator epoch) when it is a transaction marker."""
        completed = None
        if info.producer_id >= 0:
            if not info.attributes & _CONTROL_FLAG:
                self.update(info.producer_id, info.producer_epoch, info.last_sequence, info.last_offset,
                            info.last_offset_delta, info.max_timestamp, bool(info.attributes & _TRANSACTIONAL_FLAG))
            elif marker is not None:
                aborted, coordinator_epoch = marker
                completed = self.complete(info.producer_id, info.producer_epoch, coordinator_epoch, info.last_offset,
                                          info.max_timestamp, aborted)
        self.map_end_offset = info.next_offset
        return completed

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        """Idle past producer.id.expiration.ms, and no transaction open (those never expire)."""
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= self.expiration_ms

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` (``removeExpiredProducers``)."""
        expired = [pid for pid, entry in self.producers.items() if self.is_expired(entry, now_ms)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def clear(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.map_end_offset = offset

    def load(self, entries: list[ProducerStateEntry], offset: int, now_ms: int) -> None:
        self.producers = {entry.producer_id: entry for entry in entries if not self.is_expired(entry, now_ms)}
        self.ongoing = {entry.producer_id: entry.current_txn_first_offset for entry in self.producers.values()
                        if entry.current_txn_first_offset >= 0}
        self.map_end_offset = offset


def write_snapshot(path: Path, producers: dict[int, ProducerStateEntry]) -> None:
    """Write ``path`` in Kafka's producer snapshot format (via a temporary file and a rename)."""
    body = bytearray(_SNAPSHOT_HEAD.size + _SNAPSHOT_ENTRY.size * len(producers))
    position = _SNAPSHOT_HEAD.size
    for producer_id, entry in producers.items():
        _SNAPSHOT_ENTRY.pack_into(body, position, producer_id, entry.producer_epoch, entry.last_seq,
                                  entry.last_data_offset, entry.last_offset_delta, entry.last_timestamp,
                                  entry.coordinator_epoch, entry.current_txn_first_offset)
        position += _SNAPSHOT_ENTRY.size
    _SNAPSHOT_HEAD.pack_into(body, 0, _SNAPSHOT_VERSION, 0, len(producers))
    crc = crc32c(memoryview(body)[_ENTRIES_OFFSET:])
    _SNAPSHOT_HEAD.pack_into(body, 0, _SNAPSHOT_VERSION, crc, len(producers))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(body)
    tmp.replace(path)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Read a producer snapshot; CorruptSnapshot if it does not check out (``readSnapshot``)."""
    data = path.read_bytes()
    try:
        version, crc, count = _SNAPSHOT_HEAD.unpack_from(data, 0)
    except StructError:
        raise CorruptSnapshot(f"{path.name}: too short") from None
    if version != _SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"{path.name}: unknown version {version}")
    if crc32c(memoryview(data)[_ENTRIES_OFFSET:]) != crc:
        raise CorruptSnapshot(f"{path.name}: CRC mismatch")
    if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshot(f"{path.name}: {count} entries do not fit {len(data)} bytes")
    entries = []
    for pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch, txn_first in \
            _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEAD.size:]):
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch, timestamp, txn_first)
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        entries.append(entry)
    return entries

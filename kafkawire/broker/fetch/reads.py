"""The fetch path: KIP-74's read loop, parked fetches (MinBytes / MaxWaitMs) and the remote tier.

``read_partitions`` is Kafka's ``readFromLog``: partitions in fetch-context order, each limited by
``min(PartitionMaxBytes, bytes left of MaxBytes)``; the first partition that returns bytes may exceed
both limits by its first whole batch; a later partition whose first batch does not fit returns
nothing. Only the first partition whose offset lies in the remote tier is read remotely; its bytes
count against MaxBytes like any other (upstream's later fix of the overshoot). Local reads are
``FileRecords`` slices of the segments, which the server sends with sendfile(2): the log bytes are
never copied through Python.

``DelayedFetch`` is a fetch that found too little data, parked in the ``purgatory``: appends wake the
fetches watching that partition, which complete once the bytes available reach MinBytes; otherwise a
timer ends them at MaxWaitMs. A parked fetch is a future and a timer handle: idle, it costs nothing.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from ...error_codes import ErrorCode
from .sessions import SessionPartition
from ..storage.errors import OffsetInRemoteTier, OffsetOutOfRange
from ..storage.file_records import FileRecords
from ..storage.local_log import LogOffsetMetadata
from ..storage.log import PartitionLog
from ..storage.log_reads import LogRead
from ..storage.transaction_index import AbortedTxn

__all__ = ["PartitionRead", "read_partitions", "DelayedFetch"]

log = logging.getLogger(__name__)

_NO_ERROR = ErrorCode.NONE
_UNKNOWN_TOPIC = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
_UNKNOWN_TOPIC_ID = ErrorCode.UNKNOWN_TOPIC_ID
_OFFSET_OUT_OF_RANGE = ErrorCode.OFFSET_OUT_OF_RANGE


@dataclass(slots=True)
class PartitionRead:
    """One partition of a fetch: what was asked (``request``) and what the read found."""

    request: SessionPartition
    topic: str | None  # None: the topic (or topic id) is unknown
    partition: int
    log: PartitionLog | None
    error: ErrorCode = ErrorCode.NONE
    records: bytes | FileRecords = b""  # remote reads are bytes
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    remote: bool = False  # read from the remote tier
    denied: bool = False  # the principal may not READ the topic (TOPIC_AUTHORIZATION_FAILED)
    fetch_metadata: LogOffsetMetadata | None = None  # where the read started in the log, for parked fetches
    aborted: list[AbortedTxn] | None = None  # read_committed: the aborted transactions overlapping the records
    refused: ErrorCode = ErrorCode.NONE  # the node does not lead it (or the leader epoch is wrong): not read
    current_leader: tuple[int, int] | None = None  # (leader id, epoch) told with NOT_LEADER_OR_FOLLOWER


async def read_partitions(reads: list[PartitionRead], max_bytes: int, *, hard_max_bytes_limit: bool = False,
                          use_remote_max_bytes: bool = False, remote_wait_s: float = 0.5,
                          read_committed: bool = False) -> int:
    """Read every partition in order under KIP-74's limits; returns the bytes read in all.
    ``read_committed``: up to each log's last stable offset, listing the aborted transactions read."""
    limit = max_bytes
    min_one_message = not hard_max_bytes_limit
    remote_taken = False
    total = 0
    for read in reads:
        read.error, read.remote, read.fetch_metadata, read.aborted = _NO_ERROR, False, None, None
        log = read.log
        if log is None:
            read.records = b""
            read.error = read.refused or (ErrorCode.TOPIC_AUTHORIZATION_FAILED if read.denied
                                          else _UNKNOWN_TOPIC if read.topic is not None else _UNKNOWN_TOPIC_ID)
            continue
        if log.offline:  # its log directory failed
            read.records = b""
            read.error = ErrorCode.KAFKA_STORAGE_ERROR
            continue
        request = read.request
        if request.partition_max_bytes < 0 or (request.remote_partition_max_bytes or 0) < 0:
            read.records = b""
            read.error = ErrorCode.INVALID_REQUEST  # a negative size: Kafka's log read refuses it too
            continue
        adjusted = min(request.partition_max_bytes, limit)
        records: bytes | FileRecords
        try:
            # the watermarks the read returns are snapshots taken before it, as Partition.readRecords takes them
            result = log.read(request.fetch_offset, adjusted, min_one_message,
                              log.last_stable_offset if read_committed else None, as_file=True)
        except OffsetInRemoteTier:
            _snapshot_offsets(read, log)
            if remote_taken:
                records = b""  # only the first remote partition of a request is read remotely
            else:
                remote_taken = True
                records = await _read_remote(read, limit, min_one_message, use_remote_max_bytes, remote_wait_s,
                                             read_committed)
                read.remote = True
        except OffsetOutOfRange:
            _snapshot_offsets(read, log)
            read.records = b""
            read.error = _OFFSET_OUT_OF_RANGE
            continue
        except OSError:  # the log's directory failed (the fetch handler takes it offline)
            read.records = b""
            read.error = ErrorCode.KAFKA_STORAGE_ERROR
            continue
        else:
            read.high_watermark = result.high_watermark
            read.last_stable_offset = result.last_stable_offset
            read.log_start_offset = result.log_start_offset
            read.fetch_metadata = result.fetch_offset_metadata
            records = result.records
            if result.first_entry_incomplete and not hard_max_bytes_limit:
                if isinstance(records, FileRecords):
                    records.close()
                records = b""
            start = result.fetch_offset_metadata  # a local read's: never None
            if read_committed and records and start is not None:
                read.aborted = log.aborted_transactions(request.fetch_offset, start.relative_position, len(records),
                                                        start.segment_base_offset)
        read.records = records
        if records:
            min_one_message = False  # only the first partition with data gets the exemption
            size = len(records)
            limit = max(0, limit - size)
            total += size
    return total


def _snapshot_offsets(read: PartitionRead, log: PartitionLog) -> None:
    read.high_watermark = log.high_watermark
    read.last_stable_offset = log.last_stable_offset
    read.log_start_offset = log.log_start_offset


async def _read_remote(read: PartitionRead, limit: int, min_one_message: bool, use_remote_max_bytes: bool,
                       wait_s: float, read_committed: bool) -> bytes | FileRecords:
    request = read.request
    partition_limit = request.partition_max_bytes
    if use_remote_max_bytes and request.remote_partition_max_bytes is not None:
        partition_limit = request.remote_partition_max_bytes
    max_bytes = min(partition_limit, limit)

    partition_log = read.log
    assert partition_log is not None  # only a partition with a log is read remotely

    def remote_read() -> LogRead:
        result = partition_log.read_remote(request.fetch_offset, max_bytes, min_one_message)
        if read_committed and result.records:
            # a remote read never spans segments, and the tier lies below the last stable offset
            upper = partition_log.offset_after_remote_segment(request.fetch_offset)
            result.aborted = partition_log.aborted_transactions_from_remote(request.fetch_offset, upper)
        return result

    task = asyncio.ensure_future(asyncio.to_thread(remote_read))
    try:
        result = await asyncio.wait_for(asyncio.shield(task), wait_s)
    except TimeoutError:
        log.info("remote read of %s-%d at %d took longer than %.0f ms: empty records", read.topic, read.partition,
                 request.fetch_offset, wait_s * 1000)
        return b""  # the client retries the same offset
    except OffsetOutOfRange:
        read.error = ErrorCode.OFFSET_OUT_OF_RANGE
        return b""
    read.aborted = result.aborted
    return result.records


class DelayedFetch:
    """A fetch waiting for MinBytes: completes when enough bytes are available (Kafka's DelayedFetch
    condition G: the sum over partitions of min(bytes after the fetch position, PartitionMaxBytes)),
    or at once when a partition's log moved under it (condition F: its fetch position is now on an
    older segment, or beyond the end)."""

    def __init__(self, reads: list[PartitionRead], min_bytes: int, read_committed: bool = False):
        self.reads = reads
        self.min_bytes = min_bytes
        self.read_committed = read_committed  # bytes count up to the last stable offset only
        self.done = asyncio.get_running_loop().create_future()

    def try_complete(self) -> bool:
        if self.done.done():
            return True
        available = 0
        for read in self.reads:
            if read.log is None:
                continue
            try:
                bound = read.log.last_stable_offset if self.read_committed else None
                if read.log.must_complete_fetch(read.request.fetch_offset, bound, fetch_metadata=read.fetch_metadata):
                    self.done.set_result(True)
                    return True
                available += read.log.bytes_available(read.request.fetch_offset, read.request.partition_max_bytes,
                                                      bound)
            except (OffsetOutOfRange, OffsetInRemoteTier):
                self.done.set_result(True)  # the partition changed under the fetch: answer now
                return True
            if available >= self.min_bytes:
                self.done.set_result(True)
                return True
        return False

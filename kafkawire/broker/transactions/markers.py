"""Transaction markers: the COMMIT or ABORT control batch that ends a transaction in each partition it
wrote to (Kafka's ``TransactionMarkerChannelManager`` and WriteTxnMarkers, for the partitions of this
broker).

A partition of ``__consumer_offsets`` in a transaction stands for the offsets committed with
TxnOffsetCommit by groups whose offsets live there: the marker makes them visible (or drops them).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from ...error_codes import ErrorCode
from ..groups.offsets_topic import OFFSETS_TOPIC
from ..storage.errors import LogAppendError

__all__ = ["MarkerWriter"]

log = logging.getLogger(__name__)

Partition = tuple[str, int]


class MarkerWriter:
    """Writes markers through each partition log's ordinary append path.

    ``log_for(topic, partition)`` gives the partition's log (None: it no longer exists); ``notify(topic,
    partition)`` wakes fetches parked on it (a marker moves the last stable offset);
    ``complete_offsets(producer_id, commit, offsets_partitions)`` ends the producer's pending
    transactional offsets of the groups in those ``__consumer_offsets`` partitions.
    """

    def __init__(self, log_for: Callable, notify: Callable[[str, int], None],
                 complete_offsets: Callable[[int, bool, set[int]], None]):
        self.log_for = log_for
        self.notify = notify
        self.complete_offsets = complete_offsets

    def write(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
              partitions: Iterable[Partition]) -> list[Partition]:
        """Write the markers; returns the partitions to try again later (their writes failed)."""
        results = self.write_each(producer_id, producer_epoch, commit, coordinator_epoch, partitions)
        return [partition for partition, error in results.items() if error == ErrorCode.KAFKA_STORAGE_ERROR]

    def write_each(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                   partitions: Iterable[Partition]) -> dict[Partition, int]:
        """Each partition's outcome: NONE, UNKNOWN_TOPIC_OR_PARTITION (it went away: nothing to end),
        a stale marker's error (TRANSACTION_COORDINATOR_FENCED, INVALID_PRODUCER_EPOCH) or
        KAFKA_STORAGE_ERROR."""
        results: dict[Partition, int] = {}
        offsets_partitions = set()
        for topic, index in partitions:
            if topic == OFFSETS_TOPIC:
                offsets_partitions.add(index)
                results[(topic, index)] = ErrorCode.NONE
                continue
            partition_log = self.log_for(topic, index)
            if partition_log is None:
                results[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                partition_log.append_marker(producer_id, producer_epoch, commit, coordinator_epoch)
            except LogAppendError as failure:
                if failure.error_code != ErrorCode.KAFKA_STORAGE_ERROR:
                    log.warning("marker for producer %d in %s-%d refused: %s", producer_id, topic, index,
                                failure.message)
                results[(topic, index)] = failure.error_code
                continue
            results[(topic, index)] = ErrorCode.NONE
            self.notify(topic, index)
        if offsets_partitions:
            try:
                self.complete_offsets(producer_id, commit, offsets_partitions)
            except OSError as error:
                log.error("could not complete the transactional offsets of producer %d: %s", producer_id, error)
                for index in offsets_partitions:
                    results[(OFFSETS_TOPIC, index)] = ErrorCode.KAFKA_STORAGE_ERROR
        return results

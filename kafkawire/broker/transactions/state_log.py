"""The transaction coordinator's durable state, Kafka's ``__transaction_state`` topic as a ``Journal``.

One line per transition of a transactional id, written before the transition takes effect, so that
after a crash every id is back in the last state the coordinator acknowledged (a transaction found in
PrepareCommit or PrepareAbort then has its markers written again and completes)::

    {"coordinator_epoch": <n>}                    bumped each time the coordinator loads the log
    {"t": "<transactional id>", "pid": <producer id>, "ppid": <previous>, "npid": <next>, "e": <epoch>,
     "le": <last epoch>, "to": <timeout ms>, "s": "<state>", "p": [["<topic>", <partition>], ...],
     "st": <start ms>, "ut": <update ms>, "v": <client transaction version>}

A Dead state removes the id (Kafka writes a tombstone).
"""
from __future__ import annotations

import logging
from pathlib import Path

from ..persistence.journal import Journal
from .state_file import TRANSACTION_STATE_FILE_NAME
from .metadata import TransactionMetadata, TxnState, TxnTransit

__all__ = ["TransactionStateLog", "TRANSACTION_STATE_FILE_NAME"]

log = logging.getLogger(__name__)

_STATES = {state.value: state for state in TxnState}


class TransactionStateLog:
    """Transactional id -> TransactionMetadata, kept on disk."""

    def __init__(self, data_dir: Path, *, fsync: bool = False, compact_min_bytes: int = 16 << 20):
        self.path = Path(data_dir) / TRANSACTION_STATE_FILE_NAME
        self.transactions: dict[str, TransactionMetadata] = {}
        self.coordinator_epoch = 0
        self._journal = Journal(self.path, self._snapshot_lines, fsync=fsync, compact_min_bytes=compact_min_bytes)

    def load(self) -> None:
        """Read the log back, take the next coordinator epoch and open the log for appending."""
        self.close()
        self.transactions.clear()
        epoch = -1
        for record in self._journal.read():
            try:
                if "coordinator_epoch" in record:
                    epoch = max(epoch, int(record["coordinator_epoch"]))
                else:
                    self._apply(record)
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                log.warning("%s: skipping an unreadable line (%s)", self.path, exc)
        self.coordinator_epoch = epoch + 1
        self._journal.open()  # the compacted file starts with the new epoch

    def close(self) -> None:
        self._journal.close()

    def write(self, metadata: TransactionMetadata, transit: TxnTransit) -> None:
        """Make ``transit`` durable, then apply it to ``metadata`` (raises OSError, leaving it as it was)."""
        self._journal.append(_line(metadata.transactional_id, transit))
        if transit.state is TxnState.DEAD:
            self.transactions.pop(metadata.transactional_id, None)
        else:
            metadata.apply(transit)
            self.transactions[metadata.transactional_id] = metadata
        self._journal.maybe_compact()

    def _apply(self, record: dict) -> None:
        transactional_id = str(record["t"])
        state = _STATES[record["s"]]
        if state is TxnState.DEAD:
            self.transactions.pop(transactional_id, None)
            return
        partitions = frozenset((str(topic), int(partition)) for topic, partition in record["p"])
        transit = TxnTransit(int(record["pid"]), int(record["ppid"]), int(record["npid"]), int(record["e"]),
                             int(record["le"]), int(record["to"]), state, partitions, int(record["st"]),
                             int(record["ut"]), int(record["v"]))
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            metadata = self.transactions[transactional_id] = TransactionMetadata(transactional_id, transit.producer_id)
        metadata.apply(transit)

    def _snapshot_lines(self):
        yield {"coordinator_epoch": self.coordinator_epoch}
        for transactional_id, metadata in sorted(self.transactions.items()):
            yield _line(transactional_id, TxnTransit(
                metadata.producer_id, metadata.previous_producer_id, metadata.next_producer_id,
                metadata.producer_epoch, metadata.last_producer_epoch, metadata.timeout_ms, metadata.state,
                frozenset(metadata.partitions), metadata.start_ms, metadata.update_ms, metadata.client_version))


def _line(transactional_id: str, transit: TxnTransit) -> dict:
    return {"t": transactional_id, "pid": transit.producer_id, "ppid": transit.previous_producer_id,
            "npid": transit.next_producer_id, "e": transit.producer_epoch, "le": transit.last_producer_epoch,
            "to": transit.timeout_ms, "s": transit.state.value, "p": sorted([list(p) for p in transit.partitions]),
            "st": transit.start_ms, "ut": transit.update_ms, "v": transit.client_version}

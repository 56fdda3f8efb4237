"""A segment's aborted-transaction index: Kafka's ``TransactionIndex`` (``<base>.txnindex``).

One 34-byte entry per transaction aborted while the segment was active (where its ABORT marker went):
int16 version (0), int64 producer id, int64 first offset, int64 last offset (the marker's), int64 last
stable offset (the LSO once the transaction was complete). A read_committed fetch lists the aborted
transactions overlapping what it returns; the last stable offset lets the search stop early.

The file is made on the first entry (most segments never see an abort) and read lazily.
"""
from __future__ import annotations

import os
from pathlib import Path
from struct import Struct
from typing import NamedTuple

__all__ = ["AbortedTxn", "TransactionIndex", "TXN_INDEX_SUFFIX"]

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = Struct(">hqqqq")
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions of one segment, in the order they completed."""

    def __init__(self, path: Path):
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # None: not read yet

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        usable = len(data) - len(data) % _ENTRY.size  # a torn last entry is dropped (and cut on the next write)
        entries = []
        for version, *fields in _ENTRY.iter_unpack(memoryview(data)[:usable]):
            if version != _VERSION:
                break  # Kafka refuses the file; what came before is still good
            entries.append(AbortedTxn(*fields))
        if usable != len(data) or len(entries) * _ENTRY.size != usable:
            self._rewrite(entries)
        return entries

    def append(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction (written before the marker's append returns)."""
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"aborted transaction ending at {txn.last_offset} is not after the last one, "
                             f"ending at {entries[-1].last_offset}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            os.write(fd, _ENTRY.pack(_VERSION, *txn))
        finally:
            os.close(fd)
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of transactions completed at or after ``offset`` (their markers are gone)."""
        entries = self.entries
        kept = [txn for txn in entries if txn.last_offset < offset]
        if len(kept) != len(entries):
            self._rewrite(kept)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset), and whether the search
        is complete (an entry's last stable offset reached the bound: later segments cannot matter)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
        else:
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_bytes(b"".join(_ENTRY.pack(_VERSION, *txn) for txn in entries))
            tmp.replace(self.path)
        self._entries = entries

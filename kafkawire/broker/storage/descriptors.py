"""A bound on the file descriptors partition logs keep open.

A segment opens its files when first read or written and keeps them open for the next access; with
many partitions that would hold several descriptors each and run the process out of them (then even
``accept()`` fails). The cache remembers which segments hold descriptors, most recently used last,
and has the least recently used one close its files once more than ``limit`` segments hold some; a
segment reopens its files on its next access. Fetched slices hold duplicates of their own, so closing
a segment's descriptors never disturbs a response being sent.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["DescriptorCache"]


class DescriptorCache:
    """Segments holding descriptors, least recently used first (``limit`` segments at most)."""

    def __init__(self, limit: int):
        if limit < 4:  # a read may use a partition's segment while touching the next one
            raise ValueError(f"a descriptor cache needs room for at least 4 segments, not {limit}")
        self.limit = limit
        self._open: OrderedDict = OrderedDict()
        self._lock = threading.Lock()  # logs are created on worker threads while the loop reads others
        self._owner: int | None = None
        self.evictions = 0

    def bind_to_current_thread(self) -> None:
        """Only this thread (the event loop's, which does every read and write) closes descriptors: a
        worker thread creating logs must not close a file the loop is reading."""
        self._owner = threading.get_ident()

    def __len__(self) -> int:
        return len(self._open)

    def touch(self, segment) -> None:
        """``segment`` holds descriptors and was just used."""
        with self._lock:
            if segment in self._open:
                self._open.move_to_end(segment)
                return
            self._open[segment] = None
            if len(self._open) <= self.limit or (self._owner is not None and threading.get_ident() != self._owner):
                return
            evicted = []
            while len(self._open) > self.limit:
                evicted.append(self._open.popitem(last=False)[0])
            self.evictions += len(evicted)
        for oldest in evicted:
            oldest.close_descriptors()

    def forget(self, segment) -> None:
        """``segment`` closed its descriptors itself."""
        with self._lock:
            self._open.pop(segment, None)

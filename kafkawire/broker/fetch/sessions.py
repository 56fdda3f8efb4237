"""Fetch sessions (KIP-227): full and incremental fetch requests, and a bounded session cache.

A full request (epoch 0) names every partition and may open a session; an incremental one (the
session's next epoch) names only what changed and what to forget, and the broker reads every
partition of the session in session order. Partitions that returned records move to the end of that
order, which is what makes incremental sessions fair. Epoch -1 is a sessionless full request.
"""
from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from ...error_codes import ErrorCode

__all__ = ["FetchSessionCache", "SessionPartition", "FetchContext", "INITIAL_EPOCH", "FINAL_EPOCH"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 0x7FFFFFFF


@dataclass(slots=True)
class SessionPartition:
    """A partition's fetch parameters, as the session remembers them between requests."""

    key: tuple  # (topic name, or the topic id when unknown, partition)
    fetch_offset: int
    partition_max_bytes: int
    remote_partition_max_bytes: int | None = None
    # what the last response told the client: a change forces the partition into an incremental response
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass
class FetchSession:
    session_id: int
    partitions: OrderedDict = field(default_factory=OrderedDict)  # key -> SessionPartition, in session order
    next_epoch: int = 1
    created: float = 0.0
    last_used: float = 0.0


@dataclass
class FetchContext:
    """What one fetch request reads, and how its response is shaped."""

    partitions: list[SessionPartition]  # in read order
    session: FetchSession | None
    incremental: bool
    error: ErrorCode = ErrorCode.NONE

    @property
    def response_session_id(self) -> int:
        return self.session.session_id if self.session is not None else 0

    def include(self, partition: SessionPartition, records_size: int, high_watermark: int, log_start_offset: int,
                error: int) -> bool:
        """Whether a partition belongs in the response (incremental responses carry only changes), and
        remember what the client now knows."""
        if self.session is None:
            return True  # a full response, and no session to remember anything for
        changed = (records_size > 0 or error != 0 or high_watermark != partition.high_watermark
                   or log_start_offset != partition.log_start_offset)
        partition.high_watermark = high_watermark
        partition.log_start_offset = log_start_offset
        return changed or not self.incremental

    def finish(self, returned_records: list[SessionPartition]) -> None:
        """After the read: partitions that returned records go to the end of the session order."""
        if self.session is not None:
            for partition in returned_records:
                if partition.key in self.session.partitions:
                    self.session.partitions.move_to_end(partition.key)


class FetchSessionCache:
    def __init__(self, slots: int = 1000, eviction_ms: int = 120_000,
                 clock: Callable[[], float] = time.monotonic):
        self.slots = slots
        self.eviction_s = eviction_ms / 1000
        self.clock = clock
        self.sessions: dict[int, FetchSession] = {}
        self._ids = itertools.count(1)

    def context(self, session_id: int, epoch: int, requested: list[SessionPartition],
                forgotten: list[tuple]) -> FetchContext:
        """The fetch context for a request's session fields, its partitions (in request order) and the
        partitions it asks to forget."""
        now = self.clock()
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id:
                self.sessions.pop(session_id, None)  # a full request closes the session it names
            if epoch == FINAL_EPOCH:
                return FetchContext(requested, None, incremental=False)
            session = self._create(requested, now)
            return FetchContext(list(session.partitions.values()) if session else requested, session,
                                incremental=False)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext([], None, incremental=False, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.next_epoch:
            return FetchContext([], None, incremental=False, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        for key in forgotten:
            session.partitions.pop(key, None)
        for partition in requested:
            known = session.partitions.get(partition.key)
            if known is None:
                session.partitions[partition.key] = partition
            else:  # updated in place: keeps its position in the session order
                known.fetch_offset = partition.fetch_offset
                known.partition_max_bytes = partition.partition_max_bytes
                known.remote_partition_max_bytes = partition.remote_partition_max_bytes
        session.next_epoch = 1 if session.next_epoch == _MAX_EPOCH else session.next_epoch + 1
        session.last_used = now
        if not session.partitions:  # an emptied session is closed
            del self.sessions[session.session_id]
            return FetchContext([], None, incremental=False)
        return FetchContext(list(session.partitions.values()), session, incremental=True)

    def _create(self, requested: list[SessionPartition], now: float) -> FetchSession | None:
        if not requested:
            return None
        if len(self.sessions) >= self.slots and not self._evict_for(len(requested), now):
            return None
        session = FetchSession(self._new_id(), created=now, last_used=now)
        for partition in requested:
            session.partitions[partition.key] = partition
        self.sessions[session.session_id] = session
        return session

    def _new_id(self) -> int:
        """A positive int32 session id not in use (ids wrap after 2**31 - 1)."""
        while True:
            session_id = next(self._ids) & _MAX_EPOCH
            if session_id and session_id not in self.sessions:
                return session_id

    def _evict_for(self, size: int, now: float) -> bool:
        """Make room for a new session of ``size`` partitions: evict the longest-idle stale session,
        or else a smaller session that has existed for longer than the eviction time."""
        stale = [s for s in self.sessions.values() if now - s.last_used > self.eviction_s]
        if stale:
            victim = min(stale, key=lambda s: s.last_used)
        else:
            candidates = [s for s in self.sessions.values()
                          if now - s.created > self.eviction_s and len(s.partitions) < size]
            if not candidates:
                return False
            victim = min(candidates, key=lambda s: (len(s.partitions), s.last_used))
        del self.sessions[victim.session_id]
        return True

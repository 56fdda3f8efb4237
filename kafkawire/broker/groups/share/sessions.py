"""Share sessions, as Kafka's ``ShareSessionCache`` and ``SharePartitionManager.newContext`` keep them.

A session belongs to a (group, member) and lists the share partitions the member fetches from, so that
later ShareFetch requests name only what changed. Epoch 0 opens a session afresh (carrying no
acknowledgements), each later request carries the epoch the broker expects next (1, 2, ... wrapping to
1), adds partitions and forgets others; epoch -1 closes it (ShareFetch then fetches nothing). A closed
session's member loses the records it held: they are released for others.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from ....error_codes import ErrorCode

__all__ = ["ShareSessions", "ShareSession", "INITIAL_EPOCH", "FINAL_EPOCH", "SessionError"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

Partition = tuple[uuid.UUID, int]  # (topic id, partition)


class SessionError(Exception):
    def __init__(self, code: int):
        super().__init__(ErrorCode(code).name)
        self.code = code


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[Partition, None] = field(default_factory=dict)  # in the order added
    last_used: float = field(default_factory=time.monotonic)


class ShareSessions:
    """At most ``max_sessions`` sessions (``group.share.max.share.sessions``)."""

    def __init__(self, max_sessions: int):
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def fetch_context(self, group_id: str, member_id: str, epoch: int, requested: list[Partition],
                      forgotten: list[Partition], acknowledging: bool) -> ShareSession | None:
        """The session a ShareFetch works in (None: the final request, which fetches nothing); raises
        SessionError."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if requested:
                raise SessionError(ErrorCode.INVALID_REQUEST)
            if key not in self.sessions:
                raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
            return None
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                raise SessionError(ErrorCode.INVALID_REQUEST)
            self.sessions.pop(key, None)
            if len(self.sessions) >= self.max_sessions:
                raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
            session = self.sessions[key] = ShareSession(group_id, member_id)
            session.partitions = dict.fromkeys(requested)
            return session
        session = self._expect(key, epoch)
        for partition in forgotten:
            session.partitions.pop(partition, None)
        for partition in requested:
            session.partitions.setdefault(partition, None)
        session.epoch = _next(epoch)
        session.last_used = time.monotonic()
        return session

    def acknowledge_context(self, group_id: str, member_id: str, epoch: int) -> None:
        """Check (and advance) the session of a ShareAcknowledge; raises SessionError."""
        if epoch == INITIAL_EPOCH:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if key not in self.sessions:
                raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
            return
        session = self._expect(key, epoch)
        session.epoch = _next(epoch)
        session.last_used = time.monotonic()

    def idle_since(self, moment: Callable[[str], float]) -> list[tuple[str, str]]:
        """The (group, member) of the sessions last used before ``moment(group)``."""
        return [key for key, session in self.sessions.items() if session.last_used < moment(key[0])]

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def _expect(self, key: tuple[str, str], epoch: int) -> ShareSession:
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if session.epoch != epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return session


def _next(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1

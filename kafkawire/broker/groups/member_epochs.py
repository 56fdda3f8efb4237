"""What KIP-848 consumer groups and KIP-1071 streams groups check alike, their members carrying a
member epoch: offset commits and fetches at the member's current epoch (Kafka's
``validateOffsetCommit`` / ``validateOffsetFetch``), and the fencing of members past their deadlines."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, TypeVar

from ...error_codes import ErrorCode

__all__ = ["offset_commit_error", "offset_fetch_error", "late_members", "fence_late_members"]


log = logging.getLogger(__name__)


class _EpochMember(Protocol):
    @property
    def member_epoch(self) -> int: ...


def offset_commit_error(members: Mapping[str, _EpochMember], member_id: str, member_epoch: int, version: int,
                        transactional: bool = False) -> int | None:
    """None when the commit may go ahead."""
    if member_epoch < 0 and not members:
        return None  # admin tools commit for an empty group
    if transactional and member_epoch < 0 and not member_id:
        return None
    member = members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        if transactional:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.STALE_MEMBER_EPOCH if version >= 9 else ErrorCode.UNSUPPORTED_VERSION
    return None


def offset_fetch_error(members: Mapping[str, _EpochMember], member_id: str | None, member_epoch: int) -> int | None:
    if member_epoch < 0 and not member_id:
        return None
    member = members.get(member_id or "")
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return ErrorCode.STALE_MEMBER_EPOCH
    return None


def late_members(session_deadlines: Mapping[str, float], rebalance_deadlines: Mapping[str, float],
                 now: float) -> list[str]:
    """The members past their session timeout or their rebalance (revocation) timeout, in id order."""
    late = {m for m, deadline in session_deadlines.items() if deadline <= now}
    late |= {m for m, deadline in rebalance_deadlines.items() if deadline <= now}
    return sorted(late)


class _DeadlinedGroup(Protocol):
    @property
    def group_id(self) -> str: ...

    @property
    def session_deadlines(self) -> Mapping[str, float]: ...

    @property
    def rebalance_deadlines(self) -> Mapping[str, float]: ...


G = TypeVar("G", bound=_DeadlinedGroup)


def fence_late_members(groups: Iterable[G], now: float, fence: Callable[[G, str], None],
                       save: Callable[[str], bool], kind: str) -> list[tuple[str, str]]:
    """Fence the members past their deadlines, group by group, and write each group that changed; returns
    (group, member) of the fencings written (a group whose write failed is put back, its members with it)."""
    fenced = []
    for group in list(groups):
        late = late_members(group.session_deadlines, group.rebalance_deadlines, now)
        for member_id in late:
            log.info("%s %s: fencing member %s (session or rebalance timeout)", kind, group.group_id, member_id)
            fence(group, member_id)
            fenced.append((group.group_id, member_id))
        if late and not save(group.group_id):
            fenced = [entry for entry in fenced if entry[0] != group.group_id]
    return fenced

"""What the KIP-848 consumer and KIP-1071 streams coordinators do alike with their stores: write a group
before the heartbeat that changed it is answered, and when the write fails put the group back as last
written, so that what the broker answers never runs ahead of what a restart would bring back (Kafka's
coordinator fails the request when its records do not reach the log, and its in-memory state stays at
what was committed)."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

__all__ = ["GroupStore", "write_or_undo", "forget"]

log = logging.getLogger(__name__)

G = TypeVar("G")


class GroupStore(Protocol[G]):
    def save(self, group: G) -> None: ...

    def delete(self, group_id: str) -> None: ...

    def restore(self, group_id: str) -> G | None: ...


def write_or_undo(groups: dict[str, G], store: GroupStore[G] | None, group_id: str,
                  carry_deadlines: Callable[[G, G], None]) -> bool:
    """Write ``groups[group_id]``; if that fails, replace it by the group as last written (or drop it,
    never written) and answer False. ``carry_deadlines(failed, restored)`` gives the restored group the
    session and rebalance deadlines its members had, which the store does not keep."""
    group = groups.get(group_id)
    if store is None or group is None:
        return True
    try:
        store.save(group)
        return True
    except OSError as exc:
        log.error("group %s: could not write its state, undoing the change: %s", group_id, exc)
    restored = store.restore(group_id)
    if restored is None:
        del groups[group_id]
    else:
        carry_deadlines(group, restored)
        groups[group_id] = restored
    return False


def forget(groups: dict[str, G], store: GroupStore[G] | None, group_id: str) -> None:
    """Drop a group for good, from the store first (raises OSError, the group kept then)."""
    if store is not None:
        store.delete(group_id)
    groups.pop(group_id, None)

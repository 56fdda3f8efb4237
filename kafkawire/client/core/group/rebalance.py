"""What a classic group member gives up around a rebalance, by rebalance protocol (Java's
ConsumerCoordinator.onJoinPrepare and onJoinComplete).

* EAGER (range, roundrobin, sticky): before JoinGroup the member revokes every partition; the new
  assignment is then all new.
* COOPERATIVE (KIP-429, cooperative-sticky alone): before JoinGroup the member revokes only the
  partitions of topics it no longer subscribes to and keeps fetching the others through the rebalance.
  After SyncGroup it revokes what it owns but was not assigned (then rejoins at once, so that the
  leader can hand those to their new owners), and takes up only what was added.

Losing partitions (the generation is gone) is the same under both: all of them, at once.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..topic_partition import TopicPartition
from .assignor_base import COOPERATIVE, EAGER

__all__ = ["EAGER", "COOPERATIVE", "NONE", "revoke_before_join", "AssignmentChange", "assignment_change"]

NONE = "NONE"  # (rebalance_protocol() before a classic member joined, as confluent-kafka says it)


def revoke_before_join(protocol: str, owned: Sequence[TopicPartition], subscription: Iterable[str]
                       ) -> tuple[TopicPartition, ...]:
    """The partitions to revoke before sending JoinGroup."""
    if protocol == EAGER:
        return tuple(owned)
    topics = set(subscription)
    return tuple(tp for tp in owned if tp.topic not in topics)


class AssignmentChange(NamedTuple):
    revoked: tuple[TopicPartition, ...]  # owned, no longer assigned: revoke, then rejoin (cooperative only)
    added: tuple[TopicPartition, ...]  # assigned, not owned: their committed offsets are to be fetched
    incremental: bool  # the listener hears of the added partitions only


def assignment_change(protocol: str, owned: Sequence[TopicPartition],
                      assigned: Sequence[TopicPartition]) -> AssignmentChange:
    """What SyncGroup's ``assigned`` partitions change for a member that still owns ``owned``."""
    if protocol == EAGER:  # everything was revoked before joining: all of it is new
        return AssignmentChange((), tuple(assigned), False)
    keep, now = set(owned), set(assigned)
    return AssignmentChange(tuple(tp for tp in owned if tp not in now), tuple(tp for tp in assigned if tp not in keep),
                            True)

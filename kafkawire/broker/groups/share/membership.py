"""Share groups' membership (KIP-932): ShareGroupHeartbeat as Kafka's ``GroupMetadataManager`` runs it
(``shareGroupHeartbeat``, ``shareGroupLeave``) and the facts ShareGroupDescribe gives.

A member joins with epoch 0 and its subscription, heartbeats with the epoch it was given, and leaves
with epoch -1. A member joining or leaving, a change of subscription, or a change in the subscribed
topics' partitions bumps the group epoch; the assignment is then computed again with Kafka's
``SimpleAssignor`` rule: every member gets every partition of the topics it subscribes to (the share
partitions, not the assignment, keep members from receiving the same record). Share groups have no
revocation: a member takes its new assignment, and the assignment epoch as its member epoch, at its next
heartbeat. Members silent for ``group.share.session.timeout.ms`` are removed.

Membership is not written to disk: after a restart members rejoin on UNKNOWN_MEMBER_ID, as they would
after a coordinator move; the share partitions' delivery state is what must survive, and does.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ....error_codes import ErrorCode

__all__ = ["ShareGroups", "ShareGroup", "ShareMember", "ShareHeartbeat", "LEAVE_EPOCH"]

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
ASSIGNOR_NAME = "simple"

Assignment = dict[str, frozenset[int]]  # topic name -> partitions


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()
    assigned: Assignment = field(default_factory=dict)


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    topics: dict[str, tuple[object, int]] = field(default_factory=dict)  # subscribed: name -> (id, partitions)
    deadlines: dict[str, float] = field(default_factory=dict)  # member id -> session deadline

    @property
    def state(self) -> str:
        # Kafka's ShareGroupState has no reconciling state: members' acquisitions are not revoked
        return "Stable" if self.members else "Empty"


@dataclass
class ShareHeartbeat:
    error: int = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None  # None: not sent


class _Refused(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class ShareGroups:
    """``topics()``: the cluster's topics, name -> (topic id, partition count); ``other_group(group_id)``:
    whether the id is a classic or consumer group's; ``session_timeout_ms(group_id)`` and
    ``heartbeat_interval_ms(group_id)``: the group's settings."""

    def __init__(self, topics: Callable[[], dict[str, tuple[object, int]]], *,
                 session_timeout_ms: Callable[[str], int], heartbeat_interval_ms: Callable[[str], int],
                 clock: Callable[[], float],
                 other_group: Callable[[str], bool] = lambda group_id: False):
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.clock = clock
        self.other_group = other_group
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(self, request, client_id: str, client_host: str,
                  may_describe: Callable[[str], bool] = lambda topic: True) -> ShareHeartbeat:
        try:
            _validate(request)
            if request.member_epoch == LEAVE_EPOCH:
                return self._leave(request.group_id, request.member_id)
            return self._heartbeat(request, client_id, client_host, may_describe)
        except _Refused as refused:
            log.debug("share group %s: heartbeat of %r refused: %s", request.group_id, request.member_id, refused)
            return ShareHeartbeat(refused.code, refused.message)

    def _heartbeat(self, request, client_id, client_host, may_describe) -> ShareHeartbeat:
        group = self.groups.get(request.group_id)
        epoch = request.member_epoch
        if group is None:
            if self.other_group(request.group_id):
                raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a share group.")
            if epoch != 0:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not a member of the group.")
            group = self.groups[request.group_id] = ShareGroup(request.group_id)
        member = group.members.get(request.member_id)
        if member is None:
            if epoch != 0:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not a member of the group.")
            member = ShareMember(request.member_id)
        elif epoch != 0 and epoch != member.member_epoch:
            raise _Refused(ErrorCode.FENCED_MEMBER_EPOCH,
                           f"The share group member has a member epoch ({epoch}) other than the one known by the "
                           f"group coordinator ({member.member_epoch}). The member must abandon all its "
                           f"partitions and rejoin.")
        subscribed = (tuple(sorted(set(request.subscribed_topic_names)))
                      if request.subscribed_topic_names is not None else member.subscribed)
        denied = [t for t in subscribed if not may_describe(t)]
        if denied:
            raise _Refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Not authorized to describe {', '.join(denied)}.")
        joining = request.member_id not in group.members
        bump = joining or subscribed != member.subscribed
        member.subscribed = subscribed
        member.rack_id = request.rack_id if request.rack_id is not None else member.rack_id
        member.client_id, member.client_host = client_id, client_host
        group.members[member.member_id] = member
        topics = self._subscribed_topics(group)
        if bump or topics != group.topics:
            group.topics = topics
            group.group_epoch += 1
            self._assign(group)
        previous = member.assigned
        member.assigned = group.target.get(member.member_id, {})
        member.member_epoch = group.assignment_epoch
        group.deadlines[member.member_id] = self.clock() + self.session_timeout_ms(group.group_id) / 1000
        full = epoch == 0 or request.subscribed_topic_names is not None
        return ShareHeartbeat(member_id=member.member_id, member_epoch=member.member_epoch,
                              assignment=member.assigned if full or member.assigned != previous else None)

    def _leave(self, group_id: str, member_id: str) -> ShareHeartbeat:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group.")
        self._remove(group, member_id)
        return ShareHeartbeat(member_id=member_id, member_epoch=LEAVE_EPOCH)

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        group.deadlines.pop(member_id, None)
        group.target.pop(member_id, None)
        group.topics = self._subscribed_topics(group)
        group.group_epoch += 1
        self._assign(group)

    def _subscribed_topics(self, group: ShareGroup) -> dict[str, tuple[object, int]]:
        topics = self.topics()
        names = {t for member in group.members.values() for t in member.subscribed if t in topics}
        return {name: topics[name] for name in sorted(names)}

    def _assign(self, group: ShareGroup) -> None:
        """SimpleAssignor: each member every partition of its subscribed topics."""
        group.target = {member_id: {t: frozenset(range(group.topics[t][1])) for t in member.subscribed
                                    if t in group.topics and group.topics[t][1]}
                        for member_id, member in group.members.items()}
        group.assignment_epoch = group.group_epoch

    def expire(self) -> list[tuple[str, str]]:
        """Remove members past their session timeout; returns (group, member) removed."""
        now = self.clock()
        removed = []
        for group in list(self.groups.values()):
            for member_id in sorted(m for m, deadline in group.deadlines.items() if deadline <= now):
                log.info("share group %s: removing member %s (session timeout)", group.group_id, member_id)
                self._remove(group, member_id)
                removed.append((group.group_id, member_id))
        return removed

    def create(self, group_id: str) -> ShareGroup:
        """An empty share group (AlterShareGroupOffsets on an id not in use makes one)."""
        return self.groups.setdefault(group_id, ShareGroup(group_id))

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members


def _validate(request) -> None:
    if not request.group_id:
        raise _Refused(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if not request.member_id:
        raise _Refused(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if request.rack_id is not None and request.rack_id == "":
        raise _Refused(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
    if request.member_epoch < LEAVE_EPOCH:
        raise _Refused(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
    if request.member_epoch == 0 and not request.subscribed_topic_names:
        raise _Refused(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")


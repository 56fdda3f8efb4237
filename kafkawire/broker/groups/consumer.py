"""The KIP-848 consumer group coordinator: ConsumerGroupHeartbeat and ConsumerGroupDescribe, as Kafka's
``GroupMetadataManager`` runs them (``consumerGroupHeartbeat``, ``consumerGroupLeave``).

A member's heartbeat carries its subscription and the partitions it owns. A change of subscription, a
member joining or leaving, or a change in the subscribed topics' partitions bumps the group epoch;
the server-side assignor then computes a new target assignment, and each member reconciles toward
its part of it at its own heartbeats (``consumer_group_state.reconcile``). Members that stop
heartbeating for the session timeout, or that do not revoke within their rebalance timeout, are
fenced. Static members (an instance id) that leave with epoch -2 keep their assignment until the
session timeout, and a new member with the same instance id takes it over without a rebalance.

Offsets are shared with the classic groups (``OffsetStore``); a group id is either a classic or a
consumer group, and a request of the other protocol to a non-empty group is INCONSISTENT_GROUP_PROTOCOL.
With a ``ConsumerGroupStore`` every change of a group is written before the request that made it is
answered, and ``load()`` brings the groups back after a restart: members carry on with their epochs and
assignments, their session timeouts starting afresh (as Kafka's coordinator does when it loads).
"""
from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from ...error_codes import ErrorCode
from .consumer_assignors import ASSIGNORS
from .consumer_store import ConsumerGroupStore
from .group_writes import forget, write_or_undo
from .member_epochs import fence_late_members, offset_commit_error, offset_fetch_error
from .consumer_state import (STATIC_LEAVE_EPOCH, LEAVE_EPOCH, Assignment, ConsumerGroup, Member,
                                   MemberState, reconcile)

__all__ = ["ConsumerGroupCoordinator", "HeartbeatResult", "GroupError"]

log = logging.getLogger(__name__)


class GroupError(Exception):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(message or ErrorCode(code).name)
        self.code = code
        self.message = message


@dataclass
class HeartbeatResult:
    error: int = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: not sent


class ConsumerGroupCoordinator:
    """``topics()`` gives the cluster's topics: name -> (topic id, partition count); ``classic_in_use(group)``
    whether a classic group of that id has members, ``drop_classic(group)`` forgets an empty one;
    ``group_setting(group, name)``, if given, the group's own consumer.session.timeout.ms and
    consumer.heartbeat.interval.ms (its group configs), the broker's otherwise; ``share_group(group)``
    whether the id is a share group's (refused)."""

    def __init__(self, topics: Callable[[], dict[str, tuple[object, int]]], *, session_timeout_ms: int,
                 heartbeat_interval_ms: int, assignors: tuple[str, ...], clock: Callable[[], float],
                 classic_in_use: Callable[[str], bool] = lambda group_id: False,
                 drop_classic: Callable[[str], None] = lambda group_id: None,
                 store: ConsumerGroupStore | None = None,
                 group_setting: Callable[[str, str], int] | None = None,
                 share_group: Callable[[str], bool] = lambda group_id: False):
        unknown = [name for name in assignors if name not in ASSIGNORS]
        if unknown or not assignors:
            raise ValueError(f"group.consumer.assignors: unknown assignor {unknown or assignors}")
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.assignors = assignors
        self.clock = clock
        self.classic_in_use = classic_in_use
        self.drop_classic = drop_classic
        self.store = store
        self.group_setting = group_setting
        self.share_group = share_group
        self.groups: dict[str, ConsumerGroup] = {}

    def _session_timeout_ms(self, group_id: str) -> int:
        if self.group_setting is None:
            return self.session_timeout_ms
        return self.group_setting(group_id, "consumer.session.timeout.ms")

    def _heartbeat_interval_ms(self, group_id: str) -> int:
        if self.group_setting is None:
            return self.heartbeat_interval_ms
        return self.group_setting(group_id, "consumer.heartbeat.interval.ms")

    # ---- durability -------------------------------------------------------------------------------
    def load(self) -> None:
        """Bring the stored groups back; every member gets a full session timeout from now (and one
        still revoking partitions its rebalance timeout), as Kafka's coordinator gives on load."""
        self.groups = self.store.load() if self.store is not None else {}
        now = self.clock()
        for group in self.groups.values():
            self._start_deadlines(group, now, {}, {})

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    def forget(self, group_id: str) -> None:
        """Drop a group for good (DeleteGroups, or an empty group becoming a classic one); raises OSError."""
        forget(self.groups, self.store, group_id)

    def _save(self, group_id: str) -> bool:
        """Write the group's changes; if that fails, put the group back as last written (False)."""
        return write_or_undo(self.groups, self.store, group_id, lambda failed, restored: self._start_deadlines(
            restored, self.clock(), failed.session_deadlines, failed.rebalance_deadlines))

    def _start_deadlines(self, group: ConsumerGroup, now: float, sessions: dict, rebalances: dict) -> None:
        """Session (and revocation) deadlines for the group's members, those in ``sessions`` and
        ``rebalances`` kept."""
        for member_id, member in group.members.items():
            timeout_s = self._session_timeout_ms(group.group_id) / 1000
            group.session_deadlines[member_id] = sessions.get(member_id, now + timeout_s)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                group.rebalance_deadlines[member_id] = rebalances.get(
                    member_id, now + max(member.rebalance_timeout_ms, 0) / 1000)

    # ---- ConsumerGroupHeartbeat -----------------------------------------------------------------
    def heartbeat(self, request, version: int, client_id: str, client_host: str,
                  may_describe: Callable[[str], bool] = lambda topic: True) -> HeartbeatResult:
        existed = request.group_id in self.groups
        try:
            self._validate(request, version)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                result = self._leave(request)
            else:
                result = self._heartbeat(request, version, client_id, client_host, may_describe)
        except GroupError as error:
            log.debug("group %s: heartbeat of member %r refused: %s", request.group_id, request.member_id, error)
            result = HeartbeatResult(error.code, error.message, member_epoch=0)
            group = self.groups.get(request.group_id)
            if not existed and group is not None and not group.members:  # refused: no group comes of it
                del self.groups[request.group_id]
        if not self._save(request.group_id):  # as Kafka answers a failed write to its log
            return HeartbeatResult(ErrorCode.NOT_COORDINATOR, "The group's state could not be written.",
                                   member_epoch=0)
        return result

    def _validate(self, request, version: int) -> None:
        def not_empty(value, what):
            if value is not None and value == "":
                raise GroupError(ErrorCode.INVALID_REQUEST, f"{what} can't be empty.")
        not_empty(request.group_id, "GroupId")
        not_empty(request.instance_id, "InstanceId")
        not_empty(request.rack_id, "RackId")
        epoch = request.member_epoch
        if version >= 1 or epoch != 0:
            if not request.member_id:
                raise GroupError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise GroupError(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise GroupError(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if not request.subscribed_topic_names and request.subscribed_topic_regex is None:
                raise GroupError(ErrorCode.INVALID_REQUEST,
                                 "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == STATIC_LEAVE_EPOCH:
            if request.instance_id is None:
                raise GroupError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_EPOCH:
            raise GroupError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        if request.subscribed_topic_regex:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as error:
                raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(error)) from None
        if request.server_assignor is not None and request.server_assignor not in self.assignors:
            raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.assignors)}.")

    def _group(self, group_id: str, create: bool) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self.classic_in_use(group_id):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"Group {group_id} is a classic group with members.")
        if self.share_group(group_id):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        self.drop_classic(group_id)  # an empty classic group (offsets only) becomes a consumer group
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def _heartbeat(self, request, version, client_id, client_host, may_describe) -> HeartbeatResult:
        epoch = request.member_epoch
        group = self._group(request.group_id, create=epoch == 0)
        owned = self._owned(request.topic_partitions)
        member_id = request.member_id or str(uuid.uuid4())
        member = self._member(group, member_id, epoch, request.instance_id, owned)
        updated = replace(
            member, instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=request.server_assignor if request.server_assignor is not None else member.server_assignor,
            subscribed_names=(tuple(sorted(request.subscribed_topic_names))
                              if request.subscribed_topic_names is not None else member.subscribed_names),
            subscribed_regex=(request.subscribed_topic_regex or None
                              if request.subscribed_topic_regex is not None else member.subscribed_regex),
            client_id=client_id, client_host=client_host)
        denied = [t for t in updated.subscribed_names if not may_describe(t)]
        if denied:
            raise GroupError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Not authorized to describe {', '.join(denied)}.")
        # a new member has no subscription yet, so joining counts as a change (a static member taking over
        # from its previous instance brings the old one's, and joins without a rebalance)
        bump = ((updated.subscribed_names, updated.subscribed_regex, updated.server_assignor, updated.rack_id) !=
                (member.subscribed_names, member.subscribed_regex, member.server_assignor, member.rack_id))
        group.put(updated)
        metadata = self._subscription_metadata(group, may_describe)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._update_target(group, may_describe)
        reconciled = reconcile(updated, group.assignment_epoch, group.target.get(member_id, {}), group.owners, owned)
        group.put(reconciled)
        now = self.clock()
        group.session_deadlines[member_id] = now + self._session_timeout_ms(group.group_id) / 1000
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            if reconciled != updated or member_id not in group.rebalance_deadlines:
                group.rebalance_deadlines[member_id] = now + max(reconciled.rebalance_timeout_ms, 0) / 1000
        else:
            group.rebalance_deadlines.pop(member_id, None)
        full = epoch == 0 or (request.rebalance_timeout_ms != -1 and request.subscribed_topic_names is not None
                              and request.topic_partitions is not None)
        changed = reconciled.assigned != member.assigned
        return HeartbeatResult(member_id=member_id, member_epoch=reconciled.member_epoch,
                               heartbeat_interval_ms=self._heartbeat_interval_ms(group.group_id),
                               assignment=reconciled.assigned if full or changed else None)

    def _member(self, group: ConsumerGroup, member_id: str, epoch: int, instance_id, owned) -> Member:
        if instance_id is None:
            member = group.members.get(member_id)
            if epoch == 0:
                if member is not None:  # the member rejoins (after being fenced, KIP-1082): start afresh
                    self.fence(group, member_id)
                return Member(member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group.")
            _check_epoch(member, epoch, owned)
            return member
        existing_id = group.static_members.get(instance_id)
        existing = group.members.get(existing_id) if existing_id is not None else None
        if epoch == 0:
            if existing is None:
                return group.members.get(member_id) or Member(member_id, instance_id=instance_id)
            if existing.member_epoch != STATIC_LEAVE_EPOCH and existing.member_id != member_id:
                raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                 f"because the instance id is owned by {existing.member_id} member.")
            # the new instance takes over the old one's assignment, with no rebalance
            target = group.target.pop(existing.member_id, None)
            group.remove(existing.member_id)
            if target is not None:
                group.target[member_id] = target
            return replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        if existing is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member "
                             f"{existing.member_id}.")
        _check_epoch(existing, epoch, owned)
        return existing

    def _leave(self, request) -> HeartbeatResult:
        group = self._group(request.group_id, create=False)
        member_id, instance_id = request.member_id, request.instance_id
        if instance_id is None:
            if member_id not in group.members:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group.")
        else:
            existing_id = group.static_members.get(instance_id)
            if existing_id is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if existing_id != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} was fenced by member "
                                 f"{existing_id}.")
            if request.member_epoch == STATIC_LEAVE_EPOCH:  # back soon: keep its partitions for it
                group.put(replace(group.members[member_id], member_epoch=STATIC_LEAVE_EPOCH))
                return HeartbeatResult(member_id=member_id, member_epoch=STATIC_LEAVE_EPOCH)
        self.fence(group, member_id)
        return HeartbeatResult(member_id=member_id, member_epoch=request.member_epoch)

    def fence(self, group: ConsumerGroup, member_id: str) -> None:
        """Remove a member; the others get a new target assignment."""
        if group.remove(member_id) is not None:
            group.group_epoch += 1  # the next heartbeat refreshes the subscribed topics and the target

    # ---- assignment -------------------------------------------------------------------------------
    def _subscribed_topics(self, member: Member, topics: dict, may_describe) -> frozenset[str]:
        names = {t for t in member.subscribed_names if t in topics}
        if member.subscribed_regex:
            pattern = re.compile(member.subscribed_regex)
            names |= {t for t in topics if not t.startswith("__") and pattern.fullmatch(t) and may_describe(t)}
        return frozenset(names)

    def _subscription_metadata(self, group: ConsumerGroup, may_describe) -> dict[str, tuple[object, int]]:
        topics = self.topics()
        subscribed: set[str] = set()
        for member in group.members.values():
            subscribed |= self._subscribed_topics(member, topics, may_describe)
        return {name: topics[name] for name in sorted(subscribed)}

    def _update_target(self, group: ConsumerGroup, may_describe) -> None:
        topics = self.topics()
        subscriptions = {member_id: self._subscribed_topics(member, topics, may_describe)
                         for member_id, member in group.members.items()}
        chosen = [m.server_assignor for m in group.members.values() if m.server_assignor]
        name = max(set(chosen), key=lambda a: (chosen.count(a), a)) if chosen else self.assignors[0]
        counts = {topic: count for topic, (_, count) in group.subscription_metadata.items()}
        current = {member_id: {t: set(p) for t, p in assignment.items()} for member_id, assignment in group.target.items()}
        target = ASSIGNORS[name](subscriptions, counts, current)
        group.target = {member_id: {t: frozenset(p) for t, p in assignment.items() if p}
                        for member_id, assignment in target.items()}
        group.assignor = name
        group.assignment_epoch = group.group_epoch

    def _owned(self, topic_partitions) -> Assignment | None:
        if topic_partitions is None:
            return None
        by_id = {topic_id: name for name, (topic_id, _) in self.topics().items()}
        owned: dict[str, frozenset[int]] = {}
        for entry in topic_partitions:
            name = by_id.get(entry.topic_id)
            if name is not None:
                owned[name] = owned.get(name, frozenset()) | frozenset(entry.partitions)
        return owned

    # ---- timeouts ---------------------------------------------------------------------------------
    def expire(self) -> list[tuple[str, str]]:
        """Fence members past their session timeout or their rebalance timeout; returns (group, member)."""
        return fence_late_members(self.groups.values(), self.clock(), self.fence, self._save, "group")

    # ---- offsets ----------------------------------------------------------------------------------
    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int, version: int,
                               transactional: bool = False) -> int | None:
        """``ConsumerGroup.validateOffsetCommit``: None when the commit may go ahead."""
        return offset_commit_error(group.members, member_id, member_epoch, version, transactional)

    def validate_offset_fetch(self, group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int | None:
        return offset_fetch_error(group.members, member_id, member_epoch)


def _check_epoch(member: Member, epoch: int, owned: Assignment | None) -> None:
    """A heartbeat from an older epoch is accepted only as a retry (the previous epoch, owning nothing
    beyond the current assignment); anything else fences the member, which must rejoin."""
    if epoch > member.member_epoch or (epoch < member.member_epoch and (
            epoch != member.previous_member_epoch or not _subset(owned, member.assigned))):
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a member epoch ({epoch}) other than the one known by the "
                         f"group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                         f"and rejoin.")


def _subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(partitions <= assigned.get(topic, frozenset()) for topic, partitions in owned.items())

"""The KIP-1071 streams group coordinator: StreamsGroupHeartbeat as Kafka's ``GroupMetadataManager``
runs it (``streamsGroupHeartbeat``, ``streamsGroupLeave``).

The first member brings the topology; it is configured against the cluster's topics
(``topology.configure``): until its source topics exist the members are told MISSING_SOURCE_TOPICS,
and while internal topics are missing MISSING_INTERNAL_TOPICS (the handler creates them). A member
joining or leaving, a newer topology, or a change in the partitions of the topology's topics bumps the
group epoch; the sticky task assignor then computes a new target assignment, and each member
reconciles toward its part at its own heartbeats, revoking tasks before others get them
(``state.reconcile``). Members that stop heartbeating for the session timeout, or that do not revoke
within their rebalance timeout, are fenced. Offsets are the group's (``OffsetStore``), committed by
members at their current epoch.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ....error_codes import ErrorCode
from ..group_writes import forget, write_or_undo
from ..member_epochs import fence_late_members, offset_commit_error, offset_fetch_error
from .assignor import MemberSpec, assign
from .state import LEAVE_EPOCH, STATIC_LEAVE_EPOCH, Member, MemberState, StreamsGroup, Tasks, reconcile
from .store import StreamsGroupStore
from .topology import Configured, InvalidTopology, Status, TopicInfo, Topology, configure
from .warmups import caught_up, refine

__all__ = ["StreamsGroupCoordinator", "HeartbeatResult", "StreamsError"]

log = logging.getLogger(__name__)

ACCEPTABLE_RECOVERY_LAG = 10_000  # streams.acceptable.recovery.lag's default, sent to members
TASK_OFFSET_INTERVAL_MS = 60_000  # streams.task.offset.interval.ms's default


class StreamsError(Exception):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(message or ErrorCode(code).name)
        self.code = code
        self.message = message


@dataclass
class HeartbeatResult:
    error: int = ErrorCode.NONE
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    status: list[tuple[int, str]] = field(default_factory=list)
    assignment: Tasks | None = None  # None: unchanged, not sent
    to_create: tuple[TopicInfo, ...] = ()  # internal topics the handler should create
    endpoints: tuple | None = None  # None: the member's endpoint information is current
    endpoint_epoch: int = 0


class StreamsGroupCoordinator:
    """``topics()``: the cluster's topics, name -> (topic id, partition count); ``foreign(group)``: whether
    the id belongs to a group of another type (refused), ``drop_classic(group)`` forgets an empty classic
    group (offsets only) so the id can become a streams group; ``group_setting(group, name)`` the group's
    streams.* config, the broker's otherwise; ``num_warmup_replicas``: warm-up tasks at once (0: none,
    as Kafka 4.3's assignor places none)."""

    def __init__(self, topics: Callable[[], dict[str, tuple[object, int]]], *, session_timeout_ms: int,
                 heartbeat_interval_ms: int, num_standby_replicas: int, clock: Callable[[], float],
                 num_warmup_replicas: int = 0,
                 foreign: Callable[[str], bool] = lambda group_id: False,
                 drop_classic: Callable[[str], None] = lambda group_id: None,
                 store: StreamsGroupStore | None = None,
                 group_setting: Callable[[str, str], int] | None = None):
        self.topics = topics
        self.defaults = {"streams.session.timeout.ms": session_timeout_ms,
                         "streams.heartbeat.interval.ms": heartbeat_interval_ms,
                         "streams.num.standby.replicas": num_standby_replicas,
                         "streams.num.warmup.replicas": num_warmup_replicas}
        self.clock = clock
        self.foreign = foreign
        self.drop_classic = drop_classic
        self.store = store
        self.group_setting = group_setting
        self.groups: dict[str, StreamsGroup] = {}

    def setting(self, group_id: str, name: str) -> int:
        return self.group_setting(group_id, name) if self.group_setting is not None else self.defaults[name]

    # ---- durability -------------------------------------------------------------------------------
    def load(self) -> None:
        self.groups = self.store.load() if self.store is not None else {}
        now = self.clock()
        for group in self.groups.values():
            for member_id, member in group.members.items():
                self._start_deadlines(group, member, now)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    def forget(self, group_id: str) -> None:
        """Drop a group for good (DeleteGroups); raises OSError."""
        forget(self.groups, self.store, group_id)

    def _save(self, group_id: str) -> bool:
        return write_or_undo(self.groups, self.store, group_id, _carry_deadlines)

    def _start_deadlines(self, group: StreamsGroup, member: Member, now: float) -> None:
        group.session_deadlines[member.member_id] = now + self.setting(group.group_id, "streams.session.timeout.ms") / 1000
        if member.state is MemberState.UNREVOKED_TASKS:
            group.rebalance_deadlines.setdefault(member.member_id, now + max(member.rebalance_timeout_ms, 0) / 1000)
        else:
            group.rebalance_deadlines.pop(member.member_id, None)

    # ---- StreamsGroupHeartbeat --------------------------------------------------------------------
    def heartbeat(self, request, client_id: str, client_host: str) -> HeartbeatResult:
        existed = request.group_id in self.groups
        try:
            _validate(request)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                result = self._leave(request)
            else:
                result = self._heartbeat(request, client_id, client_host)
        except StreamsError as error:
            log.debug("streams group %s: heartbeat of %r refused: %s", request.group_id, request.member_id, error)
            result = HeartbeatResult(error.code, error.message)
            group = self.groups.get(request.group_id)
            if not existed and group is not None and not group.members:
                del self.groups[request.group_id]
        if not self._save(request.group_id):
            return HeartbeatResult(ErrorCode.NOT_COORDINATOR, "The group's state could not be written.")
        return result

    def _group(self, group_id: str, create: bool) -> StreamsGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self.foreign(group_id):
            raise StreamsError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        if not create:
            raise StreamsError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
        self.drop_classic(group_id)
        group = self.groups[group_id] = StreamsGroup(group_id)
        return group

    def _heartbeat(self, request, client_id: str, client_host: str) -> HeartbeatResult:
        epoch = request.member_epoch
        group = self._group(request.group_id, create=epoch == 0)
        owned = None if request.active_tasks is None else Tasks(
            _tasks(request.active_tasks), _tasks(request.standby_tasks), _tasks(request.warmup_tasks))
        member = self._member(group, request, owned)
        bump = member.member_epoch == 0 and member.member_id not in group.members  # a new member
        topology, replaced = _register_topology(group, request.topology)
        bump = bump or replaced
        updated = _updated(member, request, topology, client_id, client_host)
        bump = bump or (updated.process_id, updated.rack_id, updated.client_tags) != (
            member.process_id, member.rack_id, member.client_tags) and member.member_id in group.members
        bump = self._caught_up_now(group, updated) or bump
        configured = self._configure(group)
        counts = self._counts(group)
        if counts != group.partition_counts:
            group.partition_counts = counts
            bump = True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._update_target(group, configured)
        reconciled = reconcile(updated, group.assignment_epoch, group.target.get(updated.member_id, Tasks()),
                               group.members.values(), owned)
        group.put(reconciled)
        now = self.clock()
        if reconciled.state is MemberState.UNREVOKED_TASKS and (
                reconciled != updated or reconciled.member_id not in group.rebalance_deadlines):
            group.rebalance_deadlines[reconciled.member_id] = now + max(reconciled.rebalance_timeout_ms, 0) / 1000
        self._start_deadlines(group, reconciled, now)
        if request.shutdown_application:
            group.shutdown_requested_by = reconciled.member_id
        endpoints = self._endpoints(group)
        changed = (epoch == 0 or reconciled.assigned != member.assigned
                   or reconciled.member_epoch != member.member_epoch)
        return HeartbeatResult(
            member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.setting(group.group_id, "streams.heartbeat.interval.ms"),
            status=_status(group, reconciled, configured), assignment=reconciled.assigned if changed else None,
            to_create=configured.to_create,
            endpoints=endpoints if request.endpoint_information_epoch != group.endpoint_epoch else None,
            endpoint_epoch=group.endpoint_epoch)

    def _caught_up_now(self, group: StreamsGroup, updated: Member) -> bool:
        """Put the member's update in the group; whether its reported offsets have just brought one of its
        process's warm-up (or standby) tasks within the acceptable lag, so a held-back move can complete."""
        if self.defaults["streams.num.warmup.replicas"] <= 0:
            group.put(updated)
            return False
        process = updated.process_id
        warming = {(process, task) for m, target in group.target.items() for task in target.warmup | target.standby
                   if m in group.members and group.members[m].process_id == process}
        before = caught_up(group.members, ACCEPTABLE_RECOVERY_LAG) & warming
        group.put(updated)
        return bool((caught_up(group.members, ACCEPTABLE_RECOVERY_LAG) & warming) - before)

    def _member(self, group: StreamsGroup, request, owned: Tasks | None) -> Member:
        member_id, epoch, instance_id = request.member_id, request.member_epoch, request.instance_id
        if instance_id is not None:
            existing_id = group.static_members.get(instance_id)
            existing = group.members.get(existing_id) if existing_id is not None else None
            if existing is not None and existing.member_id != member_id:
                if epoch != 0 or existing.member_epoch != STATIC_LEAVE_EPOCH:
                    raise StreamsError(ErrorCode.UNRELEASED_INSTANCE_ID if epoch == 0 else ErrorCode.FENCED_INSTANCE_ID,
                                       f"Static member {member_id} with instance id {instance_id} cannot use it: it "
                                       f"is owned by member {existing.member_id}.")
                # the new instance takes over the old one's tasks, with no rebalance
                target = group.target.pop(existing.member_id, None)
                group.remove(existing.member_id)
                taken = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
                group.put(taken)
                if target is not None:
                    group.target[member_id] = target
                return taken
        member = group.members.get(member_id)
        if epoch == 0:
            if member is not None and member.member_epoch != STATIC_LEAVE_EPOCH:
                self.fence(group, member_id)  # it rejoins: start afresh
                member = None
            return member if member is not None else Member(member_id)
        if member is None:
            raise StreamsError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                            f"{group.group_id}.")
        if epoch > member.member_epoch or (epoch < member.member_epoch and (
                epoch != member.previous_member_epoch or owned is None
                or not _within(owned, member.assigned))):
            raise StreamsError(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The streams group member has a member epoch ({epoch}) other than the one known by "
                               f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                               f"tasks and rejoin.")
        return member

    def _leave(self, request) -> HeartbeatResult:
        group = self._group(request.group_id, create=False)
        member = group.members.get(request.member_id)
        if member is None:
            raise StreamsError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not a member of group "
                                                            f"{request.group_id}.")
        if request.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            group.put(replace(member, member_epoch=STATIC_LEAVE_EPOCH))  # back soon: its tasks wait for it
        else:
            self.fence(group, member.member_id)
        return HeartbeatResult(member_id=member.member_id, member_epoch=request.member_epoch)

    def fence(self, group: StreamsGroup, member_id: str) -> None:
        if group.remove(member_id) is not None:
            group.group_epoch += 1

    # ---- assignment -------------------------------------------------------------------------------
    def _counts(self, group: StreamsGroup) -> dict[str, int]:
        if group.topology is None:
            return {}
        topics = self.topics()
        return {t: topics[t][1] for t in sorted(group.topology.all_topics()) if t in topics}

    def _configure(self, group: StreamsGroup) -> Configured:
        if group.topology is None:
            return Configured({})
        return configure(group.topology, {name: count for name, (_, count) in self.topics().items()})

    def _update_target(self, group: StreamsGroup, configured: Configured) -> None:
        stateful = {s.subtopology_id for s in group.topology.subtopologies
                    if s.state_changelog_topics} if group.topology is not None else set()
        specs = {member_id: MemberSpec(member.process_id, group.target.get(member_id, Tasks()).active,
                                       group.target.get(member_id, Tasks()).standby)
                 for member_id, member in group.members.items()}
        assigned = assign(specs, configured.tasks, stateful,
                          self.setting(group.group_id, "streams.num.standby.replicas"))
        target = {m: Tasks(frozenset(active), frozenset(standby)) for m, (active, standby) in assigned.items()}
        group.target = refine(target, group.members, stateful, self.defaults["streams.num.warmup.replicas"],
                              ACCEPTABLE_RECOVERY_LAG)
        group.assignment_epoch = group.group_epoch

    def _endpoints(self, group: StreamsGroup) -> tuple:
        """(host, port, active partitions, standby partitions) of each member with a user endpoint, the
        partitions as ((topic, (partitions...)), ...); bumps the endpoint epoch when it changes."""
        inputs = {s.subtopology_id: s.inputs() for s in group.topology.subtopologies} if group.topology else {}

        def partitions(tasks) -> tuple:
            by_topic: dict[str, set[int]] = {}
            for sub, partition in tasks:
                for topic in inputs.get(sub, ()):
                    by_topic.setdefault(topic, set()).add(partition)
            return tuple((topic, tuple(sorted(ps))) for topic, ps in sorted(by_topic.items()))
        endpoints = tuple(sorted((m.user_endpoint[0], m.user_endpoint[1], partitions(m.assigned.active),
                                  partitions(m.assigned.standby))
                                 for m in group.members.values() if m.user_endpoint is not None))
        if endpoints != group.endpoints:
            group.endpoints = endpoints
            group.endpoint_epoch += 1
        return endpoints

    # ---- timeouts ---------------------------------------------------------------------------------
    def expire(self) -> list[tuple[str, str]]:
        """Fence members past their session or rebalance timeout; returns (group, member)."""
        return fence_late_members(self.groups.values(), self.clock(), self.fence, self._save, "streams group")

    # ---- offsets ----------------------------------------------------------------------------------
    def validate_offset_commit(self, group: StreamsGroup, member_id: str, member_epoch: int, version: int = 9,
                               transactional: bool = False) -> int | None:
        """``StreamsGroup.validateOffsetCommit``: None when the commit may go ahead."""
        return offset_commit_error(group.members, member_id, member_epoch, version, transactional)

    def validate_offset_fetch(self, group: StreamsGroup, member_id: str | None, member_epoch: int) -> int | None:
        return offset_fetch_error(group.members, member_id, member_epoch)


def _register_topology(group: StreamsGroup, requested) -> tuple[Topology | None, bool]:
    """The joining member's topology, and whether it became the group's: it does if the group has none
    (or no members), or if it is newer."""
    if requested is None:
        return None, False
    try:
        topology = Topology.from_request(requested)
    except InvalidTopology as error:
        raise StreamsError(ErrorCode.STREAMS_INVALID_TOPOLOGY, str(error)) from None
    if group.topology is None or topology.epoch > group.topology.epoch or not group.members:
        replaced = topology != group.topology
        group.topology = topology
        return topology, replaced
    if topology.epoch == group.topology.epoch and topology != group.topology:
        raise StreamsError(ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH,
                           f"A different topology was already registered with epoch {topology.epoch}.")
    return topology, False


def _updated(member: Member, request, topology: Topology | None, client_id: str, client_host: str) -> Member:
    """The member with what its heartbeat says (fields left out keep their values)."""
    endpoint = request.user_endpoint
    return replace(
        member, client_id=client_id, client_host=client_host,
        instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                              else member.rebalance_timeout_ms),
        topology_epoch=topology.epoch if topology is not None else member.topology_epoch,
        process_id=request.process_id or member.process_id or member.member_id,
        user_endpoint=(endpoint.host, endpoint.port) if endpoint is not None else member.user_endpoint,
        client_tags=(tuple((kv.key, kv.value) for kv in request.client_tags)
                     if request.client_tags is not None else member.client_tags),
        task_offsets=_offsets(request.task_offsets, member.task_offsets),
        task_end_offsets=_offsets(request.task_end_offsets, member.task_end_offsets))


def _status(group: StreamsGroup, member: Member, configured: Configured) -> list[tuple[int, str]]:
    status = [] if configured.status is None else [configured.status]
    if group.topology is not None and member.topology_epoch < group.topology.epoch:
        status.append((Status.STALE_TOPOLOGY, f"The member's topology epoch {member.topology_epoch} is behind the "
                                              f"group's topology epoch {group.topology.epoch}."))
    if group.shutdown_requested_by is not None:
        status.append((Status.SHUTDOWN_APPLICATION, f"A KafkaStreams instance encountered a fatal error and requested "
                                                    f"a shutdown for the entire application (member "
                                                    f"{group.shutdown_requested_by})."))
    return status


def _validate(request) -> None:
    """``throwIfStreamsGroupHeartbeatRequestIsInvalid``."""
    def invalid(message: str) -> StreamsError:
        return StreamsError(ErrorCode.INVALID_REQUEST, message)
    if request.topology is not None and any(s.source_topic_regex for s in request.topology.subtopologies):
        raise invalid("Regular expressions for source topics are not supported yet.")
    for value, name in ((request.member_id, "MemberId"), (request.group_id, "GroupId"),
                        (request.instance_id, "InstanceId"), (request.rack_id, "RackId")):
        if value is not None and value.strip() == "":
            raise invalid(f"{name} can't be empty.")
    epoch = request.member_epoch
    tasks = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        for listed, name in zip(tasks, ("ActiveTasks", "StandbyTasks", "WarmupTasks")):
            if listed:
                raise invalid(f"{name} must be empty when (re-)joining.")
        if request.topology is None:
            raise invalid("Topology must be non-null when (re-)joining.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise invalid(f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    if any(t is not None for t in tasks) and any(t is None for t in tasks):
        raise invalid("If one task-type is non-null, all must be non-null.")
    if epoch != 0 and request.topology is not None:
        raise invalid("Topology can only be provided when (re-)joining.")


def _tasks(entries) -> frozenset:
    return frozenset((entry.subtopology_id, p) for entry in entries or () for p in entry.partitions)


def _offsets(entries, previous: tuple) -> tuple:
    if entries is None:
        return previous
    return tuple(sorted((e.subtopology_id, e.partition, e.offset) for e in entries))


def _within(owned: Tasks, assigned: Tasks) -> bool:
    return owned.active <= assigned.active and owned.standby <= assigned.standby and owned.warmup <= assigned.warmup


def _carry_deadlines(failed: StreamsGroup, restored: StreamsGroup) -> None:
    """The restored members keep their deadlines; a member the failed write would have added has none."""
    for kept, carried in ((restored.session_deadlines, failed.session_deadlines),
                          (restored.rebalance_deadlines, failed.rebalance_deadlines)):
        kept.update((member_id, deadline) for member_id, deadline in carried.items() if member_id in restored.members)

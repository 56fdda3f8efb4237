"""The classic consumer-group coordinator: ``GroupCoordinator``, its lifecycle and the group queries.

The coordinator owns the groups and the collaborators that work on them, one concern a module:
``classic_state`` (states, members and groups as data), ``classic`` (``ClassicMembership``: JoinGroup,
SyncGroup, Heartbeat, LeaveGroup and the rebalance), ``offsets`` (``GroupOffsets``: OffsetCommit,
OffsetFetch), ``offsets_store`` (what survives a restart: offsets and each stable generation's members),
``consumer`` (Kafka 4's consumer groups) and ``streams`` (KIP-1071 streams groups), which share the group
ids and offsets.

A port of the protocol logic of Kafka's ``GroupCoordinator.scala`` / ``GroupMetadata.scala`` (the classic
group protocol) to asyncio: the purgatories become futures the request handlers await, and the delayed
operations (heartbeat expiry, rebalance timeout, initial rebalance delay, pending-sync expiry) become
loop timers; there is no polling loop.

Group states and their transitions are Kafka's::

    Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance -> ...

- JoinGroup parks the member until every known member has rejoined (or the rebalance timeout passes; the
  first rebalance of an empty group waits ``initial_rebalance_delay_ms``, extended while new members keep
  arriving, as ``InitialDelayedJoin`` does). Then a new generation starts, a protocol every member supports
  is chosen by the members' votes, and every parked JoinGroup is answered; the leader's answer carries all
  members' metadata. v4+ dynamic members without an id are answered MEMBER_ID_REQUIRED with a new id.
- SyncGroup from the leader stores the assignments and answers every member waiting in SyncGroup;
  members that do not send SyncGroup within the rebalance timeout are removed.
- Heartbeat answers REBALANCE_IN_PROGRESS while a rebalance prepares; a member that misses its session
  timeout is removed and the group rebalances.
- OffsetCommit / OffsetFetch keep offsets in an :class:`~kafkawire.broker.groups.offsets_store.OffsetStore`.

The broker is always the coordinator, so NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS never arise
(``start()`` loads everything before requests are served).
"""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ...error_codes import ErrorCode
from ... import messages  # (each message's module loads on first use)
from .consumer_store import ConsumerGroupStore
from .consumer import ConsumerGroupCoordinator
from .classic import ClassicMembership
from .offsets import GroupOffsets
from .group_configs import GroupConfigs
from .classic_state import (
    _GROUP_AUTHORIZED_OPERATIONS, _NO_AUTHORIZED_OPERATIONS, DEAD, NEW_MEMBER_JOIN_TIMEOUT_MS,
    NONE, OFFSET_METADATA_MAX_BYTES, STABLE, GroupState, _Group, _JoinResult, _Member, _resolve, _SyncResult,
)
from .offsets_store import GroupRecord, OffsetStore
from .state_files import STREAMS_GROUPS_FILE_NAME

if TYPE_CHECKING:
    from .streams import StreamsGroupCoordinator
    from .streams.state import StreamsGroup

__all__ = ["GroupCoordinator", "GroupState"]

log = logging.getLogger(__name__)


class GroupCoordinator:
    """Kafka's classic group coordinator and offset manager for a single broker (always the coordinator).

    Request methods take the decoded request and its version and return the response to encode at that
    version; JoinGroup and SyncGroup may wait (for the rebalance, for the leader's assignment).
    """

    def __init__(self, data_dir: Path, *, initial_rebalance_delay_ms: int = 3000, clock=time.monotonic,
                 min_session_timeout_ms: int = 6000, max_session_timeout_ms: int = 1800000,
                 new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS,
                 offset_metadata_max_bytes: int = OFFSET_METADATA_MAX_BYTES,
                 partition_exists: Callable[[str, int], bool] | None = None,
                 fsync: bool = False, topic_metadata: Callable[[], dict] = dict,
                 consumer_session_timeout_ms: int = 45000, consumer_heartbeat_interval_ms: int = 5000,
                 consumer_assignors: tuple[str, ...] = ("uniform", "range"),
                 streams_session_timeout_ms: int = 45000, streams_heartbeat_interval_ms: int = 5000,
                 streams_num_standby_replicas: int = 0, streams_num_warmup_replicas: int = 0,
                 configs: GroupConfigs | None = None) -> None:
        """``partition_exists(topic, partition)``, if given, makes OffsetCommit answer
        UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist (as KafkaApis does); ``fsync`` makes
        every commit fsync the offsets file (otherwise it is written, not synced, before the answer);
        ``configs``: the groups' own configs (GROUP resources), read by consumer and share groups."""
        self.data_dir = Path(data_dir)
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.clock = clock
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.new_member_join_timeout_ms = new_member_join_timeout_ms
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.partition_exists = partition_exists
        self.store = OffsetStore(self.data_dir, fsync=fsync)
        self.configs = configs
        # whether a group id is a share group's (set by the share-group APIs): such ids are refused here
        self.share_group: Callable[[str], bool] = lambda group_id: False
        self.groups: dict[str, _Group] = {}  # the classic groups
        # KIP-848 groups: the same ids and offsets, the other protocol (``topic_metadata()``: the
        # cluster's topics, name -> (topic id, partition count))
        self.consumer = ConsumerGroupCoordinator(
            topic_metadata, session_timeout_ms=consumer_session_timeout_ms,
            heartbeat_interval_ms=consumer_heartbeat_interval_ms, assignors=consumer_assignors,
            clock=lambda: self.clock(), classic_in_use=self._classic_in_use, drop_classic=self._drop_empty_classic,
            store=ConsumerGroupStore(self.data_dir, fsync=fsync),
            group_setting=configs.value if configs is not None else None,
            share_group=lambda group_id: self.share_group(group_id) or group_id in self.streams_groups)
        # KIP-1071 streams groups: the same ids and offsets, their own protocol (built by ``streams``)
        self._streams: StreamsGroupCoordinator | None = None
        self._streams_settings: dict[str, Any] = dict(
            session_timeout_ms=streams_session_timeout_ms, heartbeat_interval_ms=streams_heartbeat_interval_ms,
            num_standby_replicas=streams_num_standby_replicas, num_warmup_replicas=streams_num_warmup_replicas,
            group_setting=configs.value if configs is not None else None)
        self._fsync = fsync
        self._topic_metadata = topic_metadata
        self.membership = ClassicMembership(self)
        self.offsets = GroupOffsets(self)
        self.active = False
        self.loop: asyncio.AbstractEventLoop | None = None  # set by start(): the timers run on it

    @property
    def streams(self) -> StreamsGroupCoordinator:
        """The streams groups' coordinator, built (and its stored groups loaded) on first use."""
        return self._streams if self._streams is not None else self._build_streams()

    def _build_streams(self) -> StreamsGroupCoordinator:
        from .streams import StreamsGroupCoordinator, StreamsGroupStore  # (most brokers never see one)
        self._streams = StreamsGroupCoordinator(
            self._topic_metadata, clock=lambda: self.clock(), drop_classic=self._drop_empty_classic,
            foreign=lambda group_id: (self._classic_in_use(group_id) or group_id in self.consumer.groups
                                      or self.share_group(group_id)),
            store=StreamsGroupStore(self.data_dir, fsync=self._fsync), **self._streams_settings)
        self._streams.load()
        return self._streams

    @property
    def streams_groups(self) -> Mapping[str, StreamsGroup]:
        """The streams groups, none while their coordinator is not built."""
        return self._streams.groups if self._streams is not None else {}

    def expire_members(self) -> None:
        """Fence consumer and streams group members past their session or rebalance timeout."""
        self.consumer.expire()
        if self._streams is not None:
            self._streams.expire()

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load committed offsets and group generations from ``data_dir``; start serving."""
        self.load()

    def load(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """``start``, its timers on ``loop`` (default: the running loop's; the broker builds its coordinator on
        first use, which may be outside its loop, as a test's look at ``broker.groups``)."""
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        self.store.load()
        if self.configs is not None:
            self.configs.load()
        self.consumer.load()
        if self._streams is not None:
            self._streams.load()
        elif (self.data_dir / STREAMS_GROUPS_FILE_NAME).exists():  # else built on the first streams request
            self._build_streams()
        self.groups.clear()
        for group_id in (set(self.store.offsets) | set(self.store.groups)) - set(self.consumer.groups) \
                - set(self.streams_groups):
            record = self.store.groups.get(group_id)
            self.groups[group_id] = self._restore(group_id, record) if record else _Group(group_id)
        self.active = True

    def _restore(self, group_id: str, record: GroupRecord) -> _Group:
        """A group as stored: Stable with its members (each given a session timeout to be heard from
        again, as Kafka's loadGroup does), or Empty at its generation."""
        group = _Group(group_id, record.generation, record.protocol_type)
        if not record.members:
            return group
        group.state = STABLE
        group.protocol_name = record.protocol
        for stored in record.members:
            member = _Member(stored.member_id, stored.group_instance_id, stored.client_id, stored.client_host,
                             stored.rebalance_timeout_ms, stored.session_timeout_ms, record.protocol_type,
                             [(record.protocol, stored.metadata)])
            member.assignment = stored.assignment
            group.add(member)
            self.membership.schedule_member_expiry(group, member)
        group.leader_id = record.leader if record.leader in group.members else next(iter(group.members))
        return group

    async def close(self) -> None:
        """Cancel every timer, answer parked requests NOT_COORDINATOR (clients look the coordinator up
        again) and close the offsets file."""
        self.active = False
        for group in self.groups.values():
            group.cancel_timers()
            for member in group.members.values():
                fut, member.join_future = member.join_future, None
                _resolve(fut, _JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                fut, member.sync_future = member.sync_future, None
                _resolve(fut, _SyncResult(ErrorCode.NOT_COORDINATOR))
        self.store.close()
        self.consumer.close()
        if self._streams is not None:
            self._streams.close()

    async def __aenter__(self) -> GroupCoordinator:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- queries for tests and tools -------------------------------------------------------------------

    def committed(self, group_id: str) -> dict[tuple[str, int], tuple[int, str]]:
        """``{(topic, partition): (offset, metadata)}`` committed by ``group_id``."""
        return {key: (c.offset, c.metadata) for key, c in self.store.offsets.get(group_id, {}).items()}

    def group_state(self, group_id: str) -> str:
        """The group's state name (Kafka's), "Dead" for an unknown group."""
        group = self.groups.get(group_id)
        if group is None and group_id in self.consumer.groups:
            return self.consumer.groups[group_id].state
        if group is None and group_id in self.streams_groups:
            return self.streams_groups[group_id].state
        return DEAD.value if group is None else group.state.value

    def _classic_in_use(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def _drop_empty_classic(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            del self.groups[group_id]

    # -- ListGroups / DescribeGroups -------------------------------------------------------------------

    async def list_groups(self, request, version: int) -> messages.ListGroupsResponse:
        if not self.active:
            return messages.ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        states = {s.lower() for s in request.states_filter} if version >= 4 else set()
        types = {t.lower() for t in request.types_filter} if version >= 5 else set()
        listed = []
        if not types or "classic" in types:
            for group in self.groups.values():
                if states and group.state.value.lower() not in states:
                    continue
                listed.append(messages.ListGroupsResponse.ListedGroup(
                    group_id=group.group_id, protocol_type=group.protocol_type or "",
                    group_state=group.state.value, group_type="classic"))
        modern: list[tuple[str, Iterable]] = [("consumer", self.consumer.groups.values()),
                                               ("streams", self.streams_groups.values())]
        for kind, groups in modern:  # KIP-848 and KIP-1071 groups: the type is also the protocol type
            if types and kind not in types:
                continue
            for modern_group in groups:
                if states and modern_group.state.lower() not in states:
                    continue
                listed.append(messages.ListGroupsResponse.ListedGroup(
                    group_id=modern_group.group_id, protocol_type=kind, group_state=modern_group.state,
                    group_type=kind))
        return messages.ListGroupsResponse(throttle_time_ms=0, error_code=NONE, groups=listed)

    async def describe_groups(self, request, version: int) -> messages.DescribeGroupsResponse:
        include_ops = version >= 3 and request.include_authorized_operations
        described = [self._describe(group_id, version, include_ops) for group_id in request.groups]
        return messages.DescribeGroupsResponse(throttle_time_ms=0, groups=described)

    def _describe(self, group_id: str, version: int, include_ops: bool):
        response = messages.DescribeGroupsResponse
        Described, Member = response.DescribedGroup, response.DescribedGroupMember
        operations = _GROUP_AUTHORIZED_OPERATIONS if include_ops else _NO_AUTHORIZED_OPERATIONS
        error = self.membership.status_error(group_id, allow_empty=True)
        if error is not None:
            return Described(error_code=error, group_id=group_id, authorized_operations=operations)
        group = self.groups.get(group_id)
        if group is None and (self.share_group(group_id) or group_id in self.streams_groups):
            # as Kafka's classicGroup lookup refuses a group of another type
            return Described(error_code=ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else NONE,
                             error_message=f"Group {group_id} is not a classic group." if version >= 6 else None,
                             group_id=group_id, group_state=DEAD.value, protocol_type="",
                             protocol_data="", members=[], authorized_operations=operations)
        if group is None:
            # v6 says so (KIP-1043); before, an unknown group is described as Dead with no error
            return Described(error_code=ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else NONE,
                             error_message=f"Group {group_id} not found." if version >= 6 else None,
                             group_id=group_id, group_state=DEAD.value, protocol_type="",
                             protocol_data="", members=[], authorized_operations=operations)
        stable = group.state is STABLE
        members = [Member(
            member_id=m.member_id, group_instance_id=m.group_instance_id if version >= 4 else None,
            client_id=m.client_id, client_host=m.client_host,
            member_metadata=m.metadata(group.protocol_name) if stable else b"",
            member_assignment=m.assignment if stable else b"") for m in group.members.values()]
        return Described(error_code=NONE, group_id=group_id, group_state=group.state.value,
                         protocol_type=group.protocol_type or "",
                         protocol_data=(group.protocol_name or "") if stable else "",
                         members=members, authorized_operations=operations)

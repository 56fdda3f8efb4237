"""Committed offsets of the classic group coordinator: OffsetCommit (checked against the group's
generation and member, as ``GroupCoordinator.handleCommitOffsets``) and OffsetFetch, over the
``OffsetStore``. The ``GroupCoordinator`` owns one ``GroupOffsets``."""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ...error_codes import ErrorCode
from ... import messages  # (each message's module loads on first use)
from .classic_state import COMPLETING, DEAD, EMPTY, NONE, PREPARING, STABLE, _Group
from .offsets_store import CommittedOffset
from .offsets_topic import offsets_partition_for

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

__all__ = ["GroupOffsets"]

log = logging.getLogger(__name__)


class GroupOffsets:
    """OffsetCommit and OffsetFetch of a ``GroupCoordinator``'s groups."""

    def __init__(self, coordinator: GroupCoordinator):
        self.coordinator = coordinator  # its settings may change while it runs
        self.groups = coordinator.groups
        self.store = coordinator.store
        self.consumer = coordinator.consumer
        self.membership = coordinator.membership

    # -- OffsetCommit ----------------------------------------------------------------------------------

    async def offset_commit(self, request, version: int) -> messages.OffsetCommitResponse:
        errors = self._handle_commit(request, version)
        Topic, Partition = messages.OffsetCommitResponse.OffsetCommitResponseTopic, \
            messages.OffsetCommitResponse.OffsetCommitResponsePartition
        return messages.OffsetCommitResponse(throttle_time_ms=0, topics=[
            Topic(name=topic.name, topic_id=topic.topic_id, partitions=[
                Partition(partition_index=p.partition_index, error_code=e)
                for p, e in zip(topic.partitions, topic_errors)])
            for topic, topic_errors in zip(request.topics, errors)])

    def _handle_commit(self, request, version) -> list[list[int]]:
        """Per request topic, the error code of each of its partitions."""
        group_id = request.group_id
        generation = request.generation_id_or_member_epoch if version >= 1 else -1
        member_id = request.member_id if version >= 1 else ""
        instance_id = request.group_instance_id if version >= 7 else None
        error = self.membership.status_error(group_id, allow_empty=True)
        group = None
        consumer_group = self.consumer.groups.get(group_id)
        if error is None and consumer_group is not None:  # KIP-848: the member epoch is the generation
            error = self.consumer.validate_offset_commit(consumer_group, member_id, generation, version)
            if error is not None:
                return [[error] * len(topic.partitions) for topic in request.topics]
            return self._store_commit(group_id, request, version)
        streams_group = self.coordinator.streams_groups.get(group_id)
        if error is None and streams_group is not None:  # KIP-1071: the member epoch too
            error = self.coordinator.streams.validate_offset_commit(streams_group, member_id, generation, version)
            if error is not None:
                return [[error] * len(topic.partitions) for topic in request.topics]
            return self._store_commit(group_id, request, version)
        if error is None:
            group = self.groups.get(group_id)
            if group is None:
                if generation < 0:  # not using group management: a standalone commit
                    group = self.groups[group_id] = _Group(group_id)
                else:
                    error = ErrorCode.ILLEGAL_GENERATION
        if error is None:
            assert group is not None  # found or made above
            error = self._validate_offset_commit(group, generation, member_id, instance_id)
        if error is None:
            assert group is not None
            if group.state is COMPLETING:
                # The member has its JoinGroup answer but not its assignment yet.
                error = ErrorCode.REBALANCE_IN_PROGRESS
            elif group.state in (STABLE, PREPARING):
                # Commits during a rebalance are allowed (heartbeats tell the member to rejoin).
                member = group.members.get(member_id)
                if member is not None:
                    self.membership.schedule_member_expiry(group, member)
        if error is not None:
            return [[error] * len(topic.partitions) for topic in request.topics]
        return self._store_commit(group_id, request, version)

    def _store_commit(self, group_id: str, request, version: int) -> list[list[int]]:
        now_ms = int(time.time() * 1000)
        results: list[list[int]] = []
        entries: list[tuple[tuple[str, int], CommittedOffset]] = []
        positions: list[tuple[int, int]] = []  # where each entry's result goes
        for t, topic in enumerate(request.topics):
            topic_errors: list[int] = []
            for p, partition in enumerate(topic.partitions):
                metadata = partition.committed_metadata
                if metadata is not None and len(metadata.encode("utf-8")) > self.coordinator.offset_metadata_max_bytes:
                    topic_errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                elif self.coordinator.partition_exists is not None and \
                        not self.coordinator.partition_exists(topic.name, partition.partition_index):
                    topic_errors.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    topic_errors.append(NONE)
                    entries.append(((topic.name, partition.partition_index), CommittedOffset(
                        partition.committed_offset,
                        partition.committed_leader_epoch if version >= 6 else -1,
                        metadata or "", now_ms)))
                    positions.append((t, p))
            results.append(topic_errors)
        if entries:
            try:
                self.store.commit(group_id, entries)
            except OSError as exc:
                log.error("could not store offsets of group %s: %s", group_id, exc)
                for t, p in positions:
                    results[t][p] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return results

    def _validate_offset_commit(self, group: _Group, generation: int, member_id: str,
                                instance_id: str | None):
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation >= 0 or member_id or instance_id is not None:
            error = self.membership.validate_current_member(group, member_id, instance_id)
            if error is None and generation != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            return error
        if group.state is not EMPTY:  # only members may commit for a group that has members
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # -- TxnOffsetCommit (KIP-98, KIP-447) -------------------------------------------------------------

    def txn_offset_commit(self, request, version: int) -> dict[tuple[str, int], int]:
        """Offsets committed in the producer's transaction: kept pending until its marker (checked
        against the group's member and generation from v3, as ``doTxnCommitOffsets``). Returns each
        requested partition's error code."""
        group_id = request.group_id
        keys = [(topic.name, p.partition_index) for topic in request.topics for p in topic.partitions]
        error = self.membership.status_error(group_id, allow_empty=True)
        consumer_group = self.consumer.groups.get(group_id)
        if error is None and consumer_group is not None:
            error = self.consumer.validate_offset_commit(
                consumer_group, request.member_id if version >= 3 else "",
                request.generation_id if version >= 3 else -1, version, transactional=True)
        elif error is None and group_id in self.coordinator.streams_groups:
            error = self.coordinator.streams.validate_offset_commit(
                self.coordinator.streams_groups[group_id], request.member_id if version >= 3 else "",
                request.generation_id if version >= 3 else -1, version, transactional=True)
        elif error is None:
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = _Group(group_id)
            error = self._validate_txn_offset_commit(group, request, version)
        if error is not None:
            return dict.fromkeys(keys, error)
        now_ms = int(time.time() * 1000)
        results: dict[tuple[str, int], int] = {}
        entries: list[tuple[tuple[str, int], CommittedOffset]] = []
        for topic in request.topics:
            for partition in topic.partitions:
                key = (topic.name, partition.partition_index)
                metadata = partition.committed_metadata
                if metadata is not None and len(metadata.encode("utf-8")) > self.coordinator.offset_metadata_max_bytes:
                    results[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                elif self.coordinator.partition_exists is not None and not self.coordinator.partition_exists(*key):
                    results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    results[key] = NONE
                    entries.append((key, CommittedOffset(partition.committed_offset,
                                                         partition.committed_leader_epoch if version >= 2 else -1,
                                                         metadata or "", now_ms)))
        try:
            self.store.commit_pending(group_id, request.producer_id, entries)
        except OSError as exc:
            log.error("could not store transactional offsets of group %s: %s", group_id, exc)
            results.update(dict.fromkeys((key for key, _ in entries), ErrorCode.COORDINATOR_NOT_AVAILABLE))
        return results

    def _validate_txn_offset_commit(self, group: _Group, request, version: int):
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if version < 3:
            return None
        instance_id = request.group_instance_id
        if instance_id is not None and group.static_members.get(instance_id, request.member_id) != request.member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        if request.member_id and request.member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if request.generation_id >= 0 and request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    def complete_transactional_offsets(self, producer_id: int, commit: bool, offsets_partitions: set[int]) -> None:
        """A transaction marker reached these ``__consumer_offsets`` partitions: the producer's pending
        offsets of the groups there are committed (or dropped). Raises OSError."""
        for group_id in [g for g, by_producer in self.store.pending.items() if producer_id in by_producer]:
            if offsets_partition_for(group_id) in offsets_partitions:
                self.store.complete_pending(group_id, producer_id, commit)

    # -- OffsetFetch -----------------------------------------------------------------------------------

    async def offset_fetch(self, request, version: int) -> messages.OffsetFetchResponse:
        if version >= 8:
            Group = messages.OffsetFetchResponse.OffsetFetchResponseGroup
            GroupTopic = messages.OffsetFetchResponse.OffsetFetchResponseTopics
            GroupPartition = messages.OffsetFetchResponse.OffsetFetchResponsePartitions
            groups = []
            for requested in request.groups:
                consumer_group = self.consumer.groups.get(requested.group_id)
                refused = None
                streams_group = self.coordinator.streams_groups.get(requested.group_id)
                if version >= 9 and consumer_group is not None:
                    refused = self.consumer.validate_offset_fetch(consumer_group, requested.member_id,
                                                                  requested.member_epoch)
                elif version >= 9 and streams_group is not None:
                    refused = self.coordinator.streams.validate_offset_fetch(streams_group, requested.member_id,
                                                                             requested.member_epoch)
                if refused is not None:
                    groups.append(Group(group_id=requested.group_id, error_code=refused, topics=[]))
                    continue
                error, topics = self._fetch_offsets(requested.group_id, requested.topics, request.require_stable)
                groups.append(Group(group_id=requested.group_id, error_code=error, topics=[
                    GroupTopic(name=name, partitions=[GroupPartition(
                        partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                        error_code=pe) for p, o, e, m, pe in partitions])
                    for name, partitions in topics]))
            return messages.OffsetFetchResponse(throttle_time_ms=0, groups=groups)
        Topic = messages.OffsetFetchResponse.OffsetFetchResponseTopic
        Partition = messages.OffsetFetchResponse.OffsetFetchResponsePartition
        error, topics = self._fetch_offsets(request.group_id, request.topics, version >= 7 and request.require_stable)
        if error != NONE and version < 2:  # no top-level error code: report it on every partition
            topics = [(name, [(p, -1, -1, "", error) for p, *_ in partitions]) for name, partitions in topics]
        return messages.OffsetFetchResponse(throttle_time_ms=0, error_code=error if version >= 2 else 0, topics=[
            Topic(name=name, partitions=[Partition(
                partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=pe)
                for p, o, e, m, pe in partitions])
            for name, partitions in topics])

    def _fetch_offsets(self, group_id: str, requested_topics, require_stable: bool = False):
        """(group error, [(topic, [(partition, offset, leader epoch, metadata, error)])]).

        ``requested_topics`` None means every partition the group has committed. Requested partitions
        without a committed offset get offset -1 and no error, as in Kafka. With ``require_stable``
        (KIP-447), a partition with offsets pending in an open transaction is UNSTABLE_OFFSET_COMMIT.
        """
        error = self.membership.status_error(group_id, allow_empty=True)
        if error is not None:
            return error, [(t.name, [(p, -1, -1, "", error) for p in t.partition_indexes])
                           for t in requested_topics or ()]
        committed = self.store.offsets.get(group_id, {})
        if requested_topics is None:
            by_topic: dict[str, list] = {}
            for (topic, partition), c in sorted(committed.items()):
                by_topic.setdefault(topic, []).append(
                    (partition, c.offset, c.leader_epoch, c.metadata, NONE))
            return NONE, list(by_topic.items())
        topics = []
        for topic in requested_topics:
            partitions = []
            for p in topic.partition_indexes:
                found = committed.get((topic.name, p))
                if require_stable and self.store.has_pending(group_id, topic.name, p):
                    partitions.append((p, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
                elif found is None:
                    partitions.append((p, -1, -1, "", NONE))
                else:
                    partitions.append((p, found.offset, found.leader_epoch, found.metadata, NONE))
            topics.append((topic.name, partitions))
        return NONE, topics

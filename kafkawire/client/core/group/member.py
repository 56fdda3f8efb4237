"""GroupMember: a consumer in a classic group, sans I/O. The membership itself (coordinator, JoinGroup,
SyncGroup, heartbeats, leaving) is ``membership``; this adds what a consumer does with it, as
Java's ConsumerCoordinator does:

* Assignments: the leader runs the chosen assignor over every member's subscription with the partition
  counts it knows, and rejoins when a group topic's count changes; an assignment naming topics the
  member does not subscribe to is refused (the member rejoins). Under the cooperative protocol
  (``rebalance``) what the new assignment takes away is revoked (committed first with auto-commit) and
  the member rejoins at once; PartitionsAssigned then names the added partitions.
* Offsets: OffsetFetch for each new partition (CommittedOffsets with request_id None) and on request
  (``fetch_committed``). OffsetCommit carries the generation and member id while in a group; ``commit``
  without a timeout is commitAsync (one attempt), with one commitSync (retriable errors retried until
  it passes). Auto-commit every auto.commit.interval.ms while stable, and before partitions are given
  up. OffsetCommit and OffsetFetch v10 name topics by id, sent only when every topic's id is known.
"""
from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kafkawire.error_codes import ErrorCode
from kafkawire.errors import DecodeError
from kafkawire.messages import ApiKey, JoinGroupResponse, OffsetCommitResponse, OffsetFetchResponse, SyncGroupRequest

from ...errors import CommitFailedError, GroupError, RebalanceInProgressError
from .assignors import decode_assignment
from ..consumer.config import ConsumerConfig
from .membership import GroupMembership, ResponseHandler
from .protocol import (
    COORDINATOR_ERRORS, NO_GENERATION, RETRIABLE_CODES, TOPIC_ID_VERSION,
    CommitCompleted, CommittedOffsets, GroupFailure, MemberState, OffsetAndMetadata, OutgoingRequest,
    PartitionsAssigned, error_name, group_error, worst_error,
)
from .requests import (
    commit_error_codes, leader_assignment, offset_commit_request, offset_fetch_request, read_offset_fetch,
)
from .rebalance import EAGER, assignment_change
from ..topic_partition import TopicPartition

__all__ = ["GroupMember"]

E = ErrorCode


@dataclass(eq=False)
class _Commit:
    request_id: int
    offsets: dict[TopicPartition, OffsetAndMetadata]
    deadline: float
    retry: bool  # commitSync: retry retriable errors until the deadline
    auto: bool
    retry_at: float = 0.0
    request: OutgoingRequest | None = None


@dataclass(eq=False)
class _OffsetFetch:
    request_id: int | None  # None: for the current assignment
    partitions: tuple[TopicPartition, ...]
    deadline: float | None
    assignment: tuple[TopicPartition, ...] | None = None  # the assignment it was made for
    retry_at: float = 0.0
    request: OutgoingRequest | None = None


class GroupMember(GroupMembership):
    """One consumer's group membership, assignments and offsets. A driver (the asyncio layer, or a test)
    runs it::

        member = GroupMember(config, positions=lambda: consumed_positions)  # config.group_id is required
        member.set_api_versions(negotiated)      # per API key the broker's (min, max), or just max
        member.subscribe(["orders"], now_ms)
        while not member.closed:
            member.record_poll(now_ms)           # whenever the application polls
            member.update_metadata({"orders": 12}, now_ms)   # counts of member.metadata_topics
            for request in member.poll(now_ms):  # destination None: any broker, else the Coordinator
                send request.body at request.version, then hand the answer to
                member.handle_response(request, response, now_ms), or member.handle_failure(request, now_ms)
            for event in member.drain_events():  # PartitionsRevoked / Lost / Assigned, CommittedOffsets,
                handle(event)                    # CommitCompleted, GroupFailure
            wait for a response, or at most member.timeout_ms(now_ms)

    Call ``poll`` again after every other call: each may make a request ready. Requests expire by
    themselves and late answers are ignored, so a driver may drop them freely.
    """

    def __init__(self, config: ConsumerConfig, *,
                 positions: Callable[[], Mapping[TopicPartition, int | OffsetAndMetadata]] | None = None,
                 group_instance_id: str | None = None, api_versions: Mapping[int, object] | None = None):
        if config.group_id and config.enable_auto_commit and positions is None:
            raise ValueError("enable.auto.commit needs a positions() callable giving the consumed positions")
        super().__init__(config, group_instance_id=group_instance_id, api_versions=api_versions)
        self._positions = positions
        self._topic_ids: dict[str, uuid.UUID] = {}  # from the metadata (set_topic_ids), for v10 requests
        self._metadata: dict[str, int] = {}  # partition counts by topic
        self._group_topics: frozenset[str] = frozenset()  # all members' topics, when leader
        self._assignment_snapshot: dict[str, int | None] | None = None  # leader: counts it assigned with
        self._commits: list[_Commit] = []
        self._fetches: list[_OffsetFetch] = []
        self._auto_commit_due: float | None = None
        self._auto_commit: _Commit | None = None
        self._ids = itertools.count(1)

    def _response_handlers(self) -> dict[ApiKey, ResponseHandler]:
        return {**super()._response_handlers(), ApiKey.OFFSET_COMMIT: self._on_commit_response,
                ApiKey.OFFSET_FETCH: self._on_fetch_response}

    # ---- metadata -------------------------------------------------------------------------------------

    @property
    def metadata_topics(self) -> frozenset[str]:
        """The topics whose partition counts the member needs: its own, and as leader the whole group's."""
        return frozenset(self.subscription or ()) | self._group_topics

    def update_metadata(self, partition_counts: Mapping[str, int | None], now_ms: float) -> None:
        """Partition counts by topic (None: the topic is unknown). A leader rejoins when a group topic's
        count is now known and differs from the one it assigned with, so that new partitions (or a topic it
        could not assign before) get assigned. A count turning unknown changes nothing: a partial metadata
        answer must not cause a rebalance."""
        for topic, count in partition_counts.items():
            if count is None:
                self._metadata.pop(topic, None)
            elif isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"partition count of {topic!r} must be a non-negative int, not {count!r}")
            else:
                self._metadata[topic] = count
        if self.leader and self._assignment_snapshot is not None and self._phase is MemberState.STABLE:
            changed = [topic for topic, assigned in self._assignment_snapshot.items()
                       if self._metadata.get(topic) is not None and self._metadata[topic] != assigned]
            if changed:
                self._request_rejoin(f"the partition count of {', '.join(sorted(changed))} changed", now_ms)

    def set_topic_ids(self, topic_ids: Mapping[str, uuid.UUID]) -> None:
        """Topic ids by name (the metadata's), for OffsetCommit and OffsetFetch v10, which name topics by id."""
        self._topic_ids = dict(topic_ids)

    # ---- offsets the application asks for -------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], now_ms: float,
               timeout_ms: int | None = None) -> int:
        """Commit ``offsets`` (the next offsets to consume). Returns the request id a CommitCompleted event
        will carry. No timeout: commitAsync (one attempt; waits at most request.timeout.ms for a
        coordinator). A timeout: commitSync (retriable errors retried until it passes)."""
        self._check_open()
        commit = _Commit(next(self._ids), _normalize(offsets),
                         now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms),
                         retry=timeout_ms is not None, auto=False)
        if not commit.offsets:
            self._events.append(CommitCompleted(commit.request_id, {}))
        else:
            self._commits.append(commit)
        return commit.request_id

    def fetch_committed(self, partitions: Iterable[TopicPartition], now_ms: float,
                        timeout_ms: int | None = None) -> int:
        """Ask for the committed offsets of ``partitions``; a CommittedOffsets event carries the id returned."""
        self._check_open()
        request_id = next(self._ids)
        fetch = _OffsetFetch(request_id, tuple(dict.fromkeys(partitions)),
                             now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms))
        if not fetch.partitions:
            self._events.append(CommittedOffsets(request_id, {}))
        else:
            self._fetches.append(fetch)
        return request_id

    # ---- the consumer protocol's assignments ----------------------------------------------------------

    def _sync_assignments(self, response: JoinGroupResponse,
                          protocol: str) -> list[SyncGroupRequest.SyncGroupRequestAssignment]:
        if not self.leader:
            self._group_topics, self._assignment_snapshot = frozenset(), None
            return []
        if response.skip_assignment:  # a static leader rejoining: the assignments stand (KIP-814)
            return []
        leading = leader_assignment(protocol, response.members, self._metadata)
        for member_id, exc in leading.undecodable:
            self._events.append(GroupFailure(GroupError(
                f"member {member_id} sent a subscription that does not decode ({exc}); it gets no partitions"),
                fatal=False))
        self._group_topics, self._assignment_snapshot = leading.group_topics, leading.counts
        return leading.assignments

    def _join_complete(self, assignment: bytes | bytearray | memoryview, now_ms: float) -> None:
        try:
            partitions = decode_assignment(assignment).partitions
        except DecodeError as exc:
            self._fatal(GroupError(f"the assignment from the group leader does not decode: {exc}"), now_ms)
            return
        self._session_deadline = now_ms + self.config.session_timeout_ms
        stray = sorted({tp.topic for tp in partitions} - set(self.subscription or ()))
        if stray:
            # Java refuses an assignment that does not match the subscription and rejoins.
            self._events.append(GroupFailure(GroupError(
                f"the leader assigned partitions of topics this member does not subscribe to ({', '.join(stray)}); "
                f"rejoining"), fatal=False))
            self._phase = MemberState.REBALANCING
            self._rejoin_reason = "assignment did not match the subscription"
            self._join_retry_at = now_ms + self.config.retry_backoff_ms
            return
        change = assignment_change(self.config.rebalance_protocol, self.assignment, partitions)
        self.last_assignment = (partitions, self.generation.generation_id)
        self._phase = MemberState.STABLE
        self._rejoin_reason = None
        if self.config.enable_auto_commit:
            self._auto_commit_due = now_ms + self.config.auto_commit_interval_ms
        if change.revoked:  # cooperative: what the leader moves elsewhere goes first (committed with auto-commit)
            self._commit_before_revoking(now_ms)
            self._revoke(change.revoked)
        self.assignment = partitions
        self._events.append(PartitionsAssigned(partitions, self.generation.generation_id, self.generation.member_id,
                                               self.leader, added=change.added if change.incremental else None))
        if change.added:
            self._fetches.append(_OffsetFetch(None, change.added, None, assignment=partitions))
        if change.revoked:  # so that the leader can give them to their new owners (KIP-429)
            self._request_rejoin(f"{len(change.revoked)} partitions revoked for other members", now_ms)

    def _forget_generation(self, *, keep_member_id: bool) -> None:
        super()._forget_generation(keep_member_id=keep_member_id)
        self._group_topics, self._assignment_snapshot = frozenset(), None

    # ---- what the membership asks of the offsets ------------------------------------------------------

    def _has_offset_work(self) -> bool:
        return bool(self._commits or self._fetches)

    def _commits_pending(self) -> bool:
        return bool(self._commits)

    def _offset_timers(self) -> list[float]:
        times = []
        if self._auto_commit_due is not None and self._phase is MemberState.STABLE:
            times.append(self._auto_commit_due)
        ops: list[_Commit | _OffsetFetch] = [*self._commits, *self._fetches]
        for op in ops:
            if op.request is None:
                times.append(op.retry_at)
            if op.deadline is not None:
                times.append(op.deadline)
        return times

    def _commit_before_revoking(self, now_ms: float) -> None:
        if self.config.enable_auto_commit and self.assignment and self.generation.generation_id != NO_GENERATION:
            self._commit_positions(now_ms, sync=True)

    def _stop_assignment_offsets(self) -> None:
        self._auto_commit_due = None
        for fetch in [f for f in self._fetches if f.request_id is None]:
            self._fetches.remove(fetch)
            if fetch.request is not None:
                self._in_flight.discard(fetch.request)

    def _fail_unsent_commits(self, reason: str) -> None:
        for commit in [c for c in self._commits if c.request is None]:
            self._finish_commit(commit, CommitFailedError(
                f"cannot commit: the member is no longer in its generation ({reason})"))

    def _fail_offsets(self, error: GroupError) -> None:
        for commit in list(self._commits):
            self._finish_commit(commit, error)
        for fetch in list(self._fetches):
            self._finish_fetch(fetch, {}, error)

    def _expire_offsets(self, now_ms: float) -> None:
        for commit in [c for c in self._commits if c.deadline <= now_ms]:
            self._finish_commit(commit, GroupError("commit not completed within its timeout", E.REQUEST_TIMED_OUT))
        for fetch in [f for f in self._fetches if f.deadline is not None and f.deadline <= now_ms]:
            self._finish_fetch(fetch, {}, GroupError("committed offsets not fetched within the timeout",
                                                  E.REQUEST_TIMED_OUT))

    def _step_offsets(self, out: list[OutgoingRequest], now_ms: float) -> None:
        if self._phase is MemberState.STABLE and self._auto_commit_due is not None and now_ms >= self._auto_commit_due:
            if self._auto_commit is None:
                self._commit_positions(now_ms, sync=False)
            self._auto_commit_due = now_ms + self.config.auto_commit_interval_ms
        for commit in list(self._commits):
            if commit.request is not None or now_ms < commit.retry_at:
                continue
            error = self._commit_generation_error()
            if error is not None:
                self._finish_commit(commit, error)
                continue
            commit.request = self._send(out, self._offset_commit_request(commit, now_ms))
        for fetch in list(self._fetches):
            if fetch.request is None and now_ms >= fetch.retry_at:
                fetch.request = self._send(out, self._offset_fetch_request(fetch, now_ms))

    def _offset_request_failed(self, request: OutgoingRequest, now_ms: float, reason: str) -> None:
        if request.kind == "commit":
            commit, _generation = request.context
            commit.request = None
            if commit in self._commits:
                self._retry_or_fail_commit(commit, GroupError(f"OffsetCommit failed: {reason}",
                                                              E.NETWORK_EXCEPTION), now_ms)
        else:
            fetch = request.context
            fetch.request = None
            fetch.retry_at = now_ms + self.config.retry_backoff_ms

    # ---- requests and answers -------------------------------------------------------------------------

    def _offsets_version(self, api_key: ApiKey, topics: Iterable[str]) -> int:
        """``api_key``'s version for a request about ``topics``: below v10 while one has no known id."""
        version = self.version(api_key)
        if version >= TOPIC_ID_VERSION and any(topic not in self._topic_ids for topic in topics):
            return TOPIC_ID_VERSION - 1
        return version

    def _offset_commit_request(self, commit: _Commit, now_ms: float) -> OutgoingRequest:
        version = self._offsets_version(ApiKey.OFFSET_COMMIT, {tp.topic for tp in commit.offsets})
        in_group = self.subscription is not None  # else a plain commit for the group id
        body = offset_commit_request(version, self.group_id, commit.offsets, self.generation if in_group else None,
                                     self.group_instance_id, self._topic_ids)
        return self._request("commit", body, version, now_ms, context=(commit, self.generation.generation_id))

    def _offset_fetch_request(self, fetch: _OffsetFetch, now_ms: float) -> OutgoingRequest:
        version = self._offsets_version(ApiKey.OFFSET_FETCH, {tp.topic for tp in fetch.partitions})
        body = offset_fetch_request(version, self.group_id, fetch.partitions, self._topic_ids)
        return self._request("fetch", body, version, now_ms, context=fetch)

    def _on_commit_response(self, request: OutgoingRequest, response: OffsetCommitResponse, now_ms: float) -> None:
        commit, generation = request.context
        commit.request = None
        if commit not in self._commits:
            return
        codes = commit_error_codes(response)
        if not codes:
            self._finish_commit(commit, None)
            return
        code = worst_error(codes)
        error = group_error(code, "OffsetCommit failed")
        if code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            error = CommitFailedError("commit failed: the group rebalanced and gave the partitions to another "
                                      f"member ({error_name(code)})", code)
            self._finish_commit(commit, error)
            if generation == self.generation.generation_id and self.subscription is not None:
                self._reset_generation(f"OffsetCommit answered {error_name(code)}", now_ms,
                                       member_id_too=code == E.UNKNOWN_MEMBER_ID)
        elif code == E.REBALANCE_IN_PROGRESS:
            self._finish_commit(commit, RebalanceInProgressError(
                "commit failed: the group is rebalancing; commit again after the new assignment", code))
            self._request_rejoin("OffsetCommit answered REBALANCE_IN_PROGRESS", now_ms)
        elif code == E.FENCED_INSTANCE_ID:
            self._finish_commit(commit, error)
            self._fatal(error, now_ms)
        else:
            if code in COORDINATOR_ERRORS or code == E.REQUEST_TIMED_OUT:
                self._coordinator_lost(f"OffsetCommit answered {error_name(code)}", now_ms)
            self._retry_or_fail_commit(commit, error, now_ms)

    def _on_fetch_response(self, request: OutgoingRequest, response: OffsetFetchResponse, now_ms: float) -> None:
        fetch: _OffsetFetch = request.context
        fetch.request = None
        if fetch not in self._fetches:
            return
        codes, offsets = read_offset_fetch(response, request.version, self.group_id, fetch.partitions,
                                           self._topic_ids)
        if not codes:
            self._finish_fetch(fetch, {tp: offsets.get(tp) for tp in fetch.partitions}, None)
            return
        code = worst_error(codes)
        error = group_error(code, "OffsetFetch failed")
        if code in COORDINATOR_ERRORS:
            self._coordinator_lost(f"OffsetFetch answered {error_name(code)}", now_ms)
        if code in COORDINATOR_ERRORS or code in RETRIABLE_CODES:
            fetch.retry_at = now_ms + self.config.retry_backoff_ms  # until the assignment or deadline changes
        elif code in (E.GROUP_AUTHORIZATION_FAILED,):
            self._fatal(error, now_ms)
        else:
            self._finish_fetch(fetch, {}, error)

    # ---- commits and fetches --------------------------------------------------------------------------

    def _commit_positions(self, now_ms: float, *, sync: bool, timeout_ms: int | None = None) -> None:
        positions = _normalize(self._positions() if self._positions is not None else {})
        owned = set(self.assignment)
        offsets = {tp: value for tp, value in positions.items() if tp in owned}
        if not offsets:
            return
        deadline = now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms)
        if self._close_deadline is not None:
            deadline = min(deadline, self._close_deadline)
        commit = _Commit(next(self._ids), offsets, deadline, retry=sync, auto=True)
        self._commits.append(commit)
        if not sync:
            self._auto_commit = commit

    def _commit_generation_error(self) -> GroupError | None:
        """Why a commit cannot go out now, if it cannot (Java's generationIfStable check)."""
        if self.subscription is None:
            return None  # not using group management: a plain commit for the group id
        if self._phase in (MemberState.STABLE, MemberState.REBALANCING, MemberState.LEAVING) and \
                self.generation.generation_id != NO_GENERATION:
            return None
        if self._phase in (MemberState.JOINING, MemberState.SYNCING):
            return RebalanceInProgressError("commit failed: the group is rebalancing; commit again after the "
                                            "new assignment", E.REBALANCE_IN_PROGRESS)
        return CommitFailedError("commit failed: the member is not part of an active group generation")

    def _retry_or_fail_commit(self, commit: _Commit, error: GroupError, now_ms: float) -> None:
        if commit.retry and (error.retriable or error.error_code in COORDINATOR_ERRORS):
            commit.retry_at = now_ms + self.config.retry_backoff_ms
        else:
            self._finish_commit(commit, error)

    def _finish_commit(self, commit: _Commit, error: GroupError | None) -> None:
        if commit in self._commits:
            self._commits.remove(commit)
        if commit.request is not None:
            self._in_flight.discard(commit.request)
            commit.request = None
        if commit is self._auto_commit:
            self._auto_commit = None
        self._events.append(CommitCompleted(commit.request_id, dict(commit.offsets), error, commit.auto))

    def _finish_fetch(self, fetch: _OffsetFetch, offsets: dict[TopicPartition, OffsetAndMetadata | None],
                      error: GroupError | None) -> None:
        if fetch in self._fetches:
            self._fetches.remove(fetch)
        if fetch.request is not None:
            self._in_flight.discard(fetch.request)
            fetch.request = None
        if fetch.request_id is None and fetch.assignment != self.assignment:
            if self.config.rebalance_protocol == EAGER:
                return  # made for an assignment the member no longer has
            still = set(self.assignment)  # cooperative: the partitions still assigned keep theirs
            offsets = {tp: value for tp, value in offsets.items() if tp in still}
        self._events.append(CommittedOffsets(fetch.request_id, offsets, error))


def _normalize(offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> dict[TopicPartition, OffsetAndMetadata]:
    result = {}
    for tp, value in offsets.items():
        tp = TopicPartition(*tp)
        if isinstance(value, OffsetAndMetadata):
            offset = value.offset
        elif isinstance(value, int) and not isinstance(value, bool):
            offset, value = value, OffsetAndMetadata(value)
        else:
            raise TypeError(f"offset for {tp} must be an int or OffsetAndMetadata, not {value!r}")
        if offset < 0:
            raise ValueError(f"offset for {tp} must not be negative, not {offset}")
        result[tp] = value
    return result

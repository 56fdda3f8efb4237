"""A group member's offsets, sans I/O, as Java's ConsumerCoordinator keeps them: the commits and
offset fetches a ``GroupMember`` sends to its coordinator, whichever group protocol it runs.

* OffsetFetch for each new partition (CommittedOffsets with request_id None) and on request
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
from typing import TYPE_CHECKING

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import ApiKey, OffsetCommitResponse, OffsetFetchResponse

from ...errors import CommitFailedError, GroupError, RebalanceInProgressError
from ..consumer.config import ConsumerConfig
from ..topic_partition import TopicPartition
from .protocol import (
    COORDINATOR_ERRORS, NO_GENERATION, RETRIABLE_CODES, TOPIC_ID_VERSION, CommitCompleted, CommittedOffsets,
    MemberState, OffsetAndMetadata, OutgoingRequest, error_name, group_error, worst_error,
)
from .requests import commit_error_codes, offset_commit_request, offset_fetch_request, read_offset_fetch

if TYPE_CHECKING:
    from .member import GroupMember

__all__ = ["GroupOffsets"]

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


class GroupOffsets:
    """The commits and offset fetches of ``member`` (see the module docstring)."""

    def __init__(self, member: GroupMember, config: ConsumerConfig,
                 positions: Callable[[], Mapping[TopicPartition, int | OffsetAndMetadata]] | None) -> None:
        if config.group_id and config.enable_auto_commit and positions is None:
            raise ValueError("enable.auto.commit needs a positions() callable giving the consumed positions")
        self.member = member
        self.config = config
        self._positions = positions
        self.topic_ids: dict[str, uuid.UUID] = {}  # from the metadata (set_topic_ids), for v10 requests
        self._commits: list[_Commit] = []
        self._fetches: list[_OffsetFetch] = []
        self._auto_commit_due: float | None = None
        self._auto_commit: _Commit | None = None
        self._ids = itertools.count(1)

    def start_auto_commit(self, now_ms: float) -> None:
        """The member is stable: auto-commit (if enabled) from now on, unless it already does."""
        if self.config.enable_auto_commit and self._auto_commit_due is None:
            self._auto_commit_due = now_ms + self.config.auto_commit_interval_ms

    def restart_auto_commit(self, now_ms: float) -> None:
        """A new assignment: the next auto-commit is a whole interval away."""
        if self.config.enable_auto_commit:
            self._auto_commit_due = now_ms + self.config.auto_commit_interval_ms

    def fetch_for_assignment(self, partitions: tuple[TopicPartition, ...]) -> None:
        """Fetch the committed offsets of ``partitions``, newly assigned (CommittedOffsets, request_id None)."""
        m = self.member
        self._fetches.append(_OffsetFetch(None, partitions, None, assignment=m.assignment))

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], now_ms: float,
               timeout_ms: int | None = None) -> int:
        """Commit ``offsets`` (the next offsets to consume). Returns the request id a CommitCompleted event
        will carry. No timeout: commitAsync (one attempt; waits at most request.timeout.ms for a
        coordinator). A timeout: commitSync (retriable errors retried until it passes)."""
        m = self.member
        m._check_open()
        commit = _Commit(next(self._ids), _normalize(offsets),
                         now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms),
                         retry=timeout_ms is not None, auto=False)
        if not commit.offsets:
            m._events.append(CommitCompleted(commit.request_id, {}))
        else:
            self._commits.append(commit)
        return commit.request_id

    def fetch_committed(self, partitions: Iterable[TopicPartition], now_ms: float,
                        timeout_ms: int | None = None) -> int:
        """Ask for the committed offsets of ``partitions``; a CommittedOffsets event carries the id returned."""
        m = self.member
        m._check_open()
        request_id = next(self._ids)
        fetch = _OffsetFetch(request_id, tuple(dict.fromkeys(partitions)),
                             now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms))
        if not fetch.partitions:
            m._events.append(CommittedOffsets(request_id, {}))
        else:
            self._fetches.append(fetch)
        return request_id

    # ---- what the member asks of its offsets ------------------------------------------------------

    def has_work(self) -> bool:
        return bool(self._commits or self._fetches)

    def commits_pending(self) -> bool:
        return bool(self._commits)

    def timers(self) -> list[float]:
        m = self.member
        times = []
        if self._auto_commit_due is not None and m._phase is MemberState.STABLE:
            times.append(self._auto_commit_due)
        ops: list[_Commit | _OffsetFetch] = [*self._commits, *self._fetches]
        for op in ops:
            if op.request is None:
                times.append(op.retry_at)
            if op.deadline is not None:
                times.append(op.deadline)
        return times

    def commit_before_revoking(self, now_ms: float) -> None:
        m = self.member
        if self.config.enable_auto_commit and m.assignment and m.generation.generation_id != NO_GENERATION:
            self._commit_positions(now_ms, sync=True)

    def stop_assignment_work(self) -> None:
        m = self.member
        self._auto_commit_due = None
        for fetch in [f for f in self._fetches if f.request_id is None]:
            self._fetches.remove(fetch)
            if fetch.request is not None:
                m._in_flight.discard(fetch.request)

    def fail_unsent_commits(self, reason: str) -> None:
        for commit in [c for c in self._commits if c.request is None]:
            self._finish_commit(commit, CommitFailedError(
                f"cannot commit: the member is no longer in its generation ({reason})"))

    def fail_all(self, error: GroupError) -> None:
        for commit in list(self._commits):
            self._finish_commit(commit, error)
        for fetch in list(self._fetches):
            self._finish_fetch(fetch, {}, error)

    def expire(self, now_ms: float) -> None:
        for commit in [c for c in self._commits if c.deadline <= now_ms]:
            self._finish_commit(commit, GroupError("commit not completed within its timeout", E.REQUEST_TIMED_OUT))
        for fetch in [f for f in self._fetches if f.deadline is not None and f.deadline <= now_ms]:
            self._finish_fetch(fetch, {}, GroupError("committed offsets not fetched within the timeout",
                                                  E.REQUEST_TIMED_OUT))

    def step(self, out: list[OutgoingRequest], now_ms: float) -> None:
        m = self.member
        if m._phase is MemberState.STABLE and self._auto_commit_due is not None and now_ms >= self._auto_commit_due:
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
            commit.request = m._send(out, self._offset_commit_request(commit, now_ms))
        for fetch in list(self._fetches):
            if fetch.request is None and now_ms >= fetch.retry_at:
                fetch.request = m._send(out, self._offset_fetch_request(fetch, now_ms))

    def request_failed(self, request: OutgoingRequest, now_ms: float, reason: str) -> None:
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
        m = self.member
        version = m.version(api_key)
        if version >= TOPIC_ID_VERSION and any(topic not in self.topic_ids for topic in topics):
            return TOPIC_ID_VERSION - 1
        return version

    def _offset_commit_request(self, commit: _Commit, now_ms: float) -> OutgoingRequest:
        m = self.member
        version = self._offsets_version(ApiKey.OFFSET_COMMIT, {tp.topic for tp in commit.offsets})
        in_group = m.subscription is not None  # else a plain commit for the group id
        body = offset_commit_request(version, m.group_id, commit.offsets, m.generation if in_group else None,
                                     m.group_instance_id, self.topic_ids)
        return m._request("commit", body, version, now_ms, context=(commit, m.generation.generation_id))

    def _offset_fetch_request(self, fetch: _OffsetFetch, now_ms: float) -> OutgoingRequest:
        m = self.member
        version = self._offsets_version(ApiKey.OFFSET_FETCH, {tp.topic for tp in fetch.partitions})
        body = offset_fetch_request(version, m.group_id, fetch.partitions, self.topic_ids)
        return m._request("fetch", body, version, now_ms, context=fetch)

    def on_commit_response(self, request: OutgoingRequest, response: OffsetCommitResponse, now_ms: float) -> None:
        m = self.member
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
            if generation == m.generation.generation_id and m.subscription is not None:
                m._reset_generation(f"OffsetCommit answered {error_name(code)}", now_ms,
                                       member_id_too=code == E.UNKNOWN_MEMBER_ID)
        elif code == E.REBALANCE_IN_PROGRESS:
            self._finish_commit(commit, RebalanceInProgressError(
                "commit failed: the group is rebalancing; commit again after the new assignment", code))
            m.protocol.request_rejoin("OffsetCommit answered REBALANCE_IN_PROGRESS", now_ms)
        elif code == E.FENCED_INSTANCE_ID:
            self._finish_commit(commit, error)
            m._fatal(error, now_ms)
        else:
            if code in COORDINATOR_ERRORS or code == E.REQUEST_TIMED_OUT:
                m._coordinator_lost(f"OffsetCommit answered {error_name(code)}", now_ms)
            self._retry_or_fail_commit(commit, error, now_ms)

    def on_fetch_response(self, request: OutgoingRequest, response: OffsetFetchResponse, now_ms: float) -> None:
        m = self.member
        fetch: _OffsetFetch = request.context
        fetch.request = None
        if fetch not in self._fetches:
            return
        codes, offsets = read_offset_fetch(response, request.version, m.group_id, fetch.partitions,
                                           self.topic_ids)
        if not codes:
            self._finish_fetch(fetch, {tp: offsets.get(tp) for tp in fetch.partitions}, None)
            return
        code = worst_error(codes)
        error = group_error(code, "OffsetFetch failed")
        if code in COORDINATOR_ERRORS:
            m._coordinator_lost(f"OffsetFetch answered {error_name(code)}", now_ms)
        if code in COORDINATOR_ERRORS or code in RETRIABLE_CODES:
            fetch.retry_at = now_ms + self.config.retry_backoff_ms  # until the assignment or deadline changes
        elif code in (E.GROUP_AUTHORIZATION_FAILED,):
            m._fatal(error, now_ms)
        else:
            self._finish_fetch(fetch, {}, error)

    # ---- commits and fetches --------------------------------------------------------------------------

    def _commit_positions(self, now_ms: float, *, sync: bool, timeout_ms: int | None = None) -> None:
        m = self.member
        positions = _normalize(self._positions() if self._positions is not None else {})
        owned = set(m.assignment)
        offsets = {tp: value for tp, value in positions.items() if tp in owned}
        if not offsets:
            return
        deadline = now_ms + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms)
        if m._close_deadline is not None:
            deadline = min(deadline, m._close_deadline)
        commit = _Commit(next(self._ids), offsets, deadline, retry=sync, auto=True)
        self._commits.append(commit)
        if not sync:
            self._auto_commit = commit

    def _commit_generation_error(self) -> GroupError | None:
        """Why a commit cannot go out now, if it cannot (Java's generationIfStable check)."""
        m = self.member
        if m.subscription is None:
            return None  # not using group management: a plain commit for the group id
        if m._phase in (MemberState.STABLE, MemberState.REBALANCING, MemberState.LEAVING) and \
                m.generation.generation_id != NO_GENERATION:
            return None
        if m._phase in (MemberState.JOINING, MemberState.SYNCING):
            return RebalanceInProgressError("commit failed: the group is rebalancing; commit again after the "
                                            "new assignment", E.REBALANCE_IN_PROGRESS)
        return CommitFailedError("commit failed: the member is not part of an active group generation")

    def _retry_or_fail_commit(self, commit: _Commit, error: GroupError, now_ms: float) -> None:
        if commit.retry and (error.retriable or error.error_code in COORDINATOR_ERRORS):
            commit.retry_at = now_ms + self.config.retry_backoff_ms
        else:
            self._finish_commit(commit, error)

    def _finish_commit(self, commit: _Commit, error: GroupError | None) -> None:
        m = self.member
        if commit in self._commits:
            self._commits.remove(commit)
        if commit.request is not None:
            m._in_flight.discard(commit.request)
            commit.request = None
        if commit is self._auto_commit:
            self._auto_commit = None
        m._events.append(CommitCompleted(commit.request_id, dict(commit.offsets), error, commit.auto))

    def _finish_fetch(self, fetch: _OffsetFetch, offsets: dict[TopicPartition, OffsetAndMetadata | None],
                      error: GroupError | None) -> None:
        m = self.member
        if fetch in self._fetches:
            self._fetches.remove(fetch)
        if fetch.request is not None:
            m._in_flight.discard(fetch.request)
            fetch.request = None
        if fetch.request_id is None and fetch.assignment != m.assignment:
            if m.protocol.eager:
                return  # made for an assignment the member no longer has
            still = set(m.assignment)  # cooperative: the partitions still assigned keep theirs
            offsets = {tp: value for tp, value in offsets.items() if tp in still}
        m._events.append(CommittedOffsets(fetch.request_id, offsets, error))



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

"""ConsumerProtocolMember: a consumer in a KIP-848 group (``group.protocol=consumer``), sans I/O.

The broker assigns: the member sends ConsumerGroupHeartbeat with its subscription (and
``group.remote.assignor``), and each answer may carry its new assignment, by topic id. The member
reconciles as Java's ``ConsumerMembershipManager`` does: partitions no longer assigned are committed
(with auto-commit) and revoked first, and the next heartbeat reports what it owns, so that the broker
can hand them to others; new partitions are taken up at once (their committed offsets fetched). Only
the partitions that change move: the others keep flowing. The member epoch is the generation its
offset commits carry (OffsetCommit v9+).

Errors as Java's: FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID lose the partitions and rejoin with epoch 0
(keeping the member id, KIP-1082); NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE look the coordinator
up again; the rest (UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, group
authorization, INCONSISTENT_GROUP_PROTOCOL...) stop the member with a GroupFailure. Leaving sends epoch
-1, or -2 for a static member (``group.instance.id``), whose partitions then wait for it.

The rest (offsets, the coordinator lookup, max.poll.interval.ms) is ``GroupMember``'s.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

from ...errors import GroupError
from ..consumer.config import ConsumerConfig
from .member import GroupMember, _OffsetFetch
from .membership import ResponseHandler
from .protocol import (
    COORDINATOR_ERRORS, RETRIABLE_CODES, Generation, MemberState, OffsetAndMetadata, OutgoingRequest,
    PartitionsAssigned, PartitionsRevoked, error_name, group_error,
)
from ..topic_partition import TopicPartition

__all__ = ["ConsumerProtocolMember", "CONSUMER_HEARTBEAT_VERSIONS"]

E = ErrorCode
CONSUMER_HEARTBEAT_VERSIONS = (1, 1)  # v1: the member makes its own id (KIP-1082)
_LEAVE_EPOCH, _STATIC_LEAVE_EPOCH = -1, -2
_FENCED = frozenset({E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID})


class ConsumerProtocolMember(GroupMember):
    """``GroupMember``'s interface, over ConsumerGroupHeartbeat (see the module docstring)."""

    def __init__(self, config: ConsumerConfig, *, positions=None, group_instance_id: str | None = None,
                 api_versions: Mapping[int, object] | None = None, member_id: str | None = None):
        self._heartbeat_version: int | None = None
        super().__init__(config, positions=positions, group_instance_id=group_instance_id, api_versions=api_versions)
        self.member_id = member_id or str(uuid.uuid4())
        self.member_epoch = 0
        self.remote_assignor = config.group_remote_assignor
        self._interval_ms = float(config.heartbeat_interval_ms)
        self._sent_subscription: tuple[str, ...] | None = None
        self._pending_ids: dict[uuid.UUID, frozenset[int]] | None = None  # an assignment with unknown topic ids
        self._revoking = False  # partitions revoked: report them gone once the application let them go
        self._join_retry_at = float("inf")  # (the classic JoinGroup clock: unused here)

    def _response_handlers(self) -> dict[ApiKey, ResponseHandler]:
        return {**super()._response_handlers(), ApiKey.CONSUMER_GROUP_HEARTBEAT: self._on_consumer_heartbeat_response}

    @property
    def rebalance_protocol(self) -> str:
        return "COOPERATIVE"  # (librdkafka says so of the consumer protocol too: it is incremental)

    # ---- versions ---------------------------------------------------------------------------------
    def set_api_versions(self, api_versions: Mapping[int, object] | None) -> None:
        super().set_api_versions(api_versions)
        low, high = CONSUMER_HEARTBEAT_VERSIONS
        if api_versions is None:
            self._heartbeat_version = high
            return
        offered = api_versions.get(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        if offered is None:
            self._heartbeat_version = None
            return
        broker_low, broker_high = offered if isinstance(offered, tuple) else (0, offered)
        version = min(high, broker_high)
        self._heartbeat_version = version if version >= max(low, broker_low) else None

    def _version_or_fail(self) -> int:
        if self._heartbeat_version is None:
            raise GroupError("the broker does not serve the consumer group protocol (ConsumerGroupHeartbeat v1, "
                             "KIP-848); use group.protocol=classic", E.UNSUPPORTED_VERSION)
        return self._heartbeat_version

    # ---- topic ids --------------------------------------------------------------------------------
    def set_topic_ids(self, topic_ids: Mapping[str, uuid.UUID]) -> None:
        super().set_topic_ids(topic_ids)
        if self._pending_ids is not None:
            self._take_assignment(self._pending_ids, 0.0)

    # ---- membership steps -------------------------------------------------------------------------
    def _heartbeating(self) -> bool:
        return (self._phase in (MemberState.JOINING, MemberState.STABLE, MemberState.REBALANCING)
                and self.coordinator is not None and not self._blocked)

    def _step_membership(self, out: list, now_ms: float) -> None:
        if self._phase is MemberState.REBALANCING:
            self._phase = MemberState.STABLE if self.member_epoch > 0 else MemberState.JOINING
        if not self._heartbeating() or self._heartbeat_request is not None:
            return
        joining = self.member_epoch == 0
        if self._revoking and (self._unacked_prepare or self._commits_pending()):
            return  # the revoked partitions are still the application's
        if joining or self._revoking or now_ms >= self._heartbeat_due:
            self._revoking = False
            self._heartbeat_request = self._send(out, self._heartbeat(now_ms, self.member_epoch))
            self._heartbeat_due = now_ms + self._interval_ms

    def _heartbeat(self, now_ms: float, epoch: int) -> OutgoingRequest:
        version = self._version_or_fail()
        joining = epoch == 0
        leaving = epoch < 0
        subscription = tuple(self.subscription or ())
        send_subscription = joining or subscription != self._sent_subscription
        owned = None
        if not leaving:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for tp in self.assignment:
                topic_id = self._topic_ids.get(tp.topic)
                if topic_id is not None:
                    by_topic.setdefault(topic_id, []).append(tp.partition)
            owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=topic_id, partitions=sorted(parts))
                     for topic_id, parts in by_topic.items()]
        body = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
            instance_id=self.group_instance_id if joining or leaving else None,
            rack_id=(self.config.client_rack or None) if joining else None,
            rebalance_timeout_ms=self.config.max_poll_interval_ms if joining else -1,
            subscribed_topic_names=list(subscription) if send_subscription and not leaving else None,
            server_assignor=self.remote_assignor if joining else None,
            topic_partitions=[] if joining else owned)
        if send_subscription and not leaving:
            self._sent_subscription = subscription
        return self._request("consumer_heartbeat", body, version, now_ms, context=epoch)

    def _request_rejoin(self, reason: str, now_ms: float) -> None:
        # the broker reassigns when the subscription it hears changes: no revocation here
        self._heartbeat_due = now_ms

    def _step_leaving(self, out: list, now_ms: float) -> None:
        if self._unacked_prepare or self._commits_pending() or self._leave_sent:
            return
        if self.member_epoch <= 0 or self.coordinator is None:
            self._finish_close()
            return
        epoch = _STATIC_LEAVE_EPOCH if self.group_instance_id is not None else _LEAVE_EPOCH
        self._send(out, self._heartbeat(now_ms, epoch))
        self._leave_sent = True

    def _send_leave_and_reset(self, now_ms: float, reason: str) -> None:
        if self.member_epoch > 0 and self.coordinator is not None:
            epoch = _STATIC_LEAVE_EPOCH if self.group_instance_id is not None else _LEAVE_EPOCH
            try:
                request = self._heartbeat(now_ms, epoch)
            except GroupError:
                request = None
            if request is not None:
                self._in_flight.add(request)
                self._outbox.append(request)
        self._heartbeat_request = None
        self._reset_epoch()

    def _reset_epoch(self) -> None:
        self.member_epoch = 0
        self._sent_subscription = None
        self._pending_ids = None
        self._revoking = False
        self._forget_generation(keep_member_id=True)

    # ---- responses --------------------------------------------------------------------------------
    def _on_consumer_heartbeat_response(self, request: OutgoingRequest, response: ConsumerGroupHeartbeatResponse,
                                       now_ms: float) -> None:
        if request.context < 0:  # our leave: done either way
            if self._phase is MemberState.LEAVING:
                self._finish_close()
            return
        if request is self._heartbeat_request:
            self._heartbeat_request = None
        code = response.error_code
        if code == E.NONE:
            self._on_heartbeat_ok(response, now_ms)
            return
        self._heartbeat_due = now_ms + self.config.retry_backoff_ms
        if code in _FENCED:
            # the broker no longer counts us in: the partitions may be another member's already
            self._fail_unsent_commits(f"ConsumerGroupHeartbeat answered {error_name(code)}")
            self._give_up_partitions(lost=True)
            self._reset_epoch()
            self._heartbeat_due = now_ms
            if self._phase is MemberState.STABLE:
                self._phase = MemberState.JOINING
        elif code in COORDINATOR_ERRORS:
            self._coordinator_lost(f"ConsumerGroupHeartbeat answered {error_name(code)}", now_ms)
        elif ErrorCode.of(code) in RETRIABLE_CODES:
            pass  # e.g. COORDINATOR_LOAD_IN_PROGRESS: again after the backoff
        else:
            message = response.error_message or "ConsumerGroupHeartbeat failed"
            self._fatal(group_error(code, message), now_ms)

    def _on_heartbeat_ok(self, response: ConsumerGroupHeartbeatResponse, now_ms: float) -> None:
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        self.generation = Generation(response.member_epoch, self.member_id, "consumer")
        if response.heartbeat_interval_ms > 0:
            self._interval_ms = float(response.heartbeat_interval_ms)
        self._heartbeat_due = now_ms + self._interval_ms
        if self._phase is MemberState.JOINING:
            self._phase = MemberState.STABLE
            if self.config.enable_auto_commit and self._auto_commit_due is None:
                self._auto_commit_due = now_ms + self.config.auto_commit_interval_ms
        if response.assignment is not None:
            self._take_assignment({entry.topic_id: frozenset(entry.partitions)
                                   for entry in response.assignment.topic_partitions}, now_ms)

    def _take_assignment(self, by_id: dict[uuid.UUID, frozenset[int]], now_ms: float) -> None:
        """Move to the assignment the broker gave (by topic id): revoke what is gone, take up what is new."""
        names = {topic_id: name for name, topic_id in self._topic_ids.items()}
        if any(topic_id not in names for topic_id in by_id):
            self._pending_ids = by_id  # taken up once the metadata names these topics
            return
        self._pending_ids = None
        wanted = {TopicPartition(names[topic_id], p) for topic_id, partitions in by_id.items() for p in partitions}
        current = set(self.assignment)
        revoked = tuple(sorted(current - wanted))
        added = tuple(sorted(wanted - current))
        if revoked:
            self._commit_before_revoking(now_ms)
            self.assignment = tuple(tp for tp in self.assignment if tp not in set(revoked))
            self._events.append(PartitionsRevoked(revoked))
            self._unacked_prepare = True
            self._revoking = True  # the next heartbeat tells the broker they are free
        if added:
            self.assignment = tuple(self.assignment) + added
            self._events.append(PartitionsAssigned(self.assignment, self.member_epoch, self.member_id, False,
                                                   added=added))
            self._fetches.append(_OffsetFetch(None, added, None, assignment=self.assignment))

    def _on_failure(self, request: OutgoingRequest, now_ms: float, reason: str,
                    coordinator_known_lost: bool = False) -> None:
        if request.kind != "consumer_heartbeat":
            super()._on_failure(request, now_ms, reason, coordinator_known_lost)
            return
        if request.context < 0:
            if self._phase is MemberState.LEAVING:
                self._finish_close()
            return
        if request is self._heartbeat_request:
            self._heartbeat_request = None
        self._heartbeat_due = now_ms + self.config.retry_backoff_ms
        if not coordinator_known_lost:
            self._coordinator_lost(reason, now_ms)

    def _finish_fetch(self, fetch: _OffsetFetch, offsets: dict[TopicPartition, OffsetAndMetadata | None],
                      error: GroupError | None) -> None:
        # Assignments change a few partitions at a time here: deliver what is still assigned.
        if fetch.request_id is None:
            still = set(self.assignment)
            offsets = {tp: value for tp, value in offsets.items() if tp in still}
            fetch.assignment = self.assignment
        super()._finish_fetch(fetch, offsets, error)

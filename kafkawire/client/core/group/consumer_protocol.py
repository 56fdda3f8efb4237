"""ConsumerProtocol: how a consumer takes part in a KIP-848 group (``group.protocol=consumer``), sans I/O.

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

The rest (offsets, the coordinator lookup, max.poll.interval.ms) is the ``GroupMember``'s it runs in,
beside the classic protocol (``classic``).
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

from ...errors import GroupError
from ..topic_partition import TopicPartition
from .protocol import (
    COORDINATOR_ERRORS, RETRIABLE_CODES, Generation, MemberState, OutgoingRequest, PartitionsAssigned,
    PartitionsRevoked, ResponseHandler, error_name, group_error,
)

if TYPE_CHECKING:
    from .member import GroupMember

__all__ = ["ConsumerProtocol", "CONSUMER_HEARTBEAT_VERSIONS"]

E = ErrorCode
CONSUMER_HEARTBEAT_VERSIONS = (1, 1)  # v1: the member makes its own id (KIP-1082)
_LEAVE_EPOCH, _STATIC_LEAVE_EPOCH = -1, -2
_FENCED = frozenset({E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID})


class ConsumerProtocol:
    """A member's ConsumerGroupHeartbeat membership (see the module docstring); ``member`` is the
    GroupMember it runs in."""

    leader = False  # the broker assigns
    group_topics: frozenset[str] = frozenset()
    rebalance_protocol = "COOPERATIVE"  # (librdkafka says so of the consumer protocol too: it is incremental)
    eager = False  # assignments change a few partitions at a time: offsets fetched go to what is still assigned

    def __init__(self, member: GroupMember, member_id: str | None = None) -> None:
        self.member = member
        config = member.config
        self.member_id = member_id or str(uuid.uuid4())
        self.member_epoch = 0
        self.remote_assignor = config.group_remote_assignor
        self._heartbeat_version: int | None = None
        self._heartbeat_request: OutgoingRequest | None = None
        self._heartbeat_due = 0.0
        self._interval_ms = float(config.heartbeat_interval_ms)
        self._sent_subscription: tuple[str, ...] | None = None
        self._pending_ids: dict[uuid.UUID, frozenset[int]] | None = None  # an assignment with unknown topic ids
        self._revoking = False  # partitions revoked: report them gone once the application let them go

    def handlers(self) -> dict[ApiKey, ResponseHandler]:
        return {ApiKey.CONSUMER_GROUP_HEARTBEAT: self._on_consumer_heartbeat_response}

    def timers(self) -> list[float]:
        return [self._heartbeat_due] if self.heartbeating() and self._heartbeat_request is None else []

    def check_clocks(self, now_ms: float) -> None:
        pass  # no session clock here: the broker times the member out

    def reset(self, reason: str) -> None:
        pass  # the next heartbeat carries the member epoch that says where it stands

    def forget_generation(self) -> None:
        pass

    def drop_requests(self) -> None:
        pass  # its heartbeats are answered whatever the state

    def metadata_updated(self, now_ms: float) -> None:
        pass  # the broker sees the partition counts itself

    # ---- versions ---------------------------------------------------------------------------------
    def set_api_versions(self, api_versions: Mapping[int, object] | None) -> None:
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
    def topic_ids_changed(self) -> None:
        if self._pending_ids is not None:
            self._take_assignment(self._pending_ids, 0.0)

    # ---- membership steps -------------------------------------------------------------------------
    def heartbeating(self) -> bool:
        m = self.member
        return (m._phase in (MemberState.JOINING, MemberState.STABLE, MemberState.REBALANCING)
                and m.coordinator is not None and not m._blocked)

    def step(self, out: list[OutgoingRequest], now_ms: float) -> None:
        m = self.member
        if m._phase is MemberState.REBALANCING:
            m._phase = MemberState.STABLE if self.member_epoch > 0 else MemberState.JOINING
        if not self.heartbeating() or self._heartbeat_request is not None:
            return
        joining = self.member_epoch == 0
        if self._revoking and (m._unacked_prepare or m.offsets.commits_pending()):
            return  # the revoked partitions are still the application's
        if joining or self._revoking or now_ms >= self._heartbeat_due:
            self._revoking = False
            self._heartbeat_request = m._send(out, self._heartbeat(now_ms, self.member_epoch))
            self._heartbeat_due = now_ms + self._interval_ms

    def _heartbeat(self, now_ms: float, epoch: int) -> OutgoingRequest:
        m = self.member
        version = self._version_or_fail()
        joining = epoch == 0
        leaving = epoch < 0
        subscription = tuple(m.subscription or ())
        send_subscription = joining or subscription != self._sent_subscription
        owned = None
        if not leaving:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for tp in m.assignment:
                topic_id = m.offsets.topic_ids.get(tp.topic)
                if topic_id is not None:
                    by_topic.setdefault(topic_id, []).append(tp.partition)
            owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=topic_id, partitions=sorted(parts))
                     for topic_id, parts in by_topic.items()]
        body = ConsumerGroupHeartbeatRequest(
            group_id=m.group_id, member_id=self.member_id, member_epoch=epoch,
            instance_id=m.group_instance_id if joining or leaving else None,
            rack_id=(m.config.client_rack or None) if joining else None,
            rebalance_timeout_ms=m.config.max_poll_interval_ms if joining else -1,
            subscribed_topic_names=list(subscription) if send_subscription and not leaving else None,
            server_assignor=self.remote_assignor if joining else None,
            topic_partitions=[] if joining else owned)
        if send_subscription and not leaving:
            self._sent_subscription = subscription
        return m._request("consumer_heartbeat", body, version, now_ms, context=epoch)

    def request_rejoin(self, reason: str, now_ms: float) -> None:
        # the broker reassigns when the subscription it hears changes: no revocation here
        self._heartbeat_due = now_ms

    def step_leaving(self, out: list[OutgoingRequest], now_ms: float) -> None:
        m = self.member
        if m._unacked_prepare or m.offsets.commits_pending() or m._leave_sent:
            return
        if self.member_epoch <= 0 or m.coordinator is None:
            m._finish_close()
            return
        epoch = _STATIC_LEAVE_EPOCH if m.group_instance_id is not None else _LEAVE_EPOCH
        m._send(out, self._heartbeat(now_ms, epoch))
        m._leave_sent = True

    def send_leave_and_reset(self, now_ms: float, reason: str) -> None:
        m = self.member
        if self.member_epoch > 0 and m.coordinator is not None:
            epoch = _STATIC_LEAVE_EPOCH if m.group_instance_id is not None else _LEAVE_EPOCH
            try:
                request = self._heartbeat(now_ms, epoch)
            except GroupError:
                request = None
            if request is not None:
                m._in_flight.add(request)
                m._outbox.append(request)
        self._heartbeat_request = None
        self._reset_epoch()

    def _reset_epoch(self) -> None:
        m = self.member
        self.member_epoch = 0
        self._sent_subscription = None
        self._pending_ids = None
        self._revoking = False
        m._forget_generation(keep_member_id=True)

    # ---- responses --------------------------------------------------------------------------------
    def _on_consumer_heartbeat_response(self, request: OutgoingRequest, response: ConsumerGroupHeartbeatResponse,
                                       now_ms: float) -> None:
        m = self.member
        if request.context < 0:  # our leave: done either way
            if m._phase is MemberState.LEAVING:
                m._finish_close()
            return
        if request is self._heartbeat_request:
            self._heartbeat_request = None
        code = response.error_code
        if code == E.NONE:
            self._on_heartbeat_ok(response, now_ms)
            return
        self._heartbeat_due = now_ms + m.config.retry_backoff_ms
        if code in _FENCED:
            # the broker no longer counts us in: the partitions may be another member's already
            m.offsets.fail_unsent_commits(f"ConsumerGroupHeartbeat answered {error_name(code)}")
            m._give_up_partitions(lost=True)
            self._reset_epoch()
            self._heartbeat_due = now_ms
            if m._phase is MemberState.STABLE:
                m._phase = MemberState.JOINING
        elif code in COORDINATOR_ERRORS:
            m._coordinator_lost(f"ConsumerGroupHeartbeat answered {error_name(code)}", now_ms)
        elif ErrorCode.of(code) in RETRIABLE_CODES:
            pass  # e.g. COORDINATOR_LOAD_IN_PROGRESS: again after the backoff
        else:
            message = response.error_message or "ConsumerGroupHeartbeat failed"
            m._fatal(group_error(code, message), now_ms)

    def _on_heartbeat_ok(self, response: ConsumerGroupHeartbeatResponse, now_ms: float) -> None:
        m = self.member
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        m.generation = Generation(response.member_epoch, self.member_id, "consumer")
        if response.heartbeat_interval_ms > 0:
            self._interval_ms = float(response.heartbeat_interval_ms)
        self._heartbeat_due = now_ms + self._interval_ms
        if m._phase is MemberState.JOINING:
            m._phase = MemberState.STABLE
            m.offsets.start_auto_commit(now_ms)
        if response.assignment is not None:
            self._take_assignment({entry.topic_id: frozenset(entry.partitions)
                                   for entry in response.assignment.topic_partitions}, now_ms)

    def _take_assignment(self, by_id: dict[uuid.UUID, frozenset[int]], now_ms: float) -> None:
        """Move to the assignment the broker gave (by topic id): revoke what is gone, take up what is new."""
        m = self.member
        names = {topic_id: name for name, topic_id in m.offsets.topic_ids.items()}
        if any(topic_id not in names for topic_id in by_id):
            self._pending_ids = by_id  # taken up once the metadata names these topics
            return
        self._pending_ids = None
        wanted = {TopicPartition(names[topic_id], p) for topic_id, partitions in by_id.items() for p in partitions}
        current = set(m.assignment)
        revoked = tuple(sorted(current - wanted))
        added = tuple(sorted(wanted - current))
        if revoked:
            m.offsets.commit_before_revoking(now_ms)
            m.assignment = tuple(tp for tp in m.assignment if tp not in set(revoked))
            m._events.append(PartitionsRevoked(revoked))
            m._unacked_prepare = True
            self._revoking = True  # the next heartbeat tells the broker they are free
        if added:
            m.assignment = tuple(m.assignment) + added
            m._events.append(PartitionsAssigned(m.assignment, self.member_epoch, self.member_id,
                                                          False, added=added))
            m.offsets.fetch_for_assignment(added)

    def on_failure(self, request: OutgoingRequest, now_ms: float, reason: str, coordinator_known_lost: bool) -> None:
        """A ConsumerGroupHeartbeat got no answer."""
        m = self.member
        if request.context < 0:
            if m._phase is MemberState.LEAVING:
                m._finish_close()
            return
        if request is self._heartbeat_request:
            self._heartbeat_request = None
        self._heartbeat_due = now_ms + m.config.retry_backoff_ms
        if not coordinator_known_lost:
            m._coordinator_lost(reason, now_ms)

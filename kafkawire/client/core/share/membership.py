"""ShareMember: a share group member (KIP-932) over ShareGroupHeartbeat, sans I/O.

As Kafka's ``ShareMembershipManager``: the member picks its own id (a random UUID in Kafka's base64
form), finds the group coordinator (FindCoordinator, key type GROUP), joins with epoch 0 and its
subscription, heartbeats every ``heartbeat.interval.ms`` the broker gives it with the epoch it was
given, and takes the assignment the broker computes (no revocation step: a share partition is shared).
It leaves with epoch -1. UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH make it join again (epoch 0, the
same id); the coordinator errors make it find the coordinator again.
"""
from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Mapping

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import FindCoordinatorRequest, FindCoordinatorResponse, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

from ...errors import AuthorizationException, GroupError, error_for_code
from ..group.protocol import COORDINATOR_ERRORS, Coordinator, error_name
from ..group.requests import find_coordinator_request, read_find_coordinator

__all__ = ["ShareMember", "LEAVE_EPOCH", "new_member_id"]

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
_JOIN_EPOCH = 0
_REJOIN_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH})
_FATAL_ERRORS = frozenset({ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                           ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.INVALID_REQUEST,
                           ErrorCode.UNSUPPORTED_VERSION, ErrorCode.GROUP_MAX_SIZE_REACHED})
_DEFAULT_HEARTBEAT_MS = 5000  # until the broker says (group.share.heartbeat.interval.ms's default)


def new_member_id() -> str:
    """A random UUID as Kafka writes it (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ShareMember:
    """One member of ``group_id``. The driver asks ``next_request(now)`` for what to send (FindCoordinator
    to any broker, the heartbeat to ``coordinator``), hands back the answer, and reads ``assignment``
    (topic id -> partitions) after each ``assignment_changed``."""

    def __init__(self, group_id: str, rack_id: str = "", retry_backoff_ms: float = 100.0):
        self.group_id = group_id
        self.member_id = new_member_id()
        self.rack_id = rack_id or None
        self.retry_backoff_ms = retry_backoff_ms
        self.epoch = _JOIN_EPOCH
        self.subscription: tuple[str, ...] = ()
        self.assignment: dict[uuid.UUID, tuple[int, ...]] = {}
        self.assignment_changed = False
        self.coordinator: Coordinator | None = None
        self.heartbeat_interval_ms: float = _DEFAULT_HEARTBEAT_MS
        self.errors: list[Exception] = []  # fatal errors, for the next poll
        self.left = False  # the leave heartbeat was answered (or could not be sent)
        self._subscription_sent = False
        self._leaving = False
        self._in_flight = False
        self._next_at = 0.0

    # ---- the application's side -----------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Subscribed, or leaving (the leave heartbeat still to go)."""
        return bool(self.subscription) or self._leaving

    def subscribe(self, topics: tuple[str, ...], now: float) -> None:
        if topics == self.subscription:
            return
        self.subscription = topics
        self._subscription_sent = False
        self._leaving = False
        self.left = False
        self._next_at = now  # tell the coordinator now

    def leave(self, now: float) -> None:
        """Leave the group (epoch -1) with the next heartbeat; the assignment is dropped at once."""
        if self.epoch == _JOIN_EPOCH and not self._in_flight:  # never joined: nothing to leave
            self.left = True
        else:
            self._leaving = True
            self._next_at = now
        self.subscription = ()
        self._set_assignment({})

    # ---- the driver's side --------------------------------------------------------------------------------
    def next_request(self, now: float) -> str | None:
        """What is due now, if anything (one request at a time): "find" (``find_coordinator_request``,
        to any broker) or "heartbeat" (``heartbeat_request``, to ``coordinator``)."""
        if self._in_flight or not self.active or now < self._next_at:
            return None
        self._in_flight = True
        return "find" if self.coordinator is None else "heartbeat"

    def find_coordinator_request(self, version: int) -> FindCoordinatorRequest:
        return find_coordinator_request(version, self.group_id)

    def heartbeat_request(self) -> ShareGroupHeartbeatRequest:
        if self._leaving:
            return ShareGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                              member_epoch=LEAVE_EPOCH)
        full = self.epoch == _JOIN_EPOCH or not self._subscription_sent
        return ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.epoch,
            rack_id=self.rack_id if full else None,
            subscribed_topic_names=list(self.subscription) if full else None)

    def timeout_ms(self, now: float) -> float | None:
        """How long until the next request is due (None: nothing to send)."""
        if self._in_flight or not self.active:
            return None
        return max(0.0, self._next_at - now)

    def handle_find_coordinator(self, response: FindCoordinatorResponse, version: int, now: float) -> None:
        self._in_flight = False
        code, node, host, port, message = read_find_coordinator(response, version, self.group_id)
        if code != ErrorCode.NONE:
            self._retry(now, f"FindCoordinator: {error_name(code)} {message or ''}")
            if code == ErrorCode.GROUP_AUTHORIZATION_FAILED:
                self.errors.append(error_for_code(code, f"not authorized to the share group {self.group_id!r}"))
            return
        self.coordinator = Coordinator(node, host, port)
        self._next_at = now

    def handle_heartbeat(self, request: ShareGroupHeartbeatRequest, response: ShareGroupHeartbeatResponse,
                         now: float) -> None:
        self._in_flight = False
        code = response.error_code
        if request.member_epoch == LEAVE_EPOCH:
            self._leaving = False
            self.left = True
            self.epoch = _JOIN_EPOCH
            if code != ErrorCode.NONE:
                log.debug("share group %s: leaving answered %s", self.group_id, error_name(code))
            return
        if code == ErrorCode.NONE and self._leaving:  # joined while leaving: the leave goes next
            self.epoch = response.member_epoch
            self._next_at = now
        elif code == ErrorCode.NONE:
            if request.subscribed_topic_names is not None and tuple(request.subscribed_topic_names) == self.subscription:
                self._subscription_sent = True
            self.epoch = response.member_epoch
            if response.heartbeat_interval_ms > 0:
                self.heartbeat_interval_ms = response.heartbeat_interval_ms
            if response.assignment is not None:
                self._set_assignment({tp.topic_id: tuple(sorted(tp.partitions))
                                      for tp in response.assignment.topic_partitions})
            self._next_at = now + self.heartbeat_interval_ms
        elif code in _REJOIN_ERRORS:
            log.info("share group %s: %s, joining again", self.group_id, error_name(code))
            self.epoch = _JOIN_EPOCH
            self._set_assignment({})
            self._next_at = now
        elif code in COORDINATOR_ERRORS:
            self.coordinator = None
            self._next_at = now + self.retry_backoff_ms
        elif code in _FATAL_ERRORS:
            message = f"share group {self.group_id!r}: {error_name(code)} {response.error_message or ''}".rstrip()
            error = error_for_code(code, message)
            self.errors.append(error if isinstance(error, AuthorizationException) else GroupError(message, code))
            self._next_at = now + self.heartbeat_interval_ms
        else:
            self._retry(now, f"heartbeat: {error_name(code)}")

    def handle_failure(self, kind: str, now: float, reason: str) -> None:
        """A request that got no answer (connection lost, timed out)."""
        self._in_flight = False
        if kind == "heartbeat":
            if self._leaving:  # the coordinator ends the membership itself after the session timeout
                self._leaving = False
                self.left = True
                return
            self.coordinator = None
        self._retry(now, reason)

    def _retry(self, now: float, reason: str) -> None:
        log.debug("share group %s: %s; retrying", self.group_id, reason)
        self._next_at = now + self.retry_backoff_ms

    def _set_assignment(self, assignment: Mapping[uuid.UUID, tuple[int, ...]]) -> None:
        if dict(assignment) != self.assignment:
            self.assignment = dict(assignment)
            self.assignment_changed = True


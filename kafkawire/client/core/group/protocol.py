"""What a group member and its protocols share (``member``, ``classic``, ``consumer_protocol``): the API
versions they speak, the values and events they hand out, the request envelope, and how error codes
are read."""
from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import (
    ApiKey, ConsumerGroupHeartbeatResponse, FindCoordinatorResponse, HeartbeatResponse, JoinGroupResponse,
    LeaveGroupResponse, OffsetCommitResponse, OffsetFetchResponse, SyncGroupResponse,
)

from ...errors import GroupError
from ..topic_partition import TopicPartition

__all__ = ["Coordinator", "OffsetAndMetadata", "MemberState", "Generation", "NO_GENERATION", "OutgoingRequest",
           "PartitionsRevoked", "PartitionsLost", "PartitionsAssigned", "CommittedOffsets", "CommitCompleted",
           "GroupFailure", "CLIENT_VERSIONS", "negotiate_versions", "request_version", "TOPIC_ID_VERSION",
           "INSTANCE_ID_VERSIONS", "RESPONSES",
           "COORDINATOR_ERRORS", "RETRIABLE_CODES", "worst_error", "error_name", "group_error", "ResponseHandler"]

E = ErrorCode

# The versions a member can write and read, per API key: Java's ranges, except OffsetCommit from v2
# (v0/v1 are gone from Kafka 4) and OffsetFetch from v1 (v0 read ZooKeeper offsets).
CLIENT_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.FIND_COORDINATOR: (0, 6), ApiKey.JOIN_GROUP: (0, 9), ApiKey.SYNC_GROUP: (0, 5), ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5), ApiKey.OFFSET_COMMIT: (2, 10), ApiKey.OFFSET_FETCH: (1, 10)}
# OffsetCommit and OffsetFetch name topics by id from v10 (KIP-848): sent only when every topic's id is known.
TOPIC_ID_VERSION = 10
# The versions that first carry the group instance id (static membership needs them).
INSTANCE_ID_VERSIONS = {ApiKey.JOIN_GROUP: 5, ApiKey.SYNC_GROUP: 3, ApiKey.HEARTBEAT: 3, ApiKey.LEAVE_GROUP: 3,
                        ApiKey.OFFSET_COMMIT: 7}
NO_GENERATION = -1


def negotiate_versions(api_versions: Mapping[int, object] | None) -> dict[ApiKey, int]:
    """Per API key, the highest version both sides support, from the broker's ``(min, max)`` or just
    ``max`` per key (None: our newest versions). A key with no common version is left out."""
    chosen: dict[ApiKey, int] = {}
    for key, (low, high) in CLIENT_VERSIONS.items():
        if api_versions is None:
            chosen[key] = high
            continue
        offered = api_versions.get(key)
        if offered is None:
            continue
        broker_low, broker_high = offered if isinstance(offered, tuple) else (0, offered)
        version = min(high, broker_high)
        if version >= max(low, broker_low):
            chosen[key] = version
    return chosen


def request_version(versions: Mapping[ApiKey, int], api_key: ApiKey, *, static: bool) -> int:
    """The version requests of ``api_key`` go out at (``versions``: negotiate_versions'); GroupError if
    the broker supports none of ours, or (``static``: a group.instance.id) none that carries it."""
    version = versions.get(api_key)
    if version is None:
        low, high = CLIENT_VERSIONS[api_key]
        raise GroupError(f"the broker supports no version of API {api_key} this client can use "
                         f"(client versions {low}-{high})", E.UNSUPPORTED_VERSION)
    if static and version < INSTANCE_ID_VERSIONS.get(api_key, 0):
        raise GroupError(f"static membership needs API {api_key} v{INSTANCE_ID_VERSIONS[api_key]}+, "
                         f"the broker offers v{version}", E.UNSUPPORTED_VERSION)
    return version


# ---- values ----------------------------------------------------------------------------------------------

class Coordinator(NamedTuple):
    """The broker coordinating the group. Java talks to it over a connection of its own (node id
    2**31 - 1 - node_id) so that group traffic never queues behind fetches; a driver should too."""

    node_id: int
    host: str
    port: int


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class MemberState(enum.Enum):
    UNJOINED = "unjoined"  # not in the group: no subscription, left, or stopped by a fatal error
    FINDING_COORDINATOR = "finding coordinator"  # wants to join but does not know the coordinator yet
    JOINING = "joining"  # JoinGroup to send or in flight
    SYNCING = "syncing"  # SyncGroup in flight
    STABLE = "stable"  # has its assignment (the coordinator may be being looked up again meanwhile)
    REBALANCING = "rebalancing"  # must rejoin: committing and giving up partitions before JoinGroup
    LEAVING = "leaving"  # closing: final commits, then LeaveGroup
    CLOSED = "closed"


@dataclass
class Generation:
    generation_id: int = NO_GENERATION
    member_id: str = ""
    protocol: str | None = None


# ---- events ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PartitionsRevoked:
    """Stop fetching these; the offsets may still be committed (the generation is still valid)."""
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionsLost:
    """Stop fetching these; another member may own them already, so do not commit them."""
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionsAssigned:
    partitions: tuple[TopicPartition, ...]
    generation_id: int
    member_id: str
    leader: bool
    added: tuple[TopicPartition, ...] | None = None  # incremental (KIP-848): the new ones; None: all are


@dataclass(frozen=True)
class CommittedOffsets:
    """Committed offsets (None where nothing is committed). ``request_id`` is None for the fetch made
    for a new assignment (delivered only while that assignment is current), else ``fetch_committed``'s."""
    request_id: int | None
    offsets: dict[TopicPartition, OffsetAndMetadata | None]
    error: GroupError | None = None


@dataclass(frozen=True)
class CommitCompleted:
    request_id: int
    offsets: dict[TopicPartition, OffsetAndMetadata]
    error: GroupError | None = None
    auto: bool = False


@dataclass(frozen=True)
class GroupFailure:
    error: GroupError
    fatal: bool


# ---- requests --------------------------------------------------------------------------------------------

class OutgoingRequest:
    """A request to send: ``body`` at ``version`` to ``destination`` (None: any broker). Hand the same
    object back to handle_response / handle_failure."""

    __slots__ = ("body", "version", "destination", "timeout_ms", "sent_ms", "_kind", "_context")

    def __init__(self, kind: str, body: Any, version: int, destination: Coordinator | None, timeout_ms: int,
                 now_ms: float, context: Any = None):
        self._kind = kind
        self.body = body
        self.version = version
        self.destination = destination
        self.timeout_ms = timeout_ms
        self.sent_ms = now_ms
        self._context = context

    @property
    def api_key(self) -> ApiKey:
        return ApiKey(self.body.API_KEY)

    @property
    def kind(self) -> str:
        """What the request is for: find, join, sync, heartbeat, leave, commit or fetch."""
        return self._kind

    @property
    def context(self) -> Any:
        """What the member needs back with the answer (the commit, the generation, ...)."""
        return self._context

    def __repr__(self) -> str:
        return f"OutgoingRequest({type(self.body).__name__} v{self.version} -> {self.destination})"


# What reads the answer to a request: (the request, its response, the time in ms).
ResponseHandler = Callable[[OutgoingRequest, Any, float], None]

# The response each request a member sends expects.
RESPONSES: dict[ApiKey, type] = {
    ApiKey.FIND_COORDINATOR: FindCoordinatorResponse, ApiKey.JOIN_GROUP: JoinGroupResponse,
    ApiKey.SYNC_GROUP: SyncGroupResponse, ApiKey.HEARTBEAT: HeartbeatResponse, ApiKey.LEAVE_GROUP: LeaveGroupResponse,
    ApiKey.OFFSET_COMMIT: OffsetCommitResponse, ApiKey.OFFSET_FETCH: OffsetFetchResponse,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ConsumerGroupHeartbeatResponse}


# ---- error codes -----------------------------------------------------------------------------------------

COORDINATOR_ERRORS = frozenset({E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR})
RETRIABLE_CODES = frozenset(code for code in ErrorCode if code.retriable)
# When a response carries several errors, the one that decides what happens next.
_PRECEDENCE = (E.FENCED_INSTANCE_ID, E.GROUP_AUTHORIZATION_FAILED, E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION,
               E.REBALANCE_IN_PROGRESS, E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE)


def worst_error(codes: Iterable[int]) -> int:
    """Of several error codes in one response, the one that decides what happens next."""
    codes = set(codes)
    for code in _PRECEDENCE:
        if code in codes:
            return code
    non_retriable = sorted(int(c) for c in codes if c not in RETRIABLE_CODES)
    return ErrorCode.of(non_retriable[0] if non_retriable else min(int(c) for c in codes))


def error_name(code: int) -> str:
    known = ErrorCode.of(code)
    return known.name if isinstance(known, ErrorCode) else f"error code {code}"


def group_error(code: int, what: str) -> GroupError:
    return GroupError(f"{what}: {error_name(code)}", int(code))

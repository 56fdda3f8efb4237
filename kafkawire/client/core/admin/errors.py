"""How the admin client reads error codes: the exception a code becomes, and which codes a retry may cure
(and by what: finding the coordinator or the partition's leader again)."""
from __future__ import annotations

from kafkawire.error_codes import ErrorCode

from ...errors import KafkaError, error_for_code

__all__ = ["error_for", "is_retriable", "outcome_of", "COORDINATOR_ERRORS", "LEADER_ERRORS", "UNKNOWN_TOPIC_ERRORS",
           "Retry"]

E = ErrorCode
# The coordinator moved or is not elected yet (find it again and retry), or is loading (retry it), as
# Java's CoordinatorStrategy does.
COORDINATOR_ERRORS = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS})
# The partition's leader moved or is not elected yet: look it up again and retry.
LEADER_ERRORS = frozenset({E.NOT_LEADER_OR_FOLLOWER, E.LEADER_NOT_AVAILABLE, E.FENCED_LEADER_EPOCH,
                           E.UNKNOWN_LEADER_EPOCH, E.REPLICA_NOT_AVAILABLE, E.BROKER_NOT_AVAILABLE})
UNKNOWN_TOPIC_ERRORS = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_ID})


class Retry:
    """A resource's outcome that a later attempt may change: the error code, and whether the coordinator
    or the leader must be looked up again first."""

    __slots__ = ("code", "message", "refresh")

    def __init__(self, code: int, message: str | None = None, refresh: str | None = None):
        self.code = code
        self.message = message
        self.refresh = refresh  # "coordinator", "metadata" or None

    def error(self) -> KafkaError:
        """What the resource fails with if no retry is left."""
        return error_for(self.code, self.message)

    def __repr__(self) -> str:
        return f"Retry({ErrorCode.of(self.code)!r}, refresh={self.refresh})"


def error_for(code: int, message: str | None = None, resource: object = None) -> KafkaError:
    """The client exception for a broker's error ``code`` (UnknownTopicError for an unknown topic, an
    AuthorizationException subclass for a denied one)."""
    text = message or ""
    if resource is not None:
        text = f"{resource}: {text}" if text else str(resource)
    return error_for_code(code, text)


def is_retriable(code: int) -> bool:
    name = ErrorCode.of(code)
    return isinstance(name, ErrorCode) and name.retriable


def outcome_of(code: int, message: str | None = None, resource: object = None, *,
               coordinator: bool = False, leader: bool = False) -> Retry | KafkaError | None:
    """None for NONE; a Retry for what a retry may cure (after a coordinator lookup with ``coordinator``,
    a metadata refresh with ``leader``); the resource's exception otherwise."""
    if code == E.NONE:
        return None
    if coordinator and code in COORDINATOR_ERRORS:
        # a coordinator loading its state is the right one: ask it again; the others moved
        return Retry(code, message, None if code == E.COORDINATOR_LOAD_IN_PROGRESS else "coordinator")
    if leader and (code in LEADER_ERRORS or code in UNKNOWN_TOPIC_ERRORS):
        return Retry(code, message, "metadata")
    if is_retriable(code) and code not in UNKNOWN_TOPIC_ERRORS:
        return Retry(code, message)
    return error_for(code, message, resource)

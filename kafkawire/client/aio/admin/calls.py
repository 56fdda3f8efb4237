"""What every part of AsyncAdminClient shares: its router, the call timeouts (confluent-kafka's
``request_timeout`` and ``operation_timeout``, in seconds) and the checks of a call's arguments; and
``part_call``, by which the client offers its parts' calls as its own methods."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

from kafkawire import messages

from ...core.admin.errors import outcome_of
from ...core.admin.topics import Node
from ...core.topic_partition import TopicPartition
from ...errors import KafkaError
from .router import AdminRouter

__all__ = ["AdminCalls", "AdminPart", "part_call", "unique", "raise_or", "as_partition"]

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")


def unique(items: Iterable[T], what: str) -> list[T]:
    """``items`` in order, refusing duplicates (confluent-kafka raises ValueError for them too)."""
    seen: list[T] = []
    for item in items:
        if item in seen:
            raise ValueError(f"duplicate {what}: {item!r}")
        seen.append(item)
    return seen


def as_partition(tp: TopicPartition | tuple[str, int]) -> TopicPartition:
    """A TopicPartition from itself or a (topic, partition) pair."""
    return tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)


def raise_or(outcome: Any) -> Any:
    """A single-result call's result, or its exception raised."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


class AdminCalls:
    """The call machinery AsyncAdminClient gives each of its parts: the router and the call timeouts."""

    def __init__(self, router: AdminRouter) -> None:
        self.router = router

    def timeout_ms(self, request_timeout: float | None) -> float:
        """A call's timeout, retries included: ``request_timeout`` seconds, else default.api.timeout.ms."""
        if request_timeout is None:
            return float(self.router.config.default_api_timeout_ms)
        if request_timeout < 0:
            raise ValueError(f"request_timeout must be at least 0 seconds, not {request_timeout}")
        return request_timeout * 1000

    def operation_ms(self, operation_timeout: float | None, request_timeout: float | None) -> int:
        """TimeoutMs for the broker: how long it may wait for the operation to complete (by default the
        call's timeout, at most request.timeout.ms, so the answer comes before the request times out)."""
        if operation_timeout is None:
            return int(min(self.timeout_ms(request_timeout), self.router.config.request_timeout_ms))
        if operation_timeout < 0:
            raise ValueError(f"operation_timeout must be at least 0 seconds, not {operation_timeout}")
        return int(operation_timeout * 1000)

    def node(self, node_id: int) -> Node:
        """The broker ``node_id`` (a group's coordinator, say) as descriptions name it."""
        known = self.router.nodes().get(node_id)
        if known is not None:
            return known
        host, port = self.router.connections.brokers.get(node_id, ("", -1))
        return Node(node_id, host, port)

    async def on_every_broker(self, api_key: int, build: Callable[[int], Any], read: Callable[[Any], Any],
                              request_timeout: float | None, what: str) -> tuple[list[Any], list[Exception]]:
        """``build(version)`` sent to every broker (a listing: ListGroups, ListTransactions), each answer
        ``read`` into a list or the broker's KafkaError: every broker's items, and the errors of those that
        could not answer (retriable ones retried until the call's timeout)."""
        async def attempt(nodes: list[int]) -> dict[int, object]:
            found: dict[int, object] = {}
            for node in nodes:
                connection = await self.router.connection(node)
                version = connection.api_version(api_key)
                listed = read(await connection.send(build(version), version))
                found[node] = (outcome_of(listed.code, None, f"{messages.api(api_key).name} on broker {node}",
                                          coordinator=True) if isinstance(listed, KafkaError) else listed)
            return found
        outcomes = await self.router.run(await self.router.broker_ids(), attempt, self.timeout_ms(request_timeout),
                                         what)
        items: list[Any] = []
        errors: list[Exception] = []
        for outcome in outcomes.values():
            if isinstance(outcome, Exception):
                errors.append(outcome)
            else:
                items.extend(cast("list[Any]", outcome))
        return items, errors

    async def send_any(self, request: Any, min_version: int | None = None) -> Any:
        """``request`` to any broker, at the highest version both speak (at least ``min_version``)."""
        connection = await self.router.any_connection()
        return await connection.send(request, connection.api_version(request.API_KEY, min_version))


class AdminPart:
    """A part of AsyncAdminClient (its topic calls, group calls...): an object the client owns, made with
    the client's AdminCalls."""

    def __init__(self, calls: AdminCalls) -> None:
        self._calls = calls
        self._router = calls.router


class part_call(Generic[P, R]):
    """A method of AsyncAdminClient that one of its parts carries out: in the client's class body,
    ``create_topics = part_call("_topics", TopicAdmin.create_topics)`` makes ``client.create_topics(...)``
    call ``client._topics.create_topics(...)``. The part's method holds the signature and the docstring
    (the class attribute is that method, so help() and the docs show them)."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self._part = part
        self._name = method.__name__
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, client: None, owner: type) -> Callable[Concatenate[Any, P], R]: ...
    @overload
    def __get__(self, client: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, client: object | None, owner: type) -> Callable[..., R]:
        if client is None:
            return self._method
        bound: Callable[P, R] = getattr(getattr(client, self._part), self._name)
        return bound

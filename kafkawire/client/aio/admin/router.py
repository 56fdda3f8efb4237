"""Where the admin client's requests go, and how they are retried.

``AdminRouter`` holds the client's connections and metadata (the same ``ConnectionManager`` and
``Metadata`` the producer and consumer use) and finds the broker for each resource, as Kafka's admin
client does: any broker for topic, config, ACL and SCRAM requests (Kafka 4 brokers forward what the
controller must decide), a broker's own configs from that broker, the group or transaction coordinator
(FindCoordinator, cached until it moves) for group and transaction requests, and each partition's leader
for ListOffsets, DeleteRecords and DescribeProducers.

``run`` retries per resource: an attempt returns each resource's outcome, a result, an exception or a
``Retry`` (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, NOT_LEADER_OR_FOLLOWER, a lost connection...),
and the resources to retry go again after ``retry.backoff.ms`` (doubling up to ``retry.backoff.max.ms``),
the coordinator or the leaders looked up again first, until the call's timeout. Outcomes settled stay
settled, as in Java's AdminApiDriver.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import FindCoordinatorRequest

from ...core.admin.config import AdminConfig
from ...core.admin.errors import Retry, error_for, outcome_of
from ...core.admin.topics import Node
from ...core.cluster_metadata import TRANSIENT_TOPIC_ERRORS
from ...core.group.requests import read_find_coordinator
from ...core.topic_partition import TopicPartition
from ...errors import (
    AuthenticationException, IncompatibleBrokerError, KafkaConnectionError, KafkaError,
)
from ..connection import COORDINATOR_ROLE, BrokerConnection
from ..connection_manager import ConnectionManager
from ..metadata_refresh import Metadata

__all__ = ["AdminRouter", "GROUP", "TRANSACTION"]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
GROUP, TRANSACTION = 0, 1  # FindCoordinator key types
_BATCHED_FIND_COORDINATOR = 4  # v4+ takes a list of keys (KIP-699)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class AdminRouter:
    """Connections, metadata, coordinators and retries for the admin client (see the module docstring)."""

    def __init__(self, config: AdminConfig, on_authentication_failure: Callable[[AuthenticationException], None]
                 | None = None):
        self.config = config
        self.connections = ConnectionManager.of(config, config.client_id or "kafkawire-admin",
                                                on_authentication_failure=on_authentication_failure)
        self.metadata = Metadata(self.connections, config.bootstrap_servers, allow_auto_topic_creation=False,
                                 metadata_max_age_ms=config.metadata_max_age_ms,
                                 retry_backoff_ms=config.retry_backoff_ms)
        self._coordinators: dict[tuple[int, str], int] = {}
        self.retries = 0  # resources sent again, for tests and metrics
        self.closed = False

    # ---- brokers -----------------------------------------------------------------------------------------
    async def any_connection(self) -> BrokerConnection:
        if self.metadata.cluster.updated_ms is None:
            await self.metadata.refresh()
        return await self.metadata.any_connection()

    async def connection(self, node_id: int, role: str | None = None) -> BrokerConnection:
        if node_id not in self.connections.brokers:
            await self.metadata.refresh()
        if role is None:
            return await self.connections.connection(node_id)
        return await self.connections.connection(node_id, role)

    def nodes(self) -> dict[int, Node]:
        return {b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in self.metadata.cluster.brokers.values()}

    async def broker_ids(self) -> list[int]:
        """Every broker's id, from fresh metadata."""
        await self.metadata.refresh()
        return sorted(self.metadata.cluster.brokers)

    # ---- coordinators ------------------------------------------------------------------------------------
    async def coordinators(self, key_type: int, keys: Sequence[str]) -> dict[str, object]:
        """key -> the coordinator's node id, or a Retry / error for keys whose lookup failed."""
        found: dict[str, object] = {}
        missing = []
        for key in keys:
            node = self._coordinators.get((key_type, key))
            if node is not None:
                found[key] = node
            else:
                missing.append(key)
        if not missing:
            return found
        connection = await self.any_connection()
        version = connection.api_version(FindCoordinatorRequest.API_KEY, 1)
        batches = [missing] if version >= _BATCHED_FIND_COORDINATOR else [[key] for key in missing]
        for batch in batches:
            if version >= _BATCHED_FIND_COORDINATOR:
                request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=batch)
            else:
                request = FindCoordinatorRequest(key=batch[0], key_type=key_type)
            response = await connection.send(request, version)
            for key in batch:
                code, node, host, port, message = read_find_coordinator(response, version, key)
                failure = outcome_of(code, message, f"coordinator of {key!r}", coordinator=True)
                if failure is not None:
                    found[key] = failure
                    continue
                if node not in self.connections.brokers:  # a broker metadata has not shown yet
                    self.connections.brokers[node] = (host, port)
                self._coordinators[(key_type, key)] = node
                found[key] = node
        return found

    def forget_coordinator(self, key_type: int, key: str) -> None:
        self._coordinators.pop((key_type, key), None)

    async def per_coordinator(self, key_type: int, keys: Sequence[str],
                              send: Callable[[BrokerConnection, int, list[str]], Awaitable[Mapping[str, object]]]
                              ) -> dict[str, object]:
        """One attempt: ``send(connection, node, keys)`` to each coordinator of ``keys``, concurrently."""
        routes = await self.coordinators(key_type, keys)
        outcomes: dict[str, object] = {}
        by_node: dict[int, list[str]] = {}
        for key, route in routes.items():
            if isinstance(route, int):
                by_node.setdefault(route, []).append(key)
            else:
                outcomes[key] = route

        async def one(node: int, batch: list[str]) -> Mapping[str, object]:
            try:
                return await send(await self.connection(node, COORDINATOR_ROLE), node, batch)
            except (KafkaConnectionError, KafkaError) as error:  # (not AuthenticationException: raised on)
                if isinstance(error, AuthenticationException):
                    raise
                for key in batch:
                    self.forget_coordinator(key_type, key)
                return dict.fromkeys(batch, Retry(ErrorCode.NETWORK_EXCEPTION, str(error), "coordinator"))
        for result in await asyncio.gather(*(one(node, batch) for node, batch in by_node.items())):
            outcomes.update(result)
        for key, outcome in outcomes.items():
            if isinstance(outcome, Retry) and outcome.refresh == "coordinator":
                self.forget_coordinator(key_type, key)
        return outcomes

    # ---- partition leaders -------------------------------------------------------------------------------
    async def leaders(self, partitions: Iterable[TopicPartition]) -> tuple[dict[int, list[TopicPartition]],
                                                                            dict[TopicPartition, object]]:
        """Partitions grouped by leader, and the outcomes of those without one (a Retry while a leader is
        being elected, UnknownTopicError for a topic or partition the cluster does not have)."""
        partitions = list(partitions)
        topics = {tp.topic for tp in partitions}
        cluster = self.metadata.cluster
        if self.metadata.needs_update or not topics <= set(cluster.topics) | set(cluster.topic_errors):
            await self.metadata.refresh(topics)
        by_leader: dict[int, list[TopicPartition]] = {}
        failed: dict[TopicPartition, object] = {}
        for tp in partitions:
            code = cluster.topic_errors.get(tp.topic)
            info = cluster.topics.get(tp.topic)
            if info is None or tp.partition not in info.partitions:
                if code is not None and code not in TRANSIENT_TOPIC_ERRORS:
                    failed[tp] = error_for(code, None, f"partition {tp}")
                else:
                    failed[tp] = error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, f"partition {tp}")
                continue
            leader = cluster.leader(tp)
            if leader is None:
                failed[tp] = Retry(ErrorCode.LEADER_NOT_AVAILABLE, f"partition {tp} has no leader", "metadata")
            else:
                by_leader.setdefault(leader, []).append(tp)
        return by_leader, failed

    async def per_leader(self, partitions: Sequence[TopicPartition],
                         send: Callable[[BrokerConnection, list[TopicPartition]],
                                        Awaitable[Mapping[TopicPartition, object]]]
                         ) -> dict[TopicPartition, object]:
        """One attempt: ``send(connection, partitions)`` to each leader of ``partitions``, concurrently."""
        by_leader, outcomes = await self.leaders(partitions)

        async def one(node: int, batch: list[TopicPartition]) -> Mapping[TopicPartition, object]:
            try:
                return await send(await self.connection(node), batch)
            except (KafkaConnectionError, KafkaError) as error:
                if isinstance(error, AuthenticationException):
                    raise
                return dict.fromkeys(batch, Retry(ErrorCode.NETWORK_EXCEPTION, str(error), "metadata"))
        for result in await asyncio.gather(*(one(node, batch) for node, batch in by_leader.items())):
            outcomes.update(result)
        return outcomes

    # ---- retries -----------------------------------------------------------------------------------------
    async def run(self, keys: Iterable[K], attempt: Callable[[list[K]], Awaitable[Mapping[K, object]]],
                  timeout_ms: float, what: str) -> dict[K, object]:
        """Each key's result or exception: ``attempt(pending)`` again for the keys it left a Retry for (or
        none at all), until ``timeout_ms`` has passed: then a KafkaTimeoutError naming the broker(s) and
        the last error (or what the attempt was still waiting for)."""
        pending = list(dict.fromkeys(keys))
        results: dict[K, object] = {}
        last: dict[K, BaseException] = {}
        started = _now_ms()
        deadline = started + timeout_ms
        backoff = float(self.config.retry_backoff_ms)
        while pending:
            if self.closed:  # calls in flight end with the client, not at their timeout
                results.update(dict.fromkeys(pending, KafkaConnectionError("the admin client is closed")))
                return results
            remaining = deadline - _now_ms()
            if remaining <= 0:
                break
            timeout = asyncio.timeout(remaining / 1000)
            try:
                async with timeout:
                    outcomes = await attempt(pending)
            except AuthenticationException as error:  # not retriable: the credentials must change first
                results.update(dict.fromkeys(pending, error))
                return results
            except IncompatibleBrokerError as error:
                results.update(dict.fromkeys(pending, error))
                return results
            except (KafkaConnectionError, KafkaError) as error:  # (RequestTimedOut too: a TimeoutError)
                log.debug("%s: %s; retrying", what, error)
                self.metadata.request_update()
                last.update(dict.fromkeys(pending, error))
                outcomes = {}
            except TimeoutError:
                if timeout.expired():  # the call's time is up, in the middle of an attempt
                    break
                raise
            retry = []
            for key in pending:
                if key not in outcomes:  # the attempt failed as a whole, or the answer left the key out
                    last.setdefault(key, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {key}"))
                    retry.append(key)
                    continue
                outcome = outcomes[key]
                if isinstance(outcome, Retry):
                    last[key] = outcome.error()
                    if outcome.refresh == "metadata":
                        self.metadata.request_update()
                    retry.append(key)
                else:
                    results[key] = outcome
            pending = retry
            if pending:
                self.retries += len(pending)
                await asyncio.sleep(max(0.0, min(backoff, deadline - _now_ms())) / 1000)
                backoff = min(backoff * 2, float(self.config.retry_backoff_max_ms))
        for key in pending:
            results[key] = self.connections.timeout_error(f"{what} {key!r}" if key != "" else what, timeout_ms,
                                                          last.get(key))
        return results

    async def run_one(self, attempt: Callable[[], Awaitable[object]], timeout_ms: float, what: str) -> object:
        """``run`` for a call with one result (describe_cluster, describe_acls...)."""
        async def wrapped(keys: list[str]) -> dict[str, object]:
            return {"": await attempt()}
        return (await self.run([""], wrapped, timeout_ms, what))[""]

    async def close(self) -> None:
        self.closed = True
        await self.metadata.close()
        await self.connections.close()

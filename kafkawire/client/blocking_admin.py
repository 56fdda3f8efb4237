"""AdminClient: the blocking admin client, confluent-kafka's ``AdminClient`` in shape. AsyncAdminClient runs
on an event loop of its own in a background thread; each call returns at once with futures
(``concurrent.futures.Future``): a dict of one future per resource where confluent-kafka returns one
(``create_topics``, ``describe_configs``, ``list_offsets``...), else a single future. ``result(timeout)``
gives the resource's result or raises its exception::

    admin = AdminClient({"bootstrap.servers": "localhost:9092"})
    for topic, future in admin.create_topics([NewTopic("events", num_partitions=3)]).items():
        future.result()                       # None, or raises KafkaError(TOPIC_ALREADY_EXISTS) ...
    admin.close()

A failure of the whole call (no broker reachable, bad credentials) fails every future it returned.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Coroutine, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .aio.admin.calls import unique
from .aio.admin.client import AsyncAdminClient
from .blocking import _CLOSE_MARGIN_S, _LoopThread
from .core.admin.acls import AclBinding, AclBindingFilter
from .core.admin.config import AdminConfig
from .core.admin.groups import ConsumerGroupTopicPartitions
from .core.admin.partitions import IsolationLevel, OffsetSpec
from .core.admin.reassignments import ElectionType
from .core.admin.resource_configs import ConfigResource
from .core.admin.client_quotas import ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilter
from .core.admin.scram import UserScramCredentialDeletion, UserScramCredentialUpsertion
from .core.admin.topics import NewPartitions, NewTopic
from .core.topic_partition import TopicPartition
from .errors import KafkaConnectionError

__all__ = ["AdminClient"]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
Future = concurrent.futures.Future


class AdminClient:
    """Kafka's admin operations for blocking code, under confluent-kafka's AdminClient names (see the
    module docstring). Settings: an AdminConfig, a mapping of Kafka's property names, or keyword
    properties. Keyword options of the calls (``request_timeout``, ``operation_timeout``,
    ``validate_only``...) are AsyncAdminClient's."""

    config: AdminConfig

    def __init__(self, config: AdminConfig | Mapping[str, Any] | None = None, **properties: Any) -> None:
        self._thread = _LoopThread("kafkawire-admin")

        async def create() -> AsyncAdminClient:
            return AsyncAdminClient(config, **properties)
        try:
            self._admin = self._thread.run(create())
        except BaseException:
            self._thread.stop()
            raise
        self.config = self._admin.config
        self._calls: set[Future] = set()  # calls in flight, cancelled if close leaves them running
        self._thread.watch(self, self._admin.close, _CLOSE_MARGIN_S)  # dropped without close()

    # ---- running calls ------------------------------------------------------------------------------------
    def _start(self, coroutine: Coroutine[Any, Any, Any]) -> Future:
        if self._thread.loop.is_closed():
            coroutine.close()
            raise KafkaConnectionError("the admin client is closed")
        call = asyncio.run_coroutine_threadsafe(coroutine, self._thread.loop)
        self._calls.add(call)
        # (the callback refers to this client: a call's future keeps it open, as its caller expects)
        call.add_done_callback(lambda done: self._calls.discard(done))
        return call

    def _per_key(self, keys: Iterable[K], coroutine: Coroutine[Any, Any, Mapping[Any, object]],
                 key_of: Callable[[K], Hashable] = lambda key: key) -> dict[K, Future]:
        """One future per key, resolved from the call's ``{key: result or exception}``."""
        keys = unique(keys, "resource")  # refused here and now, as confluent-kafka does
        futures: dict[K, Future] = {key: Future() for key in keys}
        for future in futures.values():
            future.set_running_or_notify_cancel()

        def settle(call: Future) -> None:
            error = KafkaConnectionError("the admin client is closed") if call.cancelled() else call.exception()
            outcomes = call.result() if error is None else {}
            for key, future in futures.items():
                if error is not None:
                    future.set_exception(error)
                    continue
                outcome = outcomes.get(key_of(key), LookupError(f"no result for {key!r}"))
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
        self._start(coroutine).add_done_callback(settle)
        return futures

    # ---- topics, cluster, configs -------------------------------------------------------------------------
    def create_topics(self, new_topics: Sequence[NewTopic], **options: Any) -> dict[str, Future]:
        return self._per_key([t.topic for t in new_topics], self._admin.create_topics(new_topics, **options))

    def delete_topics(self, topics: Sequence[str], **options: Any) -> dict[str, Future]:
        return self._per_key(topics, self._admin.delete_topics(topics, **options))

    def create_partitions(self, new_partitions: Sequence[NewPartitions], **options: Any) -> dict[str, Future]:
        return self._per_key([p.topic for p in new_partitions],
                             self._admin.create_partitions(new_partitions, **options))

    def describe_topics(self, topics: Sequence[str] | object, **options: Any) -> dict[str, Future]:
        names = list(getattr(topics, "topic_names", topics))  # type: ignore[call-overload]
        return self._per_key(names, self._admin.describe_topics(names, **options))

    def list_topics(self, **options: Any) -> Future:
        return self._start(self._admin.list_topics(**options))

    def describe_cluster(self, **options: Any) -> Future:
        return self._start(self._admin.describe_cluster(**options))

    def describe_configs(self, resources: Sequence[ConfigResource], **options: Any) -> dict[ConfigResource, Future]:
        return self._per_key(resources, self._admin.describe_configs(resources, **options))

    def alter_configs(self, resources: Sequence[ConfigResource], **options: Any) -> dict[ConfigResource, Future]:
        return self._per_key(resources, self._admin.alter_configs(resources, **options))

    def incremental_alter_configs(self, resources: Sequence[ConfigResource],
                                  **options: Any) -> dict[ConfigResource, Future]:
        return self._per_key(resources, self._admin.incremental_alter_configs(resources, **options))

    # ---- partitions -------------------------------------------------------------------------------------
    def list_offsets(self, topic_partition_offsets: Mapping[TopicPartition, OffsetSpec], *,
                     isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
                     **options: Any) -> dict[TopicPartition, Future]:
        return self._per_key(topic_partition_offsets, self._admin.list_offsets(
            topic_partition_offsets, isolation_level=isolation_level, **options), TopicPartition._make)

    def delete_records(self, topic_partition_offsets: Mapping[TopicPartition, int],
                       **options: Any) -> dict[TopicPartition, Future]:
        return self._per_key(topic_partition_offsets, self._admin.delete_records(topic_partition_offsets, **options),
                             TopicPartition._make)

    def describe_producers(self, topic_partitions: Sequence[TopicPartition],
                           **options: Any) -> dict[TopicPartition, Future]:
        return self._per_key(topic_partitions, self._admin.describe_producers(topic_partitions, **options),
                             TopicPartition._make)

    # ---- replicas -----------------------------------------------------------------------------------------
    def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, Sequence[int] | None],
                                      **options: Any) -> dict[TopicPartition, Future]:
        return self._per_key(reassignments, self._admin.alter_partition_reassignments(reassignments, **options),
                             TopicPartition._make)

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None,
                                     **options: Any) -> Future:
        return self._start(self._admin.list_partition_reassignments(partitions, **options))

    def elect_leaders(self, election_type: ElectionType, partitions: Iterable[TopicPartition] | None = None,
                      **options: Any) -> Future:
        """One future of ``{partition: None or exception}``, as confluent-kafka's elect_leaders."""
        return self._start(self._admin.elect_leaders(election_type, partitions, **options))

    # ---- groups -----------------------------------------------------------------------------------------
    def list_consumer_groups(self, **options: Any) -> Future:
        return self._start(self._admin.list_consumer_groups(**options))

    def describe_consumer_groups(self, group_ids: Sequence[str], **options: Any) -> dict[str, Future]:
        return self._per_key(group_ids, self._admin.describe_consumer_groups(group_ids, **options))

    def delete_consumer_groups(self, group_ids: Sequence[str], **options: Any) -> dict[str, Future]:
        return self._per_key(group_ids, self._admin.delete_consumer_groups(group_ids, **options))

    def list_consumer_group_offsets(self, requests: Sequence[ConsumerGroupTopicPartitions],
                                    **options: Any) -> dict[str, Future]:
        return self._per_key([r.group_id for r in requests],
                             self._admin.list_consumer_group_offsets(requests, **options))

    def alter_consumer_group_offsets(self, requests: Sequence[ConsumerGroupTopicPartitions],
                                     **options: Any) -> dict[str, Future]:
        return self._per_key([r.group_id for r in requests],
                             self._admin.alter_consumer_group_offsets(requests, **options))

    def delete_consumer_group_offsets(self, requests: Sequence[ConsumerGroupTopicPartitions],
                                      **options: Any) -> dict[str, Future]:
        return self._per_key([r.group_id for r in requests],
                             self._admin.delete_consumer_group_offsets(requests, **options))

    # ---- share groups (KIP-932), under Java Admin's names ------------------------------------------------------
    def list_share_groups(self, **options: Any) -> Future:
        return self._start(self._admin.list_share_groups(**options))

    def describe_share_groups(self, group_ids: Sequence[str], **options: Any) -> dict[str, Future]:
        return self._per_key(group_ids, self._admin.describe_share_groups(group_ids, **options))

    def delete_share_groups(self, group_ids: Sequence[str], **options: Any) -> dict[str, Future]:
        return self._per_key(group_ids, self._admin.delete_share_groups(group_ids, **options))

    def list_share_group_offsets(self, group_specs: Mapping[str, Iterable[TopicPartition] | None],
                                 **options: Any) -> dict[str, Future]:
        return self._per_key(group_specs, self._admin.list_share_group_offsets(group_specs, **options))

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int],
                                  **options: Any) -> dict[TopicPartition, Future]:
        return self._per_key(offsets, self._admin.alter_share_group_offsets(group_id, offsets, **options),
                             TopicPartition._make)

    def delete_share_group_offsets(self, group_id: str, topics: Sequence[str], **options: Any) -> dict[str, Future]:
        return self._per_key(topics, self._admin.delete_share_group_offsets(group_id, topics, **options))

    # ---- transactions -----------------------------------------------------------------------------------
    def describe_transactions(self, transactional_ids: Sequence[str], **options: Any) -> dict[str, Future]:
        return self._per_key(transactional_ids, self._admin.describe_transactions(transactional_ids, **options))

    def list_transactions(self, **options: Any) -> Future:
        return self._start(self._admin.list_transactions(**options))

    # ---- ACLs, SCRAM users and client quotas -------------------------------------------------------------
    def create_acls(self, acls: Sequence[AclBinding], **options: Any) -> dict[AclBinding, Future]:
        return self._per_key(acls, self._admin.create_acls(acls, **options))

    def describe_acls(self, acl_binding_filter: AclBindingFilter, **options: Any) -> Future:
        return self._start(self._admin.describe_acls(acl_binding_filter, **options))

    def delete_acls(self, acl_binding_filters: Sequence[AclBindingFilter],
                    **options: Any) -> dict[AclBindingFilter, Future]:
        return self._per_key(acl_binding_filters, self._admin.delete_acls(acl_binding_filters, **options))

    def describe_user_scram_credentials(self, users: Sequence[str] | None = None,
                                        **options: Any) -> Future | dict[str, Future]:
        """As confluent-kafka: one future for the dict of every user's description when ``users`` is None,
        else one future per user."""
        if users is None:
            return self._start(self._admin.describe_user_scram_credentials(None, **options))
        return self._per_key(users, self._admin.describe_user_scram_credentials(users, **options))

    def alter_user_scram_credentials(self, alterations: Sequence[UserScramCredentialUpsertion
                                                                 | UserScramCredentialDeletion],
                                     **options: Any) -> dict[str, Future]:
        return self._per_key(list(dict.fromkeys(a.user for a in alterations)),
                             self._admin.alter_user_scram_credentials(alterations, **options))

    # ---- delegation tokens ------------------------------------------------------------------------------
    def create_delegation_token(self, renewers: Sequence[str] = (), **options: Any) -> Future:
        return self._start(self._admin.create_delegation_token(renewers, **options))

    def renew_delegation_token(self, hmac: bytes, **options: Any) -> Future:
        return self._start(self._admin.renew_delegation_token(hmac, **options))

    def expire_delegation_token(self, hmac: bytes, **options: Any) -> Future:
        return self._start(self._admin.expire_delegation_token(hmac, **options))

    def describe_delegation_token(self, owners: Sequence[str] | None = None, **options: Any) -> Future:
        return self._start(self._admin.describe_delegation_token(owners, **options))

    def describe_client_quotas(self, quota_filter: ClientQuotaFilter, **options: Any) -> Future:
        """One future for ``{entity: {quota key: value}}`` (Java Admin's describeClientQuotas)."""
        return self._start(self._admin.describe_client_quotas(quota_filter, **options))

    def alter_client_quotas(self, alterations: Sequence[ClientQuotaAlteration],
                            **options: Any) -> dict[ClientQuotaEntity, Future]:
        return self._per_key([a.entity for a in alterations], self._admin.alter_client_quotas(alterations, **options))

    # ---- closing ----------------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Close the connections and stop the loop thread (calls still running fail)."""
        if self._thread.loop.is_closed():
            return
        bound = (self.config.request_timeout_ms / 1000 if timeout is None else timeout) + _CLOSE_MARGIN_S
        try:
            self._thread.run(self._admin.close(), bound)
        except TimeoutError:
            log.error("the admin client did not close within %.1f s; stopping its thread regardless", bound)
        finally:
            for call in list(self._calls):
                call.cancel()
            self._thread.stop()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

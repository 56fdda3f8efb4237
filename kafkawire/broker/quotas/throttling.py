"""Enforcing the client quotas: what each request costs, and how long its client is throttled.

As Kafka's quota managers do, per (user, client id) as the matching quota entity names them:

- ``producer_byte_rate`` (``ClientQuotaManager`` for Produce): the request's bytes;
- ``consumer_byte_rate`` (for Fetch): the response's bytes; a fetch over the quota is answered empty,
  its bytes not counted, as Kafka's ``KafkaApis`` answers it;
- ``request_percentage`` (``ClientRequestQuotaManager``): the broker thread's time on the request, as
  a percentage of one thread, its throttle time capped at one window;
- ``controller_mutation_rate`` (``ControllerMutationQuotaManager``, KIP-599): partitions created or
  deleted, in a token bucket; CreateTopics v6+, CreatePartitions v3+ and DeleteTopics v5+ are strict
  (a topic asked for once the bucket is empty fails with THROTTLING_QUOTA_EXCEEDED), older versions
  are permissive (done, then throttled);
- ``connection_creation_rate`` of an ip (KIP-612): new connections a second, over it refused.

The response carries the largest throttle time (KIP-219) and the connection reads nothing more from
the client until it has passed. Nothing is counted while no quota of a kind is set.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ... import messages as m
from ...messages import ApiKey
from .rates import SampledRate, TokenBucket
from .store import (CONNECTION_CREATION_RATE, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE,
                    REQUEST_PERCENTAGE, ClientQuotaStore)

__all__ = ["ClientQuotas", "MutationQuota", "STRICT_MUTATION_VERSIONS", "THROTTLED"]

THROTTLED = "The throttling quota has been exceeded."  # Kafka's message for THROTTLING_QUOTA_EXCEEDED

# The first version of each API whose client understands THROTTLING_QUOTA_EXCEEDED (KIP-599)
STRICT_MUTATION_VERSIONS: dict[int, int] = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3,
                                            ApiKey.DELETE_TOPICS: 5}
_SWEEP_S = 3600.0  # a client's sensors unused this long are dropped (Kafka's inactive sensor expiry)
_QUOTA_TYPES = ("Produce", "Fetch", "Request", "ControllerMutation")


class MutationQuota:
    """One request's controller mutations: ``admit(partitions)`` before each topic's change."""

    def __init__(self, bucket: TokenBucket | None, rate: float, strict: bool, clock: Callable[[], float]):
        self._bucket, self._rate, self.strict, self._clock = bucket, rate, strict, clock
        self.throttle_ms = 0

    def admit(self, partitions: int) -> bool:
        """Whether the change may go ahead (counted if so); False only for a strict request once the
        bucket is empty, whose throttle time is then set."""
        bucket = self._bucket
        if bucket is None:
            return True
        now = self._clock()
        if self.strict and bucket.exhausted(self._rate, now):
            self.throttle_ms = max(self.throttle_ms, bucket.throttle_ms(self._rate, now))
            return False
        bucket.record(partitions, self._rate, now)
        if not self.strict:
            self.throttle_ms = max(self.throttle_ms, bucket.throttle_ms(self._rate, now))
        return True


class ClientQuotas:
    """The broker's quota sensors over the configured quotas (``store``)."""

    def __init__(self, store: ClientQuotaStore, samples: int, window_s: float, controller_samples: int,
                 controller_window_s: float, metrics: Any = None, clock: Callable[[], float] = time.monotonic):
        self.store = store
        self.samples, self.window_s = samples, window_s
        self.controller_samples, self.controller_window_s = controller_samples, controller_window_s
        self.clock = clock
        self.metrics = metrics
        self._rates: dict[tuple[str, str, str], SampledRate] = {}  # (quota, user, client id) -> its rate
        self._buckets: dict[tuple[str, str], TokenBucket] = {}  # (user, client id) -> mutations
        self._ip_rates: dict[str, SampledRate] = {}
        self._swept = clock()
        self.enabled = self.ip_enabled = False
        store.listeners.append(self.reconfigure)
        self.reconfigure()

    def reconfigure(self) -> None:
        """A quota changed: whether any client or ip quota is set now."""
        store = self.store
        self.enabled = any(store.has(name) for name in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE,
                                                        CONTROLLER_MUTATION_RATE))
        self.ip_enabled = store.has(CONNECTION_CREATION_RATE)

    def close(self) -> None:
        if self.reconfigure in self.store.listeners:
            self.store.listeners.remove(self.reconfigure)

    # ---- byte rates and request time ----------------------------------------------------------
    def record(self, name: str, user: str, client_id: str, value: float) -> int:
        """Count ``value`` against the client's quota ``name``; the throttle time (ms) it is due."""
        found = self.store.resolve(user, client_id, name)
        if found is None:
            return 0
        bound, (tag_user, tag_client) = found
        now = self.clock()
        key = (name, tag_user, tag_client)
        rate = self._rates.get(key)
        if rate is None:
            self._sweep(now)
            rate = self._rates[key] = SampledRate(self.samples, self.window_s, now)
        rate.record(value, now)
        throttle = rate.throttle_ms(bound, now)
        if name == REQUEST_PERCENTAGE:  # Kafka caps the request quota's throttle at one window
            throttle = min(throttle, round(self.window_s * 1000))
        return throttle

    def unrecord(self, name: str, user: str, client_id: str, value: float) -> None:
        """Take back what ``record`` counted (a throttled fetch answered without its data)."""
        found = self.store.resolve(user, client_id, name)
        if found is not None:
            rate = self._rates.get((name, *found[1]))
            if rate is not None:
                rate.record(-value, self.clock())

    def throttle_response(self, api_key: int, request: Any, response: Any, user: str, client_id: str,
                          request_bytes: int, thread_seconds: float) -> tuple[Any, int]:
        """The response to send and the client's throttle time (ms): the largest of its byte rate's and
        its request time's. A throttled fetch is answered without its records, which are not counted."""
        throttles = {"Request": self.record(REQUEST_PERCENTAGE, user, client_id, thread_seconds * 100)}
        if api_key == ApiKey.PRODUCE:
            throttles["Produce"] = self.record(PRODUCER_BYTE_RATE, user, client_id, request_bytes)
        elif api_key == ApiKey.FETCH and isinstance(response, m.FetchResponse) and response.error_code == 0 \
                and not _from_follower(request):  # (replication is not a client's, as Kafka exempts it)
            size = sum(len(p.records) for t in response.responses for p in t.partitions if p.records is not None)
            throttles["Fetch"] = self.record(CONSUMER_BYTE_RATE, user, client_id, size)
            if max(throttles.values()):
                self.unrecord(CONSUMER_BYTE_RATE, user, client_id, size)
                _close_records(response)
                response = m.FetchResponse(error_code=0, session_id=response.session_id, responses=[])
        kind = max(throttles, key=throttles.__getitem__)
        if throttles[kind] and self.metrics is not None:
            self.metrics.throttled(kind, throttles[kind])
        return response, throttles[kind]

    def cap_fetch(self, request: m.FetchRequest, user: str, client_id: str) -> None:
        """A consumer's fetch asks for no more than its consumer_byte_rate allows over the windows but the
        current one (Kafka's getMaxValueInQuotaWindow)."""
        found = self.store.resolve(user, client_id, CONSUMER_BYTE_RATE)
        if found is not None and not _from_follower(request):
            request.max_bytes = min(request.max_bytes, max(int(found[0] * (self.samples - 1) * self.window_s), 1))

    # ---- controller mutations -----------------------------------------------------------------
    def mutations(self, api_key: int, version: int, user: str, client_id: str) -> MutationQuota:
        strict = version >= STRICT_MUTATION_VERSIONS[api_key]
        found = self.store.resolve(user, client_id, CONTROLLER_MUTATION_RATE) if self.enabled else None
        if found is None:
            return MutationQuota(None, 0.0, strict, self.clock)
        rate, tags = found
        bucket = self._buckets.get(tags)
        if bucket is None:
            self._sweep(self.clock())
            bucket = self._buckets[tags] = TokenBucket(rate, self.controller_samples, self.controller_window_s,
                                                       self.clock())
        return MutationQuota(bucket, rate, strict, self.clock)

    def settle(self, quota: MutationQuota) -> int:
        """The request's mutation throttle time (ms), counted in the metrics."""
        if quota.throttle_ms and self.metrics is not None:
            self.metrics.throttled("ControllerMutation", quota.throttle_ms)
        return quota.throttle_ms

    # ---- new connections by address -----------------------------------------------------------
    def admit_connection(self, host: str) -> int:
        """0 to accept a new connection from ``host``; else the ms to hold it before closing it (the
        rate over its ip quota: the refused connection is not counted, as Kafka takes it back)."""
        bound = self.store.ip_quota(host)
        if bound is None:
            return 0
        now = self.clock()
        rate = self._ip_rates.get(host)
        if rate is None:
            self._sweep(now)
            rate = self._ip_rates[host] = SampledRate(self.samples, self.window_s, now)
        rate.record(1, now)
        throttle = rate.throttle_ms(bound, now)
        if throttle:
            rate.record(-1, now)
            throttle = min(throttle, round(self.samples * self.window_s * 1000))
        return throttle

    def _sweep(self, now: float) -> None:
        """Drop the sensors of clients silent for an hour (checked at most once a minute, when a new
        sensor is made: their number stays bounded by the clients of the last hour)."""
        if now - self._swept < 60:
            return
        self._swept = now
        tables: tuple[dict[Any, Any], ...] = (self._rates, self._buckets, self._ip_rates)
        for table in tables:
            for key in [k for k, sensor in table.items() if now - sensor.last_record > _SWEEP_S]:
                del table[key]


def _close_records(response: m.FetchResponse) -> None:
    """The file slices of a fetch answered without them."""
    for topic in response.responses:
        for partition in topic.partitions:
            close = getattr(partition.records, "close", None)
            if close is not None:
                close()


def _from_follower(request: Any) -> bool:
    state = getattr(request, "replica_state", None)
    return getattr(request, "replica_id", -1) >= 0 or (state is not None and state.replica_id >= 0)

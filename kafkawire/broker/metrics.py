"""The broker's Prometheus metrics (``--metrics-port``) and its request log.

Metric names follow Kafka's JMX beans where one exists (``kafka.server:type=BrokerTopicMetrics`` as
``kafka_server_brokertopicmetrics_*``, ``kafka.network:type=RequestMetrics`` as
``kafka_network_requestmetrics_*``), so dashboards read alike. Each broker has its own registry, so
several brokers in one process (tests, a cluster) keep their figures apart.

The request log is the ``kafkawire.broker.requests`` logger (Kafka's ``kafka.request.logger``): one
INFO line per request with API, version, client, latency and error, when ``request_log`` is on.
"""
from __future__ import annotations

import logging
from typing import Any

from .. import messages

__all__ = ["BrokerMetrics", "request_log"]

request_log = logging.getLogger("kafkawire.broker.requests")

_THROTTLE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class BrokerMetrics:
    def __init__(self) -> None:
        # imported here: a broker without --metrics-port never loads it
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = registry = CollectorRegistry()
        self.bytes_in = Counter("kafka_server_brokertopicmetrics_bytes_in", "Bytes of record batches appended",
                                ["topic"], registry=registry)
        self.messages_in = Counter("kafka_server_brokertopicmetrics_messages_in", "Records appended", ["topic"],
                                   registry=registry)
        self.bytes_out = Counter("kafka_server_brokertopicmetrics_bytes_out", "Bytes of records sent to fetchers",
                                 ["topic"], registry=registry)
        self.requests = Counter("kafka_network_requestmetrics_requests", "Requests answered", ["request", "version"],
                                registry=registry)
        self.errors = Counter("kafka_network_requestmetrics_errors", "Responses with a top-level error code",
                              ["request", "error"], registry=registry)
        self.latency = Histogram("kafka_network_requestmetrics_total_time_seconds",
                                 "Time from a request read to its response ready", ["request"],
                                 buckets=_LATENCY_BUCKETS, registry=registry)
        self.connections = Gauge("kafka_server_socket_server_connections", "Open connections", ["listener"],
                                 registry=registry)
        self.fetch_cut = Counter("kafkawire_fetch_partitions_cut",
                                 "Partitions whose fetch stopped short of the data there (KIP-74)", ["limit"],
                                 registry=registry)
        self.parked_fetches = Gauge("kafkawire_fetch_parked", "Fetches waiting for MinBytes", registry=registry)
        # share groups: Kafka's ShareGroupMetrics meter, and the group coordinator's group count
        self.share_acknowledgements = Counter("kafka_server_sharegroupmetrics_record_acknowledgements",
                                              "Records acknowledged by share consumers", ["ackType"],
                                              registry=registry)
        self.group_count = Gauge("kafka_server_group_coordinator_metrics_group_count", "Groups, by protocol",
                                 ["protocol"], registry=registry)
        # client quotas (broker.quotas): the throttle times given, by the quota that set each (Kafka's
        # Produce, Fetch, Request and ControllerMutation throttle-time sensors)
        self.throttle_time = Histogram("kafka_server_quota_throttle_time_seconds",
                                       "Throttle times given to clients over a quota", ["quota_type"],
                                       buckets=_THROTTLE_BUCKETS, registry=registry)
        self._server: Any = None  # prometheus_client's WSGI server, once serving

    def serve(self, port: int, host: str = "") -> int:
        """Serve ``/metrics`` on ``port`` (0: any free one); returns the port bound."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=host or "0.0.0.0", registry=self.registry)
        self._server = server
        return server.server_address[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def throttled(self, quota_type: str, throttle_ms: int) -> None:
        self.throttle_time.labels(quota_type).observe(throttle_ms / 1000)

    def request_done(self, api_key: int, version: int, seconds: float, error: int | None) -> None:
        name = _api_name(api_key)
        self.requests.labels(name, str(version)).inc()
        self.latency.labels(name).observe(seconds)
        if error:
            self.errors.labels(name, str(error)).inc()


_NAMES: dict[int, str] = {}


def _api_name(api_key: int) -> str:
    name = _NAMES.get(api_key)
    if name is None:
        try:
            name = messages.api(api_key).name
        except (KeyError, ValueError):
            name = f"api-{api_key}"
        _NAMES[api_key] = name
    return name


def top_level_error(response) -> int | None:
    """The response's top-level error code, when its API has one."""
    return getattr(response, "error_code", None)


def log_request(api_key: int, version: int, client_id: str, host: str, seconds: float, error: int | None) -> None:
    request_log.info("%s v%d from %s (%s) in %.2f ms%s", _api_name(api_key), version, client_id or "-", host,
                     seconds * 1000, f": error {error}" if error else "")

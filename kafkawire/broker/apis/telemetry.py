"""GetTelemetrySubscriptions and PushTelemetry (KIP-714) over ``broker.client_metrics``: any client may
ask and push (Kafka authorizes neither); the latest metrics of each client instance are kept."""
from __future__ import annotations

from ... import messages as m
from ..client_metrics import ACCEPTED_COMPRESSION_TYPES, ClientMetrics
from .state import BrokerState, RequestContext

__all__ = ["TelemetryApis"]


class TelemetryApis:
    def __init__(self, state: BrokerState, metrics: ClientMetrics):
        self.state = state
        self.metrics = metrics

    async def get_telemetry_subscriptions(self, request: m.GetTelemetrySubscriptionsRequest, version: int,
                                          context: RequestContext) -> m.GetTelemetrySubscriptionsResponse:
        error, instance = self.metrics.get_subscription(request.client_instance_id, _attributes(context))
        if error:  # an error response carries no subscription
            return m.GetTelemetrySubscriptionsResponse(error_code=error, client_instance_id=request.client_instance_id,
                                                       accepted_compression_types=[], requested_metrics=[])
        return m.GetTelemetrySubscriptionsResponse(
            error_code=0, client_instance_id=instance.instance_id, subscription_id=instance.subscription_id,
            accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES), push_interval_ms=instance.push_interval_ms,
            telemetry_max_bytes=self.metrics.telemetry_max_bytes, delta_temporality=True,
            requested_metrics=list(instance.metrics))

    async def push_telemetry(self, request: m.PushTelemetryRequest, version: int,
                             context: RequestContext) -> m.PushTelemetryResponse:
        error = self.metrics.push(request.client_instance_id, _attributes(context), request.subscription_id,
                                  request.terminating, request.compression_type, bytes(request.metrics))
        return m.PushTelemetryResponse(error_code=error)


def _attributes(context: RequestContext) -> dict[str, str]:
    """What a subscription's ``match`` selectors are matched against (``ClientMetricsInstanceMetadata``)."""
    return {"client_id": context.client_id or "", "client_source_address": context.client_host or "",
            "client_software_name": context.client_software_name, "client_software_version":
            context.client_software_version}

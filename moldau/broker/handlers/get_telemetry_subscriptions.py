"""GetTelemetrySubscriptions (key 71), v0: which metrics a client should push, and how often
(KIP-714).

Not listed in ApiVersions, as Kafka lists it only when a telemetry plugin is configured; a client
that calls it anyway gets Kafka's answer: the metrics and interval of the client-metrics
subscriptions that match it (`moldau.broker.client_telemetry`).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, advertised=False)
def handle_get_telemetry_subscriptions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    subscription = ctx.node.client_telemetry.get_subscriptions(
        request.client_instance_id, ctx.client_description()
    )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "client_instance_id": subscription.client_instance_id,
        "subscription_id": subscription.subscription_id,
        "accepted_compression_types": list(subscription.accepted_compression_types),
        "push_interval": subscription.push_interval_ms,
        "telemetry_max_bytes": subscription.telemetry_max_bytes,
        "delta_temporality": subscription.delta_temporality,
        "requested_metrics": list(subscription.requested_metrics),
    }

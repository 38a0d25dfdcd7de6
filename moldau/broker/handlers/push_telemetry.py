"""PushTelemetry (key 72), v0: a client's metrics, pushed every push interval (KIP-714).

Not listed in ApiVersions, as Kafka lists it only when a telemetry plugin is configured; a push
that arrives anyway is checked as Kafka checks it and, when accepted, dropped: there is no plugin
to export it to (`moldau.broker.client_telemetry`).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.PUSH_TELEMETRY, 0, 0, advertised=False)
def handle_push_telemetry(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.node.client_telemetry.push(
        request.client_instance_id,
        subscription_id=int(request.subscription_id),
        terminating=bool(request.terminating),
        compression_type=int(request.compression_type),
        metrics=request.metrics or b"",
        client=ctx.client_description(),
    )
    return {"throttle_time": 0, "error_code": ErrorCode.none}

"""ControllerRegistration (key 70) v0, on the controller listener (KIP-919): a controller tells
the active controller its listeners and supported features, which it writes as a
RegisterControllerRecord (`cluster_control.register_controller`).

A controller that is not the active one answers NOT_CONTROLLER and the sender asks again of
the one the quorum names next; UNSUPPORTED_VERSION before metadata.version 3.7-IV0 or for a
controller that does not support a finalized feature level. Moldau's controllers send it from
`broker/controller_registration.py`.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import CONTROLLER, RequestContext, handler
from moldau.controller.operations import ControllerRegistration
from moldau.metadata.acls import AclOperation
from moldau.metadata.records import ZERO_UUID, BrokerEndpoint
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.CONTROLLER_REGISTRATION, 0, 0, scopes=(CONTROLLER,))
async def handle_controller_registration(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.CLUSTER_ACTION)
    registration = ControllerRegistration(
        controller_id=int(request.controller_id),
        incarnation_id=request.incarnation_id or ZERO_UUID,
        endpoints=[
            BrokerEndpoint(
                name=listener.name,
                host=listener.host,
                port=int(listener.port),
                security_protocol=int(listener.security_protocol),
            )
            for listener in request.listeners
        ],
        features={
            feature.name: (int(feature.min_supported_version), int(feature.max_supported_version))
            for feature in request.features
        },
        zk_migration_ready=bool(request.zk_migration_ready),
    )
    try:
        await ctx.controller.register_controller(registration)
    except KafkaError as error:
        return {"throttle_time": 0, "error_code": error.code, "error_message": error.message}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None}

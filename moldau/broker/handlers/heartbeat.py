"""Heartbeat (key 12), v0-4: a classic member says it is alive, and learns of rebalances.

v1 adds throttle time; v2 same; v3 group_instance_id; v4 flexible. Errors: UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS (rejoin now).

The principal needs READ on the group (GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.HEARTBEAT, 0, 4)
async def handle_heartbeat(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require(
        AclOperation.READ,
        ResourceType.GROUP,
        request.group_id,
        ErrorCode.group_authorization_failed,
    )
    runtime = ctx.node.group_coordinator
    if runtime is None:
        raise KafkaError(ErrorCode.coordinator_not_available)
    response = await runtime.heartbeat(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    return {"throttle_time": 0, **response}

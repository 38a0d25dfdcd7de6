"""SyncGroup (key 14), v0-5: the leader hands out assignments; every member receives its own.

v1 adds throttle time; v2 same; v3 group_instance_id; v4 flexible; v5 protocol_type and
protocol_name in both directions (checked against the group's). A follower's request is parked
until the leader's arrives; the assignment is answered once it is durable.

The principal needs READ on the group (GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.net.deferred import Deferred, settled_by
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.SYNC_GROUP, 0, 5)
async def handle_sync_group(ctx: RequestContext, request: Any) -> dict[str, Any] | Deferred:
    ctx.require(
        AclOperation.READ,
        ResourceType.GROUP,
        request.group_id,
        ErrorCode.group_authorization_failed,
    )
    runtime = ctx.node.group_coordinator
    if runtime is None:
        raise KafkaError(ErrorCode.coordinator_not_available)
    outcome = await runtime.apply_sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments={entry.member_id: entry.assignment for entry in request.assignments},
    )
    if isinstance(outcome, asyncio.Future):  # a follower waits for the leader's assignment
        return settled_by(outcome, _answer)
    return _answer(outcome)


def _answer(response: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time": 0, **response}

"""LeaveGroup (key 13), v0-5: members leave a classic group, which then rebalances.

v0-2 name one member_id (v1 adds throttle time); v3 batches members by member id and
group_instance_id (KIP-345), with an error per member; v4 flexible; v5 a reason per member.

The principal needs READ on the group (GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.LEAVE_GROUP, 0, 5)
async def handle_leave_group(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require(
        AclOperation.READ,
        ResourceType.GROUP,
        request.group_id,
        ErrorCode.group_authorization_failed,
    )
    runtime = ctx.node.group_coordinator
    if runtime is None:
        raise KafkaError(ErrorCode.coordinator_not_available)
    if ctx.api_version < 3:
        members: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        members = [(member.member_id, member.group_instance_id) for member in request.members]
    response = await runtime.leave_group(group_id=request.group_id, members=members)
    error = response["error_code"]
    if ctx.api_version < 3 and error == ErrorCode.none and response["members"]:
        error = response["members"][0]["error_code"]
    return {"throttle_time": 0, "error_code": error, "members": response["members"]}

"""DeleteGroups (key 42), v0-2: delete empty groups and their committed offsets.

v1 same; v2 flexible. Per group: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP while it has members,
NOT_COORDINATOR if another node coordinates it; GROUP_AUTHORIZATION_FAILED (listed after the
others, as Kafka lists it) if the principal may not DELETE it. A deleted share group's
share-partitions on this broker are dropped (other brokers keep theirs until they lose the
partitions' leadership: the state is not durable yet, `moldau.share.manager`).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.DELETE_GROUPS, 0, 2)
async def handle_delete_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    allowed: list[str] = []
    denied: list[str] = []
    for group_id in request.groups_names:
        may_delete = ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, group_id)
        (allowed if may_delete else denied).append(group_id)
    runtime = ctx.node.group_coordinator
    if runtime is None:
        results = [
            {"group_id": group_id, "error_code": ErrorCode.coordinator_not_available}
            for group_id in allowed
        ]
    else:
        results = await runtime.delete_groups(allowed) if allowed else []
        share_partitions = ctx.node.share_partitions
        if share_partitions is not None:  # a deleted share group's state here goes too
            for result in results:
                if result["error_code"] == ErrorCode.none:
                    share_partitions.forget_group(str(result["group_id"]))
    results += [
        {"group_id": group_id, "error_code": ErrorCode.group_authorization_failed}
        for group_id in denied
    ]
    return {"throttle_time": 0, "results": results}

"""DeleteGroups (key 42), v0-2: delete empty groups and their committed offsets.

v1 same; v2 flexible. Per group: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP while it has members,
NOT_COORDINATOR if another node coordinates it.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.DELETE_GROUPS, 0, 2)
async def handle_delete_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.group_coordinator
    if runtime is None:
        results = [
            {"group_id": group_id, "error_code": ErrorCode.coordinator_not_available}
            for group_id in request.groups_names
        ]
    else:
        results = await runtime.delete_groups(list(request.groups_names))
    return {"throttle_time": 0, "results": results}

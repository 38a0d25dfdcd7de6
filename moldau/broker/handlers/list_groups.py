"""ListGroups (key 16), v0-5: every group this node coordinates.

v1 adds throttle time; v2 same; v3 flexible; v4 states_filter (case-insensitive, KIP-518); v5
types_filter ("classic", "consumer") and group_type in the response (KIP-848).

A principal that may DESCRIBE the cluster sees every group; any other only the groups it may
DESCRIBE, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.LIST_GROUPS, 0, 5)
def handle_list_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.group_coordinator
    if runtime is None:
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_not_available, "groups": []}
    answer: dict[str, Any] = runtime.list_groups(
        states_filter=list(getattr(request, "states_filter", ()) or ()),
        types_filter=list(getattr(request, "types_filter", ()) or ()),
    )
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):
        answer["groups"] = [
            group
            for group in answer["groups"]
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group["group_id"])
        ]
    return {"throttle_time": 0, **answer}

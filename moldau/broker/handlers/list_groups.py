"""ListGroups (key 16), v0-5: every group this node coordinates.

v1 adds throttle time; v2 same; v3 flexible; v4 states_filter (case-insensitive, KIP-518); v5
types_filter ("classic", "consumer") and group_type in the response (KIP-848).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
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
    return {"throttle_time": 0, **answer}

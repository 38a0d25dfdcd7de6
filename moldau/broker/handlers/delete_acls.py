"""DeleteAcls (key 31), v1-3: remove the ACL bindings matching each filter.

v1 adds the resource pattern type filter (KIP-290); v2 is flexible; v3 adds the user group
resource type (KIP-1071). The principal needs ALTER on the cluster. Forwarded to the active
controller (KIP-590), which answers each filter with the ACLs it matched and removes them all
(`moldau.controller.acl_control`). Without an authorizer Kafka answers every filter with
SECURITY_DISABLED, "No Authorizer is configured." and no matching ACLs; so does this handler.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._acl_wire import binding_fields, filter_of
from moldau.broker.handlers.create_acls import _refusal
from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.DELETE_ACLS, 1, 3, forward=True)
async def handle_delete_acls(ctx: RequestContext, request: Any) -> dict[str, Any]:
    refusal = _refusal(ctx)
    if refusal is not None:
        return {
            "throttle_time": 0,
            "filter_results": [{**refusal, "matching_acls": []} for _ in request.filters],
        }
    results = await ctx.controller.delete_acls([filter_of(f) for f in request.filters])
    return {
        "throttle_time": 0,
        "filter_results": [
            {
                "error_code": result.error_code,
                "error_message": result.error_message,
                "matching_acls": [
                    {"error_code": ErrorCode.none, "error_message": None, **binding_fields(b)}
                    for b in result.matching
                ],
            }
            for result in results
        ],
    }

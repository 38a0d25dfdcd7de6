"""CreateAcls (key 30), v1-3: add ACL bindings.

v1 adds the resource pattern type (KIP-290); v2 is flexible; v3 adds the user group resource
type (KIP-1071). The principal needs ALTER on the cluster. A broker that is not the active
controller forwards the request (KIP-590); the controller validates each binding as Kafka does
(INVALID_REQUEST) and writes one AccessControlEntryRecord per new ACL (an ACL that exists is
not written twice). Without an authorizer Kafka answers every creation with SECURITY_DISABLED,
"No Authorizer is configured."; so does this handler.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._acl_wire import binding_of
from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

NO_AUTHORIZER = "No Authorizer is configured."


@handler(ApiKey.CREATE_ACLS, 1, 3, forward=True)
async def handle_create_acls(ctx: RequestContext, request: Any) -> dict[str, Any]:
    refusal = _refusal(ctx)
    if refusal is not None:
        return {"throttle_time": 0, "results": [refusal for _ in request.creations]}
    results = await ctx.controller.create_acls([binding_of(c) for c in request.creations])
    return {
        "throttle_time": 0,
        "results": [
            {"error_code": result.error_code, "error_message": result.error_message}
            for result in results
        ],
    }


def _refusal(ctx: RequestContext) -> dict[str, Any] | None:
    """The answer to every item when there is no authorizer or the principal may not ALTER
    the cluster (CreateAcls and DeleteAcls have no top-level error code)."""
    if ctx.node.authorization is None:
        return {"error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER}
    if not ctx.authorized_cluster(AclOperation.ALTER):
        return {
            "error_code": ErrorCode.cluster_authorization_failed,
            "error_message": "Cluster authorization failed.",
        }
    return None

"""CreateAcls (key 30), v1-3: add ACL bindings.

v1 adds the resource pattern type (KIP-290); v2 is flexible; v3 adds the user group resource
type (KIP-1071). Without an authorizer (Moldau has none yet) Kafka answers every creation with
SECURITY_DISABLED, "No Authorizer is configured."; so does this handler.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

NO_AUTHORIZER = "No Authorizer is configured."


@handler(ApiKey.CREATE_ACLS, 1, 3)
def handle_create_acls(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "results": [
            {"error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER}
            for _ in request.creations
        ],
    }

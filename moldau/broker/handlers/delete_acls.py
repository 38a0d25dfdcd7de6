"""DeleteAcls (key 31), v1-3: remove the ACL bindings matching each filter.

v1 adds the resource pattern type filter (KIP-290); v2 is flexible; v3 adds the user group
resource type (KIP-1071). Without an authorizer (Moldau has none yet) Kafka answers every
filter with SECURITY_DISABLED, "No Authorizer is configured." and no matching ACLs; so does
this handler.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers.create_acls import NO_AUTHORIZER
from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.DELETE_ACLS, 1, 3)
def handle_delete_acls(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "filter_results": [
            {
                "error_code": ErrorCode.security_disabled,
                "error_message": NO_AUTHORIZER,
                "matching_acls": [],
            }
            for _ in request.filters
        ],
    }

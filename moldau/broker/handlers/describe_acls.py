"""DescribeAcls (key 29), v1-3: list the ACLs that match a filter.

v1 adds the resource pattern type filter (KIP-290); v2 is flexible; v3 adds the user group
resource type (KIP-1071, same layout). Moldau has no authorizer (`authorizer.class.name` is not
acted on), so it answers as Kafka's broker does without one: SECURITY_DISABLED with
"No Authorizer is configured on the broker" and no resources.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

NO_AUTHORIZER_ON_BROKER = "No Authorizer is configured on the broker"


@handler(ApiKey.DESCRIBE_ACLS, 1, 3)
def handle_describe_acls(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.security_disabled,
        "error_message": NO_AUTHORIZER_ON_BROKER,
        "resources": [],
    }

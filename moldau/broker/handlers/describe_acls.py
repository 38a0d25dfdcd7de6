"""DescribeAcls (key 29), v1-3: list the ACLs that match a filter.

v1 adds the resource pattern type filter (KIP-290); v2 is flexible; v3 adds the user group
resource type (KIP-1071, same layout). Answered from this broker's metadata image; the principal
needs DESCRIBE on the cluster. ACLs are grouped by resource pattern, as Kafka groups them.
Without an authorizer Kafka's broker answers SECURITY_DISABLED with "No Authorizer is configured
on the broker" and no resources; so does this handler.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._acl_wire import filter_of
from moldau.broker.registry import RequestContext, handler
from moldau.controller.acl_control import describe_acls
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError

NO_AUTHORIZER_ON_BROKER = "No Authorizer is configured on the broker"


@handler(ApiKey.DESCRIBE_ACLS, 1, 3)
def handle_describe_acls(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if ctx.node.authorization is None:
        raise KafkaError(ErrorCode.security_disabled, NO_AUTHORIZER_ON_BROKER)
    ctx.require_cluster(AclOperation.DESCRIBE)
    acl_filter = filter_of(request)
    invalid = acl_filter.is_invalid()
    if invalid is not None:
        raise KafkaError(ErrorCode.invalid_request, invalid)
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for binding in describe_acls(ctx.node.metadata_image, acl_filter):
        key = (binding.resource_type, binding.resource_name, binding.pattern_type)
        resources.setdefault(key, []).append(
            {
                "principal": binding.principal,
                "host": binding.host,
                "operation": binding.operation,
                "permission_type": binding.permission,
            }
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "resources": [
            {"resource_type": rtype, "resource_name": name, "pattern_type": pattern, "acls": acls}
            for (rtype, name, pattern), acls in resources.items()
        ],
    }

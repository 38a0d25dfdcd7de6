"""DescribeClientQuotas (key 48), v0-1: the client quotas matching a filter (KIP-546).

v1 is flexible. Each component matches an entity type by exact name (0), its default entity
(1) or any name (2); `strict` leaves out entities with further types. A malformed filter is
INVALID_REQUEST and an unknown entity type UNSUPPORTED_VERSION, with no entries. The quotas are
what AlterClientQuotas stored; Moldau does not enforce them yet.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.controller.operations import ClientQuotaFilter
from moldau.controller.quota_control import describe_client_quotas
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1)
def handle_describe_client_quotas(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.DESCRIBE_CONFIGS)
    components = [
        ClientQuotaFilter(entity_type=c.entity_type, match_type=int(c.match_type), match=c.match)
        for c in request.components
    ]
    try:
        matches = describe_client_quotas(
            ctx.node.metadata_image, components, strict=bool(request.strict)
        )
    except KafkaError as error:
        return {
            "throttle_time": 0,
            "error_code": error.code,
            "error_message": error.message,
            "entries": None,
        }
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "entries": [
            {
                "entity": [
                    {"entity_type": entity_type, "entity_name": name}
                    for entity_type, name in entity
                ],
                "values": [{"key": key, "value": value} for key, value in sorted(quotas.items())],
            }
            for entity, quotas in matches
        ],
    }

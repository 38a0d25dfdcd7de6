"""AlterClientQuotas (key 49), v0-1: set or remove client quotas (KIP-546).

v1 is flexible. Quotas are kept in the metadata log (ClientQuotaRecord) and served back by
DescribeClientQuotas, but Moldau does not enforce them yet: no request is throttled. Validation
is Kafka's: entity types "user", "client-id" (alone or together) or "ip" (alone); the keys
producer_byte_rate, consumer_byte_rate (whole numbers), request_percentage and
controller_mutation_rate, or connection_creation_rate for ip; anything else is INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.controller.operations import ClientQuotaAlteration, ClientQuotaOp, ClientQuotaResult
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, forward=True)
async def handle_alter_client_quotas(ctx: RequestContext, request: Any) -> dict[str, Any]:
    alterations = [
        ClientQuotaAlteration(
            entity=[(part.entity_type, part.entity_name) for part in entry.entity],
            ops=[
                ClientQuotaOp(key=op.key, value=float(op.value), remove=bool(op.remove))
                for op in entry.ops
            ],
        )
        for entry in request.entries
    ]
    if ctx.authorized_cluster(AclOperation.ALTER_CONFIGS):
        results = await ctx.controller.alter_client_quotas(
            alterations, validate_only=bool(request.validate_only)
        )
    else:  # (no top-level error code: each entry says it)
        results = [
            ClientQuotaResult(
                entity=alteration.entity,
                error_code=ErrorCode.cluster_authorization_failed,
                error_message="Cluster authorization failed.",
            )
            for alteration in alterations
        ]
    return {
        "throttle_time": 0,
        "entries": [
            {
                "error_code": result.error_code,
                "error_message": result.error_message,
                "entity": [
                    {"entity_type": entity_type, "entity_name": name}
                    for entity_type, name in result.entity
                ],
            }
            for result in results
        ],
    }

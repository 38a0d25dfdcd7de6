"""AlterConfigs (key 33), v0-2: replace the dynamic configs of topics or brokers (legacy API).

v1 is v0 (throttling change); v2 is flexible. Each resource's dynamic configs become exactly
the given set: keys left out are removed (Kafka's semantics, which IncrementalAlterConfigs
fixed). Errors per resource: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from moldau.broker.handlers._authorized import (
    config_resource_denial,
    denial_message,
    for_authorized,
)
from moldau.broker.registry import RequestContext, handler
from moldau.controller.operations import AlterConfigsResource, ConfigResource, ConfigResult
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey


@handler(ApiKey.ALTER_CONFIGS, 0, 2, forward=True)
async def handle_alter_configs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    resources = [
        AlterConfigsResource(
            resource=ConfigResource(
                resource_type=int(resource.resource_type), resource_name=resource.resource_name
            ),
            configs={config.name: config.value for config in resource.configs},
        )
        for resource in request.resources
    ]

    async def alter(permitted: list[AlterConfigsResource]) -> list[ConfigResult]:
        return list(
            await ctx.controller.alter_configs(permitted, validate_only=bool(request.validate_only))
        )

    def refused(resource: AlterConfigsResource) -> ConfigResult:
        answer = refusal(ctx, resource.resource)
        assert answer is not None
        return answer

    results = await for_authorized(
        resources, lambda r: refusal(ctx, r.resource) is None, alter, refused
    )
    return config_results_response(results)


def refusal(ctx: RequestContext, resource: ConfigResource) -> ConfigResult | None:
    """The answer for a resource whose configs the principal may not alter, or None."""
    denial = config_resource_denial(
        ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name
    )
    if denial is None:
        return None
    return ConfigResult(resource=resource, error_code=denial, error_message=denial_message(denial))


def config_results_response(results: Sequence[ConfigResult]) -> dict[str, Any]:
    """The response body of AlterConfigs and IncrementalAlterConfigs (same shape)."""
    return {
        "throttle_time": 0,
        "responses": [
            {
                "error_code": r.error_code,
                "error_message": r.error_message,
                "resource_type": r.resource.resource_type,
                "resource_name": r.resource.resource_name,
            }
            for r in results
        ],
    }

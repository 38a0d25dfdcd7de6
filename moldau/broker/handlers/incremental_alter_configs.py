"""IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND or SUBTRACT single configs (KIP-339).

v1 is flexible. APPEND and SUBTRACT apply to list configs only (INVALID_CONFIG otherwise).
Broker resources are named by node id or "" for the cluster-wide default. An unknown operation
code is INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers.alter_configs import config_results_response, refusal
from moldau.broker.registry import RequestContext, handler
from moldau.controller.operations import (
    AlterableConfig,
    AlterConfigOp,
    ConfigResource,
    ConfigResult,
    IncrementalAlterConfigsResource,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, forward=True)
async def handle_incremental_alter_configs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    valid: list[IncrementalAlterConfigsResource] = []
    rejected: dict[int, ConfigResult] = {}
    for index, resource in enumerate(request.resources):
        target = ConfigResource(
            resource_type=int(resource.resource_type), resource_name=resource.resource_name
        )
        refused = refusal(ctx, target)
        if refused is not None:
            rejected[index] = refused
            continue
        try:
            changes = [
                AlterableConfig(
                    name=config.name,
                    op=AlterConfigOp(int(config.config_operation)),
                    value=config.value,
                )
                for config in resource.configs
            ]
        except ValueError:
            rejected[index] = ConfigResult(
                resource=target,
                error_code=ErrorCode.invalid_request,
                error_message="Unknown config operation",
            )
            continue
        valid.append(IncrementalAlterConfigsResource(resource=target, configs=changes))
    results = iter(
        await ctx.controller.incremental_alter_configs(
            valid, validate_only=bool(request.validate_only)
        )
        if valid
        else []
    )
    ordered = [
        rejected[index] if index in rejected else next(results)
        for index in range(len(request.resources))
    ]
    return config_results_response(ordered)

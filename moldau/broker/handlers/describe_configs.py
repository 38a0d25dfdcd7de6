"""DescribeConfigs (key 32), v1-4: the configs of topics and of this broker, with their sources.

v1 adds `include_synonyms` and reports `config_source` instead of v0's is_default; v2 is v1
(throttling change); v3 adds `config_type` and, with `include_documentation`, `documentation`;
v4 is flexible. Sensitive values are null. A broker resource is this node's id (every broker
config) or "" (the cluster-wide dynamic defaults). The values and sources come from
`moldau.controller.config_description`.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._authorized import config_resource_denial, denial_message
from moldau.broker.registry import RequestContext, handler
from moldau.controller.config_description import DescribedConfig, describe_configs
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.DESCRIBE_CONFIGS, 1, 4)
def handle_describe_configs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    node = ctx.node
    image = node.metadata_image
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_documentation = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        result: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "configs": [],
        }
        keys = resource.configuration_keys
        denial = config_resource_denial(
            ctx, AclOperation.DESCRIBE_CONFIGS, int(resource.resource_type), resource.resource_name
        )
        if denial is not None:
            result["error_code"] = denial
            result["error_message"] = denial_message(denial)
            results.append(result)
            continue
        try:
            described = describe_configs(
                image,
                node.config,
                resource_type=int(resource.resource_type),
                resource_name=resource.resource_name,
                node_id=node.node_id,
                keys=None if keys is None else set(keys),
            )
        except KafkaError as exc:
            result["error_code"] = exc.code
            result["error_message"] = exc.message
        else:
            result["configs"] = [
                _entry(config, include_synonyms, include_documentation) for config in described
            ]
        results.append(result)
    return {"throttle_time": 0, "results": results}


def _entry(
    config: DescribedConfig, include_synonyms: bool, include_documentation: bool
) -> dict[str, Any]:
    return {
        "name": config.name,
        "value": config.value,
        "read_only": config.read_only,
        "config_source": config.source.value,
        "is_sensitive": config.is_sensitive,
        "synonyms": (
            [{"name": s.name, "value": s.value, "source": s.source.value} for s in config.synonyms]
            if include_synonyms
            else []
        ),
        "config_type": config.config_type,
        "documentation": config.documentation if include_documentation else None,
    }

"""ListConfigResources (key 74), v0-1: the resources that DescribeConfigs can be asked about
(KIP-1142; v0 is KIP-1000's ListClientMetricsResources).

v0 lists client-metrics resources only. v1 adds `resource_types`: an empty list means every type
the version knows (topic 2, broker 4, broker logger 8, client metrics 16, group 32); a type
outside those is answered UNSUPPORTED_VERSION with nothing listed, as Kafka's
`ListConfigResourcesRequest.supportedResourceTypes` rules. Listed, as Kafka lists them: every
topic, every unfenced broker by id, every client-metrics subscription, and every group with
configs set (share groups' `share.*`). Moldau has no broker-logger configs, so that type lists
nothing (Kafka lists each unfenced broker as a broker-logger resource too; Moldau cannot
describe those, so it does not).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation
from moldau.metadata.records import ConfigResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

_TYPES_BY_VERSION = {
    0: frozenset({ConfigResourceType.CLIENT_METRICS}),
    1: frozenset(
        {
            ConfigResourceType.TOPIC,
            ConfigResourceType.BROKER,
            ConfigResourceType.BROKER_LOGGER,
            ConfigResourceType.CLIENT_METRICS,
            ConfigResourceType.GROUP,
        }
    ),
}


@handler(ApiKey.LIST_CONFIG_RESOURCES, 0, 1)
def handle_list_config_resources(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.DESCRIBE_CONFIGS)
    supported = _TYPES_BY_VERSION[ctx.api_version]
    asked = {int(t) for t in getattr(request, "resource_types", ())} or set(supported)
    if not asked <= supported:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.unsupported_version,
            "config_resources": [],
        }
    image = ctx.node.metadata_image
    resources: list[dict[str, Any]] = []
    if ConfigResourceType.TOPIC in asked:
        resources += [
            {"resource_name": name, "resource_type": ConfigResourceType.TOPIC}
            for name in sorted(image.topics)
        ]
    if ConfigResourceType.BROKER in asked:
        resources += [
            {"resource_name": str(broker_id), "resource_type": ConfigResourceType.BROKER}
            for broker_id, broker in sorted(image.brokers.items())
            if not broker.fenced
        ]
    if ConfigResourceType.CLIENT_METRICS in asked:
        resources += [
            {"resource_name": name, "resource_type": ConfigResourceType.CLIENT_METRICS}
            for name in sorted(image.client_metrics)
        ]
    if ConfigResourceType.GROUP in asked:
        resources += [
            {"resource_name": name, "resource_type": ConfigResourceType.GROUP}
            for name in sorted(image.group_configs)
        ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "config_resources": resources}

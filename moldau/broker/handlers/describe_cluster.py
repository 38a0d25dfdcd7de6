"""DescribeCluster (key 60), v0-1: cluster id, controller and the live brokers (KIP-700).

v1 adds `endpoint_type` (KIP-919): 1 asks for brokers; 2 (controllers) is answered with
UNSUPPORTED_ENDPOINT_TYPE by a broker, as Kafka does. Each broker is shown with its endpoint on
the listener the request came in on (its first endpoint when it has none there).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

_BROKER_ENDPOINTS = 1
_NO_AUTHORIZED_OPERATIONS = -(2**31)


@handler(ApiKey.DESCRIBE_CLUSTER, 0, 1)
def handle_describe_cluster(ctx: RequestContext, request: Any) -> dict[str, Any]:
    node = ctx.node
    endpoint_type = int(getattr(request, "endpoint_type", _BROKER_ENDPOINTS))
    response: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": node.metadata_image.cluster_id,
        "controller_id": node.controller_id,
        "brokers": [],
        "cluster_authorized_operations": _NO_AUTHORIZED_OPERATIONS,
    }
    if endpoint_type != _BROKER_ENDPOINTS:
        response["error_code"] = ErrorCode.unsupported_endpoint_type
        response["error_message"] = "The request was sent to an endpoint of type BROKER"
        return response
    brokers = [
        {
            "broker_id": broker["node_id"],
            "host": broker["host"],
            "port": broker["port"],
            "rack": broker["rack"],
        }
        for broker in node.broker_endpoints(ctx.listener_name)
    ]
    response["brokers"] = brokers
    return response

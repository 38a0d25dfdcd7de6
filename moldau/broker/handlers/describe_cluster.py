"""DescribeCluster (key 60), v0-2: cluster id, controller and brokers (KIP-700, KIP-919, KIP-1073).

v1 adds `endpoint_type` (KIP-919): 1 brokers, 2 controllers. A broker listener answers 1 with the
live brokers and the broker this request reached as the controller (Kafka names a live broker;
see `Node.controller_id`); a controller listener answers 2 with the voters' controller endpoints
and the quorum's leader as the controller, which is how Kafka's admin clients find controllers
given `--bootstrap-controller`. Each asks for the other type gets UNSUPPORTED_ENDPOINT_TYPE, as
in Kafka. v2 adds `include_fenced_brokers` and each broker's `is_fenced` (KIP-1073). Brokers are
shown with their endpoint on the listener the request came in on (their first one when they
have none there).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import BROKER, CONTROLLER, RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.raft.voter_set import KRAFT_VERSION_DYNAMIC

BROKER_ENDPOINTS = 1
CONTROLLER_ENDPOINTS = 2
_NO_AUTHORIZED_OPERATIONS = -(2**31)


@handler(ApiKey.DESCRIBE_CLUSTER, 0, 2, scopes=(BROKER, CONTROLLER))
def handle_describe_cluster(ctx: RequestContext, request: Any) -> dict[str, Any]:
    node = ctx.node
    endpoint_type = int(getattr(request, "endpoint_type", BROKER_ENDPOINTS))
    served = CONTROLLER_ENDPOINTS if ctx.scope == CONTROLLER else BROKER_ENDPOINTS
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
    if endpoint_type != served:
        kind = "CONTROLLER" if served == CONTROLLER_ENDPOINTS else "BROKER"
        response["error_code"] = ErrorCode.unsupported_endpoint_type
        response["error_message"] = f"The request was sent to an endpoint of type {kind}"
        return response
    if served == CONTROLLER_ENDPOINTS:
        leader_id = node.controller.leader_id
        response["controller_id"] = leader_id if leader_id is not None else -1
        response["brokers"] = [
            {"broker_id": node_id, "host": host, "port": port, "rack": None}
            for node_id, host, port in _controller_endpoints(node)
        ]
        return response
    include_fenced = bool(getattr(request, "include_fenced_brokers", False))
    for broker in sorted(node.metadata_image.brokers.values(), key=lambda b: b.broker_id):
        if broker.fenced and not include_fenced:
            continue
        endpoint = broker.endpoint(ctx.listener_name) or (
            broker.endpoints[0] if broker.endpoints else None
        )
        if endpoint is None:
            continue
        response["brokers"].append(
            {
                "broker_id": broker.broker_id,
                "host": endpoint.host,
                "port": endpoint.port,
                "rack": broker.rack,
                "is_fenced": broker.fenced,
            }
        )
    return response


def _controller_endpoints(node: Any) -> list[tuple[int, str, int]]:
    """The voters' controller listeners: configured (static voters), or as the voter set in
    the metadata log names them (dynamic voters, KIP-853)."""
    quorum = node.controller.describe_quorum()
    if quorum.kraft_version < KRAFT_VERSION_DYNAMIC:
        return [(voter.node_id, voter.host, voter.port) for voter in node.layout.voters]
    return [
        (voter.node_id, voter.endpoints[0].host, voter.endpoints[0].port)
        for voter in quorum.voter_nodes
        if voter.endpoints
    ]

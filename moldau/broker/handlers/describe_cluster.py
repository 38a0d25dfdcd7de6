"""DescribeCluster (key 60), v0-2: cluster id, controller and brokers (KIP-700, KIP-919, KIP-1073).

v1 adds `endpoint_type` (KIP-919): 1 brokers, 2 controllers. A broker listener answers 1 with the
live brokers and the broker this request reached as the controller (Kafka names a live broker;
see `Node.controller_id`); a controller listener answers 2 with the registered controllers
(ControllerRegistration, `image.controllers`) that have an endpoint on the listener the request
came in on, and the quorum's leader as the controller, which is how Kafka's admin clients find
controllers given `--bootstrap-controller`. As Kafka's `computeDescribeClusterResponse`: a
controller id not among the nodes listed is answered -1 (a leader not registered yet); an
endpoint type that is neither is UNSUPPORTED_ENDPOINT_TYPE, the other type MISMATCHED_ENDPOINT_TYPE
(INVALID_REQUEST for both at v0), in an answer with nothing else, but for one thing: a controller
listener asked for brokers lists the live brokers there (Moldau's; Kafka lists none, and clients
read nothing of an error answer), so a client pointed at it can say where the brokers are. v2 adds `include_fenced_brokers`
and each broker's `is_fenced` (KIP-1073). Brokers are shown with their endpoint on the listener the
request came in on (their first one when they have none there).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.client_view import endpoint_on
from moldau.broker.registry import BROKER, CONTROLLER, RequestContext, handler
from moldau.metadata.acls import CLUSTER_NAME, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

BROKER_ENDPOINTS = 1
CONTROLLER_ENDPOINTS = 2
_ENDPOINT_TYPE_NAMES = {BROKER_ENDPOINTS: "BROKER", CONTROLLER_ENDPOINTS: "CONTROLLER"}
_NO_AUTHORIZED_OPERATIONS = -(2**31)


@handler(ApiKey.DESCRIBE_CLUSTER, 0, 2, scopes=(BROKER, CONTROLLER))
def handle_describe_cluster(ctx: RequestContext, request: Any) -> dict[str, Any]:
    node = ctx.node
    endpoint_type = int(getattr(request, "endpoint_type", BROKER_ENDPOINTS))
    served = CONTROLLER_ENDPOINTS if ctx.scope == CONTROLLER else BROKER_ENDPOINTS
    refusal = _refusal(ctx.api_version, endpoint_type, served)
    if refusal is not None:
        if served == CONTROLLER_ENDPOINTS and endpoint_type == BROKER_ENDPOINTS:
            refusal["brokers"] = _brokers(node, ctx.listener_name, include_fenced=False)
        return refusal
    if served == CONTROLLER_ENDPOINTS:
        brokers = _controllers(node, ctx.listener_name)
        leader_id = ctx.controller.leader_id
        controller_id = leader_id if leader_id is not None else -1
    else:
        brokers = _brokers(
            node,
            ctx.listener_name,
            include_fenced=bool(getattr(request, "include_fenced_brokers", False)),
        )
        controller_id = node.controller_id
    if not any(broker["broker_id"] == controller_id for broker in brokers):
        controller_id = -1  # (Kafka's rule: never name a node the answer does not list)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": served,
        "cluster_id": node.metadata_image.cluster_id,
        "controller_id": controller_id,
        "brokers": brokers,
        "cluster_authorized_operations": (
            ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            if getattr(request, "include_cluster_authorized_operations", False)
            else _NO_AUTHORIZED_OPERATIONS
        ),
    }


def _refusal(api_version: int, endpoint_type: int, served: int) -> dict[str, Any] | None:
    if endpoint_type not in _ENDPOINT_TYPE_NAMES:
        code = ErrorCode.unsupported_endpoint_type
        message = f"Unsupported endpoint type {endpoint_type}"
    elif endpoint_type != served:
        code = ErrorCode.mismatched_endpoint_type
        message = (
            f"The request was sent to an endpoint of type {_ENDPOINT_TYPE_NAMES[served]}, "
            f"but we wanted an endpoint of type {_ENDPOINT_TYPE_NAMES[endpoint_type]}"
        )
    else:
        return None
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.invalid_request if api_version == 0 else code,
        "error_message": message,
        "endpoint_type": BROKER_ENDPOINTS,
        "cluster_id": "",
        "controller_id": -1,
        "brokers": [],
        "cluster_authorized_operations": _NO_AUTHORIZED_OPERATIONS,
    }


def _controllers(node: Any, listener_name: str) -> list[dict[str, Any]]:
    """The registered controllers with an endpoint on `listener_name`, by id (Kafka's
    ControllerRegistrationsPublisher.describeClusterControllers)."""
    controllers = []
    for controller_id, controller in sorted(node.metadata_image.controllers.items()):
        endpoint = controller.endpoint(listener_name)
        if endpoint is not None:
            controllers.append(
                {
                    "broker_id": controller_id,
                    "host": endpoint.host,
                    "port": endpoint.port,
                    "rack": None,
                }
            )
    return controllers


def _brokers(node: Any, listener_name: str, *, include_fenced: bool) -> list[dict[str, Any]]:
    brokers = []
    for broker in sorted(node.metadata_image.brokers.values(), key=lambda b: b.broker_id):
        if broker.fenced and not include_fenced:
            continue
        endpoint = endpoint_on(broker, listener_name)
        if endpoint is None:
            continue
        brokers.append(
            {
                "broker_id": broker.broker_id,
                "host": endpoint.host,
                "port": endpoint.port,
                "rack": broker.rack,
                "is_fenced": broker.fenced,
            }
        )
    return brokers

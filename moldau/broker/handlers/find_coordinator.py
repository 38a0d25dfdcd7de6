"""FindCoordinator (key 10), v0-6: which node coordinates a group (or a transactional id).

v1 adds key_type (0 group, 1 transaction) and error_message; v2 same; v3 flexible; v4 batches
keys (`coordinator_keys` in, `coordinators` out, top-level fields gone); v5-6 only allow new
error codes. A node answers for the `__consumer_offsets` partitions it leads; a single node leads
them all, so it names itself, with the host and port advertised for the request's listener.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

GROUP_KEY = 0
TRANSACTION_KEY = 1


def _own_endpoint(ctx: RequestContext) -> tuple[str, int]:
    node = ctx.node
    for broker in node.broker_endpoints(ctx.listener_name):
        if broker["node_id"] == node.node_id:
            return broker["host"], broker["port"]
    first = node.advertised_endpoints()[0]
    return first.host, first.port


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "key": key,
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    if key_type == GROUP_KEY:
        runtime = ctx.node.group_coordinator
        available = runtime is not None and runtime.is_coordinator_for(key)
    elif key_type == TRANSACTION_KEY:
        available = getattr(ctx.node, "transaction_coordinator", None) is not None
    else:
        answer["error_code"] = ErrorCode.invalid_request
        answer["error_message"] = f"Unknown coordinator key type {key_type}"
        return answer
    if not available:
        answer["error_code"] = ErrorCode.coordinator_not_available
        return answer
    host, port = _own_endpoint(ctx)
    answer.update(node_id=ctx.node.node_id, host=host, port=port)
    return answer


@handler(ApiKey.FIND_COORDINATOR, 0, 6)
def handle_find_coordinator(ctx: RequestContext, request: Any) -> dict[str, Any]:
    key_type = getattr(request, "key_type", GROUP_KEY)
    if ctx.api_version >= 4:
        coordinators = [_coordinator(ctx, key, key_type) for key in request.coordinator_keys]
        return {"throttle_time": 0, "coordinators": coordinators}
    single = _coordinator(ctx, request.key, key_type)
    return {
        "throttle_time": 0,
        "error_code": single["error_code"],
        "error_message": single["error_message"],
        "node_id": single["node_id"],
        "host": single["host"],
        "port": single["port"],
    }

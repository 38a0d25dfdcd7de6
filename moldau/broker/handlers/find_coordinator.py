"""FindCoordinator (key 10), v0-6: which node coordinates a group (or a transactional id).

v1 adds key_type (0 group, 1 transaction) and error_message; v2 same; v3 flexible; v4 batches
keys (`coordinator_keys` in, `coordinators` out, top-level fields gone); v5-6 only allow new
error codes. A group's coordinator is the leader of its `__consumer_offsets` partition, a
transactional id's the leader of its `__transaction_state` partition, named with the host and
port advertised for the request's listener. The first request for a topic that does not
exist yet creates it (`internal_topics.py`) and is answered COORDINATOR_NOT_AVAILABLE, as
Kafka's is, until the topic's partitions have leaders. The principal needs DESCRIBE on each
group (GROUP_AUTHORIZATION_FAILED) or transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
it asks about; creating the internal topic is not checked, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.runtime import OFFSETS_TOPIC
from moldau.coordinator.transaction_runtime import TRANSACTION_STATE_TOPIC
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

GROUP_KEY = 0
TRANSACTION_KEY = 1
# What a key names, and the error (with Kafka's message) when the principal may not describe it.
_RESOURCES = {
    GROUP_KEY: (ResourceType.GROUP, ErrorCode.group_authorization_failed, "Group"),
    TRANSACTION_KEY: (
        ResourceType.TRANSACTIONAL_ID,
        ErrorCode.transactional_id_authorization_failed,
        "Transactional Id",
    ),
}


def _endpoint(ctx: RequestContext, node_id: int) -> tuple[str, int] | None:
    for broker in ctx.node.broker_endpoints(ctx.listener_name):
        if broker["node_id"] == node_id:
            return broker["host"], broker["port"]
    if node_id == ctx.node.node_id:
        first = ctx.node.advertised_endpoints()[0]
        return first.host, first.port
    return None


def _coordinator_id(ctx: RequestContext, runtime: Any, topic_name: str, key: str) -> int | None:
    """This node if it coordinates `key`, else the leader of the key's partition; None
    (COORDINATOR_NOT_AVAILABLE) if that is this node but it does not coordinate the partition
    (its log is offline, or it is still loading: see the replica manager)."""
    if runtime is None or not ctx.node.internal_topics.ready(topic_name):
        return None  # (creating the topic: clients retry COORDINATOR_NOT_AVAILABLE)
    if runtime.is_coordinator_for(key):
        return int(ctx.node.node_id)
    topic = ctx.node.metadata_image.topics.get(topic_name)
    partition = topic.partitions.get(runtime.partition_for(key)) if topic else None
    leader = getattr(partition, "leader", -1)
    if leader == ctx.node.node_id:
        return None
    return leader if leader is not None and leader >= 0 else None


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "key": key,
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    if key_type in _RESOURCES:
        resource_type, denied, what = _RESOURCES[key_type]
        if not ctx.authorized(AclOperation.DESCRIBE, resource_type, key):
            answer.update(error_code=denied, error_message=f"{what} authorization failed.")
            return answer
    coordinator_id: int | None
    if key_type == GROUP_KEY:
        coordinator_id = _coordinator_id(ctx, ctx.node.group_coordinator, OFFSETS_TOPIC, key)
    elif key_type == TRANSACTION_KEY:
        runtime = getattr(ctx.node, "transaction_coordinator", None)
        coordinator_id = _coordinator_id(ctx, runtime, TRANSACTION_STATE_TOPIC, key)
    else:
        answer["error_code"] = ErrorCode.invalid_request
        answer["error_message"] = f"Unknown coordinator key type {key_type}"
        return answer
    endpoint = None if coordinator_id is None else _endpoint(ctx, coordinator_id)
    if coordinator_id is None or endpoint is None:
        answer["error_code"] = ErrorCode.coordinator_not_available
        return answer
    answer.update(node_id=coordinator_id, host=endpoint[0], port=endpoint[1])
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

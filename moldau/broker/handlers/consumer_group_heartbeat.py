"""ConsumerGroupHeartbeat (key 68), v0-1: the KIP-848 consumer protocol's only request.

The member sends its epoch, subscription and owned partitions; the coordinator answers its
member id, new epoch and (when it changed) its assignment, computed by a server-side assignor.
v0: the coordinator generates the member id on the first heartbeat; v1: the client does
(KIP-1082) and may subscribe with a regular expression (matched against topic names here;
librdkafka sends "" for none).

The principal needs READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every topic
it subscribes by name (TOPIC_AUTHORIZATION_FAILED, the message naming those it may not).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._authorized import undescribable_topics
from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.assignors import TopicMetadata
from moldau.coordinator.consumer import ConsumerGroupHeartbeatRequest, heartbeat_error
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.adapter import millis
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


def _error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"throttle_time": 0, **heartbeat_error(code, message)}


@handler(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1)
async def handle_consumer_group_heartbeat(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(ErrorCode.group_authorization_failed)
    subscribed = request.subscribed_topic_names
    hidden = undescribable_topics(ctx, subscribed or ())
    if hidden:
        message = f"Not authorized to describe the subscribed topics {', '.join(hidden)}"
        return _error(ErrorCode.topic_authorization_failed, message)
    runtime = ctx.node.group_coordinator
    if runtime is None:
        return _error(ErrorCode.coordinator_not_available)
    image = ctx.node.metadata_image
    topics = {
        name: TopicMetadata(topic.topic_id, name, len(topic.partitions))
        for name, topic in image.topics.items()
        if not name.startswith("__")
    }
    owned = None
    if request.topic_partitions is not None:
        owned = {
            entry.topic_id: frozenset(entry.partitions)
            for entry in request.topic_partitions
            if entry.partitions
        }
    try:
        response: dict[str, Any] = await runtime.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                instance_id=request.instance_id,
                rack_id=request.rack_id,
                rebalance_timeout_ms=millis(request.rebalance_timeout),
                subscribed_topic_names=None if subscribed is None else tuple(subscribed),
                subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None) or None,
                server_assignor=request.server_assignor,
                owned_partitions=owned,
                client_id=ctx.client_id,
                client_host="/" + ctx.client_host,
            ),
            topics,
        )
    except KafkaError as error:
        return _error(error.code)
    return {"throttle_time": 0, **response}

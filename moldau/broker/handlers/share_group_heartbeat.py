"""ShareGroupHeartbeat (key 76), v1: a share group member joins (epoch 0), keeps its session,
learns its assignment, or leaves (epoch -1) (KIP-932).

v1 is the version Kafka 4.1 serves and its clients send (v0 was 4.0's early access). The member
id is the client's own. A group's own share.session.timeout.ms and share.heartbeat.interval.ms
(group configs) apply over the broker's group.share.* ones; group.share.max.size bounds it.

The principal needs READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every topic
it subscribes to (TOPIC_AUTHORIZATION_FAILED). With share.version not finalized at 1 or more the
answer is UNSUPPORTED_VERSION, as Kafka 4.1 answers while share groups are off.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._authorized import undescribable_topics
from moldau.broker.handlers._share import (
    DISABLED,
    group_settings,
    share_groups_enabled,
)
from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.assignors import TopicMetadata
from moldau.coordinator.share import ShareGroupHeartbeatRequest, share_heartbeat_error
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


def _error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"throttle_time": 0, **share_heartbeat_error(code, message)}


@handler(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1)
async def handle_share_group_heartbeat(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if not share_groups_enabled(ctx):
        return _error(ErrorCode.unsupported_version, DISABLED)
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
    topics = {
        name: TopicMetadata(topic.topic_id, name, len(topic.partitions))
        for name, topic in ctx.node.metadata_image.topics.items()
        if not name.startswith("__")
    }
    settings = group_settings(ctx, request.group_id)
    try:
        response: dict[str, Any] = await runtime.share_group_heartbeat(
            ShareGroupHeartbeatRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                rack_id=request.rack_id,
                subscribed_topic_names=None if subscribed is None else tuple(subscribed),
                client_id=ctx.client_id,
                client_host="/" + ctx.client_host,
                session_timeout_ms=settings.session_timeout_ms,
                heartbeat_interval_ms=settings.heartbeat_interval_ms,
                max_size=ctx.node.share_group_config.max_size,
            ),
            topics,
        )
    except KafkaError as error:
        return _error(error.code, error.message)
    return {"throttle_time": 0, **response}

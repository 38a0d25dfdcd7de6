"""ShareGroupDescribe (key 77), v1: share groups with their epochs, members and assignments
(KIP-932; `kafka-share-groups --describe --members`).

A group the principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED, one whose members'
assignments name a topic it may not DESCRIBE TOPIC_AUTHORIZATION_FAILED, as in Kafka; a group
that is not a share group GROUP_ID_NOT_FOUND; every group UNSUPPORTED_VERSION while
share.version is not finalized at 1 or more.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._group_describe import describe_groups, topics_of
from moldau.broker.handlers._share import DISABLED, share_groups_enabled
from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1)
def handle_share_group_describe(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.group_coordinator
    names = {topic.topic_id: name for name, topic in ctx.node.metadata_image.topics.items()}
    enabled = share_groups_enabled(ctx)

    def describe(group_id: str) -> dict[str, Any]:
        if not enabled:
            raise KafkaError(ErrorCode.unsupported_version, DISABLED)
        if runtime is None:
            raise KafkaError(ErrorCode.coordinator_not_available)
        answer: dict[str, Any] = runtime.share_group_describe(group_id, names)
        return answer

    def failed(group_id: str, error: KafkaError) -> dict[str, Any]:
        return {
            "error_code": error.code,
            "error_message": error.message,
            "group_id": group_id,
            "group_state": "",
            "group_epoch": -1,
            "assignment_epoch": -1,
            "assignor_name": "",
            "members": [],
        }

    groups = describe_groups(
        ctx,
        request.group_ids,
        include_authorized_operations=request.include_authorized_operations,
        describe=describe,
        assigned_topics=lambda answer: topics_of(answer, "assignment"),
        failed=failed,
    )
    return {"throttle_time": 0, "groups": groups}

"""ConsumerGroupDescribe (key 69), v0-1: KIP-848 groups with epochs and assignments.

v1 adds member_type (1: consumer protocol). Assignments are named by topic id and topic name.

A group the principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED, and one whose
members' assignments name a topic it may not DESCRIBE TOPIC_AUTHORIZATION_FAILED, as in Kafka.
The authorized operations are the principal's on the group when asked for.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._group_describe import describe_groups, topics_of
from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.group_coordinator
    names = {topic.topic_id: name for name, topic in ctx.node.metadata_image.topics.items()}

    def describe(group_id: str) -> dict[str, Any]:
        if runtime is None:
            raise KafkaError(ErrorCode.coordinator_not_available)
        answer: dict[str, Any] = runtime.consumer_group_describe(group_id, names)
        return answer

    def failed(group_id: str, error: KafkaError) -> dict[str, Any]:
        return {
            "error_code": error.code,
            "error_message": error.message,
            "group_id": group_id,
            "members": [],
        }

    groups = describe_groups(
        ctx,
        request.group_ids,
        include_authorized_operations=request.include_authorized_operations,
        describe=describe,
        assigned_topics=lambda answer: topics_of(answer, "assignment", "target_assignment"),
        failed=failed,
    )
    return {"throttle_time": 0, "groups": groups}

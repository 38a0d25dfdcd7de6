"""ConsumerGroupDescribe (key 69), v0-1: KIP-848 groups with epochs and assignments.

v1 adds member_type (1: consumer protocol). Assignments are named by topic id and topic name.

A group the principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED, and one whose
members' assignments name a topic it may not DESCRIBE TOPIC_AUTHORIZATION_FAILED, as in Kafka.
The authorized operations are the principal's on the group when asked for.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.group_coordinator
    names = {topic.topic_id: name for name, topic in ctx.node.metadata_image.topics.items()}
    groups = []
    for group_id in request.group_ids:
        try:
            ctx.require(
                AclOperation.DESCRIBE,
                ResourceType.GROUP,
                group_id,
                ErrorCode.group_authorization_failed,
            )
            if runtime is None:
                raise KafkaError(ErrorCode.coordinator_not_available)
            answer: dict[str, Any] = runtime.consumer_group_describe(group_id, names)
            if not all(_may_describe(ctx, topic) for topic in _assigned_topics(answer)):
                raise KafkaError(
                    ErrorCode.topic_authorization_failed,
                    "The group has described topic(s) that the client is not authorized to "
                    "describe.",
                )
        except KafkaError as error:
            answer = {
                "error_code": error.code,
                "error_message": error.message,
                "group_id": group_id,
                "members": [],
            }
        described = request.include_authorized_operations and answer["error_code"] == ErrorCode.none
        answer["authorized_operations"] = (
            ctx.authorized_operations(ResourceType.GROUP, group_id)
            if described
            else AUTHORIZED_OPERATIONS_OMITTED
        )
        groups.append(answer)
    return {"throttle_time": 0, "groups": groups}


def _assigned_topics(answer: dict[str, Any]) -> set[str]:
    """The topics of the members' current and target assignments (a deleted topic's name is
    not known: nothing to hide)."""
    return {
        entry["topic_name"]
        for member in answer.get("members", ())
        for assignment in (member["assignment"], member["target_assignment"])
        for entry in assignment["topic_partitions"]
        if entry["topic_name"]
    }


def _may_describe(ctx: RequestContext, topic: str) -> bool:
    return ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

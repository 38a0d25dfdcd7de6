"""ConsumerGroupDescribe (key 69), v0-1: KIP-848 groups with epochs and assignments.

v1 adds member_type (1: consumer protocol). Assignments are named by topic id and topic name.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
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
            if runtime is None:
                raise KafkaError(ErrorCode.coordinator_not_available)
            answer: dict[str, Any] = runtime.consumer_group_describe(group_id, names)
        except KafkaError as error:
            answer = {"error_code": error.code, "group_id": group_id, "members": []}
        answer["authorized_operations"] = AUTHORIZED_OPERATIONS_OMITTED
        groups.append(answer)
    return {"throttle_time": 0, "groups": groups}
